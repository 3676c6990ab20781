"""`e2k migrate PROGRAM.py`: rewrite an Estimator program, prove the result trains the same, and
write the one Markdown report a reviewer reads in the pull request.

Steps: the program is rewritten (as `e2k rewrite`) to a new file (``--out``, default
``<program>_keras.py`` beside it; the program itself is never touched), the parity harness runs
the program and the new file (as `e2k parity`, with its noise envelope), and the report (default
``<out>_migration.md``, with ``--plot`` beside it) holds the verdict with its envelope, the
TensorFlow/Keras/Python versions on each side, what was converted by which rule, what is left
for a human, the hyper-parameters compared at run time, and the diff.

Exit codes as for `e2k parity`: 0 parity holds, 1 parity broken, or the rewrite left code for a
human (parity is then not run: the new file still needs work), 2 the program could not be
rewritten (no Estimator code, a syntax error) or the comparison could not be made.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXIT_PARITY, EXIT_BROKEN, EXIT_ERROR = 0, 1, 2
DIFF_LINES = 400  # longer diffs are cut in the report (the new file is in the pull request anyway)
STEP_ROWS = 12


@dataclass
class Migration:
    """What `e2k migrate` did: the rewrite, the parity result (None when not run), the files."""

    program: Path
    out: Path
    report_path: Path
    plot_path: Path | None
    status: str  # the rewrite's: converted, partial, unchanged, error
    diff: str
    converted: list[Any] = field(default_factory=list)  # Findings of kind "fixed"
    left: list[Any] = field(default_factory=list)  # Findings of kind "manual" or "error"
    rule_names: dict[str, str] = field(default_factory=dict)
    parity: Any = None  # ParityResult
    reason: str = ""  # why parity was not run
    command: str = ""

    @property
    def exit_code(self) -> int:
        if self.status in ("error", "unchanged"):
            return EXIT_ERROR
        if self.parity is None:
            return EXIT_BROKEN if self.status == "partial" else EXIT_ERROR
        return self.parity.exit_code

    @property
    def verdict(self) -> str:
        if self.parity is not None:
            return self.parity.verdict
        return {"partial": "left for a human", "unchanged": "nothing to migrate"}.get(self.status, "error")


def _rewrite(program: Path, rules: list[str]):
    from estimator2keras._runner import RewriteOptions, run, unified_diff

    summary = run([program], RewriteOptions(write=False, jobs=1, extra_rules=rules))
    if not summary.results:
        raise ValueError(f"{program}: not a Python file e2k reads")
    result = summary.results[0]
    names = {code: getattr(rule, "name", "") for code, rule in summary.rules.items()}
    return result, (unified_diff(result) if result.changed else ""), names


def _write_helpers(result, program: Path, out: Path) -> None:
    """The helpers module the migrated program imports (``_helpers``), beside ``out``: added to
    one e2k wrote there before; never over a module of the program's own."""
    from estimator2keras import _helpers
    from estimator2keras._files import atomic_write

    if not result.helpers:
        return
    target = out.parent / f"{_helpers.module_name(str(program.parent))}.py"
    existing = target.read_text(encoding="utf-8") if target.is_file() else None
    if existing is not None and not _helpers.is_ours(existing):
        raise ValueError(f"{target} is a module of your own, where the migrated program's helpers would go: "
                         "give --out in another directory")
    atomic_write(target, _helpers.render(result.helpers, result.indent, existing, result.limit).encode("utf-8"))


