"""A variable the model_fn looks rows up in gets a sparse gradient, in which a row a batch looks up
twice appears twice: TF1 (and Keras 2) summed them before squaring, Keras 3's Adam and Adagrad
square each apart (testers' embedding programs trained otherwise on TF 2.21). TF1Adam makes such
a gradient dense itself; Adagrad becomes TF1Adagrad where the model_fn has a lookup.
Whole-program proof: fixtures/embedding_lookup_adagrad (parity on both TFs; with plain Keras
Adagrad it is BROKEN on the newest TF)."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source
from estimator2keras.rewrites.tf1_optimizer_to_keras import TF1_ADAGRAD, TF1_ADAM

PROGRAM = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1, 1, 2]], [1])).repeat().batch(1)


def model_fn(features, labels, mode):
    table = tf.compat.v1.get_variable("table", [4, 2])
    pooled = tf.reduce_mean(LOOKUP, axis=1)
    logits = tf.compat.v1.layers.dense(pooled, 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.OPTIMIZER(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=3)
'''


def convert(rules, optimizer: str, lookup: str):
    source = PROGRAM.replace("OPTIMIZER", optimizer).replace("LOOKUP", lookup)
    result = rewrite_source(source.encode(), "prog.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    return result.new.decode()


def test_adagrad_on_a_lookup_is_tf1_adagrad(rules):
    new = convert(rules, "AdagradOptimizer", "tf.nn.embedding_lookup(table, features)")
    assert "optimizer=TF1Adagrad(0.1, epsilon=0.0)" in new.replace("\n", " ").replace("  ", " ")
    assert "from e2k_helpers import TF1Adagrad" in new


def test_adagrad_without_a_lookup_stays_kerass(rules):
    new = convert(rules, "AdagradOptimizer", "tf.cast(tf.expand_dims(features, -1), tf.float32) * table[0]")
    assert "tf.keras.optimizers.Adagrad(0.1, epsilon=0.0)" in new and "TF1Adagrad" not in new


def test_the_helpers_make_a_sparse_gradient_dense():
    for template in (TF1_ADAM, TF1_ADAGRAD):
        assert "if isinstance(gradient, {tf}.IndexedSlices):" in template
        assert "gradient = {tf}.convert_to_tensor(gradient)" in template
