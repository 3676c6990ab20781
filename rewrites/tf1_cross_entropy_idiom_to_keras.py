from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._modelfn import LossConversion
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._translate import bind

#: tf.nn per-example losses -> (Keras loss, extra arguments, labels keyword, output keyword).
PER_EXAMPLE = {
    "nn.sparse_softmax_cross_entropy_with_logits": ("SparseCategoricalCrossentropy", "from_logits=True"),
    "nn.softmax_cross_entropy_with_logits_v2": ("CategoricalCrossentropy", "from_logits=True"),
    "nn.softmax_cross_entropy_with_logits": ("CategoricalCrossentropy", "from_logits=True"),
    "nn.sigmoid_cross_entropy_with_logits": ("BinaryCrossentropy", "from_logits=True"),
}
DIFFERENCES = {"square": "MeanSquaredError", "math.square": "MeanSquaredError", "abs": "MeanAbsoluteError", "math.abs": "MeanAbsoluteError"}


class Tf1MeanOfPerExampleLossToKeras(ExpressionRule):
    """`tf.reduce_mean(<per-example loss>)` idioms become the Keras loss that averages the same values.

    ## What it does
    When a model_fn computes its loss by hand, the usual idioms become Keras losses:

    | TF1 | Keras |
    |---|---|
    | `tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))` | `SparseCategoricalCrossentropy(from_logits=True)` |
    | `tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits[_v2](labels=labels, logits=logits))` | `CategoricalCrossentropy(from_logits=True)` |
    | `tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))` | `BinaryCrossentropy(from_logits=True)` |
    | `tf.reduce_mean(tf.square(labels - predictions))` (either order) | `MeanSquaredError()` |
    | `tf.reduce_mean(tf.abs(labels - predictions))` (either order) | `MeanAbsoluteError()` |

    ## Why
    `compile` takes a loss object that Keras evaluates on each batch, scaled correctly
    across replicas; a hand-written mean would have to move into a `train_step`.

    ## Fix safety
    Safe: `reduce_mean` over all the per-element losses is what the Keras losses compute
    (mean over the last axis, then over the batch). For the squared/absolute-error idioms this
    holds when labels and predictions have the same shape: labels of `[batch]` against
    predictions of `[batch, 1]` broadcast to `[batch, batch]` in TF1 (a bug Keras's losses do
    not reproduce; `e2k parity` shows the difference). A `reduce_mean` with an `axis`, or over
    anything else, is not an idiom of this rule: it converts as a loss written by hand (E2K204)
    where that rule can, else the model_fn is left as it was (E2K901).

    ## References
    - https://www.tensorflow.org/guide/migrate/metrics_optimizers
    """

    code = "E2K203"
    summary = "tf.reduce_mean(tf.nn.*_cross_entropy_with_logits(...)) and squared/absolute-error idioms -> Keras losses"
    safety = Safety.SAFE
    role = "loss"
    targets = ("reduce_mean", "math.reduce_mean")

    cases = [
        Case(
            "tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))",
            "tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)",
            id="sparse-softmax",
        ),
        Case(
            "tf1.reduce_mean(tf1.square(predictions - labels))",
            "tf.keras.losses.MeanSquaredError()",
            id="squared-error",
        ),
        Case("tf.reduce_mean(logits, axis=1)", None, id="axis-refused"),
    ]

    def convert(self, call, ctx, tf) -> LossConversion:
        bound = bind(call, ("input_tensor", "axis", "keepdims", "name"))
        if set(bound) - {"input_tensor", "name"}:
            raise Unsupported("a reduce_mean over some axes is not a loss e2k maps")
        inner = bound.get("input_tensor")
        inner = inner.value if inner is not None else None
        path = ctx.call_api_path(inner) if isinstance(inner, cst.Call) else None
        if path in PER_EXAMPLE:
            keras, extra = PER_EXAMPLE[path]
            args = bind(inner, ("_sentinel", "labels", "logits", "dim", "name", "axis"))
            if "labels" not in args or "logits" not in args:
                raise Unsupported("the cross-entropy needs labels= and logits=")
            if "dim" in args or "axis" in args:
                raise Unsupported("a cross-entropy over another axis is not converted")
            loss = _emit.expr("{tf}.keras.losses.{k}({extra})", tf=tf, k=keras, extra=extra)
            return LossConversion(loss, args["labels"].value, args["logits"].value)
        if path in DIFFERENCES and len(inner.args) == 1:
            difference = inner.args[0].value
            if isinstance(difference, cst.BinaryOperation) and isinstance(difference.operator, cst.Subtract):
                left, right = difference.left, difference.right
                labels, output = (left, right) if _is_labels(left) else (right, left)
                loss = _emit.expr("{tf}.keras.losses.{k}()", tf=tf, k=DIFFERENCES[path])
                return LossConversion(loss, labels, output)
        raise Unsupported("this reduce_mean is not a per-example loss e2k maps")


def _is_labels(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "labels"
