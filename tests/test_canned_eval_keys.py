"""Reads of evaluate()'s result: a converted program never crashes on a key the Estimator gave.

A canned Estimator's evaluate() gave its head's metrics (auc, precision, recall, label/mean,
prediction/mean, accuracy_baseline, ...) and every Estimator's gave `global_step`. The canned
model computes the head's metrics Keras computes exactly (checked here against TF1's head
metrics, on batches of unequal size, weighted and not); `global_step` reads become the
optimizer's step count; a read of a key the Keras dict lacks is left for a human at the read,
and the whole dict printed is reported with what it lacks."""
from __future__ import annotations

import ast

import numpy as np
import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat

CANNED = '''\
import numpy as np
import tensorflow as tf

X = np.arange(8, dtype=np.float32)
Y = (X > 3).astype(np.int64)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({{"x": X}}, Y)).batch(4)


clf = {cls}([tf.feature_column.numeric_column("x")])
clf.train(input_fn, steps=2)
res = clf.evaluate(input_fn)
{reads}
'''


def rewrite(rules, source: str):
    return rewrite_source(source.encode(), "program.py", rules)


def findings(result, kind=None):
    return [f"{f.code} {f.message}" for f in result.findings if kind is None or f.kind == kind]


class _Named:
    """Stands for TensorFlow and the metric classes: a metric made is its name."""

    def __getattr__(self, attribute):
        return self

    def __call__(self, *args, name=None, **kwargs):
        return name


def _names(metric: ast.expr) -> list[str]:
    """The names of the metrics ``metric`` makes: one metric, or the head's (the helper)."""
    from estimator2keras import _helpers

    if isinstance(metric, ast.Starred):
        namespace = {name: _Named() for name in ("tf", *_helpers.catalogue())}
        exec(_helpers.catalogue()["head_metrics"].code, namespace)
        call = metric.value
        return namespace["head_metrics"](*(ast.literal_eval(a) for a in call.args),
                                         **{k.arg: ast.literal_eval(k.value) for k in call.keywords})
    return [next(k.value.value for k in metric.keywords if k.arg == "name")]


def keras_keys(new: str) -> set[str]:
    """The names of compile()'s metrics, and the loss: the keys of model.evaluate(return_dict=True)."""
    tree = ast.parse(new)
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith(".compile"))
    metrics = next(k.value for k in call.keywords if k.arg in ("metrics", "weighted_metrics"))
    elements = [ast.Starred(metrics)] if isinstance(metrics, ast.Call) else metrics.elts
    return {"loss", *(name for m in elements for name in _names(m))}


HEAD_KEYS = {
    "tf.estimator.LinearClassifier": {"loss", "accuracy", "average_loss", "precision", "recall", "auc",
                                      "auc_precision_recall", "label/mean", "prediction/mean", "accuracy_baseline"},
    "tf.estimator.LinearRegressor": {"loss", "average_loss", "label/mean", "prediction/mean"},
    "tf.estimator.DNNClassifier": {"loss", "accuracy", "average_loss"},
}


@pytest.mark.parametrize("cls", sorted(HEAD_KEYS))
def test_canned_model_reports_every_key_of_the_head(rules, cls):
    if cls == "tf.estimator.DNNClassifier":
        source = CANNED.format(cls="lambda c: tf.estimator.DNNClassifier([4], c, n_classes=3)", reads="print(res)")
        source = source.replace("lambda c: tf.estimator.DNNClassifier([4], c, n_classes=3)([", "tf.estimator.DNNClassifier([4], [") \
            .replace("numeric_column(\"x\")])", "numeric_column(\"x\")], n_classes=3)")
    else:
        source = CANNED.format(cls=cls, reads="print(res)")
    result = rewrite(rules, source)
    assert result.status == "converted", findings(result)
    assert keras_keys(flat(result.new.decode())) == HEAD_KEYS[cls]


def test_head_keys_read_by_literal_or_get_convert(rules):
    reads = 'print(res["auc"], res.get("precision"), res["accuracy_baseline"], res["label/mean"])\n' \
            'print("step", res["global_step"], res.get("global_step"))'
    result = rewrite(rules, CANNED.format(cls="tf.estimator.LinearClassifier", reads=reads))
    assert result.status == "converted", findings(result)
    new = flat(result.new.decode())
    assert 'print("step", int(model.optimizer.iterations.numpy()), int(model.optimizer.iterations.numpy()))' in new
    assert 'res["auc"]' in new and 'res.get("precision")' in new


def test_key_keras_cannot_compute_exactly_is_left_at_the_read(rules):
    """TF1's binary head summed its PR AUC trapezoidally, which no Keras AUC does."""
    reads = 'print(res["auc"])\nprint(res["auc_precision_recall"])'
    result = rewrite(rules, CANNED.format(cls="tf.compat.v1.estimator.LinearClassifier", reads=reads))
    assert result.status == "partial"
    (manual,) = findings(result, "manual")
    assert manual.startswith("E2K003") and "'auc_precision_recall'" in manual
    assert "auc_precision_recall" not in keras_keys(flat(result.new.decode()))
    assert "# e2k: E2K003" in flat(result.new.decode()).split('print(res["auc"])')[1]


def test_whole_dict_printed_is_reported_with_what_it_lacks(rules):
    result = rewrite(rules, CANNED.format(cls="tf.compat.v1.estimator.LinearClassifier", reads="print(res)"))
    assert result.status == "converted"
    notes = [m for m in findings(result) if "has no" in m]
    assert notes and "'global_step'" in notes[0] and "'auc_precision_recall'" in notes[0], findings(result)


