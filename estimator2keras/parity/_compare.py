"""Compare what the two sides recorded: per-step losses, final weights, eval metrics.

Pure Python + numpy: the host never imports TensorFlow. Inputs are the sides' result.json
dicts (see _legacy_side.py / _keras_side.py) and their weights (name -> array).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from estimator2keras.parity._result import (
    HyperRow,
    MetricRow,
    ParityResult,
    SideInfo,
    StepRow,
    Tolerance,
    WeightRow,
    allclose,
    relative,
)

# Metrics every Estimator evaluation reports that are bookkeeping, not model quality.
_NOT_COMPARED_METRICS = {"global_step"}

#: MetricRow.note of a metric the Estimator program reports and the migrated program lacks: a
#: migration that drops a metric the program had is wrong, so the row fails.
MISSING_FROM_MIGRATED = "missing from the migrated program"
#: MetricRow.note of a metric only the legacy program reports where that is not judged (e2k
#: checkpoint: its proof is the metrics both report).
LEGACY_ONLY = "the legacy program only"
#: MetricRow.note of a metric only the migrated program reports: listed, not compared.
MIGRATED_ONLY = "the migrated program only"
#: MetricRow.note of a metric both report whose value is not a number (a string, a vector).
NOT_A_NUMBER = "not a number"

# The eval metrics of a tf.estimator binary classification head (canned binary classifiers,
# BaselineClassifier), besides `loss`.
_BINARY_HEAD_METRICS = frozenset({"accuracy", "accuracy_baseline", "auc", "auc_precision_recall", "average_loss",
                                  "label/mean", "precision", "prediction/mean", "recall"})


def warm_start_differences(table: list[dict], places: list[int], legacy_weights: Mapping[str, Any],
                           migrated_weights: Mapping[str, Any], rtol: float, atol: float,
                           nudged_weights: Mapping[str, Any] | None, k: float) -> list[tuple[str, float]]:
    """The warm-started variables (``places`` in ``table``) whose initial value in the migrated
    run is not the Estimator's, most different first: (name, max |diff|). As final weights are
    compared: within ``atol + rtol * max|legacy|``, or k x the envelope run's own start (a
    model warm-started from an earlier model starts from that model's final weights, which
    agree only within the tolerance)."""
    import numpy as np

    found = []
    for i in places:
        a, b = legacy_weights.get(f"initial_{i}"), migrated_weights.get(f"initial_{i}")
        if a is None or b is None:
            continue
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            found.append((table[i]["name"], math.inf))
            continue
        if not a.size:
            continue
        diff = float(np.max(np.abs(a - b)))
        allowed = atol + rtol * float(np.max(np.abs(a)))
        if nudged_weights is not None and f"initial_{i}" in nudged_weights:
            nudged = np.asarray(nudged_weights[f"initial_{i}"], dtype=np.float64)
            if nudged.shape == a.shape:
                allowed = max(allowed, k * float(np.max(np.abs(nudged - a))))
        if not diff <= allowed:
            found.append((table[i]["name"], diff))
    return sorted(found, key=lambda item: -item[1])


def _ordinal(number: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(number, f"{number}th")


def side_info(side: Mapping[str, Any], program: str, python: str, seconds: float | None) -> SideInfo:
    """The SideInfo of one side's result.json."""
    notes = list(side.get("notes") or []) + list(side.get("pairing_notes") or [])
    return SideInfo(
        program=program,
        python=python,
        status=str(side.get("status", "missing")),
        versions=dict(side.get("versions") or {}),
        replicas=side.get("replicas"),
        strategy=side.get("strategy"),
        devices=side.get("worker_devices") or side.get("harness_devices"),
        loss_reduction=side.get("loss_reduction"),
        steps=len(side.get("losses") or []),
        training_calls=int(side.get("training_calls") or 0),
        models_trained=int(side.get("models_trained") or 0),
        seconds=seconds,
        notes=notes,
    )


def legacy_losses_on_keras_scale(legacy: Mapping[str, Any]) -> tuple[list[float], float, str | None]:
    """The Estimator's per-step losses as the loss whose gradient it applied, and why.

    Keras reports the loss it differentiates (the global-batch mean for a mean loss, the sum
    for reduction="sum"). The Estimator reports the replicas' losses reduced with the op
    TensorFlow chose (`_get_loss_reduce_op_for_reporting`): MEAN when a TF1 optimizer divided
    the loss by the N replicas, else SUM. That SUM is the differentiated loss, unless the
    model_fn itself divided the loss by N before a Keras optimizer (TF2 canned heads do):
    then it is N times it. So the legacy losses are divided by N exactly in that case — read
    from the graph TensorFlow built, never fitted to make the numbers agree — and compared
    as reported otherwise. Returns (losses, factor applied, note for the report).
    """
    losses = [float(x) for x in legacy.get("losses") or []]
    replicas = int(legacy.get("replicas") or 1)
    if legacy.get("loss_reduction") != "sum" or replicas <= 1:
        return losses, 1.0, None
    if legacy.get("loss_divided_by_replicas"):
        return [x / replicas for x in losses], 1.0 / replicas, (
            f"the model_fn divided the loss it differentiates by the {replicas} replicas before a Keras "
            f"optimizer (as TF2 canned heads do), but the Estimator reported the SUM of the undivided "
            f"losses over replicas: legacy losses are shown divided by {replicas}")
    return losses, 1.0, (
        f"the Estimator reported each step's loss as the SUM over its {replicas} replicas (its loss "
        f"reduction was SUM, so the TF1 optimizer did not divide by {replicas}): the loss whose "
        "gradient it applies, as Keras reports for a loss with reduction=\"sum\"; compared as reported")


def noise_envelope(legacy: list[float], nudged: list[float]) -> tuple[list[float], list[float]]:
    """The program's own noise, step by step: the raw ``|nudged - legacy|`` loss difference,
    and the envelope, its running maximum (the largest drift the nudged run showed up to
    that step). A running maximum because a scalar loss can coincide by chance in two runs
    whose weights have long separated; chaos does not come back together."""
    raw, running, top = [], [], 0.0
    for a, b in zip(legacy, nudged):
        diff = abs(a - b)
        if not math.isfinite(diff):
            diff = math.inf
        raw.append(diff)
        top = max(top, diff)
        running.append(top)
    return raw, running


