"""Command-line interface: `e2k rewrite`, `e2k parity`, `e2k rules`, `e2k explain`."""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="e2k", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from estimator2keras.parity import cli as parity_cli

    parity = sub.add_parser("parity", help="check that a migrated program trains like the Estimator program")
    parity_cli.add_arguments(parity)
    parity.set_defaults(handler=parity_cli.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
