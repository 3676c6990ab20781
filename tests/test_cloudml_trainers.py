"""Cloud ML Engine's trainer packages (census, iris): the serving functions in a dict of
another module, a session_config of device filters picked by the TF_CONFIG task, an
input_fn that returns its nested function's result, and a model_dir that may be None."""
from __future__ import annotations

import textwrap
from pathlib import Path

from estimator2keras._engine import rewrite_source
from estimator2keras.cli import main
from conftest import flat

INPUTS = '''\
import tensorflow as tf

NUMERIC = ['age', 'hours']
WORDS = ['workclass']


def input_fn(batch_size=4):
    return tf.data.Dataset.from_tensor_slices(
        ({'age': [1.0] * 8, 'hours': [2.0] * 8, 'workclass': ['a'] * 8}, [0, 1] * 4)).repeat().batch(batch_size)


def json_serving_input_fn():
    inputs = {}
    for name in NUMERIC:
        inputs[name] = tf.placeholder(shape=[None], dtype=tf.float32)
    for name in WORDS:
        inputs[name] = tf.placeholder(shape=[None], dtype=tf.string)
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


def csv_serving_input_fn():
    csv_row = tf.placeholder(shape=[None], dtype=tf.string)
    columns = tf.decode_csv(csv_row, record_defaults=[[0.0], [0.0], ['']])
    features = dict(zip(NUMERIC + WORDS, columns))
    return tf.estimator.export.ServingInputReceiver(features, {'csv_row': csv_row})


SERVING_FUNCTIONS = {
    'JSON': json_serving_input_fn,
    'CSV': csv_serving_input_fn,
}
'''
TASK = '''\
import json
import os

import tensorflow as tf

import trainer.inputs as input_module


def _get_session_config_from_env_var():
    tf_config = json.loads(os.environ.get('TF_CONFIG', '{}'))
    if tf_config and tf_config['task']['type'] == 'master':
        return tf.ConfigProto(device_filters=['/job:ps', '/job:master'])
    return None


def train_and_evaluate(args):
    columns = [tf.feature_column.numeric_column('age'), tf.feature_column.numeric_column('hours')]
    estimator = tf.estimator.DNNClassifier(
        hidden_units=[4], feature_columns=columns,
        config=tf.estimator.RunConfig(session_config=_get_session_config_from_env_var(), model_dir=args.job_dir))
    train_spec = tf.estimator.TrainSpec(input_module.input_fn, max_steps=10)
    exporter = tf.estimator.FinalExporter('census', input_module.SERVING_FUNCTIONS[args.export_format])
    eval_spec = tf.estimator.EvalSpec(input_module.input_fn, steps=2, exporters=[exporter])
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
'''


