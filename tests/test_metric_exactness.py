"""E2K202: every converted TF1 streaming mean gives TF1's value whatever the rank of the labels and
the model output, and whatever the size of the last evaluation batch.

Keras's MeanMetricWrapper classes (MeanAbsoluteError, MeanSquaredError) average each example's
last axis first: with rank-1 labels and output (``tf.squeeze(logits, axis=1)``) that reduces a
whole batch to one value, and evaluate() then averages the batches' means, so a partial last
batch weighs as much as a full one. TF1 averaged every element. Each conversion here is run on
batches of unequal size (7, 5, 3) with outputs of rank 1, 2 and 3, against TF1's own metric, on
Keras 2 (in process) and on Keras 3 (the newest TensorFlow, when an interpreter with it is there).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from estimator2keras import _helpers
from estimator2keras._engine import rewrite_source
from test_metrics_catalogue import keras_metric, manual, tf1_value

REPO = Path(__file__).resolve().parent.parent

PROGRAM = '''\
import numpy as np
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices((np.zeros((4, 4), np.float32), {labels})).batch(2)


def model_fn(features, labels, mode, params):
    {output}
    loss = tf.compat.v1.losses.mean_squared_error(labels, output)
    metric = {metric}
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={{"m": metric}})
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=1)
print(estimator.evaluate(input_fn)["m"])
'''

#: The model output's shape per example, and how the model_fn computes it.
SHAPES = {
    "rank1": ((), "output = tf.squeeze(tf.compat.v1.layers.dense(features, 1), axis=1)"),
    "rank2-column": ((1,), "output = tf.compat.v1.layers.dense(features, 1)"),
    "rank2": ((3,), "output = tf.compat.v1.layers.dense(features, 3)"),
}
SIZES = (7, 5, 3)  # the last batch partial, and batches of unequal size

M = "tf.compat.v1.metrics."
#: Streaming means over every element (and what TF1 derived from them), of the output as it is.
METRICS = [
    M + "mean_absolute_error(labels, output)",
    M + "mean_squared_error(labels, output)",
    M + "root_mean_squared_error(labels, output)",
    M + "mean_relative_error(labels, output, normalizer=labels)",
    M + "mean(output)",
    M + "mean(labels)",
    M + "percentage_below(output, 0.2)",
    M + "accuracy(labels, tf.round(tf.sigmoid(output)))",
    M + "accuracy(labels, tf.cast(output > 0, tf.float32))",
    M + "precision(labels, tf.round(tf.sigmoid(output)))",
    M + "auc(labels, tf.sigmoid(output))",
]
CASES = [(shape, metric) for shape in SHAPES for metric in METRICS]
CASES += [("rank1", M + "mean_cosine_distance(labels, output, dim=0)"),
          ("rank2", M + "mean_cosine_distance(labels, output, dim=1)"),
          ("rank2-column", M + "mean_cosine_distance(labels, output, 1)")]


def batches(shape: str, metric: str, seed: int = 0):
    rng = np.random.RandomState(seed)
    per_example = SHAPES[shape][0]
    out = []
    for size in SIZES:
        output = rng.normal(size=(size, *per_example)).astype(np.float32)
        if any(f in metric for f in ("accuracy", "precision", "auc")):
            labels = rng.randint(0, 2, size=(size, *per_example)).astype(np.float32)
        else:
            labels = rng.normal(size=(size, *per_example)).astype(np.float32)
            labels.flat[0] = 0.0  # mean_relative_error's 0 where the normalizer is 0
        out.append((labels, output))
    return out


def convert(rules, shape: str, metric: str):
    per_example, output = SHAPES[shape]
    labels = f"np.zeros((4, {', '.join(map(str, per_example))}), np.float32)" if per_example else \
        "np.zeros((4,), np.float32)"
    source = PROGRAM.format(output=output, labels=labels, metric=metric)
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", manual(result)
    return _helpers.inline(result.new.decode(), result.helpers)  # the classes run here, beside the metric


def keras_value(keras, data) -> np.ndarray:
    for evaluation in range(2):  # evaluate() resets the metric first: so does this
        keras.reset_state()
        for labels, output in data:
            keras.update_state(labels, output)
    return np.asarray(keras.result())


@pytest.mark.parametrize("shape,metric", CASES, ids=[f"{s}-{m[len(M):]}" for s, m in CASES])
def test_streaming_mean_is_tf1s_whatever_the_rank_and_the_last_batch(rules, shape, metric):
    keras, text = keras_metric(convert(rules, shape, metric))
    data = batches(shape, metric)
    expected = tf1_value("", metric, data)
    assert np.all(np.isfinite(expected))
    np.testing.assert_allclose(np.reshape(keras_value(keras, data), expected.shape), expected, rtol=1e-6, atol=1e-7,
                               err_msg=f"{text} against {metric} on {shape}")


def test_the_mean_of_batch_means_is_not_tf1s_value():
    """What the test guards against: Keras's own MeanAbsoluteError on rank-1 batches of unequal size."""
    import tensorflow as tf

    metric = M + "mean_absolute_error(labels, output)"
    data = batches("rank1", metric)
    expected = tf1_value("", metric, data)
    assert abs(keras_value(tf.keras.metrics.MeanAbsoluteError(), data) - expected) > 1e-3


def _target_python() -> str | None:
    given = os.environ.get("E2K_TARGET_PYTHON")
    if given:
        return given
    newest = REPO / ".venv-newest" / "bin" / "python"
    return str(newest) if newest.exists() else None


KERAS3 = r'''
import ast, json, sys
import numpy as np
import tensorflow as tf

cases = json.load(open(sys.argv[1]))
out = []
for case in cases:
    namespace = {"tf": tf, "np": np}
    exec(case["classes"], namespace)
    keras = eval(case["metric"], namespace)
    for evaluation in range(2):
        keras.reset_state()
        for labels, output in case["data"]:
            keras.update_state(np.asarray(labels, np.float32), np.asarray(output, np.float32))
    out.append(np.asarray(keras.result()).tolist())
print(json.dumps(out))
'''


def test_streaming_means_are_tf1s_on_keras_3(rules, tmp_path):
    """The same conversions on the newest TensorFlow (Keras 3, whose Mean reduces each example first)."""
    import ast

    python = _target_python()
    if python is None:
        pytest.skip("no interpreter with the newest TensorFlow (E2K_TARGET_PYTHON or .venv-newest)")
    cases, expected = [], []
    for shape, metric in CASES:
        new = convert(rules, shape, metric)
        keras, text = keras_metric(new)
        classes = "\n\n".join(ast.unparse(n) for n in ast.parse(new).body if isinstance(n, ast.ClassDef)
                              and not any(ast.unparse(b).endswith("keras.Model") for b in n.bases))
        data = batches(shape, metric)
        expected.append(tf1_value("", metric, data))
        cases.append({"classes": classes, "metric": text,
                      "data": [(labels.tolist(), output.tolist()) for labels, output in data]})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "run.py").write_text(KERAS3)
    done = subprocess.run([python, str(tmp_path / "run.py"), str(tmp_path / "cases.json")], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for (shape, metric), value, want in zip(CASES, got, expected):
        np.testing.assert_allclose(np.reshape(value, want.shape), want, rtol=1e-6, atol=1e-7,
                                   err_msg=f"{metric} on {shape}, Keras 3")
