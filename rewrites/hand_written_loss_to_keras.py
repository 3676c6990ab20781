from __future__ import annotations

from estimator2keras._rule import Case, ExpressionRule, Safety

_TUTORIAL = '''\
import tensorflow as tf

BATCH_SIZE = 8


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 16, [1] * 16)).batch(BATCH_SIZE)


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features, 3)
    loss = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE)(labels, logits)
    loss = tf.reduce_sum(loss) * (1. / BATCH_SIZE)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf.compat.v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
'''

_TUTORIAL_AFTER = '''\
import tensorflow as tf

BATCH_SIZE = 8


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 16, [1] * 16)).batch(BATCH_SIZE)


class ModelLoss(tf.keras.losses.Loss):
    """The model_fn's loss, as the Estimator computed it on each replica's batch.

    The Estimator's optimizer divided it by the number of replicas and added up their
    gradients; reduction="sum" has Keras add them up as they come."""

    def __init__(self, name="loss"):
        super().__init__(reduction="sum", name=name)

    def call(self, labels, logits):
        loss = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="none")(labels, logits)
        loss = tf.reduce_sum(loss) * (1. / BATCH_SIZE)
        return loss / tf.distribute.get_strategy().num_replicas_in_sync


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(3)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=ModelLoss())
    return model


model = build_model()
model.fit(input_fn())
'''

