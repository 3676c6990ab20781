"""CPU time of chosen test files: the pytest process and every process it starts (the parity
sides, the checkpoint conversions, the TensorFlow programs), as the CI's budget spends it.

    python benchmarks/suite_cpu.py tests/test_real_trees.py
    python benchmarks/suite_cpu.py tests/test_parity_canned.py --baseline ce51102 --repeat 2
    python benchmarks/suite_cpu.py "tests/test_fixture_parity.py+tests/test_fixture_parity_second_half.py"

Each argument is one measurement: a test file, or several joined by "+" (a file split in two
is measured as the pair; a file that does not exist in a variant is left out of it). Each runs
as `python -m pytest -p no:randomly -p no:cacheprovider -q FILES` in its own process, with
E2K_TARGET_PYTHON set as `make test` sets it (.venv-newest), and is charged the CPU seconds
(user + system) of its whole process tree, from resource.getrusage(RUSAGE_CHILDREN): every
descendant that was waited for, which pytest and the harness do. CPU time, not wall time: the
machine is shared, and other users' load changes wall time far more than CPU time.

``--baseline REF`` measures, in the same run, the same files with the tests directory as it
is now except the files ``--owned`` names (by default the test files and harness that decide
what the slow tests run), which are taken as they were at REF (a file absent at REF is removed): the package, the fixtures and every other test
are the current ones, so the ratio is what the test changes alone save. The two variants
alternate (A B, then B A, ...) so that machine noise hits both alike. It prints, per
measurement, CPU seconds and wall seconds for each variant, the pytest outcome line, and the
ratio current / baseline. A measurement, not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The files whose changes a --baseline comparison isolates (the rest of tests/ is current).
OWNED = [
    "tests/conftest.py",
    "tests/parity_programs/support.py",
    "tests/test_checkpoint_programs.py",
    "tests/test_real_trees.py",
    "tests/test_parity_canned.py",
    "tests/test_fixture_parity.py",
    "tests/test_fixture_parity_second_half.py",
]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _env() -> dict[str, str]:
    env = dict(os.environ)
    newest = REPO / ".venv-newest" / "bin" / "python"
    if "E2K_TARGET_PYTHON" not in env and newest.exists():
        env["E2K_TARGET_PYTHON"] = str(newest)
    return env


def baseline_tree(ref: str, owned: list[str], root: Path) -> Path:
    """A repository-like directory: every top-level entry a link to this checkout's, except
    tests/, a copy of the current one with the ``owned`` files as they were at ``ref``."""
    for entry in REPO.iterdir():
        if entry.name in ("tests", ".pytest_cache", ".git", ".hypothesis"):
            continue
        (root / entry.name).symlink_to(entry)
    shutil.copytree(REPO / "tests", root / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    for path in owned:
        shown = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=REPO, capture_output=True)
        target = root / path
        if shown.returncode == 0:
            target.write_bytes(shown.stdout)
        elif target.exists():
            target.unlink()
    return root


def measure(tree: Path, files: list[str], extra: list[str], log: Path | None = None) -> dict:
    present = [f for f in files if (tree / f).is_file()]
    if not present:
        return {"files": [], "cpu": 0.0, "wall": 0.0, "outcome": "no such file"}
    cpu, wall = _children_cpu(), time.perf_counter()
    done = subprocess.run([_python(), "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q",
                           *extra, *present], cwd=tree, env=_env(), capture_output=True, text=True)
    cpu, wall = _children_cpu() - cpu, time.perf_counter() - wall
    if log is not None:
        log.write_text(done.stdout + done.stderr)
    lines = [line for line in done.stdout.strip().splitlines() if line.strip()]
    outcome = lines[-1] if lines else f"exit {done.returncode}"
    if done.returncode not in (0, 5):
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-2000:])
    return {"files": present, "cpu": round(cpu, 1), "wall": round(wall, 1), "outcome": outcome,
            "returncode": done.returncode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("measurements", nargs="+", help='test files; "a.py+b.py" is one measurement')
    parser.add_argument("--baseline", metavar="REF", help="also measure the owned files as at REF")
    parser.add_argument("--owned", nargs="*", default=OWNED, help="files taken from REF in the baseline")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the measurements there too")
    parser.add_argument("--pytest-args", default="", help="more pytest arguments, e.g. '-k newest'")
    parser.add_argument("--logs", type=Path, help="keep each run's pytest output in this directory")
    args = parser.parse_args(argv)
    extra = args.pytest_args.split()

    with tempfile.TemporaryDirectory(prefix="e2k-suite-cpu-") as tmp:
        trees = {"current": REPO}
        if args.baseline:
            trees["baseline"] = baseline_tree(args.baseline, args.owned, Path(tmp))
        rows = []
        for spec in args.measurements:
            files = spec.split("+")
            runs: dict[str, list[dict]] = {name: [] for name in trees}
            for i in range(args.repeat):
                order = list(trees) if i % 2 == 0 else list(reversed(trees))
                for name in order:
                    log = None
                    if args.logs:
                        args.logs.mkdir(parents=True, exist_ok=True)
                        log = args.logs / f"{Path(files[0]).stem}-{name}-{i}.log"
                    run = measure(trees[name], files, extra, log)
                    runs[name].append(run)
                    print(f"{spec} [{name}] cpu {run['cpu']:.1f} s, wall {run['wall']:.1f} s: {run['outcome']}",
                          flush=True)
            row = {"measurement": spec, "runs": runs,
                   "cpu": {name: round(sum(r["cpu"] for r in rs) / len(rs), 1) for name, rs in runs.items()}}
            if "baseline" in row["cpu"] and row["cpu"]["baseline"]:
                row["ratio"] = round(row["cpu"]["current"] / row["cpu"]["baseline"], 3)
            rows.append(row)

    print()
    print(f"{'measurement':60} " + " ".join(f"{name + ' cpu-s':>16}" for name in trees) + "   ratio")
    for row in rows:
        ratio = f"{row['ratio']:.3f}" if "ratio" in row else "-"
        print(f"{row['measurement'][:60]:60} " + " ".join(f"{row['cpu'][n]:16.1f}" for n in trees) + f"   {ratio}")
    if len(rows) > 1:
        totals = {n: sum(r["cpu"][n] for r in rows) for n in trees}
        ratio = f"{totals['current'] / totals['baseline']:.3f}" if totals.get("baseline") else "-"
        print(f"{'total':60} " + " ".join(f"{totals[n]:16.1f}" for n in trees) + f"   {ratio}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
