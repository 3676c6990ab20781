"""One Estimator after an `if` whose branches bind its RunConfig (``if params["use_tpu"]:
config = tpu.RunConfig(cluster=...) else: config = tpu.RunConfig()``, the Cloud TPU
courses' style; a MirroredStrategy by a GPU-count flag): the Estimator's statement is written
for each branch's RunConfig under the `if`'s own test, what follows once where both write it
alike. Refused, saying why, where the test may read otherwise after the `if`."""
from __future__ import annotations

import ast
import textwrap

import pytest

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf


def model_fn(features, labels, mode, params):
    output = tf.compat.v1.layers.dense(features, 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, output)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 8, [[0.5]] * 8)).repeat().batch(4)


def main(args):
    if args.num_gpus > 1:
        strategy = tf.distribute.MirroredStrategy()
        config = tf.estimator.RunConfig(model_dir=args.model_dir, train_distribute=strategy,
                                        save_checkpoints_steps=5)
    else:
        config = tf.estimator.RunConfig(model_dir=args.model_dir)
    REBIND
    estimator = tf.estimator.Estimator(model_fn, config=config)
    estimator.train(input_fn, steps=10)
'''


def convert(rules, rebind: str = "pass", program: str = PROGRAM):
    source = textwrap.dedent(program).replace("REBIND", rebind).encode()
    return rewrite_source(source, "trainer.py", rules)


def test_each_branch_runconfig_builds_the_model_under_the_if_test(rules):
    result = convert(rules)
    assert result.status == "converted", [f.message for f in result.findings]
    new = result.new.decode()
    ast.parse(new)
    body = new.split("def main(args):")[1]
    assert "RunConfig" not in body and "else:\n        pass" not in body, body
    assert textwrap.indent(textwrap.dedent('''\
        if args.num_gpus > 1:
            with strategy.scope():
                model = build_model()
    '''), "    ") in body, body
    # Each branch's checkpoint settings; the training, with them, written once.
    assert "ModelDirCheckpoints(model, args.model_dir, save_steps=5)" in body, body
    assert "ModelDirCheckpoints(model, args.model_dir, save_secs=600)" in body, body
    assert body.count("callbacks=[checkpoints]") == 1 and body.count("model.fit(") == 1, body


@pytest.mark.parametrize("rebind", [
    "args = object()",  # the test's name is rebound: it may read otherwise after the `if`
    "args.num_gpus = 1",  # its attribute changes
])
def test_a_test_that_may_read_otherwise_is_not_written_again(rules, rebind):
    result = convert(rules, rebind)
    assert result.status == "partial"
    assert any("not a RunConfig(...) e2k can follow" in f.message for f in result.findings), \
        [f.message for f in result.findings]


def test_three_branches_are_refused_not_half_converted(rules):
    program = PROGRAM.replace(
        "    else:\n        config = tf.estimator.RunConfig(model_dir=args.model_dir)",
        "    elif args.num_gpus == 1:\n        config = tf.estimator.RunConfig(model_dir=args.model_dir)\n"
        "    else:\n        config = tf.estimator.RunConfig()")
    result = convert(rules, program=program)
    assert result.status == "partial"
    assert "tf.estimator.Estimator(model_fn, config=config)" in result.new.decode()


def test_a_tpu_estimator_use_tpu_flag_of_the_same_test_is_decided_in_each_branch(rules):
    # TPUEstimator(use_tpu=params["use_tpu"]) writes its own `if params["use_tpu"]:`; under the
    # RunConfig's branch of the same test it is decided: no `if` nested in the same `if`.
    program = '''\
import tensorflow as tf

TPU = tf.compat.v1.estimator.tpu


def model_fn(features, labels, mode, params):
    output = tf.compat.v1.layers.dense(features, 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, output)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return TPU.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def input_fn(params):
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 8, [[0.5]] * 8)).repeat().batch(
        params["batch_size"], drop_remainder=True)


