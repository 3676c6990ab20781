"""experiment_fn programs (issue 12): what e2k says about them. tf.contrib.learn's Experiment,
run by learn_runner.run(experiment_fn, run_config, hparams), exists only in TensorFlow 1, so
no conversion of it can be proven by e2k parity (its Estimator side runs TensorFlow 2.15):
the Estimator is refused with the one-to-one train_and_evaluate it maps to. An experiment_fn
returning the Estimator with its specs, and a RunConfig made by a function of the program
(the Cloud ML template's create_run_config), are refused saying so."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source

MODEL_FN = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[2.0], [4.0]])).repeat().batch(2)


def model_fn(features, labels, mode, params):
    output = tf.compat.v1.layers.dense(features["x"], 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, output)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

'''


def findings(rules, tail: str):
    result = rewrite_source((MODEL_FN + tail).encode(), "task.py", rules)
    assert result.status == "partial"
    return [f.message for f in result.findings if f.code == "E2K902"]


def test_contrib_learn_experiment(rules):
    messages = findings(rules, '''
def experiment_fn(run_config, hparams):
    estimator = tf.estimator.Estimator(model_fn, config=run_config, params=hparams)
    return tf.contrib.learn.Experiment(estimator, train_input_fn=input_fn, eval_input_fn=input_fn,
                                       train_steps=100, eval_steps=1)


tf.contrib.learn.learn_runner.run(experiment_fn, run_config=tf.contrib.learn.RunConfig(model_dir="m"),
                                  hparams=tf.contrib.training.HParams(learning_rate=0.1))
''')
    assert any("tf.contrib.learn.Experiment" in m and "only TensorFlow 1 has" in m
               and "train_and_evaluate(estimator, TrainSpec(train_input_fn, max_steps=train_steps)" in m
               for m in messages), messages


def test_experiment_fn_returning_estimator_and_specs(rules):
    messages = findings(rules, '''
def experiment_fn(run_config, hparams):
    estimator = tf.estimator.Estimator(model_fn, config=run_config, params=hparams)
    train_spec = tf.estimator.TrainSpec(input_fn, max_steps=100)
    eval_spec = tf.estimator.EvalSpec(input_fn, steps=1)
    return estimator, train_spec, eval_spec


estimator, train_spec, eval_spec = experiment_fn(tf.estimator.RunConfig(model_dir="m"), {"n": 1})
tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
''')
    assert any("returned together with other values" in m for m in messages), messages


def test_experiment_fn_passed_on_with_its_config(rules):
    messages = findings(rules, '''
def experiment_fn(run_config, hparams):
    estimator = tf.estimator.Estimator(model_fn, config=run_config, params=hparams)
    estimator.train(input_fn, steps=3)


run_experiment(experiment_fn, run_config=tf.estimator.RunConfig(model_dir="m"), hparams={"n": 1})
''')
    assert any("`experiment_fn`'s parameter `run_config`, and `experiment_fn` is passed on" in m
               for m in messages), messages


def test_run_config_made_by_a_function(rules):
    # Converted since the settings are read where the function is called (test_config_factory);
    # one that computes a setting from its own locals is still refused, naming the setting.
    messages = findings(rules, '''
def create_run_config(model_dir):
    directory = model_dir + "/run"
    if model_dir == "m":
        directory = "other"
    return tf.estimator.RunConfig(model_dir=directory, tf_random_seed=7)


def main():
    run_config = create_run_config("m")
    estimator = tf.estimator.Estimator(model_fn, config=run_config, params={"n": 1})
    estimator.train(input_fn, steps=3)
''')
    assert any("`model_dir` reads `directory`, which `create_run_config(...)` computes" in m for m in messages), messages
    result = rewrite_source((MODEL_FN + '''
def create_run_config(model_dir):
    return tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=7)


def main():
    run_config = create_run_config("m")
    estimator = tf.estimator.Estimator(model_fn, config=run_config, params={"n": 1})
    estimator.train(input_fn, steps=3)
''').encode(), "task.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert 'ModelDirCheckpoints(model, "m", save_secs=600)' in result.new.decode()


FACTORY = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[2.0], [4.0]])).repeat().batch(2)


def create(config):
    columns = [tf.feature_column.numeric_column("x")]
    if TASK == "classification":
        estimator = tf.estimator.DNNClassifier([4], columns, config=config)
    else:
        estimator = tf.estimator.DNNRegressor([4], columns, config=config)
    {extra}return estimator


TASK = "regression"


def main():
    strategy = tf.distribute.MirroredStrategy()
    run_config = tf.estimator.RunConfig(train_distribute=strategy, tf_random_seed=1)
    estimator = create(run_config)
    estimator.train(input_fn, steps=3)
'''


def test_factory_config_shared_by_the_estimators_of_its_branches(rules):
    """The Cloud ML template's model.create(args, config): a classifier or a regressor by a
    setting, each given the factory's config. Both convert; the caller's strategy scopes the
    factory's call and its seed is set before it."""
    result = rewrite_source(FACTORY.replace("{extra}", "").encode(), "model.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert "def create():" in new
    assert "        model = DNNClassifierModel()" in new and "        model = DNNRegressorModel()" in new
    assert ("    tf.keras.utils.set_random_seed(1)\n    with strategy.scope():\n        model = create()\n") in new


def test_factory_config_read_for_more_is_refused(rules):
    result = rewrite_source(FACTORY.replace("{extra}", "print(config.model_dir)\n    ").encode(), "model.py", rules)
    assert result.status == "partial"
    assert any("`config` is used for more than the Estimator's config" in f.message for f in result.findings)
