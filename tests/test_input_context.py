"""An input_fn that reads the InputContext the Estimator gave it under a strategy (its worker's
shard, the per-replica batch) is refused: called without one, every worker would read all the
data (a tester's TensorFlow multi-worker tutorial program trained otherwise with 2 workers)."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf


def input_fn(mode, input_context=None):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0], [2.0], [3.0], [4.0]], [[2.0], [4.0], [6.0], [8.0]]))
    if input_context:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return dataset.repeat().batch(2)


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features, 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
config = tf.estimator.RunConfig(train_distribute=strategy)
estimator = tf.estimator.Estimator(model_fn, config=config)
tf.estimator.train_and_evaluate(estimator, tf.estimator.TrainSpec(input_fn=input_fn, max_steps=10),
                                tf.estimator.EvalSpec(input_fn=input_fn, steps=2))
'''


def test_an_input_fn_reading_its_input_context_is_left_with_a_finding(rules):
    result = rewrite_source(PROGRAM.encode(), "task.py", rules)
    assert result.status == "partial"
    assert any(f.code == "E2K002" and "reads `input_context`" in f.message for f in result.findings), \
        [f.format() for f in result.findings]


def test_an_input_context_the_input_fn_does_not_read_is_no_obstacle(rules):
    unread = PROGRAM.replace('''    if input_context:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
''', "")
    result = rewrite_source(unread.encode(), "task.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
