"""Measure how the noise envelope separates correct migrations from wrong ones: the numbers
behind the envelope's k (docs/parity.md, "The noise envelope").

    python -m estimator2keras.parity.calibrate LEGACY.py CORRECT.py [CORRECT2.py ...] \\
        --wrong WRONG.py [--wrong ...] --seeds 6 [--replicas 2] [--ulps 16] [--json out.json]

The legacy program runs once; its envelope run (weights nudged by ``--ulps`` ulps at every
step) runs once per envelope seed 1..``--seeds``; each correct and each wrong migration runs
once. Then, for each envelope seed:

* **k needed** by each correct migration: the largest ``|legacy - migrated| / envelope`` over
  the steps after the strict ones where the difference exceeds the fixed tight tolerance (0
  when it never does). A k at least this large passes it.
* **ratio at the catch** of each wrong migration: ``|legacy - migrated| / envelope`` at the
  first step where the difference exceeds the tight tolerance, and whether that step is one
  of the strict ones. A k below this ratio catches it there even without the strict steps.

A k between the largest "k needed" and the smallest "ratio at the catch" separates the two;
the report prints both, over all seeds. Runs sequentially; expect (2 + seeds + migrations)
program runs.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from estimator2keras.parity._compare import legacy_losses_on_keras_scale, noise_envelope
from estimator2keras.parity._result import Tolerance
from estimator2keras.parity._runner import (
    SideRun,
    child_environment,
    resolve_python,
    run_parity_many,
    run_side,
)


def _ratios(legacy: list[float], migrated: list[float], envelope: list[float], tolerance: Tolerance) -> dict[str, Any]:
    """k needed (max ratio where the tight tolerance fails, after the strict steps) and the
    first step beyond the tight tolerance with its ratio."""
    needed, first = 0.0, None
    for i, (a, b) in enumerate(zip(legacy, migrated)):
        step = i + 1
        diff = abs(a - b)
        if not math.isfinite(diff):
            diff = math.inf
        if diff <= tolerance.tight_atol + tolerance.tight_rtol * abs(a):
            continue
        ratio = diff / envelope[i] if envelope[i] > 0 else math.inf
        if first is None:
            first = {"step": step, "diff": diff, "envelope": envelope[i], "ratio": ratio,
                     "strict": step <= tolerance.strict_steps}
        if step > tolerance.strict_steps:
            needed = max(needed, ratio)
    return {"k_needed": needed, "first_beyond_tolerance": first, "steps": len(legacy)}


def calibrate(legacy: Path, correct: list[Path], wrong: list[Path], *, seeds: int, replicas: int, ulps: int,
              steps: int | None, legacy_python: str, target_python: str, workdir: Path) -> dict[str, Any]:
    tolerance = Tolerance(envelope_ulps=ulps)
    programs = correct + wrong
    results = run_parity_many(legacy, programs, replicas=replicas, steps=steps, legacy_python=legacy_python,
                              target_python=target_python, envelope=False, workdir=workdir / "runs")
    for path, result in zip(programs, results):
        if result.verdict == "error":
            raise SystemExit(f"{path}: {result.reason}\n{result.detail or ''}")
    legacy_losses = [row.legacy_loss for row in results[0].steps]
    env = child_environment(0)
    request = {"replicas": replicas, "workers": 1, "steps": steps, "seed": 0, "neutralize_shuffle": True,
               "neutralize_dropout": True, "op_determinism": True}
    report: dict[str, Any] = {"legacy": str(legacy), "replicas": replicas, "ulps": ulps, "seeds": [],
                              "strict_steps": tolerance.strict_steps}
    for seed in range(1, seeds + 1):
        run = run_side(SideRun("legacy", legacy, legacy_python, workdir / f"envelope_{seed}"),
                       {**request, "perturb": {"seed": seed, "ulps": ulps}}, 3600, env)
        if not run.ok:
            raise SystemExit(f"envelope run {seed} failed: {run.status} {run.result.get('error')}")
        nudged = legacy_losses_on_keras_scale(run.result)[0]
        _, envelope = noise_envelope(legacy_losses, nudged)
        entry = {"seed": seed, "final_envelope": envelope[-1], "programs": {}}
        for path, result in zip(programs, results):
            migrated = [row.migrated_loss for row in result.steps]
            entry["programs"][path.name if path in correct else f"wrong/{path.name}"] = {
                "correct": path in correct, **_ratios(legacy_losses, migrated, envelope, tolerance)}
        report["seeds"].append(entry)
        print(f"envelope seed {seed}: final envelope {envelope[-1]:.3g}", file=sys.stderr, flush=True)
    needed = [p["k_needed"] for s in report["seeds"] for p in s["programs"].values() if p["correct"]]
    catches = [p["first_beyond_tolerance"]["ratio"] for s in report["seeds"] for p in s["programs"].values()
               if not p["correct"] and p["first_beyond_tolerance"]]
    report["largest_k_needed_by_a_correct_migration"] = max(needed, default=0.0)
    report["smallest_ratio_at_a_wrong_migrations_catch"] = min(catches, default=math.inf)
    return report


def print_report(report: dict[str, Any]) -> None:
    names = list(report["seeds"][0]["programs"]) if report["seeds"] else []
    print(f"{report['legacy']}: {report['replicas']} replicas, envelope {report['ulps']} ulps per step, "
          f"{len(report['seeds'])} envelope seeds")
    print(f"{'migration':34} {'k needed (correct) / ratio at first step beyond the tight tolerance (wrong)':>20}")
    for name in names:
        cells = []
        for entry in report["seeds"]:
            item = entry["programs"][name]
            if item["correct"]:
                cells.append(f"{item['k_needed']:.3g}")
            else:
                first = item["first_beyond_tolerance"]
                cells.append("never" if first is None else
                             f"{first['ratio']:.3g}@{first['step']}{'*' if first['strict'] else ''}")
        print(f"{name:34} " + "  ".join(f"{c:>10}" for c in cells))
    print("(* = a strict step, judged by max(tight tolerance, 1 x envelope))")
    print(f"largest k needed by a correct migration:      {report['largest_k_needed_by_a_correct_migration']:.3g}")
    print(f"smallest ratio at a wrong migration's catch:  {report['smallest_ratio_at_a_wrong_migrations_catch']:.3g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("legacy")
    parser.add_argument("correct", nargs="+")
    parser.add_argument("--wrong", action="append", default=[])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--ulps", type=int, default=Tolerance().envelope_ulps)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--legacy-python")
    parser.add_argument("--target-python")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    import tempfile

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="e2k-calibrate-")).resolve()
    report = calibrate(
        Path(args.legacy).resolve(), [Path(p).resolve() for p in args.correct], [Path(p).resolve() for p in args.wrong],
        seeds=args.seeds, replicas=args.replicas, ulps=args.ulps, steps=args.steps,
        legacy_python=resolve_python(args.legacy_python), target_python=resolve_python(args.target_python),
        workdir=workdir)
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
