"""E2K602 where the strategy is not visible in the input_fn and its batch size is the input_fn's
own business (computed from a parameter or params, read elsewhere in it) (issue 12).

The Estimator under MirroredStrategy gave each replica the input_fn's next batch in turn; where
the Keras program reads the dataset, each num_replicas consecutive batches become one global
batch (an emitted ``global_batches``), which fit splits back across the replicas in the same
order. That is exact only when every batch is full, so it is done only when each ``.batch()``
drops its remainder or reads an endless dataset; elsewhere E2K602 still says why. Parity:
fixture ``main_strategy_computed_batch`` and tests/test_per_replica_batch_parity.py.
"""
from __future__ import annotations

from estimator2keras._engine import rewrite_source
from conftest import flat

MODEL_FN = '''

def model_fn(features, labels, mode, params):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

'''


def _program(input_fn: str, calls: str, config: str = "train_distribute=strategy", params: str = "None") -> bytes:
    return ("import tensorflow as tf\n\nFLAGS = None\n\n" + input_fn + MODEL_FN
            + "\ndef main(argv):\n    strategy = tf.distribute.MirroredStrategy()\n"
            + f"    config = tf.estimator.RunConfig({config})\n"
            + f"    estimator = tf.estimator.Estimator(model_fn, config=config, params={params})\n"
            + "".join(f"    {line}\n" for line in calls.strip().splitlines())).encode()


def _rewrite(source: bytes, rules):
    result = rewrite_source(source, "train.py", rules)
    return result, flat(result.new.decode()), [f.format() for f in result.findings]


HALVED = '''
def train_input_fn(batch_size):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    return dataset.batch(batch_size // 2, drop_remainder=True)
'''
JOINED = "global_batches(train_input_fn(FLAGS.batch_size), strategy.num_replicas_in_sync)"


def test_a_computed_batch_is_joined_where_fit_reads_it(rules):
    # Scaling the argument would be wrong: (b * n) // 2 is not (b // 2) * n for odd b.
    result, new, findings = _rewrite(
        _program(HALVED, "estimator.train(input_fn=lambda: train_input_fn(FLAGS.batch_size), steps=5)"), rules)
    assert result.status == "converted", findings
    assert f"model.fit({JOINED}, steps_per_epoch=5)" in new
    assert "return dataset.batch(batch_size // 2, drop_remainder=True)" in new  # the input_fn as it was
    assert "from e2k_helpers import global_batches" in new  # the function, in the helpers module
    assert "def global_batches(dataset, num_replicas):" in result.helpers["global_batches"]
    assert "return dataset.batch(num_replicas, drop_remainder=True).map(join)" in result.helpers["global_batches"]
    assert "FLAGS.batch_size * strategy" not in new
    assert any("E2K602" in f for f in findings)


def test_params_batch_size_divided_is_joined(rules):
    input_fn = '''
def train_input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).repeat()
    batch_size = params["batch_size"] // 8
    return dataset.batch(batch_size, drop_remainder=True)
'''
    result, new, findings = _rewrite(
        _program(input_fn, "estimator.train(train_input_fn, steps=5)", params='{"batch_size": 64}'), rules)
    assert result.status == "converted", findings
    assert ('model.fit(global_batches(train_input_fn(params={"batch_size": 64}), '
            "strategy.num_replicas_in_sync), steps_per_epoch=5)") in new


def test_an_endless_dataset_needs_no_drop_remainder(rules):
    # The size is read again (set_shape), so it cannot be scaled where it is passed; repeat()
    # before the batch, through the names the function assigns, keeps every batch full.
    input_fn = '''
def train_input_fn(batch_size):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    dataset = dataset.repeat().shuffle(16, seed=1)
    dataset = dataset.batch(batch_size)

    def set_shapes(x, y):
        x.set_shape([batch_size, 1])
        return x, y

    return dataset.map(set_shapes)
'''
    result, new, findings = _rewrite(
        _program(input_fn, "estimator.train(input_fn=lambda: train_input_fn(FLAGS.batch_size), steps=5)"), rules)
    assert result.status == "converted", findings
    assert f"model.fit({JOINED}, steps_per_epoch=5)" in new


def test_a_plain_parameter_is_still_scaled_where_it_is_passed(rules):
    input_fn = HALVED.replace("batch_size // 2", "batch_size")
    result, new, findings = _rewrite(
        _program(input_fn, "estimator.train(input_fn=lambda: train_input_fn(FLAGS.batch_size), steps=5)"), rules)
    assert result.status == "converted", findings
    assert "model.fit(train_input_fn(FLAGS.batch_size * strategy.num_replicas_in_sync), steps_per_epoch=5)" in new
    assert "global_batches" not in new


def _refused(input_fn: str, rules) -> str:
    result, new, findings = _rewrite(
        _program(input_fn, "estimator.train(input_fn=lambda: train_input_fn(FLAGS.batch_size), steps=5)"), rules)
    assert result.status == "partial", findings
    assert "global_batches" not in new
    messages = [f for f in findings if "E2K602" in f]
    # The batch where it is made, and each place the Keras program reads its dataset.
    (message,) = [m for m in messages if "batched per replica (" not in m]
    assert any("batched per replica (" in m for m in messages), messages
    return message


def test_a_pass_that_may_end_with_a_smaller_batch_is_refused(rules):
    # Finite data: the Estimator gave the last, smaller batch to one replica alone.
    message = _refused(HALVED.replace(", drop_remainder=True", ""), rules)
    assert "smaller batch" in message and "not visible" in message


def test_repeat_after_the_batch_is_refused(rules):
    input_fn = HALVED.replace("return dataset.batch(batch_size // 2, drop_remainder=True)",
                              "return dataset.batch(batch_size // 2).repeat()")
    assert "smaller batch" in _refused(input_fn, rules)