def write(tree: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def convert(tmp_path, capsys, task=TASK, inputs=INPUTS):
    write(tmp_path, {"trainer/__init__.py": "", "trainer/inputs.py": inputs, "trainer/task.py": task})
    main(["rewrite", str(tmp_path)])
    out = capsys.readouterr().out
    return flat((tmp_path / "trainer" / "inputs.py").read_text()), flat((tmp_path / "trainer" / "task.py").read_text()), out


def test_a_dict_of_serving_functions_in_another_module_converts_each(tmp_path, capsys):
    inputs, task, out = convert(tmp_path, capsys)
    assert "tf.estimator." not in task, task
    assert 'signatures={"predict": input_module.SERVING_FUNCTIONS[args.export_format](' in task
    assert "def json_serving_input_fn(predict):" in inputs and "def csv_serving_input_fn(predict):" in inputs
    # Both loops of placeholders are the signature: their comprehensions merged, in order.
    assert ("[{**{name: tf.TensorSpec([None], tf.float32, name=name) for name in NUMERIC}, "
            "**{name: tf.TensorSpec([None], tf.string, name=name) for name in WORDS}}]") in inputs, inputs


def test_the_serving_function_of_one_string_is_reported_and_the_rest_converts(tmp_path, capsys):
    """The Estimator exported classify signatures (serving_default) on the CSV row: Keras
    cannot; the predict signature is exported and the function is marked for a human."""
    inputs, task, out = convert(tmp_path, capsys)
    assert "inputs.py: partially converted" in out and "task.py: converted" in out, out
    marks = [line for line in inputs.splitlines() if line.startswith("# e2k: E2K002")]
    assert len(marks) == 1 and "Classify/Regress" in marks[0], inputs
    assert inputs.index(marks[0]) < inputs.index("def csv_serving_input_fn")


def test_device_filters_picked_by_the_task_set_nothing_and_the_function_goes(tmp_path, capsys):
    _, task, _ = convert(tmp_path, capsys)
    assert "_get_session_config_from_env_var" not in task and "ConfigProto" not in task
    assert "import json" not in task and "import os" in task  # os: the export path reads it
    assert "device_filters only chose the tasks a session reached" in task, task


def test_device_filters_under_a_multi_worker_strategy_are_left_for_a_human(tmp_path, capsys):
    task = TASK.replace(
        "config=tf.estimator.RunConfig(session_config",
        "config=tf.estimator.RunConfig(train_distribute=tf.distribute.experimental.MultiWorkerMirroredStrategy(), "
        "session_config")
    _, converted, out = convert(tmp_path, capsys, task=task)
    assert "E2K401 this session_config is not a ConfigProto(...) e2k can read" in out, out
    assert "_get_session_config_from_env_var()" in converted


def test_exports_under_a_model_dir_that_may_be_none_go_where_the_checkpoints_go(tmp_path, capsys):
    """`--job-dir` without a default: the Estimator used a temporary directory, and
    exported there; the checkpoints callback makes that directory."""
    _, task, _ = convert(tmp_path, capsys)
    assert 'os.path.join(args.job_dir or checkpoints.directory, "export", "census"' in task, task


def test_exports_under_a_literal_model_dir_name_it(rules):
    source = TASK.replace("import trainer.inputs as input_module\n", "") \
        .replace("model_dir=args.job_dir", "model_dir='/tmp/census'") \
        .replace("input_module.SERVING_FUNCTIONS[args.export_format]", "serving_input_fn") \
        .replace("input_module.input_fn", "input_fn")
    source += '''

def input_fn():
    return tf.data.Dataset.from_tensor_slices(({'age': [1.0] * 8, 'hours': [2.0] * 8}, [0, 1] * 4)).repeat().batch(4)


def serving_input_fn():
    inputs = {'age': tf.placeholder(shape=[None], dtype=tf.float32),
              'hours': tf.placeholder(shape=[None], dtype=tf.float32)}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)
'''
    result = rewrite_source(source.encode(), "task.py", rules)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    assert 'os.path.join(\'/tmp/census\', "export", "census"' in flat(result.new.decode())


def test_one_batch_name_returned_changed_is_refused_with_the_reason(rules):
    """`features = it.get_next(); return features, parse(features.pop(LABEL))` (census):
    whether `map` gets the batch as one argument or several depends on the dataset."""
    source = '''\
import tensorflow as tf


def input_fn(dataset, batch_size=2):
    iterator = dataset.batch(batch_size).make_one_shot_iterator()
    features = iterator.get_next()
    return features, features.pop("y")


def train_input():
    return input_fn(tf.data.Dataset.from_tensor_slices({"x": [[1.0]] * 8, "y": [[2.0]] * 8}), batch_size=4)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(train_input, steps=1)
'''
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "partial"
    assert any("whether `map` would pass the batch as one argument" in f.message for f in result.findings)
    assert result.new == source.encode() or b"make_one_shot_iterator" in result.new


def test_one_batch_name_of_a_dataset_of_dicts_is_mapped(rules):
    """The same where the dataset's elements are visibly one dict each (its last `map`
    returns a dict, census's `_decode_csv`): `map` passes each as one argument."""
    source = '''\
import tensorflow as tf

COLUMNS = ["x", "y"]


def _decode(line):
    values = tf.io.decode_csv(line, record_defaults=[[0.0], [0.0]])
    features = dict(zip(COLUMNS, values))
    return features


def input_fn(files, batch_size=2, shuffle=True):
    dataset = tf.data.TextLineDataset(files).map(_decode)
    if shuffle:
        dataset = dataset.shuffle(buffer_size=10)
    iterator = dataset.repeat().batch(batch_size).make_one_shot_iterator()
    features = iterator.get_next()
    return features, features.pop("y")


def train_input():
    return input_fn(["train.csv"], batch_size=4)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(train_input, steps=1)
'''
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    new = flat(result.new.decode())
    assert ("dataset.repeat().batch(batch_size).map(lambda features: (features, features.pop(\"y\")))"
            in new), new
    # A dataset whose last map returns a tuple is not one element: refused.
    result = rewrite_source(source.replace("    return features\n", "    return features, 0\n").encode(),
                            "program.py", rules)
    assert result.status == "partial"