def compare_steps(legacy: list[float], migrated: list[float], tolerance: Tolerance,
                  envelope: tuple[list[float], list[float]] | None = None) -> list[StepRow]:
    """One row per step of the longer run; a step missing on one side fails.

    Without ``envelope`` (raw, running) each step is judged by the fixed schedule. With it,
    steps 1..strict_steps within ``max(tight tolerance, envelope)`` (no more than the
    program's own noise there), later ones within ``max(tight tolerance, envelope_k * envelope)``."""
    rows = []
    raw, running = envelope if envelope is not None else ([], [])
    for i in range(max(len(legacy), len(migrated))):
        step = i + 1
        a = legacy[i] if i < len(legacy) else None
        b = migrated[i] if i < len(migrated) else None
        if envelope is None:
            rtol, atol = tolerance.for_step(step)
            noise = level = None
        else:
            rtol, atol = tolerance.tight_rtol, tolerance.tight_atol
            noise = raw[i] if i < len(raw) else None
            level = running[i] if i < len(running) else None
        if a is None or b is None:
            rows.append(StepRow(step, a, b, None, None, rtol, atol, False, level, noise, None))
            continue
        allowed = atol + rtol * abs(a) if math.isfinite(a) else 0.0
        if level is not None:
            # The strict steps: a migration may differ by what the program's own rounding
            # makes there (a summed loss over Adam's first steps), no more.
            allowed = max(allowed, (tolerance.envelope_k if step > tolerance.strict_steps else 1.0) * level)
        diff = abs(a - b) if not (math.isnan(a) or math.isnan(b)) else math.nan
        if envelope is None or math.isinf(a) or math.isinf(b):
            passed = allclose(a, b, rtol, atol)
        else:
            passed = not math.isnan(diff) and diff <= allowed
        rows.append(StepRow(
            step, a, b, diff, relative(diff, a) if not math.isnan(diff) else math.nan,
            rtol, atol, passed, level, noise, allowed))
    return rows


def compare_weights(legacy_table: list[Mapping[str, Any]], migrated_table: list[Mapping[str, Any]],
                    legacy_final: Mapping[str, Any], migrated_final: Mapping[str, Any],
                    rtol: float, atol: float, nudged_final: Mapping[str, Any] | None = None,
                    envelope_k: float = 0.0) -> list[WeightRow]:
    """Final value of every paired variable: ``max|diff| <= atol + rtol * max|legacy|``, or,
    with the nudged run's final values, within ``envelope_k`` times that variable's own
    ``max|nudged - legacy|`` when that is more.

    Per tensor rather than per element: one element near zero should not fail a tensor
    whose values agree to the tolerance's relative precision.
    """
    import numpy as np

    rows = []
    for i, (theirs, mine) in enumerate(zip(legacy_table, migrated_table)):
        key = f"final_{i}"
        if key not in legacy_final or key not in migrated_final:
            continue
        a = np.asarray(legacy_final[key], dtype=np.float64)
        b = np.asarray(migrated_final[key], dtype=np.float64)
        if a.shape != b.shape:
            rows.append(WeightRow(i, theirs["name"], mine["name"], tuple(a.shape), bool(theirs.get("trainable")),
                                  math.inf, math.inf, False))
            continue
        diff = float(np.max(np.abs(a - b))) if a.size else 0.0
        scale = float(np.max(np.abs(a))) if a.size else 0.0
        if not math.isfinite(diff):
            diff = math.nan if np.isnan(a - b).any() else math.inf
        allowed, envelope = atol + rtol * scale, None
        if nudged_final is not None and key in nudged_final:
            c = np.asarray(nudged_final[key], dtype=np.float64)
            if c.shape == a.shape:
                envelope = float(np.max(np.abs(a - c))) if a.size else 0.0
                if math.isfinite(envelope):
                    allowed = max(allowed, envelope_k * envelope)
        passed = math.isfinite(diff) and diff <= allowed
        rows.append(WeightRow(i, theirs["name"], mine["name"], tuple(int(d) for d in a.shape),
                              bool(theirs.get("trainable")), diff, relative(diff, scale), passed,
                              envelope, allowed))
    return rows


def final_evaluation(side: Mapping[str, Any]) -> dict[str, float] | None:
    """The last evaluation a side ran (Keras: the last evaluate(), else fit's last val_ logs)."""
    evaluations = side.get("evaluations") or []
    if evaluations:
        return dict(evaluations[-1])
    validation = side.get("fit_validation")
    return dict(validation) if validation else None


def comparable_evaluation(legacy: Mapping[str, Any],
                          migrated: Mapping[str, Any] | None = None) -> tuple[dict[str, float] | None, str | None]:
    """The Estimator's last evaluation, with its loss on Keras's scale; and a note when rescaled.

    With a SUM loss reduction (TF1 canned Estimators), the Estimator's eval ``loss`` is the
    mean over its *per-replica* batches of each batch's summed loss. The migrated program
    batches N times as many examples (one global batch per N per-replica ones), and Keras
    reports a summed loss over the global batch: N times the Estimator's number for the
    same examples. The training losses need no such care (both report the sum over the
    replicas); a migration that averages where the Estimator summed is caught at step 1.
    """
    evaluation = final_evaluation(legacy)
    if not evaluation or _scalar(evaluation.get("loss")) is None:
        return evaluation, None
    theirs = final_evaluation(migrated) if migrated is not None else None
    if _scalar(evaluation.get("average_loss")) is not None and (
            migrated is None or _scalar((theirs or {}).get("average_loss")) is not None):
        # A canned head's eval `loss` is the mean over batches of each batch's loss (summed
        # over it, for TF1 heads): a number that depends on how the examples were batched (a
        # smaller last batch counts as much as a full one; without eval_distribute the
        # Estimator evaluated its input_fn's batches on one device, the migrated program may
        # evaluate the global batches of an input_fn it shares with training). Keras weighs
        # each batch by its examples. `average_loss`, the mean over the same examples, is what
        # both report alike (where the migrated program reports it too).
        evaluation = {k: v for k, v in evaluation.items() if k != "loss"}
        return evaluation, ("the Estimator's eval loss depends on how the examples were batched; "
                            "its average_loss, the mean over the same examples, is compared instead")
    if legacy.get("loss_reduction") != "sum":
        return evaluation, None
    if legacy.get("loss_divided_by_replicas"):
        return evaluation, None  # a mean loss (TF2 canned heads): its eval loss is the mean already
    # The evaluation's own replicas: without eval_distribute the Estimator evaluates on one
    # device, and the migrated program evaluates the same batches.
    replicas = int(legacy.get("eval_replicas") or legacy.get("replicas") or 1)
    if replicas < 2:
        return evaluation, None
    evaluation = dict(evaluation)
    evaluation["loss"] = float(evaluation["loss"]) * replicas
    return evaluation, (
        f"the Estimator's eval loss (a SUM loss) is its mean over per-replica batches; the migrated program's "
        f"batches hold {replicas} of them and Keras sums over the global batch: legacy eval loss compared "
        f"x {replicas}")


