"""Side runs forked from a warm interpreter (estimator2keras/parity/_preload.py): a forked run
behaves as `python SCRIPT ARGS` started fresh would (directory, argv, sys.path, environment,
output files, exit codes, a crash), can be killed as a process group, and is not used where it
is turned off; the parity runs through it are covered by every parity test."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from estimator2keras.parity import _preload

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked runs are used on Linux only")

SCRIPT = '''
import os, sys
print("argv", sys.argv[1:])
print("cwd", os.getcwd())
print("path0", sys.path[0])
print("env", os.environ.get("E2K_TEST_VALUE"))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
'''


def _run(tmp_path, name, script, *args, env=None):
    path = tmp_path / f"{name}.py"
    path.write_text(script)
    out_dir = tmp_path / name
    out_dir.mkdir()
    env = {**os.environ, "E2K_TEST_VALUE": "forked", **(env or {})}
    forked = _preload.launch(sys.executable, [str(path), *args], cwd=tmp_path, env=env,
                             stdout=out_dir / "stdout.txt", stderr=out_dir / "stderr.txt", modules=("json",))
    assert forked is not None
    return forked, out_dir


@pytest.fixture(autouse=True)
def _servers(monkeypatch):
    monkeypatch.setenv("E2K_PARITY_PRELOAD", "1")
    yield
    _preload.shutdown()


@pytest.mark.parametrize("code", [0, 3])
def test_a_forked_run_sees_what_a_fresh_interpreter_would(tmp_path, code):
    forked, out_dir = _run(tmp_path, "prog", SCRIPT, str(code))
    assert forked.wait(timeout=60) == code
    out = (out_dir / "stdout.txt").read_text().splitlines()
    assert out == [f"argv ['{code}']", f"cwd {tmp_path}", f"path0 {tmp_path}", "env forked"]
    assert (out_dir / "stderr.txt").read_text() == "to stderr\n"
    fresh = subprocess.run([sys.executable, str(tmp_path / "prog.py"), str(code)], cwd=tmp_path, capture_output=True,
                           text=True, env={**os.environ, "E2K_TEST_VALUE": "forked"})
    assert fresh.returncode == code and fresh.stdout.splitlines() == out


def test_a_crash_is_a_traceback_and_exit_status_1(tmp_path):
    forked, out_dir = _run(tmp_path, "crash", "raise ValueError('boom')\n")
    assert forked.wait(timeout=60) == 1
    assert "ValueError: boom" in (out_dir / "stderr.txt").read_text()


def test_one_server_serves_the_runs_of_an_interpreter_and_environment(tmp_path):
    first, _ = _run(tmp_path, "a", SCRIPT, "0")
    second, _ = _run(tmp_path, "b", SCRIPT, "0")
    assert first.wait(timeout=60) == second.wait(timeout=60) == 0
    assert len(_preload._servers) == 1
    _run(tmp_path, "c", SCRIPT, "0", env={"E2K_OTHER": "1"})[0].wait(timeout=60)
    assert len(_preload._servers) == 2  # the environment is read at import: its own server


def test_a_forked_run_is_killed_with_its_process_group_and_times_out(tmp_path):
    forked, _ = _run(tmp_path, "sleeper", "import time\ntime.sleep(600)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        forked.wait(timeout=0.5)
    assert forked.poll() is None
    os.killpg(forked.pid, signal.SIGKILL)
    assert forked.wait(timeout=60) == -signal.SIGKILL


def test_turned_off_it_gives_the_run_back_to_the_caller(tmp_path, monkeypatch):
    monkeypatch.setenv("E2K_PARITY_PRELOAD", "0")
    assert _preload.launch(sys.executable, ["x.py"], cwd=tmp_path, env=dict(os.environ), stdout=tmp_path / "o",
                           stderr=tmp_path / "e", modules=()) is None


def test_an_interpreter_that_cannot_serve_gives_the_run_back(tmp_path):
    not_python = tmp_path / "python"
    not_python.write_text("#!/bin/sh\nexit 0\n")
    not_python.chmod(0o755)
    assert _preload.launch(str(not_python), ["x.py"], cwd=tmp_path, env=dict(os.environ), stdout=tmp_path / "o",
                           stderr=tmp_path / "e", modules=()) is None


def test_servers_are_few_whatever_pytest_names_in_the_environment(tmp_path, monkeypatch):
    monkeypatch.setattr(_preload, "MAX_SERVERS", 2)
    for i in range(3):  # PYTEST_CURRENT_TEST changes with every test: not a server of its own
        _run(tmp_path, f"same{i}", SCRIPT, "0", env={"PYTEST_CURRENT_TEST": f"test {i}"})[0].wait(timeout=60)
    assert len(_preload._servers) == 1
    for i in range(3):  # other environments: the least recently used server is stopped
        _run(tmp_path, f"other{i}", SCRIPT, "0", env={"E2K_OTHER": str(i)})[0].wait(timeout=60)
    assert len(_preload._servers) == 2


def test_a_stopped_server_lets_its_running_child_finish_and_say_so(tmp_path):
    forked, out_dir = _run(tmp_path, "slow", "import time\ntime.sleep(1)\nprint('done')\n")
    _preload.shutdown()
    assert forked.wait(timeout=60) == 0
    assert (out_dir / "stdout.txt").read_text() == "done\n"
