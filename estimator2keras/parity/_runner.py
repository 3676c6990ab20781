"""Run the two programs, each in its own interpreter, instrumented by the bootstrap scripts."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from estimator2keras.parity import _preload
from estimator2keras.parity._result import ParityResult, SideInfo, Tolerance

_HERE = Path(__file__).resolve().parent
LEGACY_BOOTSTRAP = _HERE / "_legacy_side.py"
KERAS_BOOTSTRAP = _HERE / "_keras_side.py"
STDERR_TAIL_LINES = 25
DEFAULT_TIMEOUT = 600.0
#: ``envelope=WHEN_NEEDED``: run the nudged legacy program only when the verdict may depend on it.
WHEN_NEEDED = "when-needed"


class ParityUsageError(ValueError):
    """An argument that cannot work (no such interpreter, replicas < 1, ...)."""


@dataclass
class SideRun:
    """One program's run: its result.json, weights, logs and wall time."""

    name: str  # "legacy" or "migrated"
    program: Path
    python: str
    out_dir: Path
    returncode: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if self.timed_out:
            return "timeout"
        return str(self.result.get("status", "died"))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def weights(self) -> dict[str, Any]:
        """name -> numpy array, from the side's weights.npz (empty when it has none)."""
        path = self.out_dir / "weights.npz"
        if not path.exists():
            return {}
        np = _numpy()
        with np.load(path) as data:
            return {key: data[key] for key in data.files}

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        path = self.out_dir / "stderr.txt"
        if not path.exists():
            return ""
        text = path.read_text(encoding="utf-8", errors="replace").rstrip().splitlines()
        return "\n".join(text[-lines:])


def _numpy():
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - numpy comes with matplotlib in the parity extra
        raise ParityUsageError(
            "e2k parity needs numpy on the host: pip install 'estimator2keras[parity]'") from exc
    return numpy


def resolve_python(python: str | os.PathLike[str] | None) -> str:
    """An interpreter path: None is the current one; a bare name is looked up on PATH. A
    relative path is made absolute (each program runs from its own directory); links are not
    followed, since a virtualenv's ``python`` is a link whose target knows nothing of the venv."""
    if python is None:
        return sys.executable
    python = os.fspath(python)
    found = shutil.which(python) if os.sep not in python else (python if os.access(python, os.X_OK) else None)
    if not found or not os.path.isfile(found):
        raise ParityUsageError(f"no such Python interpreter: {python}")
    return os.path.abspath(found)


def child_environment(seed: int) -> dict[str, str]:
    """The environment both programs run in: the caller's, made repeatable and single-worker."""
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = str(seed)  # fixed before the interpreter starts: set/dict order in user code
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("MPLBACKEND", "Agg")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("TF_CONFIG", None)  # parity is single-worker: a cluster spec would make the Estimator distributed
    return env


def trains_in_own_loop(path: Path) -> bool:
    """Does the legacy program train a Keras model in its own loop (``apply_gradients``, as
    TensorFlow's DTensor-Keras tutorial does) rather than through an Estimator? Its side then
    records the loop's steps (parity/_custom_loop.py)."""
    try:
        source = path.read_bytes()
    except OSError:
        return False
    return b"apply_gradients" in source and b"stimator" not in source


def program_backend(path: Path) -> str | None:
    """The Keras backend a migrated program chooses before Keras starts
    (``os.environ.setdefault("KERAS_BACKEND", "jax")``, as ``--target jax`` writes it), else the
    environment's; None: TensorFlow's."""
    import re

    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    found = re.search(r"""KERAS_BACKEND["']\s*(?:\]\s*=|,)\s*["'](\w+)["']""", text)
    backend = found.group(1) if found else os.environ.get("KERAS_BACKEND")
    return backend if backend and backend != "tensorflow" else None