# With the envelope, an eval metric is judged by the tight absolute tolerance, this relative
# one, and k times its own envelope. Not the fixed schedule's 5 % after step 10: a 3 %
# difference in a canned Estimator's average_loss passed that way. 1e-4 covers float32
# accumulation of a mean over an evaluation's batches in another order (TF1 metric ops against
# Keras metrics; each batch's sum and the running total round differently), which the
# envelope, two runs of the same legacy program, cannot measure.
METRIC_RTOL = 1e-4


def compare_metrics(legacy: Mapping[str, Any] | None, migrated: Mapping[str, Any] | None,
                    rtol: float, atol: float, nudged: Mapping[str, Any] | None = None,
                    envelope_k: float = 0.0, known_difference: str | None = None,
                    example_weighted: Mapping[str, tuple[float, float | None]] | None = None,
                    missing_fails: bool = False, legacy_only: Mapping[str, str] | None = None) -> list[MetricRow]:
    """Metrics of the last evaluation, by name; with ``missing_fails``, one the migrated program
    lacks fails.

    Without the nudged run's evaluation: within ``atol + rtol * |legacy|`` (the fixed schedule's
    tolerance of the last step). With it: within ``max(atol + METRIC_RTOL * |legacy|, envelope_k *
    |nudged - legacy|)``, the metric's own noise, unless ``known_difference`` names an evaluation
    difference the envelope cannot measure (BatchNorm statistics evaluated per replica): then
    the fixed tolerance stays allowed too, and the row says why.

    ``example_weighted`` maps a metric (the eval ``loss`` of a custom model_fn) to the Estimator's
    evaluation batches' values weighed by their examples, and the envelope run's: the number Keras
    computes from the same batches. A migrated value that misses the Estimator's number but matches
    that one, within the same tolerance, passes as ``explained``; one that matches neither fails.

    With ``missing_fails`` (parity), a name the legacy evaluation reports and the migrated one
    lacks (the migrated program does not compute the metric, or never evaluates) fails, its note
    ``MISSING_FROM_MIGRATED``: a migration that drops a metric the program had is wrong. Except
    the bookkeeping keys (``global_step``, never a row) and the names ``legacy_only`` maps to why
    a correct migration lacks them: listed, not compared, with that reason as the note. Without
    it (e2k checkpoint, which proves a checkpoint by the metrics both programs report) such a
    name is listed, not compared (``LEGACY_ONLY``). A name only the migrated program reports is
    listed, not compared (``MIGRATED_ONLY``): a migration may report more."""
    if not legacy and not migrated:
        return []
    legacy = {k: v for k, v in (legacy or {}).items() if k not in _NOT_COMPARED_METRICS}
    migrated = {k: v for k, v in (migrated or {}).items() if k not in _NOT_COMPARED_METRICS}
    rows = []
    for name in list(legacy) + [n for n in migrated if n not in legacy]:
        a, b = _scalar(legacy.get(name)), _scalar(migrated.get(name))
        if name not in migrated:
            reason = (legacy_only or {}).get(name) or (None if missing_fails else LEGACY_ONLY)
            rows.append(MetricRow(name, a, None, None, None, None if reason else False,
                                  note=reason or MISSING_FROM_MIGRATED))
            continue
        if name not in legacy:
            rows.append(MetricRow(name, None, b, None, None, None, note=MIGRATED_ONLY))
            continue
        if a is None or b is None:
            rows.append(MetricRow(name, a, b, None, None, None, note=NOT_A_NUMBER))
            continue
        diff = abs(a - b)
        passed = allclose(a, b, rtol, atol)
        allowed = atol + rtol * abs(a)
        c = _scalar((nudged or {}).get(name))
        envelope = abs(a - c) if c is not None and math.isfinite(a - c) else None
        note = None
        if envelope is not None:
            if known_difference is None:
                allowed = atol + METRIC_RTOL * abs(a) if math.isfinite(a) else 0.0
                passed = allclose(a, b, METRIC_RTOL, atol)
            else:
                note = known_difference
            allowed = max(allowed, envelope_k * envelope)
            passed = passed or (math.isfinite(diff) and diff <= allowed)
        weighted, explained = (example_weighted or {}).get(name), False
        if weighted is not None and not passed:
            w, w_nudged = weighted
            w_envelope = abs(w - w_nudged) if w_nudged is not None and math.isfinite(w - w_nudged) else envelope
            explained = _within(w, b, rtol, atol, w_envelope, envelope_k, known_difference)
        rows.append(MetricRow(name, a, b, diff, relative(diff, a), passed or explained, envelope, allowed, note,
                              example_weighted=weighted[0] if weighted is not None else None, explained=explained))
    return rows


def legacy_only_metrics(legacy: Mapping[str, Any] | None) -> dict[str, str]:
    """The metrics of the legacy side's last evaluation that a correct migration does not
    report, each with why: a tf.compat.v1 canned binary head's ``auc_precision_recall``, the
    area under the PR curve summed in trapezoids, which no Keras AUC computes (e2k's
    conversion leaves it out, docs/canned-estimators.md). Recognised by the head's metrics
    all being there and the Estimator training with TF1 optimizers only (a tf.compat.v1
    canned Estimator takes nothing else; a TF2 head's PR AUC is Keras's, and a migration
    must keep it). Any other metric the migrated program lacks fails."""
    evaluation = final_evaluation(legacy) if legacy else None
    if not evaluation or not _BINARY_HEAD_METRICS <= set(evaluation):
        return {}
    optimizers = [str(item.get("class") or "") for item in legacy.get("optimizers") or []]
    if not optimizers or not all(name.endswith("Optimizer") for name in optimizers):
        return {}
    return {"auc_precision_recall": (
        "legacy only: a tf.compat.v1 canned binary head's area under the PR curve, summed in trapezoids, "
        "which no Keras AUC computes")}


