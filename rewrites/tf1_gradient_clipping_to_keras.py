from __future__ import annotations

from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported


class Tf1GradientClippingToKeras(ExpressionRule):
    """Clipped `compute_gradients` / `apply_gradients` become the optimizer's `global_clipnorm`, `clipnorm` or `clipvalue`.

    ## What it does
    Inside a converted model_fn, the two usual clipping idioms become a keyword of the
    Keras optimizer, and the gradient code disappears (`fit` applies the gradients):

    | TF1 | Keras optimizer keyword |
    |---|---|
    | `grads, variables = zip(*opt.compute_gradients(loss))` (or of a name bound to it); `grads, _ = tf.clip_by_global_norm(grads, c)`; `opt.apply_gradients(zip(grads, variables), global_step)` | `global_clipnorm=c` |
    | `[(tf.clip_by_norm(g, c), v) for g, v in opt.compute_gradients(loss)]` then `apply_gradients` | `clipnorm=c` |
    | `[(tf.clip_by_value(g, -c, c), v) for g, v in ... if g is not None]` then `apply_gradients` | `clipvalue=c` |

    ## Why
    Keras optimizers clip the gradients they apply; a model_fn had to do it by hand between
    computing and applying them.

    ## Fix safety
    Safe on one device. Under a distribution strategy the two clip at different moments:
    TF1 clipped each replica's gradients inside the model_fn, before the replicas' gradients
    were summed, and so does Keras 3 (its optimizer clips in `apply`, on each replica, before
    the all-reduce); Keras 2 (TensorFlow 2.15) sums them first and clips the sum. There, when
    clipping triggers on several replicas the steps differ (a tester's program: parity broke
    at step 6 on TF 2.15 and held on the newest TF), so under a strategy the conversion is
    made and reported for review (E2K103).

    ## Limitations
    Other gradient code (gradients of several losses, gradient noise, `var_list=`) is not
    converted: the model_fn is left as it was (E2K901).

    ## References
    - https://www.tensorflow.org/api_docs/python/tf/keras/optimizers/Optimizer
    """

    code = "E2K103"
    summary = "clipped compute_gradients/apply_gradients -> the Keras optimizer's global_clipnorm/clipnorm/clipvalue"
    safety = Safety.SAFE
    role = "clipping"
    targets = ("clip_by_global_norm", "clip_by_norm", "clip_by_value")

    cases = [
        Case(
            id="clip-by-global-norm",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    optimizer = tf.train.AdamOptimizer(0.01)
    gradients, variables = zip(*optimizer.compute_gradients(loss))
    gradients, _ = tf.clip_by_global_norm(gradients, 5.0)
    train_op = optimizer.apply_gradients(zip(gradients, variables), global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf

from e2k_helpers import TF1Adam


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    optimizer = TF1Adam(0.01, global_clipnorm=5.0)
    model.compile(optimizer=optimizer, loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn())
''',
        ),
        Case(
            id="clip-by-value-under-a-strategy",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    optimizer = tf.train.GradientDescentOptimizer(0.1)
    grads_and_vars = optimizer.compute_gradients(loss)
    capped = [(tf.clip_by_value(grad, -1.0, 1.0), var) for grad, var in grads_and_vars if grad is not None]
    train_op = optimizer.apply_gradients(capped, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf.estimator.RunConfig(train_distribute=tf.distribute.MirroredStrategy())
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per replica.
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(
        1 * strategy.num_replicas_in_sync
    )


# e2k: E2K103 TF1 clipped each replica's gradients before summing them, as Keras 3 does; Keras 2 (TensorFlow 2.15) clips the summed gradient, so there the steps differ on several replicas whenever clipping triggers; check with e2k parity
def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(0.1, clipvalue=1.0)
    model.compile(optimizer=optimizer, loss=tf.keras.losses.MeanSquaredError())
    return model


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model()
model.fit(input_fn())
''',
            findings=('E2K103',),
        ),
    ]

    def convert(self, call, ctx, tf):
        # The model_fn converter reads the whole idiom (compute, clip, apply) itself; a clip
        # on its own has no Keras counterpart.
        raise Unsupported("a gradient clip is converted with the apply_gradients that uses it")
