from __future__ import annotations

import libcst as cst

from estimator2keras._modelfn import LossConversion
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._translate import CallSpec, translate

_COMMON = ("weights", "scope", "loss_collection", "reduction")
_TAIL_REFUSED = {
    "reduction": "a reduction other than the default is not converted yet",
    "loss_collection": "a custom loss collection has no Keras equivalent",
}
_CONSUMED = frozenset({"labels", "predictions", "logits", "multi_class_labels", "onehot_labels", "weights"})

#: TF1 loss -> (CallSpec, name of the labels argument, name of the model-output argument).
LOSSES = {
    "losses.mean_squared_error": (
        CallSpec("keras.losses.MeanSquaredError", ("labels", "predictions", *_COMMON),
                 dropped=frozenset({"scope"}), refused=_TAIL_REFUSED, consumed=_CONSUMED),
        "labels", "predictions",
    ),
    "losses.absolute_difference": (
        CallSpec("keras.losses.MeanAbsoluteError", ("labels", "predictions", *_COMMON),
                 dropped=frozenset({"scope"}), refused=_TAIL_REFUSED, consumed=_CONSUMED),
        "labels", "predictions",
    ),
    "losses.huber_loss": (
        CallSpec("keras.losses.Huber", ("labels", "predictions", "weights", "delta", "scope", "loss_collection", "reduction"),
                 dropped=frozenset({"scope"}), refused=_TAIL_REFUSED, consumed=_CONSUMED),
        "labels", "predictions",
    ),
    "losses.sigmoid_cross_entropy": (
        CallSpec("keras.losses.BinaryCrossentropy",
                 ("multi_class_labels", "logits", "weights", "label_smoothing", "scope", "loss_collection", "reduction"),
                 dropped=frozenset({"scope"}), refused=_TAIL_REFUSED, consumed=_CONSUMED,
                 extra={"from_logits": "True"}),
        "multi_class_labels", "logits",
    ),
    "losses.softmax_cross_entropy": (
        CallSpec("keras.losses.CategoricalCrossentropy",
                 ("onehot_labels", "logits", "weights", "label_smoothing", "scope", "loss_collection", "reduction"),
                 dropped=frozenset({"scope"}), refused=_TAIL_REFUSED, consumed=_CONSUMED,
                 extra={"from_logits": "True"}),
        "onehot_labels", "logits",
    ),
    "losses.sparse_softmax_cross_entropy": (
        CallSpec("keras.losses.SparseCategoricalCrossentropy", ("labels", "logits", *_COMMON),
                 dropped=frozenset({"scope"}), refused=_TAIL_REFUSED, consumed=_CONSUMED,
                 extra={"from_logits": "True"}),
        "labels", "logits",
    ),
}


