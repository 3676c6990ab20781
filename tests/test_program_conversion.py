"""Whole-program conversion: a model_fn defined in one module, given to an Estimator in
another, converts in both files together (estimator2keras.analysis.program)."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES
from estimator2keras.cli import main

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PACKAGES = sorted(p.name for p in FIXTURES.iterdir() if (p / "before").is_dir())

MODEL = '''\
import tensorflow as tf


def model_fn(features, labels, mode, params):
    logits = tf.layers.dense(features["x"], params["classes"])
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
'''
TASK = '''\
import tensorflow as tf
{imports}


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({{"x": [[1.0, 2.0]]}}, [1])).repeat().batch(1)


def main():
    estimator = tf.estimator.Estimator(model_fn={model_fn}, params={{"classes": 3}})
    estimator.train(input_fn, steps=2)
'''


def write(tree: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.mark.parametrize("case", PACKAGES)
def test_package_fixture_rewrites_exactly(case, tmp_path):
    out = tmp_path / "out"
    assert main(["rewrite", str(FIXTURES / case / "before"), "--out", str(out)]) == 1
    expected = FIXTURES / case / "after"
    names = sorted(str(p.relative_to(expected)) for p in expected.rglob("*.py"))
    assert names == sorted(str(p.relative_to(out)) for p in out.rglob("*.py"))
    for name in names:
        assert (out / name).read_text() == (expected / name).read_text(), name


@pytest.mark.parametrize("style, imports, model_fn, builder", [
    ("package-attribute", "import trainer.model as model", "model.model_fn", "model_2 = model.build_model("),
    ("relative-module", "from . import model", "model.model_fn", "model_2 = model.build_model("),
    ("from-import", "from trainer.model import model_fn", "model_fn", "model = build_model("),
])
def test_a_model_fn_of_another_module_converts_in_both(tmp_path, style, imports, model_fn, builder):
    write(tmp_path, {"trainer/__init__.py": "", "trainer/model.py": MODEL,
                     "trainer/task.py": TASK.format(imports=imports, model_fn=model_fn)})
    assert main(["rewrite", str(tmp_path)]) == 1
    model = (tmp_path / "trainer" / "model.py").read_text()
    task = (tmp_path / "trainer" / "task.py").read_text()
    assert "def build_model(params):" in model and "def model_fn" not in model
    assert builder in task and ".fit(input_fn(), steps_per_epoch=2)" in task
    if style == "from-import":
        assert "from trainer.model import build_model" in task
    assert "tf.estimator" not in model + task


def test_a_model_fn_of_another_module_calling_its_layer_helpers_in_a_loop(tmp_path):
    # The helper is at the top of model.py: it was refused as "defined inside a function"
    # (its module is not the one building the Estimator), and the columns input_layer reads,
    # given in params by a function of model.py, were not read.
    write(tmp_path, {"trainer/__init__.py": "", "trainer/model.py": """
        import tensorflow as tf

        N_FEATURES = 3


        def dense_block(inputs, units, training):
            net = tf.compat.v1.layers.dense(inputs, units, activation=tf.nn.relu)
            return tf.compat.v1.layers.dropout(net, rate=0.1, training=training)


        def model_fn(features, labels, mode, params):
            training = mode == tf.estimator.ModeKeys.TRAIN
            net = tf.compat.v1.feature_column.input_layer(features, params["feature_columns"])
            for units in params["hidden_units"]:
                net = dense_block(net, units, training)
            logits = tf.compat.v1.layers.dense(net, 2)
            loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
            train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(
                loss, global_step=tf.compat.v1.train.get_global_step())
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


        def feature_columns():
            return [tf.feature_column.numeric_column("x%d" % i) for i in range(N_FEATURES)]
    """, "trainer/task.py": """
        import tensorflow as tf

        from trainer import model


        def input_fn():
            features = {"x0": [1.0] * 4, "x1": [2.0] * 4, "x2": [3.0] * 4}
            return tf.data.Dataset.from_tensor_slices((features, [0, 1] * 2)).repeat().batch(2)


        if __name__ == "__main__":
            estimator = tf.estimator.Estimator(model.model_fn, params={
                "feature_columns": model.feature_columns(), "hidden_units": [8, 4]})
            estimator.train(input_fn, steps=2)
    """})
    assert main(["rewrite", "--check", str(tmp_path)]) == 1
    assert main(["rewrite", str(tmp_path)]) == 1
    model = (tmp_path / "trainer" / "model.py").read_text()
    task = (tmp_path / "trainer" / "task.py").read_text()
    assert "tf.estimator" not in model + task and "# e2k:" not in model + task, model + task
    assert "numeric_input_layer(features, self.params[\"feature_columns\"])" in model, model
    assert "for units in params[\"hidden_units\"]" in model, model


def test_a_canned_factory_given_its_run_config_by_another_module(tmp_path):
    """`def build_estimator(config): return tf.estimator.LinearClassifier(cols, config=config)`
    in trainer/model.py, called by trainer/task.py with the RunConfig (Google's Cloud ML
    samples): the model's classes are defined in model.py, whose factory builds the model,
    at module level (they read nothing of the factory), and the caller makes the rest."""
    write(tmp_path, {"trainer/__init__.py": "", "trainer/model.py": """
        import tensorflow as tf


        def build_estimator(config):
            cols = [tf.feature_column.numeric_column("a")]
            return tf.estimator.LinearClassifier(cols, config=config)
    """, "trainer/task.py": """
        import tensorflow as tf

        from trainer import model


        def input_fn():
            return tf.data.Dataset.from_tensor_slices(({"a": [1.0] * 16}, [0, 1] * 8)).repeat().batch(4)


        if __name__ == "__main__":
            run_config = tf.estimator.RunConfig(model_dir="/tmp/m17")
            estimator = model.build_estimator(run_config)
            train_spec = tf.estimator.TrainSpec(input_fn, max_steps=3)
            eval_spec = tf.estimator.EvalSpec(input_fn, steps=1)
            tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    """})
    assert main(["rewrite", str(tmp_path)]) == 1  # files were converted
    model = (tmp_path / "trainer" / "model.py").read_text()
    task = (tmp_path / "trainer" / "task.py").read_text()
    assert "\nclass LinearClassifierModel(" in model and "LinearModel\n" in model.split("from trainer.e2k_helpers import")[1]
    assert "\nclass LinearModel(" in (tmp_path / "trainer" / "e2k_helpers.py").read_text()
    assert "def build_estimator():" in model and "LinearModel" not in task and "LinearClassifierModel" not in task
    assert "tf.estimator." not in model + task


def test_script_importing_its_sibling(tmp_path):
    write(tmp_path, {"mnist.py": MODEL, "main.py": TASK.format(imports="import mnist", model_fn="mnist.model_fn")})
    assert main(["rewrite", str(tmp_path)]) == 1
    assert "mnist.build_model(" in (tmp_path / "main.py").read_text()
    assert "def build_model(params):" in (tmp_path / "mnist.py").read_text()


def test_nothing_changes_in_either_file_when_the_consumer_does_not_convert(tmp_path, capsys):
    task = TASK.format(imports="import model", model_fn="model.model_fn") + "    print(estimator.get_variable_names())\n"
    write(tmp_path, {"model.py": MODEL, "task.py": task})
    assert main(["rewrite", str(tmp_path)]) == 1
    # Its model_fn stays (the Estimator still calls it), marked with why.
    written = (tmp_path / "model.py").read_text()
    assert "# e2k: E2K902 left as it is with its Estimator (task.py:" in written
    assert "\n".join(line for line in written.splitlines() if not line.startswith("# e2k:")) + "\n" == MODEL
    assert "# e2k: E2K902" in (tmp_path / "task.py").read_text()
    assert "get_variable_names" in capsys.readouterr().out


def test_a_model_fn_its_own_module_uses_too_is_reported_at_the_estimator(tmp_path, capsys):
    provider = MODEL + "\n\nserving = model_fn\n"
    write(tmp_path, {"model.py": provider, "task.py": TASK.format(imports="import model", model_fn="model.model_fn")})
    assert main(["rewrite", "--check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "the model_fn, in model.py: `model_fn` is used in its own module too" in out
    assert (tmp_path / "model.py").read_text() == provider


@pytest.mark.slow
@pytest.mark.parametrize("case", PACKAGES)
def test_package_fixture_trains_like_its_estimator(case):
    from estimator2keras.parity import run_parity_many

    settings = tomllib.loads((FIXTURES / case / "parity.toml").read_text())
    entry = settings["entry"]
    after = FIXTURES / case / "after" / entry
    targets = [after]
    newest = os.environ.get("E2K_TARGET_PYTHON")
    if newest:
        targets.append((after, newest))
    results = run_parity_many(FIXTURES / case / "before" / entry, targets, replicas=settings.get("replicas", 2))
    for result in results:
        assert result.passed, result.report()
        assert result.migrated.replicas == settings.get("replicas", 2)


def test_one_estimator_file_and_a_columns_module_without_a_rules_word(tmp_path):
    """train.py (the only file with a rule's word) and cols.py, which it imports for its
    feature columns: the directory is one program (they were converted apart, and the columns
    of another module refused)."""
    write(tmp_path, {"cols.py": """
        import tensorflow as tf


        def get_columns():
            return [tf.feature_column.numeric_column(c) for c in ["a", "b"]]
    """, "train.py": """
        import tensorflow as tf

        import cols


        def input_fn():
            return tf.data.Dataset.from_tensor_slices(({"a": [1.0] * 8, "b": [2.0] * 8}, [0, 1] * 4)).repeat().batch(4)


        estimator = tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=cols.get_columns())
        estimator.train(input_fn, steps=2)
    """})
    assert main(["rewrite", str(tmp_path)]) == 1
    train = (tmp_path / "train.py").read_text()
    assert "tf.estimator." not in train and "DNNClassifierModel" in train, train


HOOKS_LIB = '''\
import time

import tensorflow as tf


class ExamplesPerSecondHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self, batch_size):
        self._batch_size = batch_size

    def begin(self):
        self._start = time.time()

    def after_run(self, run_context, run_values):
        tf.compat.v1.logging.info("examples/sec: %g", self._batch_size / max(time.time() - self._start, 1e-6))
'''


@pytest.mark.parametrize("imports, spelled", [
    ("import hooks_lib", "hooks_lib.ExamplesPerSecondHook"),
    ("from hooks_lib import ExamplesPerSecondHook", "ExamplesPerSecondHook"),
])
def test_a_session_run_hook_class_of_another_module_becomes_a_callback_there(tmp_path, imports, spelled):
    train = MODEL + f'''
{imports}


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 8, [0, 1] * 4)).repeat().batch(4)


estimator = tf.estimator.Estimator(model_fn=model_fn, params={{"classes": 3}})
estimator.train(input_fn, steps=2, hooks=[{spelled}(4)])
'''
    write(tmp_path, {"hooks_lib.py": HOOKS_LIB, "train.py": train})
    assert main(["rewrite", str(tmp_path)]) == 1
    hooks = (tmp_path / "hooks_lib.py").read_text()
    assert "class ExamplesPerSecondHook(tf.keras.callbacks.Callback):" in hooks, hooks
    assert f"callbacks=[{spelled}(4)]" in (tmp_path / "train.py").read_text()


def test_a_model_fn_refused_in_its_module_is_said_at_the_estimator_too(tmp_path, capsys):
    # census/customestimator: the model_fn (model.py) is refused; task.py, holding the
    # Estimator and its specs, said only "Estimator API left" line by line.
    refused = MODEL.replace(
        "    loss = tf.losses",
        "    labels = tf.contrib.lookup.index_table_from_tensor(tf.constant(['a', 'b'])).lookup(labels)\n"
        "    loss = tf.losses")
    write(tmp_path, {"model.py": refused, "task.py": TASK.format(imports="import model", model_fn="model.model_fn")})
    assert main(["rewrite", "--check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith(str(tmp_path / "task.py") + ":")]
    assert any("model.py" in line and "index_table_from_tensor" in line for line in lines), out


def test_a_model_fn_factory_refused_in_its_module_is_said_at_the_estimator_too(tmp_path, capsys):
    # census/customestimator's `model_fn = model.generate_model_fn(...)`: the model_fn the
    # factory returns is refused in model.py; task.py says so where the Estimator is built.
    factory = '''\\
import tensorflow as tf


def generate_model_fn(units=3):
    def _model_fn(features, labels, mode):
        logits = tf.compat.v1.layers.dense(features["x"], units)
        labels = tf.contrib.lookup.index_table_from_tensor(tf.constant(["a", "b"])).lookup(labels)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    return _model_fn
'''
    task = '''\\
import tensorflow as tf
import model


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]] * 8}, ["a", "b"] * 4)).repeat().batch(4)


estimator = tf.estimator.Estimator(model_fn=model.generate_model_fn(units=2))
estimator.train(input_fn, steps=2)
'''
    write(tmp_path, {"model.py": factory, "task.py": task})
    assert main(["rewrite", "--check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith(str(tmp_path / "task.py") + ":")]
    assert any("not converted: " in line and "(model.py:" in line for line in lines), out



def test_a_model_fn_of_another_module_left_with_its_estimator_says_why(tmp_path, capsys):
    # Finfra's trainer: main.py's Estimator reads `cnn.input_fn`, which nothing defines; the
    # model_fn in mnist.py is left with it, and said so there (it said only "Estimator API left").
    task = TASK.format(imports="import model", model_fn="model.model_fn").replace("estimator.train(input_fn,", "estimator.train(cnn.input_fn,")
    assert "cnn.input_fn" in task
    write(tmp_path, {"model.py": MODEL, "task.py": task})
    assert main(["rewrite", "--check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    model_line = next(line for line in out.splitlines() if "model.py:" in line and "E2K" in line)
    assert "left as it is with its Estimator (task.py:" in model_line and "NameError" in model_line, out


def test_a_constant_of_another_module_gives_the_canned_classes(tmp_path, capsys):
    # The Cloud ML template: n_classes=len(metadata.TARGET_LABELS), a constant of metadata.py
    # (was "n_classes is not an int literal").
    write(tmp_path, {
        "metadata.py": 'TARGET_LABELS = ["a", "b", "c"]\n',
        "task.py": textwrap.dedent('''\
            import tensorflow as tf

            import metadata


            def input_fn():
                return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [0, 2])).repeat().batch(2)


            columns = [tf.feature_column.numeric_column("x")]
            estimator = tf.estimator.DNNClassifier([4], columns, n_classes=len(metadata.TARGET_LABELS))
            estimator.train(input_fn, steps=2)
        '''),
    })
    assert main(["rewrite", "--check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "E2K503" not in out and "task.py: would be converted" in out, out
    (tmp_path / "metadata.py").write_text("TARGET_LABELS = []\n")  # a template not filled in yet
    assert main(["rewrite", "--check", str(tmp_path)]) == 1
    assert "n_classes is 0 (`len(metadata.TARGET_LABELS)`)" in capsys.readouterr().out
