"""`e2k checkpoint LEGACY.py MIGRATED.py --model-dir OLD --out NEW`: the command line.

Exit codes: 0 written, 1 refused (nothing written), 2 could not run (nothing written).
"""
from __future__ import annotations

import argparse
import sys

from estimator2keras.checkpoint._convert import DEFAULT_RTOL, EXIT_ERROR, convert_checkpoint
from estimator2keras.parity._runner import DEFAULT_TIMEOUT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Carry an Estimator's trained model_dir over to its Keras migration: map the latest checkpoint's "
        "weights, optimizer slots, global step and batch-norm statistics onto the migrated model, write a "
        "checkpoint the migrated program restores from its model_dir (and a weights file for load_weights), "
        "and prove it by both restored models' predictions. "
        "Exit 0: written; 1: refused (nothing written); 2: could not run (nothing written).")
    parser.add_argument("legacy", metavar="LEGACY.py", help="the tf.estimator program that trained MODEL_DIR")
    parser.add_argument("migrated", metavar="MIGRATED.py", help="its Keras migration")
    parser.add_argument("--model-dir", required=True, metavar="OLD_DIR", help="the Estimator's model_dir")
    parser.add_argument("--out", required=True, metavar="NEW_DIR", help="where to write the Keras checkpoint")
    parser.add_argument("--force", action="store_true", help="replace a checkpoint already in NEW_DIR")
    parser.add_argument("--rtol", type=float, default=DEFAULT_RTOL, metavar="R",
                        help=f"largest relative difference of the predictions (default: {DEFAULT_RTOL:g})")
    parser.add_argument("--replicas", type=int, default=2, metavar="N",
                        help="MirroredStrategy replicas both programs are built with (default: 2)")
    parser.add_argument("--legacy-python", metavar="PATH",
                        help="interpreter with TF 2.15 + tensorflow-estimator (default: this one)")
    parser.add_argument("--target-python", metavar="PATH",
                        help="interpreter for the migrated program, e.g. the newest TF (default: this one)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"time limit for each program (default: {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--workdir", metavar="DIR", help="keep the runs' files (requests, logs, results) in DIR")
    parser.add_argument("--args", default="", metavar="ARGS",
                        help="command-line arguments both programs get, as a shell would split them")


def run(args: argparse.Namespace) -> int:
    if args.replicas < 1:
        print(f"e2k checkpoint: --replicas must be at least 1, got {args.replicas}", file=sys.stderr)
        return EXIT_ERROR
    if not args.rtol >= 0:
        print(f"e2k checkpoint: --rtol must be a number >= 0, got {args.rtol}", file=sys.stderr)
        return EXIT_ERROR
    try:
        import shlex

        program_args = shlex.split(args.args)
    except ValueError as exc:
        print(f"e2k checkpoint: --args: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        result = convert_checkpoint(
            args.legacy, args.migrated, args.model_dir, args.out, legacy_python=args.legacy_python,
            target_python=args.target_python, force=args.force, replicas=args.replicas, rtol=args.rtol,
            timeout=args.timeout, workdir=args.workdir, args=program_args)
    except KeyboardInterrupt:
        print("e2k checkpoint: interrupted, nothing written", file=sys.stderr)
        return EXIT_ERROR
    if result.verdict == "error" and not result.mapping and not result.detail:
        print(f"e2k checkpoint: {result.reason}", file=sys.stderr)  # bad input: one clear line
    else:
        print(result.report(), file=sys.stdout if result.verdict == "written" else sys.stderr)
    return result.exit_code