def migrate(program: str | os.PathLike[str], *, out: str | os.PathLike[str] | None = None,
            report: str | os.PathLike[str] | None = None, plot: str | os.PathLike[str] | None = None,
            rules: list[str] | None = None, command: str = "", **parity_options) -> Migration:
    """Rewrite ``program`` to ``out``, run parity on the pair (``parity_options`` go to
    :func:`estimator2keras.parity.run_parity`), write the Markdown report (and the plot) and
    return what was done. Raises ValueError for a program that is not a file."""
    program = Path(program)
    if not program.is_file():
        raise ValueError(f"no such file: {program}")
    out = Path(out) if out is not None else program.with_name(f"{program.stem}_keras.py")
    if out.resolve() == program.resolve():
        raise ValueError(f"--out {out} is the program itself: e2k migrate never overwrites it")
    report_path = Path(report) if report is not None else out.with_name(f"{out.stem}_migration.md")
    plot_path = Path(plot) if plot is not None else None
    result, diff, names = _rewrite(program, list(rules or []))
    migration = Migration(
        program=program, out=out, report_path=report_path, plot_path=plot_path, status=result.status,
        diff=diff, converted=[f for f in result.findings if f.kind == "fixed"],
        left=[f for f in result.findings if f.kind != "fixed"], rule_names=names, command=command)
    if result.status == "error":
        migration.reason = "the program could not be rewritten"
    elif result.status == "unchanged":
        migration.reason = "the program holds no Estimator code that e2k converts"
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        _write_helpers(result, program, out)
        out.write_bytes(result.new)
        if result.status == "partial":
            migration.reason = (f"{len(migration.left)} place(s) left for a human: parity runs once "
                                "they are migrated (e2k parity PROGRAM NEW)")
        else:
            from estimator2keras.parity import run_parity

            migration.parity = run_parity(program, out, **parity_options)
            if plot_path is not None and migration.parity.steps:
                from estimator2keras.parity._report import write_plot

                try:
                    write_plot(migration.parity, plot_path)
                except Exception as exc:  # noqa: BLE001 - no plot is no reason to lose the report
                    migration.plot_path = None
                    migration.reason = f"no plot: {exc}"
            elif plot_path is not None:
                migration.plot_path = None
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(markdown(migration), encoding="utf-8")
    return migration


# -- the report --------------------------------------------------------------------------
def _num(value: Any, spec: str = ".8g") -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _step_rows(steps: list, first: int | None) -> list:
    if len(steps) <= STEP_ROWS:
        return steps
    keep = set(range(5)) | set(range(len(steps) - 3, len(steps)))
    if first is not None:
        keep |= set(range(max(0, first - 3), min(len(steps), first + 2)))
    return [steps[i] for i in sorted(keep)]


def _relative(path: Path, start: Path) -> str:
    try:
        return os.path.relpath(path, start)
    except ValueError:  # another drive
        return str(path)


