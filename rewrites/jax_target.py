from __future__ import annotations

from estimator2keras._rule import Case, Diagnostic, Safety



class KerasOnJax(Diagnostic):
    """The converted program for Keras 3 on JAX (`e2k rewrite --target jax`).

    ## What it does
    With `--target jax` (or `target = "jax"` in `[tool.e2k]`), each file e2k converts is
    written for Keras 3 on the JAX backend, after its conversion for TensorFlow:

    - `tf.keras.X` is `keras.X`; in the model's code (the methods of its model, layer, loss
      and metric classes that run in the model) TensorFlow ops are `keras.ops`, dtypes are
      named by strings, and an activation given as a TensorFlow function is named
      (`activation="relu"`);
    - the input pipeline stays `tf.data`, with the TensorFlow ops of the code that runs in it
      (input_fns, a canned model's `features`): Keras 3 fits a `tf.data.Dataset` on any
      backend;
    - `strategy = tf.distribute.MirroredStrategy(devices)` is
      `keras.distribution.DataParallel` over the same devices, set as the distribution; the
      model is built where the strategy's scope was, and the batch an Estimator gave each
      replica is multiplied by the number of devices (`strategy.device_mesh.shape[0]`);
    - `KERAS_BACKEND` is set to `"jax"` before Keras is imported (`setdefault`: the
      environment may choose), and the virtual CPU devices a RunConfig's `session_config`
      asked for are JAX's (`XLA_FLAGS=--xla_force_host_platform_device_count=N`);
    - a `predict_step` e2k wrote takes the model's state and returns it, as JAX's trainer
      calls it; a canned model predicts its head's numbers (its class names are strings,
      which do not reach a JAX model).

    Reported as a conversion (`-v`, the JSON report) on each file written for JAX.

    ## Why
    Users leaving Estimator often want the multi-backend Keras 3 as well; on TensorFlow 2.16
    and later, `keras.distribution` is the data-parallel API of JAX's backend.

    ## Fix safety
    The program trains as the Estimator did, per step, as `e2k parity` checks (run the
    migrated side with JAX: see docs/jax-target.md); its kernels round otherwise than
    TensorFlow's, within the program's own noise.

    ## Limitations
    What has no backend-neutral form is left as the TensorFlow target wrote it and
    reported E2K701. Notebooks convert for TensorFlow only.
    """

    code = "E2K700"
    summary = "--target jax: the converted program for Keras 3 on JAX, with keras.distribution"
    safety = Safety.REVIEW
    keywords = ()
    cases = [
        Case(
            id="mirrored-linear",
            target="jax",
            before='''\
import tensorflow as tf
import tensorflow.compat.v1 as tf1


def _input_fn():
    return tf1.data.Dataset.from_tensor_slices(([[1.0, 1.5], [2.0, 2.5]], [[0.3], [0.5]])).batch(1)


def _model_fn(features, labels, mode):
    logits = tf1.layers.Dense(1, activation=tf.nn.relu)(features)
    loss = tf1.losses.mean_squared_error(labels=labels, predictions=logits)
    train_op = tf1.train.AdagradOptimizer(0.05).minimize(loss, global_step=tf1.train.get_global_step())
    return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf1.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
config = tf1.estimator.RunConfig(train_distribute=strategy)
estimator = tf1.estimator.Estimator(model_fn=_model_fn, config=config)
estimator.train(_input_fn)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per replica.
# - E2K700 Keras 3 on JAX: a keras.distribution.DataParallel over the strategy's devices in place of
#   its scope, keras.ops in the model's code; the input pipeline stays tf.data.
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras
import tensorflow as tf


def _input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 1.5], [2.0, 2.5]], [[0.3], [0.5]])).batch(
        1 * strategy.device_mesh.shape[0]
    )


def _build_model():
    model = keras.Sequential([keras.layers.Dense(1, activation="relu")])
    model.compile(
        optimizer=keras.optimizers.Adagrad(0.05, epsilon=0.0),
        loss=keras.losses.MeanSquaredError())
    return model


strategy = keras.distribution.DataParallel(devices=["cpu:0", "cpu:1"])
keras.distribution.set_distribution(strategy)
model = _build_model()
model.fit(_input_fn())
''',
        ),
    ]


class LeftForTensorFlow(Diagnostic):
    """Code with no form for the JAX target, left as the TensorFlow target wrote it.

    ## What it does
    With `--target jax`, what e2k cannot write for Keras 3 on JAX is left as the TensorFlow
    conversion wrote it, marked `# e2k: E2K701 why` above its statement, and reported; the
    file is converted in part:

    - a TensorFlow op in the model's code with no `keras.ops` counterpart e2k writes (its
      table is in `estimator2keras/targets/jax.py`), or one given arguments `keras.ops` has
      no place for (`tf.one_hot(..., on_value=...)`);
    - TensorFlow that acts on variables outside the model (`tf.train.Checkpoint`,
      `tf.saved_model.save`, a `tf.GradientTape` step), or a `tf.distribute` strategy other
      than a MirroredStrategy or OneDeviceStrategy bound to a name;
    - a helper of `e2k_helpers.py` that has no JAX form (a TF1 metric computed with
      `tf.sets`, the `BestExport` exporter); the import of the helpers module is marked;
    - a notebook: notebooks convert for TensorFlow only.

    ## Why
    Keras 3 on JAX computes the model with JAX: a TensorFlow op there fails when the model
    is traced, and TensorFlow's checkpoints and SavedModels do not hold JAX's variables.
    Failing here, marked, is better than a program that fails at its first step.

    ## Fix safety
    Nothing is converted for JAX at the marked line: write it with `keras.ops` (or convert
    the file with `--target tensorflow`).
    """

    code = "E2K701"
    summary = "--target jax: code with no Keras 3 form, left as the TensorFlow target wrote it"
    keywords = ()
    cases = [
        Case(
            id="op-with-no-keras-form",
            target="jax",
            before='''\
import tensorflow as tf


def model_fn(features, labels, mode):
    logits = tf.nn.l2_normalize(tf.compat.v1.layers.dense(features, 2), axis=1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0, 0.0]])).batch(1)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K700 Keras 3 on JAX: keras.ops in the model's code; the input pipeline stays tf.data.
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras
import tensorflow as tf


class Model(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)

    def call(self, features, training=False):
        # e2k: E2K701 tf.nn.l2_normalize has no keras.ops counterpart e2k writes in the model's code
        return tf.nn.l2_normalize(self.dense(features), axis=1)


def build_model():
    model = Model()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=keras.losses.MeanSquaredError())
    return model


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0, 0.0]])).batch(1)


model = build_model()
model.fit(input_fn())
''',
            findings=("E2K701",),
        ),
    ]
