"""The host side of `e2k checkpoint`: runs both programs through the parity bootstraps in
checkpoint mode, checks what they read and wrote, and moves the result into --out."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from estimator2keras.checkpoint._unmapped import hashed_weights, hashing_ops, is_part_key, partitioned
from estimator2keras.parity._runner import (
    DEFAULT_TIMEOUT, ParityUsageError, SideRun, child_environment, failure, resolve_python, run_side)

EXIT_WRITTEN = 0
EXIT_REFUSED = 1
EXIT_ERROR = 2
DEFAULT_RTOL = 1e-6
METRIC_ATOL = 1e-7  # besides rtol: a metric that is 0 on one side (an exact fit) may be 1e-9 on the other
WEIGHTS_FILE = "model.weights.h5"
# Per global batch: how many batches of the program's eval input (or, when it never
# evaluates, of its training input, which usually repeats forever) the proof predicts on.
EVAL_BATCHES = 32
TRAIN_BATCHES = 8


class CheckpointInputError(ValueError):
    """Bad input: no checkpoint, an --out that holds one, no such program or interpreter."""


@dataclass
class PredictionRow:
    """One prediction output compared: the legacy key and the migrated key (equal for dicts)."""

    legacy_key: str
    migrated_key: str
    rows: int
    max_abs_diff: float
    relative: float
    ok: bool


@dataclass
class CheckpointResult:
    verdict: str  # "written", "refused" or "error"
    reason: str
    model_dir: str
    out: str | None = None
    global_step: int | None = None
    checkpoint: str | None = None  # the legacy checkpoint read
    written: list[str] = field(default_factory=list)
    mapping: list[dict[str, Any]] = field(default_factory=list)
    predictions: list[PredictionRow] = field(default_factory=list)
    metrics: list[Any] = field(default_factory=list)  # parity's MetricRow, on the eval input
    prediction_source: str | None = None
    rtol: float = DEFAULT_RTOL
    detail: str | None = None
    notes: list[str] = field(default_factory=list)
    versions: dict[str, Any] = field(default_factory=dict)
    workdir: str | None = None

    @property
    def exit_code(self) -> int:
        return {"written": EXIT_WRITTEN, "refused": EXIT_REFUSED}.get(self.verdict, EXIT_ERROR)

    def report(self) -> str:
        """The human report: the mapping, the proof and the verdict."""
        lines = []
        if self.mapping:
            lines.append(f"Mapped from {self.checkpoint or self.model_dir}:")
            width = max(len(m["legacy"]) for m in self.mapping)
            for m in self.mapping:
                shape = "x".join(str(d) for d in m["shape"]) or "scalar"
                lines.append(f"  {m['legacy'].ljust(width)}  ->  {m['migrated']}  [{shape}] {m['what']}")
        if self.predictions:
            lines.append(f"Predictions of both restored models on the program's {self.prediction_source} input "
                         f"(max |diff| <= {self.rtol:g} * max |legacy|):")
            for row in self.predictions:
                key = row.legacy_key if row.legacy_key == row.migrated_key else f"{row.legacy_key} ~ {row.migrated_key}"
                lines.append(f"  {key or '(output)'}: {row.rows} rows, max |diff| {row.max_abs_diff:.3g} "
                             f"(relative {row.relative:.3g}) {'ok' if row.ok else 'MISMATCH'}")
        compared = [m for m in self.metrics if m.passed is not None]
        if compared:
            lines.append("Evaluation of both restored models on the program's eval input:")
            for m in compared:
                lines.append(f"  {m.name}: {m.legacy:.8g} vs {m.migrated:.8g} (|diff| {m.abs_diff:.3g}) "
                             f"{'ok' if m.passed else 'MISMATCH'}")
        lines += [f"note: {n}" for n in self.notes]
        if self.detail:
            lines.append(self.detail)
        head = {"written": "checkpoint written", "refused": "checkpoint refused", "error": "cannot convert"}[self.verdict]
        lines.append(f"e2k checkpoint: {head}: {self.reason}")
        return "\n".join(lines)


def latest_checkpoint(model_dir: str | os.PathLike[str]) -> str | None:
    """The prefix of the latest checkpoint a `checkpoint` state file names, when its index
    exists (read without TensorFlow: the host needs none)."""
    state = Path(model_dir) / "checkpoint"
    if not state.is_file():
        return None
    match = re.search(r'^model_checkpoint_path:\s*"(.*)"\s*$', state.read_text(encoding="utf-8", errors="replace"),
                      re.MULTILINE)
    if not match:
        return None
    prefix = Path(match.group(1).encode().decode("unicode_escape"))
    if not prefix.is_absolute():
        prefix = Path(model_dir) / prefix
    return str(prefix) if Path(str(prefix) + ".index").is_file() else None


def _holds_checkpoint(directory: Path) -> bool:
    return directory.is_dir() and ((directory / "checkpoint").exists() or any(directory.glob("*.index"))
                                   or (directory / WEIGHTS_FILE).exists())


def convert_checkpoint(
    legacy: str | os.PathLike[str],
    migrated: str | os.PathLike[str],
    model_dir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    legacy_python: str | os.PathLike[str] | None = None,
    target_python: str | os.PathLike[str] | None = None,
    force: bool = False,
    replicas: int = 2,
    rtol: float = DEFAULT_RTOL,
    seed: int = 0,
    timeout: float = DEFAULT_TIMEOUT,
    workdir: str | os.PathLike[str] | None = None,
    args: list[str] | tuple[str, ...] = (),
) -> CheckpointResult:
    """Convert the latest checkpoint in ``model_dir`` (written by the Estimator program
    ``legacy``) into a checkpoint of the migrated Keras program ``migrated`` in ``out``.

    Never raises for a problem with the programs or the checkpoint: the result's verdict is
    "refused" (a variable with no counterpart, a shape conflict, predictions that differ by
    more than ``rtol``) or "error" (cannot run: bad input, a crash), and nothing is written.
    ``args`` are the command-line arguments both programs get (a trainer's flags).
    """
    model_dir_s = os.fspath(model_dir)
    result = CheckpointResult(verdict="error", reason="", model_dir=model_dir_s, out=os.fspath(out), rtol=rtol)
    try:
        legacy_path, migrated_path, prefix, out_path = _check_input(legacy, migrated, model_dir, out, force)
        legacy_python = resolve_python(legacy_python)
        target_python = resolve_python(target_python)
    except (CheckpointInputError, ParityUsageError) as exc:
        result.reason = str(exc)
        return result
    result.checkpoint = prefix

    keep = workdir is not None
    root = Path(workdir).resolve() if keep else Path(tempfile.mkdtemp(prefix="e2k-checkpoint-"))
    root.mkdir(parents=True, exist_ok=True)
    result.workdir = str(root) if keep else None
    try:
        _convert(result, root, legacy_path, migrated_path, prefix, out_path, legacy_python, target_python,
                 replicas=replicas, rtol=rtol, seed=seed, timeout=timeout, force=force, args=args)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return result


def _check_input(legacy, migrated, model_dir, out, force) -> tuple[Path, Path, str, Path]:
    legacy_path, migrated_path = Path(legacy).resolve(), Path(migrated).resolve()
    for label, path in (("LEGACY.py", legacy_path), ("MIGRATED.py", migrated_path)):
        if not path.is_file():
            raise CheckpointInputError(f"{label}: no such file: {path}")
    if not Path(model_dir).is_dir():
        raise CheckpointInputError(f"--model-dir: no such directory: {model_dir}")
    prefix = latest_checkpoint(model_dir)
    if prefix is None:
        raise CheckpointInputError(f"--model-dir {model_dir} holds no checkpoint (no 'checkpoint' file naming "
                                   "an existing model.ckpt-N.index)")
    out_path = Path(out).resolve()
    if out_path == Path(model_dir).resolve():
        raise CheckpointInputError("--out must be another directory than --model-dir")
    if out_path.exists() and not out_path.is_dir():
        raise CheckpointInputError(f"--out {out} exists and is not a directory")
    if _holds_checkpoint(out_path) and not force:
        raise CheckpointInputError(f"--out {out} already holds a checkpoint; pass --force to replace it")
    return legacy_path, migrated_path, prefix, out_path


def _copy_checkpoint(prefix: str, directory: Path) -> None:
    """The latest checkpoint alone, in a directory of its own: the Estimator restores it
    there, and the user's model_dir is never written to."""
    directory.mkdir(parents=True)
    source = Path(prefix)
    for path in source.parent.iterdir():
        if path.name.startswith(source.name + "."):
            shutil.copy2(path, directory / path.name)
    (directory / "checkpoint").write_text(
        f'model_checkpoint_path: "{source.name}"\nall_model_checkpoint_paths: "{source.name}"\n', encoding="utf-8")


def _convert(result: CheckpointResult, root: Path, legacy_path: Path, migrated_path: Path, prefix: str,
             out_path: Path, legacy_python: str, target_python: str, *, replicas: int, rtol: float, seed: int,
             timeout: float, force: bool, args: list[str] | tuple[str, ...] = ()) -> None:
    import numpy as np

    env = child_environment(seed)
    copy = root / "legacy_model_dir"
    for leftover in (copy, root / "stage"):  # a --workdir used before
        shutil.rmtree(leftover, ignore_errors=True)
    _copy_checkpoint(prefix, copy)
    request = {"replicas": replicas, "workers": 1, "steps": None, "seed": seed, "neutralize_shuffle": True,
               "neutralize_dropout": True, "op_determinism": True, "args": [str(a) for a in args]}
    batches = {"eval_batches": EVAL_BATCHES, "train_batches": TRAIN_BATCHES}
    legacy_run = run_side(SideRun("legacy", legacy_path, legacy_python, root / "legacy"),
                          {**request, "checkpoint": {"model_dir": str(copy), **batches}}, timeout, env)
    result.versions["legacy"] = legacy_run.result.get("versions")
    if not legacy_run.ok:
        if legacy_run.status == "refused":  # the legacy side saw what e2k cannot carry over (RNN cells)
            result.verdict = "refused"
            result.reason = (legacy_run.result.get("error") or {}).get("message") or "refused by the legacy side"
        elif legacy_run.status == "restore_failed":
            result.reason = (f"the checkpoint in {result.model_dir} was not written by {legacy_path.name}: "
                             f"{(legacy_run.result.get('error') or {}).get('message')}")
        else:
            result.reason, result.detail = failure(legacy_run, timeout)
        return
    legacy = legacy_run.result
    captured = legacy.get("checkpoint") or {}
    extra = captured.get("extra") or []
    step_entry = next((e for e in extra if e["role"] == "global_step"), None)
    step = int(step_entry["value"]) if step_entry else None
    result.global_step = step

    parts, refusals = partitioned(legacy.get("variables") or [], captured.get("keys") or [])
    refusals += _unaccounted(legacy.get("variables") or [], captured, set(parts))
    refusals += _beta_powers(extra, step)
    if refusals:
        result.verdict = "refused"
        result.reason = "; ".join(refusals)
        return

    stage = root / "stage"
    migrated_request = {
        **request,
        "legacy_variables": legacy.get("variables") or [],
        "initial_weights": str(legacy_run.out_dir / "weights.npz"),
        "checkpoint": {"stage_dir": str(stage), "values": str(legacy_run.out_dir / "checkpoint_values.npz"),
                       "slots": captured.get("slots") or [], "global_step": step,
                       "global_step_name": step_entry["name"] if step_entry else None,
                       "weights_file": WEIGHTS_FILE, **batches},
    }
    migrated_run = run_side(SideRun("migrated", migrated_path, target_python, root / "migrated"),
                            migrated_request, timeout, env)
    result.versions["migrated"] = migrated_run.result.get("versions")
    if not migrated_run.ok:
        reason, detail = failure(migrated_run, timeout)
        if migrated_run.status == "variables_mismatch":
            from estimator2keras.parity._report import variable_tables_text

            error = migrated_run.result.get("error") or {}
            result.verdict = "refused"
            result.reason = error.get("message") or reason
            result.detail = variable_tables_text(error.get("legacy_variables") or [],
                                                 error.get("migrated_variables") or [])
        else:
            result.reason, result.detail = reason, detail
        return
    written = migrated_run.result.get("checkpoint") or {}
    result.mapping = (written.get("mapping") or []) + [
        {"legacy": e["name"], "migrated": "(iterations)", "shape": [],
         "what": f"checked: {e['beta']:g}^(global step + 1), which Keras computes from iterations"}
        for e in extra if e["role"].startswith("beta")]
    result.notes += (migrated_run.result.get("pairing_notes") or []) + [
        n for n in migrated_run.result.get("notes") or [] if n.startswith("no ")]

    with np.load(legacy_run.out_dir / "checkpoint_values.npz") as data:
        theirs = {k: data[f"prediction_{j}"] for j, k in enumerate(captured.get("prediction_keys") or [])}
    with np.load(migrated_run.out_dir / "predictions.npz") as data:
        mine = {k: data[f"prediction_{j}"] for j, k in enumerate(written.get("prediction_keys") or [])}
    source = captured.get("prediction_source")
    if source != written.get("prediction_source"):
        result.reason = (f"the Estimator's predictions come from its {source} input, the migrated model's from its "
                         f"{written.get('prediction_source')} input: not comparable")
        return
    result.prediction_source = source
    problems = []
    if theirs:
        result.predictions, problem = compare_predictions(theirs, mine, rtol)
        problems += [problem] if problem else []
    # the harness's own notes on how it ran the Estimator say nothing about the checkpoint
    result.notes += [n for n in legacy.get("notes") or [] if "ReductionToOneDevice" not in n]
    if source == "eval":
        from estimator2keras.parity._compare import comparable_evaluation, final_evaluation
        from estimator2keras.parity._compare import compare_metrics as compare_evaluations

        evaluation, note = comparable_evaluation(legacy, migrated_run.result)
        result.notes += [note] if note else []
        result.metrics = compare_evaluations(evaluation, final_evaluation(migrated_run.result), rtol, METRIC_ATOL)
        bad = [m for m in result.metrics if m.passed is False]
        if bad:
            problems.append("the restored models evaluate differently: " + ", ".join(
                f"{m.name} {m.legacy:.8g} vs {m.migrated:.8g}" for m in bad))
    if not problems and not result.predictions and not any(m.passed for m in result.metrics):
        problems.append("nothing to prove the checkpoint by: the Estimator made no predictions and no evaluation "
                        "metric is reported by both programs")
    differ = any(not row.ok for row in result.predictions) or any(m.passed is False for m in result.metrics)
    if problems and differ:
        hashed = hashed_weights(hashing_ops(legacy_python, prefix, env) or [], legacy.get("variables") or [])
        if hashed:  # the likeliest cause a checkpoint cannot show: the same ids select other rows
            problems.append("the Estimator hashed the ids of " + ", ".join(line.split(":")[0] for line in hashed)
                            + " into weight rows: check that the migrated preprocessing hashes them the same way")
            result.detail = "\n".join(([result.detail] if result.detail else []) + [
                "Ids the Estimator hashed into weight rows, carried over row for row (a migrated preprocessing "
                "that hashes otherwise - another function, a salt, another number of bins - looks up other "
                "rows for the same ids):"] + [f"  {line}" for line in hashed])
    if problems:
        result.verdict, result.reason = "refused", "; ".join(problems)
        return

    _install(stage, out_path, force)
    weights_file = written.get("weights_file")
    result.written = [written.get("checkpoint")] + ([weights_file] if weights_file else [])
    result.verdict = "written"
    result.reason = (f"{out_path}: {written.get('checkpoint')} (global step {step}) for the program's model_dir"
                     + (f" and {weights_file} for load_weights" if weights_file else " (no weights file: see the note)"))


# Checkpoint keys an Estimator writes that are not model state: a Keras legacy optimizer's
# hyper-parameters (the migrated program sets its own) and the canned estimators' own.
_HYPER_LEAVES = {"learning_rate", "decay", "beta_1", "beta_2", "rho", "momentum", "epsilon",
                 "initial_accumulator_value", "learning_rate_power", "l1_regularization_strength",
                 "l2_regularization_strength", "l2_shrinkage_regularization_strength", "beta", "iter"}


def _unaccounted(variables: list[dict], captured: dict, partitioned_bases: set[str] = frozenset()) -> list[str]:
    """A refusal for each checkpoint key that has no counterpart: neither a paired model
    variable, an optimizer slot, the global step, beta powers, nor a hyper-parameter (the keys
    of partitioned variables are refused by name elsewhere)."""
    known = {v["name"] for v in variables} | {s["name"] for s in captured.get("slots") or []} \
        | {e["name"] for e in captured.get("extra") or []}
    # an RNN cell's variables and slots, read in Keras's layout from the TF1 ones
    known |= {source for entry in [*variables, *(captured.get("slots") or [])] for source in entry.get("sources") or ()}
    missing = []
    for name, shape in captured.get("keys") or []:
        copy = re.match(r"(.*)/replica_\d+$", name)
        if name in known or (copy and copy.group(1) in known):
            continue  # a per-replica copy of a mirrored variable holds the same value
        if is_part_key(name, partitioned_bases):
            continue
        if not shape and name.rsplit("/", 1)[-1] in _HYPER_LEAVES:
            continue  # a Keras legacy optimizer's hyper-parameter: the migrated program's own
        missing.append(f"{name} {list(shape)}")
    if not missing:
        return []
    return [f"{len(missing)} variable(s) of the checkpoint have no counterpart in the migrated model: "
            + ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")]


def _beta_powers(extra: list[dict], step: int | None) -> list[str]:
    """TF1 Adam keeps beta1^t and beta2^t; Keras computes them from iterations: they must say
    the same number of steps, else the first steps after resuming would differ."""
    problems = []
    for entry in extra:
        if not entry["role"].startswith("beta") or step is None:
            continue
        expected = entry["beta"] ** (step + 1)
        if not abs(entry["value"] - expected) <= 1e-5 * abs(expected) + 1e-30:
            problems.append(f"{entry['name']} is {entry['value']:.6g}, not {entry['beta']:g}^{step + 1} = "
                            f"{expected:.6g}: Adam did not step with the global step ({step}), and Keras derives it "
                            "from iterations")
    return problems


# A canned head's probabilities are judged on their own scale, 1, not on the batch's largest:
# where every logit is far below 0, the sigmoid's float32 rounding alone differs by more than
# 1e-6 of its largest value (logits -41 agreeing to 4.6e-8 gave logistic 1.07e-6 apart).
# Logits are judged on a scale of at least 1 too: a logit is a sum of the last layer's
# products, rounded relative to them, so logits all near 0 differ by more than 1e-6 of their
# own largest (a DNNClassifier's logits of at most 0.41, 5.7e-7 apart, its probabilities
# 6e-8 apart and its average_loss identical).
PROBABILITY_OUTPUTS = frozenset({"probabilities", "logistic"})
LOGIT_OUTPUTS = frozenset({"logits"})


def compare_predictions(theirs: dict, mine: dict, rtol: float) -> tuple[list[PredictionRow], str | None]:
    """Rows for the outputs both sides predicted, and a refusal when one differs or none pairs.

    Dicts are paired by key (string outputs, e.g. a classifier's class names, are compared
    for equality); a single output on one side is paired with the other side's output of
    the same shape, preferring the keys "logits", "predictions", "probabilities". An output
    differs when max |diff| > rtol * max |legacy| (for probabilities and logits, rtol * max(1, max |legacy|)).
    """
    import numpy as np

    pairs = [(k, k) for k in sorted(theirs) if k in mine]
    if not pairs:
        lone_theirs, lone_mine = (list(theirs) if len(mine) == 1 else []), (list(mine) if len(theirs) == 1 else [])
        order = ("logits", "predictions", "probabilities", "")
        if len(mine) == 1:
            key = next(iter(mine))
            candidates = sorted(lone_theirs, key=lambda k: order.index(k) if k in order else len(order))
            pairs = [(k, key) for k in candidates if _comparable(theirs[k], mine[key])][:1]
        elif len(theirs) == 1:
            key = next(iter(theirs))
            candidates = sorted(lone_mine, key=lambda k: order.index(k) if k in order else len(order))
            pairs = [(key, k) for k in candidates if _comparable(theirs[key], mine[k])][:1]
    if not pairs:
        return [], (f"no prediction output pairs up (Estimator: {sorted(theirs) or 'none'}, "
                    f"migrated: {sorted(mine) or 'none'})")
    rows = []
    for a, b in pairs:
        x, y = np.asarray(theirs[a]), np.asarray(mine[b])
        n = min(len(x), len(y))
        x, y = x[:n], y[:n]
        if x.shape != y.shape and x.size == y.size:
            y = y.reshape(x.shape)
        if x.shape != y.shape:
            rows.append(PredictionRow(a, b, n, float("inf"), float("inf"), False))
            continue
        if x.dtype.kind in "SUO" or y.dtype.kind in "SUO":
            same = bool(np.all(x.astype(str) == y.astype(str)))
            rows.append(PredictionRow(a, b, n, 0.0 if same else float("inf"), 0.0 if same else float("inf"), same))
            continue
        x, y = x.astype(np.float64), y.astype(np.float64)
        diff = float(np.max(np.abs(x - y))) if n else 0.0
        scale = float(np.max(np.abs(x))) if n else 0.0
        if {a, b} & (PROBABILITY_OUTPUTS | LOGIT_OUTPUTS):
            scale = max(scale, 1.0)
        relative = diff / scale if scale > 0 else diff
        rows.append(PredictionRow(a, b, n, diff, relative, relative <= rtol))
    if any(r.rows == 0 for r in rows):
        return rows, "no predictions to compare (an empty input?)"
    bad = [r for r in rows if not r.ok]
    if bad:
        return rows, ("the restored models predict differently: "
                      + ", ".join(f"{r.legacy_key or 'output'} (relative {r.relative:.3g} > {rtol:g})" for r in bad))
    return rows, None


def _comparable(a, b) -> bool:
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    return a.shape[1:] == b.shape[1:] and a.dtype.kind in "fiu" and b.dtype.kind in "fiu"


def _install(stage: Path, out: Path, force: bool) -> None:
    """Move the staged files into ``out``; with ``force``, an earlier checkpoint there goes first."""
    out.mkdir(parents=True, exist_ok=True)
    if force:
        for path in out.iterdir():
            if path.name == "checkpoint" or path.name == WEIGHTS_FILE or re.match(r"ckpt-\d+\.", path.name) \
                    or re.match(r"model\.ckpt-\d+\.", path.name):
                path.unlink()
    for path in stage.iterdir():
        shutil.move(str(path), str(out / path.name))
