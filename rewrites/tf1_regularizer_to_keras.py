from __future__ import annotations

from estimator2keras import _emit
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._translate import bind

#: TF1 regularizers: l2 is scale * tf.nn.l2_loss(w) = scale * sum(w**2) / 2.
REGULARIZERS = {
    "contrib.layers.l2_regularizer": ("l2", ("scale", "scope")),
    "contrib.layers.l1_regularizer": ("l1", ("scale", "scope")),
    "keras.regularizers.l2": (None, ()),
    "keras.regularizers.l1": (None, ()),
    "keras.regularizers.l1_l2": (None, ()),
}


class Tf1RegularizerToKeras(ExpressionRule):
    """A TF1 weight regularizer in a layer's arguments becomes the Keras regularizer adding the same penalty.

    ## What it does
    Inside a converted model_fn whose loss adds `tf.losses.get_regularization_loss()`,
    `kernel_regularizer=tf.contrib.layers.l2_regularizer(scale)` becomes
    `tf.keras.regularizers.l2(0.5 * scale)` and `l1_regularizer(scale)` becomes
    `tf.keras.regularizers.l1(scale)`; Keras regularizers already used there stay as they
    are. Keras adds the penalties to the loss itself (`model.losses`), so the
    `+ tf.losses.get_regularization_loss()` of the model_fn disappears. The TF1 way of
    taking the whole collection, a `tf.losses.*` call whose value goes unused then
    `loss = tf.losses.get_total_loss()`, is that loss plus the regularization losses (none
    with `add_regularization_losses=False`), when the collection holds one loss (fixture
    `total_loss_collection`); with several it is refused. A layer regularizer the
    Estimator's loss did not add is refused at that layer (E2K901).

    ## Why
    TF1's `l2_regularizer(scale)` is `scale * tf.nn.l2_loss(w)`, and `tf.nn.l2_loss` halves
    the sum of squares; Keras's `l2(l)` is `l * sum(w**2)`. The same penalty is `l2(scale / 2)`.

    ## Fix safety
    Safe on one device, with one condition checked by the converter: the TF1 loss included
    the regularization loss (a layer regularizer that the TF1 loss did not add did nothing
    in the Estimator, while Keras would add it; such a model_fn is left as it was, E2K901).

    Under `MirroredStrategy` the Estimator trained differently from what its code says: TF1
    builds a layer's penalty once, in replica 0's graph, so only replica 0's gradient
    carries it (the other replicas' gradient of the penalty is `None`), and after the
    optimizer's 1/N scaling the penalty acts N times weaker on N replicas, while the
    reported loss still holds it in full. No Keras regularizer reproduces that; the
    converted model applies the penalty as written, and the conversion is reported (E2K305)
    where the Estimator trained under a strategy. `e2k parity` shows the difference from
    the second step on.

    ## References
    - https://www.tensorflow.org/api_docs/python/tf/keras/regularizers
    """

    code = "E2K305"
    summary = "TF1 regularizers in layer arguments -> tf.keras.regularizers.* with the same penalty (l2 halved)"
    safety = Safety.SAFE
    role = "regularizer"
    targets = tuple(REGULARIZERS)

    cases = [
        Case("tf.contrib.layers.l2_regularizer(0.01)", "tf.keras.regularizers.l2(0.5 * 0.01)", id="l2-halved"),
        Case("tf.contrib.layers.l1_regularizer(scale=0.1)", "tf.keras.regularizers.l1(0.1)", id="l1"),
        Case("tf.keras.regularizers.l2(0.02)", "tf.keras.regularizers.l2(0.02)", id="keras-kept"),
        Case(
            id="reported-under-a-strategy",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 1, kernel_regularizer=tf.contrib.layers.l2_regularizer(0.01))
    loss = tf.losses.mean_squared_error(labels, logits) + tf.losses.get_regularization_loss()
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
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


# e2k: E2K305 under MirroredStrategy the Estimator applied layer penalties' gradients on one replica only (N times weaker on N replicas, while its reported loss held them in full); Keras applies them as written: compare with e2k parity and divide the penalty by the replica count if you need the old training
def build_model():
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(1, kernel_regularizer=tf.keras.regularizers.l2(0.5 * 0.01)),
    ])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model()
model.fit(input_fn())
''',
            findings=("E2K305",),
        ),
    ]

    def convert(self, call, ctx, tf):
        keras, signature = REGULARIZERS[ctx.call_api_path(call)]
        if keras is None:
            return call
        bound = bind(call, signature)
        scale = bound.get("scale")
        if scale is None:
            raise Unsupported("the regularizer has no scale")
        value = scale.value
        if keras == "l2":
            value = _emit.expr("0.5 * {s}", s=value)
        return _emit.expr("{tf}.keras.regularizers.{k}({v})", tf=tf, k=keras, v=value)
