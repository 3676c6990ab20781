from __future__ import annotations

from estimator2keras._rule import Case, Diagnostic


class UnconvertedEstimatorSetting(Diagnostic):
    """An Estimator or RunConfig setting that the converted program does not carry over.

    ## What it does
    Reported, and marked with a `# e2k: E2K400` line above the code that builds the model,
    for each `Estimator(...)` or `RunConfig(...)` argument that no rule converted (for
    example `device_fn`, `protocol`). The rest of the program is
    converted. The code that computed the setting's value stays as it was: where it still
    refers to an Estimator API, it is reported too, as E2K905: TensorFlow 2.16 has no
    `tf.estimator`, and the converted program stops there until a human carries the
    setting over or removes it.

    ## Why
    These settings change where or how the program runs, or where it starts from: dropping
    them silently would change the program without a word.

    ## Fix safety
    Nothing is changed: a human decides. (`warm_start_from` is converted, or refused, by
    E2K410: never dropped.)

    ## References
    - https://www.tensorflow.org/guide/migrate/checkpoint_saver
    - https://www.tensorflow.org/guide/migrate/tensorboard
    """

    code = "E2K400"
    summary = "an Estimator/RunConfig setting the Keras program does not carry over (marked, reported)"

    cases = [
        Case(
            id="device-fn",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf.estimator.RunConfig(device_fn=lambda op: "/cpu:0")
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


# e2k: E2K400 RunConfig(device_fn=...) is not converted; the Keras program runs without it
model = build_model()
model.fit(input_fn())
''',
            findings=("E2K400",),
        ),
    ]
