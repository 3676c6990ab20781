"""Predictions that read a tensor inside the model (``"hidden": hidden``, an embedding a
model_fn serves beside its output): predict_step runs the model's forward code itself, for
inference, rather than refusing the model_fn (E2K901 "inside the model" before; found in a
new user's program)."""
from __future__ import annotations

import numpy as np
import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat

PROGRAM = '''\
import numpy as np
import tensorflow as tf


def input_fn():
    x = np.arange(16, dtype=np.float32).reshape(8, 2) / 8
    return tf.data.Dataset.from_tensor_slices(({"x": x}, x[:, :1])).batch(4)


def model_fn(features, labels, mode):
    hidden = tf.layers.dense(features["x"], 4, activation=tf.nn.relu)
    dropped = tf.layers.dropout(hidden, 0.5, training=mode == tf.estimator.ModeKeys.TRAIN)
    logits = tf.layers.dense(dropped, 1)
    predictions = {"logits": logits, "hidden": hidden}
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=2)
predicted = list(estimator.predict(input_fn))
'''


def test_predict_step_runs_the_forward_code_for_inference_to_read_inside_the_model(rules):
    result = rewrite_source(PROGRAM.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    predict_step = new[new.index("def predict_step"):new.index("def build_model")]
    assert "self(features" not in predict_step
    assert "hidden = self.hidden(features[\"x\"])" in predict_step
    assert "self.dropped(hidden, training=False)" in predict_step  # `training` read as False
    assert 'return {"logits": logits, "hidden": hidden}' in predict_step
    assert "training=training" in new[new.index("def call"):new.index("def predict_step")]


def test_the_predictions_inside_the_model_are_the_models_own(rules):
    tf = pytest.importorskip("tensorflow")
    result = rewrite_source(PROGRAM.encode(), "program.py", rules)
    namespace: dict = {}
    exec(compile(result.new.decode(), "program.py", "exec"), namespace)
    model, x = namespace["model"], np.arange(16, dtype=np.float32).reshape(8, 2) / 8
    predicted = model.predict({"x": x}, verbose=0)
    hidden = model.hidden(tf.constant(x)).numpy()
    np.testing.assert_allclose(predicted["hidden"], hidden, rtol=1e-6)
    np.testing.assert_allclose(predicted["logits"], model({"x": x}, training=False).numpy(), rtol=1e-6)
