"""The human report (rich tables), the variable tables of a mismatch, JSON and the PNG plot."""
from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path
from typing import Any

from estimator2keras.parity._compare import MISSING_FROM_MIGRATED, missing_from_migrated
from estimator2keras.parity._result import ParityResult, StepRow

_INSTALL_HINT = "pip install 'estimator2keras[parity]'"
HEAD_ROWS = 10
TAIL_ROWS = 5
CONTEXT_ROWS = 3
TOP_WEIGHTS = 5


def require_rich() -> None:
    """Raise ParityUsageError saying what to install when rich is missing."""
    _rich()


def _rich():
    try:
        import rich  # noqa: F401
    except ImportError as exc:
        from estimator2keras.parity._runner import ParityUsageError

        raise ParityUsageError(f"the parity report needs 'rich': {_INSTALL_HINT}") from exc
    import rich.console
    import rich.table
    import rich.text

    return rich


def _num(value: float | None, spec: str = ".8g") -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return format(value, spec)


def visible_step_rows(rows: list[StepRow], first_divergent: int | None, max_rows: int) -> list[StepRow | None]:
    """The rows a person needs: the first steps, the ones around the first divergence, the last
    ones; None marks an elided stretch. Everything when the run is short."""
    if len(rows) <= max_rows:
        return list(rows)
    keep = set(range(min(HEAD_ROWS, len(rows))))
    keep |= set(range(max(0, len(rows) - TAIL_ROWS), len(rows)))
    if first_divergent is not None:
        centre = first_divergent - 1
        keep |= set(range(max(0, centre - CONTEXT_ROWS), min(len(rows), centre + CONTEXT_ROWS + 1)))
    out: list[StepRow | None] = []
    previous = -1
    for i in sorted(keep):
        if i != previous + 1:
            out.append(None)
        out.append(rows[i])
        previous = i
    return out


def _side_line(info, legacy: bool) -> str:
    if info is None:
        return "-"
    versions = info.versions or {}
    parts = []
    if versions.get("tensorflow"):
        tf = f"TF {versions['tensorflow']}"
        if not legacy and versions.get("backend"):
            tf = f"{versions['backend']} (tf.data: TF {versions['tensorflow']})"
        elif not legacy and versions.get("keras"):
            tf += f", Keras {versions['keras']}"
        parts.append(tf)
    parts.append(f"Python {versions.get('python', '?')} ({info.python})")
    line = "; ".join(parts)
    if info.replicas is not None:
        devices = ", ".join(d.rsplit("device:", 1)[-1] for d in (info.devices or []))
        strategy = info.strategy or "no distribution strategy"
        line += f"\n    {strategy}, {info.replicas} replica{'s' if info.replicas != 1 else ''}"
        if devices:
            line += f" on {devices}"
        if legacy and info.loss_reduction in ("sum", "mean"):
            line += f"; loss reported as the {info.loss_reduction.upper()} over replicas"
        line += f"; {info.steps} steps"
        if info.seconds is not None:
            line += f" in {info.seconds:.1f} s"
    return line


def _header_lines(result: ParityResult) -> list[str]:
    s = result.settings
    lines = [
        f"legacy    {result.legacy.program if result.legacy else '-'}",
        f"    {_side_line(result.legacy, True)}",
        f"migrated  {result.migrated.program if result.migrated else '-'}",
        f"    {_side_line(result.migrated, False)}",
    ]
    if s:
        limit = f"; stopped after {s['steps']} steps" if s.get("steps") else ""
        lines.append(
            f"parity mode: {s.get('replicas')} replicas"
            f"{'' if s.get('workers', 1) == 1 else ' on each of ' + str(s.get('workers')) + ' workers'}; "
            f"seed {s.get('seed')}; shuffle {s.get('shuffle')}; "
            f"dropout {s.get('dropout')}; op determinism {'on' if s.get('op_determinism') else 'off'}; "
            f"{s.get('initial_weights')}{limit}")
        lines.append(f"tolerance: {s.get('tolerance')}")
    envelope = result.envelope or {}
    if envelope.get("measured"):
        lines.append(
            f"noise envelope: the legacy program run again with its {envelope.get('elements', '?')} trainable values "
            f"nudged by {envelope.get('ulps')} ulps at every step (seed {envelope.get('seed')}); the table's "
            f"'envelope' is the largest |nudged - legacy| loss difference up to each step")
    elif envelope:
        lines.append(f"noise envelope: not measured ({envelope.get('reason')})")
    return lines


