from __future__ import annotations

from estimator2keras._rule import Case, Diagnostic


class UnconvertedEstimatorUse(Diagnostic):
    """An Estimator used in a way e2k does not convert; its unit is left as it was.

    ## What it does
    A unit (the Estimator, its model_fn, config, specs and input_fns) converts only when
    every use of the Estimator has a Keras counterpart. An Estimator passed to a function
    e2k cannot follow (one of another library, or of the program called from several
    places, or whose converted code would read another function's locals; a function of
    the program called there alone is handed the model, its calls converted), stored in a
    dict, trained with hooks e2k has no rule for, or with a strategy e2k does not know,
    keeps its TF1 code; a `# e2k: E2K902 <reason>` line marks where, naming the use
    (`this use (`export_everything(estimator)`)`), and the finding is reported.

    A use that only shows the Estimator converts: `estimator` alone as a notebook cell's
    value, `print(estimator)`; the Keras model is shown there instead (a "fixed" finding
    under this code says so).

    ## Why
    Converting the Estimator while some of its uses still expect an Estimator would leave a
    program that fails at run time, or trains differently.

    ## Fix safety
    Nothing is changed apart from the comment line.

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    """

    code = "E2K902"
    summary = "an Estimator use with no Keras conversion: the unit is left as it was (marked, reported)"

    cases = [
        Case(
            id="passed-elsewhere",
            before='''\
import tensorflow as tf


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
export_everything(estimator)
''',
            after='''\
import tensorflow as tf


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
# e2k: E2K902 this use (`export_everything(estimator)`) of the Estimator `estimator` is not converted
export_everything(estimator)
''',
            findings=("E2K902",),
        ),
        Case(
            id="model-path",
            before='''\
import tensorflow as tf

estimator = tf.keras.estimator.model_to_estimator(keras_model_path="model.h5")
estimator.train(lambda: tf.data.Dataset.from_tensor_slices(([[1.0]], [[1.0]])).batch(1), steps=1)
''',
            after='''\
import tensorflow as tf

# e2k: E2K902 model_to_estimator(keras_model_path=...) is not converted
estimator = tf.keras.estimator.model_to_estimator(keras_model_path="model.h5")
estimator.train(lambda: tf.data.Dataset.from_tensor_slices(([[1.0]], [[1.0]])).batch(1), steps=1)
''',
            findings=("E2K902",),
        ),
    ]
