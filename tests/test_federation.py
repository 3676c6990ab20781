"""Programs split across modules convert in one unit pass (estimator2keras.analysis.federation):
the Estimator built by a factory in model.py from the RunConfig task.py gives it, its input_fns
called through lambdas in task.py; and nothing changes when the program would break."""
from __future__ import annotations

import ast

from estimator2keras.analysis.federation import groups
from estimator2keras.cli import main

MODEL = '''\
import tensorflow.compat.v1 as tf

FEATURES = ["a", "b"]


def get_feature_columns():
  return [tf.feature_column.numeric_column(name) for name in FEATURES]


def build_estimator(config, hidden_units=None, num_classes=3):
  return tf.estimator.DNNClassifier(
      config=config,
      feature_columns=get_feature_columns(),
      hidden_units=hidden_units,
      n_classes=num_classes)


def input_fn(batch_size=16):
  features = {"a": tf.zeros([64]), "b": tf.ones([64])}
  labels = tf.zeros([64], dtype=tf.int64)
  return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(batch_size)
'''

TASK = '''\
import tensorflow.compat.v1 as tf

from . import model


def train_and_evaluate(args):
{config}
  train_input_fn = lambda: model.input_fn(batch_size=args.batch_size)
  train_spec = tf.estimator.TrainSpec(train_input_fn, max_steps=args.steps)
  eval_spec = tf.estimator.EvalSpec(lambda: model.input_fn(batch_size=8), steps=2)
  estimator = model.build_estimator(config=run_config, hidden_units=[8, 4], num_classes=3)
  tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
'''

NAMED_STRATEGY = '''\
  strategy = tf.distribute.MirroredStrategy()
  run_config = tf.estimator.RunConfig(train_distribute=strategy, tf_random_seed=3)
'''


def write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def package(tmp_path, config=NAMED_STRATEGY, model=MODEL):
    write(tmp_path, {"trainer/__init__.py": "", "trainer/model.py": model,
                     "trainer/task.py": TASK.format(config=config)})
    return tmp_path / "trainer" / "model.py", tmp_path / "trainer" / "task.py"


def converts(tmp_path, capsys) -> None:
    assert main(["rewrite", str(tmp_path)]) == 1  # files changed
    assert "e2k: 2 converted, 0 partial" in capsys.readouterr().err


def test_a_factory_in_one_module_converts_with_the_runconfig_of_another(tmp_path, capsys):
    model_py, task_py = package(tmp_path)
    converts(tmp_path, capsys)
    model, task = model_py.read_text(), task_py.read_text()
    assert "tf.estimator" not in model + task
    # The factory no longer takes the RunConfig; its caller builds under its own strategy.
    assert "def build_estimator(hidden_units=None, num_classes=3):" in model
    assert "config=run_config" not in task and "run_config" not in task
    assert "with strategy.scope():\n    model_2 = model.build_estimator(hidden_units=[8, 4], num_classes=3)" in task
    # The lambdas' bodies are what fit and evaluate read; the per-replica batch becomes global.
    assert "model.input_fn(batch_size=args.batch_size * strategy.num_replicas_in_sync)" in task
    assert "train_input_fn" not in task
    # The canned model's class is defined where the factory builds it.
    assert "class DNNClassifierModel(CannedModel):" in model and "DNNClassifierModel" not in task
    for text in (model, task):
        ast.parse(text)


def test_the_strategy_the_runconfig_makes_is_made_by_the_caller(tmp_path, capsys):
    inline = ("  run_config = tf.estimator.RunConfig(\n"
              "      train_distribute=tf.distribute.MirroredStrategy(), model_dir=args.job_dir)\n"
              "  print('Model dir: %s' % run_config.model_dir)\n")
    model_py, task_py = package(tmp_path, config=inline)
    converts(tmp_path, capsys)
    task = task_py.read_text()
    assert "print('Model dir: %s' % args.job_dir)" in task  # the setting read back, in place
    assert task.index("strategy = tf.distribute.MirroredStrategy()") < task.index("with strategy.scope():")
    assert "ModelDirCheckpoints(model_2, args.job_dir" in task
    # The callback's class, from the helpers module beside the package's modules, where fit is.
    assert "from .e2k_helpers import ModelDirCheckpoints" in task
    assert "ModelDirCheckpoints" not in model_py.read_text()
    assert "class ModelDirCheckpoints" in (task_py.parent / "e2k_helpers.py").read_text()


def test_a_factory_parameter_is_the_argument_of_its_one_call(tmp_path, capsys):
    # n_classes comes through the factory's parameter: 3 at its one call, not the default.
    model = MODEL.replace("num_classes=3):", "num_classes=2):")
    model_py, _ = package(tmp_path, model=model)
    converts(tmp_path, capsys)
    assert "Dense(3)" in model_py.read_text()


def test_nothing_changes_when_the_program_still_needs_what_would_go(tmp_path, capsys):
    # task.py reads a setting of the RunConfig that it did not give: the RunConfig must stay.
    config = NAMED_STRATEGY + "  print(run_config.save_checkpoints_steps)\n"
    model_py, task_py = package(tmp_path, config=config)
    assert main(["rewrite", str(tmp_path)]) == 1
    model = model_py.read_text()
    assert "def build_estimator(config," in model and "return tf.estimator.DNNClassifier(" in model
    assert "tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)" in task_py.read_text()
    out = capsys.readouterr()
    assert "E2K902" in out.out and "0 converted, 2 partial" in out.err