def test_repeat_under_an_if_is_not_taken_for_endless(rules):
    input_fn = '''
def train_input_fn(batch_size, training=True):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    if training:
        dataset = dataset.repeat()
    return dataset.batch(batch_size // 2)
'''
    assert "smaller batch" in _refused(input_fn, rules)


def test_padded_batches_are_refused(rules):
    input_fn = HALVED.replace("dataset.batch(batch_size // 2, drop_remainder=True)",
                              "dataset.padded_batch(batch_size // 2, drop_remainder=True)")
    assert "padded" in _refused(input_fn, rules)


def test_a_local_counted_evaluation_keeps_its_batches(rules):
    # Shared with evaluate(steps=N) on one device: only the training dataset is joined.
    input_fn = HALVED.replace("dataset.batch", "dataset.repeat().batch")
    calls = """
estimator.train(input_fn=lambda: train_input_fn(FLAGS.batch_size), steps=5)
estimator.evaluate(input_fn=lambda: train_input_fn(FLAGS.batch_size), steps=3)
"""
    result, new, findings = _rewrite(_program(input_fn, calls), rules)
    assert result.status == "converted", findings
    assert f"model.fit({JOINED}, steps_per_epoch=5)" in new
    assert "model.evaluate(train_input_fn(FLAGS.batch_size), steps=3)" in new


def test_a_distributed_evaluation_is_joined_too(rules):
    input_fn = HALVED.replace("dataset.batch", "dataset.repeat().batch")
    calls = """
estimator.train(input_fn=lambda: train_input_fn(FLAGS.batch_size), steps=5)
estimator.evaluate(input_fn=lambda: train_input_fn(FLAGS.batch_size), steps=3)
"""
    result, new, findings = _rewrite(
        _program(input_fn, calls, config="train_distribute=strategy, eval_distribute=strategy"), rules)
    assert result.status == "converted", findings
    assert f"model.evaluate({JOINED}, steps=3)" in new


def test_a_tpu_estimator_and_an_estimator_without_strategy_keep_their_batches(rules):
    # The Cloud TPU template: TPUEstimator in one branch (its input_fn batched the global
    # train_batch_size, split by TPUStrategy as by the TPUEstimator), a plain Estimator on one
    # device in the other. Neither batched per replica: nothing to scale, nothing to report.
    source = '''import tensorflow as tf


def train_input_fn(params={}):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).repeat()
    batch_size = params.get("train_batch_size", 16)
    return dataset.batch(batch_size, drop_remainder=True)
''' + MODEL_FN + '''
def main(args):
    params = vars(args)
    if args.use_tpu:
        config = tf.estimator.tpu.RunConfig(
            cluster=tf.distribute.cluster_resolver.TPUClusterResolver(args.tpu), model_dir=args.model_dir)
        estimator = tf.estimator.tpu.TPUEstimator(
            model_fn=model_fn, config=config, params=params, train_batch_size=args.train_batch_size)
    else:
        config = tf.estimator.RunConfig(model_dir=args.model_dir)
        estimator = tf.estimator.Estimator(model_fn, config=config, params=params)
    estimator.train(train_input_fn, max_steps=args.max_steps)
'''
    result, new, findings = _rewrite(source.encode(), rules)
    assert not any("E2K602" in f for f in findings), findings
    assert "num_replicas_in_sync" not in new and "global_batches" not in new
    assert "strategy = tf.distribute.TPUStrategy(" in new, findings


def test_edits_inside_the_joined_dataset_are_kept(rules):
    # The wrapper goes around the lambda's body as the other rules rewrote it (ModeKeys -> "train").
    input_fn = '''
def train_input_fn(batch_size, mode):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).repeat()
    if mode == tf.estimator.ModeKeys.TRAIN:
        dataset = dataset.shuffle(8)
    return dataset.batch(batch_size // 2, drop_remainder=True)
'''
    calls = "estimator.train(input_fn=lambda: train_input_fn(FLAGS.batch_size, tf.estimator.ModeKeys.TRAIN), steps=5)"
    result, new, findings = _rewrite(_program(input_fn, calls), rules)
    assert result.status == "converted", findings
    assert ('model.fit(global_batches(train_input_fn(FLAGS.batch_size, "train"), strategy.num_replicas_in_sync), '
            "steps_per_epoch=5)") in new
    assert new.count("global_batches(") == 1 and "global_batches" in result.helpers  # imported, called once


FLAGGED = '''
def input_fn(x, training):
    dataset = tf.data.Dataset.from_tensor_slices((x, x))
    if training:
        dataset = dataset.repeat()
    return dataset.batch(8)
'''


def test_a_fixed_batch_of_an_input_fn_a_lambda_calls_becomes_its_parameter(rules):
    # One input_fn for training (repeated) and evaluation (one pass), called by lambdas: the
    # training call passes the global batch; evaluation, which the Estimator did not
    # distribute, keeps the input_fn's own size (its default).
    result, new, findings = _rewrite(_program(FLAGGED, "estimator.train(lambda: input_fn([[1.0]] * 64, True), steps=5)\n"
                                                       "estimator.evaluate(lambda: input_fn([[1.0]] * 16, False))"), rules)
    assert result.status == "converted", findings
    assert "def input_fn(x, training, batch_size=8):" in new
    assert "return dataset.batch(batch_size)" in new
    assert "model.fit(input_fn([[1.0]] * 64, True, batch_size=8 * strategy.num_replicas_in_sync), steps_per_epoch=5)" \
        in new, new
    assert "model.evaluate(input_fn([[1.0]] * 16, False))" in new, new