def build_renderables(result: ParityResult, *, max_rows: int = 40) -> list[Any]:
    """The report as rich renderables, in order."""
    Text = _rich().text.Text
    out: list[Any] = [Text("e2k parity", style="bold")]
    out += [Text(line) for line in _header_lines(result)]
    if result.models:  # a program that trains several models: each one's tables, labelled
        for each in result.models:
            label = f"model {each.model} of {len(result.models)}"
            out.append(Text(f"{label}: {each.legacy.steps if each.legacy else 0} legacy steps, "
                            f"{each.migrated.steps if each.migrated else 0} migrated steps", style="bold"))
            out += _tables(each, max_rows, f" ({label})")
            style = "green" if each.verdict == "parity" else "red"
            out.append(Text(f"{label}: {each.verdict.upper()}: {each.reason}", style=style))
    else:
        out += _tables(result, max_rows, "")
    return out + _closing(result)


def _tables(result: ParityResult, max_rows: int, label: str) -> list[Any]:
    """The step, weight, metric and hyper-parameter tables of one model's comparison, their
    titles ending in ``label``."""
    rich = _rich()
    Table = rich.table.Table
    out: list[Any] = []
    if result.steps:
        with_envelope = any(row.envelope is not None for row in result.steps)
        table = Table(title=f"Training loss per step{label}", title_justify="left", expand=False)
        columns = ["step", "legacy loss", "migrated loss", "abs diff", "rel diff"]
        columns += ["envelope", "allowed"] if with_envelope else []
        for name in columns + ["result"]:
            table.add_column(name, justify="right" if name != "result" else "left", no_wrap=True)
        for row in visible_step_rows(result.steps, result.first_divergent_step, max_rows):
            if row is None:
                table.add_row("...", *[""] * len(columns))
                continue
            first = row.step == result.first_divergent_step
            if row.passed:
                status = "ok (within noise)" if row.within_noise_only else "ok"
            else:
                status = "FAIL <- first divergence" if first else "FAIL"
            style = "bold red" if first else ("red" if not row.passed else None)
            cells = [str(row.step), _num(row.legacy_loss), _num(row.migrated_loss),
                     _num(row.abs_diff, ".3g"), _num(row.rel_diff, ".3g")]
            if with_envelope:
                cells += [_num(row.envelope, ".3g"), _num(row.allowed, ".3g")]
            table.add_row(*cells, status, style=style)
        out.append(table)

    if result.weights:
        table = Table(title=f"Final weights, most different first{label}", title_justify="left")
        with_envelope = any(row.envelope is not None for row in result.weights)
        columns = ["variable", "shape", "max abs diff", "rel diff"] + (["envelope"] if with_envelope else [])
        for name in columns + ["result"]:
            table.add_column(name, justify="left" if name in ("variable", "result") else "right")
        ranked = result.weights_by_difference()
        for row in ranked[:TOP_WEIGHTS]:
            name = row.legacy_name if row.legacy_name == row.migrated_name else \
                f"{row.legacy_name} / {row.migrated_name}"
            cells = [name + ("" if row.trainable else " (state)"), "x".join(map(str, row.shape)) or "scalar",
                     _num(row.max_abs_diff, ".3g"), _num(row.rel_diff, ".3g")]
            cells += [_num(row.envelope, ".3g")] if with_envelope else []
            table.add_row(*cells, "ok" if row.passed else "FAIL", style=None if row.passed else "red")
        if len(ranked) > TOP_WEIGHTS:
            rest = ranked[TOP_WEIGHTS:]
            table.add_row(f"... {len(rest)} more ({sum(r.passed for r in rest)} ok)", *[""] * len(columns))
        out.append(table)

    if result.metrics:
        # the last evaluation of the model compared (its Estimator's, the compared Keras model's)
        table = Table(title=f"Evaluation metrics (last evaluation){label}", title_justify="left")
        with_envelope = any(row.envelope is not None for row in result.metrics)
        columns = ["metric", "legacy", "migrated", "abs diff"] + (["envelope"] if with_envelope else [])
        for name in columns + ["result"]:
            table.add_column(name, justify="left" if name in ("metric", "result") else "right")
        for row in result.metrics:
            if row.passed is None:  # a name one side only reports, or not a number: see MetricRow.note
                status = f"not compared ({row.note or 'one side only'})"
            elif missing_from_migrated(row):
                status = f"FAIL ({MISSING_FROM_MIGRATED})"
            else:
                status = "ok" if row.passed else "FAIL"
            if row.explained:
                status += f" (as Keras weighs the Estimator's batches: {_num(row.example_weighted)}; see note)"
            elif row.passed is False and row.example_weighted is not None:
                status += f" (nor the Estimator's batches weighed by examples: {_num(row.example_weighted)})"
            cells = [row.name, _num(row.legacy), _num(row.migrated), _num(row.abs_diff, ".3g")]
            cells += [_num(row.envelope, ".3g")] if with_envelope else []
            table.add_row(*cells, status, style="red" if row.passed is False else None)
        out.append(table)

    if result.hyperparameters:
        table = Table(title=f"Hyper-parameters (read from both programs at run time){label}", title_justify="left")
        for name in ("hyper-parameter", "legacy", "migrated", "result"):
            table.add_column(name, justify="left")
        for row in result.hyperparameters:
            status = "ok" if row.passed else ("FAIL" if row.passed is False else "not compared")
            if row.note:
                status += f" ({row.note})"
            table.add_row(row.name, str(row.legacy), str(row.migrated), status,
                          style="red" if row.passed is False else None)
        out.append(table)
    return out