def missing_from_migrated(row: MetricRow) -> bool:
    """Whether the row is a metric the legacy program reports and the migrated one lacks."""
    return row.passed is False and row.note == MISSING_FROM_MIGRATED


def _within(a: float, b: float, rtol: float, atol: float, envelope: float | None, envelope_k: float,
            known_difference: str | None) -> bool:
    """compare_metrics' judgement of a migrated value ``b`` against a legacy value ``a``."""
    passed = allclose(a, b, rtol, atol)
    if envelope is None:
        return passed
    allowed = atol + rtol * abs(a)
    if known_difference is None:
        allowed = atol + METRIC_RTOL * abs(a) if math.isfinite(a) else 0.0
        passed = allclose(a, b, METRIC_RTOL, atol)
    diff = abs(a - b)
    return passed or (math.isfinite(diff) and diff <= max(allowed, envelope_k * envelope))


def example_weighted_eval_loss(side: Mapping[str, Any] | None) -> tuple[float, list[int]] | None:
    """The last evaluation's batch losses weighed by their examples, and the batch sizes.

    The Estimator's eval loss is ``tf.compat.v1.metrics.mean(loss)`` over the evaluation's batches:
    each batch's loss counts the same, a smaller last batch as much as a full one. Keras weighs each
    batch's loss by its examples. The legacy side records every evaluation batch's loss and size
    (an evaluation without eval_distribute); None unless the mean of the recorded losses is the
    loss the Estimator reported (then they are the batches that made it)."""
    if not side:
        return None
    evaluations = side.get("evaluations") or []
    batches = side.get("evaluation_batches") or []
    if not evaluations or len(batches) != len(evaluations) or not batches[-1]:
        return None
    losses = [float(x) for x in batches[-1].get("losses") or []]
    examples = [int(n) for n in batches[-1].get("examples") or []]
    reported = _scalar(evaluations[-1].get("loss"))
    if not losses or len(losses) != len(examples) or min(examples) < 1 or reported is None:
        return None
    if not math.isclose(sum(losses) / len(losses), reported, rel_tol=1e-5, abs_tol=1e-7):
        return None
    return sum(x * n for x, n in zip(losses, examples)) / sum(examples), examples


def _batch_sizes(examples: list[int]) -> str:
    if len(examples) <= 6:
        return ", ".join(str(n) for n in examples)
    if len(set(examples[:-1])) == 1:
        return f"{len(examples) - 1} of {examples[0]} and the last of {examples[-1]}"
    return f"{len(examples)} batches of {min(examples)} to {max(examples)} examples"


def _same(a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-12)


def _value(value: Any) -> Any:
    """A hyper-parameter as the report shows it: floats to 7 significant digits, float32's
    precision (a Keras optimizer holds its learning rate as float32: 0.05 reads
    0.05000000074505806)."""
    if value is None:
        return "not static"
    if isinstance(value, float):
        return float(f"{value:.7g}")
    return value


def compare_hyperparameters(legacy: Mapping[str, Any], migrated: Mapping[str, Any]) -> tuple[list[HyperRow], list[str]]:
    """Dropout and noise rates (neutralised in the run, so invisible in the losses) and the
    optimizers' hyper-parameters, as each program held them at run time. Returns the rows
    and notes on what could not be compared."""
    rows: list[HyperRow] = []
    notes: list[str] = []
    if "dropout" in legacy and "dropout" in migrated:
        theirs = [(d.get("kind"), d.get("value")) for d in legacy.get("dropout") or []]
        mine = [(d.get("kind"), d.get("value")) for d in migrated.get("dropout") or []]
        if len(theirs) == len(mine):
            for i, ((kind_a, a), (kind_b, b)) in enumerate(zip(theirs, mine)):
                label = kind_a if kind_a == kind_b else f"{kind_a} / {kind_b}"
                same = False if kind_a != kind_b else _same(a, b)
                rows.append(HyperRow(f"dropout #{i + 1} ({label}) {'stddev' if kind_a == 'GaussianNoise' else 'rate'}",
                                     _value(a), _value(b), same))
        else:
            def describe(items):
                return ", ".join(f"{kind} {_value(v)}" for kind, v in items) or "none"

            same = set(theirs) == set(mine)
            rows.append(HyperRow("dropout (in order of use)", describe(theirs), describe(mine), same,
                                 None if not same else
                                 f"the programs apply dropout {len(theirs)} and {len(mine)} times, at the same rates"))
    if "optimizers" in legacy and "optimizers" in migrated:
        theirs, mine = legacy.get("optimizers") or [], migrated.get("optimizers") or []
        if len(theirs) == 1 and len(mine) == 1:
            a, b = theirs[0], mine[0]
            if a.get("kind") != b.get("kind"):
                rows.append(HyperRow("optimizer", f"{a.get('class')} (Keras: {a.get('kind')})", b.get("class"), False))
            else:
                kind = a.get("kind")
                rows.append(HyperRow("optimizer", a.get("class"), b.get("class"), True))
                params_a, params_b = a.get("params") or {}, b.get("params") or {}
                for key in params_a:
                    if key in params_b:
                        same = _same(params_a[key], params_b[key])
                        rows.append(HyperRow(f"{kind} {key}", _value(params_a[key]), _value(params_b[key]), same,
                                             "a tensor or schedule: compared at every step below" if same is None else None))
        elif theirs or mine:
            notes.append(f"optimizers not compared: the legacy program applied {len(theirs)}, the migrated "
                         f"program {len(mine)}")
    return rows, notes


# Learning rates agree within float32 rounding of the schedule's arithmetic (TF1's decays and
# Keras's schedules compute the same formulas; a schedule shifted by one step or a staircase
# lost differ by 1e-4 or more relative).
_RATE_RTOL = 1e-5


