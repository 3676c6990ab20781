"""Embedding lookups give their tables sparse gradients: TF1's RMSProp and Momentum (and the
Keras legacy ones canned Estimators used) updated the accumulators of the rows a batch looked
up only, Keras's RMSprop and SGD with momentum decay every row's. A new-user tester's program
trained differently once its vocabulary was realistic (parity BROKEN at step 10 with 2000
rows) while e2k called it converted: now reported (E2K101), the optimizer still written."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat

MODEL_FN = '''\
import tensorflow as tf


def model_fn(features, labels, mode, params):
    table = tf.compat.v1.get_variable("embeddings", [100, 4])
    pooled = tf.reduce_mean(LOOKUP, axis=1)
    logits = tf.compat.v1.layers.dense(pooled, 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = OPTIMIZER.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn)
est.train(lambda: tf.data.Dataset.from_tensor_slices(({"ids": [[1, 2]]}, [1])).batch(1), steps=1)
'''
LOOKUP = 'tf.nn.embedding_lookup(table, features["ids"])'
DENSE = 'tf.matmul(tf.one_hot(features["ids"], 100), table)'


@pytest.mark.parametrize("lookup, optimizer, reported", [
    (LOOKUP, "tf.compat.v1.train.RMSPropOptimizer(0.01)", True),
    (LOOKUP, "tf.compat.v1.train.MomentumOptimizer(0.01, 0.9)", True),
    (LOOKUP, "tf.compat.v1.train.AdamOptimizer(0.01)", False),  # TF1's Adam decays every row too
    (LOOKUP, "tf.compat.v1.train.AdagradOptimizer(0.01)", False),  # no decay: the same rows change
    (DENSE, "tf.compat.v1.train.RMSPropOptimizer(0.01)", False),  # a dense gradient: every row, both
])
def test_rmsprop_and_momentum_on_looked_up_rows_are_reported(rules, lookup, optimizer, reported):
    source = MODEL_FN.replace("LOOKUP", lookup).replace("OPTIMIZER", optimizer)
    result = rewrite_source(source.encode(), "program.py", rules)
    found = [f for f in result.findings if f.code == "E2K101" and "sparse gradient" in f.message]
    assert bool(found) == reported, [f.format() for f in result.findings]
    assert result.status == ("partial" if reported else "converted"), [f.format() for f in result.findings]
    # Converted either way (to Keras's class, or to a helper subclassing it, in the helpers module).
    assert "tf.keras.optimizers." in result.new.decode() + "".join(result.helpers.values())


@pytest.mark.parametrize("optimizer, reported", [('"RMSProp"', True), ('"Adagrad"', False), ('"Adam"', False)])
def test_canned_embedding_columns_with_rmsprop_are_reported(rules, optimizer, reported):
    source = f'''\
import tensorflow as tf

city = tf.feature_column.categorical_column_with_vocabulary_list("city", ["a", "b", "c"])
columns = [tf.feature_column.embedding_column(city, 2)]
est = tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=columns, optimizer={optimizer})
est.train(lambda: tf.data.Dataset.from_tensor_slices(({{"city": ["a", "b"]}}, [0, 1])).batch(2), steps=1)
'''
    result = rewrite_source(source.encode(), "canned.py", rules)
    found = [f for f in result.findings if f.code == "E2K101" and "sparse gradient" in f.message]
    assert bool(found) == reported, [f.format() for f in result.findings]
