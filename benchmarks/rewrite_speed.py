"""How fast is `e2k rewrite` on large real trees, against `tf_upgrade_v2` and a bare libcst parse?

    python benchmarks/rewrite_speed.py            # all three trees, e2k with all cores
    python benchmarks/rewrite_speed.py --trees tensorflow_estimator --repeat 3 --json out.json

The trees are the sources of the installed ``tensorflow_estimator`` and ``keras`` packages
(``pip install -e ".[dev]"`` installs both), copied into a temporary directory first so that
nothing installed is touched. In one run, on each tree, it times three commands, each in a
fresh process, measured from outside:

- ``e2k rewrite --check TREE`` (default ``-j``: all cores);
- ``tf_upgrade_v2 --intree TREE --outtree OUT`` (one core; it imports TensorFlow);
- a bare ``libcst.parse_module`` of every ``.py`` file of the tree, on one core: the floor of
  anything that parses every file with libcst.

It prints files, lines, wall time, lines/s and peak RSS of each, and the ratios between them
(never absolute claims: the three are measured in the same run, on the same machine). Peak
RSS is of the whole process tree (the parent and its workers): the larger of the sum of the
tree's RSS sampled every 10 ms and the largest single process's own peak (``ru_maxrss``).
With ``--repeat N`` each command runs N times and the median wall time is reported.

Before timing, e2k's own modules are byte-compiled (``compileall``), as ``pip install``
does for every installed package, tf_upgrade_v2's and libcst's included. An editable
install compiles on first import instead, and not at all where ``PYTHONDONTWRITEBYTECODE``
is set (this project's sandbox sets it): e2k would then pay ~0.1 s of compiling on every
start, which no installed tool pays.

A third tree, ``estimator_programs`` (``--copies`` copies of every ``fixtures/*/before.py``),
is the opposite case: every file is an Estimator program that e2k converts. It has no
target; it shows what one conversion costs.

The targets (issue 8), checked at the end: on ``tensorflow_estimator``, e2k at least 4x
faster than tf_upgrade_v2 with a lower peak RSS; on ``keras``, e2k completes (tf_upgrade_v2
crashes there) in under a tenth of the bare-parse time.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    import psutil
except ImportError:  # the dev extra installs it; without it only ru_maxrss is measured
    psutil = None

TREES = ("tensorflow_estimator", "keras", "estimator_programs")
REPO = Path(__file__).resolve().parent.parent
# Runs a command and prints its children's peak RSS (ru_maxrss of the largest descendant, KiB).
_RUSAGE_WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)
_BARE_PARSE = (
    "import pathlib, sys, libcst\n"
    "failed = 0\n"
    "for path in sorted(pathlib.Path(sys.argv[1]).rglob('*.py')):\n"
    "    try:\n"
    "        libcst.parse_module(path.read_bytes())\n"
    "    except Exception:\n"
    "        failed += 1\n"
    "print(f'{failed} files did not parse', file=sys.stderr)\n"
)


@dataclass
class Measure:
    tool: str
    seconds: float
    peak_rss_mb: float
    returncode: int
    #: None when the tool did its job; else the last line of its traceback.
    failure: str | None = None
    detail: str = ""
    runs: list[float] = field(default_factory=list)


@dataclass
class TreeResult:
    tree: str
    files: int
    lines: int
    measures: dict[str, Measure]


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # finds it without importing it (no TensorFlow start-up)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"benchmark: the package {name!r} is not installed (pip install -e '.[dev]')")
    return Path(list(spec.submodule_search_locations)[0])


def programs_tree(tree: Path, copies: int) -> None:
    """The worst case for e2k: every file an Estimator program that it converts (copies of
    the fixtures' before.py), where the two large trees have almost none."""
    programs = sorted((REPO / "fixtures").glob("*/before.py"))
    if not programs:
        raise SystemExit("benchmark: no fixtures/*/before.py (run from a checkout)")
    for i in range(copies):
        for program in programs:
            target = tree / f"copy{i:03d}" / f"{program.parent.name}.py"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(program, target)


def byte_compile_e2k() -> None:
    """Compile e2k's modules to bytecode, as an install does (see the module docstring)."""
    import compileall

    for name in ("estimator2keras", "estimator2keras.rewrites"):
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(location, quiet=1)


def count(tree: Path) -> tuple[int, int]:
    files = sorted(tree.rglob("*.py"))
    return len(files), sum(p.read_bytes().count(b"\n") for p in files)


def _tree_rss(process) -> int:
    try:
        procs = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total


def measure(tool: str, argv: list[str], cwd: Path, env: dict | None = None) -> Measure:
    """Run ``argv`` in a fresh process; wall time and peak RSS of its whole process tree."""
    wrapper = [sys.executable, "-c", _RUSAGE_WRAPPER, *argv]
    start = time.perf_counter()
    proc = subprocess.Popen(wrapper, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampled = 0
    if psutil is not None:
        watched = psutil.Process(proc.pid)
        while proc.poll() is None:
            sampled = max(sampled, _tree_rss(watched) - _own_rss(watched))
            time.sleep(0.01)
    stderr = proc.communicate()[1].decode("utf-8", "replace")
    seconds = time.perf_counter() - start
    lines = stderr.strip().splitlines()
    largest_kib = int(lines.pop()) if lines and lines[-1].strip().isdigit() else 0
    peak = max(sampled, largest_kib * 1024)
    failure = None
    if "Traceback (most recent call last)" in stderr:
        failure = next((line for line in reversed(lines) if line and not line.startswith(" ")), "crashed")
    elif proc.returncode not in (0, 1):
        failure = f"exit {proc.returncode}: {lines[-1] if lines else ''}"
    detail = next((line for line in reversed(lines) if line.startswith("e2k:") or "did not parse" in line), "")
    return Measure(tool, seconds, peak / 2**20, proc.returncode, failure, detail, [seconds])


def _own_rss(process) -> int:
    # The wrapper itself (a small Python) is not part of what is measured.
    try:
        return process.memory_info().rss
    except psutil.Error:
        return 0


def median_of(runs: list[Measure]) -> Measure:
    best = sorted(runs, key=lambda m: m.seconds)[len(runs) // 2]
    best.runs = [m.seconds for m in runs]
    best.seconds = statistics.median(best.runs)
    best.peak_rss_mb = max(m.peak_rss_mb for m in runs)
    return best


def bench_tree(name: str, work: Path, args) -> TreeResult:
    tree = work / name
    if name == "estimator_programs":
        programs_tree(tree, args.copies)
    else:
        shutil.copytree(package_dir(name), tree, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    files, lines = count(tree)
    e2k = shlex.split(args.e2k) if args.e2k else [sys.executable, "-m", "estimator2keras"]
    e2k_argv = [*e2k, "rewrite", "--check", str(tree), "--report", str(work / f"{name}.e2k.json")]
    if args.jobs:
        e2k_argv += ["-j", str(args.jobs)]
    commands = {
        "e2k": e2k_argv,
        "tf_upgrade_v2": [args.tf_upgrade_v2, "--intree", str(tree), "--outtree", str(work / f"{name}.tf2"),
                          "--reportfile", str(work / f"{name}.tf2.txt")],
        "bare parse": [sys.executable, "-c", _BARE_PARSE, str(tree)],
    }
    if not args.tf_upgrade_v2:
        del commands["tf_upgrade_v2"]
    runs: dict[str, list[Measure]] = {tool: [] for tool in commands}
    # Round-robin, so that a busy spell on a shared machine weighs on every tool alike.
    for round_ in range(args.repeat):
        for tool, argv in commands.items():
            shutil.rmtree(work / f"{name}.tf2", ignore_errors=True)
            runs[tool].append(measure(tool, argv, work))
            print(f"  {name} [{round_ + 1}/{args.repeat}]: {tool} {runs[tool][-1].seconds:.2f}s", file=sys.stderr, flush=True)
    measures = {tool: median_of(found) for tool, found in runs.items()}
    return TreeResult(name, files, lines, measures)


def report(results: list[TreeResult], jobs: int) -> list[str]:
    out = [f"e2k with -j {jobs} ({os.cpu_count()} cores); tf_upgrade_v2 and the bare parse use one core", ""]
    header = f"{'tree':22} {'tool':14} {'files':>6} {'lines':>8} {'wall s':>8} {'lines/s':>9} {'peak RSS MB':>12}  outcome"
    out.append(header)
    out.append("-" * len(header))
    for result in results:
        for m in result.measures.values():
            rate = f"{result.lines / m.seconds:9.0f}" if not m.failure else f"{'-':>9}"
            outcome = f"FAILED: {m.failure}" if m.failure else (m.detail or "ok")
            out.append(
                f"{result.tree:22} {m.tool:14} {result.files:6d} {result.lines:8d} {m.seconds:8.2f} {rate} {m.peak_rss_mb:12.0f}  {outcome}"
            )
    out.append("")
    for result in results:
        e2k, tf2, bare = (result.measures.get(k) for k in ("e2k", "tf_upgrade_v2", "bare parse"))
        if e2k is None or e2k.failure:
            out.append(f"{result.tree}: e2k FAILED ({e2k.failure if e2k else 'not run'})")
            continue
        if tf2 is not None:
            if tf2.failure:
                out.append(f"{result.tree}: tf_upgrade_v2 crashed after {tf2.seconds:.1f}s ({tf2.failure}); e2k completed")
            else:
                speed = tf2.seconds / e2k.seconds
                words = f"{speed:.1f}x faster than" if speed >= 1 else f"{1 / speed:.1f}x slower than"
                out.append(
                    f"{result.tree}: e2k/tf_upgrade_v2 wall = {e2k.seconds / tf2.seconds:.3f} (e2k {words} tf_upgrade_v2), "
                    f"peak RSS e2k/tf_upgrade_v2 = {e2k.peak_rss_mb / tf2.peak_rss_mb:.2f}"
                )
        if bare is not None:
            out.append(f"{result.tree}: e2k/bare-parse wall = {e2k.seconds / bare.seconds:.3f}")
    return out


def targets(results: list[TreeResult]) -> list[tuple[str, bool]]:
    checks = []
    by_tree = {r.tree: r.measures for r in results}
    m = by_tree.get("tensorflow_estimator", {})
    if {"e2k", "tf_upgrade_v2"} <= set(m) and not m["tf_upgrade_v2"].failure:
        checks.append(("tensorflow_estimator: e2k >= 4x faster than tf_upgrade_v2",
                       not m["e2k"].failure and m["tf_upgrade_v2"].seconds >= 4 * m["e2k"].seconds))
        checks.append(("tensorflow_estimator: e2k peak RSS below tf_upgrade_v2's",
                       m["e2k"].peak_rss_mb < m["tf_upgrade_v2"].peak_rss_mb))
    m = by_tree.get("keras", {})
    if {"e2k", "bare parse"} <= set(m):
        checks.append(("keras: e2k completes with no crash", not m["e2k"].failure))
        checks.append(("keras: e2k under a tenth of the bare-parse time", m["e2k"].seconds < m["bare parse"].seconds / 10))
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", nargs="+", choices=TREES, default=list(TREES))
    parser.add_argument("-j", "--jobs", type=int, default=0, help="e2k workers (default: e2k's own default, all cores)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command; the median is reported")
    parser.add_argument("--copies", type=int, default=20, help="copies of each fixture in the estimator_programs tree")
    parser.add_argument("--e2k", help="the e2k command to time (default: this Python's `-m estimator2keras`)")
    parser.add_argument("--tf-upgrade-v2", default=shutil.which("tf_upgrade_v2", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"),
                        help="tf_upgrade_v2 to compare with (default: next to this Python, or on PATH)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    jobs = args.jobs or cores
    if not args.tf_upgrade_v2:
        print("benchmark: tf_upgrade_v2 not found; comparing with the bare parse only", file=sys.stderr)
    if not args.e2k:
        byte_compile_e2k()
    with tempfile.TemporaryDirectory(prefix="e2k-bench-") as tmp:
        results = [bench_tree(name, Path(tmp), args) for name in args.trees]
    lines = report(results, jobs)
    checks = targets(results)
    lines += ["", "targets (issue 8):"] + [f"  [{'met' if ok else 'MISSED'}] {what}" for what, ok in checks]
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"jobs": jobs, "results": [asdict(r) for r in results],
                                         "targets": dict(checks)}, indent=2) + "\n")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
