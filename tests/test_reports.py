"""Reports: human lines (coloured only on a terminal), --format json (the same document as
--report), --format sarif (valid SARIF 2.1.0), --quiet, and the progress bar."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURES, REPO
from estimator2keras._progress import Progress
from estimator2keras.cli import main

CANONICAL = FIXTURES / "seed_mirrored_linear" / "before.py"
#: The official schema (OASIS SARIF 2.1.0 errata01); vendored: tests run without network.
SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
#: The JSON report's own schema, published for users' scripts.
REPORT_SCHEMA = json.loads((REPO / "docs" / "report.schema.json").read_text())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A converting program, one with a leftover for a human, a broken one, and a clean one."""
    shutil.copy(CANONICAL, tmp_path / "train.py")
    partial = CANONICAL.read_bytes().replace(b"eval_distribute=strategy,", b"eval_distribute=strategy, protocol='grpc',")
    (tmp_path / "partial.py").write_bytes(partial)
    (tmp_path / "broken.py").write_text("import tensorflow as tf\nestimator = tf.estimator.Estimator(\n")
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def test_json_on_stdout_is_the_report_document(tree, tmp_path_factory, capsys):
    report = tmp_path_factory.mktemp("r") / "report.json"
    assert main(["rewrite", "--check", "-j", "1", "--report", str(report), str(tree)]) == 2
    capsys.readouterr()
    assert main(["rewrite", "--check", "-j", "1", "--format", "json", str(tree)]) == 2
    out = capsys.readouterr().out
    on_stdout, in_file = json.loads(out), json.loads(report.read_text())
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(in_file)
    for document in (on_stdout, in_file):
        document["summary"].pop("seconds")
    assert on_stdout == in_file
    assert {Path(f["path"]).name: f["status"] for f in in_file["files"]} == {
        "train.py": "converted",
        "partial.py": "partial",
        "broken.py": "error",
        "clean.py": "unchanged",
    }


def test_sarif_validates_against_the_official_schema(tree, capsys, monkeypatch):
    monkeypatch.chdir(tree)
    assert main(["rewrite", "--check", "-j", "1", "--format", "sarif", "."]) == 2
    log = json.loads(capsys.readouterr().out)
    jsonschema.validate(log, SARIF_SCHEMA)
    run = log["runs"][0]
    results = {(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["ruleId"], r["level"]) for r in run["results"]}
    assert ("broken.py", "E2K900", "error") in results
    assert ("partial.py", "E2K400", "warning") in results
    assert ("train.py", "E2K001", "note") in results
    assert not any(uri == "clean.py" for uri, _, _ in results)
    rule_ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    for result in run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
    e2k602 = next(rule for rule in run["tool"]["driver"]["rules"] if rule["id"] == "E2K602")
    assert "num_replicas_in_sync" in e2k602["help"]["markdown"]


def test_sarif_in_a_report_file_and_human_lines_on_stdout(tree, tmp_path_factory, capsys):
    report = tmp_path_factory.mktemp("r") / "e2k.sarif"
    main(["rewrite", "--check", "-j", "1", "--format", "sarif", "--report", str(report), str(tree)])
    jsonschema.validate(json.loads(report.read_text()), SARIF_SCHEMA)
    out = capsys.readouterr().out
    assert f"{tree / 'partial.py'}:36:" in out and "E2K400" in out


def test_human_findings_are_in_file_order_and_plain_when_piped(tree, capsys):
    main(["rewrite", "--check", "-v", "-j", "1", str(tree / "train.py")])
    lines = [line for line in capsys.readouterr().out.splitlines() if ": E2K" in line]
    positions = [tuple(int(n) for n in line.split(":")[1:3]) for line in lines]
    assert positions == sorted(positions) and len(positions) > 3
    assert "\033[" not in "".join(lines)


def test_color_always_colours_codes(tree, capsys):
    main(["rewrite", "--check", "--color", "always", "-j", "1", str(tree / "partial.py")])
    out = capsys.readouterr().out
    assert "\033[33mE2K400\033[0m" in out


def test_quiet_prints_nothing_when_nothing_is_found(tree, capsys):
    assert main(["rewrite", "--check", "--quiet", str(tree / "clean.py")]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["rewrite", "--check", str(tree / "clean.py")]) == 0
    assert "e2k: 0 would be converted" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--format", "human", "--report", "r.json"], "--report writes a json or sarif document"),
        (["--format", "sarif", "--diff"], "--diff prints the diff on stdout"),
    ],
)
def test_report_option_mistakes(tree, capsys, argv, message):
    assert main(["rewrite", *argv, str(tree)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_and_for_long_runs(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    piped = io.StringIO()
    progress = Progress(piped)
    progress.start(500)
    for _ in range(500):
        progress.advance()
    progress.close()
    assert piped.getvalue() == ""

    short = FakeTerminal()
    progress = Progress(short)
    progress.start(3)
    progress.advance()
    progress.close()
    assert short.getvalue() == ""

    for enabled, expect_output in ((True, True), (False, False)):
        terminal = FakeTerminal()
        progress = Progress(terminal, enabled=enabled)
        progress.start(50)
        for _ in range(50):
            progress.advance()
        progress.close()
        assert bool(terminal.getvalue()) is expect_output


def test_progress_without_rich_is_a_counter(monkeypatch):
    monkeypatch.setitem(sys.modules, "rich.progress", None)  # import fails as if rich were absent
    terminal = FakeTerminal()
    progress = Progress(terminal)
    progress.start(30)
    for _ in range(30):
        progress.advance()
    progress.close()
    assert "e2k: 30/30 files" in terminal.getvalue()


def test_no_progress_when_piped(tmp_path):
    for i in range(25):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
    exe = Path(sys.executable).with_name("e2k")
    proc = subprocess.run([str(exe), "rewrite", "--check", "-j", "1", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0
    assert "\r" not in proc.stderr and proc.stderr.startswith("e2k: 0 would be converted")
