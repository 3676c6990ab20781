"""What envelope="when-needed" saves over envelope=True on the fixture-parity tests' own calls:
CPU time of the programs' processes (and wall time), ratios measured in one run.

    python benchmarks/parity_envelope_modes.py                     # 3 fixtures, 2 rounds
    python benchmarks/parity_envelope_modes.py gradient_clipping mnist_cnn --repeat 3 --json out.json

For each fixture and repetition it runs what tests/test_fixture_parity.py runs (the fixture's
parity.toml settings; the newest TensorFlow too when E2K_TARGET_PYTHON names it), once with
each mode, alternating which goes first, so that machine noise hits both alike. CPU time is
the children's user + system time (every side's interpreter; the host's comparison is in
neither), which the other users of a shared machine disturb less than wall time. It prints,
per fixture, the verdicts (they must be the same), whether when-needed ran the envelope,
and the ratio when-needed / eager of the summed CPU and wall times. A measurement, not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from estimator2keras.parity import run_parity_many  # noqa: E402
from estimator2keras.parity._runner import WHEN_NEEDED  # noqa: E402

FIXTURES = REPO / "fixtures"
DEFAULT = ["seed_mirrored_linear", "gradient_clipping", "binary_classifier_metrics"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_fixture(case: str, envelope: bool | str) -> tuple[list[str], bool, float, float]:
    """(verdicts, envelope measured in any result, children's CPU seconds, wall seconds)."""
    from test_fixture_parity import _settings

    settings = _settings(case)
    after = FIXTURES / case / "after.py"
    targets: list = [after]
    newest = os.environ.get("E2K_TARGET_PYTHON")
    if newest and settings.get("newest", True):
        targets.append((after, newest))
    cpu, wall = _children_cpu(), time.perf_counter()
    results = run_parity_many(FIXTURES / case / "before.py", targets, replicas=settings.get("replicas", 2),
                              steps=settings.get("steps"), rtol=settings.get("rtol"), atol=settings.get("atol"),
                              workers=settings.get("workers", 1), envelope=envelope)
    cpu, wall = _children_cpu() - cpu, time.perf_counter() - wall
    return [r.verdict for r in results], any((r.envelope or {}).get("measured") for r in results), cpu, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fixtures", nargs="*", default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    rows, totals = [], {True: [0.0, 0.0], WHEN_NEEDED: [0.0, 0.0]}
    for case in args.fixtures:
        for i in range(args.repeat):
            modes = [True, WHEN_NEEDED] if i % 2 == 0 else [WHEN_NEEDED, True]
            for mode in modes:
                verdicts, measured, cpu, wall = run_fixture(case, mode)
                totals[mode][0] += cpu
                totals[mode][1] += wall
                rows.append({"fixture": case, "mode": str(mode), "verdicts": verdicts, "envelope_run": measured,
                             "cpu_s": round(cpu, 2), "wall_s": round(wall, 2)})
                print(f"{case:40s} {str(mode):12s} {','.join(verdicts):16s} envelope={'run' if measured else 'skipped':8s}"
                      f" cpu {cpu:7.1f} s  wall {wall:6.1f} s", flush=True)
    by_case: dict[str, set] = {}
    for row in rows:
        by_case.setdefault(row["fixture"], set()).add(tuple(row["verdicts"]))
    same = all(len(v) == 1 for v in by_case.values())
    cpu_ratio = totals[WHEN_NEEDED][0] / totals[True][0]
    wall_ratio = totals[WHEN_NEEDED][1] / totals[True][1]
    print(f"verdicts identical in both modes: {same}")
    print(f"when-needed / eager: CPU {cpu_ratio:.3f}  wall {wall_ratio:.3f}  "
          f"(eager CPU {totals[True][0]:.0f} s, when-needed {totals[WHEN_NEEDED][0]:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "cpu_ratio": cpu_ratio, "wall_ratio": wall_ratio,
                                               "verdicts_identical": same}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