def _launch(run: SideRun, request: dict[str, Any], env: dict[str, str]) -> subprocess.Popen | _preload.Forked:
    """Start one bootstrap in its interpreter, in its own process group: forked from a warm
    interpreter where one can serve it (_preload), else a fresh one."""
    run.out_dir.mkdir(parents=True, exist_ok=True)
    request = {**request, "program": str(run.program), "out_dir": str(run.out_dir)}
    request_path = run.out_dir / "request.json"
    request_path.write_text(json.dumps(request, indent=1), encoding="utf-8")
    bootstrap = LEGACY_BOOTSTRAP if run.name == "legacy" else KERAS_BOOTSTRAP
    if not request.get("backend") and "TF_CONFIG" not in env:
        # TensorFlow imported once per interpreter and environment, each run forked from it
        modules = ("tensorflow", "tensorflow_estimator") if run.name == "legacy" else ("tensorflow",)
        forked = _preload.launch(run.python, [str(bootstrap), str(request_path)], cwd=run.program.parent,
                                 env=env, stdout=run.out_dir / "stdout.txt", stderr=run.out_dir / "stderr.txt",
                                 modules=modules)
        if forked is not None:
            return forked
    with open(run.out_dir / "stdout.txt", "wb") as out, open(run.out_dir / "stderr.txt", "wb") as err:
        return subprocess.Popen(
            [run.python, str(bootstrap), str(request_path)],
            cwd=run.program.parent, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            start_new_session=True)


def _collect(run: SideRun, started: float) -> SideRun:
    run.seconds = time.perf_counter() - started
    result_path = run.out_dir / "result.json"
    if result_path.exists():
        try:
            run.result = json.loads(result_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            run.result = {}
    return run


def run_side(run: SideRun, request: dict[str, Any], timeout: float, env: dict[str, str],
             registry: list | None = None) -> SideRun:
    """Run one bootstrap in its interpreter; its own process group, killed whole on timeout.
    ``registry`` collects the process, for a caller that may have to stop it from elsewhere."""
    started = time.perf_counter()
    process = _launch(run, request, env)
    if registry is not None:
        registry.append(process)
    try:
        run.returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        run.timed_out = True
        _kill_group(process)
    finally:
        if process.poll() is None:  # interrupted (Ctrl-C): leave no TensorFlow behind
            _kill_group(process)
    return _collect(run, started)


#: After one worker failed, how long the others may take to fail or finish on their own.
WORKER_GRACE = 10.0


def run_workers(run: SideRun, request: dict[str, Any], timeout: float, env: dict[str, str], workers: int,
                registry: list | None = None) -> SideRun:
    """Run a side as ``workers`` processes on this machine, a multi-worker job whose TF_CONFIG
    names loopback ports: the chief (worker 0) run, or the first worker that failed."""
    if workers == 1:
        return run_side(run, request, timeout, env, registry)
    ports = _free_ports(workers)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    runs = [dataclasses.replace(run, out_dir=run.out_dir / f"worker_{i}") for i in range(workers)]
    started = time.perf_counter()
    processes = [
        _launch(r, request, {**env, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})})
        for i, r in enumerate(runs)
    ]
    if registry is not None:
        registry.extend(processes)
    deadline = started + timeout
    failed_at = None
    try:
        while any(p.poll() is None for p in processes):
            now = time.perf_counter()
            if failed_at is None and any(p.poll() not in (None, 0) for p in processes):
                failed_at = now  # the others would wait for it in their collectives until the time limit
            if now > deadline or (failed_at is not None and now > failed_at + WORKER_GRACE):
                for r, p in zip(runs, processes):
                    if p.poll() is None:
                        r.timed_out = now > deadline
                        _kill_group(p)
                break
            time.sleep(0.2)
    finally:
        for p in processes:
            if p.poll() is None:
                _kill_group(p)
    for r, p in zip(runs, processes):
        r.returncode = p.returncode
        _collect(r, started)
    return next((r for r in runs if not r.ok and not (r.returncode is None or r.returncode < 0)), None) or runs[0]


