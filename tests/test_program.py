"""The program pass and the coverage summary: a directory is a program; a file that calls
Estimator code left in another file of it is not "unchanged"."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from conftest import REPO
from estimator2keras._runner import RewriteOptions, run
from estimator2keras.cli import main

REPORT_SCHEMA = json.loads((REPO / "docs" / "report.schema.json").read_text())

MODEL = """\
import tensorflow as tf


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features["x"], 1)
    return tf.estimator.EstimatorSpec(mode, predictions=logits)


def train_and_evaluate(args):
    estimator = tf.estimator.Estimator(model_fn, model_dir=args.job_dir)
    tf.estimator.train_and_evaluate(estimator, train_spec(), eval_spec())


def helper(x):
    return x + 1
"""

TASK = """\
import argparse

{import_line}


def main():
    args = argparse.ArgumentParser().parse_args()
    {name}.helper(1)
    {name}.train_and_evaluate(args)


if __name__ == "__main__":
    main()
"""


def package(root: Path, import_line: str, name: str = "model", model: str = MODEL) -> Path:
    trainer = root / "trainer"
    trainer.mkdir(parents=True)
    (trainer / "__init__.py").write_text("")
    (trainer / "model.py").write_text(model)
    (trainer / "task.py").write_text(TASK.format(import_line=import_line, name=name))
    return trainer


def check(root: Path, *argv: str, jobs: int = 1) -> tuple[int, dict]:
    out = root.parent / f"{root.name}-report.json"
    code = main(["rewrite", "--check", "-q", "-j", str(jobs), "--report", str(out), *argv, str(root)])
    document = json.loads(out.read_text())
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(document)
    files = {Path(f["path"]).relative_to(root).as_posix(): f for f in document["files"]}
    return code, files | {"coverage": document["coverage"]}


@pytest.mark.parametrize(
    "import_line,name",
    [
        ("from . import model", "model"),
        ("import model", "model"),
        ("import trainer.model as model", "model"),
        ("from trainer import model", "model"),
        ("from trainer import model as m", "m"),
        ("import trainer.model", "trainer.model"),
    ],
)
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_task_calling_estimator_code_in_its_model_module_is_partial(tmp_path, import_line, name, jobs):
    package(tmp_path, import_line, name)
    code, files = check(tmp_path, jobs=jobs)
    assert code == 1
    task = files["trainer/task.py"]
    assert task["status"] == "partial" and not task["changed"]
    (finding,) = task["findings"]
    model_path = (tmp_path / "trainer" / "model.py").as_posix()
    assert finding == {
        "line": 9,
        "col": 5,
        "code": "E2K905",
        "message": f"calls {name}.train_and_evaluate ({model_path}:9), which still runs Estimator code",
        "kind": "manual",
    }
    assert files["trainer/__init__.py"]["status"] == "unchanged"


def test_a_function_imported_from_the_module(tmp_path):
    trainer = package(tmp_path, "from .model import train_and_evaluate, helper", "model")
    (trainer / "task.py").write_text(
        "from .model import train_and_evaluate, helper\n\nhelper(1)\ntrain_and_evaluate(None)\n"
    )
    _, files = check(tmp_path)
    assert [(f["line"], f["message"].split(" (")[0]) for f in files["trainer/task.py"]["findings"]] == [
        (4, "calls train_and_evaluate")
    ]


def test_calls_are_followed_through_functions_that_call_estimator_code(tmp_path):
    package(tmp_path, "from . import model")
    (tmp_path / "run.py").write_text("import trainer.task as task\n\ntask.main()\n")
    code, files = check(tmp_path)
    (finding,) = files["run.py"]["findings"]
    assert finding["message"] == f"calls task.main ({(tmp_path / 'trainer' / 'task.py').as_posix()}:6), which still runs Estimator code"


def test_no_finding_for_a_module_without_estimator_code(tmp_path):
    keras = MODEL.replace("tf.estimator.EstimatorSpec(mode, predictions=logits)", "logits").replace(
        "    estimator = tf.estimator.Estimator(model_fn, model_dir=args.job_dir)\n"
        "    tf.estimator.train_and_evaluate(estimator, train_spec(), eval_spec())\n",
        "    model = tf.keras.Model()\n    model.fit(args.data)\n",
    )
    package(tmp_path, "from . import model", model=keras)
    code, files = check(tmp_path)
    assert code == 0
    assert {f["status"] for path, f in files.items() if path != "coverage"} == {"unchanged"}
    assert files["coverage"] == {"estimator_files": 0, "converted": 0, "partial": 0, "error": 0, "blockers": []}


def test_only_calls_into_definitions_that_hold_estimator_code(tmp_path):
    trainer = package(tmp_path, "from . import model")
    (trainer / "task.py").write_text("from . import model\n\nmodel.helper(1)\n")
    code, files = check(tmp_path)
    assert files["trainer/task.py"]["status"] == "unchanged"


def test_same_named_module_elsewhere_is_not_the_one_imported(tmp_path):
    package(tmp_path / "a", "from . import model")
    other = tmp_path / "b" / "trainer"
    other.mkdir(parents=True)
    (other / "model.py").write_text("def train_and_evaluate(args):\n    return args\n")
    (other / "task.py").write_text("from . import model\n\nmodel.train_and_evaluate(1)\n")
    _, files = check(tmp_path)
    assert files["b/trainer/task.py"]["status"] == "unchanged"
    assert files["a/trainer/task.py"]["status"] == "partial"


def test_a_call_marked_ignore_is_not_reported(tmp_path):
    trainer = package(tmp_path, "from . import model")
    task = (trainer / "task.py").read_text().replace(
        "model.train_and_evaluate(args)", "model.train_and_evaluate(args)  # e2k: ignore[E2K905]"
    )
    (trainer / "task.py").write_text(task)
    code, files = check(tmp_path)
    assert files["trainer/task.py"]["status"] == "unchanged"


def test_ignoring_the_code_turns_the_program_pass_off(tmp_path):
    package(tmp_path, "from . import model")
    code, files = check(tmp_path, "--ignore", "E2K905")
    assert files["trainer/task.py"]["status"] == "unchanged"


def test_in_place_and_out_runs_report_it_too(tmp_path):
    package(tmp_path / "src", "from . import model")
    before = (tmp_path / "src" / "trainer" / "task.py").read_bytes()
    for argv in (["--out", str(tmp_path / "out")], []):
        summary = run([tmp_path / "src"], RewriteOptions(write=not argv, out_dir=tmp_path / "out" if argv else None))
        task = next(r for r in summary.results if r.path.endswith("task.py"))
        assert task.status == "partial" and [f.code for f in task.findings] == ["E2K905"]
    assert (tmp_path / "src" / "trainer" / "task.py").read_bytes() == before
    assert (tmp_path / "out" / "trainer" / "task.py").read_bytes() == before


def test_diff_exits_1_and_lists_the_call(tmp_path, capsys):
    package(tmp_path, "from . import model")
    assert main(["rewrite", "--diff", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "task.py:9:5: E2K905 calls model.train_and_evaluate" in err


def test_coverage_summary_after_the_per_file_lines(tmp_path, capsys):
    package(tmp_path, "from . import model")
    (tmp_path / "keras_only.py").write_text("import tensorflow as tf\nmodel = tf.keras.Model()\n")
    assert main(["rewrite", "--check", "--color", "never", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("coverage: 2 files with Estimator code: 0 converted fully (0%), 2 partial")
    assert all(":" in line for line in lines[:at])  # the per-file lines come first
    assert lines[at + 1] == "most frequent blockers (files):"
    assert "     1  E2K905 calls a function of another module that still runs Estimator code" in lines[at + 2:]
    assert len(lines) - at <= 15


def test_no_coverage_summary_for_files_or_quiet_runs(tmp_path, capsys):
    trainer = package(tmp_path, "from . import model")
    main(["rewrite", "--check", str(trainer / "model.py")])
    main(["rewrite", "--check", "-q", str(tmp_path)])
    assert "coverage:" not in capsys.readouterr().out


def test_coverage_in_the_json_report(tmp_path):
    package(tmp_path, "from . import model")
    _, files = check(tmp_path)
    coverage = files["coverage"]
    assert (coverage["estimator_files"], coverage["converted"], coverage["partial"], coverage["error"]) == (2, 0, 2, 0)
    assert {"code": "E2K905", "message": "calls a function of another module that still runs Estimator code", "files": 1,
            "kind": "left"} in coverage["blockers"]
    # What blocked a conversion comes first, most frequent first; then the code left because of it.
    kinds = [b["kind"] for b in coverage["blockers"]]
    assert kinds == sorted(kinds, key=lambda kind: kind == "left") and "cause" in kinds
    for kind in ("cause", "left"):
        files = [b["files"] for b in coverage["blockers"] if b["kind"] == kind]
        assert files == sorted(files, reverse=True)


def test_many_module_names_are_indexed_instead_of_searched(tmp_path, monkeypatch):
    import estimator2keras._program as program

    package(tmp_path, "from . import model")
    (tmp_path / "run.py").write_text("import trainer.task as task\n\ntask.main()\n")
    _, searched = check(tmp_path)
    monkeypatch.setattr(program, "_SEARCHED_STEMS", 0)
    _, indexed = check(tmp_path)
    assert searched == indexed
    assert indexed["run.py"]["status"] == indexed["trainer/task.py"]["status"] == "partial"


def test_coverage_benchmark_counts_silent_misses_independently(tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("coverage_benchmark", REPO / "benchmarks" / "coverage.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    tree = tmp_path / "tree"
    package(tree, "from . import model")
    (tree / "keras_only.py").write_text("import tensorflow as tf\nmodel = tf.keras.Model()\n")
    before = {p: p.read_bytes() for p in tree.rglob("*.py")}

    assert benchmark.main([str(tree), "-q", "-j", "1", "--json", str(tmp_path / "figures.json")]) == 0
    assert {p: p.read_bytes() for p in tree.rglob("*.py")} == before  # a copy was rewritten
    figures = json.loads((tmp_path / "figures.json").read_text())
    # model.py calls EstimatorSpec(...); task.py calls model.train_and_evaluate(...).
    assert (figures["estimator_files"], figures["converted"], figures["silent_misses"]) == (2, 0, [])
    assert capsys.readouterr().out.splitlines()[-1] == "rate 0/2 silent 0"

    # With E2K905 ignored by the tree's configuration, task.py is a silent miss again.
    (tree / "pyproject.toml").write_text('[tool.e2k]\nignore = ["E2K905"]\n')
    benchmark.main([str(tree), "-q", "-j", "1", "--json", str(tmp_path / "figures.json")])
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert figures["silent_misses"] == ["trainer/task.py"]


CONVERTIBLE_MODEL = """\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 4}, [[2.0]] * 4)).batch(2)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features["x"], 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def train_and_evaluate(args):
    estimator = tf.estimator.Estimator(model_fn, model_dir=args.job_dir)
    train_spec = tf.estimator.TrainSpec(input_fn, max_steps=10)
    eval_spec = tf.estimator.EvalSpec(input_fn, steps=1)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)


