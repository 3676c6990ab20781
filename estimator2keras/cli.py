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
    p.add_argument("--report", metavar="FILE", type=Path, help="write the report (--format, default json) to FILE")
    p.add_argument(
        "--format",
        choices=("human", "json", "sarif"),
        help="report format: human lines (default), or a json / sarif document on stdout (or in --report FILE)",
    )
    p.add_argument("--select", type=_codes, default=[], metavar="CODES", help="only these rule codes or prefixes (E2K1,E2K601)")
    p.add_argument("--ignore", type=_codes, default=[], metavar="CODES", help="never these rule codes or prefixes")
    p.add_argument("--rules", action="append", default=[], metavar="MODULE", help="also load the rules in MODULE (repeatable)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="skip paths matching GLOB (repeatable)")
    p.add_argument("-v", "--verbose", action="store_true", help="also list what was converted, not only what was left")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line and no progress bar (for hooks)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour the human output (default: auto)")
    p.add_argument("--isolated", action="store_true", help="ignore [tool.e2k] configuration in pyproject.toml files")
    p.add_argument("--target", choices=["tensorflow", "jax"], default=None,
                   help="the Keras to write: on TensorFlow with tf.distribute (default), or Keras 3 on JAX "
                        "with keras.distribution")
    p.set_defaults(handler=_rewrite)


def _rewrite(args: argparse.Namespace) -> int:
    import json

    from estimator2keras._config import ConfigError
    from estimator2keras._output import Style, use_color, write_coverage, write_human
    from estimator2keras._progress import Progress
    from estimator2keras._runner import RewriteOptions, run, summary_line, unified_diff
    from estimator2keras._sarif import sarif_log

    if args.jobs < 1:
        print("e2k: error: -j/--jobs must be at least 1", file=sys.stderr)
        return 2
    if args.out and (args.diff or args.check):
        print("e2k: error: --out writes files; it cannot be combined with --diff or --check", file=sys.stderr)
        return 2
    report_format = args.format or ("json" if args.report else "human")
    if args.report and report_format == "human":
        print("e2k: error: --report writes a json or sarif document; use --format json or --format sarif", file=sys.stderr)
        return 2
    if args.diff and report_format != "human" and not args.report:
        print(f"e2k: error: --diff prints the diff on stdout; write the {report_format} report with --report FILE", file=sys.stderr)
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
        isolated=args.isolated,
        target=args.target,
    )
    progress = Progress(sys.stderr, enabled=not args.quiet)
    try:
        summary = run(args.paths, options, on_result=progress.advance, on_start=progress.start)
    except (InputError, RuleLoadError, ConfigError) as exc:
        print(f"e2k: error: {exc}", file=sys.stderr)
        return 2
    finally:
        progress.close()
    if not summary.results and not summary.interrupted:
        if summary.excluded:
            if not args.quiet:
                print("e2k: every file found is excluded by [tool.e2k] exclude", file=sys.stderr)
            return 0
        print(f"e2k: error: no Python files found (.py, .ipynb) under {', '.join(args.paths)}", file=sys.stderr)
        return 2

    document = None
    if report_format == "json":
        document = summary.to_dict()
    elif report_format == "sarif":
        document = sarif_log(summary.results, summary.rules, successful=not summary.interrupted)
    if document is not None and args.report:
        Path(args.report).write_text(json.dumps(document, indent=2) + "\n")
    elif document is not None:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")

    if args.diff:
        for result in sorted(summary.results, key=lambda r: r.path):
            if result.changed:
                sys.stdout.write(unified_diff(result))
        for _, module in sorted(summary.helper_modules.items()):
            sys.stdout.write(module.diff())
    if document is None or args.report:
        out = sys.stderr if args.diff else sys.stdout
        verb = "converted" if write or args.out else "would be converted"
        style = Style(use_color(args.color, out))
        write_human(summary.results, out, verbose=args.verbose, verb=verb, style=style)
        for _, module in sorted(summary.helper_modules.items()):
            if module.text != (module.original or ""):
                done = ("written" if module.original is None else "added to") if write or args.out else \
                    ("would be written" if module.original is None else "would be added to")
                count = len(module.files)
                print(f"{style('path', module.path)}: {done}: {', '.join(module.helpers)} "
                      f"(imported by {count} converted file{'s' if count != 1 else ''})", file=out)
        if not args.quiet:
            _write_requirements(summary, out, style)
        if not args.quiet and any(Path(p).is_dir() for p in args.paths):
            write_coverage(summary.coverage(), out, style=style)
    if not args.quiet:
        print(summary_line(summary, wrote=write or bool(args.out)), file=sys.stderr)

    if summary.count("error") or summary.interrupted:
        return 2
    if any(r.changed or r.manual for r in summary.results):
        return 1
    return 0


def _catalogue(extra: list[str], isolated: bool = False) -> RuleSet:
    """Every installed rule, the rules of the current directory's [tool.e2k] config, and
    ``extra`` (``--rules``)."""
    from estimator2keras._config import CommandLine, Resolver

    resolver = Resolver(CommandLine(rules=extra), isolated=isolated)
    return resolver.base_settings(resolver.config_for(Path.cwd())).load()


