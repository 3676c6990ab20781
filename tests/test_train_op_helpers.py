"""A train_op made by a function of the program (``train_op = get_train_op(loss, params)``):
its statements read as TRAIN runs them, ending in ``optimizer.minimize(loss, global_step)``;
the Keras optimizer is its optimizer with the function's names given the call's values.
Fixture ``model_fn_parts_from_helpers`` passes parity (and fails it with the batch
normalization's moving averages frozen, as they would be if the helper's control
dependencies were missed)."""
from __future__ import annotations

import textwrap

import pytest

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf

{helper}

def model_fn(features, labels, mode, params):
    lr = params["learning_rate"]
    logits = tf.compat.v1.layers.dense(features["x"], 3)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = {call}
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn, params={{"learning_rate": 0.01}})
est.train(lambda: tf.data.Dataset.from_tensor_slices(({{"x": [[1.0, 2.0]]}}, [1])).batch(1), steps=1)
'''


def convert(rules, helper: str, call: str):
    source = PROGRAM.format(helper=textwrap.dedent(helper), call=call)
    return rewrite_source(source.encode(), "program.py", rules)


def test_the_optimizer_of_a_train_op_function_with_the_calls_values(rules):
    result = convert(rules, '''
    def get_train_op(loss, learning_rate, mode):
        """Only TRAIN needs one."""
        if mode == tf.estimator.ModeKeys.TRAIN:
            update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
            optimizer = tf.compat.v1.train.AdamOptimizer(learning_rate)
            with tf.control_dependencies(update_ops):
                return optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
        return None
    ''', "get_train_op(loss, lr, mode)")
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    builder = new.split("def build_model(params):")[1]
    assert 'lr = params["learning_rate"]' in builder and "TF1Adam(lr)" in builder, new
    assert "def get_train_op" not in new  # only the converted model_fn used it


@pytest.mark.parametrize("helper, call, reason", [
    ('''
    def get_train_op(loss, other, params):
        return tf.compat.v1.train.AdamOptimizer(0.1).minimize(other, global_step=tf.compat.v1.train.get_global_step())
    ''', "get_train_op(loss, loss * 2.0, params)", "does not minimize the loss the EstimatorSpec returns"),
    ('''
    def get_train_op(loss, params):
        optimizer = tf.compat.v1.train.AdamOptimizer(params["learning_rate"])
        grads = optimizer.compute_gradients(loss)
        return optimizer.apply_gradients(grads, global_step=tf.compat.v1.train.get_global_step())
    ''', "get_train_op(loss, params)", "does not return `optimizer.minimize(loss, global_step)`"),
    ('''
    def get_train_op(loss, params):
        lr = params["learning_rate"]
        decayed = lr * 0.5
        return tf.compat.v1.train.AdamOptimizer(decayed).minimize(loss, tf.compat.v1.train.get_global_step())
    ''', "get_train_op(loss, params)", "computes its optimizer's settings in several steps"),
    ('''
    def get_train_op(loss, params, use_adam):
        if use_adam:
            return tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
        return tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    ''', "get_train_op(loss, params, True)", "under an `if` that does not test the mode"),
])
def test_what_a_train_op_function_does_beyond_is_refused_naming_it(rules, helper, call, reason):
    result = convert(rules, helper, call)
    assert result.status == "partial"
    assert any(reason in f.message for f in result.findings), [f.format() for f in result.findings]
    assert "def get_train_op" in result.new.decode()
