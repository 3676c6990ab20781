"""A RunConfig made by a function of the program (`run_config = create_run_config(args)`, the
Cloud ML Engine templates' style): its settings are read where the function is called, its
parameters standing for the call's values; a strategy the function computes itself is what it
returns from then on (renamed for it), and the call binds the strategy's name.
`fixtures/run_config_from_function` proves the training the same on TF 2.15 and the newest TF."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet

PROGRAM = '''\
import numpy as np
import tensorflow as tf

SEED = 3


def input_fn(batch_size):
    x = np.zeros((8, 2), np.float32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, np.zeros(8, np.int64))).repeat().batch(batch_size)


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


{factory}


def main(args):
{site}
    estimator.train(lambda: input_fn(args.batch_size), max_steps=20)
'''

LOCAL_STRATEGY = '''
def create_run_config(flags_obj):
    distribution = None
    if flags_obj.num_gpus > 1:
        distribution = tf.distribute.MirroredStrategy()
    return tf.estimator.RunConfig(model_dir=flags_obj.model_dir, train_distribute=distribution,
                                  save_checkpoints_steps=flags_obj.save_steps, tf_random_seed=SEED)
'''

BOUND = '''    run_config = create_run_config(args)
    estimator = tf.estimator.Estimator(model_fn, config=run_config)'''
INLINE = '''    estimator = tf.estimator.Estimator(model_fn, config=create_run_config(args))'''


def rewrite(factory: str, site: str = BOUND):
    source = PROGRAM.replace("{factory}", factory.strip("\n")).replace("{site}", site)
    return rewrite_source(source.encode(), "prog.py", RuleSet.load())


def manual(result) -> list[str]:
    return [f.format() for f in result.findings if f.kind == "manual"]


def test_a_strategy_computed_by_the_function_is_what_it_returns():
    result = rewrite(LOCAL_STRATEGY)
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert "def create_strategy(flags_obj):" in new and "    return distribution\n" in new
    assert "    distribution = create_strategy(args)\n" in new
    assert "with distribution.scope():" in new
    # The settings, read where the function is called: its parameter is the call's value.
    assert "ModelDirCheckpoints(model, args.model_dir, save_steps=args.save_steps)" in new
    assert "tf.keras.utils.set_random_seed(SEED)" in new
    assert "input_fn(args.batch_size * distribution.num_replicas_in_sync)" in new
    assert "RunConfig" not in new and "create_run_config" not in new


def test_a_function_only_making_the_run_config_goes_with_its_call():
    factory = '''
def make_config(flags_obj, seed=7):
    """The run's configuration."""
    return tf.estimator.RunConfig(model_dir=flags_obj.model_dir, tf_random_seed=seed,
                                  train_distribute=tf.distribute.MirroredStrategy())
'''
    for site in (BOUND.replace("create_run_config", "make_config"), INLINE.replace("create_run_config", "make_config")):
        result = rewrite(factory, site)
        assert result.status == "converted", manual(result)
        new = result.new.decode()
        assert "make_config" not in new and "def make_" not in new
        assert "tf.keras.utils.set_random_seed(7)" in new
        assert "ModelDirCheckpoints(model, args.model_dir, save_secs=600)" in new


def test_what_the_keras_program_would_lose_is_refused_naming_it():
    # Another local in a setting: the settings are read where the function is called.
    # A local bound once from its parameters is read as its value, where the function is called.
    result = rewrite(LOCAL_STRATEGY.replace("model_dir=flags_obj.model_dir", "model_dir=directory").replace(
        "    distribution = None\n", "    distribution = None\n    directory = flags_obj.model_dir + '/run'\n"))
    assert result.status == "converted", manual(result)
    assert "ModelDirCheckpoints(model, args.model_dir + '/run', save_steps=args.save_steps)" in result.new.decode()
    assert "    directory = " not in result.new.decode().split("def create_strategy")[1]
    # One computed in an `if` is not.
    result = rewrite(LOCAL_STRATEGY.replace("model_dir=flags_obj.model_dir", "model_dir=directory").replace(
        "    distribution = None\n", "    distribution = None\n    directory = 'a'\n"
        "    if flags_obj.num_gpus:\n        directory = 'b'\n"))
    assert result.status == "partial"
    assert any("the RunConfig's `model_dir` reads `directory`, which `create_run_config(...)` computes" in m
               for m in manual(result)), manual(result)
    # No strategy of its own, and more than the RunConfig: it would go, with what else it did.
    result = rewrite('''
def create_run_config(flags_obj):
    print("configuring")
    return tf.estimator.RunConfig(model_dir=flags_obj.model_dir)
''')
    assert result.status == "partial"
    assert any("does more than make the RunConfig" in m for m in manual(result)), manual(result)
    # Called elsewhere too: those callers would get a strategy.
    result = rewrite(LOCAL_STRATEGY, BOUND + "\n    other = create_run_config(args)")
    assert result.status == "partial"
    assert any("makes the RunConfig, and is used elsewhere too" in m for m in manual(result)), manual(result)