def _per_step_rates(side: Mapping[str, Any], steps: int) -> tuple[list[float] | None, bool]:
    """The learning rate of every step as the side recorded it, or its optimizer's constant
    rate repeated; and whether it was a schedule (recorded per step and not constant)."""
    rates = side.get("learning_rates") or []
    if rates and all(isinstance(r, (int, float)) for r in rates):
        rates = [float(r) for r in rates]
        return rates, any(not math.isclose(r, rates[0], rel_tol=1e-7) for r in rates)
    optimizers = side.get("optimizers") or []
    if len(optimizers) == 1:
        rate = (optimizers[0].get("params") or {}).get("learning_rate")
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            return [float(rate)] * steps, False
    return None, False


def compare_learning_rates(legacy: Mapping[str, Any], migrated: Mapping[str, Any]) -> list[HyperRow]:
    """The learning rate of every step on both sides: TF1's decay of the global step, fetched
    with the step's loss, against the Keras optimizer's schedule at ``optimizer.iterations``
    before the step. A schedule shifted by one step or a staircase lost is found at the first
    update it changes, whether or not the losses show it. And TF1's MomentumOptimizer against
    Keras's SGD with momentum: the same update under a constant rate, not under a changing one
    (TF1 multiplies the whole accumulator by the current rate; Keras accumulates each
    gradient times the rate of its own step)."""
    steps = min(len(legacy.get("losses") or []), len(migrated.get("losses") or []))
    a, a_schedule = _per_step_rates(legacy, steps)
    b, b_schedule = _per_step_rates(migrated, steps)
    rows: list[HyperRow] = []
    if a is None or b is None or not steps:
        return rows
    a, b = a[:steps], b[:steps]
    if a_schedule or b_schedule:
        first = next((i for i, (x, y) in enumerate(zip(a, b))
                      if not math.isclose(x, y, rel_tol=_RATE_RTOL, abs_tol=1e-12)), None)
        if first is None:
            rows.append(HyperRow("learning rate at every step", f"{_value(a[0])} .. {_value(a[-1])}",
                                 f"{_value(b[0])} .. {_value(b[-1])}", True, f"{_count(steps, 'step')} agree"))
        else:
            before = f"; step {first}: legacy {_value(a[first - 1])}, migrated {_value(b[first - 1])}" if first else ""
            rows.append(HyperRow(
                "learning rate at every step", f"{_value(a[first])} at step {first + 1}",
                f"{_value(b[first])} at step {first + 1}", False,
                f"first differs in the update of step {first + 1}, seen in the loss from step {first + 2}{before}",
                first + 1))
    opt_a, opt_b = legacy.get("optimizers") or [], migrated.get("optimizers") or []
    if len(opt_a) == 1 and len(opt_b) == 1 and opt_a[0].get("class") == "MomentumOptimizer" \
            and opt_b[0].get("kind") == "SGD" and opt_b[0].get("class") != "MomentumOptimizer" \
            and not str(opt_b[0].get("own", "")).startswith("TF1Momentum"):  # e2k's SGD updating as TF1 did
        momentum_a = (opt_a[0].get("params") or {}).get("momentum")
        momentum_b = (opt_b[0].get("params") or {}).get("momentum")
        if all(isinstance(m, (int, float)) and m > 0 for m in (momentum_a, momentum_b)):
            change = next((i for i in range(1, steps) if not math.isclose(a[i], a[i - 1], rel_tol=1e-7)), None)
            if change is not None:
                rows.append(HyperRow(
                    "momentum under a changing learning rate",
                    "MomentumOptimizer: rate(t) x accumulator", f"{opt_b[0].get('class')}: sum of rate(s) x gradient(s)",
                    False,
                    f"the learning rate changes at step {change + 1} ({_value(a[change - 1])} -> {_value(a[change])}): "
                    "TF1's MomentumOptimizer multiplies its whole accumulator by the current rate, Keras's SGD "
                    "accumulates each gradient times the rate of its own step; the updates differ from step "
                    f"{change + 1} on (a known formula difference: keep a constant rate, or write an optimizer "
                    "with TF1's update)", change + 1))
    return rows


def _shuffle_key(item: Mapping[str, Any]) -> tuple:
    return (item.get("buffer_size"), item.get("seed"), item.get("reshuffle"))


def compare_shuffles(legacy: Mapping[str, Any], migrated: Mapping[str, Any]) -> list[HyperRow]:
    """The shuffles both programs asked for (neutralised in the run, so the losses cannot show
    a lost one): the sets of (buffer size, seed, reshuffle each iteration) must be equal. Sets,
    because an input_fn runs once per training or evaluation call where a migration may build
    its dataset once; ``reshuffle`` is compared when both sides said it (None: the default,
    True)."""
    if "shuffles" not in legacy or "shuffles" not in migrated:
        return []
    theirs = {_shuffle_key(d) for d in legacy.get("shuffles") or []}
    mine = {_shuffle_key(d) for d in migrated.get("shuffles") or []}
    if not theirs and not mine:
        return []

    def normal(key):
        return (key[0], key[1], True if key[2] is None else key[2])

    def describe(keys):
        parts = []
        for size, seed, reshuffle in sorted(keys, key=lambda k: tuple(str(x) for x in k)):
            text = f"buffer {_value(int(size)) if isinstance(size, float) and size.is_integer() else _value(size)}"
            text += f", seed {_value(int(seed)) if isinstance(seed, float) and seed.is_integer() else 'none' if seed is None else seed}"
            if reshuffle is False:
                text += ", not reshuffled"
            parts.append(text)
        return "; ".join(parts) or "no shuffle"

    same = {normal(k) for k in theirs} == {normal(k) for k in mine}
    note = None
    if not same and theirs and not mine:
        note = "the migrated program does not shuffle: a shuffle buffer was lost"
    elif not same and mine and not theirs:
        note = "the migrated program shuffles where the Estimator program did not"
    return [HyperRow("shuffle (Dataset.shuffle, neutralised in the run)", describe(theirs), describe(mine),
                     same, note)]


