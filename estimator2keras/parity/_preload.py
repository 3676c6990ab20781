"""Side runs forked from a warm interpreter.

A side run is an interpreter started on a bootstrap (``_legacy_side.py``, ``_keras_side.py``)
that imports TensorFlow, about 3 seconds of the 4 to 8 a small program's run takes. Where one
host process runs many sides on the same interpreter (a test suite, ``run_parity_many``, the
envelope run beside the legacy one), a *preload server* imports TensorFlow once: an interpreter
started with the same environment, which forks a child per run; the child sets its directory,
its output files and ``sys.argv`` and runs the bootstrap as ``python BOOTSTRAP REQUEST`` would.
Importing TensorFlow starts no runtime (no devices, no threads): each child configures its own
devices as a fresh interpreter does.

Used on Linux only (fork after importing native frameworks is unsafe on macOS), not for a
multi-worker side (its TF_CONFIG is read at import) nor a Keras-on-JAX one (the backend is
chosen before Keras is imported); ``E2K_PARITY_PRELOAD=0`` turns it off. When a server cannot
start or dies, the run starts a fresh interpreter as before: nothing depends on it but time.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

#: The server: imports the modules named in argv[1], then forks one child per line of stdin
#: ({"argv", "cwd", "env", "stdout", "stderr", "status"}), answering {"pid"} on its stdout.
#: A thread per child waits for it and writes its exit code to the "status" file; at the end
#: of stdin the server exits once every child has.
SERVER = r'''
import json, os, sys, threading

for name in json.loads(sys.argv[1]):
    try:
        __import__(name)
    except Exception:
        pass  # the child imports it again and reports what fails
channel = os.fdopen(os.dup(1), "w", buffering=1)
quiet = os.open(os.devnull, os.O_RDWR)
os.dup2(quiet, 1)  # what the modules print does not reach the channel
lock = threading.Lock()


def reap(pid, status):
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    with open(status + ".tmp", "w") as f:
        f.write(str(code))
    os.replace(status + ".tmp", status)


def child(job):
    code = 1
    try:
        os.setsid()
        channel_fd = channel.fileno()
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        os.dup2(quiet, 0)
        os.dup2(os.open(job["stdout"], flags, 0o644), 1)
        os.dup2(os.open(job["stderr"], flags, 0o644), 2)
        os.close(channel_fd)
        sys.argv = list(job["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
        import runpy
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        import atexit
        atexit._run_exitfuncs()
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(job)
    # not a daemon: when its stdin closes, the server still waits for its children's ends
    threading.Thread(target=reap, args=(pid, job["status"])).start()
    with lock:
        channel.write(json.dumps({"pid": pid}) + "\n")
'''


#: Seconds a server may take to answer a run (its first answer waits for its imports).
ANSWER_TIMEOUT = 300.0


class Forked:
    """A forked side run, as much of ``subprocess.Popen`` as the runner uses: ``pid`` (its own
    process group), ``poll()``, ``wait(timeout)``, ``returncode``."""

    def __init__(self, pid: int, args: list[str], status: Path):
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._status = status

    def poll(self) -> int | None:
        if self.returncode is None and self._status.exists():
            self.returncode = int(self._status.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.005
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        return self.returncode


class _Server:
    def __init__(self, python: str, env: dict[str, str], modules: tuple[str, ...]):
        self.process = subprocess.Popen(
            [python, "-c", SERVER, json.dumps(list(modules))], env=env, cwd=Path(python).parent,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True, text=True, bufsize=1)
        self.lock = threading.Lock()

    def fork(self, job: dict) -> int | None:
        with self.lock:
            if self.process.poll() is not None:
                return None
            try:
                self.process.stdin.write(json.dumps(job) + "\n")
                self.process.stdin.flush()
                # The first answer comes once the modules are imported; an interpreter that
                # never answers (not a CPython taking -c) is given up, and the run starts fresh.
                if not select.select([self.process.stdout], [], [], ANSWER_TIMEOUT)[0]:
                    self.process.kill()
                    self.process.wait()
                    return None
                line = self.process.stdout.readline()
            except (OSError, ValueError):
                return None
        try:
            return int(json.loads(line)["pid"])
        except (ValueError, KeyError, TypeError):
            return None

    def close(self) -> None:
        """Its stdin closed, the server forks no more and exits once its running children have
        (each run's status file is still written, for whoever waits on it)."""
        try:
            self.process.stdin.close()
        except OSError:
            pass


#: Servers kept at once (the least recently used is stopped beyond): each holds an imported
#: TensorFlow (about 250 MB), and a host may meet several environments.
MAX_SERVERS = 4
#: Variables that change while a process runs and that no import reads: not part of a
#: server's key (pytest names each test in PYTEST_CURRENT_TEST; a key with it would start a
#: server per test). The child still gets them, from its own environment.
VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})

_servers: dict[tuple, _Server] = {}  # in order of use, the most recent last
_registry_lock = threading.Lock()


def enabled() -> bool:
    return sys.platform.startswith("linux") and os.environ.get("E2K_PARITY_PRELOAD", "1") != "0"


def launch(python: str, argv: list[str], *, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path,
           modules: tuple[str, ...]) -> Forked | None:
    """Run ``python argv...`` forked from the warm server for (python, env, modules), started
    on first use; None where that cannot be done (the caller starts an interpreter itself)."""
    if not enabled():
        return None
    key = (python, tuple(sorted((k, v) for k, v in env.items() if k not in VOLATILE)), modules)
    stopped = []
    with _registry_lock:
        server = _servers.pop(key, None)
        if server is None or server.process.poll() is not None:
            try:
                server = _Server(python, {k: v for k, v in env.items() if k not in VOLATILE}, modules)
            except OSError:
                return None
        _servers[key] = server
        while len(_servers) > MAX_SERVERS:
            stopped.append(_servers.pop(next(iter(_servers))))
    for old in stopped:
        old.close()
    status = Path(stdout).with_name("exit_status")
    status.unlink(missing_ok=True)
    job = {"argv": [str(a) for a in argv], "cwd": str(cwd), "env": env, "stdout": str(stdout),
           "stderr": str(stderr), "status": str(status)}
    pid = server.fork(job)
    return None if pid is None else Forked(pid, [python, *job["argv"]], status)


@atexit.register
def shutdown() -> None:
    """Stop every server (their children were waited for by the runs that started them)."""
    with _registry_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.close()