class Background:
    """A side run in a thread, alongside the others (the envelope run): ``result()`` waits for
    it, ``cancel()`` stops its processes (after an error or Ctrl-C in the main thread)."""

    def __init__(self, run: SideRun, request: dict[str, Any], timeout: float, env: dict[str, str], workers: int):
        import threading

        self._processes: list = []
        self._run: SideRun | None = None
        self._error: BaseException | None = None

        def target() -> None:
            try:
                self._run = run_workers(run, request, timeout, env, workers, self._processes)
            except BaseException as exc:  # noqa: BLE001 - reported by result()
                self._error = exc

        self._thread = threading.Thread(target=target, name=f"e2k-parity-{run.name}", daemon=True)
        self._thread.start()

    def result(self) -> SideRun:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._run is not None
        return self._run

    def cancel(self) -> None:
        for process in list(self._processes):
            if process.poll() is None:
                _kill_group(process)
        self._thread.join(timeout=30)


def _free_ports(count: int) -> list[int]:
    import socket

    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def failure(run: SideRun, timeout: float) -> tuple[str, str | None]:
    """(reason, detail) for a side that did not finish with status ok."""
    label = "legacy" if run.name == "legacy" else "migrated"
    error = run.result.get("error") or {}
    message = error.get("message") or ""
    status = run.status
    if status == "timeout":
        return (f"the {label} program did not finish within {timeout:g} s (raise it with --timeout)",
                run.stderr_tail() or None)
    if status == "died" or not run.result:
        return (f"the {label} interpreter ({run.python}) exited with status {run.returncode} "
                "without a result", run.stderr_tail() or None)
    if status == "crashed":
        kind = error.get("type") or "error"
        head = f"{kind}: {message}" if message else kind
        return f"the {label} program crashed: {head}", error.get("traceback") or run.stderr_tail() or None
    if status == "no_training":
        return f"no training call found in the {label} program: {message}", None
    if status == "variables_mismatch":
        return f"variables do not match: {message}", None
    if status == "environment":
        return f"cannot run the {label} program: {message}", None
    if status == "unsupported":
        return f"cannot compare the {label} program: {message}", None
    return (f"the parity harness failed while running the {label} program ({error.get('type')}: {message}); "
            "please report this", error.get("traceback") or run.stderr_tail() or None)