class HandWrittenLossToKeras(ExpressionRule):
    """A loss the model_fn computes by hand becomes a small `tf.keras.losses.Loss` subclass.

    ## What it does
    When the loss the EstimatorSpec returns is no call a loss rule maps (E2K201, E2K203) but
    an expression of TensorFlow ops on the model_fn's `labels` and the model output (sums and
    means, arithmetic with constants, Keras losses with `reduction=NONE`, `tf.nn.*` ops), its
    statements move into the `call(labels, <output>)` of a `Loss` subclass that `compile`
    takes, unchanged but for TF2 spellings:

    | TF1 model_fn | Keras |
    |---|---|
    | `loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=tf.keras.losses.Reduction.NONE)(labels, logits)` | the same statement in `call`, with `reduction="none"` |
    | `loss = tf.reduce_sum(loss) * (1. / BATCH_SIZE)` | the same statement in `call` |
    | `EstimatorSpec(loss=loss, ...)` | `return loss / tf.distribute.get_strategy().num_replicas_in_sync`; `compile(loss=ModelLoss())` |

    Inside such a loss, a TF1 loss (`tf.losses.softmax_cross_entropy(onehot, logits,
    label_smoothing=s)`) becomes `tf.reduce_mean(<its Keras loss>(..., reduction="none")(onehot,
    logits))` (TF1's mean over every element), and `tf.nn.sparse_softmax_cross_entropy_with_logits`
    / `tf.nn.softmax_cross_entropy_with_logits[_v2]` the Keras loss function of the same
    per-example values (`tf.keras.losses.sparse_categorical_crossentropy(labels, logits,
    from_logits=True)`), which take the labels in either rank Keras hands them
    (`fixtures/hand_written_loss_mixed_terms`).

    A function of the program that the loss calls keeps its place; the TF1 names in it get
    their TF2 spelling in place (`tf.log` -> `tf.math.log`, `tf.to_int64` ->
    `tf.compat.v1.to_int64`), and TF1's `tf.losses.*` / `tf.metrics.*` become
    `tf.compat.v1.losses.*` / `tf.compat.v1.metrics.*` (TF2's `tf.losses` is Keras's, a
    per-example loss where TF1's was a mean): the same functions, which the Keras loss calls
    on TF2.

    `params` (and other arguments the model_fn is given) that the loss reads become the
    Loss's own: `ModelLoss(params)`, read as `self.params` in `call`. A function of the
    module the loss calls (`loss = squared_error(labels, predictions, params["batch_size"])`)
    is called as it is from `call`, when it is TF2 code of assignments ending in one `return`
    that computes from its arguments alone; it is read with the same rules as the model_fn's
    own statements (`fixtures/hand_written_loss_helper_regression`). Such a function may branch
    on what is known before the loss runs (`fixtures/loss_helper_with_ifs`): on the mode it is
    given (`if mode == tf.estimator.ModeKeys.TRAIN or mode == tf.estimator.ModeKeys.EVAL:`, or
    `if mode == PREDICT: return None`), where TRAIN and EVAL take the same branch, and the Loss
    calls it with the mode's string, `"train"`; and on the model output's static shape
    (`if predictions.shape[1] == 1:`, `len(predictions.shape)`, a dimension but the batch's),
    which Keras's output has alike: Python takes the branch when Keras traces the Loss, as it
    did when TF1 built its graph. Every branch the Loss may take is read for the labels.

    A loss that reads the `features` (`loss = compute_errors(features, labels, predictions)`,
    an example weight taken from a feature), or that computes with the labels as they come in
    a way a `Loss` could not reproduce (`tf.nn.l2_loss(predictions - labels)`, which TF1 may
    have broadcast from `[batch]` and `[batch, 1]` to `[batch, batch]`; `tf.one_hot(labels, 10)`
    of integer labels), becomes the model's own `compute_loss(self, x, y, y_pred, ...)`
    instead, which Keras 2.15 and Keras 3 both hand the features and the labels exactly as the
    dataset gives them. Its statements are the same; it returns the loss divided by the
    replicas, as the `Loss` does, after adding it to a `Mean` metric named `"loss"` that the
    model holds (what `fit` and `evaluate` report on both; a model whose layers have
    regularizers adds `self.losses`). `compile` then takes no `loss`
    (`fixtures/loss_reads_features`):

    | TF1 model_fn | Keras model |
    |---|---|
    | `loss = compute_errors(features, labels, predictions)` | `def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):` `features, labels, predictions = x, y, y_pred`; `loss = compute_errors(features, labels, predictions)`; `self.loss_tracker.update_state(loss, sample_weight=tf.shape(y_pred)[0])`; `return loss / tf.distribute.get_strategy().num_replicas_in_sync` |

    Weight decay over the graph's variables, added to the loss (`loss = cross_entropy + l2_loss`,
    `tf.add(loss, l2_loss)`, `loss += ...`), becomes part of the Keras model, since a Keras
    loss sees only the labels and the output: the statement moves to the end of the model's
    `call`, over the model's own variables, and `self.add_loss(...)` adds it
    (`fixtures/weight_decay_over_trainable_variables`):

    | TF1 model_fn | Keras `call` |
    |---|---|
    | `l2_loss = WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(v) for v in tf.trainable_variables() if "batch_normalization" not in v.name])` | `l2_loss = WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(v) for v in self.trainable_variables if "batch_normalization" not in getattr(v, "path", v.name)])` |
    | `loss = cross_entropy + l2_loss` | `self.add_loss(l2_loss)`; `compile(loss=<cross_entropy's Keras loss>)` |

    The variables come from `tf.trainable_variables()` (any spelling), a name bound to it, or
    `tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)`, as the iterable of a comprehension
    whose element reads each variable as a TensorFlow op's argument; it may be named in steps
    (`l2 = tf.add_n([...])`, then `loss = cross_entropy + WEIGHT_DECAY * l2`), each moving to
    `call`. Its filter is carried when
    it means the same on the Keras names: `"text" in v.name` / `not in` (through `and`, `or`,
    `not`, or a function of the module returning such a test, such as official ResNet's
    `exclude_batch_norm(name)`, called with the Keras name) and `len(v.shape)` comparisons.
    Keras 2 names a variable `model/batch_normalization/gamma:0`, Keras 3 `gamma`, with
    `model/batch_normalization/gamma` in `v.path`: the test reads `v.path` where there is one.
    Both hold TF1's `batch_normalization/gamma` behind the model's own name, and TF1's layers
    are the Keras layers they become, named alike (by `name=` or by their kind).

    ## Why
    Under `MirroredStrategy` the TF1 optimizer divided a hand-written loss by the number of
    replicas (it does unless the last TF1 loss in the graph was reduced with SUM) and added up
    the replicas' gradients. Keras treats a loss function's result by its shape, and not alike
    in its two versions: Keras 2.15 divides what a loss function returns by the replicas,
    Keras 3 divides a per-example vector but not a scalar. A `Loss` with `reduction="sum"` is
    divided by neither, so dividing by `num_replicas_in_sync` in `call` gives the Estimator's
    update on both, whatever the batch: a loss that divides by a constant `BATCH_SIZE` keeps
    doing so on a partial last batch, as the Estimator did (a per-example vector averaged by
    Keras would divide by the examples actually there).

    The weight penalty: each replica computed it whole, the optimizer divided the whole loss by
    the replicas and added up their gradients, so it acted once per step. Keras 2.15 and Keras
    3 divide what `add_loss` adds by the replicas too and add up the gradients alike: the same
    update, verified by `e2k parity` with 2 replicas on both (it fails when the filter is left
    out: batch normalization's `gamma` then takes weight decay).

    ## Fix safety
    Safe: the same statements on the same values. `e2k parity` proves it on two replicas, on
    TF 2.15 and the newest TF, with a partial last batch
    (`fixtures/hand_written_loss_per_replica_batch`, `..._helper_regression`, `..._mixed_terms`); forgetting the division by the replicas,
    or the `1/BATCH_SIZE`, fails it. Keras hands a loss the labels converted to the output's
    dtype, float32 (Keras 3) and, for labels of rank 1 against an output of rank 2, expanded
    to `[batch, 1]` (Keras 2): the labels must reach each op through what gives the same values
    either way: a Keras loss object, `sparse_categorical_crossentropy` / `categorical_crossentropy`
    (which match ranks and dtypes themselves), a TF1 loss or tf.nn cross-entropy (which become
    those), `tf.reshape` for ops that read the rank, and `tf.reshape` and a cast for ops that
    need integers (`tf.one_hot`, `tf.gather`, `tf.equal`); `tf.stop_gradient` passes them
    through. Labels used as they come otherwise (in arithmetic, `predictions - labels`, or in
    a Keras loss function that does not match ranks, `mean_squared_error(labels, x)`) make
    the loss the model's `compute_loss`, which is handed them as they come.

    ## Limitations
    Refused, the model_fn left as it was (E2K901, naming the construct): a loss that does not
    read the labels (computed from the model's internals, as a VAE's `-elbo`); a loss reading
    other values of the model besides one output (activations), the model's variables otherwise
    than in a weight penalty added to it (`tf.trainable_variables()`, `model.losses`); a weight
    penalty whose filter would not mean the same on Keras's names (`v.name.startswith(...)`,
    texts with digits, `/` or `:`, which depend on TF1's counters, scopes and `:0`; a text in the
    Keras model's own name or in a `tf.variable_scope` the layers were made in; layers TF1 named
    otherwise than Keras, such as tf-slim's `fc1/weights`), that selects variables by scope
    (`tf.trainable_variables(scope=...)`), or that comes with a loss reduced with SUM (the
    Estimator then did not divide by the replicas); the graph's loss collection
    (`tf.losses.get_total_loss()`); a function of the program
    with loops, an `if` on anything else than the mode and the output's static shape (the
    labels' shape, which Keras changes; the batch size; a tensor's value), a mode test that
    differs between TRAIN and EVAL (one Keras loss serves fit and evaluate), returns before
    its end, or that returns several values
    (`loss, rmse = compute_errors(...)`); statements other than plain assignments; and
    any `reduction=` other than NONE in the model_fn (which decides whether the Estimator
    divided by the replicas).

    A loss that divides by the examples a replica has (`tf.shape(x)[0]`, a `reduce_mean`) is
    converted as written, but like every per-replica mean it weighs a partial last round
    differently: the Estimator gave one replica a full batch and the next the rest, Keras
    splits the examples evenly across the replicas. Full rounds train the same.

    The loss `evaluate` reports is Keras's mean of the per-replica values weighted by their
    examples, where the Estimator averaged the loss of each evaluation batch alike: for a loss
    divided by a constant `BATCH_SIZE` the two differ when the evaluation data ends in a
    partial batch (the fixture evaluates whole rounds of batches for that reason). Training is
    not affected. A loss that depends on its batch as a whole (normalized by a batch mean)
    evaluates otherwise too: the Estimator evaluated whole batches on one device, Keras splits
    each evaluation batch across the replicas.

    ## References
    - https://www.tensorflow.org/tutorials/distribute/multi_worker_with_estimator
    - https://www.tensorflow.org/tutorials/distribute/custom_training#define_the_loss_function
    - https://www.tensorflow.org/api_docs/python/tf/keras/losses/Loss
    """

    code = "E2K204"
    summary = "a loss written by hand in a model_fn -> a tf.keras.losses.Loss subclass with the same statements"
    safety = Safety.SAFE
    role = "hand_written_loss"
    targets = ()

    cases = [
        Case(_TUTORIAL, _TUTORIAL_AFTER, id="multi-worker-tutorial"),
    ]