def _closing(result: ParityResult) -> list[Any]:
    """Warnings, hints, notes, detail and the verdict."""
    Text = _rich().text.Text
    out: list[Any] = []
    for warning in result.warnings:
        out.append(Text(f"warning: {warning}", style="bold yellow"))
    for hint in result.hints:
        out.append(Text(f"hint: {hint}", style="yellow"))
    notes = list(result.notes)
    for info in (result.legacy, result.migrated):
        notes += list(info.notes) if info else []
    for note in notes:
        out.append(Text(f"note: {note}", style="dim"))
    if result.detail:
        out.append(Text(result.detail))
    if result.workdir:
        out.append(Text(f"files kept in {result.workdir}", style="dim"))
    style = {"parity": "bold green", "broken": "bold red"}.get(result.verdict, "bold red")
    out.append(Text(f"{result.verdict.upper()}: {result.reason}", style=style))
    return out


def print_report(result: ParityResult, *, console=None, max_rows: int = 40) -> None:
    """Print the report on the terminal (colours when it is one)."""
    rich = _rich()
    if console is None:
        console = rich.console.Console(highlight=False)
        if not console.is_terminal:  # logs and CI: wide enough that table rows do not wrap
            console = rich.console.Console(highlight=False, width=max(console.width, 120))
    for renderable in build_renderables(result, max_rows=max_rows):
        console.print(renderable)


def render_text(result: ParityResult, *, max_rows: int = 40, width: int = 120) -> str:
    """The report as plain text, no colours."""
    rich = _rich()
    buffer = io.StringIO()
    console = rich.console.Console(file=buffer, width=width, color_system=None, force_terminal=False,
                                   highlight=False, emoji=False)
    print_report(result, console=console, max_rows=max_rows)
    return buffer.getvalue()