def run_parity(
    legacy: str | os.PathLike[str],
    migrated: str | os.PathLike[str],
    *,
    replicas: int = 2,
    steps: int | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    tolerance: Tolerance | None = None,
    legacy_python: str | os.PathLike[str] | None = None,
    target_python: str | os.PathLike[str] | None = None,
    seed: int = 0,
    keep_shuffle: bool = False,
    keep_dropout: bool = False,
    op_determinism: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    workdir: str | os.PathLike[str] | None = None,
    workers: int = 1,
    envelope: bool | str = True,
    from_checkpoint: str | os.PathLike[str] | None = None,
    args: list[str] | tuple[str, ...] = (),
) -> ParityResult:
    """Run an Estimator program and its Keras migration and compare how they train.

    Each program runs unchanged in its own subprocess — ``legacy`` in ``legacy_python``
    (TF 2.15 + tensorflow-estimator), ``migrated`` in ``target_python`` (any TF >= 2.15,
    Keras 2 or 3); both default to the current interpreter — under a MirroredStrategy
    with ``replicas`` replicas (virtual CPUs, or GPUs when there are enough), from the
    same initial weights (the legacy ones, copied into the Keras model), with
    ``Dataset.shuffle`` and dropout neutralised unless ``keep_shuffle``/``keep_dropout``.
    ``steps`` stops both after that many training steps.

    ``envelope`` (default) runs the legacy program a second time, alongside, with its
    trainable weights nudged by ``tolerance.envelope_ulps`` ulps at every step: how far that
    run drifts from the legacy one, step by step, is the program's own numerical noise, and
    the migrated run is judged against it (see :class:`Tolerance` and docs/parity.md).
    ``envelope="when-needed"`` gives the same verdicts for less: the nudged run happens only
    when the comparison without it does not already settle the verdict (see
    :func:`envelope_cannot_change_verdict`), after the migrated runs; when it happens, the
    results are those ``envelope=True`` gives.
    Without it, losses are compared with the fixed schedule of ``tolerance`` (TF's advice);
    ``rtol``/``atol`` fix one of its values for every step. Final weights and eval metrics
    are compared with the tolerance of the last step (widened by their own envelope).

    Never raises for a problem with the programs (missing file, crash, no training call,
    variables that do not match): the result's verdict is then "error" with a reason.
    Raises :class:`ParityUsageError` (a ValueError) for arguments that cannot work.
    ``workdir`` keeps the runs' files (requests, logs, results, weights) there.
    ``workers`` > 1 runs each program as a multi-worker job of that many processes on this
    machine (TF_CONFIG with loopback ports), each with ``replicas`` replicas, and compares
    the chief's (worker 0's) training.

    ``from_checkpoint`` (an Estimator model_dir the legacy program trained) resumes both:
    the Estimator from a copy of its latest checkpoint, the migrated program from that
    checkpoint converted by `e2k checkpoint` (every directory a ``tf.train.CheckpointManager``
    of the program manages starts as a copy of it); both train the steps left.

    ``args`` are the command-line arguments both programs get (``sys.argv[1:]``): a trainer's
    required ``--job-dir``, its flags.
    """
    return run_parity_many(
        legacy, [migrated], replicas=replicas, steps=steps, rtol=rtol, atol=atol, tolerance=tolerance,
        legacy_python=legacy_python, target_python=target_python, seed=seed, keep_shuffle=keep_shuffle,
        keep_dropout=keep_dropout, op_determinism=op_determinism, timeout=timeout, workdir=workdir,
        workers=workers, envelope=envelope, from_checkpoint=from_checkpoint, args=args)[0]


def run_parity_many(
    legacy: str | os.PathLike[str],
    migrated: list[str | os.PathLike[str] | tuple[str | os.PathLike[str], str | os.PathLike[str] | None]],
    *,
    replicas: int = 2,
    steps: int | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    tolerance: Tolerance | None = None,
    legacy_python: str | os.PathLike[str] | None = None,
    target_python: str | os.PathLike[str] | None = None,
    seed: int = 0,
    keep_shuffle: bool = False,
    keep_dropout: bool = False,
    op_determinism: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    workdir: str | os.PathLike[str] | None = None,
    workers: int = 1,
    envelope: bool | str = True,
    from_checkpoint: str | os.PathLike[str] | None = None,
    args: list[str] | tuple[str, ...] = (),
) -> list[ParityResult]:
    """:func:`run_parity` for several migrations of one program: the legacy program runs
    once, each migration is compared with that run. One result per migration, in order.
    An item of ``migrated`` may be a ``(path, python)`` pair to run that migration in
    another interpreter than ``target_python``.

    A program that trains several models (Estimators held in a dict, a fine-tuned model after
    a pretrained one) has each compared: the k-th model the legacy program trains with the
    k-th the migrated one trains, in a run of both programs of its own (the others train as
    written, unrecorded). The result holds every model's comparison (``models``); it is
    parity only when every model's is."""
    options = dict(replicas=replicas, steps=steps, rtol=rtol, atol=atol, tolerance=tolerance,
                   legacy_python=legacy_python, target_python=target_python, seed=seed, keep_shuffle=keep_shuffle,
                   keep_dropout=keep_dropout, op_determinism=op_determinism, timeout=timeout, workdir=workdir,
                   workers=workers, envelope=envelope, from_checkpoint=from_checkpoint, args=args)
    results = _run_model(legacy, migrated, model=0, **options)
    for i, first in enumerate(results):
        count = models_to_compare(first)
        if count <= 1:
            continue
        per_model = [first]
        for model in range(1, count):
            later = workdir if workdir is None else Path(workdir) / f"model_{model + 1}"
            per_model += _run_model(legacy, [migrated[i]], model=model, **{**options, "workdir": later})
        results[i] = merge_models(per_model)
    return results


