"""The tf.metrics catalogue (E2K202): every tf.compat.v1.metrics function is converted to a Keras
metric computing the same value, or refused by name. Each converted one is checked against TF1's
own metric: the TF1 metric runs in a graph session on a few batches, the Keras metric e2k wrote
(its classes executed from the rewritten program) on the same labels and model outputs."""
from __future__ import annotations

import ast

import numpy as np
import pytest

from estimator2keras import _helpers
from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import numpy as np
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices((np.zeros((4, 4), np.float32), {labels})).batch(2)


def model_fn(features, labels, mode, params):
    output = tf.compat.v1.layers.dense(features, {units}{activation})
    loss = {loss}
    metric = {metric}
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={{"m": metric}})
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


NUM_CLASSES = 4
estimator = tf.estimator.Estimator(model_fn, params={{"k": 2}})
estimator.train(input_fn, steps=1)
print(estimator.evaluate(input_fn)["m"])
'''

#: How the model output and labels look: units, activation, loss, the input_fn's labels, and
#: a generator of (labels, output) batches.
KINDS = {
    "classes": (4, "", "tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, output)",
                "np.zeros((4,), np.int64)"),
    "logit": (1, "", "tf.compat.v1.losses.sigmoid_cross_entropy(labels, output)", "np.zeros((4, 1), np.float32)"),
    "probability": (1, ", activation=tf.sigmoid", "tf.compat.v1.losses.mean_squared_error(labels, output)",
                    "np.zeros((4, 1), np.float32)"),
    "vector": (3, "", "tf.compat.v1.losses.mean_squared_error(labels, output)", "np.zeros((4, 3), np.float32)"),
    "pair": (2, "", "tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, output)", "np.zeros((4,), np.int64)"),
}


def batches(kind: str, seed: int = 0):
    rng = np.random.RandomState(seed)
    out = []
    for size in (7, 5, 6):
        if kind == "classes":
            labels = rng.choice([0, 1, 2], size=size).astype(np.int64)  # class 3 never occurs
            output = rng.normal(size=(size, 4)).astype(np.float32)
            output[0] = output[1]  # ties in the top k, as TF1 broke them
        elif kind == "logit":
            labels = rng.randint(0, 2, size=(size, 1)).astype(np.float32)
            output = rng.normal(size=(size, 1)).astype(np.float32) * 2
            output[1, 0], output[2, 0] = 20.0, -120.0  # sigmoid exactly 1 and 0: the edge thresholds
        elif kind == "pair":  # a binary classifier of two logits
            labels = rng.randint(0, 2, size=size).astype(np.int64)
            output = rng.normal(size=(size, 2)).astype(np.float32)
        elif kind == "probability":
            labels = rng.randint(0, 2, size=(size, 1)).astype(np.float32)
            output = rng.uniform(size=(size, 1)).astype(np.float32)
            output[0, 0], output[1, 0], output[2, 0] = 0.5, 0.0, 1.0
        else:
            labels = rng.normal(size=(size, 3)).astype(np.float32)
            labels[0, 0] = 0.0
            output = rng.normal(size=(size, 3)).astype(np.float32)
        out.append((labels, output))
    return out


M = "tf.compat.v1.metrics."
CONVERTED = [
    ("classes", M + "mean_per_class_accuracy(labels, tf.argmax(output, 1), 4)", "MeanPerClassAccuracy"),
    ("classes", M + "mean_per_class_accuracy(labels, tf.argmax(tf.nn.softmax(output), axis=-1), NUM_CLASSES)",
     "MeanPerClassAccuracy"),
    ("classes", M + "mean_iou(labels, tf.argmax(output, 1), 4)", "MeanIoU"),
    ("classes", M + "precision_at_k(labels, output, 2)", "PrecisionAtK"),
    ("classes", M + "precision_at_k(tf.cast(labels, tf.int64), output, params['k'], class_id=1)", "PrecisionAtK"),
    ("classes", M + "sparse_precision_at_k(labels, tf.nn.softmax(output), 1)", "PrecisionAtK"),
    ("classes", M + "recall_at_k(labels, output, 2)", "RecallAtK"),
    ("classes", M + "recall_at_k(labels, output, 1, class_id=2)", "RecallAtK"),
    ("classes", M + "precision_at_top_k(labels, tf.nn.top_k(output, 2).indices)", "PrecisionAtK"),
    ("classes", M + "recall_at_top_k(labels, tf.nn.top_k(output, k=3)[1], k=3)", "RecallAtK"),
    ("classes", M + "average_precision_at_k(labels, output, 3)", "AveragePrecisionAtK"),
    ("classes", M + "sparse_average_precision_at_k(labels, output, 1)", "AveragePrecisionAtK"),
    ("classes", M + "accuracy(labels, tf.argmax(output, 1))", "SparseCategoricalAccuracy"),
    ("pair", M + "auc(labels, tf.nn.softmax(output)[:, 1])", "AUCOfSecondSoftmax"),
    ("pair", M + "auc(labels, tf.nn.softmax(output)[:, 1], curve='PR', summation_method='careful_interpolation')",
     "AUCOfSecondSoftmax"),
    # Census custom Estimator: the AUC of the one-hot code of the class ids and every class's probability.
    ("classes", M + "auc(tf.one_hot(labels, 4, on_value=True, off_value=False, dtype=tf.bool), tf.nn.softmax(output))",
     "AUCOfOneHotSoftmax"),
    ("pair", M + "auc(tf.one_hot(labels, depth=2), tf.nn.softmax(output), summation_method='careful_interpolation')",
     "AUCOfOneHotSoftmax"),
    # Labels and predictions swapped: the same value for metrics symmetric in them.
    ("classes", M + "accuracy(tf.argmax(output, 1), labels)", "SparseCategoricalAccuracy"),
    ("vector", M + "root_mean_squared_error(output, labels)", "RootMeanSquaredError"),
    ("classes", M + "precision(labels, tf.argmax(output, 1))", "PrecisionOfArgmax"),
    ("classes", M + "recall(labels, tf.argmax(output, axis=-1))", "RecallOfArgmax"),
    ("classes", M + "true_positives(labels, tf.argmax(output, 1))", "TruePositivesOfArgmax"),
    ("classes", M + "false_negatives(labels, tf.argmax(tf.nn.softmax(output), 1))", "FalseNegativesOfArgmax"),
    ("probability", M + "auc(labels, output, thresholds=[0.2, 0.5, 0.7])", "AUC"),
    ("logit", M + "auc(labels, tf.sigmoid(output), num_thresholds=3, thresholds=[0.3, 0.6])", "AUC"),
    ("logit", M + "true_positives(labels, tf.round(tf.sigmoid(output)))", "TruePositivesOfLogits"),
    ("logit", M + "false_positives(labels, output > 0)", "FalsePositivesOfLogits"),
    ("logit", M + "true_negatives(labels, tf.cast(tf.round(tf.sigmoid(output)), tf.int64))", "TrueNegativesOfLogits"),
    ("probability", M + "false_negatives(labels, tf.round(output))", "FalseNegatives"),
    ("probability", M + "true_positives(labels, output > 0.5)", "TruePositives"),
    ("logit", M + "true_positives_at_thresholds(labels, tf.sigmoid(output), [0.2, 0.5, 0.7])",
     "TruePositivesOfLogits"),
    ("probability", M + "false_negatives_at_thresholds(labels, output, [0.25, 0.5])", "FalseNegatives"),
    ("probability", M + "true_negatives_at_thresholds(labels, output, thresholds=[0.5])", "TrueNegatives"),
    ("probability", M + "false_positives_at_thresholds(labels, output, [0.1, 0.9])", "FalsePositives"),
    ("probability", M + "precision_at_thresholds(labels, output, [0.3, 0.5, 0.6])", "PrecisionAtThresholds"),
    ("logit", M + "recall_at_thresholds(labels, tf.sigmoid(output), [0.3, 0.5])", "RecallAtThresholds"),
    ("probability", M + "sensitivity_at_specificity(labels, output, 0.6, num_thresholds=50)",
     "SensitivityAtSpecificity"),
    ("logit", M + "sensitivity_at_specificity(labels, tf.sigmoid(output), specificity=0.4)",
     "SensitivityAtSpecificity"),
    ("probability", M + "specificity_at_sensitivity(labels, output, 0.7)", "SpecificityAtSensitivity"),
    ("logit", M + "specificity_at_sensitivity(labels, tf.sigmoid(output), 0.5, num_thresholds=20)",
     "SpecificityAtSensitivity"),
    ("probability", M + "specificity_at_sensitivity(labels, output, 0.0)", "SpecificityAtSensitivity"),
    ("probability", M + "sensitivity_at_specificity(labels, output, 1.0)", "SensitivityAtSpecificity"),
    ("probability", M + "auc(labels, output, num_thresholds=50)", "AUC"),
    ("probability", M + "auc(tf.cast(labels, dtype=tf.float64), output)", "AUC"),
    ("classes", M + "accuracy(tf.compat.v1.to_float(labels), tf.argmax(output, 1))", "SparseCategoricalAccuracy"),
    ("classes", M + "mean_iou(tf.compat.v1.to_int32(labels), tf.argmax(output, 1), 4)", "MeanIoU"),
    ("vector", M + "mean_cosine_distance(labels, output, dim=1)", "MeanCosineDistance"),
    ("vector", M + "mean_relative_error(labels, output, labels)", "MeanRelativeErrorOfLabels"),
    ("vector", M + "root_mean_squared_error(labels, output)", "RootMeanSquaredError"),
    ("vector", M + "mean(output)", "MeanOfPredictions"),
    ("logit", M + "mean(tf.sigmoid(output))", "MeanOfPredictions"),
    ("vector", M + "mean(labels)", "MeanOfLabels"),
    ("classes", M + "mean(values=labels)", "MeanOfLabels"),
    ("vector", M + "percentage_below(output, 0.5)", "PercentageBelow"),
    ("classes", M + "percentage_below(tf.nn.softmax(output), threshold=0.3)", "PercentageBelow"),
    ("vector", M + "percentage_below(labels, -0.2)", "PercentageBelow"),
]

REFUSED = [
    ("vector", M + "mean(output * 2.0)", "averages a tensor the model_fn computes"),
    ("vector", M + "mean(loss)", "averages a tensor the model_fn computes"),
    ("vector", M + "mean_tensor(output)", "averages one value per element"),
    ("vector", M + "percentage_below(tf.abs(output), 0.5)", "averages a tensor the model_fn computes"),
    ("vector", M + "mean_relative_error(labels, output, tf.ones_like(labels))", "normalizer is not the labels"),
    ("classes", M + "mean_per_class_accuracy(labels, output, 4)", "not the class the model output scores highest"),
    ("classes", M + "precision_at_top_k(labels, top)", "predictions_idx are not `tf.nn.top_k"),
    ("logit", M + "true_positives(labels, tf.sigmoid(output))", "TF1 counts any nonzero prediction"),
    ("classes", M + "precision_at_k(labels, tf.argmax(output, 1), 1)", "top k are taken of"),
    ("classes", M + "mean_iou(labels + 1, tf.argmax(output, 1), 4)", "labels are not the model_fn's"),
    ("probability", M + "true_positives(tf.cast(labels, tf.int32), tf.round(output))", "labels are not the model_fn's"),
    ("probability", M + "true_positives(labels, tf.round(output), weights=labels)", "`weights=`"),
]


def convert(rules, kind: str, metric: str):
    units, activation, loss, labels = KINDS[kind]
    source = PROGRAM.format(units=units, activation=activation, loss=loss, labels=labels, metric=metric)
    if "top)" in metric:
        source = source.replace("    metric =", "    top = tf.nn.top_k(output, 2).indices\n    metric =")
    return rewrite_source(source.encode(), "program.py", rules)


def manual(result) -> list[str]:
    return [f"{f.code} {f.message}" for f in result.findings if f.kind == "manual"]


def keras_metric(new_source: str):
    """The metric compile() gets in the rewritten program, with the classes e2k wrote for it."""
    import tensorflow as tf

    tree = ast.parse(new_source)
    namespace = {"tf": tf, "np": np, "NUM_CLASSES": 4}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name != "Model" and not any(
                ast.unparse(b).endswith("keras.Model") for b in node.bases):
            exec(compile(ast.Module([node], []), "<e2k>", "exec"), namespace)
    compiled = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith(".compile")]
    metrics = next(k.value for k in compiled[0].keywords if k.arg == "metrics")
    (metric,) = metrics.elts
    text = ast.unparse(metric).replace("params['k']", "2")
    return eval(text, namespace), text


def tf1_value(kind: str, metric: str, data) -> np.ndarray:
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        labels_np, output_np = data[0]
        labels = tf.compat.v1.placeholder(tf.as_dtype(labels_np.dtype), [None, *labels_np.shape[1:]])
        output = tf.compat.v1.placeholder(tf.float32, [None, *output_np.shape[1:]])
        params = {"k": 2}
        value, update = eval(metric, {"tf": tf, "labels": labels, "output": output, "params": params,
                                      "NUM_CLASSES": 4})
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.local_variables_initializer())
            for labels_np, output_np in data:
                session.run(update, {labels: labels_np, output: output_np})
            return np.asarray(session.run(value))


@pytest.mark.parametrize("kind,metric,keras_class", CONVERTED, ids=[c[1][len(M):] for c in CONVERTED])
def test_converted_metric_computes_what_tf1_computed(rules, kind, metric, keras_class):
    result = convert(rules, kind, metric)
    assert result.status == "converted", manual(result)
    new = _helpers.inline(result.new.decode(), result.helpers)  # the classes run here, beside the metric
    keras, text = keras_metric(new)
    assert text.split("(")[0].split(".")[-1] == keras_class, text
    data = batches(kind)
    expected = tf1_value(kind, metric, data)
    for evaluation in range(2):  # evaluate() resets the metric first: so does this
        keras.reset_state()
        for labels_np, output_np in data:
            keras.update_state(labels_np, output_np)
        got = np.asarray(keras.result())
        np.testing.assert_allclose(np.reshape(got, expected.shape), expected, rtol=1e-6, atol=1e-7,
                                   err_msg=f"{text} against {metric}")
    assert np.all(np.isfinite(expected))


def test_a_class_no_example_had_counts_in_mean_per_class_accuracy(rules):
    """TF1 averaged over all num_classes classes; the class no label had counted 0 (Keras's
    accuracies have no such value): the checked data leaves class 3 out on purpose."""
    data = batches("classes")
    assert not any((labels == 3).any() for labels, _ in data)
    value = tf1_value("classes", CONVERTED[0][1], data)
    seen = tf1_value("classes", CONVERTED[0][1].replace(", 4)", ", 3)"), data)
    assert value == pytest.approx(seen * 3 / 4)


@pytest.mark.parametrize("kind,metric,reason", REFUSED, ids=[r[1][len(M):] for r in REFUSED])
def test_metric_keras_cannot_compute_is_refused_by_name(rules, kind, metric, reason):
    result = convert(rules, kind, metric)
    assert result.status == "partial"
    messages = [m for m in manual(result) if "'m'" in m and not m.startswith("E2K003")]  # E2K003: its read
    assert messages and all(m.startswith("E2K202") for m in messages), manual(result)
    assert reason in messages[0], messages


def test_every_tf1_metric_is_in_the_catalogue():
    """Each function of tf.compat.v1.metrics is converted or refused by the rule, not skipped."""
    import tensorflow as tf

    from rewrites.tf1_metric_to_keras import SIGNATURES
    import inspect

    names = {n for n in dir(tf.compat.v1.metrics) if not n.startswith("_")}
    assert {p.split(".", 1)[1] for p in SIGNATURES} == names
    for name in names:
        parameters = tuple(inspect.signature(getattr(tf.compat.v1.metrics, name)).parameters)
        assert SIGNATURES["metrics." + name] == parameters, name


@pytest.mark.parametrize("kind, local, metric", [
    ("logit", "tf.cast(tf.reshape(labels, [-1, 1]), tf.float32)", M + "auc(labels_f, tf.sigmoid(output))"),
    ("classes", "tf.reshape(labels, [-1])", M + "accuracy(labels_f, tf.argmax(output, 1))"),
])
def test_labels_through_a_name_bound_to_them_cast_or_reshaped(rules, kind, local, metric):
    # `labels_f = tf.cast(tf.reshape(labels, [-1, 1]), tf.float32)` then the metric of `labels_f`:
    # the same values as the labels Keras hands the metric (it was refused, E2K202).
    units, activation, loss, labels = KINDS[kind]
    source = PROGRAM.format(units=units, activation=activation, loss=loss, labels=labels, metric=metric)
    source = source.replace("    metric =", f"    labels_f = {local}\n    metric =")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", manual(result)
    keras, text = keras_metric(_helpers.inline(result.new.decode(), result.helpers))
    data = batches(kind)
    expected = tf1_value(kind, metric.replace("labels_f", local), data)
    keras.reset_state()
    for labels_np, output_np in data:
        keras.update_state(labels_np, output_np)
    np.testing.assert_allclose(np.reshape(np.asarray(keras.result()), expected.shape), expected, rtol=1e-6, atol=1e-7)
