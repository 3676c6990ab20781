"""What `e2k parity` costs over running the two programs plainly, and what its noise envelope
(a second, nudged legacy run alongside) costs over the harness without it: ratios measured in
one run.

    python benchmarks/parity_overhead.py                       # the canonical fixture, 2 replicas
    python benchmarks/parity_overhead.py LEGACY.py MIGRATED.py --repeat 5 --json out.json

For each repetition (interleaved, so that machine noise hits both alike) it times:

* plain:  `python LEGACY.py` then `python MIGRATED.py`, one after the other, in the same
          environment the harness gives them (PYTHONHASHSEED, TF_CPP_MIN_LOG_LEVEL, ...);
* parity without the envelope: `run_parity(LEGACY.py, MIGRATED.py, envelope=False)` — both
          programs instrumented, initial weights copied, losses/weights/metrics compared
          (the harness before the envelope);
* parity: `run_parity(LEGACY.py, MIGRATED.py)` — the same, plus the envelope run of the
          legacy program with nudged weights, started alongside the legacy run.

It prints the median of each, the ratios parity / plain and parity / parity without the
envelope (the envelope's cost: issue 13 allows at most 1.6x), and where the harness's time
goes (legacy side, migrated side, the rest on the host). This is a measurement, not a test:
nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from estimator2keras.parity import run_parity
from estimator2keras.parity._runner import child_environment, resolve_python

REPO = Path(__file__).resolve().parent.parent
CANONICAL = REPO / "fixtures" / "seed_mirrored_linear"


def time_plain(program: Path, python: str, env: dict[str, str]) -> float:
    """Wall time of `python PROGRAM` run from its directory, output discarded."""
    started = time.perf_counter()
    done = subprocess.run([python, str(program)], cwd=program.parent, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{program} failed when run plainly:\n{done.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("legacy", nargs="?", default=str(CANONICAL / "before.py"))
    parser.add_argument("migrated", nargs="?", default=str(CANONICAL / "after.py"))
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--legacy-python")
    parser.add_argument("--target-python")
    parser.add_argument("--json", metavar="FILE", help="also write the measurements as JSON")
    args = parser.parse_args(argv)

    legacy, migrated = Path(args.legacy).resolve(), Path(args.migrated).resolve()
    legacy_python, target_python = resolve_python(args.legacy_python), resolve_python(args.target_python)
    env = child_environment(0)
    plain, bare, harness, sides = [], [], [], []

    def timed_parity(envelope: bool):
        started = time.perf_counter()
        result = run_parity(legacy, migrated, replicas=args.replicas, legacy_python=legacy_python,
                            target_python=target_python, envelope=envelope)
        elapsed = time.perf_counter() - started
        if result.verdict == "error":
            raise SystemExit(f"parity could not run: {result.reason}\n{result.detail or ''}")
        return elapsed, result

    for i in range(args.repeat):
        plain.append(time_plain(legacy, legacy_python, env) + time_plain(migrated, target_python, env))
        elapsed, _ = timed_parity(False)
        bare.append(elapsed)
        elapsed, result = timed_parity(True)
        harness.append(elapsed)
        sides.append((result.legacy.seconds, result.migrated.seconds))
        print(f"run {i + 1}/{args.repeat}: plain {plain[-1]:.2f} s, parity without envelope {bare[-1]:.2f} s, "
              f"parity {harness[-1]:.2f} s ({result.verdict})", file=sys.stderr)

    plain_s, bare_s, harness_s = statistics.median(plain), statistics.median(bare), statistics.median(harness)
    legacy_s = statistics.median(s[0] for s in sides)
    migrated_s = statistics.median(s[1] for s in sides)
    # per repetition, so that each ratio compares runs made under the same machine load
    ratios = [h / p for h, p in zip(harness, plain)]
    envelope_ratios = [h / b for h, b in zip(harness, bare)]
    host = [h - s[0] - s[1] for h, s in zip(harness, sides)]
    report = {
        "legacy": str(legacy), "migrated": str(migrated), "replicas": args.replicas, "repeat": args.repeat,
        "plain_seconds": plain, "parity_no_envelope_seconds": bare, "parity_seconds": harness,
        "ratios": ratios, "envelope_ratios": envelope_ratios,
        "plain_median_s": plain_s, "parity_no_envelope_median_s": bare_s, "parity_median_s": harness_s,
        "overhead_ratio": statistics.median(ratios), "envelope_ratio": statistics.median(envelope_ratios),
        "parity_legacy_side_median_s": legacy_s, "parity_migrated_side_median_s": migrated_s,
        "parity_host_median_s": statistics.median(host),
    }
    print(f"programs run plainly:        {plain_s:6.2f} s  (median of {args.repeat}, legacy then migrated)")
    print(f"e2k parity --no-envelope:    {bare_s:6.2f} s")
    print(f"e2k parity:                  {harness_s:6.2f} s  (legacy side {legacy_s:.2f} s, migrated side "
          f"{migrated_s:.2f} s, host {report['parity_host_median_s']:.2f} s; the envelope run alongside the legacy one)")
    print(f"overhead ratio:              {report['overhead_ratio']:6.2f}x  parity / plain (median of the per-run "
          f"ratios {', '.join(f'{r:.2f}' for r in ratios)})")
    print(f"envelope ratio:              {report['envelope_ratio']:6.2f}x  parity / parity --no-envelope (median of "
          f"{', '.join(f'{r:.2f}' for r in envelope_ratios)}; issue 13 allows 1.6x)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