def helper(x):
    return x + 1
"""


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_task_calling_only_what_its_model_module_converted_is_converted_with_it(tmp_path, jobs):
    package(tmp_path, "from . import model", model=CONVERTIBLE_MODEL)
    before = (tmp_path / "trainer" / "task.py").read_bytes()
    code, files = check(tmp_path, jobs=jobs)
    assert code == 1  # --check: files would change
    assert files["trainer/model.py"]["status"] == "converted"
    task = files["trainer/task.py"]
    # Nothing to edit in task.py; its Estimator-facing call now reaches Keras code.
    assert task["status"] == "converted" and not task["changed"]
    (note,) = task["findings"]
    assert note["kind"] == "fixed" and note["line"] == 9
    assert note["message"].startswith("calls model.train_and_evaluate (") and "which e2k converted" in note["message"]
    assert (tmp_path / "trainer" / "task.py").read_bytes() == before
    assert files["coverage"]["converted"] == files["coverage"]["estimator_files"]


def test_a_task_calling_a_converted_and_an_unconverted_function_is_partial(tmp_path):
    model = CONVERTIBLE_MODEL + "\n\ndef legacy_config():\n    return tf.estimator.RunConfig(save_summary_steps=1)\n"
    trainer = package(tmp_path, "from . import model", model=model)
    (trainer / "task.py").write_text("from . import model\n\nmodel.legacy_config()\nmodel.train_and_evaluate(None)\n")
    _, files = check(tmp_path)
    task = files["trainer/task.py"]
    assert task["status"] == "partial"
    assert [f["kind"] for f in task["findings"]] == ["manual"]