def models_to_compare(result: ParityResult) -> int:
    """How many models a comparison of the first model says both programs train (1 when one,
    or when the counts differ: that is broken already)."""
    legacy = result.legacy.models_trained if result.legacy else 0
    migrated = result.migrated.models_trained if result.migrated else 0
    return legacy if legacy > 1 and legacy == migrated and result.verdict != "error" else 1


def merge_models(per_model: list[ParityResult]) -> ParityResult:
    """One result for a program's models, each compared in its own run (``per_model``, in the
    order the programs train them): parity only when every model's comparison is; otherwise
    the first model that is not, named. Its steps, weights and metrics are the first model's
    (``models`` holds each model's)."""
    count = len(per_model)
    for number, each in enumerate(per_model, 1):
        each.model = number
    failing = next((each for each in per_model if each.verdict != "parity"), None)
    first = per_model[0]
    what = (f"the programs train {count} models each: each is compared, the k-th model the legacy program trains "
            f"with the k-th the migrated one trains, in a run of both programs of its own (the others train as "
            f"written, unrecorded)")
    if failing is None:
        verdict, reason, step, model = "parity", f"all {count} models agree: " + "; ".join(
            f"model {each.model}: {each.reason}" for each in per_model), None, None
    else:
        verdict, step, model = failing.verdict, failing.first_divergent_step, failing.model
        reason = f"model {failing.model} of {count}: {failing.reason}"
    return dataclasses.replace(
        first, verdict=verdict, reason=reason, first_divergent_step=step, failing_model=model, models=per_model,
        model=None, notes=[what] + [f"model {each.model}: {note}" for each in per_model for note in each.notes
                                    if not note.startswith("the programs train ")],
        hints=[f"model {each.model}: {hint}" for each in per_model for hint in each.hints],
        warnings=[f"model {each.model}: {warning}" for each in per_model for warning in each.warnings],
        detail=failing.detail if failing is not None else first.detail,
        variable_tables=failing.variable_tables if failing is not None else first.variable_tables)