def test_groups_are_files_importing_one_another_with_an_estimator():
    sources = {
        "/p/trainer/task.py": b"from . import model\n",
        "/p/trainer/model.py": b"import tensorflow as tf\ntf.estimator.DNNClassifier()\n",
        "/p/trainer/__init__.py": b"",
        "/p/other/util.py": b"import json\n",
        "/p/other/tool.py": b"from . import util\n",
    }
    found = groups(sources, lambda source: b"Classifier(" in source)
    assert found == [{"/p/trainer/task.py", "/p/trainer/model.py"}]


def _jobs(before: dict, after: dict):
    from types import SimpleNamespace

    import libcst as cst

    from estimator2keras._context import RewriteContext
    from estimator2keras._registry import RuleSet

    rules = RuleSet.load((), (), ())
    jobs = {}
    for path in before:
        parsed = cst.parse_module(before[path])
        module = parsed if after[path] == before[path] else cst.parse_module(after[path])
        jobs[path] = SimpleNamespace(parsed=parsed, module=module, ctx=RewriteContext(path, rules))
    return jobs, RewriteContext("/p/a.py", rules)


def test_a_result_that_reads_what_its_module_lacks_is_refused():
    from estimator2keras.analysis.federation import _unsound

    before = {"/p/a.py": "import b\nx = b.f()\n", "/p/b.py": "def f():\n    return 1\n"}
    # b.f renamed away while a.py still reads it; then a.py reading a name nothing defines.
    jobs, ctx = _jobs(before, {**before, "/p/b.py": "def g():\n    return 1\n"})
    assert "reads b.f, which /p/b.py would no longer define" in _unsound(jobs, ctx)
    jobs, ctx = _jobs(before, {**before, "/p/a.py": "import b\nx = b.f(strategy)\n"})
    assert "would read strategy" in _unsound(jobs, ctx)
    # A parameter that shadows the module's name is not the module.
    jobs, ctx = _jobs(before, {**before, "/p/a.py": "import b\nx = b.f()\n\ndef h(b):\n    return b.g\n"})
    assert _unsound(jobs, ctx) is None


SERVING = '''

def serving_input_fn():
  inputs = {"a": tf.placeholder(tf.float32, [None]), "b": tf.placeholder(tf.float32, [None])}
  return tf.estimator.export.ServingInputReceiver(inputs, inputs)
'''


def test_a_serving_function_of_another_module_is_converted_where_it_is(tmp_path, capsys):
    config = NAMED_STRATEGY.replace("tf_random_seed=3", "model_dir=args.job_dir") + (
        "  exporter = tf.estimator.FinalExporter('exporter', model.serving_input_fn)\n")
    model_py, task_py = package(tmp_path, config=config, model=MODEL + SERVING)
    text = TASK.format(config=config).replace("steps=2)", "steps=2, exporters=[exporter])")
    task_py.write_text(text)
    converts(tmp_path, capsys)
    model, task = model_py.read_text(), task_py.read_text()
    assert "tf.estimator" not in model + task and "placeholder" not in model
    assert "def serving_input_fn(" in model and "tf.TensorSpec([None], tf.float32" in model
    assert "model.serving_input_fn(" in task  # named through its module where the export is


def test_names_of_other_modules_the_conversion_reads_are_imported_as_their_modules_are(tmp_path, capsys):
    # A script beside its modules: `from model import model_fn`, `import inputs` and
    # `inputs.train_fn` given to the Estimator. The model_fn becomes `build_model` in model.py,
    # the input_fn is called by its name: both imported the way task.py imports their modules.
    write(tmp_path, {
        "model.py": (
            "import tensorflow.compat.v1 as tf\n\n\n"
            "def model_fn(features, labels, mode):\n"
            "    logits = tf.layers.dense(features['x'], 1)\n"
            "    loss = tf.losses.mean_squared_error(labels, logits)\n"
            "    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())\n"
            "    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)\n"),
        "inputs.py": (
            "import tensorflow.compat.v1 as tf\n\n\n"
            "def train_fn():\n"
            "    return tf.data.Dataset.from_tensor_slices(({'x': [[1.0]]}, [[2.0]])).repeat().batch(1)\n"),
        "task.py": (
            "import tensorflow.compat.v1 as tf\n\n"
            "from model import model_fn\n"
            "import inputs\n\n"
            "estimator = tf.estimator.Estimator(model_fn=model_fn)\n"
            "estimator.train(inputs.train_fn, max_steps=3)\n"),
    })
    assert main(["rewrite", str(tmp_path)]) == 1
    assert "0 partial" in capsys.readouterr().err
    task = (tmp_path / "task.py").read_text()
    assert "from model import build_model" in task and "model_fn" not in task
    assert "from inputs import train_fn" in task and "train_fn()" in task
    assert "def build_model(" in (tmp_path / "model.py").read_text()


def test_a_defect_of_the_program_pass_leaves_the_files_as_they_convert_alone(tmp_path, capsys, monkeypatch):
    import estimator2keras.analysis.federation as federation

    def broken(*args, **kwargs):
        raise RuntimeError("a defect")

    monkeypatch.setattr(federation, "rewrite_group", broken)
    model_py, task_py = package(tmp_path)
    assert main(["rewrite", str(tmp_path)]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert "def build_estimator(config," in model_py.read_text()  # as alone: its call is not seen
    assert "tf.estimator.train_and_evaluate" in task_py.read_text()


def test_a_package_module_imported_from_its_package_is_not_a_name_the_package_lost(tmp_path, capsys):
    # run.py: `from trainer import task`, with trainer/__init__.py in the program: `task` is a
    # module of the package, which __init__.py never defined.
    model_py, task_py = package(tmp_path)
    (tmp_path / "run.py").write_text("from trainer import task\n\ntask.train_and_evaluate(None)\n")
    assert main(["rewrite", str(tmp_path)]) == 1
    assert "0 partial" in capsys.readouterr().err
    assert "with strategy.scope():" in task_py.read_text()
