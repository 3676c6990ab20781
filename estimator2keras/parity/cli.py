"""`e2k parity LEGACY.py MIGRATED.py`: the command line of the parity harness.

Exit codes: 0 parity holds, 1 parity broken, 2 could not run (the reason is printed).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from estimator2keras.parity._result import EXIT_ERROR, Tolerance
from estimator2keras.parity._runner import DEFAULT_TIMEOUT, ParityUsageError, run_parity

_DEFAULTS = Tolerance()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `e2k parity` on ``parser``."""
    parser.description = (
        "Run an Estimator program and its Keras migration, each unchanged in its own interpreter, "
        "under MirroredStrategy with N replicas from the same initial weights, and compare the loss "
        "of every training step, the final weights and the evaluation metrics. "
        "Exit 0: parity holds; 1: parity broken; 2: could not run.")
    parser.add_argument("legacy", metavar="LEGACY.py", help="the tf.estimator program")
    parser.add_argument("migrated", metavar="MIGRATED.py", help="its Keras migration")
    parser.add_argument("--replicas", type=int, default=2, metavar="N",
                        help="MirroredStrategy replicas on both sides (default: 2; virtual CPUs unless "
                             "N GPUs are present)")
    parser.add_argument("--workers", type=int, default=1, metavar="W",
                        help="run each program as a W-worker job on this machine (TF_CONFIG on loopback "
                             "ports, --replicas per worker) and compare the chief's training (default: 1)")
    parser.add_argument("--steps", type=int, default=None, metavar="K",
                        help="stop both programs after K training steps")
    parser.add_argument("--rtol", type=float, default=None, metavar="R",
                        help=f"relative tolerance for every step (default: {_DEFAULTS.tight_rtol:g}, widened by the "
                             f"program's own noise after step {_DEFAULTS.strict_steps}; with --no-envelope "
                             f"{_DEFAULTS.loose_rtol:g} after step {_DEFAULTS.tight_steps})")
    parser.add_argument("--atol", type=float, default=None, metavar="A",
                        help=f"absolute tolerance for every step (default: {_DEFAULTS.tight_atol:g})")
    parser.add_argument("--no-envelope", action="store_true",
                        help="do not measure the program's own numerical noise (a second, nudged legacy run "
                             "alongside): judge every step by the fixed tolerance")
    parser.add_argument("--envelope-k", type=float, default=None, metavar="K",
                        help=f"after step {_DEFAULTS.strict_steps}, a loss may differ by K times the program's "
                             f"own noise (default: {_DEFAULTS.envelope_k:g}; docs/parity.md says why)")
    parser.add_argument("--json", metavar="FILE", help="write the full result as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="write both loss curves and their difference")
    parser.add_argument("--legacy-python", metavar="PATH",
                        help="interpreter with TF 2.15 + tensorflow-estimator (default: this one)")
    parser.add_argument("--target-python", metavar="PATH",
                        help="interpreter for the migrated program, e.g. the newest TF (default: this one)")
    parser.add_argument("--seed", type=int, default=0, help="seed for Python, numpy and TF on both sides (default: 0)")
    parser.add_argument("--keep-shuffle", action="store_true",
                        help="do not neutralise Dataset.shuffle (TF1 and TF2 shuffles differ: expect divergence)")
    parser.add_argument("--keep-dropout", action="store_true",
                        help="do not neutralise dropout (TF1 and TF2 random streams differ: expect divergence)")
    parser.add_argument("--no-op-determinism", action="store_true",
                        help="do not call tf.config.experimental.enable_op_determinism() on either side")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"time limit for each program (default: {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--workdir", metavar="DIR",
                        help="keep the runs' files (requests, logs, results, weights) in DIR")
    parser.add_argument("--from-checkpoint", metavar="OLD_DIR",
                        help="resume both programs from this Estimator model_dir (the migrated one from it "
                             "converted by `e2k checkpoint`) and compare the steps left")
    parser.add_argument("--args", default="", metavar="ARGS",
                        help="command-line arguments both programs get, as a shell would split them "
                             "(e.g. --args '--job-dir /tmp/run --train-steps 100')")
    parser.add_argument("--max-rows", type=int, default=40, metavar="N",
                        help="longest step table printed in full (default: 40)")


def run(args: argparse.Namespace) -> int:
    """Run `e2k parity` with parsed ``args``; returns the exit code."""
    for label, path in (("LEGACY.py", args.legacy), ("MIGRATED.py", args.migrated)):
        if not os.path.isfile(path):
            print(f"e2k parity: {label}: no such file: {path}", file=sys.stderr)
            return EXIT_ERROR
        if path.endswith(".ipynb"):
            # A notebook is cells a kernel runs in the order a person chose: parity runs a script.
            print(f"e2k parity: {label}: {path} is a notebook; parity runs Python programs: export each notebook's "
                  "code in the order its cells run (`jupyter nbconvert --to script NOTEBOOK.ipynb`, dropping the "
                  "`!` and `%` lines) and compare those", file=sys.stderr)
            return EXIT_ERROR
    try:
        import shlex

        program_args = shlex.split(args.args)
    except ValueError as exc:
        print(f"e2k parity: --args: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        from estimator2keras.parity._report import print_report, require_rich, write_json, write_plot

        require_rich()  # before minutes of training, not after
        tolerance = None
        if args.envelope_k is not None:
            if not args.envelope_k > 0:
                raise ParityUsageError(f"--envelope-k must be positive, got {args.envelope_k:g}")
            tolerance = dataclasses.replace(_DEFAULTS, envelope_k=args.envelope_k)
        result = run_parity(
            args.legacy, args.migrated, tolerance=tolerance, envelope=not args.no_envelope,
            replicas=args.replicas, steps=args.steps, rtol=args.rtol, atol=args.atol,
            legacy_python=args.legacy_python, target_python=args.target_python, seed=args.seed,
            keep_shuffle=args.keep_shuffle, keep_dropout=args.keep_dropout,
            op_determinism=not args.no_op_determinism, timeout=args.timeout, workdir=args.workdir,
            workers=args.workers, from_checkpoint=args.from_checkpoint, args=program_args)
        if args.json:
            write_json(result, args.json)
        if args.plot:
            if result.steps:
                write_plot(result, args.plot)
            else:
                print(f"e2k parity: no plot written ({args.plot}): no training step to plot", file=sys.stderr)
        print_report(result, max_rows=args.max_rows)
        return result.exit_code
    except ParityUsageError as exc:
        print(f"e2k parity: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:  # e.g. --json into a directory that does not exist
        print(f"e2k parity: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("e2k parity: interrupted", file=sys.stderr)
        return EXIT_ERROR
