"""A model_fn that stops at its first refusal still reports the other constructs in it that
e2k never converts, so that one run shows a human every blocker, not one at a time."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source

SOURCE = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [1])).repeat().batch(1)


def normalize(net):
    return tf.contrib.layers.layer_norm(net)


def model_fn(features, labels, mode, params):
    net = tf.layers.dense(features["x"], 4)
    net = normalize(net)
    seen = tf.placeholder_with_default(0.0, [])
    logits = tf.layers.dense(net, 2)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.contrib.opt.LazyAdamOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn)
est.train(input_fn, steps=1)
'''


def test_every_blocker_of_a_model_fn_is_reported(rules):
    result = rewrite_source(SOURCE.encode(), "program.py", rules)
    assert result.status == "partial"
    manual = [(f.line, f.message) for f in result.findings if f.kind == "manual"]
    lines = {line for line, _ in manual}
    # The helper's contrib layer (line 9), the graph variable (15) and the optimizer (18).
    assert {9, 15, 18} <= lines, manual
    assert sum("also in this model_fn" in message for _, message in manual) == len(manual) - 1, manual
    # Each is marked in the file, where a human looks.
    assert result.new.decode().count("# e2k: E2K901") == len(manual)


def test_a_model_fn_that_converts_reports_no_blockers(rules):
    source = SOURCE.replace("    net = normalize(net)\n", "").replace(
        '    seen = tf.placeholder_with_default(0.0, [])\n', "").replace(
        "tf.contrib.opt.LazyAdamOptimizer", "tf.train.AdamOptimizer")
    # The helper no longer called keeps its tf.contrib: reported as left (TensorFlow 2 has none).
    result = rewrite_source(source.encode(), "program.py", rules)
    assert [f.line for f in result.findings if f.kind == "manual"] == [9], [f.format() for f in result.findings]
    source = source.replace("tf.contrib.layers.layer_norm(net)", "net")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]


def test_a_tf1_layer_without_a_rule_is_refused_not_left_in_the_keras_model(rules):
    # It was left in `call` as TF1 code (making new variables at every step, and reading an
    # alias the conversion removed) while the file was reported converted.
    source = SOURCE.replace("    net = normalize(net)\n", "").replace(
        '    seen = tf.placeholder_with_default(0.0, [])\n',
        "    net = tf.layers.separable_conv1d(tf.reshape(net, [-1, 4, 1]), 2, 1)\n"
        "    net = tf.layers.flatten(net)\n").replace("tf.contrib.opt.LazyAdamOptimizer", "tf.train.AdamOptimizer")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "partial", result.new.decode()
    assert any("`tf.layers.separable_conv1d` makes variables and e2k has no rule for it" in f.message
               for f in result.findings), [f.format() for f in result.findings]