def markdown(m: Migration) -> str:
    """The migration report, Markdown for a pull request."""
    here = m.report_path.parent
    p = m.parity
    icon = {"parity": "✅", "broken": "❌"}.get(m.verdict, "⚠️")
    lines = [f"# Migration of `{m.program.name}` to Keras", ""]
    headline = p.reason if p is not None else m.reason
    lines += [f"{icon} **{m.verdict.upper()}** (exit {m.exit_code}): {headline}", ""]
    lines += [f"- Estimator program: `{_relative(m.program, here)}`",
              f"- Keras migration: `{_relative(m.out, here)}`"
              + ("" if m.status in ("converted", "partial") else " (not written)"),
              f"- rewrite: {m.status}, {len(m.converted)} conversion(s), {len(m.left)} left for a human", ""]
    if p is not None and (p.legacy is None or p.migrated is None):
        lines += ["## Parity", "", f"The comparison could not be made: {p.reason}", ""]
        if p.detail:
            lines += ["```", p.detail.rstrip(), "```", ""]
        p = None
    if p is not None:
        lines += ["## Parity", ""]
        rows = []
        for label, key in (("program", None), ("TensorFlow", "tensorflow"), ("Keras", "keras"),
                           ("Python", "python"), ("numpy", "numpy")):
            if key is None:
                rows.append([label, f"`{Path(p.legacy.program).name}`", f"`{Path(p.migrated.program).name}`"])
            else:
                rows.append([label, (p.legacy.versions or {}).get(key) or "", (p.migrated.versions or {}).get(key) or ""])
        rows.append(["interpreter", f"`{p.legacy.python}`", f"`{p.migrated.python}`"])
        rows.append(["strategy", f"{p.legacy.strategy or 'none'}, {p.legacy.replicas} replica(s)",
                     f"{p.migrated.strategy or 'none'}, {p.migrated.replicas} replica(s)"])
        rows.append(["training steps", f"{p.legacy.steps} in {_num(p.legacy.seconds, '.1f')} s",
                     f"{p.migrated.steps} in {_num(p.migrated.seconds, '.1f')} s"])
        lines += _table(["", "legacy (Estimator)", "migrated (Keras)"], rows)
        envelope = p.envelope or {}
        if envelope.get("measured"):
            lines += [f"The noise envelope: the Estimator program ran a second time with its "
                      f"{envelope.get('elements', '?')} trainable values nudged by {envelope.get('ulps', '?')} ulps at "
                      f"every step (seed {envelope.get('seed', '?')}); after step {envelope.get('strict_steps')} a "
                      f"step passes within max(tight tolerance, {_num(envelope.get('k'), 'g')} x envelope), steps 1 to "
                      f"{envelope.get('strict_steps')} within max(tight tolerance, envelope) (docs/parity.md).", ""]
        elif envelope:
            lines += [f"No noise envelope: {envelope.get('reason')}; judged by the fixed tolerance.", ""]
        if m.plot_path is not None:
            lines += [f"![loss curves and their difference against the envelope]({_relative(m.plot_path, here)})", ""]
        if p.steps:
            shown = _step_rows(p.steps, p.first_divergent_step)
            lines += [f"### Steps ({len(p.steps)}" + ("" if len(shown) == len(p.steps) else
                      "; the first 5, around the first divergence, the last 3") + ")", ""]
            table = [[r.step, _num(r.legacy_loss), _num(r.migrated_loss), _num(r.abs_diff, ".3g"),
                      _num(r.envelope, ".3g"), _num(r.allowed, ".3g"),
                      ("ok (within noise)" if r.within_noise_only else "ok") if r.passed
                      else ("**FAIL** (first divergence)" if r.step == p.first_divergent_step else "FAIL")]
                     for r in shown]
            lines += _table(["step", "legacy loss", "migrated loss", "abs diff", "envelope", "allowed", "result"], table)
        if p.weights:
            worst = p.weights_by_difference()[:5]
            lines += ["### Final weights (most different first)", ""]
            lines += _table(["variable", "shape", "max abs diff", "envelope", "result"],
                            [[r.legacy_name, "x".join(map(str, r.shape)) or "scalar", _num(r.max_abs_diff, ".3g"),
                              _num(r.envelope, ".3g"), "ok" if r.passed else "**FAIL**"] for r in worst])
        if p.metrics:
            lines += ["### Evaluation metrics (last evaluation)", ""]
            lines += _table(["metric", "legacy", "migrated", "abs diff", "envelope", "allowed", "result"],
                            [[r.name, _num(r.legacy), _num(r.migrated), _num(r.abs_diff, ".3g"), _num(r.envelope, ".3g"),
                              _num(r.allowed, ".3g"),
                              _metric_result(r)]
                             for r in p.metrics])
        if p.hyperparameters:
            lines += ["### Hyper-parameters read from both programs at run time", ""]
            lines += _table(["hyper-parameter", "legacy", "migrated", "result"],
                            [[r.name, r.legacy, r.migrated,
                              ("ok" if r.passed else "**FAIL**" if r.passed is False else "not compared")
                              + (f" ({r.note})" if r.note else "")] for r in p.hyperparameters])
        for title, items in (("Warnings", p.warnings), ("Hints", p.hints),
                             ("Notes", list(p.notes) + list(p.legacy.notes) + list(p.migrated.notes))):
            if items:
                lines += [f"### {title}", ""] + [f"- {item}" for item in items] + [""]
        if p.detail:
            lines += ["### Detail", "", "```", p.detail.rstrip(), "```", ""]
    lines += ["## What e2k converted", ""]
    if m.converted:
        lines += _table(["line", "rule", "what"],
                        [[f.line, f"{f.code} {m.rule_names.get(f.code, '')}".strip(), f.message]
                         for f in sorted(m.converted, key=lambda f: (f.line, f.col))])
    else:
        lines += ["Nothing.", ""]
    lines += ["## Left for a human", ""]
    if m.left:
        lines += _table(["line", "rule", "why"],
                        [[f.line, f"{f.code} {m.rule_names.get(f.code, '')}".strip(), f.message] for f in m.left])
    else:
        lines += ["Nothing: the file converted fully.", ""]
    if m.diff:
        diff_lines = m.diff.splitlines()
        cut = len(diff_lines) > DIFF_LINES
        lines += ["## The diff", "", "<details><summary>" + f"{len(diff_lines)} lines" + "</summary>", "",
                  "```diff"] + diff_lines[:DIFF_LINES] + ["```", ""]
        if cut:
            lines += [f"({len(diff_lines) - DIFF_LINES} more lines: see `{_relative(m.out, here)}`)", ""]
        lines += ["</details>", ""]
    lines += ["## Reproduce", "", "```sh"]
    lines += [m.command or f"e2k migrate {shlex.quote(str(m.program))} --out {shlex.quote(str(m.out))}"]
    if m.status in ("converted", "partial"):
        lines += [f"e2k parity {shlex.quote(str(m.program))} {shlex.quote(str(m.out))}"]
    lines += ["```", ""]
    return "\n".join(lines)


