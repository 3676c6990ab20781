"""How much of a tree of Estimator programs does `e2k rewrite` convert, and does it miss any?

    python benchmarks/coverage.py TREE                  # any directory of Python files / notebooks
    python benchmarks/coverage.py TREE --json figures.json --top 25 -j 4

TREE is copied into a temporary directory first (nothing of it is touched) and the copy is
rewritten in place by `e2k rewrite COPY --report REPORT` in a fresh process, timed from
outside. Then, for every file:

- an **Estimator file** is one whose *original* text calls an Estimator API
  (`EstimatorSpec(`, `RunConfig(`, `train_and_evaluate(`, `numpy_input_fn(`, a canned or
  TPU Estimator's constructor, `multi_gpu_model(`... see ``API_CALLS``), read with a regular
  expression on the text, whatever e2k reports: an independent check of e2k's own detection;
- it is **fully converted** when e2k reports it "converted";
- it is a **silent miss** when e2k reports it "unchanged": no finding, exit status 0 under
  `--check`, a pre-commit hook lets it through.

It prints each file's status (silent misses starred) unless ``--quiet``, the blockers left for
a human (code and message, counted once per file, most frequent first), the statuses, the
figures, the outputs that do not parse although e2k did not report an error, the wall time,
and a last line ``rate C/N silent S`` for scripts.
"""
from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The names whose call makes a file an Estimator file (the last part of the callee).
API_CALLS = (
    "Estimator", "EstimatorSpec", "RunConfig", "train_and_evaluate", "numpy_input_fn", "pandas_input_fn",
    "DNNClassifier", "DNNRegressor", "LinearClassifier", "LinearRegressor", r"DNNLinearCombined\w+",
    r"BoostedTrees\w+", r"TPUEstimator\w*", "multi_gpu_model",
)
_CALL = re.compile(r"\b(?:%s)\s*\(" % "|".join(API_CALLS))
#: e2k's program pass names each call and its place; as a blocker they are one.
_CALLS_INTO = re.compile(r"^calls \S+ \(.*:\d+\), which still runs Estimator code$")


def is_estimator_file(text: str) -> bool:
    return _CALL.search(text) is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path, help="the directory to measure (copied; never touched)")
    parser.add_argument("--e2k", help="the e2k command (default: this Python's `-m estimator2keras`)")
    parser.add_argument("-j", "--jobs", type=int, default=0, help="e2k workers (default: e2k's own, all cores)")
    parser.add_argument("--top", type=int, default=15, help="blockers listed (default 15)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it (the copy and the report)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-file list")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    if not tree.is_dir():
        parser.error(f"{args.tree} is not a directory")

    work = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="e2k-coverage."))
    copy, report = work / "tree", work / "report.json"
    try:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(tree, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        e2k = shlex.split(args.e2k) if args.e2k else [sys.executable, "-m", "estimator2keras"]
        command = [*e2k, "rewrite", str(copy), "--report", str(report), "-q"]
        if args.jobs:
            command += ["-j", str(args.jobs)]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if not report.exists():
            print(f"e2k wrote no report (exit {done.returncode}):\n{done.stderr[-2000:]}", file=sys.stderr)
            return 2
        figures = measure(tree, copy, json.loads(report.read_text()))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    figures["e2k_exit"] = done.returncode
    figures["seconds"] = round(seconds, 3)

    if not args.quiet:
        for status, path, findings in sorted(figures.pop("rows")):
            print(f"{status:11s} {findings:3d}  {path}")
        print()
    else:
        figures.pop("rows")
    print(f"most frequent blockers (code and message, files; {len(figures['blockers'])} distinct):")
    for blocker in figures["blockers"][: args.top]:
        print(f"{blocker['files']:5d}  {blocker['code']} {blocker['message'][:100]}")
    print()
    print(f"status: {figures['status']}")
    estimator, converted, silent = figures["estimator_files"], figures["converted"], figures["silent_misses"]
    share = f" ({100 * converted / estimator:.0f}%)" if estimator else ""
    print(f"Estimator files (original text calls an Estimator API): {estimator}")
    print(f"fully converted: {converted}/{estimator}{share}")
    print(f"silent misses (Estimator files reported unchanged; starred above): {len(silent)}")
    for path in silent[: args.top]:
        print(f"    {path}")
    print(f"outputs that do not parse, not reported as an error: {len(figures['unparsable_outputs'])}")
    print(f"e2k: {figures['files']} files in {seconds:.2f}s wall (exit {done.returncode})")
    print(f"rate {converted}/{estimator} silent {len(silent)}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def measure(original: Path, copy: Path, report: dict) -> dict:
    """The figures, from e2k's report on ``copy`` and the files of ``original``."""
    status: collections.Counter = collections.Counter()
    blockers: collections.Counter = collections.Counter()
    rows, silent, unparsable = [], [], []
    estimator = converted = 0
    for entry in report["files"]:
        path = Path(entry["path"])
        relative = path.resolve().relative_to(copy.resolve()) if path.is_absolute() else path.relative_to(copy)
        state = entry["status"]
        status[state] += 1
        try:
            text = (original / relative).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        counted = is_estimator_file(text)
        if counted:
            estimator += 1
            converted += state == "converted"
            if state == "unchanged":
                silent.append(relative.as_posix())
        blockers.update({(f["code"], _blocker(f["message"])) for f in entry["findings"] if f["kind"] == "manual"})
        if relative.suffix == ".py" and state != "error" and not _parses(copy / relative):
            unparsable.append(relative.as_posix())
        star = "*" if counted and state == "unchanged" else ""
        rows.append((state + star, relative.as_posix(), len(entry["findings"])))
    return {
        "tree": str(original),
        "files": len(report["files"]),
        "status": dict(status),
        "estimator_files": estimator,
        "converted": converted,
        "silent_misses": sorted(silent),
        "unparsable_outputs": sorted(unparsable),
        "blockers": [
            {"code": code, "message": message, "files": files}
            for (code, message), files in sorted(blockers.items(), key=lambda item: (-item[1], item[0]))
        ],
        "rows": rows,
    }


def _blocker(message: str) -> str:
    if _CALLS_INTO.match(message):
        return "calls a function of another module that still runs Estimator code"
    return message


def _parses(path: Path) -> bool:
    try:
        ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return False
    except OSError:
        return True
    return True


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
