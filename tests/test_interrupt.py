"""Ctrl-C (SIGINT) and SIGTERM in the middle of `e2k rewrite` over a big tree: every file is
the old version or the new one, never truncated or half-written, no temporary file is left,
and the summary and the report say exactly which files were converted."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES

CANONICAL = (FIXTURES / "seed_mirrored_linear" / "before.py").read_bytes()
CONVERTED = (FIXTURES / "seed_mirrored_linear" / "after.py").read_bytes()
FILES = 24

pytestmark = pytest.mark.slow


def _big_tree(root: Path) -> list[Path]:
    paths = []
    for i in range(FILES):
        path = root / f"pkg{i % 6}" / f"train_{i:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(CANONICAL)
        paths.append(path)
    for i in range(100):  # and files with nothing to convert, as a real tree has
        (root / f"pkg{i % 6}" / f"util_{i:03d}.py").write_bytes(b"def helper():\n    return %d\n" % i)
    return paths


def _default_signals() -> None:
    # A signal ignored by whoever started the tests (pytest-xdist's workers ignore SIGINT) is
    # inherited as ignored, and e2k then rightly stays deaf to it, as Python itself does.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _converted(paths: list[Path]) -> int:
    return sum(1 for p in paths if p.read_bytes() == CONVERTED)


@pytest.mark.parametrize(
    "signum,whom,jobs",
    [
        pytest.param(signal.SIGINT, "group", "2", id="ctrl-c"),
        pytest.param(signal.SIGTERM, "process", "2", id="sigterm-to-e2k"),
        pytest.param(signal.SIGTERM, "group", "2", id="sigterm-to-group"),
        pytest.param(signal.SIGTERM, "process", "1", id="sigterm-serial"),
    ],
)
def test_interrupted_run_leaves_every_file_whole_and_says_what_it_did(signum, whom, jobs, tmp_path):
    tree = tmp_path / "tree"
    paths = _big_tree(tree)
    report = tmp_path / "report.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "estimator2keras", "rewrite", str(tree), "-j", jobs, "--report", str(report)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group, as a shell job has
        preexec_fn=_default_signals,
    )
    deadline = time.monotonic() + 120
    while _converted(paths) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    if whom == "group":
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)

    assert proc.returncode == 2, err
    assert "Traceback" not in err
    contents = {p: p.read_bytes() for p in paths}
    assert all(data in (CANONICAL, CONVERTED) for data in contents.values()), "a file is neither old nor new"
    converted = sorted(str(p) for p, data in contents.items() if data == CONVERTED)
    assert 0 < len(converted) < FILES, "the signal did not land in the middle of the run"
    assert not list(tree.rglob("*.e2k-tmp"))

    summary = err.strip().splitlines()[-1]
    assert summary.startswith(f"e2k: {len(converted)} converted,")
    assert "(interrupted: the files not listed were not touched)" in summary
    listed = sorted(line.split(": ")[0] for line in out.splitlines() if line.endswith(": converted"))
    assert listed == converted
    data = json.loads(report.read_text())
    assert data["summary"]["interrupted"] is True
    assert sorted(f["path"] for f in data["files"] if f["status"] == "converted") == converted

    if signum == signal.SIGINT:
        # Run again: it finishes the job, and every file ends converted.
        again = subprocess.run([sys.executable, "-m", "estimator2keras", "rewrite", str(tree), "-j", jobs], capture_output=True, text=True)
        assert again.returncode == 1, again.stderr
        assert _converted(paths) == FILES


def test_workers_of_a_killed_e2k_still_end_on_sigterm(tmp_path):
    psutil = pytest.importorskip("psutil")
    paths = _big_tree(tmp_path / "tree")
    proc = subprocess.Popen(
        [sys.executable, "-m", "estimator2keras", "rewrite", "--check", str(tmp_path / "tree"), "-j", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    workers = []
    while len(workers) < 2 and time.monotonic() < deadline:
        workers = psutil.Process(proc.pid).children()
        time.sleep(0.02)
    assert len(workers) == 2 and proc.poll() is None
    proc.kill()  # SIGKILL: the parent cannot shut its workers down
    proc.wait()
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    gone, alive = psutil.wait_procs(workers, timeout=30)
    for worker in alive:
        worker.kill()
    assert not alive, "an orphaned worker ignored SIGTERM"
    assert all(p.read_bytes() == CANONICAL for p in paths)  # --check wrote nothing
