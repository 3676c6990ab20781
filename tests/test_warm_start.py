"""Estimator(warm_start_from=...) (E2K410): a model warm-started from the model_dir of an
earlier model of the same model_fn gets a WarmStart callback restoring the selected trainable
weights before its first step; what cannot be mapped exactly is refused, naming why (never
dropped: the Keras program would train from its initializers)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from estimator2keras._engine import rewrite_source
from rewrites.warm_start_to_restore import WARM_START

PROGRAM = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({{"x": [[1.0]]}}, [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    hidden = tf.layers.dense(features["x"], 4, name="body")
    {extra}logits = tf.layers.dense(hidden, 1, name="head")
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


{other}pretrained = tf.estimator.Estimator(model_fn, model_dir="/tmp/pretrain")
pretrained.train(input_fn, steps=10)
{settings}
estimator = tf.estimator.Estimator({fn}, model_dir="/tmp/finetune", warm_start_from={warm})
estimator.train(input_fn, steps=10)
'''


OTHER = '''\
def other_fn(features, labels, mode):
    logits = tf.layers.dense(features["x"], 1, name="head")
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


'''


def _rewrite(rules, warm, settings="", extra="", fn="model_fn"):
    other = OTHER if fn == "other_fn" else ""
    source = PROGRAM.format(warm=warm, settings=settings, extra=extra, fn=fn, other=other)
    return rewrite_source(source.encode(), "program.py", rules)


def _refusal(result) -> str:
    assert result.status != "converted"
    found = [f for f in result.findings if f.code == "E2K410"]
    assert found, [f.format() for f in result.findings]
    return found[0].message


def test_a_directory_warm_start_restores_every_trainable_weight(rules):
    result = _rewrite(rules, '"/tmp/pretrain"')
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert 'warm_start = WarmStart("/tmp/pretrain", checkpoints=checkpoints)' in new
    assert "callbacks=[checkpoints, warm_start]" in new
    assert "E2K400" not in new and "warm_start_from" not in new


def test_a_regular_expression_over_named_layers_becomes_their_list(rules):
    settings = 'ws = tf.estimator.WarmStartSettings("/tmp/pretrain", vars_to_warm_start="body.*")'
    result = _rewrite(rules, "ws", settings=settings)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert 'WarmStart("/tmp/pretrain", layers=["body"], checkpoints=checkpoints)' in new
    assert "WarmStartSettings" not in new  # tf.estimator is gone in TF 2.16


@pytest.mark.parametrize("settings", ["", 'vars_to_warm_start=".*"', "vars_to_warm_start=None"])
def test_the_default_selection_is_every_trainable_weight(rules, settings):
    warm = f'tf.estimator.WarmStartSettings(ckpt_to_initialize_from="/tmp/pretrain", {settings})'
    new = _rewrite(rules, warm).new.decode()
    assert 'WarmStart("/tmp/pretrain", checkpoints=checkpoints)' in new


@pytest.mark.parametrize("warm, extra, fn, reason", [
    ('"/tmp/elsewhere"', "", "model_fn", "e2k checkpoint"),
    ('"/tmp/pretrain"', "", "other_fn", "another model"),
    ('tf.estimator.WarmStartSettings("/tmp/pretrain", vars_to_warm_start=["body/kernel"])', "", "model_fn",
     "optimizer slots"),
    ('tf.estimator.WarmStartSettings("/tmp/pretrain", vars_to_warm_start="body/kernel.*")', "", "model_fn",
     "part of the layer body"),
    ('tf.estimator.WarmStartSettings("/tmp/pretrain", vars_to_warm_start="body.*")',
     "hidden = tf.layers.dense(hidden, 4)\n    ", "model_fn", "without a literal name="),
    ('tf.estimator.WarmStartSettings("/tmp/pretrain", vars_to_warm_start="body.*")',
     'hidden = hidden * tf.get_variable("scale", [1])\n    ', "model_fn", "get_variable"),
    ('tf.estimator.WarmStartSettings("/tmp/pretrain", var_name_to_prev_var_name={"body/kernel": "old"})', "",
     "model_fn", "renames or remaps"),
])
def test_what_cannot_be_mapped_exactly_is_refused_naming_why(rules, warm, extra, fn, reason):
    assert reason in _refusal(_rewrite(rules, warm, extra=extra, fn=fn))


def test_a_warm_start_on_a_canned_estimator_with_a_selection_is_refused(rules):
    source = '''\
import tensorflow as tf

columns = [tf.feature_column.numeric_column("x")]


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [[1]])).repeat().batch(1)


first = tf.estimator.DNNClassifier([4], columns, model_dir="/tmp/pretrain")
first.train(input_fn, steps=2)
second = tf.estimator.DNNClassifier([4], columns, model_dir="/tmp/finetune", warm_start_from=WARM)
second.train(input_fn, steps=2)
'''
    plain = rewrite_source(source.replace("WARM", '"/tmp/pretrain"').encode(), "program.py", rules)
    assert plain.status == "converted", [f.format() for f in plain.findings]
    assert 'WarmStart("/tmp/pretrain", checkpoints=checkpoints' in plain.new.decode()
    selected = source.replace("WARM", 'tf.estimator.WarmStartSettings("/tmp/pretrain", "dnn/hiddenlayer_0.*")')
    assert "not known here" in _refusal(rewrite_source(selected.encode(), "program.py", rules))


# The helper itself, on TF 2.15 (Keras 2) and the newest TF (Keras 3): a pretrained model's
# checkpoint (as ModelDirCheckpoints writes it), a second model warm-started from it.
HELPER_RUN = """
import json, sys, tempfile, time
import numpy as np
import tensorflow as tf