def _add_rules(sub) -> None:
    p = sub.add_parser("rules", help="list the rule catalogue: code, name, kind, safety, summary")
    p.add_argument("--rules", action="append", default=[], metavar="MODULE", help="also load the rules in MODULE")
    p.add_argument("--isolated", action="store_true", help="ignore [tool.e2k] configuration")
    p.set_defaults(handler=_rules)


def _rules(args: argparse.Namespace) -> int:
    from estimator2keras._config import ConfigError

    try:
        rules = _catalogue(args.rules, args.isolated)
    except (RuleLoadError, ConfigError) as exc:
        print(f"e2k: error: {exc}", file=sys.stderr)
        return 2
    rows = [(r.code, r.name, r.kind(), r.safety.value, r.summary, _origin(r)) for r in rules.rules.values()]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4] + row[5])
    return 0


def _origin(rule) -> str:
    """Where a rule that is not built in comes from, for `e2k rules`."""
    builtin = rule.__module__.startswith("estimator2keras.")
    return "" if builtin else f"  [{rule.qualified_name()}]"


def _add_explain(sub) -> None:
    p = sub.add_parser("explain", help="show one rule's documentation and an example")
    p.add_argument("code", metavar="CODE")
    p.add_argument("--rules", action="append", default=[], metavar="MODULE", help="also load the rules in MODULE")
    p.add_argument("--isolated", action="store_true", help="ignore [tool.e2k] configuration")
    p.set_defaults(handler=_explain)


def _explain(args: argparse.Namespace) -> int:
    from estimator2keras._config import ConfigError
    from estimator2keras._docs import render_text

    try:
        rules = _catalogue(args.rules, args.isolated)
    except (RuleLoadError, ConfigError) as exc:
        print(f"e2k: error: {exc}", file=sys.stderr)
        return 2
    rule = rules.rules.get(args.code.upper())
    if rule is None:
        print(f"e2k: error: no rule {args.code!r} (see `e2k rules`)", file=sys.stderr)
        return 2
    print(render_text(rule), end="")
    return 0


def _add_test(sub) -> None:
    p = sub.add_parser(
        "test",
        help="run rules' own cases and check their docs (pkg.module or pkg.module:Rule)",
        description="Run each case of the named rules through the engine, exactly as e2k's own test suite runs "
        "the built-in rules, and check that each rule is documented. Exit 1 when a check fails.",
    )
    p.add_argument("specs", nargs="+", metavar="RULES", help="pkg.module (every rule in it) or pkg.module:Rule")
    p.add_argument("-v", "--verbose", action="store_true", help="list every check, not only failures")
    p.set_defaults(handler=_test)


def _test(args: argparse.Namespace) -> int:
    from estimator2keras._config import ConfigError
    from estimator2keras._registry import load_pack
    from estimator2keras.testing import run_rules

    try:
        rules = _catalogue(list(args.specs))
        under_test = []
        for spec in args.specs:
            found = load_pack(spec)
            if not found:
                raise RuleLoadError(f"{spec!r} defines no rules")
            under_test.extend(r for r in found if r not in under_test)
    except (RuleLoadError, ConfigError) as exc:
        print(f"e2k: error: {exc}", file=sys.stderr)
        return 2
    passed = failed = 0
    for outcome in run_rules(under_test, rules):
        label = f"{outcome.rule.code} {outcome.rule.name}: {outcome.name}"
        if outcome.ok:
            passed += 1
            if args.verbose:
                print(f"{label} ... ok")
        else:
            failed += 1
            print(f"{label} ... FAILED\n{outcome.error.rstrip()}\n")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def _add_parity(sub) -> None:
    from estimator2keras.parity import cli as parity_cli

    p = sub.add_parser("parity", help="check that a migrated program trains like the Estimator program")
    parity_cli.add_arguments(p)
    p.set_defaults(handler=parity_cli.run)


def _add_migrate(sub) -> None:
    from estimator2keras import migrate

    p = sub.add_parser("migrate", help="rewrite a program, run parity on it, write a Markdown migration report")
    migrate.add_arguments(p)
    p.set_defaults(handler=migrate.run)


def _add_checkpoint(sub) -> None:
    from estimator2keras.checkpoint import cli as checkpoint_cli

    p = sub.add_parser("checkpoint", help="carry an Estimator's model_dir over to the migrated Keras program")
    checkpoint_cli.add_arguments(p)
    p.set_defaults(handler=checkpoint_cli.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="e2k", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"e2k {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_rewrite(sub)
    _add_parity(sub)
    _add_migrate(sub)
    _add_checkpoint(sub)
    _add_rules(sub)
    _add_explain(sub)
    _add_test(sub)
    return parser


def _write_requirements(summary, out, style) -> None:
    """What the converted programs need that the Estimator programs did not: TensorBoard,
    which TensorFlow 2.20 and later no longer install, for the TensorBoard callbacks e2k wrote
    (said in each file's header too; new users missed it there)."""
    from estimator2keras._tensorboard import NEEDS_TENSORBOARD

    files = [r.path for r in summary.results if any(NEEDS_TENSORBOARD in f.message for f in r.findings)
             and (r.changed or r.status == "converted")]
    if files:
        count = f"{len(files)} converted file{'s log' if len(files) != 1 else ' logs'}"
        print(f"{style('manual', 'note')}: {count} to TensorBoard (E2K409): on TensorFlow 2.20 and later, "
              "`pip install tensorboard` before running them", file=out)


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