def train(output_dir, hparams):
    if hparams["use_tpu"]:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(hparams["tpu"])
        config = TPU.RunConfig(cluster=resolver, model_dir=output_dir, save_checkpoints_steps=100)
    else:
        config = TPU.RunConfig()
    estimator = TPU.TPUEstimator(model_fn=model_fn, config=config, model_dir=output_dir,
                                 train_batch_size=32, use_tpu=hparams["use_tpu"])
    estimator.train(input_fn, max_steps=10)
'''
    result = convert(rules, program=program)
    assert result.status == "converted", [f.message for f in result.findings]
    body = result.new.decode().split("def train(output_dir, hparams):")[1]
    assert body.count('if hparams["use_tpu"]:') == 2, body  # the RunConfig's, and the joined one
    assert "TPUStrategy(resolver)" in body and "get_strategy()" in body, body
    assert "TPUClusterResolver()" not in body, body  # the other branch's resolver: never run


def test_a_computed_setting_read_back_is_computed_once_where_the_runconfig_was(rules):
    # `config.model_dir` read after `model_dir=args.model_dir or tempfile.mkdtemp()`: one
    # directory, as the RunConfig held it (it was refused as "used elsewhere too").
    program = PROGRAM.replace("import tensorflow as tf\n", "import os\nimport tempfile\n\nimport tensorflow as tf\n").replace(
        '''    if args.num_gpus > 1:
        strategy = tf.distribute.MirroredStrategy()
        config = tf.estimator.RunConfig(model_dir=args.model_dir, train_distribute=strategy,
                                        save_checkpoints_steps=5)
    else:
        config = tf.estimator.RunConfig(model_dir=args.model_dir)
''', '''    config = tf.estimator.RunConfig(model_dir=args.model_dir or tempfile.mkdtemp())
''').replace("    estimator.train(input_fn, steps=10)\n",
             "    estimator.train(input_fn, steps=10)\n    print(os.listdir(config.model_dir))\n")
    result = convert(rules, program=program)
    assert result.status == "converted", [f.message for f in result.findings]
    body = result.new.decode().split("def main(args):")[1]
    assert body.count("tempfile.mkdtemp()") == 1, body
    assert "model_dir = args.model_dir or tempfile.mkdtemp()" in body, body
    assert "ModelDirCheckpoints(model, model_dir," in body and "print(os.listdir(model_dir))" in body, body


@pytest.mark.parametrize("made", [
    "    strategy = tf.distribute.MirroredStrategy() if args.num_gpus > 1 else None\n",
    "    strategy = None\n    if args.num_gpus > 1:\n        strategy = tf.distribute.MirroredStrategy()\n",
])
def test_a_strategy_or_none_by_a_condition_is_the_default_strategy_for_none(rules, made):
    # RunConfig(train_distribute=None) trained on one device: TensorFlow's default strategy.
    program = PROGRAM.replace('''    if args.num_gpus > 1:
        strategy = tf.distribute.MirroredStrategy()
        config = tf.estimator.RunConfig(model_dir=args.model_dir, train_distribute=strategy,
                                        save_checkpoints_steps=5)
    else:
        config = tf.estimator.RunConfig(model_dir=args.model_dir)
''', made + "    config = tf.estimator.RunConfig(model_dir=args.model_dir, train_distribute=strategy)\n")
    result = convert(rules, program=program)
    assert result.status == "converted", [f.message for f in result.findings]
    body = result.new.decode().split("def main(args):")[1]
    assert "tf.distribute.get_strategy()" in body and "None" not in body.split("with strategy.scope()")[0], body
    assert "with strategy.scope():\n        model = build_model()" in body, body


def test_a_strategy_that_may_be_something_else_is_still_refused(rules):
    program = PROGRAM.replace('''    if args.num_gpus > 1:
        strategy = tf.distribute.MirroredStrategy()
        config = tf.estimator.RunConfig(model_dir=args.model_dir, train_distribute=strategy,
                                        save_checkpoints_steps=5)
    else:
        config = tf.estimator.RunConfig(model_dir=args.model_dir)
''', "    strategy = tf.distribute.MirroredStrategy() if args.num_gpus > 1 else make_strategy()\n"
     "    config = tf.estimator.RunConfig(model_dir=args.model_dir, train_distribute=strategy)\n")
    result = convert(rules, program=program)
    assert result.status == "partial"
