"""What a parity check found: tolerances, per-step rows, per-weight and per-metric comparisons."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "e2k-parity/1"

EXIT_PARITY = 0
EXIT_BROKEN = 1
EXIT_ERROR = 2


@dataclass(frozen=True)
class Tolerance:
    """When two numbers agree: ``|legacy - migrated| <= atol + rtol * |legacy|``, widened by
    the program's own numerical noise where the harness measured it.

    The fixed part follows TensorFlow's migration guide (migration_debugging): the first
    ``tight_steps`` steps must agree tightly (absolute 1e-5; TF's validate_correctness uses
    rtol 1e-6 with it), later steps within 5 % relative, since float differences in
    reduction order compound over a long run.

    With the noise envelope (the legacy program run again with its weights nudged by
    ``envelope_ulps`` ulps at every step, see docs/parity.md), the schedule is different:
    steps 1..``strict_steps`` may differ by the tight tolerance or the envelope (the program's
    own noise there, not k times it), whichever is larger; every later step may
    differ by ``max(tight tolerance, envelope_k * envelope)``, the envelope being the largest
    difference the nudged run showed from the legacy run up to that step. Final weights and
    eval metrics use the fixed tolerance of the last step, widened the same way by their own
    envelope.
    """

    tight_steps: int = 10
    tight_atol: float = 1e-5
    tight_rtol: float = 1e-6
    loose_atol: float = 1e-5
    loose_rtol: float = 0.05
    strict_steps: int = 3
    envelope_k: float = 4.0
    envelope_ulps: int = 16

    def for_step(self, step: int) -> tuple[float, float]:
        """(rtol, atol) of the fixed schedule for 1-based training step ``step``."""
        if step <= self.tight_steps:
            return self.tight_rtol, self.tight_atol
        return self.loose_rtol, self.loose_atol

    def overridden(self, rtol: float | None = None, atol: float | None = None) -> Tolerance:
        """The same schedule with ``rtol`` and/or ``atol`` fixed for every step."""
        changes: dict[str, float] = {}
        if rtol is not None:
            changes.update(tight_rtol=rtol, loose_rtol=rtol)
        if atol is not None:
            changes.update(tight_atol=atol, loose_atol=atol)
        return dataclasses.replace(self, **changes)

    def describe(self, envelope: bool = False) -> str:
        tight = f"|diff| <= {self.tight_atol:g} + {self.tight_rtol:g}*|legacy|"
        if envelope:
            return (f"steps 1-{self.strict_steps} |diff| <= max({self.tight_atol:g} + {self.tight_rtol:g}*|legacy|, "
                    f"envelope); later steps |diff| <= max({self.tight_atol:g} + "
                    f"{self.tight_rtol:g}*|legacy|, {self.envelope_k:g} x envelope), the envelope being the "
                    f"largest |nudged - legacy| up to that step (legacy run again, weights nudged by "
                    f"{self.envelope_ulps} ulps at every step)")
        loose = f"|diff| <= {self.loose_atol:g} + {self.loose_rtol:g}*|legacy|"
        if tight == loose:
            return f"every step {tight}"
        return f"steps 1-{self.tight_steps} {tight}; later steps {loose}"


def allclose(legacy: float, migrated: float, rtol: float, atol: float) -> bool:
    """Scalar closeness as numpy.isclose, with NaN never equal (a NaN loss is a failure)."""
    if math.isnan(legacy) or math.isnan(migrated):
        return False
    if math.isinf(legacy) or math.isinf(migrated):
        return legacy == migrated
    return abs(legacy - migrated) <= atol + rtol * abs(legacy)


def relative(diff: float, reference: float) -> float:
    if diff == 0:
        return 0.0
    return diff / abs(reference) if reference else math.inf


@dataclass(frozen=True)
class StepRow:
    """One training step. ``step`` is 1-based: the k-th optimizer update of the run, whose
    loss is computed with the weights left by the k-1 updates before it."""

    step: int
    legacy_loss: float | None
    migrated_loss: float | None
    abs_diff: float | None
    rel_diff: float | None
    rtol: float
    atol: float
    passed: bool
    #: the program's own noise at this step: the largest |nudged - legacy| loss difference up
    #: to it (None when no envelope was measured), and the raw difference at this step
    envelope: float | None = None
    noise: float | None = None
    #: the largest |legacy - migrated| that passes at this step
    allowed: float | None = None

    @property
    def within_noise_only(self) -> bool:
        """Passed only because the envelope widened the fixed tolerance."""
        return bool(self.passed and self.abs_diff is not None and self.legacy_loss is not None
                    and self.abs_diff > self.atol + self.rtol * abs(self.legacy_loss))


@dataclass(frozen=True)
class WeightRow:
    """One model variable at the end of training (paired by creation order and shape)."""

    index: int
    legacy_name: str
    migrated_name: str
    shape: tuple[int, ...]
    trainable: bool
    max_abs_diff: float
    rel_diff: float  # max_abs_diff / max |legacy value|
    passed: bool
    envelope: float | None = None  # max |nudged - legacy| of this variable's final value
    allowed: float | None = None


@dataclass(frozen=True)
class MetricRow:
    """One evaluation metric of the last evaluation; ``passed`` is None where it is not compared (the
    migrated program only reports it, or it is no number), False where it differs or the migrated
    program lacks it (``note`` says which)."""

    name: str
    legacy: float | None
    migrated: float | None
    abs_diff: float | None
    rel_diff: float | None
    passed: bool | None
    envelope: float | None = None  # |nudged - legacy| of this metric
    allowed: float | None = None
    #: why the fixed tolerance is allowed too (a known evaluation difference), or why the row is
    #: not compared or fails without a difference (one side only, no number)
    note: str | None = None
    #: a custom model_fn's eval loss: the Estimator's evaluation batches' losses weighed by their
    #: examples, as Keras weighs them (the Estimator's own number counts every batch the same)
    example_weighted: float | None = None
    #: passed because the migrated value matches ``example_weighted``, not the Estimator's number
    explained: bool = False


@dataclass(frozen=True)
class HyperRow:
    """A hyper-parameter read from both programs at run time: what parity mode neutralises
    (dropout and noise rates) or what the losses may not show (the optimizer's settings, TF1
    defaults included). ``passed`` is None when a value is not static (a tensor, a schedule)."""

    name: str
    legacy: Any
    migrated: Any
    passed: bool | None
    note: str | None = None
    step: int | None = None  # the first training step whose update it changes, when known


@dataclass
class SideInfo:
    """How one program ran."""

    program: str
    python: str
    status: str = "not run"
    versions: dict[str, Any] = field(default_factory=dict)
    replicas: int | None = None
    strategy: str | None = None
    devices: list[str] | None = None
    loss_reduction: str | None = None  # legacy only: "sum", "mean" or "none"
    loss_scale: float = 1.0  # legacy only: factor applied to its reported losses (1/N or 1)
    steps: int = 0
    training_calls: int = 0
    #: how many models (Estimators, Keras models) the program trained
    models_trained: int = 0
    seconds: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class ParityResult:
    """The outcome of :func:`estimator2keras.parity.run_parity`.

    ``verdict`` is "parity" (exit code 0), "broken" (1) or "error" (2: a program could
    not be run or compared; ``reason`` says why, ``detail`` holds a traceback tail or the
    two variable tables). In a test: ``assert result.passed, result.report()``.
    """

    verdict: str
    reason: str
    first_divergent_step: int | None = None
    steps: list[StepRow] = field(default_factory=list)
    weights: list[WeightRow] = field(default_factory=list)
    metrics: list[MetricRow] = field(default_factory=list)
    legacy: SideInfo | None = None
    migrated: SideInfo | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    hints: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    detail: str | None = None
    variable_tables: dict[str, list[dict]] | None = None
    workdir: str | None = None
    #: the noise envelope: whether it was measured ("measured"), how, and why not when not
    envelope: dict[str, Any] | None = None
    #: hyper-parameters compared statically (dropout rates, the optimizer's settings)
    hyperparameters: list[HyperRow] = field(default_factory=list)
    #: which model of the program this comparison is (1-based, in the order the programs train
    #: them), in ``models`` of a program that trains several; None for the whole result
    model: int | None = None
    #: a program that trains several models: each model's comparison, in order (the result's own
    #: steps, weights and metrics are the first model's); empty for a program with one
    models: list[ParityResult] = field(default_factory=list)
    #: the model (1-based) whose comparison made the verdict, when it is not parity
    failing_model: int | None = None

    @property
    def passed(self) -> bool:
        """True when parity holds."""
        return self.verdict == "parity"

    @property
    def exit_code(self) -> int:
        """0 parity holds, 1 parity broken, 2 could not run."""
        return {"parity": EXIT_PARITY, "broken": EXIT_BROKEN}.get(self.verdict, EXIT_ERROR)

    def weights_by_difference(self) -> list[WeightRow]:
        """The compared weights, most different first."""
        return sorted(self.weights, key=lambda row: (row.passed, -row.max_abs_diff))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``--json`` writes exactly this)."""
        data = dataclasses.asdict(self)
        data = {"schema": SCHEMA, "passed": self.passed, "exit_code": self.exit_code, **data}
        return _finite(data)

    def report(self, *, max_rows: int = 40) -> str:
        """The human report (table, weights, metrics, verdict) as plain text."""
        from estimator2keras.parity._report import render_text

        return render_text(self, max_rows=max_rows)

    def __str__(self) -> str:
        return f"{self.verdict}: {self.reason}"


def _finite(value: Any) -> Any:
    """JSON has no NaN/Infinity: write them as strings so any JSON reader can load the file."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
