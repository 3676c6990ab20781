"""A model_fn written as course notebooks wrote them (tensorflow-without-a-phd): the loss, the
train_op and the eval metrics each made by a function of the program under `if mode == ...`.
The train_op may come from `tf.contrib.training.create_train_op` (read as `minimize` after the
UPDATE_OPS, which it ran), the metrics from a function returning their dict (read as a TPU
metric_fn's), `tf.metrics.accuracy` given the predictions as its labels is the same metric;
a learning rate the program computes from the global step is refused, naming it."""
from __future__ import annotations

import textwrap

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet
from conftest import flat

PROGRAM = '''\
import tensorflow as tf


def model_loss(logits, labels, mode):
    if mode == tf.estimator.ModeKeys.TRAIN or mode == tf.estimator.ModeKeys.EVAL:
        return tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    return None


def model_train_op(loss, mode, params):
    if mode == tf.estimator.ModeKeys.TRAIN:
        optimizer = tf.compat.v1.train.AdamOptimizer(params["lr"])
        return {train_op}
    return None


def model_eval_metrics(classes, labels, mode):
    if mode == tf.estimator.ModeKeys.TRAIN or mode == tf.estimator.ModeKeys.EVAL:
        accuracy = tf.compat.v1.metrics.accuracy({accuracy_args})
        return {{"accuracy": accuracy}}
    return None


def model_fn(features, labels, mode, params):
    hidden = tf.compat.v1.layers.dense(features["x"], 8)
    hidden = tf.nn.relu(tf.compat.v1.layers.batch_normalization(hidden, training=(mode == tf.estimator.ModeKeys.TRAIN)))
    logits = tf.compat.v1.layers.dense(hidden, 3)
    classes = tf.argmax(logits, 1)
    loss = model_loss(logits, labels, mode)
    train_op = model_train_op(loss, mode, params)
    eval_metrics = model_eval_metrics(classes, labels, mode)
    return tf.estimator.EstimatorSpec(mode=mode, predictions={{"classes": classes}}, loss=loss,
                                      train_op=train_op, eval_metric_ops=eval_metrics)


est = tf.estimator.Estimator(model_fn, params={{"lr": 0.01}})
est.train(lambda: tf.data.Dataset.from_tensor_slices(({{"x": [[1.0, 2.0]]}}, [1])).repeat().batch(1), steps=3)
'''

CREATE = "tf.contrib.training.create_train_op(loss, optimizer)"
MINIMIZE = "optimizer.minimize(loss, tf.compat.v1.train.get_global_step())"


def rewrite(train_op=MINIMIZE, accuracy_args="labels, classes"):
    source = PROGRAM.format(train_op=train_op, accuracy_args=accuracy_args)
    return rewrite_source(source.encode(), "prog.py", RuleSet.load())


def manual(result) -> list[str]:
    return [f.format() for f in result.findings if f.kind == "manual"]


def test_create_train_op_is_minimize_after_the_update_ops():
    result = rewrite(CREATE)
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "optimizer=TF1Adam(params[\"lr\"])" in new
    # It ran UPDATE_OPS: the moving averages moved in the Estimator, and do in Keras.
    assert "momentum=1.0" not in new and "tf.keras.layers.BatchNormalization()" in new
    assert "contrib" not in new
    # A plain minimize without control dependencies never ran them: momentum=1.0 keeps that.
    assert "momentum=1.0" in rewrite(MINIMIZE).new.decode()


def test_create_train_op_arguments_it_cannot_carry_are_refused():
    result = rewrite("tf.contrib.training.create_train_op(loss, optimizer, update_ops=[])")
    assert result.status == "partial"
    assert any("`create_train_op(update_ops=...)` is not converted" in m for m in manual(result)), manual(result)


def test_metrics_from_a_function_and_accuracy_given_its_arguments_swapped():
    for args in ("labels, classes", "classes, labels"):
        result = rewrite(accuracy_args=args)
        assert result.status == "converted", manual(result)
        assert 'metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")]' in flat(result.new.decode())
        assert "def model_eval_metrics" not in flat(result.new.decode())  # only the converted model_fn read it