def _run_model(
    legacy: str | os.PathLike[str],
    migrated: list,
    *,
    model: int,
    replicas: int,
    steps: int | None,
    rtol: float | None,
    atol: float | None,
    tolerance: Tolerance | None,
    legacy_python,
    target_python,
    seed: int,
    keep_shuffle: bool,
    keep_dropout: bool,
    op_determinism: bool,
    timeout: float,
    workdir,
    workers: int,
    envelope: bool | str,
    from_checkpoint,
    args,
) -> list[ParityResult]:
    """run_parity_many's comparison of one model (``model``, 0-based, in the order the
    programs train them) of each migration."""
    from estimator2keras.parity._compare import compare, side_info

    if replicas < 1:
        raise ParityUsageError(f"--replicas must be at least 1, got {replicas}")
    if envelope not in (True, False, WHEN_NEEDED):
        raise ParityUsageError(f"envelope must be True, False or {WHEN_NEEDED!r}, got {envelope!r}")
    lazy = envelope == WHEN_NEEDED
    if workers < 1:
        raise ParityUsageError(f"--workers must be at least 1, got {workers}")
    if steps is not None and steps < 1:
        raise ParityUsageError(f"--steps must be at least 1, got {steps}")
    if not timeout > 0:
        raise ParityUsageError(f"--timeout must be positive, got {timeout}")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not value >= 0:
            raise ParityUsageError(f"--{name} must be a number >= 0, got {value}")
    tolerance = (tolerance or Tolerance()).overridden(rtol=rtol, atol=atol)
    legacy_python = resolve_python(legacy_python)
    target_python = resolve_python(target_python)
    legacy_path = Path(legacy).resolve()
    candidates = [(Path(m[0]).resolve(), resolve_python(m[1]) if m[1] is not None else target_python)
                  if isinstance(m, tuple) else (Path(m).resolve(), target_python) for m in migrated]
    migrated_paths = [path for path, _ in candidates]
    settings = {
        "replicas": replicas,
        "workers": workers,
        "steps": steps,
        "seed": seed,
        "shuffle": "kept" if keep_shuffle else "neutralised (Dataset.shuffle is the identity, fit(shuffle=False))",
        "dropout": "kept" if keep_dropout else "neutralised (dropout and noise layers act as at inference)",
        "op_determinism": op_determinism,
        "tolerance": tolerance.describe(envelope=bool(envelope)),
        "tolerance_values": dataclasses.asdict(tolerance),
        "envelope": (f"the legacy program run again, its trainable weights nudged by {tolerance.envelope_ulps} ulps "
                     f"at every step (seed {seed})") if envelope else "off",
        "initial_weights": "legacy initial values copied into the Keras model",
    }
    if args:
        settings["args"] = " ".join(str(a) for a in args)
    if from_checkpoint is not None:
        settings["from_checkpoint"] = (f"both resumed from {os.fspath(from_checkpoint)}: the Estimator from a copy, "
                                       "the migrated program from it converted by e2k checkpoint")

    def error(reason: str, migrated_path: Path, legacy_info: SideInfo | None = None,
              migrated_info: SideInfo | None = None, **extra: Any) -> ParityResult:
        return ParityResult(
            verdict="error", reason=reason, settings=settings,
            legacy=legacy_info or SideInfo(program=str(legacy_path), python=legacy_python),
            migrated=migrated_info or SideInfo(program=str(migrated_path), python=target_python), **extra)

    if not legacy_path.is_file():
        return [error(f"legacy program not found: {legacy_path}", m) for m in migrated_paths]
    _numpy()
    if from_checkpoint is not None:
        from estimator2keras.checkpoint._convert import latest_checkpoint

        if latest_checkpoint(from_checkpoint) is None:
            raise ParityUsageError(f"--from-checkpoint {os.fspath(from_checkpoint)} holds no checkpoint")

    keep = workdir is not None
    root = Path(workdir).resolve() if keep else Path(tempfile.mkdtemp(prefix="e2k-parity-"))
    kept = str(root) if keep else None
    if keep:
        root.mkdir(parents=True, exist_ok=True)
    background = None
    try:
        env = child_environment(seed)
        request = {
            "replicas": replicas,
            "workers": workers,
            "steps": steps,
            "seed": seed,
            "neutralize_shuffle": not keep_shuffle,
            "neutralize_dropout": not keep_dropout,
            "op_determinism": op_determinism,
            "args": [str(a) for a in args],
            "custom_loop": trains_in_own_loop(legacy_path),
            "model": model,
        }
        if from_checkpoint is not None:
            from estimator2keras.checkpoint._convert import _copy_checkpoint, latest_checkpoint

            _copy_checkpoint(latest_checkpoint(from_checkpoint), root / "resume_legacy")
            request["resume"] = {"model_dir": str(root / "resume_legacy")}
        envelope_run = SideRun("legacy", legacy_path, legacy_python, root / "envelope")
        envelope_request = {**request, "perturb": {"seed": seed, "ulps": tolerance.envelope_ulps}}
        if envelope and not lazy:  # needs nothing from the legacy run: runs alongside it
            background = Background(envelope_run, envelope_request, timeout, env, workers)
        legacy_run = run_workers(SideRun("legacy", legacy_path, legacy_python, root / "legacy"),
                                 request, timeout, env, workers)
        legacy_info = side_info(legacy_run.result, str(legacy_path), legacy_python, legacy_run.seconds)
        legacy_info.status = legacy_run.status
        if not legacy_run.ok:
            reason, detail = failure(legacy_run, timeout)
            return [error(reason, m, legacy_info, detail=detail, workdir=kept) for m in migrated_paths]
        legacy_weights = legacy_run.weights()

        results: list[ParityResult | None] = []
        finished: list[tuple[int, SideRun, SideInfo]] = []
        for i, (migrated_path, python) in enumerate(candidates):
            if not migrated_path.is_file():
                results.append(error(f"migrated program not found: {migrated_path}", migrated_path, legacy_info,
                                     SideInfo(program=str(migrated_path), python=python)))
                continue
            out_dir = root / ("migrated" if len(candidates) == 1 else f"migrated_{i}_{migrated_path.stem}")
            migrated_request = {
                **request,
                "legacy_variables": legacy_run.result.get("variables") or [],
                "initial_weights": str(legacy_run.out_dir / "weights.npz"),
                "legacy_warm_start": legacy_run.result.get("warm_start"),
                "backend": program_backend(migrated_path),
            }
            if from_checkpoint is not None:
                from estimator2keras.checkpoint import convert_checkpoint

                converted = convert_checkpoint(
                    legacy_path, migrated_path, from_checkpoint, out_dir.with_name(out_dir.name + "_checkpoint"),
                    legacy_python=legacy_python, target_python=python, replicas=replicas, seed=seed,
                    timeout=timeout, force=True)
                if converted.exit_code != 0:
                    results.append(error(f"cannot carry the checkpoint over to the migrated program: "
                                         f"{converted.reason}", migrated_path, legacy_info,
                                         detail=converted.detail, workdir=kept))
                    continue
                migrated_request["resume"] = {"model_dir": converted.out}
            migrated_run = run_workers(SideRun("migrated", migrated_path, python, out_dir),
                                       migrated_request, timeout, env, workers)
            migrated_info = side_info(migrated_run.result, str(migrated_path), python, migrated_run.seconds)
            migrated_info.status = migrated_run.status
            if not migrated_run.ok:
                reason, detail = failure(migrated_run, timeout)
                tables = None
                if migrated_run.status == "variables_mismatch":
                    err = migrated_run.result.get("error") or {}
                    tables = {"legacy": err.get("legacy_variables") or [],
                              "migrated": err.get("migrated_variables") or []}
                    from estimator2keras.parity._report import variable_tables_text

                    detail = variable_tables_text(tables["legacy"], tables["migrated"])
                results.append(error(reason, migrated_path, legacy_info, migrated_info, detail=detail,
                                     variable_tables=tables, workdir=kept))
                continue
            results.append(None)
            finished.append((len(results) - 1, migrated_run, migrated_info))

        migrated_weights = {index: migrated_run.weights() for index, migrated_run, _ in finished}

        def judge(nudged: dict | None, nudged_weights: dict | None, missing: str | None,
                  how: dict[str, Any]) -> list[tuple[int, ParityResult]]:
            return [(index, compare(
                legacy_run.result, migrated_run.result, legacy_weights, migrated_weights[index], tolerance,
                legacy_info=legacy_info, migrated_info=migrated_info, settings=how, step_limit=steps,
                nudged=nudged, nudged_weights=nudged_weights, envelope_missing=missing))
                for index, migrated_run, migrated_info in finished]

        judged = None
        if lazy and finished:
            fixed = judge(None, None, None, settings)
            floor = judge(legacy_run.result, legacy_weights, None, settings)
            if all(envelope_cannot_change_verdict(a, b) for (_, a), (_, b) in zip(fixed, floor)):
                judged = [(index, _envelope_not_needed(result, settings, tolerance)) for index, result in fixed]
            else:  # as envelope=True would have: the nudged run, then the same comparison
                background = Background(envelope_run, envelope_request, timeout, env, workers)
        if judged is None:
            nudged = nudged_weights = missing = None
            if background is not None and finished:
                nudged_run = background.result()
                background = None
                if nudged_run.ok:
                    nudged, nudged_weights = nudged_run.result, nudged_run.weights()
                    missing = other_start(legacy_weights, nudged_weights, tolerance.envelope_ulps)
                    if missing:
                        nudged = nudged_weights = None
                else:
                    missing = _envelope_failure(nudged_run, timeout)
            if missing:
                settings["tolerance"] = tolerance.describe()
            judged = judge(nudged, nudged_weights, missing, settings)
        for index, result in judged:
            result.workdir = kept
            results[index] = result
        return results  # type: ignore[return-value]
    finally:
        if background is not None:
            background.cancel()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def envelope_cannot_change_verdict(fixed: ParityResult, floor: ParityResult) -> bool:
    """Whether the envelope run could change a verdict, from two comparisons without it.

    ``fixed`` is the comparison by the fixed schedule (what ``compare`` gives when the nudged
    run fails or takes another number of steps); ``floor`` the comparison with an envelope of
    zero everywhere (the legacy run given as its own nudged run: every step by the tight
    tolerance, metrics by ``METRIC_RTOL`` unless a known difference allows the fixed
    tolerance, weights by the fixed tolerance). A measured envelope is >= 0 wherever it exists
    (a non-finite legacy value makes both infinite), and every allowance ``compare`` takes
    from it, for steps, weights and metrics alike, is a ``max`` with the floor's, or the fixed
    tolerance's where the nudged run lacks a quantity. So when both pass, the comparison with
    any nudged run passes too: the verdict is "parity" with the envelope or without it. A
    verdict other than parity may depend on the envelope (a step past the strict ones within
    k x envelope, say): then the envelope must be measured."""
    return fixed.passed and floor.passed


