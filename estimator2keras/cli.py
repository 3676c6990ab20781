"""e2k: migrate tf.estimator programs to Keras, and prove they train the same.

Exit codes: 0 nothing to do / parity holds; 1 changes made or needed (files rewritten,
leftovers for a human, parity broken); 2 usage or input error (bad path, unparsable file,
a program that could not run).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from estimator2keras import __version__
from estimator2keras._files import InputError
from estimator2keras._registry import RuleLoadError, RuleSet


def _codes(value: str) -> list[str]:
    return [c.strip().upper() for c in value.split(",") if c.strip()]


def _add_rewrite(sub) -> None:
    from estimator2keras._runner import default_jobs

    p = sub.add_parser(
        "rewrite",
        help="convert Estimator programs to Keras (in place, or --diff / --check / --out)",
        description="Convert tf.estimator programs to TF2 Keras. Files with nothing to convert stay byte-identical; "
        "what cannot be converted is left as it was, marked with `# e2k: CODE reason`, and reported.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="Python files or directories (searched recursively)")
    p.add_argument("--diff", action="store_true", help="print a unified diff and write nothing")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change or needs a human")
    p.add_argument("--out", metavar="DIR", type=Path, help="write the results to a mirror tree under DIR; inputs untouched")
    p.add_argument("-j", "--jobs", type=int, default=default_jobs(), metavar="N", help="worker processes (default: all cores)")
    p.add_argument("--report", metavar="FILE", type=Path, help="write a JSON report: per-file status and every finding")
    p.add_argument("--select", type=_codes, default=[], metavar="CODES", help="only these rule codes or prefixes (E2K1,E2K601)")
    p.add_argument("--ignore", type=_codes, default=[], metavar="CODES", help="never these rule codes or prefixes")
    p.add_argument("--rules", action="append", default=[], metavar="MODULE", help="also load the rules in MODULE (repeatable)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="skip paths matching GLOB (repeatable)")
    p.add_argument("-v", "--verbose", action="store_true", help="also list what was converted, not only what was left")
    p.set_defaults(handler=_rewrite)


def _rewrite(args: argparse.Namespace) -> int:
    from estimator2keras._runner import RewriteOptions, run, summary_line, unified_diff, write_report

    if args.jobs < 1:
        print("e2k: error: -j/--jobs must be at least 1", file=sys.stderr)
        return 2
    if args.out and (args.diff or args.check):
        print("e2k: error: --out writes files; it cannot be combined with --diff or --check", file=sys.stderr)
        return 2
    write = not (args.diff or args.check or args.out)
    options = RewriteOptions(
        write=write,
        out_dir=args.out,
        jobs=args.jobs,
        extra_rules=args.rules,
        select=args.select,
        ignore=args.ignore,
        excludes=args.exclude,
    )
    try:
        summary = run(args.paths, options)
    except (InputError, RuleLoadError) as exc:
        print(f"e2k: error: {exc}", file=sys.stderr)
        return 2
    if not summary.results and not summary.interrupted:
        print(f"e2k: error: no Python files found under {', '.join(args.paths)}", file=sys.stderr)
        return 2

    out = sys.stderr if args.diff else sys.stdout
    for result in sorted(summary.results, key=lambda r: r.path):
        if args.diff and result.changed:
            sys.stdout.write(unified_diff(result))
        if result.changed and not args.diff:
            verb = "converted" if write or args.out else "would be converted"
            if result.status == "partial":
                verb = "partially " + verb
            print(f"{result.path}: {verb}", file=out)
        for finding in result.findings:
            if finding.kind != "fixed" or args.verbose:
                print(finding.format(), file=out)
    if args.report:
        write_report(summary, args.report)
    print(summary_line(summary, wrote=write or bool(args.out)), file=sys.stderr)

    if summary.count("error") or summary.interrupted:
        return 2
    if any(r.changed or r.manual for r in summary.results):
        return 1
    return 0


def _add_rules(sub) -> None:
    p = sub.add_parser("rules", help="list the rule catalogue: code, name, kind, safety, summary")
    p.add_argument("--rules", action="append", default=[], metavar="MODULE", help="also load the rules in MODULE")
    p.set_defaults(handler=_rules)


def _rules(args: argparse.Namespace) -> int:
    try:
        rules = RuleSet.load(args.rules)
    except RuleLoadError as exc:
        print(f"e2k: error: {exc}", file=sys.stderr)
        return 2
    rows = [(r.code, r.name, r.kind(), r.safety.value, r.summary) for r in rules.rules.values()]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    return 0


def _add_explain(sub) -> None:
    p = sub.add_parser("explain", help="show one rule's documentation and an example")
    p.add_argument("code", metavar="CODE")
    p.add_argument("--rules", action="append", default=[], metavar="MODULE", help="also load the rules in MODULE")
    p.set_defaults(handler=_explain)


def _explain(args: argparse.Namespace) -> int:
    from estimator2keras._docs import render_text

    try:
        rules = RuleSet.load(args.rules)
    except RuleLoadError as exc:
        print(f"e2k: error: {exc}", file=sys.stderr)
        return 2
    rule = rules.rules.get(args.code.upper())
    if rule is None:
        print(f"e2k: error: no rule {args.code!r} (see `e2k rules`)", file=sys.stderr)
        return 2
    print(render_text(rule), end="")
    return 0


def _add_parity(sub) -> None:
    from estimator2keras.parity import cli as parity_cli

    p = sub.add_parser("parity", help="check that a migrated program trains like the Estimator program")
    parity_cli.add_arguments(p)
    p.set_defaults(handler=parity_cli.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="e2k", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"e2k {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_rewrite(sub)
    _add_parity(sub)
    _add_rules(sub)
    _add_explain(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("e2k: interrupted", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
