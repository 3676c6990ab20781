"""What forking each side run from a warm interpreter (estimator2keras/parity/_preload.py)
saves over starting a fresh one per run, on the fixture-parity tests' own calls.

    python benchmarks/parity_preload.py                        # 4 fixtures, 2 rounds
    python benchmarks/parity_preload.py mnist_cnn early_stopping --repeat 3

Each round runs the fixtures one after the other as tests/test_fixture_parity.py does (the
newest TensorFlow too when E2K_TARGET_PYTHON names it), once with E2K_PARITY_PRELOAD=0 and
once with the servers (started by the round's first run, stopped at its end: their start is
counted), alternating which mode goes first so that machine noise hits both alike. Wall time:
the forked runs are the servers' children, not this process's, so their CPU time is not
measurable from here. Prints each mode's seconds per round, the verdicts (they must be the
same) and the ratio preload / fresh. A measurement, not a test.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

sys.path.insert(0, str(REPO / "benchmarks"))

from estimator2keras.parity import _preload  # noqa: E402
from estimator2keras.parity._runner import WHEN_NEEDED  # noqa: E402
from parity_envelope_modes import run_fixture  # noqa: E402

DEFAULT = ["seed_mirrored_linear", "gradient_clipping", "binary_classifier_metrics", "mnist_cnn"]


def run_round(cases: list[str], preload: bool) -> tuple[list[str], float]:
    os.environ["E2K_PARITY_PRELOAD"] = "1" if preload else "0"
    verdicts, started = [], time.perf_counter()
    try:
        for case in cases:  # what tests/test_fixture_parity.py runs, as parity_envelope_modes.py does
            verdicts += [f"{case}:{verdict}" for verdict in run_fixture(case, WHEN_NEEDED)[0]]
    finally:
        _preload.shutdown()
    return verdicts, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fixtures", nargs="*", default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    totals = {True: 0.0, False: 0.0}
    for round_ in range(args.repeat):
        for preload in ((True, False) if round_ % 2 == 0 else (False, True)):
            verdicts, seconds = run_round(args.fixtures, preload)
            totals[preload] += seconds
            print(f"round {round_ + 1} {'preload' if preload else 'fresh  '}: {seconds:7.1f} s  {' '.join(verdicts)}",
                  flush=True)
    print(f"preload / fresh wall time: {totals[True] / totals[False]:.2f} "
          f"({totals[True]:.1f} s / {totals[False]:.1f} s over {args.repeat} rounds of {len(args.fixtures)} fixtures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