def _hyper_text(rows: list[HyperRow]) -> str:
    return "; ".join(f"{row.name}: legacy {row.legacy}, migrated {row.migrated}"
                     + (f" ({row.note})" if row.note and row.passed is False else "") for row in rows)


def _allowance(row: StepRow, tolerance: Tolerance) -> str:
    fixed = f"{row.atol:g} + {row.rtol:g}*|legacy|"
    if row.step <= tolerance.strict_steps:
        return (f"|diff| {row.abs_diff:.3g} > max({fixed}, envelope) = {row.allowed:.3g} (steps "
                f"1-{tolerance.strict_steps} may differ by no more than the program's own noise: too early "
                "for a correct migration's rounding to have been amplified beyond it)")
    return f"|diff| {row.abs_diff:.3g} > max({fixed}, {tolerance.envelope_k:g} x envelope) = {row.allowed:.3g}"


def _missing_text(rows: list[MetricRow], migrated_evaluation: Mapping[str, Any] | None) -> str:
    """What the verdict says of eval metrics the migrated program lacks."""
    names = ", ".join(repr(row.name) for row in rows)
    if not migrated_evaluation:
        return (f"the Estimator program evaluates and the migrated program never does (no Model.evaluate, no "
                f"validation in fit): {_count(len(rows), 'eval metric')} missing from the migrated program: {names}")
    return (f"{_count(len(rows), 'eval metric')} the Estimator program reports "
            f"{'is' if len(rows) == 1 else 'are'} missing from the migrated program: {names} (its evaluation "
            f"reports {', '.join(repr(name) for name in sorted(migrated_evaluation))}; a migration must keep "
            "every metric the Estimator program reported)")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _scalar(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def step_count_hints(legacy: SideInfo, migrated: SideInfo, step_limit: int | None) -> list[str]:
    """Why the two runs took a different number of steps, when the numbers say so."""
    n_legacy, n_migrated = legacy.steps, migrated.steps
    if n_legacy == n_migrated:
        return []
    replicas = legacy.replicas or 1
    hints = [f"the runs took a different number of steps: legacy {n_legacy}, migrated {n_migrated}"]
    # Unscaled batches: each legacy step becomes N steps, plus up to N-1 for batches of an
    # incomplete last round that the Estimator dropped.
    if replicas > 1 and n_legacy and replicas * n_legacy <= n_migrated < replicas * (n_legacy + 1):
        hints.append(
            f"the migrated program ran about {replicas}x as many steps as the Estimator on {replicas} replicas: "
            "its batch is probably not scaled by the number of replicas (an Estimator input_fn batches per "
            "replica, Keras batches globally: multiply the batch size by strategy.num_replicas_in_sync)")
    if replicas > 1 and n_migrated == n_legacy + 1:
        hints.append(
            f"the Estimator drops a last round with fewer than {replicas} per-replica batches; Keras trains "
            "on that remainder. Make the number of examples a multiple of the global batch, or batch with "
            "drop_remainder=True on both sides")
    if replicas > 1 and n_migrated and replicas * n_migrated <= n_legacy < replicas * (n_migrated + 1):
        hints.append(
            f"the migrated program ran about 1/{replicas} as many steps: its global batch may be scaled "
            "by the number of replicas twice")
    if (legacy.replicas or 1) != (migrated.replicas or 1):
        hints.append(f"the sides ran on a different number of replicas (legacy {legacy.replicas}, "
                     f"migrated {migrated.replicas}): does the migrated program use a MirroredStrategy?")
    if step_limit is not None and max(n_legacy, n_migrated) >= step_limit:
        hints.append(f"training was limited to {step_limit} steps (--steps)")
    return hints


def replica_copy_warnings(migrated: Mapping[str, Any]) -> list[str]:
    """Mirrored variables whose per-replica copies diverged in the Keras program (Keras 3's
    BatchNorm moving statistics): compared as their mean, and said so, loudly."""
    warnings = []
    for item in migrated.get("diverged_replica_copies") or []:
        warnings.append(
            f"{item['name']}: the migrated program's per-replica copies of this mirrored variable differ by up to "
            f"{item['max_diff']:.3g} after training (Keras 3 updates BatchNormalization moving statistics on each "
            "replica separately under MirroredStrategy). Compared as their mean over replicas, which is what the "
            "Estimator checkpoints (and Keras 2 saves); the model Keras 3 saves holds replica 0's copy, "
            f"{item['saved_vs_mean']:.3g} away from that mean")
    return warnings


def evaluation_hints(weights: list[WeightRow], failing_metrics: list[MetricRow], failing_step: int | None,
                     legacy_info: SideInfo) -> list[str]:
    """Known Estimator/Keras differences that explain eval metrics differing after the same training."""
    hints = []
    replicas = legacy_info.replicas or 1
    if failing_metrics and failing_step is None and replicas > 1:
        if any(not row.trainable for row in weights):
            hints.append(
                "the model has non-trainable state (e.g. BatchNorm moving statistics): Keras evaluates each "
                "replica with its own copy right after training, the Estimator evaluates from a checkpoint "
                "that holds their mean over replicas")
        hints.append("the Estimator drops an incomplete last round of per-replica batches in evaluation too; "
                     "Keras evaluates the remainder")
    return hints


def compare(legacy: Mapping[str, Any], migrated: Mapping[str, Any],
            legacy_weights: Mapping[str, Any], migrated_weights: Mapping[str, Any],
            tolerance: Tolerance, *, legacy_info: SideInfo, migrated_info: SideInfo,
            settings: Mapping[str, Any], step_limit: int | None = None,
            nudged: Mapping[str, Any] | None = None, nudged_weights: Mapping[str, Any] | None = None,
            envelope_missing: str | None = None) -> ParityResult:
    """The verdict on two successful runs.

    ``nudged`` (with ``nudged_weights``) is the legacy program's envelope run: the same
    program, its weights nudged at rounding level at every step. When given (and it ran the
    same number of steps), the migrated run is judged against the program's own noise, see
    :class:`Tolerance`; otherwise by the fixed schedule, with ``envelope_missing`` saying why
    when an envelope was asked for.
    """
    import numpy as np

    legacy_losses, factor, reduction_note = legacy_losses_on_keras_scale(legacy)
    legacy_info.loss_scale = factor
    migrated_losses = [float(x) for x in migrated.get("losses") or []]
    envelope, envelope_info, run_length_note = None, None, None
    if nudged is not None:
        nudged_losses = legacy_losses_on_keras_scale(nudged)[0]
        if len(legacy_losses) != len(nudged_losses) == len(migrated_losses):
            # Where the program stops is decided by its own rounding (early stopping on a
            # near tie, say): the migrated run is judged against the legacy run that stopped
            # where it did, the other one giving the envelope over their common steps.
            run_length_note = (
                f"the legacy program stops where its own rounding decides: {len(legacy_losses)} steps as run, "
                f"{len(nudged_losses)} with its weights nudged at rounding level; the migrated program took "
                f"{len(migrated_losses)}, so it is compared with the nudged run, the first run giving the noise "
                f"envelope over their {min(len(legacy_losses), len(nudged_losses))} common steps")
            legacy, nudged = nudged, legacy
            legacy_weights, nudged_weights = nudged_weights, legacy_weights
            legacy_losses, nudged_losses = nudged_losses, legacy_losses
        if len(nudged_losses) == len(legacy_losses) or run_length_note:
            envelope = noise_envelope(legacy_losses, nudged_losses)
            envelope_info = {"measured": True, **(nudged.get("perturbation") or {}),
                             "k": tolerance.envelope_k, "strict_steps": tolerance.strict_steps}
        else:
            envelope_missing = (f"the envelope run took {len(nudged_losses)} steps, the legacy run "
                                f"{len(legacy_losses)}: the program does not train the same way twice")
            nudged = nudged_weights = None
    if envelope is None and envelope_missing:
        envelope_info = {"measured": False, "reason": envelope_missing}
    steps = compare_steps(legacy_losses, migrated_losses, tolerance, envelope)

    last_step = max(len(steps), 1)
    final_rtol, final_atol = tolerance.for_step(last_step)
    legacy_table = list(legacy.get("variables") or [])
    migrated_table = list(migrated.get("variables") or [])
    paired = sum(1 for i in range(len(legacy_table)) if f"initial_{i}" in migrated_weights)
    k = tolerance.envelope_k
    weights = compare_weights(legacy_table[:paired], migrated_table[:paired],
                              legacy_weights, migrated_weights, final_rtol, final_atol,
                              nudged_weights if envelope is not None else None, k)
    legacy_evaluation, scale_note = comparable_evaluation(legacy, migrated)
    nudged_evaluation = comparable_evaluation(nudged, migrated)[0] if envelope is not None and nudged else None
    known = None
    if (legacy_info.replicas or 1) > 1 and any(not row.trainable for row in weights):
        known = (f"model state such as BatchNorm statistics: Keras evaluates each of the {legacy_info.replicas} "
                 "replicas with its own copy, the Estimator their mean, so the fixed tolerance is allowed too")
    weighted = None
    if scale_note is None and _scalar((legacy_evaluation or {}).get("loss")) is not None:
        weighted = example_weighted_eval_loss(legacy)
    by_examples = None
    if weighted is not None and not math.isclose(weighted[0], float(legacy_evaluation["loss"]),
                                                 rel_tol=1e-7, abs_tol=0.0):
        nudged_weighted = example_weighted_eval_loss(nudged) if nudged_evaluation is not None else None
        by_examples = {"loss": (weighted[0], nudged_weighted[0] if nudged_weighted else None)}
    migrated_evaluation = final_evaluation(migrated)
    metrics = compare_metrics(legacy_evaluation, migrated_evaluation, final_rtol, final_atol,
                              nudged_evaluation, k, known, by_examples, missing_fails=True,
                              legacy_only=legacy_only_metrics(legacy))

    notes = [note for note in (reduction_note, run_length_note) if note]
    if known and any(row.note == known for row in metrics):
        notes.append(f"eval metrics: {known}")
    if scale_note and any(row.name == "loss" for row in metrics):
        notes.append(scale_note)
    for row in metrics:
        if row.explained and weighted is not None:
            notes.append(
                f"eval loss: the Estimator reports the mean of its {len(weighted[1])} evaluation batches' losses, "
                f"each batch counting the same ({row.legacy:.8g}; the batches held {_batch_sizes(weighted[1])} "
                f"examples); Keras weighs each batch by its examples. The Estimator's batch losses weighed so give "
                f"{row.example_weighted:.8g}, which the migrated program's {row.migrated:.8g} matches: the two "
                "numbers differ in how they average the same losses, not in the migration")
    asked = int(settings.get("replicas") or 1)
    for label, info in (("legacy", legacy_info), ("migrated", migrated_info)):
        if asked > 1 and (info.replicas or 1) == 1:
            # the harness never adds a strategy: it would change what an input_fn's batch means
            notes.append(f"the {label} program ran on 1 replica although {asked} were asked for: it creates no "
                         "MirroredStrategy (or trains outside its scope)")
    warm_start = legacy.get("warm_start") or {}
    warm_started = [i for i in warm_start.get("variables") or [] if i < paired]
    late_start = warm_start_differences(legacy_table, warm_started, legacy_weights, migrated_weights, final_rtol,
                                        final_atol, nudged_weights if envelope is not None else None, k)
    if warm_started:
        notes.append(f"the Estimator warm-started {_count(len(warm_started), 'variable')} from "
                     f"{warm_start.get('from')}: their initial values were not copied into the migrated model, "
                     "which starts from what its program gave them (a warm start the migration lost shows)")
    mismatched_initial = [
        i for i in range(paired)
        if i not in warm_started and not np.array_equal(np.asarray(legacy_weights.get(f"initial_{i}")),
                              np.asarray(migrated_weights.get(f"initial_{i}")))
    ]
    if mismatched_initial:
        notes.append("initial values differ after copying for variables "
                     f"{mismatched_initial} (a dtype conversion?)")
    if paired < len(legacy_table):
        notes.append(f"{len(legacy_table) - paired} non-trainable legacy variables were not paired "
                     "and are not compared")

    legacy_models, migrated_models = int(legacy.get("models_trained") or 0), int(migrated.get("models_trained") or 0)
    if legacy_models > 1 and legacy_models == migrated_models:
        number = int(legacy.get("model_index") or 0) + 1
        notes.append(f"the programs train {legacy_models} models each: this comparison is of model {number}, the "
                     f"{_ordinal(number)} each trains (the others train as written, not recorded here)")

    hints = [] if run_length_note else step_count_hints(legacy_info, migrated_info, step_limit)
    failing_step = next((row.step for row in steps if not row.passed), None)
    failing_weights = [row for row in weights if not row.passed]
    missing_metrics = [row for row in metrics if missing_from_migrated(row)]
    failing_metrics = [row for row in metrics if row.passed is False and not missing_from_migrated(row)]
    compared_metrics = [row for row in metrics if row.passed is not None and not missing_from_migrated(row)]
    missing_text = _missing_text(missing_metrics, migrated_evaluation) if missing_metrics else None
    missing_said = False

    if not steps:
        verdict, reason = "error", "no training step to compare"
    elif legacy_models != migrated_models and legacy_models and migrated_models:
        verdict = "broken"
        reason = (f"the legacy program trains {_count(legacy_models, 'Estimator')}, the migrated one "
                  f"{_count(migrated_models, 'Keras model')}")
    elif late_start and (failing_step is None or failing_step == 1):
        verdict = "broken"
        worst = late_start[0]
        reason = (f"the migrated model starts from other weights than the Estimator, which warm-started "
                  f"{_count(len(warm_started), 'variable')} from {warm_start.get('from')}: "
                  f"{_count(len(late_start), 'warm-started variable')} differ{'s' if len(late_start) == 1 else ''} "
                  f"at the first step (most: {worst[0]}, max |diff| {worst[1]:.3g}); a warm start lost in the "
                  "migration? (restore the earlier model's weights before fit)")
    elif failing_step is not None:
        verdict = "broken"
        row = steps[failing_step - 1]
        if row.legacy_loss is None or row.migrated_loss is None:
            reason = (f"step counts differ (legacy {legacy_info.steps}, migrated {migrated_info.steps}); "
                      f"the losses agree up to step {failing_step - 1}")
        elif envelope is not None:
            reason = (f"diverges beyond the program's own numerical noise at step {failing_step} "
                      f"(envelope {row.envelope:.3g}, difference {row.abs_diff:.3g}): legacy {row.legacy_loss:.8g}, "
                      f"migrated {row.migrated_loss:.8g}; {_allowance(row, tolerance)}")
        else:
            reason = (f"losses diverge at step {failing_step}: legacy {row.legacy_loss:.8g}, "
                      f"migrated {row.migrated_loss:.8g} (|diff| {row.abs_diff:.3g} > "
                      f"{row.atol:g} + {row.rtol:g}*|legacy|)")
    elif failing_weights:
        verdict = "broken"
        worst = max(failing_weights, key=lambda r: r.max_abs_diff if math.isfinite(r.max_abs_diff) else math.inf)
        reason = (f"losses agree, but {_count(len(failing_weights), 'final weight')} differ{'s' if len(failing_weights) == 1 else ''} "
                  f"(most: {worst.legacy_name}, max |diff| {worst.max_abs_diff:.3g}"
                  f"{'' if worst.envelope is None else f', envelope {worst.envelope:.3g}'})")
    elif missing_metrics:
        verdict, missing_said = "broken", True
        reason = f"losses and weights agree, but {missing_text}"
    elif failing_metrics:
        verdict = "broken"
        worst = failing_metrics[0]
        reason = (f"losses and weights agree, but eval metric {worst.name!r} differs: legacy "
                  f"{worst.legacy:.8g}, migrated {worst.migrated:.8g}"
                  f"{'' if worst.envelope is None else f' (envelope {worst.envelope:.3g})'}")
        if worst.example_weighted is not None:
            reason += (f"; nor does it match the Estimator's evaluation batch losses weighed by their examples, "
                       f"as Keras weighs them ({worst.example_weighted:.8g})")
    else:
        verdict = "parity"
        counts = (f"{_count(len(steps), 'step')}, {_count(len(weights), 'final weight')} and "
                  f"{_count(len(compared_metrics), 'eval metric')}")
        if envelope is None:
            reason = f"{counts} agree within tolerance"
        else:
            noisy = [row for row in steps if row.within_noise_only]
            if noisy:
                worst = max(noisy, key=lambda r: r.abs_diff / r.allowed if r.allowed else 0.0)
                reason = (f"agrees within the program's own numerical noise: {counts}; "
                          f"{_count(len(noisy), 'step')} beyond the fixed tolerance, from step {noisy[0].step}, all "
                          f"within {k:g} x envelope (closest: step {worst.step}, difference {worst.abs_diff:.3g}, "
                          f"envelope {worst.envelope:.3g})")
            else:
                reason = f"agrees within the program's own numerical noise: {counts} agree within tolerance"
    hyperparameters, hyper_notes = compare_hyperparameters(legacy, migrated)
    hyperparameters += compare_learning_rates(legacy, migrated)
    hyperparameters += compare_shuffles(legacy, migrated)
    notes += hyper_notes
    failing_hyper = [row for row in hyperparameters if row.passed is False]
    if failing_hyper and verdict == "parity":
        verdict = "broken"
        reason = (f"the losses, weights and metrics agree, but hyper-parameters differ "
                  f"(read from both programs at run time): {_hyper_text(failing_hyper)}")
    elif failing_hyper:
        hints.append(f"hyper-parameters differ (read from both programs at run time): {_hyper_text(failing_hyper)}")
    hints += evaluation_hints(weights, failing_metrics, failing_step, legacy_info)
    if missing_metrics and not missing_said:
        hints.append(missing_text)  # the verdict names an earlier difference: this one is said too
    if envelope_info is not None and not envelope_info["measured"]:
        notes.append(f"no noise envelope: {envelope_missing}; judged by the fixed tolerance")
    return ParityResult(
        envelope=envelope_info,
        hyperparameters=hyperparameters,
        warnings=replica_copy_warnings(migrated),
        verdict=verdict,
        reason=reason,
        first_divergent_step=failing_step,
        steps=steps,
        weights=weights,
        metrics=metrics,
        legacy=legacy_info,
        migrated=migrated_info,
        settings=dict(settings),
        hints=hints,
        notes=notes,
    )