# -- the command line --------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Rewrite an Estimator program to Keras (to a new file), run e2k parity on the pair, and write one "
        "Markdown migration report for a pull request: the verdict with its noise envelope, the versions on "
        "each side, what was converted by which rule, what is left for a human, and the diff. "
        "Exit 0: parity holds; 1: parity broken, or code left for a human; 2: could not rewrite or compare.")
    parser.add_argument("program", metavar="PROGRAM.py", help="the tf.estimator program (never modified)")
    parser.add_argument("--out", metavar="NEW.py", help="the Keras migration (default: PROGRAM_keras.py beside it)")
    parser.add_argument("--report", metavar="REPORT.md", help="the Markdown report (default: NEW_migration.md)")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="the loss curves and their difference against the envelope (default: NEW_parity.png; "
                             "--no-plot for none)")
    parser.add_argument("--no-plot", action="store_true", help="write no plot")
    parser.add_argument("--json", metavar="FILE", help="also write the parity result as JSON")
    parser.add_argument("--rules", action="append", default=[], metavar="MODULE",
                        help="also load the rules in MODULE (repeatable), as e2k rewrite --rules")
    parser.add_argument("--replicas", type=int, default=2, metavar="N", help="MirroredStrategy replicas (default: 2)")
    parser.add_argument("--steps", type=int, default=None, metavar="K", help="stop both programs after K steps")
    parser.add_argument("--no-envelope", action="store_true", help="judge by the fixed tolerance (no second run)")
    parser.add_argument("--legacy-python", metavar="PATH", help="interpreter with TF 2.15 + tensorflow-estimator")
    parser.add_argument("--target-python", metavar="PATH", help="interpreter for the migration (e.g. the newest TF)")
    parser.add_argument("--seed", type=int, default=0, help="seed on both sides (default: 0)")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                        help="time limit for each program (default: 600)")


def run(args: argparse.Namespace) -> int:
    from estimator2keras.parity import ParityUsageError

    out = args.out
    plot = None
    if not args.no_plot:
        base = Path(out) if out else Path(args.program).with_name(f"{Path(args.program).stem}_keras.py")
        plot = args.plot or str(base.with_name(f"{base.stem}_parity.png"))
    command = "e2k migrate " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else ""
    try:
        migration = migrate(
            args.program, out=out, report=args.report, plot=plot, rules=args.rules, command=command,
            replicas=args.replicas, steps=args.steps, envelope=not args.no_envelope,
            legacy_python=args.legacy_python, target_python=args.target_python, seed=args.seed,
            timeout=args.timeout)
    except (ValueError, ParityUsageError) as exc:
        print(f"e2k migrate: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("e2k migrate: interrupted", file=sys.stderr)
        return EXIT_ERROR
    if args.json and migration.parity is not None:
        from estimator2keras.parity._report import write_json

        write_json(migration.parity, args.json)
    wrote = f"{migration.out}, " if migration.status in ("converted", "partial") else ""
    print(f"e2k migrate: {migration.verdict.upper()}: "
          f"{migration.parity.reason if migration.parity is not None else migration.reason}", file=sys.stderr)
    print(f"e2k migrate: wrote {wrote}{migration.report_path}"
          + (f", {migration.plot_path}" if migration.plot_path is not None and migration.plot_path.exists() else ""),
          file=sys.stderr)
    return migration.exit_code


def _metric_result(row) -> str:
    """A metric row's result cell: why it is not compared, or why it fails without a number."""
    if row.passed is None:
        return f"not compared ({row.note or 'one side only'})"
    if row.passed:
        return "ok"
    return f"**FAIL** ({row.note})" if row.migrated is None and row.note else "**FAIL**"