MODEL_FN = '''\
import numpy as np
import tensorflow as tf

X = np.ones((8, 3), np.float32)
Y = X.sum(1)


def input_fn():
    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)


def model_fn(features, labels, mode):
    pred = tf.squeeze(tf.compat.v1.layers.dense(features, 1), 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    metrics = {{"mae": tf.compat.v1.metrics.mean_absolute_error(labels, pred),
               "big": tf.compat.v1.metrics.mean(tf.abs(pred) * 2.0)}}
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


est = tf.estimator.Estimator(model_fn)
{run}
{reads}
'''
TRAIN_AND_EVALUATE = '''metrics, _ = tf.estimator.train_and_evaluate(
    est, tf.estimator.TrainSpec(lambda: input_fn().repeat(), max_steps=8), tf.estimator.EvalSpec(input_fn))'''
EVALUATE = "est.train(input_fn, steps=2)\nmetrics = est.evaluate(input_fn)"


@pytest.mark.parametrize("run", [TRAIN_AND_EVALUATE, EVALUATE], ids=["train_and_evaluate", "evaluate"])
def test_global_step_of_the_result_is_the_step_count(rules, run):
    reads = 'print("step %d loss %.4f mae %.4f" % (metrics["global_step"], metrics["loss"], metrics["mae"]))'
    source = MODEL_FN.format(run=run, reads=reads).replace(',\n               "big": tf.compat.v1.metrics.mean(tf.abs(pred) * 2.0)', "")
    result = rewrite(rules, source)
    assert result.status == "converted", findings(result)
    assert '(int(model.optimizer.iterations.numpy()), metrics["loss"], metrics["mae"])' in flat(result.new.decode())
    if run is TRAIN_AND_EVALUATE:  # the exporters' paths, bound to `_`, are not assigned
        assert "_ = " not in result.new.decode() and "metrics = model.evaluate(" in flat(result.new.decode())


@pytest.mark.parametrize("run", [TRAIN_AND_EVALUATE, EVALUATE], ids=["train_and_evaluate", "evaluate"])
def test_read_of_a_metric_left_for_a_human_is_marked_at_the_read(rules, run):
    reads = 'print(metrics["mae"])\nprint(metrics.get("big"))'
    result = rewrite(rules, MODEL_FN.format(run=run, reads=reads))
    assert result.status == "partial"
    at_read = [m for m in findings(result, "manual") if "evaluate() gave 'big'" in m]
    assert len(at_read) == 1, findings(result)
    assert not any("'mae'" in m for m in findings(result, "manual"))


# -- the head's metrics against TF1's head ---------------------------------------------------------
def _head_classes():
    import tensorflow as tf

    from estimator2keras._canned import HEAD_METRICS

    namespace = {"tf": tf}
    for definition in HEAD_METRICS.values():
        exec(definition.format(tf="tf"), namespace)
    return namespace


def _batches(weighted: bool):
    rng = np.random.RandomState(3)
    out = []
    for size in (7, 5, 3):
        logits = rng.normal(size=(size, 1)).astype(np.float32) * 2
        logits[0, 0] = 0.0  # class 0 at a logit of exactly 0, as argmax([0, logit]) chose
        labels = rng.randint(0, 2, size=(size, 1)).astype(np.float32)
        weights = rng.uniform(0.5, 2.0, size=(size, 1)).astype(np.float32) if weighted else None
        out.append((labels, logits, weights))
    return out


def _tf1_head(data):
    """TF1's binary head (tensorflow_estimator canned/head.py, _eval_metric_ops), its metrics."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        labels = tf.compat.v1.placeholder(tf.float32, [None, 1])
        logits = tf.compat.v1.placeholder(tf.float32, [None, 1])
        weights = tf.compat.v1.placeholder_with_default(tf.ones_like(labels), [None, 1])
        logistic = tf.sigmoid(logits)
        class_ids = tf.argmax(tf.concat([tf.zeros_like(logits), logits], 1), 1)[:, None]
        m = tf.compat.v1.metrics
        label_mean = m.mean(labels, weights=weights)
        ops = {
            "precision": m.precision(labels, class_ids, weights=weights),
            "recall": m.recall(labels, class_ids, weights=weights),
            "auc": m.auc(labels, logistic, weights=weights),
            "label/mean": label_mean,
            "prediction/mean": m.mean(logistic, weights=weights),
            "accuracy_baseline": (tf.maximum(label_mean[0], 1.0 - label_mean[0]), label_mean[1]),
        }
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.local_variables_initializer())
            for labels_np, logits_np, weights_np in data:
                feed = {labels: labels_np, logits: logits_np}
                if weights_np is not None:
                    feed[weights] = weights_np
                session.run([u for _, u in ops.values()], feed)
            return {k: float(session.run(v)) for k, (v, _) in ops.items()}


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weight_column"])
def test_head_metrics_compute_what_tf1s_head_computed(weighted):
    namespace = _head_classes()
    keras = {
        "precision": namespace["PrecisionOfClassIds"](name="precision"),
        "recall": namespace["RecallOfClassIds"](name="recall"),
        "auc": namespace["tf"].keras.metrics.AUC(name="auc", from_logits=True),
        "label/mean": namespace["LabelMean"](name="label/mean"),
        "prediction/mean": namespace["PredictionMean"](name="prediction/mean", activation="sigmoid"),
        "accuracy_baseline": namespace["AccuracyBaseline"](name="accuracy_baseline"),
    }
    data = _batches(weighted)
    expected = _tf1_head(data)
    for key, metric in keras.items():
        for labels, logits, weights in data:
            metric.update_state(labels, logits, sample_weight=weights)
        assert float(metric.result()) == pytest.approx(expected[key], rel=1e-5, abs=1e-6), key
