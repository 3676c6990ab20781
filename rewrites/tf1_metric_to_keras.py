from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._modelfn import Derived, MetricConversion
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._translate import bind

_TAIL = ("weights", "metrics_collections", "updates_collections", "name")
SIGNATURES = {
    "metrics.accuracy": ("labels", "predictions", *_TAIL),
    "metrics.mean_squared_error": ("labels", "predictions", *_TAIL),
    "metrics.root_mean_squared_error": ("labels", "predictions", *_TAIL),
    "metrics.mean_absolute_error": ("labels", "predictions", *_TAIL),
    "metrics.auc": ("labels", "predictions", "weights", "num_thresholds", "metrics_collections",
                    "updates_collections", "curve", "name", "summation_method", "thresholds"),
    "metrics.precision": ("labels", "predictions", *_TAIL),
    "metrics.recall": ("labels", "predictions", *_TAIL),
}
#: (TF1 metric, how its predictions derive from the model output) -> Keras metric and arguments.
TABLE = {
    ("metrics.accuracy", "argmax"): ("SparseCategoricalAccuracy", {}),
    ("metrics.accuracy", "positive"): ("BinaryAccuracy", {"threshold": "0.0"}),
    ("metrics.accuracy", "output"): ("Accuracy", {}),
    ("metrics.accuracy", "rounded"): ("BinaryAccuracy", {}),
    ("metrics.precision", "rounded"): ("Precision", {"thresholds": "0.5"}),
    ("metrics.recall", "rounded"): ("Recall", {"thresholds": "0.5"}),
    ("metrics.mean_squared_error", "output"): ("MeanSquaredError", {}),
    ("metrics.root_mean_squared_error", "output"): ("RootMeanSquaredError", {}),
    ("metrics.mean_absolute_error", "output"): ("MeanAbsoluteError", {}),
    ("metrics.auc", "sigmoid"): ("AUC", {"from_logits": "True"}),
    ("metrics.auc", "output"): ("AUC", {}),
}


class Tf1MetricToKeras(ExpressionRule):
    """A TF1 `tf.metrics.*` in `eval_metric_ops` becomes the Keras metric computing the same value, under the same name.

    ## What it does
    Each entry of the EVAL EstimatorSpec's `eval_metric_ops` becomes a metric in `compile`,
    named by its key, so that `model.evaluate(..., return_dict=True)` reports the names the
    Estimator reported. Keras metrics receive the model output, so the rule looks at how the
    TF1 metric's `predictions` were computed from it:

    | TF1 metric | its predictions | Keras metric |
    |---|---|---|
    | `accuracy` | `tf.argmax(logits, 1)` | `SparseCategoricalAccuracy(name=...)` |
    | `accuracy` of `tf.argmax(labels, 1)` (one-hot labels) | `tf.argmax(logits, 1)` | `CategoricalAccuracy(name=...)` (either argument order: equality is symmetric) |
    | `accuracy` | `tf.round(tf.sigmoid(logits))`, `logits > 0` | `BinaryAccuracy(name=..., threshold=0.0)` |
    | `mean_squared_error`, `root_mean_squared_error`, `mean_absolute_error` | the output | `MeanSquaredError`, `RootMeanSquaredError`, `MeanAbsoluteError` |
    | `auc` | `tf.sigmoid(logits)` | `AUC(name=..., from_logits=True)` |
    | `auc` | the output (probabilities) | `AUC(name=...)` |
    | `accuracy`, `precision`, `recall` | `tf.round(probabilities)`, `probabilities > 0.5` | `BinaryAccuracy`, `Precision(thresholds=0.5)`, `Recall(thresholds=0.5)` |
    | `precision`, `recall` | `tf.round(tf.sigmoid(logits))` | `PrecisionOfLogits`, `RecallOfLogits`: Keras's classes fed `sigmoid(y_pred)`, emitted once beside the model |

    ## Why
    `tf.metrics` is gone in TF2; dashboards and scripts read the Estimator's metric names,
    which the converted program keeps.

    ## Fix safety
    Safe: each Keras metric computes the TF1 value over the whole evaluation. AUC uses the
    same thresholds in both, and for the ROC curve Keras's default summation
    (`interpolation`: the mean of adjacent heights) is TF1's default `trapezoidal`; on the
    PR curve, TF1's `careful_interpolation` is Keras's `interpolation`, while TF1's
    `trapezoidal` PR-AUC has no Keras equivalent and is left for a human.

    ## Limitations
    `weights=`, `tf.metrics.mean` of arbitrary values, and metrics on transformed labels are
    left for a human: the model converts, and the metric is marked (E2K202) with what to add.

    ## References
    - https://www.tensorflow.org/guide/migrate/metrics_optimizers
    """

    code = "E2K202"
    summary = "tf.metrics.* in eval_metric_ops -> tf.keras.metrics.* in compile(), under the same names"
    safety = Safety.SAFE
    role = "metric"
    targets = tuple(SIGNATURES)

    cases = [
        Case(
            id="classifier",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [1])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 3)
    predicted_classes = tf.argmax(logits, 1)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    accuracy = tf.metrics.accuracy(labels=labels, predictions=predicted_classes, name="acc_op")
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
print(estimator.evaluate(input_fn)["accuracy"])
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [1])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(3)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    return model


