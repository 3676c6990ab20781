from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._modelfn import Derived, MetricConversion
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._translate import bind

_TAIL = ("weights", "metrics_collections", "updates_collections", "name")
_AT_K = ("labels", "predictions", "k", "class_id", *_TAIL)
_AT_TOP_K = ("labels", "predictions_idx", "k", "class_id", *_TAIL)
_AT_THRESHOLDS = ("labels", "predictions", "thresholds", *_TAIL)
#: Every function of tf.compat.v1.metrics (TensorFlow 2.15), with its parameters in order.
SIGNATURES = {
    "metrics.accuracy": ("labels", "predictions", *_TAIL),
    "metrics.auc": ("labels", "predictions", "weights", "num_thresholds", "metrics_collections",
                    "updates_collections", "curve", "name", "summation_method", "thresholds"),
    "metrics.average_precision_at_k": ("labels", "predictions", "k", *_TAIL),
    "metrics.sparse_average_precision_at_k": ("labels", "predictions", "k", *_TAIL),
    "metrics.false_negatives": ("labels", "predictions", *_TAIL),
    "metrics.false_positives": ("labels", "predictions", *_TAIL),
    "metrics.true_negatives": ("labels", "predictions", *_TAIL),
    "metrics.true_positives": ("labels", "predictions", *_TAIL),
    "metrics.false_negatives_at_thresholds": _AT_THRESHOLDS,
    "metrics.false_positives_at_thresholds": _AT_THRESHOLDS,
    "metrics.true_negatives_at_thresholds": _AT_THRESHOLDS,
    "metrics.true_positives_at_thresholds": _AT_THRESHOLDS,
    "metrics.precision_at_thresholds": _AT_THRESHOLDS,
    "metrics.recall_at_thresholds": _AT_THRESHOLDS,
    "metrics.mean": ("values", *_TAIL),
    "metrics.mean_tensor": ("values", *_TAIL),
    "metrics.percentage_below": ("values", "threshold", *_TAIL),
    "metrics.mean_absolute_error": ("labels", "predictions", *_TAIL),
    "metrics.mean_squared_error": ("labels", "predictions", *_TAIL),
    "metrics.root_mean_squared_error": ("labels", "predictions", *_TAIL),
    "metrics.mean_cosine_distance": ("labels", "predictions", "dim", *_TAIL),
    "metrics.mean_iou": ("labels", "predictions", "num_classes", *_TAIL),
    "metrics.mean_per_class_accuracy": ("labels", "predictions", "num_classes", *_TAIL),
    "metrics.mean_relative_error": ("labels", "predictions", "normalizer", *_TAIL),
    "metrics.precision": ("labels", "predictions", *_TAIL),
    "metrics.recall": ("labels", "predictions", *_TAIL),
    "metrics.precision_at_k": _AT_K,
    "metrics.sparse_precision_at_k": _AT_K,
    "metrics.recall_at_k": _AT_K,
    "metrics.precision_at_top_k": _AT_TOP_K,
    "metrics.recall_at_top_k": _AT_TOP_K,
    "metrics.sensitivity_at_specificity": ("labels", "predictions", "specificity", "weights", "num_thresholds",
                                           "metrics_collections", "updates_collections", "name"),
    "metrics.specificity_at_sensitivity": ("labels", "predictions", "sensitivity", "weights", "num_thresholds",
                                           "metrics_collections", "updates_collections", "name"),
}
#: (TF1 metric, how its predictions derive from the model output) -> Keras metric and arguments.
TABLE = {
    ("metrics.accuracy", "argmax"): ("SparseCategoricalAccuracy", {}),
    ("metrics.accuracy", "positive"): ("BinaryAccuracy", {"threshold": "0.0"}),
    ("metrics.accuracy", "output"): ("Accuracy", {}),
    ("metrics.accuracy", "rounded"): ("BinaryAccuracy", {}),
    ("metrics.precision", "rounded"): ("Precision", {"thresholds": "0.5"}),
    ("metrics.recall", "rounded"): ("Recall", {"thresholds": "0.5"}),
    ("metrics.root_mean_squared_error", "output"): ("RootMeanSquaredError", {}),
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
    | `accuracy` of `tf.argmax(labels, 1)` (one-hot labels; directly or through a name bound once) | `tf.argmax(logits, 1)` | `CategoricalAccuracy(name=...)` (either argument order: equality is symmetric) |
    | `accuracy` | `tf.round(tf.sigmoid(logits))`, `logits > 0` | `BinaryAccuracy(name=..., threshold=0.0)` |
    | `mean_squared_error`, `mean_absolute_error` | the output | `MeanSquaredErrorOfElements`, `MeanAbsoluteErrorOfElements`: Keras's classes fed one element per row, so that every element counts once whatever the rank of the labels and the output (Keras's own average each example's last axis first: rank-1 batches would count as one value each) |
    | `root_mean_squared_error` | the output | `RootMeanSquaredError` (it averages every element already) |
    | `auc` | `tf.sigmoid(logits)` | `AUC(name=..., from_logits=True)` |
    | `auc` | the output (probabilities) | `AUC(name=...)` |
    | `auc` of `tf.one_hot(labels, n)` (on True / 1, off False / 0) | `tf.nn.softmax(logits)` | emitted `AUCOfOneHotSoftmax(name=...)`: Keras's AUC of the ids' one-hot code against every class's probability, flattened as tf.metrics flattened them |
    | `auc` | `tf.nn.softmax(logits)[:, 1]` (two classes), directly or through a predictions dict | emitted `AUCOfSecondSoftmax(name=...)`: Keras's AUC of that column |
    | `auc(..., thresholds=[...])` | as above | `AUC(name=..., thresholds=[...])`: both add `-1e-7` and `1 + 1e-7` and ignore `num_thresholds` |
    | `accuracy`, `precision`, `recall` | `tf.round(probabilities)`, `probabilities > 0.5` | `BinaryAccuracy`, `Precision(thresholds=0.5)`, `Recall(thresholds=0.5)` |
    | `precision`, `recall` | `tf.round(tf.sigmoid(logits))` | `PrecisionOfLogits`, `RecallOfLogits`: Keras's classes fed `sigmoid(y_pred)`, emitted once beside the model |
    | `precision`, `recall` | `tf.argmax(logits, -1)` (class 0 negative, any other positive, as TF1 cast it) | `PrecisionOfArgmax`, `RecallOfArgmax`: Keras's classes fed `argmax(y_pred) != 0` |
    | `true_positives`, `false_positives`, `true_negatives`, `false_negatives` | `tf.round(probabilities)`; `tf.round(tf.sigmoid(logits))`, `logits > 0`; `tf.argmax(logits, -1)` | `TruePositives` & co.; `TruePositivesOfLogits` & co. (fed `sigmoid(y_pred)`); `TruePositivesOfArgmax` & co. |
    | `*_at_thresholds` of those four | the output (probabilities); `tf.sigmoid(logits)` | the same classes with `thresholds=` (TF1's `prediction > threshold`, as Keras) |
    | `precision_at_thresholds`, `recall_at_thresholds` | the output; `tf.sigmoid(logits)` | emitted `PrecisionAtThresholds`, `RecallAtThresholds`: one value per threshold, TF1's `tp / (1e-7 + tp + fp)` |
    | `sensitivity_at_specificity`, `specificity_at_sensitivity` | the output; `tf.sigmoid(logits)` | emitted classes with TF1's thresholds (`-1e-7`, `i/(n-1)`, `1 ± 1e-7`) and TF1's choice of the point on the curve; Keras's classes choose another point |
    | `mean_per_class_accuracy` | `tf.argmax(logits, -1)` | emitted `MeanPerClassAccuracy`: per-class counts in variables, the mean over all `num_classes` (a class no example had counts 0) |
    | `mean_iou` | `tf.argmax(logits, -1)` | `MeanIoU(num_classes=..., sparse_y_pred=False)` (the same confusion matrix and mean over classes seen) |
    | `precision_at_k`, `sparse_precision_at_k`, `recall_at_k` | the output, its softmax or sigmoid | emitted `PrecisionAtK`, `RecallAtK` (`k`, `class_id`): TF1's set operations on the top k and the labels as class ids |
    | `precision_at_top_k`, `recall_at_top_k` | `tf.nn.top_k(output, k).indices` (or `[1]`) in the call | the same classes |
    | `average_precision_at_k`, `sparse_average_precision_at_k` | the output, its softmax or sigmoid | emitted `AveragePrecisionAtK` |
    | `mean_cosine_distance` | the output | emitted `MeanCosineDistance(dim=...)`: `1 - mean(sum(labels * predictions, dim))`, unnormalised as in TF1 (Keras's `CosineSimilarity` normalises) |
    | `mean_relative_error` with `normalizer=labels` | the output | emitted `MeanRelativeErrorOfLabels` (Keras's `MeanRelativeError` divides by a fixed tensor) |
    | `mean` of the labels; of the output, its sigmoid or softmax (a canned head's `label/mean`, `prediction/mean`) | | emitted `MeanOfLabels`, `MeanOfPredictions`: the mean of all their values |
    | `percentage_below` of the same | | emitted `PercentageBelow(threshold=...)` |

    The labels may be cast to a float type (their values kept), and for accuracy and metrics of
    class ids to an integer type (`tf.cast(labels, tf.int64)`, as TF1's set operations needed;
    `tf.squeeze(tf.cast(labels, tf.int64), axis=1)` for a sparse loss), reshaped to one
    column or row (`[-1, 1]`, `[-1]`, `expand_dims`, `squeeze`), and reach the metric through
    a name bound once (`labels_f = tf.cast(labels, tf.float32)`). Their settings (`k`, `num_classes`,
    thresholds...) may be literals, `params[...]` or module-level names. `accuracy`,
    `mean_squared_error`, `root_mean_squared_error` and `mean_absolute_error`, whose value is the
    same either way round, may take the labels second (`tf.metrics.accuracy(class_ids, labels)`,
    a common slip): Keras gets them first. The emitted classes keep
    their state in metric variables (summed across replicas under MirroredStrategy) and run on
    Keras 2 and Keras 3.

    ## Why
    `tf.metrics` is gone in TF2; dashboards and scripts read the Estimator's metric names,
    which the converted program keeps.

    ## Fix safety
    Safe: each Keras metric computes the TF1 value over the whole evaluation (each conversion is
    checked against TF1's own metric on the same batches). AUC uses the
    same thresholds in both, and for the ROC curve Keras's default summation
    (`interpolation`: the mean of adjacent heights) is TF1's default `trapezoidal`; on the
    PR curve, TF1's `careful_interpolation` is Keras's `interpolation`, while TF1's
    `trapezoidal` PR-AUC has no Keras equivalent and is left for a human.

    ## Limitations
    Left for a human, marked E2K202 with the reason: `weights=` and the collections arguments;
    `mean` and `percentage_below` of any other tensor the model_fn computes (a compile()
    metric sees only the labels and the model output; Keras 2 may give it the labels with an
    extra dimension, so an expression of both cannot be recomputed with the shapes TF1 had),
    `mean_tensor` (one value per element);
    metrics of transformed labels, of predictions not derived from the model output as above,
    settings computed in the model_fn, and `mean_relative_error` with another normalizer.

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
        function = path.split(".", 1)[1]
        bound = bind(call, SIGNATURES[path])
        if "weights" in bound and _emit.code(bound["weights"].value) != "None":
            raise Unsupported("`weights=` is not converted: a metric in compile() is weighted only by the sample "
                              "weights the dataset yields, not by a tensor the model_fn computes")
        for key in ("metrics_collections", "updates_collections"):
            if key in bound and _emit.code(bound[key].value) != "None":
                raise Unsupported(f"`{key}=` puts the metric in a graph collection, which Keras has not; "
                                  "whatever reads that collection needs a human")
        if path in VALUES_ONLY:
            return _mean_of_values(call, ctx, tf, name, derive, bound, function)
        if path in OTHER_METRICS:
            return OTHER_METRICS[path](self, call, ctx, tf, name, derive, bound)
        labels, predictions = bound.get("labels"), bound.get("predictions")
        if labels is None or predictions is None:
            raise Unsupported("the metric needs labels and predictions")
        if path == "metrics.accuracy" and _class_of_one_hot(_followed(predictions.value, ctx), ctx):
            labels, predictions = predictions, labels  # equal or not: the order does not matter
        if path in SYMMETRIC and _are_labels(predictions, ctx) and not _are_labels(labels, ctx):
            # `tf.metrics.accuracy(class_ids, labels)`: the same value either way round; Keras
            # metrics take the labels first.
            labels, predictions = predictions, labels
        if path == "metrics.accuracy" and _class_of_one_hot(_followed(labels.value, ctx), ctx):
            derived = derive(predictions.value)
            if derived is None or derived.kind != "argmax":
                raise Unsupported("the metric compares the one-hot labels' classes with something other than "
                                  "the model output's")
            return _emit.expr('{tf}.keras.metrics.CategoricalAccuracy(name={name})', tf=tf, name=_quote(name))
        if path == "metrics.auc" and _one_hot_of_labels(_followed(labels.value, ctx), ctx):
            # Census custom Estimator: `tf.metrics.auc(tf.one_hot(label_ids, 2, True, False), probabilities)`.
            derived = derive(predictions.value)
            if derived is None or derived.kind != "softmax":
                raise Unsupported("the AUC of one-hot labels compares them with something other than the softmax of "
                                  "the model output")
            args = _auc_arguments(bound)
            thresholds = _carried(bound.get("thresholds"), "thresholds", ctx, call)
            if thresholds is not None and _emit.code(thresholds) != "None":
                args.append(_emit.keyword_arg("thresholds", thresholds))
            metric = cst.Call(cst.Name("AUCOfOneHotSoftmax"), args=_emit.call_args(
                [_emit.keyword_arg("name", cst.SimpleString(_quote(name))), *args]))
            return MetricConversion(metric, [_emit.statement(AUC_OF_ONE_HOT_SOFTMAX.format(tf=tf))])
        # Accuracy counts equal classes: integer casts of the labels keep what it counts.
        _check_labels(labels, class_ids=path == "metrics.accuracy", ctx=ctx)
        derived: Derived | None = derive(predictions.value)
        kind = derived.kind if derived else None
        if path in ("metrics.precision", "metrics.recall") and kind == "argmax":
            keras_class = "Precision" if path == "metrics.precision" else "Recall"
            return _metric(tf, f"{keras_class}OfArgmax", name, [], [_of_argmax(keras_class)])
        if kind == "output" and path in OF_ELEMENTS:
            return _metric(tf, f"{OF_ELEMENTS[path]}OfElements", name, [], [_of_elements(OF_ELEMENTS[path])])
        if path in ON_LOGITS and kind == "positive":
            keras_class, definition = ON_LOGITS[path]
            metric = _emit.expr('{cls}(name={name}, thresholds=0.5)', cls=keras_class, name=_quote(name))
            return MetricConversion(metric, [_emit.statement(definition.format(tf=tf))])
        if path == "metrics.auc" and kind == "softmax_positive":
            # A binary classifier of two logits: the AUC of softmax(logits)[:, 1], as tf.metrics took it.
            args = _auc_arguments(bound)
            thresholds = _carried(bound.get("thresholds"), "thresholds", ctx, call)
            if thresholds is not None and _emit.code(thresholds) != "None":
                args.append(_emit.keyword_arg("thresholds", thresholds))
            metric = cst.Call(cst.Name("AUCOfSecondSoftmax"), args=_emit.call_args(
                [_emit.keyword_arg("name", cst.SimpleString(_quote(name))), *args]))
            return MetricConversion(metric, [_emit.statement(AUC_OF_SECOND_SOFTMAX.format(tf=tf))])
        if (path, kind) not in TABLE:
            raise Unsupported("its predictions are not computed from the model output in a way e2k maps")
        keras, extra = TABLE[(path, kind)]
        args = [_emit.keyword_arg("name", cst.SimpleString(_quote(name)))]
        args += [_emit.keyword_arg(k, cst.parse_expression(v)) for k, v in extra.items()]
        if path == "metrics.auc":
            args += _auc_arguments(bound)
            thresholds = _carried(bound.get("thresholds"), "thresholds", ctx, call)
            if thresholds is not None and _emit.code(thresholds) != "None":
                # TF1 and Keras both add -1e-7 and 1 + 1e-7 to them and ignore num_thresholds.
                args.append(_emit.keyword_arg("thresholds", thresholds))
        return cst.Call(_emit.expr("{tf}.keras.metrics.{k}", tf=tf, k=keras), args=_emit.call_args(args))


# -- the rest of the catalogue ---------------------------------------------------------------------
#: tf.metrics functions of a tensor, not of labels and predictions.
VALUES_ONLY = ("metrics.mean", "metrics.mean_tensor", "metrics.percentage_below")
#: Casts of the labels that keep their values for the metric (see _check_labels).
LABEL_CASTS = ("cast", "to_float", "to_double", "to_int32", "to_int64")
TOP_K = ("nn.top_k", "math.top_k")


#: Metrics whose value is the same with labels and predictions swapped.
SYMMETRIC = frozenset({"metrics.accuracy", "metrics.mean_squared_error", "metrics.root_mean_squared_error",
                       "metrics.mean_absolute_error"})


def _are_labels(arg: cst.Arg, ctx=None) -> bool:
    try:
        _check_labels(arg, class_ids=True, ctx=ctx)
    except Unsupported:
        return False
    return True


def _check_labels(labels: cst.Arg, class_ids: bool = False, ctx=None) -> None:
    """The metric's labels must be the model_fn's ``labels`` (Keras metrics receive them as they
    come), or them cast to a float type, which keeps their values (Keras casts them too); metrics
    of class ids also take them cast to an integer type (``tf.cast(labels, tf.int64)``). A
    reshape to one column or one row (``[-1, 1]``, ``[-1]``, ``expand_dims(labels, -1)``,
    ``squeeze``) keeps their values too (Keras metrics match the ranks of labels and
    predictions), and with ``ctx`` a name bound once to such a value is followed
    (``labels_f = tf.cast(labels, tf.float32)``)."""
    from estimator2keras._units import value_of

    value = labels.value
    for _ in range(16):
        if isinstance(value, cst.Name) and value.value != "labels" and ctx is not None:
            bound_value = value_of(ctx, value)
            if bound_value is None:
                break
            value = bound_value
            continue
        if not (isinstance(value, cst.Call) and value.args):
            break
        function = _emit.code(value.func).split(".")[-1]
        if function in LABEL_CASTS:
            bound = bind(value, ("x", "dtype", "name")) if function == "cast" else {"dtype": None}
            if "x" not in bound and function == "cast" or "dtype" not in bound:
                break
            target = _emit.code(bound["dtype"].value) if function == "cast" else function
            if not ("float" in target or "double" in target or class_ids and "int" in target):
                break
            value = (bound["x"] if function == "cast" else value.args[0]).value
            continue
        if function in ("reshape", "expand_dims", "squeeze") and _keeps_values(value, function):
            value = value.args[0].value
            continue
        break
    if not (isinstance(value, cst.Name) and value.value == "labels"):
        raise Unsupported("the metric's labels are not the model_fn's `labels` (nor them cast to a float type, or "
                          "for class ids an integer type)")


def _keeps_values(call: cst.Call, function: str) -> bool:
    """``reshape(x, [-1, 1])``, ``reshape(x, [-1])``, ``expand_dims(x, -1)``, ``squeeze(x)`` or
    ``squeeze(x, axis=-1)`` / ``[1]``: one column or one row of the same values."""
    rest = [_emit.code(a.value).replace(" ", "") for a in call.args[1:] if a.keyword is None or a.keyword.value in (
        "shape", "axis")]
    if function == "reshape":
        return rest in (["[-1,1]"], ["[-1]"])
    if function == "expand_dims":
        return rest in (["-1"], ["1"])
    return rest in ([], ["-1"], ["1"], ["[1]"], ["[-1]"])


def _kind(derive, node: cst.BaseExpression) -> str | None:
    derived = derive(node)
    return derived.kind if derived else None


def _carried(arg: cst.Arg | None, what: str, ctx, call) -> cst.BaseExpression | None:
    """A setting of the metric (k, num_classes, thresholds...) that compile() can read where the
    model is built: a literal, ``params[...]``, or a module-level name; not a model_fn local."""
    if arg is None:
        return None
    function = call
    while function is not None and not isinstance(function, cst.FunctionDef):
        function = ctx.parent(function)
    local = set()
    if function is not None:
        local = {p.name.value for p in function.params.params if p.name.value != "params"}
        local |= {p.name.value for p in function.params.kwonly_params}
        for node in _emit_walk(function.body):
            if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
                local.add(node.target.value)
    for node in _emit_walk(arg.value):
        if isinstance(node, cst.Name) and node.value in local:
            raise Unsupported(f"`{what}=` is computed in the model_fn; e2k carries literals, params[...] and "
                              "module-level names into compile()")
    return arg.value


def _emit_walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, cst.Attribute):
            stack.append(current.value)  # `np.pi`: `pi` is no variable
            continue
        stack.extend(current.children)


def _metric(tf: str, cls: str, name: str, settings: list[tuple[str, cst.BaseExpression | None]],
            definitions: list[str] = (), keras: bool = False) -> cst.BaseExpression | MetricConversion:
    args = [_emit.keyword_arg("name", cst.SimpleString(_quote(name)))]
    args += [_emit.keyword_arg(k, v) for k, v in settings if v is not None]
    func = _emit.expr("{tf}.keras.metrics.{k}", tf=tf, k=cls) if keras else cst.Name(cls)
    metric = cst.Call(func, args=_emit.call_args(args))
    if not definitions:
        return metric
    return MetricConversion(metric, [_emit.statement(d.format(tf=tf)) for d in definitions])


def _activation(kind: str | None, what: str) -> cst.BaseExpression | None:
    if kind == "output":
        return None
    if kind in ("softmax", "sigmoid"):
        return cst.SimpleString(_quote(kind))
    raise Unsupported(f"its {what} are not the model output (nor its softmax or sigmoid), which the top k are taken of")


def _mean_of_values(call, ctx, tf, name, derive, bound, function):
    """mean and percentage_below of the labels or of the model output (its sigmoid, its softmax),
    as canned heads reported label/mean and prediction/mean; of anything else, refused."""
    values = bound.get("values")
    of_labels = values is not None and isinstance(values.value, cst.Name) and values.value.value == "labels"
    kind = None if values is None or of_labels else _kind(derive, values.value)
    if function == "mean_tensor" or not (of_labels or kind in ("output", "sigmoid", "softmax")):
        what = "one value per element, which compile() metrics do not return" if function == "mean_tensor" else \
            "a tensor the model_fn computes"
        raise Unsupported(
            f"tf.metrics.{function} averages {what}, while a metric in compile() sees only the labels and the "
            "model output (e2k converts the mean and percentage_below of those): compute the value from them "
            "in a Keras metric, or report it from a custom test_step")
    activation = cst.SimpleString(_quote(kind)) if kind in ("sigmoid", "softmax") else None
    if function == "mean":
        if of_labels:
            return _metric(tf, "MeanOfLabels", name, [], [MEAN_OF_LABELS])
        return _metric(tf, "MeanOfPredictions", name, [("activation", activation)], [MEAN_OF_PREDICTIONS])
    threshold = _carried(bound.get("threshold"), "threshold", ctx, call)
    if threshold is None:
        raise Unsupported("the metric needs its threshold")
    settings = [("threshold", threshold), ("of_labels", cst.Name("True") if of_labels else None),
                ("activation", activation)]
    return _metric(tf, "PercentageBelow", name, settings, [PERCENTAGE_BELOW])


MEAN_OF_LABELS = """
class MeanOfLabels({tf}.keras.metrics.Mean):
    \"\"\"tf.metrics.mean(labels): the mean of all the labels' values.\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state({tf}.reshape({tf}.cast(y_true, {tf}.float32), [-1]))
"""
MEAN_OF_PREDICTIONS = """
class MeanOfPredictions({tf}.keras.metrics.Mean):
    \"\"\"tf.metrics.mean of the model output (or of its sigmoid or softmax): the mean of all its values.\"\"\"

    def __init__(self, activation=None, name=None):
        super().__init__(name=name)
        self.activation = activation

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self.activation is not None:
            y_pred = getattr({tf}.nn, self.activation)(y_pred)
        return super().update_state({tf}.reshape({tf}.cast(y_pred, {tf}.float32), [-1]))
"""
PERCENTAGE_BELOW = """
class PercentageBelow({tf}.keras.metrics.Mean):
    \"\"\"tf.metrics.percentage_below: the share of the values (model output or labels) below the threshold.\"\"\"

    def __init__(self, threshold, of_labels=False, activation=None, name=None):
        super().__init__(name=name)
        self.threshold, self.of_labels, self.activation = threshold, of_labels, activation

    def update_state(self, y_true, y_pred, sample_weight=None):
        values = y_true if self.of_labels else y_pred
        if self.activation is not None:
            values = getattr({tf}.nn, self.activation)(values)
        below = {tf}.cast({tf}.less({tf}.cast(values, {tf}.float32), self.threshold), {tf}.float32)
        return super().update_state({tf}.reshape(below, [-1]))
"""


def _counts(self, call, ctx, tf, name, derive, bound):
    """true_positives & co. count 0/1 predictions; the *_at_thresholds ones probabilities above each threshold."""
    path = ctx.call_api_path(call)
    keras = COUNTS[path]
    if "labels" not in bound or "predictions" not in bound:
        raise Unsupported("the metric needs labels and predictions")
    _check_labels(bound["labels"], ctx=ctx)
    kind = _kind(derive, bound["predictions"].value)
    if path.endswith("_at_thresholds"):
        thresholds = _carried(bound.get("thresholds"), "thresholds", ctx, call)
        if thresholds is None:
            raise Unsupported("the metric needs its thresholds")
        if kind == "output":  # probabilities, as TF1 asserted
            return _metric(tf, keras, name, [("thresholds", thresholds)], keras=True)
        if kind == "sigmoid":
            return _metric(tf, f"{keras}OfLogits", name, [("thresholds", thresholds)], [_of_logits(keras)])
        raise Unsupported("its predictions are not the model output (probabilities) nor its sigmoid")
    if kind == "rounded":
        return _metric(tf, keras, name, [], keras=True)
    if kind == "positive":
        return _metric(tf, f"{keras}OfLogits", name, [], [_of_logits(keras)])
    if kind == "argmax":
        return _metric(tf, f"{keras}OfArgmax", name, [], [_of_argmax(keras)])
    raise Unsupported("its predictions are not classes computed from the model output (tf.round(tf.sigmoid(logits)), "
                      "logits > 0, tf.round(probabilities), tf.argmax(logits, -1)); TF1 counts any nonzero prediction "
                      "as positive")


def _at_thresholds(self, call, ctx, tf, name, derive, bound):
    """precision_at_thresholds / recall_at_thresholds: one value per threshold, TF1's epsilon kept."""
    path = ctx.call_api_path(call)
    _check_labels(bound["labels"], ctx=ctx)
    thresholds = _carried(bound.get("thresholds"), "thresholds", ctx, call)
    if thresholds is None:
        raise Unsupported("the metric needs its thresholds")
    kind = _kind(derive, bound["predictions"].value)
    if kind not in ("output", "sigmoid"):
        raise Unsupported("its predictions are not the model output (probabilities) nor its sigmoid")
    cls = "PrecisionAtThresholds" if path == "metrics.precision_at_thresholds" else "RecallAtThresholds"
    settings = [("thresholds", thresholds), ("from_logits", cst.Name("True") if kind == "sigmoid" else None)]
    return _metric(tf, cls, name, settings, [AT_THRESHOLDS[cls]])


def _sensitivity(self, call, ctx, tf, name, derive, bound):
    path = ctx.call_api_path(call)
    _check_labels(bound["labels"], ctx=ctx)
    kind = _kind(derive, bound["predictions"].value)
    if kind not in ("output", "sigmoid"):
        raise Unsupported("its predictions are not the model output (probabilities) nor its sigmoid")
    target = "specificity" if path == "metrics.sensitivity_at_specificity" else "sensitivity"
    value = _carried(bound.get(target), target, ctx, call)
    if value is None:
        raise Unsupported(f"the metric needs its {target}")
    cls = "SensitivityAtSpecificity" if target == "specificity" else "SpecificityAtSensitivity"
    settings = [(target, value), ("num_thresholds", _carried(bound.get("num_thresholds"), "num_thresholds", ctx, call)),
                ("from_logits", cst.Name("True") if kind == "sigmoid" else None)]
    return _metric(tf, cls, name, settings, [CONFUSION_AT_THRESHOLDS, SENSITIVITY[cls]])


def _top_k(self, call, ctx, tf, name, derive, bound):
    """precision/recall/average precision at k of sparse labels (class ids)."""
    path = ctx.call_api_path(call)
    _check_labels(bound["labels"], class_ids=True, ctx=ctx)
    if "predictions_idx" in bound:  # precision_at_top_k(labels, tf.nn.top_k(logits, k).indices)
        scores, k = _top_k_source(bound["predictions_idx"].value, ctx)
    else:
        scores, k = bound["predictions"].value, _carried(bound.get("k"), "k", ctx, call)
    if k is None:
        raise Unsupported("the metric needs its k")
    activation = _activation(_kind(derive, scores), "predictions")
    if "average_precision" in path:
        return _metric(tf, "AveragePrecisionAtK", name, [("k", k), ("activation", activation)],
                       [SPARSE_TOP_K, TOP_K_METRICS["AveragePrecisionAtK"]])
    cls = "PrecisionAtK" if "precision" in path else "RecallAtK"
    class_id = _carried(bound.get("class_id"), "class_id", ctx, call)
    if class_id is not None and _emit.code(class_id) == "None":
        class_id = None
    settings = [("k", k), ("class_id", class_id), ("activation", activation)]
    return _metric(tf, cls, name, settings, [SPARSE_TOP_K, TOP_K_METRICS[cls]])


def _top_k_source(node: cst.BaseExpression, ctx):
    """``tf.nn.top_k(scores, k).indices`` or ``...[1]``: (scores, k)."""
    call = None
    if isinstance(node, cst.Attribute) and node.attr.value == "indices":
        call = node.value
    elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
            and _emit.code(node.slice[0].slice.value) == "1":
        call = node.value
    if not (isinstance(call, cst.Call) and ctx.call_api_path(call) in TOP_K):
        raise Unsupported("its predictions_idx are not `tf.nn.top_k(<model output>, k).indices` written in the call")
    bound = bind(call, ("input", "k", "sorted", "name"))
    if "input" not in bound or "k" not in bound:
        raise Unsupported("tf.nn.top_k needs its input and k here")
    return bound["input"].value, _carried(bound["k"], "k", ctx, call)


def _classes(self, call, ctx, tf, name, derive, bound):
    """mean_iou and mean_per_class_accuracy of the predicted classes (argmax of the output)."""
    path = ctx.call_api_path(call)
    _check_labels(bound["labels"], class_ids=True, ctx=ctx)
    num_classes = _carried(bound.get("num_classes"), "num_classes", ctx, call)
    if num_classes is None:
        raise Unsupported("the metric needs num_classes")
    if _kind(derive, bound["predictions"].value) != "argmax":
        raise Unsupported("its predictions are not the class the model output scores highest (tf.argmax(logits, -1))")
    if path == "metrics.mean_iou":
        return _metric(tf, "MeanIoU", name, [("num_classes", num_classes), ("sparse_y_pred", cst.Name("False"))],
                       keras=True)
    return _metric(tf, "MeanPerClassAccuracy", name, [("num_classes", num_classes)], [MEAN_PER_CLASS_ACCURACY])


def _regression(self, call, ctx, tf, name, derive, bound):
    """mean_cosine_distance and mean_relative_error of the model output."""
    path = ctx.call_api_path(call)
    _check_labels(bound["labels"], ctx=ctx)
    if _kind(derive, bound["predictions"].value) != "output":
        raise Unsupported("its predictions are not the model output")
    if path == "metrics.mean_cosine_distance":
        dim = _carried(bound.get("dim"), "dim", ctx, call)
        if dim is None:
            raise Unsupported("the metric needs its dim")
        return _metric(tf, "MeanCosineDistance", name, [("dim", dim)], [MEAN_COSINE_DISTANCE])
    normalizer = bound.get("normalizer")
    if normalizer is None or not (isinstance(normalizer.value, cst.Name) and normalizer.value.value == "labels"):
        raise Unsupported("its normalizer is not the labels: Keras's MeanRelativeError divides by a fixed tensor, "
                          "e2k converts `normalizer=labels`")
    return _metric(tf, "MeanRelativeErrorOfLabels", name, [], [MEAN_RELATIVE_ERROR])


COUNTS = {
    "metrics.true_positives": "TruePositives", "metrics.false_positives": "FalsePositives",
    "metrics.true_negatives": "TrueNegatives", "metrics.false_negatives": "FalseNegatives",
    "metrics.true_positives_at_thresholds": "TruePositives",
    "metrics.false_positives_at_thresholds": "FalsePositives",
    "metrics.true_negatives_at_thresholds": "TrueNegatives",
    "metrics.false_negatives_at_thresholds": "FalseNegatives",
}
OTHER_METRICS = {
    **{path: _counts for path in COUNTS},
    "metrics.precision_at_thresholds": _at_thresholds, "metrics.recall_at_thresholds": _at_thresholds,
    "metrics.sensitivity_at_specificity": _sensitivity, "metrics.specificity_at_sensitivity": _sensitivity,
    "metrics.precision_at_k": _top_k, "metrics.sparse_precision_at_k": _top_k, "metrics.recall_at_k": _top_k,
    "metrics.precision_at_top_k": _top_k, "metrics.recall_at_top_k": _top_k,
    "metrics.average_precision_at_k": _top_k, "metrics.sparse_average_precision_at_k": _top_k,
    "metrics.mean_iou": _classes, "metrics.mean_per_class_accuracy": _classes,
    "metrics.mean_cosine_distance": _regression, "metrics.mean_relative_error": _regression,
}


#: TF1's streaming means over every element, whose Keras classes average each example's values
#: along the last axis: with rank-1 labels and predictions that reduces a whole batch to one value,
#: and evaluate() then averages the batches' means (a partial last batch weighs as a full one).
#: Fed one element per row, the Keras class counts every element once, whatever the rank.
OF_ELEMENTS = {
    "metrics.mean_squared_error": "MeanSquaredError",
    "metrics.mean_absolute_error": "MeanAbsoluteError",
}


AUC_OF_SECOND_SOFTMAX = """
class AUCOfSecondSoftmax({tf}.keras.metrics.AUC):
    \"\"\"AUC of the second class's probability, softmax(logits)[:, 1], as tf.metrics.auc took it.\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, {tf}.nn.softmax(y_pred)[:, 1], sample_weight)
"""


AUC_OF_ONE_HOT_SOFTMAX = """
class AUCOfOneHotSoftmax({tf}.keras.metrics.AUC):
    \"\"\"AUC of every class's probability, softmax(logits), against the class ids' one-hot
    code, all flattened into one binary label each, as tf.metrics.auc took them.\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        ids = {tf}.cast({tf}.reshape(y_true, [-1]), {tf}.int32)
        return super().update_state({tf}.one_hot(ids, {tf}.shape(y_pred)[-1]), {tf}.nn.softmax(y_pred), sample_weight)
"""


def _one_hot_of_labels(node: cst.BaseExpression, ctx) -> bool:
    """``tf.one_hot(labels, depth)`` of the labels as they come (or cast), 1 / True on and
    0 / False off, on the last axis: the code of the class ids, whatever its dtype."""
    if not (isinstance(node, cst.Call) and ctx.call_api_path(node) == "one_hot"):
        return False
    bound = bind(node, ("indices", "depth", "on_value", "off_value", "axis", "dtype", "name"))
    if "indices" not in bound or not _are_labels(bound["indices"], ctx):
        return False
    on, off, axis = (_emit.code(bound[k].value) if k in bound else None for k in ("on_value", "off_value", "axis"))
    return on in (None, "1", "1.0", "True") and off in (None, "0", "0.0", "False") and axis in (None, "-1")


def _of_elements(keras: str) -> str:
    return f"""
class {keras}OfElements({{tf}}.keras.metrics.{keras}):
    \"\"\"{keras} over every element, as tf.metrics averaged it whatever the rank and the batch size.\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state({{tf}}.reshape(y_true, [-1, 1]), {{tf}}.reshape(y_pred, [-1, 1]))
"""


def _of_logits(keras: str) -> str:
    return f"""
class {keras}OfLogits({{tf}}.keras.metrics.{keras}):
    \"\"\"{keras} of sigmoid(logits), as tf.metrics counted them of the probabilities.\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, {{tf}}.sigmoid(y_pred), sample_weight)
"""


def _of_argmax(keras: str) -> str:
    return f"""
class {keras}OfArgmax({{tf}}.keras.metrics.{keras}):
    \"\"\"{keras} of the predicted class, positive when not 0, as tf.metrics counted tf.argmax(logits, -1).\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        positive = {{tf}}.cast({{tf}}.not_equal({{tf}}.argmax(y_pred, axis=-1), 0), {{tf}}.float32)
        return super().update_state(y_true, positive, sample_weight)
"""


#: Every class the three functions above write, for the catalogue of helpers
#: (estimator2keras._helpers.catalogue): written once in the program's helpers module.
GENERATED = {
    **{f"{keras}OfElements": _of_elements(keras) for keras in OF_ELEMENTS.values()},
    **{f"{keras}OfLogits": _of_logits(keras) for keras in sorted(set(COUNTS.values()))},
    **{f"{keras}OfArgmax": _of_argmax(keras) for keras in (*sorted(set(COUNTS.values())), "Precision", "Recall")},
}


AT_THRESHOLDS = {
    cls: f"""
class {cls}({{tf}}.keras.metrics.{keras}):
    \"\"\"tf.metrics.{function}: one value per threshold, {formula} as TF1 divided.\"\"\"

    def __init__(self, thresholds, from_logits=False, name=None):
        super().__init__(thresholds=list(thresholds), name=name)
        self.from_logits = from_logits

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self.from_logits:
            y_pred = {{tf}}.sigmoid(y_pred)
        return super().update_state(y_true, y_pred, sample_weight)

    def result(self):
        return self.true_positives / (1e-7 + self.true_positives + self.{other})
"""
    for cls, keras, function, formula, other in (
        ("PrecisionAtThresholds", "Precision", "precision_at_thresholds", "tp / (1e-7 + tp + fp)", "false_positives"),
        ("RecallAtThresholds", "Recall", "recall_at_thresholds", "tp / (1e-7 + tp + fn)", "false_negatives"),
    )
}

#: TF1's counts at thresholds (``_confusion_matrix_at_thresholds``), which Keras's
#: SensitivityAtSpecificity and SpecificityAtSensitivity do not reproduce: Keras picks other
#: thresholds and another point of the curve.
CONFUSION_AT_THRESHOLDS = """
class ConfusionMatrixAtThresholds({tf}.keras.metrics.Metric):
    \"\"\"tf.metrics' counts at thresholds: a prediction is positive at each threshold it exceeds.\"\"\"

    def __init__(self, thresholds, from_logits=False, name=None):
        super().__init__(name=name)
        self.thresholds, self.from_logits = list(thresholds), from_logits
        shape = (len(self.thresholds),)
        self.tp = self.add_weight(name="true_positives", shape=shape, initializer="zeros")
        self.fp = self.add_weight(name="false_positives", shape=shape, initializer="zeros")
        self.tn = self.add_weight(name="true_negatives", shape=shape, initializer="zeros")
        self.fn = self.add_weight(name="false_negatives", shape=shape, initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self.from_logits:
            y_pred = {tf}.sigmoid(y_pred)
        predictions = {tf}.reshape({tf}.cast(y_pred, {tf}.float32), [1, -1])
        labels = {tf}.reshape({tf}.cast(y_true, {tf}.bool), [1, -1])
        positive = predictions > {tf}.constant(self.thresholds, {tf}.float32)[:, None]
        for count, condition in ((self.tp, labels & positive), (self.fp, ~labels & positive),
                                 (self.tn, ~labels & ~positive), (self.fn, labels & ~positive)):
            count.assign_add({tf}.reduce_sum({tf}.cast(condition, {tf}.float32), 1))

    def reset_state(self):
        for variable in self.variables:
            variable.assign({tf}.zeros(variable.shape, variable.dtype))

    def counts(self):
        return [{tf}.convert_to_tensor(v) for v in (self.tp, self.fp, self.tn, self.fn)]
"""
SENSITIVITY = {
    "SensitivityAtSpecificity": """
class SensitivityAtSpecificity(ConfusionMatrixAtThresholds):
    \"\"\"tf.metrics.sensitivity_at_specificity: the sensitivity at the threshold whose specificity is nearest.\"\"\"

    def __init__(self, specificity, num_thresholds=200, from_logits=False, name=None):
        thresholds = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        super().__init__([0.0 - 1e-7] + thresholds + [1.0 + 1e-7], from_logits, name)
        self.specificity = specificity

    def result(self):
        tp, fp, tn, fn = self.counts()
        specificities = tn / (tn + fp + 1e-7)
        index = {tf}.cast({tf}.argmin({tf}.abs(specificities - self.specificity), 0), {tf}.int32)
        return tp[index] / (tp[index] + fn[index] + 1e-7)
""",
    "SpecificityAtSensitivity": """
class SpecificityAtSensitivity(ConfusionMatrixAtThresholds):
    \"\"\"tf.metrics.specificity_at_sensitivity: the specificity at the last threshold whose sensitivity is nearest.\"\"\"

    def __init__(self, sensitivity, num_thresholds=200, from_logits=False, name=None):
        thresholds = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        super().__init__([0.0 - 1e-7] + thresholds + [1.0 - 1e-7], from_logits, name)
        self.sensitivity = sensitivity

    def result(self):
        tp, fp, tn, fn = self.counts()
        distance = {tf}.abs(tp / (tp + fn + 1e-7) - self.sensitivity)
        nearest = {tf}.cumsum({tf}.cast({tf}.equal(distance, {tf}.reduce_min(distance)), {tf}.int64))
        index = {tf}.cast({tf}.argmax(nearest, 0), {tf}.int32)
        return tn[index] / (tn[index] + fp[index] + 1e-7)
""",
}

#: What TF1's top-k metrics share: the k classes scored highest and the labels as sets of class ids.
SPARSE_TOP_K = """
class SparseTopKMetric({tf}.keras.metrics.Metric):
    \"\"\"The k classes scored highest and the labels (class ids), as sets, as tf.metrics' top-k metrics took them.\"\"\"

    def __init__(self, k, class_id=None, activation=None, name=None):
        super().__init__(name=name)
        self.k, self.class_id, self.activation = k, class_id, activation

    def top_k_and_labels(self, y_true, y_pred):
        if self.activation is not None:
            y_pred = getattr({tf}.nn, self.activation)(y_pred)
        top_k = {tf}.cast({tf}.math.top_k(y_pred, self.k).indices, {tf}.int64)
        labels = {tf}.cast(y_true, {tf}.int64)
        if labels.shape.rank == top_k.shape.rank - 1:
            labels = {tf}.expand_dims(labels, -1)
        if self.class_id is None:
            return top_k, labels
        return self.select(top_k), self.select(labels)

    def select(self, ids):
        shape = {tf}.shape(ids, out_type={tf}.int64)
        one_per_row = {tf}.concat([shape[:-1], {tf}.constant([1], {tf}.int64)], 0)
        kept = {tf}.sets.intersection({tf}.fill(one_per_row, {tf}.constant(self.class_id, {tf}.int64)), ids)
        return {tf}.SparseTensor(kept.indices, kept.values, shape)

    def reset_state(self):
        for variable in self.variables:
            variable.assign({tf}.zeros(variable.shape, variable.dtype))
"""
TOP_K_METRICS = {
    "PrecisionAtK": """
class PrecisionAtK(SparseTopKMetric):
    \"\"\"tf.metrics.precision_at_k: of the k classes scored highest, the share among the example's labels.\"\"\"

    def __init__(self, k, class_id=None, activation=None, name=None):
        super().__init__(k, class_id, activation, name)
        self.true_positives = self.add_weight(name="true_positives", initializer="zeros", dtype="float64")
        self.false_positives = self.add_weight(name="false_positives", initializer="zeros", dtype="float64")

    def update_state(self, y_true, y_pred, sample_weight=None):
        top_k, labels = self.top_k_and_labels(y_true, y_pred)
        hits = {tf}.sets.size({tf}.sets.intersection(top_k, labels))
        misses = {tf}.sets.size({tf}.sets.difference(top_k, labels))
        self.true_positives.assign_add({tf}.cast({tf}.reduce_sum(hits), {tf}.float64))
        self.false_positives.assign_add({tf}.cast({tf}.reduce_sum(misses), {tf}.float64))

    def result(self):
        return self.true_positives / (self.true_positives + self.false_positives)
""",
    "RecallAtK": """
class RecallAtK(SparseTopKMetric):
    \"\"\"tf.metrics.recall_at_k: of the example's labels, the share among the k classes scored highest.\"\"\"

    def __init__(self, k, class_id=None, activation=None, name=None):
        super().__init__(k, class_id, activation, name)
        self.true_positives = self.add_weight(name="true_positives", initializer="zeros", dtype="float64")
        self.false_negatives = self.add_weight(name="false_negatives", initializer="zeros", dtype="float64")

    def update_state(self, y_true, y_pred, sample_weight=None):
        top_k, labels = self.top_k_and_labels(y_true, y_pred)
        hits = {tf}.sets.size({tf}.sets.intersection(top_k, labels))
        missed = {tf}.sets.size({tf}.sets.difference(top_k, labels, aminusb=False))
        self.true_positives.assign_add({tf}.cast({tf}.reduce_sum(hits), {tf}.float64))
        self.false_negatives.assign_add({tf}.cast({tf}.reduce_sum(missed), {tf}.float64))

    def result(self):
        return self.true_positives / (self.true_positives + self.false_negatives)
""",
    "AveragePrecisionAtK": """
class AveragePrecisionAtK(SparseTopKMetric):
    \"\"\"tf.metrics.average_precision_at_k: per example, sum of precision@i at ranks i holding a label / min(labels, k).\"\"\"

    def __init__(self, k, activation=None, name=None):
        super().__init__(k, None, activation, name)
        self.total = self.add_weight(name="total", initializer="zeros", dtype="float64")
        self.count = self.add_weight(name="count", initializer="zeros", dtype="float64")

    def update_state(self, y_true, y_pred, sample_weight=None):
        top_k, labels = self.top_k_and_labels(y_true, y_pred)
        num_classes = {tf}.cast({tf}.shape(y_pred)[-1], {tf}.int64)
        labels = {tf}.where(labels >= num_classes, -{tf}.ones_like(labels), labels)
        labels_per_k = {tf}.tile({tf}.expand_dims(labels, -2), [1] * (labels.shape.rank - 1) + [self.k, 1])
        relevant = {tf}.sets.size({tf}.sets.intersection({tf}.expand_dims(top_k, -1), labels_per_k))
        relevant = {tf}.cast(relevant, {tf}.float64)
        retrieved = {tf}.cumsum({tf}.ones_like(relevant), axis=-1)
        precision_sum = {tf}.reduce_sum({tf}.cumsum(relevant, axis=-1) / retrieved * relevant, axis=-1)
        num_relevant = {tf}.minimum({tf}.reduce_sum({tf}.cast(labels >= 0, {tf}.int64), axis=-1), self.k)
        average_precision = precision_sum / {tf}.cast(num_relevant, {tf}.float64)
        self.total.assign_add({tf}.reduce_sum(average_precision))
        self.count.assign_add({tf}.cast({tf}.size(average_precision), {tf}.float64))

    def result(self):
        return {tf}.math.divide_no_nan(self.total, self.count)
""",
}

MEAN_PER_CLASS_ACCURACY = """
class MeanPerClassAccuracy({tf}.keras.metrics.Metric):
    \"\"\"tf.metrics.mean_per_class_accuracy: each class's accuracy averaged over all num_classes classes.\"\"\"

    def __init__(self, num_classes, name=None):
        super().__init__(name=name)
        self.num_classes = num_classes
        self.total = self.add_weight(name="total", shape=(num_classes,), initializer="zeros")
        self.count = self.add_weight(name="count", shape=(num_classes,), initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = {tf}.reshape({tf}.cast(y_true, {tf}.int64), [-1])
        predicted = {tf}.reshape({tf}.argmax(y_pred, axis=-1), [-1])
        correct = {tf}.cast({tf}.equal(predicted, labels), {tf}.float32)
        self.total.assign_add({tf}.math.unsorted_segment_sum({tf}.ones_like(correct), labels, self.num_classes))
        self.count.assign_add({tf}.math.unsorted_segment_sum(correct, labels, self.num_classes))

    def reset_state(self):
        for variable in self.variables:
            variable.assign({tf}.zeros(variable.shape, variable.dtype))

    def result(self):
        total, count = {tf}.convert_to_tensor(self.total), {tf}.convert_to_tensor(self.count)
        return {tf}.reduce_mean({tf}.math.divide_no_nan(count, {tf}.maximum(total, 0.0)))
"""

MEAN_COSINE_DISTANCE = """
class MeanCosineDistance({tf}.keras.metrics.Mean):
    \"\"\"tf.metrics.mean_cosine_distance: 1 - mean of sum(labels * predictions) along dim, not normalised.\"\"\"

    def __init__(self, dim, name=None):
        super().__init__(name=name)
        self.dim = dim

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = {tf}.reshape({tf}.cast(y_true, y_pred.dtype), {tf}.shape(y_pred))
        return super().update_state({tf}.reduce_sum(y_pred * y_true, axis=[self.dim], keepdims=True))

    def result(self):
        return 1.0 - super().result()
"""

MEAN_RELATIVE_ERROR = """
class MeanRelativeErrorOfLabels({tf}.keras.metrics.Mean):
    \"\"\"tf.metrics.mean_relative_error with normalizer=labels: mean |labels - predictions| / labels, 0 at 0.\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = {tf}.reshape({tf}.cast(y_true, y_pred.dtype), {tf}.shape(y_pred))
        errors = {tf}.where({tf}.equal(y_true, 0.0), {tf}.zeros_like(y_true), {tf}.abs(y_true - y_pred) / y_true)
        return super().update_state(errors)
"""


def _followed(node: cst.BaseExpression, ctx) -> cst.BaseExpression:
    """``node``, or the value a name of it is bound to once (``label_ids = tf.argmax(labels, 1)``)."""
    from estimator2keras._units import value_of

    for _ in range(16):
        if not isinstance(node, cst.Name) or node.value == "labels":
            break
        bound = value_of(ctx, node)
        if bound is None:
            break
        node = bound
    return node


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