class Tf1LossToKeras(ExpressionRule):
    """A TF1 `tf.losses.*` call becomes the Keras loss object `compile` takes.

    ## What it does
    Inside a converted model_fn, the loss that the EstimatorSpec returns becomes the
    `loss=` of `compile`:

    | TF1 | Keras |
    |---|---|
    | `mean_squared_error(labels, predictions)` | `MeanSquaredError()` |
    | `absolute_difference(labels, predictions)` | `MeanAbsoluteError()` |
    | `huber_loss(labels, predictions, delta=d)` | `Huber(delta=d)` |
    | `sigmoid_cross_entropy(multi_class_labels, logits, label_smoothing=s)` | `BinaryCrossentropy(from_logits=True, label_smoothing=s)` |
    | `softmax_cross_entropy(onehot_labels, logits, label_smoothing=s)` | `CategoricalCrossentropy(from_logits=True, label_smoothing=s)` |
    | `sparse_softmax_cross_entropy(labels, logits)` | `SparseCategoricalCrossentropy(from_logits=True)` |

    The labels argument must be the model_fn's `labels` and the predictions/logits
    argument the model's output; `fit` passes both to the loss.

    Labels the model_fn numbers with a lookup table first (Google's census custom
    Estimator: `table = tf.contrib.lookup.index_table_from_tensor(tf.constant(LABELS))`,
    `tf.squeeze(table.lookup(labels), axis=[1])`; also `tf.lookup.StaticHashTable(
    tf.lookup.KeyValueTensorInitializer(LABELS, tf.range(len(LABELS))), -1)`,
    `StaticVocabularyTable` and their `tf.compat.v1` spellings) are numbered by the model's
    `preprocess` instead, mapped over every dataset (`input_fn().map(model.preprocess)`), so
    that no string label reaches the replicas (Keras 3 under MirroredStrategy fails on one):
    `self.label_lookup = tf.keras.layers.StringLookup(vocabulary=LABELS)` (a canned
    Estimator's `label_vocabulary` is read so too) and `self.label_lookup(labels) - 1`, the
    ids the table gave: a known label's position, any other `default_value` (-1), or with
    `num_oov_buckets` n + its fingerprint modulo the buckets (a `Hashing` layer, the same
    hash). The loss and the metrics of those ids (`tf.metrics.accuracy(label_indices,
    predicted_indices)`) then compare the labels as they come; predictions mapping ids back
    (`tf.gather(label_values, predicted_indices)`) stay in `predict_step`. A table of other
    ids than the keys' positions, with a hasher, of keys computed in the model_fn or a
    computed `default_value` is refused (E2K901), naming it. Fixture
    `custom_estimator_census_label_table` passes e2k parity on TensorFlow 2.15 and the
    newest TensorFlow.

    ## Why
    `tf.losses` (TF1) is gone; in TF2 the name points at Keras loss functions with another
    signature and no reduction. Keras computes the loss from the model's output and the
    labels of each batch.

    ## Fix safety
    Safe with the default reduction (`SUM_BY_NONZERO_WEIGHTS`) and no weights: the TF1 loss
    is the mean over all elements, as the Keras loss is (mean over the last axis, then over
    the batch). Under a strategy both average over the global batch.

    ## Limitations
    A rank-1 model output (`tf.squeeze(logits, axis=1)`, `tf.reshape(x, [-1])`) with a loss
    that averages over the last axis (mean squared error, sigmoid cross-entropy...) gets its
    loss per example: a function of the module, `per_example_loss(labels, predictions)`, runs
    the Keras loss with `reduction="none"` on both as one column, and
    `compile(loss=per_example_loss)`. A loss object would reduce each
    replica's batch to one value, which Keras 3 does not divide by the replicas (only
    per-example losses): the newest TensorFlow trained with N times the Estimator's gradient.
    Fixture `rank_one_output_mirrored` passes e2k parity on 2 replicas on TensorFlow 2.15 and
    the newest TensorFlow (the loss object fails it there at step 1). It is written without a
    strategy too: the same model trained later under one stays right.

    `weights=` other than 1 (TF1 divides by the number of non-zero weights, Keras by the
    batch size), another `reduction`, and `log_loss` / `hinge_loss` are not converted yet
    (the model_fn is left as it was, E2K901). A TF1 loss inside a loss written by hand
    (`0.5 * tf.losses.mean_squared_error(labels, predictions) + ...`) converts with it (E2K204):
    the mean of its Keras loss's per-example values.

    ## References
    - https://www.tensorflow.org/guide/migrate/metrics_optimizers
    - https://www.tensorflow.org/api_docs/python/tf/keras/losses
    """

    code = "E2K201"
    summary = "tf.losses.* (TF1) -> the tf.keras.losses object compile() takes"
    safety = Safety.SAFE
    role = "loss"
    targets = tuple(LOSSES)

    cases = [
        Case(
            "tf1.losses.mean_squared_error(labels=labels, predictions=logits)",
            "tf.keras.losses.MeanSquaredError()",
            id="mse",
        ),
        Case(
            "tf.losses.sparse_softmax_cross_entropy(labels, logits)",
            "tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)",
            id="sparse-softmax",
        ),
        Case(
            "tf.losses.softmax_cross_entropy(onehot, logits, label_smoothing=0.1)",
            "tf.keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)",
            id="label-smoothing",
        ),
    ]

    def convert(self, call, ctx, tf) -> LossConversion:
        spec, labels_name, output_name = LOSSES[ctx.call_api_path(call)]
        keras_loss, consumed = translate(call, spec, tf)
        weights = consumed.get("weights")
        if weights is not None and not _is_one(weights.value):
            raise Unsupported("loss weights are not converted yet (TF1 and Keras normalise them differently)", weights)
        if labels_name not in consumed or output_name not in consumed:
            raise Unsupported(f"the loss needs both `{labels_name}` and `{output_name}`", call)
        return LossConversion(keras_loss, consumed[labels_name].value, consumed[output_name].value)


def _is_one(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) and float(node.value) == 1.0