model = build_model()
model.fit(input_fn())
print(model.evaluate(input_fn(), return_dict=True)["accuracy"])
''',
        ),
        Case(
            id="one-hot-labels",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.0, 1.0, 0.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 3)
    loss = tf.losses.softmax_cross_entropy(onehot_labels=labels, logits=logits)
    metrics = {"accuracy": tf.metrics.accuracy(tf.argmax(logits, axis=1), tf.argmax(labels, axis=1))}
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
print(estimator.evaluate(input_fn)["accuracy"])
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.0, 1.0, 0.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(3)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1),
        loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True),
        metrics=[tf.keras.metrics.CategoricalAccuracy(name="accuracy")])
    return model


model = build_model()
model.fit(input_fn())
print(model.evaluate(input_fn(), return_dict=True)["accuracy"])
''',
        ),
    ]

    def convert(self, call, ctx, tf, name: str, derive):
        path = ctx.call_api_path(call)
        bound = bind(call, SIGNATURES[path])
        for key in ("weights", "metrics_collections", "updates_collections", "thresholds"):
            if key in bound and _emit.code(bound[key].value) != "None":
                raise Unsupported(f"`{key}=` is not converted yet")
        labels, predictions = bound.get("labels"), bound.get("predictions")
        if labels is None or predictions is None:
            raise Unsupported("the metric needs labels and predictions")
        if path == "metrics.accuracy" and _class_of_one_hot(predictions.value, ctx):
            labels, predictions = predictions, labels  # equal or not: the order does not matter
        if path == "metrics.accuracy" and _class_of_one_hot(labels.value, ctx):
            derived = derive(predictions.value)
            if derived is None or derived.kind != "argmax":
                raise Unsupported("the metric compares the one-hot labels' classes with something other than "
                                  "the model output's")
            return _emit.expr('{tf}.keras.metrics.CategoricalAccuracy(name={name})', tf=tf, name=_quote(name))
        if not (isinstance(labels.value, cst.Name) and labels.value.value == "labels"):
            raise Unsupported("the metric's labels are not the model_fn's `labels`")
        derived: Derived | None = derive(predictions.value)
        kind = derived.kind if derived else None
        if path in ON_LOGITS and kind == "positive":
            keras_class, definition = ON_LOGITS[path]
            metric = _emit.expr('{cls}(name={name}, thresholds=0.5)', cls=keras_class, name=_quote(name))
            return MetricConversion(metric, [_emit.statement(definition.format(tf=tf))])
        if (path, kind) not in TABLE:
            raise Unsupported("its predictions are not computed from the model output in a way e2k maps")
        keras, extra = TABLE[(path, kind)]
        args = [_emit.keyword_arg("name", cst.SimpleString(_quote(name)))]
        args += [_emit.keyword_arg(k, cst.parse_expression(v)) for k, v in extra.items()]
        if path == "metrics.auc":
            args += _auc_arguments(bound)
        return cst.Call(_emit.expr("{tf}.keras.metrics.{k}", tf=tf, k=keras), args=_emit.call_args(args))


def _class_of_one_hot(node: cst.BaseExpression, ctx) -> bool:
    """``tf.argmax(labels, 1)`` (or ``axis=-1``): the class of one-hot labels as they come."""
    if not (isinstance(node, cst.Call) and ctx.call_api_path(node) in ("argmax", "math.argmax")):
        return False
    bound = bind(node, ("input", "axis", "name", "dimension", "output_type"))
    source, axis = bound.get("input"), bound.get("axis") or bound.get("dimension")
    return (source is not None and isinstance(source.value, cst.Name) and source.value.value == "labels"
            and axis is not None and _emit.code(axis.value) in ("1", "-1"))


#: Precision and recall of `round(sigmoid(logits))`: Keras's classes threshold probabilities
#: (and refuse thresholds outside [0, 1]), so they are fed the sigmoid of the logits.
ON_LOGITS = {
    "metrics.precision": ("PrecisionOfLogits", """
class PrecisionOfLogits({tf}.keras.metrics.Precision):
    \"\"\"Precision of sigmoid(logits) > 0.5, as tf.metrics.precision counted it.\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, {tf}.sigmoid(y_pred), sample_weight)
"""),
    "metrics.recall": ("RecallOfLogits", """
class RecallOfLogits({tf}.keras.metrics.Recall):
    \"\"\"Recall of sigmoid(logits) > 0.5, as tf.metrics.recall counted it.\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, {tf}.sigmoid(y_pred), sample_weight)
"""),
}

#: TF1 AUC summation -> Keras's, per curve. For ROC, Keras's "interpolation" averages adjacent
#: heights: TF1's "trapezoidal". For PR, Keras's "interpolation" is TF1's "careful_interpolation".
AUC_SUMMATION = {
    ("ROC", "trapezoidal"): None,  # Keras's default
    ("ROC", "careful_interpolation"): None,
    ("PR", "careful_interpolation"): None,
    ("ROC", "minoring"): "minoring",
    ("ROC", "majoring"): "majoring",
    ("PR", "minoring"): "minoring",
    ("PR", "majoring"): "majoring",
}


def _auc_arguments(bound) -> list[cst.Arg]:
    def literal(key, default):
        arg = bound.get(key)
        if arg is None:
            return default
        if not isinstance(arg.value, cst.SimpleString):
            raise Unsupported(f"AUC `{key}=` must be a literal for e2k to map it")
        return arg.value.evaluated_value
    curve = literal("curve", "ROC")
    summation = literal("summation_method", "trapezoidal")
    if (curve, summation) not in AUC_SUMMATION:
        raise Unsupported(f"Keras AUC has no summation matching TF1's {summation!r} on the {curve} curve")
    args = []
    if "num_thresholds" in bound:
        args.append(_emit.keyword_arg("num_thresholds", bound["num_thresholds"].value))
    if curve != "ROC":
        args.append(_emit.keyword_arg("curve", cst.SimpleString(_quote(curve))))
    keras_summation = AUC_SUMMATION[(curve, summation)]
    if keras_summation is not None:
        args.append(_emit.keyword_arg("summation_method", cst.SimpleString(_quote(keras_summation))))
    return args


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
