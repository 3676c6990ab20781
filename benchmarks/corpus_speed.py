"""CPU time of `e2k rewrite -j 1` on a corpus of programs, against an earlier version of e2k.

    python benchmarks/corpus_speed.py CORPUS                      # against 1b3ddb5, 3 runs each
    python benchmarks/corpus_speed.py CORPUS --baseline REV --repeat 5 --json out.json
    python benchmarks/corpus_speed.py CORPUS --baseline-root DIR  # a checkout already there

CORPUS is any directory of Python files (the project's corpus of real programs is not
distributed; any tree of Estimator programs will do). The baseline is a revision of this
repository, checked out into a temporary worktree (``git worktree add --detach``), or a
checkout given with ``--baseline-root``; the other side is this checkout. Both run with this
Python, each from its own root (the package is imported from there, not from an editable
install; the run checks it). The two sides alternate, ``--repeat`` runs each, each run on a
fresh copy of CORPUS with ``-j 1`` (one process, no worker pool), and what is timed is the CPU
user time of the process (``getrusage`` of the child), which a loaded machine disturbs less
than wall time. It prints each run and the ratio of this checkout to the baseline as a range
over the runs (min/max of this checkout's runs over max/min of the baseline's, and the ratio
of medians): only ratios measured in the same run, never absolute times.

``--compare-outputs`` also keeps the converted tree of each side's first run and says whether
the two are byte for byte the same (they differ where the baseline converts differently, as
1b3ddb5 does; use it against a baseline of the same outputs, the commit before a speed-up).
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BASELINE = "1b3ddb5"  # the version before the whole-program analysis (issue 12)
# Imports e2k from the root it runs in (argv[1]) and runs `e2k rewrite` on argv[2].
_RUN = (
    "import sys\n"
    "root = sys.argv[1]\n"
    "sys.path.insert(0, root)\n"
    "import importlib.util, estimator2keras\n"
    "# The rules live in rewrites/ at the root; an editable install maps them to\n"
    "# estimator2keras.rewrites of the checkout it was made from, so they are loaded from here.\n"
    "spec = importlib.util.spec_from_file_location('estimator2keras.rewrites', root + '/rewrites/__init__.py',\n"
    "                                              submodule_search_locations=[root + '/rewrites'])\n"
    "rules = sys.modules[spec.name] = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(rules)\n"
    "assert estimator2keras.__file__.startswith(root), estimator2keras.__file__\n"
    "assert list(rules.__path__)[0].startswith(root), rules.__path__\n"
    "from estimator2keras.cli import main\n"
    "sys.exit(main(['rewrite', sys.argv[2], '-j', '1', '-q']))\n"
)


def worktree(revision: str, parent: Path) -> Path:
    root = parent / "baseline"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(root), revision],
                   check=True, capture_output=True)
    return root


def run_once(root: Path, corpus: Path, work: Path, keep: Path | None) -> float:
    copy = work / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(corpus, copy, symlinks=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    proc = subprocess.run([sys.executable, "-c", _RUN, str(root), str(copy)], cwd=root,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
    if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr:
        raise SystemExit(f"benchmark: e2k from {root} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    if keep is not None and not keep.exists():
        shutil.copytree(copy, keep, symlinks=True)
    return seconds


def same_trees(a: Path, b: Path) -> list[str]:
    """The relative paths whose bytes differ (or exist on one side only)."""
    differ = []

    def walk(cmp: filecmp.dircmp, prefix: str) -> None:
        differ.extend(prefix + name for name in cmp.left_only + cmp.right_only + cmp.funny_files)
        _, mismatch, errors = filecmp.cmpfiles(cmp.left, cmp.right, cmp.common_files, shallow=False)
        differ.extend(prefix + name for name in mismatch + errors)
        for name, sub in cmp.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(filecmp.dircmp(a, b), "")
    return sorted(differ)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="a directory of Python files")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help=f"a revision of this repository (default {DEFAULT_BASELINE})")
    parser.add_argument("--baseline-root", type=Path, help="a checkout to use as the baseline instead of --baseline")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, alternating (default 3)")
    parser.add_argument("--compare-outputs", action="store_true", help="say whether both sides write the same files")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    corpus = args.corpus.resolve()
    if not corpus.is_dir():
        raise SystemExit(f"benchmark: {corpus} is not a directory")
    with tempfile.TemporaryDirectory(prefix="e2k-corpus-speed.") as tmp:
        work = Path(tmp)
        if args.baseline_root:
            base = args.baseline_root.resolve()
        else:
            base = worktree(args.baseline, work)
        roots = {"baseline": base, "this": REPO}
        times: dict[str, list[float]] = {side: [] for side in roots}
        try:
            for i in range(args.repeat):
                for side, root in roots.items():
                    keep = work / f"out-{side}" if args.compare_outputs else None
                    seconds = run_once(root, corpus, work, keep)
                    times[side].append(seconds)
                    print(f"run {i + 1} {side:8s} {seconds:6.2f} s CPU user", flush=True)
            differ = same_trees(work / "out-baseline", work / "out-this") if args.compare_outputs else None
        finally:
            if not args.baseline_root:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], capture_output=True)
    b, t = times["baseline"], times["this"]
    low, high, mid = min(t) / max(b), max(t) / min(b), statistics.median(t) / statistics.median(b)
    label = str(args.baseline_root) if args.baseline_root else args.baseline
    print(f"this checkout / {label}: {low:.2f}x to {high:.2f}x (medians {mid:.2f}x), {args.repeat} runs each")
    if differ is not None:
        print("outputs: byte for byte the same" if not differ else f"outputs differ in {len(differ)} files: {differ[:10]}")
    if args.json:
        args.json.write_text(json.dumps({"baseline": label, "times": times, "ratio_range": [low, high],
                                         "ratio_of_medians": mid, "outputs_differ": differ}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