exec(sys.argv[3], globals())
exec(sys.argv[1], globals())
root = sys.argv[2]


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.body = [tf.keras.layers.Dense(8, name=f"body_{i}") for i in (1, 2)]
        self.norm = tf.keras.layers.BatchNormalization(name="norm")
        self.head = tf.keras.layers.Dense(2, name="head")

    def call(self, features, training=False):
        net = features["x"]
        for layer in self.body:
            net = layer(net)
        return self.head(self.norm(net, training=training))


def make(rate):
    model = Model()
    model.compile(optimizer=tf.keras.optimizers.SGD(rate),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


rng = np.random.RandomState(0)
x = rng.randn(64, 4).astype("float32")
data = tf.data.Dataset.from_tensor_slices(({"x": x}, np.argmax(x[:, :2], 1))).batch(16).repeat()
values = lambda model: {getattr(w, "path", w.name).split("/", 1)[-1]: w.numpy() for w in model.weights}
pre = make(0.05)
pre.fit(data, steps_per_epoch=5, callbacks=[ModelDirCheckpoints(pre, root + "/pre", save_steps=5)], verbose=0)
out = {}
for layers in (None, ["body_1", "body_2"]):
    model = make(0.0)  # trains 2 steps without moving its weights: they are where it started
    checkpoints = ModelDirCheckpoints(model, root + f"/fine{len(layers or [])}", save_steps=100)
    model.fit(data, steps_per_epoch=2, verbose=0,
              callbacks=[checkpoints, WarmStart(root + "/pre", layers=layers, checkpoints=checkpoints)])
    seen, before = values(model), values(pre)
    out[str(layers)] = {
        "same": sorted(k for k in seen if np.array_equal(seen[k], before[k])),
        "step": int(model.optimizer.iterations.numpy()),
    }
try:
    cb = WarmStart(root + "/nothing"); cb.set_model(model); cb.warm_start()
except ValueError as error:
    out["error"] = str(error)
print(json.dumps(out))
"""


def _python(target):
    from parity_programs import support

    python = sys.executable if target == "tf215" else support.target_python()
    if python is None:
        pytest.skip("set E2K_TARGET_PYTHON to an interpreter with the newest TensorFlow")
    return python


@pytest.mark.slow
@pytest.mark.parametrize("target", ["tf215", "newest"])
def test_the_helper_restores_the_selected_trainable_weights_only(tmp_path, target):
    from estimator2keras._training import MODEL_DIR_CHECKPOINTS

    helper = WARM_START.format(name="WarmStart", tf="tf")
    checkpoints = MODEL_DIR_CHECKPOINTS.format(name="ModelDirCheckpoints", tf="tf")
    done = subprocess.run([_python(target), "-c", HELPER_RUN, helper, str(tmp_path), checkpoints],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    trainable = ["body_1/bias", "body_1/kernel", "body_2/bias", "body_2/kernel", "head/bias", "head/kernel",
                 "norm/beta", "norm/gamma"]
    short = lambda names: sorted(n.split(":")[0] for n in names)  # noqa: E731
    # Every trainable weight, not the moving statistics; then the selected layers' only.
    assert short(out["None"]["same"]) == sorted(trainable)
    assert len(out["['body_1', 'body_2']"]["same"]) == 4
    # The optimizer starts fresh: its step counts this fit's 2 steps only.
    assert out["None"]["step"] == 2 and out["['body_1', 'body_2']"]["step"] == 2
    assert "e2k checkpoint" in out["error"]
