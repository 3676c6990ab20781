"""The helpers e2k writes once per program (e2k_helpers.py beside the converted files).

- A helper is taken out of a converted file only when it is exactly e2k's template; the file
  imports it as it imports its own modules; imports only it needed go.
- The runner writes the module once per directory, adds to one it wrote before (whichever
  e2k version wrote it), never writes over a module of the program's own, and shows it in
  --diff, --out and the report.
"""
from __future__ import annotations

import json
import textwrap

import libcst as cst

from conftest import FIXTURES
from estimator2keras import _helpers
from estimator2keras.cli import main

CANONICAL = (FIXTURES / "checkpoint_resume" / "before.py").read_text()


def _tree(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def test_a_script_imports_the_helper_from_the_module_beside_it(tmp_path, capsys):
    _tree(tmp_path, {"train.py": CANONICAL})
    assert main(["rewrite", str(tmp_path)]) == 1
    new = (tmp_path / "train.py").read_text()
    module = (tmp_path / "e2k_helpers.py").read_text()
    assert "from e2k_helpers import ModelDirCheckpoints" in new and "class ModelDirCheckpoints" not in new
    assert "import time" not in new  # only the callback read it: it went with it
    assert _helpers.is_ours(module) and "class ModelDirCheckpoints(tf.keras.callbacks.Callback):" in module
    assert "import time" in module and "import tensorflow as tf" in module
    assert "e2k_helpers.py: written: ModelDirCheckpoints (imported by 1 converted file)" in capsys.readouterr().out


def test_a_package_imports_it_as_it_imports_its_own_modules(tmp_path, capsys):
    trainer = CANONICAL.replace("import tensorflow.compat.v1 as tf1\n",
                                "import tensorflow.compat.v1 as tf1\n\nfrom . import data\n")
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/data.py": "X = 1\n", "pkg/task.py": trainer})
    assert main(["rewrite", str(tmp_path)]) == 1
    assert "from .e2k_helpers import ModelDirCheckpoints" in (tmp_path / "pkg" / "task.py").read_text()
    assert (tmp_path / "pkg" / "e2k_helpers.py").is_file() and not (tmp_path / "e2k_helpers.py").exists()
    # Without relative imports: from the package's root.
    absolute = trainer.replace("from . import data", "from pkg import data")
    (tmp_path / "pkg" / "task.py").write_text(absolute)
    (tmp_path / "pkg" / "e2k_helpers.py").unlink()
    assert main(["rewrite", str(tmp_path)]) == 1
    assert "from pkg.e2k_helpers import ModelDirCheckpoints" in (tmp_path / "pkg" / "task.py").read_text()


def test_two_files_share_one_module_and_a_later_run_adds_to_it(tmp_path, capsys):
    _tree(tmp_path, {"a.py": CANONICAL})
    assert main(["rewrite", str(tmp_path)]) == 1
    module = tmp_path / "e2k_helpers.py"
    edited = module.read_text().replace("self.save()", "self.save()  # mine", 1)
    assert edited != module.read_text()
    module.write_text(edited)
    # Another file later, needing another helper: added; the edited one is left as it is.
    momentum = (FIXTURES / "momentum_decay_tf1_update" / "before.py").read_text()
    (tmp_path / "b.py").write_text(momentum)
    assert main(["rewrite", str(tmp_path / "b.py")]) == 1
    text = module.read_text()
    assert "# mine" in text and text.count("class ModelDirCheckpoints") == 1
    assert "class TF1Momentum(tf.keras.optimizers.SGD):" in text
    assert compile(text, "e2k_helpers.py", "exec")


def test_a_module_of_the_programs_own_by_that_name_is_never_written_over(tmp_path, capsys):
    _tree(tmp_path, {"train.py": CANONICAL, "e2k_helpers.py": '"""Mine."""\nVALUE = 1\n'})
    assert main(["rewrite", str(tmp_path / "train.py")]) == 1
    assert (tmp_path / "e2k_helpers.py").read_text() == '"""Mine."""\nVALUE = 1\n'
    assert "from e2k_helpers_e2k import ModelDirCheckpoints" in (tmp_path / "train.py").read_text()
    assert _helpers.is_ours((tmp_path / "e2k_helpers_e2k.py").read_text())


def test_diff_out_and_report_show_the_module(tmp_path, capsys):
    _tree(tmp_path, {"src/train.py": CANONICAL})
    assert main(["rewrite", "--diff", str(tmp_path / "src")]) == 1
    out = capsys.readouterr().out
    assert "+++ b/" in out and "e2k_helpers.py" in out and "+class ModelDirCheckpoints" in out
    assert not (tmp_path / "src" / "e2k_helpers.py").exists()  # --diff writes nothing
    assert main(["rewrite", "-q", "--out", str(tmp_path / "out"), str(tmp_path / "src")]) == 1
    assert (tmp_path / "out" / "e2k_helpers.py").is_file() and not (tmp_path / "src" / "e2k_helpers.py").exists()
    capsys.readouterr()
    assert main(["rewrite", "--check", "--format", "json", str(tmp_path / "src")]) == 1
    report = json.loads(capsys.readouterr().out)
    (module,) = report["helper_modules"]
    assert module["new"] and module["helpers"] == ["ModelDirCheckpoints"] and len(module["files"]) == 1


def test_only_the_template_itself_is_taken_out():
    source = textwrap.dedent('''\
        import tensorflow as tf


        class LabelMean(tf.keras.metrics.Mean):
            """The program's own class of that name."""

            def update_state(self, y_true, y_pred, sample_weight=None):
                return super().update_state(y_pred, sample_weight)


        metric = LabelMean()
    ''')
    module, helpers = _helpers.extract(cst.parse_module(source), "program.py")
    assert helpers == {} and module.code == source
    # e2k's own, under another alias of TensorFlow and a unique name: taken out, imported as it was named.
    ours = _helpers.catalogue()["LabelMean"].code.replace("tf.", "tf2.").replace("class LabelMean", "class LabelMean_2")
    source = f"import tensorflow as tf2\n\n\n{ours}\n\nmetric = LabelMean_2()\n"
    module, helpers = _helpers.extract(cst.parse_module(source), "program.py")
    assert set(helpers) == {"LabelMean"}
    assert "from e2k_helpers import LabelMean as LabelMean_2" in module.code and "class " not in module.code


def test_helpers_that_build_on_others_bring_them():
    known = _helpers.catalogue()
    source = "import tensorflow as tf\n\n\n" + known["AccuracyBaseline"].code.replace("(LabelMean)", "(LabelMean)") + \
        "\n\nmetric = AccuracyBaseline()\n"
    source = source.replace("import tensorflow as tf\n\n\n", "import tensorflow as tf\n\n\n" + known["LabelMean"].code + "\n\n")
    module, helpers = _helpers.extract(cst.parse_module(source), "program.py")
    assert set(helpers) == {"AccuracyBaseline", "LabelMean"}
    assert "from e2k_helpers import AccuracyBaseline\n" in module.code  # LabelMean is not read here
    text = _helpers.render(helpers)
    assert text.index("class LabelMean(") < text.index("class AccuracyBaseline(")


def test_what_follows_a_helper_taken_out_is_spaced_as_pep8_has_it():
    label_mean = _helpers.catalogue()["LabelMean"].code
    source = (f"import tensorflow as tf\n\n\nclass Model(tf.keras.Model):\n    pass\n\n{label_mean}"
              "\nMETRIC = LabelMean\n")
    module, helpers = _helpers.extract(cst.parse_module(source), "program.py")
    assert set(helpers) == {"LabelMean"}
    # After the class that stays: two blank lines, not the one a statement gets elsewhere.
    assert "class Model(tf.keras.Model):\n    pass\n\n\nMETRIC = LabelMean\n" in module.code, module.code


def test_the_module_is_known_whichever_version_wrote_it():
    assert _helpers.is_ours(_helpers.render({"LabelMean": _helpers.catalogue()["LabelMean"].code}))
    older = '"""Another first line.\n\ne2k (estimator2keras) wrote this\nmodule when it converted..."""\n'
    assert _helpers.is_ours(older)
    assert not _helpers.is_ours('"""A module of the program."""\n') and not _helpers.is_ours("X = 1\n")


def test_a_mark_above_a_helper_taken_out_of_the_file_stays_in_the_file(tmp_path, capsys):
    # A summary left for a human (E2K404) was marked above the first definition the model_fn
    # became: a metric helper, moved to e2k_helpers.py without its mark. The file was reported
    # partial with no `# e2k:` line in it (new-user test).
    program = tmp_path / "train.py"
    program.write_text(textwrap.dedent('''\
        import tempfile
        import tensorflow as tf


        def input_fn():
            return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


        def model_fn(features, labels, mode):
            pred = tf.compat.v1.layers.dense(features, 1)
            loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
            step = tf.compat.v1.train.get_or_create_global_step()
            lr = tf.compat.v1.train.exponential_decay(0.1, step, 10, 0.9)
            tf.compat.v1.summary.histogram("predictions", pred)
            train_op = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(loss, global_step=step)
            return tf.estimator.EstimatorSpec(
                mode, loss=loss, train_op=train_op,
                eval_metric_ops={"mae": tf.compat.v1.metrics.mean_absolute_error(labels, pred)})


        estimator = tf.estimator.Estimator(model_fn, model_dir=tempfile.mkdtemp())
        estimator.train(input_fn, steps=2)
        '''))
    assert main(["rewrite", str(program)]) == 1  # a summary left for a human
    new = program.read_text()
    assert "# e2k: E2K404 summaries in the model_fn are not carried over" in new
    assert "from e2k_helpers import MeanAbsoluteErrorOfElements" in new
    assert "e2k:" not in (tmp_path / "e2k_helpers.py").read_text()