def variable_tables_text(legacy: list[dict], migrated: list[dict]) -> str:
    """Both variable tables side by side, in creation order, the first mismatch marked.

    Plain text on purpose: it goes into the result's ``detail`` without needing rich.
    """
    def cell(var: dict | None) -> str:
        if var is None:
            return "-"
        shape = "x".join(str(d) for d in var["shape"]) or "scalar"
        kind = "" if var.get("trainable", True) else " (non-trainable)"
        return f"{var['name']} [{shape}]{kind}"

    rows = []
    legacy_groups = [v for v in legacy if v.get("trainable", True)] + [v for v in legacy if not v.get("trainable", True)]
    migrated_groups = [v for v in migrated if v.get("trainable", True)] + \
        [v for v in migrated if not v.get("trainable", True)]
    first_bad = None
    for i in range(max(len(legacy_groups), len(migrated_groups))):
        a = legacy_groups[i] if i < len(legacy_groups) else None
        b = migrated_groups[i] if i < len(migrated_groups) else None
        same = a is not None and b is not None and list(a["shape"]) == list(b["shape"]) \
            and a.get("trainable", True) == b.get("trainable", True)
        if not same and first_bad is None:
            first_bad = i
        rows.append((str(i), cell(a), cell(b), "" if same else ("<- first mismatch" if i == first_bad else "x")))
    header = ("#", "legacy (Estimator)", "migrated (Keras)", "")
    widths = [max(len(r[c]) for r in rows + [header]) for c in range(4)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths[:3]))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    lines.append("Variables are paired by creation order and shape: trainable ones first, then "
                 "non-trainable model state.")
    return "\n".join(lines)


def write_json(result: ParityResult, path: str | os.PathLike[str]) -> None:
    """Write ``result.to_dict()`` as JSON."""
    Path(path).write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")


def write_plot(result: ParityResult, path: str | os.PathLike[str]) -> None:
    """A PNG: both loss curves, and their absolute difference against the tolerance and, when
    measured, the program's own noise (the envelope) and what it allows."""
    try:
        import matplotlib
    except ImportError as exc:
        from estimator2keras.parity._runner import ParityUsageError

        raise ParityUsageError(f"--plot needs matplotlib: {_INSTALL_HINT}") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows = result.steps
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 6), height_ratios=(3, 2))
    steps = [r.step for r in rows]
    top.plot(steps, [_nan(r.legacy_loss) for r in rows], marker="o", markersize=3, label="legacy (Estimator)")
    top.plot(steps, [_nan(r.migrated_loss) for r in rows], marker="x", markersize=4, linestyle="--",
             label="migrated (Keras)")
    top.set_ylabel("training loss")
    top.legend()
    top.set_title(f"{result.verdict.upper()}: {result.reason}"[:110], fontsize=9)
    diffs = [_nan(r.abs_diff) for r in rows]
    bounds = [r.atol + r.rtol * abs(r.legacy_loss) if r.legacy_loss is not None else math.nan for r in rows]
    bottom.plot(steps, diffs, marker="o", markersize=3, color="tab:red", label="|legacy - migrated|")
    if any(r.envelope is not None for r in rows):
        k = (result.envelope or {}).get("k")
        bottom.plot(steps, [_nan(r.noise) for r in rows], linewidth=0.8, color="tab:blue", alpha=0.5,
                    label="|nudged legacy - legacy| (the program's own noise)")
        bottom.plot(steps, [_nan(r.envelope) for r in rows], color="tab:blue", label="envelope (largest so far)")
        bottom.plot(steps, [_nan(r.allowed) for r in rows], linestyle="--", color="black",
                    label=f"allowed: max(tolerance, {k:g} x envelope)" if k else "allowed")
        bottom.plot(steps, bounds, linestyle=":", color="gray", label="fixed tolerance")
    else:
        bottom.plot(steps, bounds, linestyle=":", color="gray", label="tolerance")
    bottom.set_yscale("symlog", linthresh=1e-9)
    bottom.set_xlabel("training step")
    bottom.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    bottom.set_ylabel("abs difference")
    if result.first_divergent_step is not None:
        for axis in (top, bottom):
            axis.axvline(result.first_divergent_step, color="tab:red", alpha=0.4)
    bottom.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _nan(value: float | None) -> float:
    return math.nan if value is None else value