def test_a_learning_rate_the_program_computes_from_the_global_step_is_a_schedule():
    """The builder runs once; the Estimator computed the rate at every step: a schedule class
    computes it at the optimizer's step, and the TF1 decay in the function it calls is the
    Keras schedule called on the step (TF1's decay is a function, not a number, in eager)."""
    source = PROGRAM.format(train_op=MINIMIZE, accuracy_args="labels, classes").replace(
        'tf.compat.v1.train.AdamOptimizer(params["lr"])',
        'tf.compat.v1.train.AdamOptimizer(params["lr"] + decay(tf.compat.v1.train.get_or_create_global_step()))')
    source = source.replace("def model_loss(", textwrap.dedent('''\
        def decay(step):
            return tf.compat.v1.train.exponential_decay(0.1, step, 10, 0.5)


        def model_loss(''', ))
    result = rewrite_source(source.encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert "    return tf.keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)(step)\n" in new
    assert "class LearningRate(tf.keras.optimizers.schedules.LearningRateSchedule):" in new
    assert "    def __call__(self, step):\n        return self.params[\"lr\"] + decay(step)\n" in new
    assert "optimizer=TF1Adam(LearningRate(params))" in flat(new)
    # Another of the optimizer's settings computed from the step has no Keras form: refused.
    momentum = source.replace('tf.compat.v1.train.AdamOptimizer(params["lr"] + decay(',
                              'tf.compat.v1.train.MomentumOptimizer(0.1, decay(')
    result = rewrite_source(momentum.encode(), "prog.py", RuleSet.load())
    assert result.status == "partial"
    assert any("other than the learning rate is computed from the global step" in m for m in manual(result)), \
        manual(result)


def test_a_decay_of_the_global_step_cast_to_an_integer_reads_the_global_step():
    # Official models' resnet_run_loop: piecewise_constant(tf.cast(global_step, tf.int32), ...)
    # was refused as "the learning-rate decay does not read the global step".
    source = '''\
import tensorflow as tf


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    lr = tf.compat.v1.train.piecewise_constant(tf.cast(global_step, tf.int32), [5, 10], [0.1, 0.01, 0.001])
    train_op = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(loss, global_step)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn, params={})
est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [1])).repeat().batch(1), steps=3)
'''
    result = rewrite_source(source.encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", manual(result)
    assert "lr = tf.keras.optimizers.schedules.PiecewiseConstantDecay([5, 10], [0.1, 0.01, 0.001])" in flat(result.new.decode())
    result = rewrite_source(source.replace("tf.cast(global_step, tf.int32)", "tf.cast(labels, tf.int32)").encode(),
                            "prog.py", RuleSet.load())
    assert result.status == "partial"


def test_momentum_with_a_decaying_rate_updates_as_tf1_did():
    # Two testers' programs broke at the first decay: Keras SGD accumulates each gradient times
    # its own step's rate, TF1's Momentum the accumulated gradients times the current rate.
    source = '''\
import tensorflow as tf


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    lr = tf.compat.v1.train.exponential_decay(0.1, tf.compat.v1.train.get_global_step(), 10, 0.5, staircase=True)
    train_op = tf.compat.v1.train.MomentumOptimizer(lr, momentum=0.9).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn, params={})
est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [1])).repeat().batch(1), steps=3)
'''
    result = rewrite_source(source.encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "from e2k_helpers import TF1Momentum" in new and "optimizer=TF1Momentum(lr, momentum=0.9)" in new
    assert "accumulation.assign(accumulation * self.momentum + gradient)" in result.helpers["TF1Momentum"]
    # A constant rate: the same update, Keras's SGD.
    result = rewrite_source(source.replace("MomentumOptimizer(lr,", "MomentumOptimizer(0.1,").encode(), "prog.py",
                            RuleSet.load())
    assert result.status == "converted" and "TF1Momentum" not in flat(result.new.decode())
    # Nesterov: reported for a human, as before.
    result = rewrite_source(source.replace("momentum=0.9)", "momentum=0.9, use_nesterov=True)").encode(), "prog.py",
                            RuleSet.load())
    assert "TF1Momentum" not in flat(result.new.decode())
    assert any("TF1 Momentum scales the whole accumulated step" in m for m in manual(result)), manual(result)