def _envelope_not_needed(result: ParityResult, settings: dict[str, Any], tolerance: Tolerance) -> ParityResult:
    """A parity verdict reached without the envelope run (envelope="when-needed"), said so."""
    reason = (f"not needed (envelope='when-needed'): every step agreed within |diff| <= {tolerance.tight_atol:g} + "
              f"{tolerance.tight_rtol:g}*|legacy|, every final weight and eval metric within the tolerance an "
              "envelope can only widen, so the nudged legacy run could not change the verdict")
    result.settings = {**settings, "envelope": f"not run: {reason}"}
    result.envelope = {"measured": False, "reason": reason}
    result.notes.append(f"no noise envelope: {reason}")
    return result


def other_start(legacy: dict, nudged: dict, ulps: int) -> str | None:
    """Why the envelope run cannot measure the program's noise, when it started from other
    weights than the legacy run did (more apart than its nudge of ``ulps`` ulps): the
    program's initialisation is not repeatable (a TF1 input pipeline whose threads create
    ops in another order, and the seeded initialisers with them). Its losses would then show
    two initialisations apart, not rounding amplified, and an envelope that wide lets any
    migration pass."""
    np = _numpy()
    worst = 0.0
    for key, a in legacy.items():
        if not key.startswith("initial_") or key not in nudged:
            continue
        a, b = np.asarray(a), np.asarray(nudged[key])
        if a.shape != b.shape:
            return "the envelope run (the legacy program, its weights nudged) built other variables"
        if not np.issubdtype(a.dtype, np.floating) or not a.size:
            continue
        allowed = (ulps + 1) * np.spacing(np.abs(a).astype(a.dtype))
        excess = np.abs(a.astype(np.float64) - b.astype(np.float64)) - allowed
        worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
                    if np.any(excess > 0) else worst)
    if worst > 0:
        return (f"the legacy program started from other weights when run again (max |diff| {worst:.3g} before "
                "the first step): its initialisation is not repeatable, so a second run measures two "
                "initialisations, not its numerical noise")
    return None


def _envelope_failure(run: SideRun, timeout: float) -> str:
    """Why the envelope run (the legacy program with nudged weights) gave no envelope."""
    if run.status == "timeout":
        return f"the envelope run did not finish within {timeout:g} s"
    error = run.result.get("error") or {}
    what = ": ".join(x for x in (error.get("type"), error.get("message")) if x) or f"status {run.status}"
    return f"the envelope run (the legacy program, its weights nudged) failed ({what})"
