"""`e2k migrate PROGRAM.py`: rewrite, parity, one Markdown report for a pull request (issue 13).

The fast tests run the rewrite for real and stand in a ParityResult for the parity run; the
slow one runs the whole thing on the canonical fixture."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES
from estimator2keras import cli, migrate
from estimator2keras.parity import MetricRow, ParityResult, StepRow
from estimator2keras.parity._result import HyperRow, SideInfo
from parity_programs import support

CANONICAL = support.CANONICAL / "before.py"

PARTIAL = '''import tensorflow as tf

def input_fn():
  return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [[1]])).batch(1)

est = tf.estimator.BoostedTreesClassifier([tf.feature_column.numeric_column("x")], n_batches_per_layer=1)
est.train(input_fn, max_steps=1)
'''


def fake_result(verdict: str) -> ParityResult:
    versions = {"tensorflow": "2.15.1", "keras": "2.15.0", "python": "3.11.7"}
    newest = {"tensorflow": "2.21.0", "keras": "3.15.0", "python": "3.11.7"}
    steps = [StepRow(1, 2.0, 2.0, 0.0, 0.0, 1e-6, 1e-5, True, 1e-7, 1e-7, 1.2e-5),
             StepRow(2, 1.5, 1.6 if verdict == "broken" else 1.5, 0.1 if verdict == "broken" else 0.0, 0.06,
                     1e-6, 1e-5, verdict != "broken", 1e-7, 1e-7, 1.2e-5)]
    return ParityResult(
        verdict=verdict, reason="diverges beyond the program's own numerical noise at step 2" if verdict == "broken"
        else "agrees within the program's own numerical noise", first_divergent_step=2 if verdict == "broken" else None,
        steps=steps, metrics=[MetricRow("loss", 1.0, 1.0, 0.0, 0.0, True, 1e-7, 1e-5)],
        legacy=SideInfo("before.py", "/legacy/python", "ok", versions, 2, "MirroredStrategyV1", steps=2, seconds=1.0),
        migrated=SideInfo("after.py", "/newest/python", "ok", newest, 2, "MirroredStrategy", steps=2, seconds=1.0),
        envelope={"measured": True, "seed": 0, "ulps": 16, "elements": 3, "k": 4.0, "strict_steps": 3},
        hyperparameters=[HyperRow("shuffle (Dataset.shuffle, neutralised in the run)", "buffer 64, seed 1",
                                  "no shuffle", False, "a shuffle buffer was lost")])


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "train.py"
    shutil.copy(CANONICAL, path)
    return path


@pytest.mark.parametrize("verdict, code", [("parity", 0), ("broken", 1)])
def test_report_holds_verdict_versions_rules_and_diff(program, monkeypatch, verdict, code):
    calls = []

    def run_parity(legacy, migrated, **options):
        calls.append((Path(legacy), Path(migrated), options))
        return fake_result(verdict)

    monkeypatch.setattr("estimator2keras.parity.run_parity", run_parity)
    assert cli.main(["migrate", str(program), "--no-plot", "--replicas", "2", "--steps", "5"]) == code
    out = program.with_name("train_keras.py")
    assert calls == [(program, out, calls[0][2])]
    assert calls[0][2]["replicas"] == 2 and calls[0][2]["steps"] == 5 and calls[0][2]["envelope"] is True
    assert out.read_text() == (support.CANONICAL / "after.py").read_text()  # exactly what e2k rewrite writes
    assert program.read_text() == CANONICAL.read_text()  # never touched
    report = program.with_name("train_keras_migration.md").read_text()
    assert f"**{verdict.upper()}** (exit {code})" in report
    assert "| TensorFlow | 2.15.1 | 2.21.0 |" in report and "| Keras | 2.15.0 | 3.15.0 |" in report
    assert "4 x envelope" in report and "16 ulps" in report
    assert "| E2K001 estimator-to-keras-model |" in report  # what converted, by which rule
    assert "Nothing: the file converted fully." in report
    assert "```diff" in report
    assert any(line.startswith("+") and ".fit(" in line for line in report.splitlines())
    assert any(line.startswith("-") and "Estimator(" in line for line in report.splitlines())
    assert "| shuffle (Dataset.shuffle, neutralised in the run) | buffer 64, seed 1 | no shuffle | **FAIL**" in report
    if verdict == "broken":
        assert "**FAIL** (first divergence)" in report


def test_code_left_for_a_human_is_listed_and_parity_not_run(tmp_path, monkeypatch):
    program = tmp_path / "boosted.py"
    program.write_text(PARTIAL)
    monkeypatch.setattr("estimator2keras.parity.run_parity", lambda *a, **k: pytest.fail("parity ran"))
    report = tmp_path / "review" / "report.md"
    assert cli.main(["migrate", str(program), "--out", str(tmp_path / "new.py"), "--report", str(report),
                     "--no-plot"]) == 1
    text = report.read_text()
    assert "LEFT FOR A HUMAN" in text and "E2K505" in text and "parity runs once" in text
    assert (tmp_path / "new.py").exists()


def test_no_estimator_code_or_no_file_is_exit_2(tmp_path, capsys):
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    assert cli.main(["migrate", str(plain), "--no-plot"]) == 2
    assert not (tmp_path / "plain_keras.py").exists()
    assert "NOTHING TO MIGRATE" in (tmp_path / "plain_keras_migration.md").read_text()
    assert cli.main(["migrate", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli.main(["migrate", str(plain), "--out", str(plain)]) == 2


@pytest.mark.slow
@support.requires_legacy
def test_migrate_the_canonical_fixture_end_to_end(program):
    migration = migrate.migrate(program, plot=program.with_name("parity.png"), legacy_python=support.legacy_python())
    assert migration.exit_code == 0, migration.parity.report()
    assert migration.parity.verdict == "parity"
    report = migration.report_path.read_text()
    assert "![loss curves" in report and program.with_name("parity.png").stat().st_size > 0
    assert "| strategy | MirroredStrategyV1, 2 replica(s) | MirroredStrategy, 2 replica(s) |" in report


def test_the_helpers_module_is_written_beside_the_migrated_program(tmp_path, monkeypatch):
    """A program whose conversion imports helpers (its model_dir callback): the module goes
    beside the migrated file, where parity runs it."""
    program = tmp_path / "train.py"
    shutil.copy(FIXTURES / "checkpoint_resume" / "before.py", program)
    seen = []
    monkeypatch.setattr("estimator2keras.parity.run_parity",
                        lambda legacy, migrated, **options: seen.append(Path(migrated)) or fake_result("parity"))
    assert cli.main(["migrate", str(program), "--no-plot", "--out", str(tmp_path / "new" / "train.py")]) == 0
    assert seen == [tmp_path / "new" / "train.py"]
    assert "from e2k_helpers import ModelDirCheckpoints" in seen[0].read_text()
    assert (tmp_path / "new" / "e2k_helpers.py").read_text() == (FIXTURES / "checkpoint_resume" / "e2k_helpers.py").read_text()
