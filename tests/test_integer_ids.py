"""Integer ids the model_fn takes from its features and looks up itself (an embedding table, a
one-hot code, a gather) are cast to int64 in the Keras model: Keras 3 builds a model made under
a distribution strategy on the mean of the replicas' first batches (floats), which these ops
refuse ("Unable to automatically build the model"). Fixture integer_ids_mirrored trains under
MirroredStrategy with 2 replicas on both TensorFlows."""
from __future__ import annotations

import textwrap

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({{"ids": [[1, 2]], "kind": [3]}}, [1])).repeat().batch(2)


def model_fn(features, labels, mode, params):
    table = tf.compat.v1.get_variable("table", [10, 4])
{body}
    logits = tf.compat.v1.layers.dense(pooled, 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf.distribute.MirroredStrategy()
estimator = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(train_distribute=strategy))
estimator.train(input_fn, steps=2)
'''


def convert(rules, body: str) -> str:
    source = PROGRAM.format(body=textwrap.indent(textwrap.dedent(body), "    "))
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    return result.new.decode()


def test_ids_read_from_the_features_are_cast(rules):
    new = convert(rules, '''\
        ids = features["ids"]
        bag = tf.reduce_mean(tf.nn.embedding_lookup(table, ids), axis=1)
        kind = tf.one_hot(indices=features["kind"], depth=3)
        pooled = tf.concat([bag, kind, tf.gather(table, features["kind"])], axis=1)
    ''')
    assert "tf.nn.embedding_lookup(self.table, tf.cast(ids, tf.int64))" in new
    assert "tf.one_hot(indices=tf.cast(features[\"kind\"], tf.int64), depth=3)" in new
    assert "tf.gather(self.table, tf.cast(features[\"kind\"], tf.int64))" in new


def test_ids_the_model_computes_or_casts_itself_are_left(rules):
    new = convert(rules, '''\
        first = tf.nn.embedding_lookup(table, tf.cast(features["ids"], tf.int32))
        best = tf.argmax(tf.reduce_sum(first, axis=1), axis=1)
        pooled = tf.concat([tf.reduce_mean(first, axis=1), tf.one_hot(best, 4)], axis=1)
    ''')
    assert "tf.nn.embedding_lookup(self.table, tf.cast(features[\"ids\"], tf.int32))" in new
    assert "tf.one_hot(best, 4)" in new
    assert new.count("tf.cast(") == 1
