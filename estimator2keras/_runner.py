"""Running a rewrite over many files: workers, writing, diffs, the report and the summary."""
from __future__ import annotations

import difflib
import json
import os
import signal
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from estimator2keras import __version__
from estimator2keras._config import CommandLine, Resolver, RuleSettings
from estimator2keras._context import Finding
from estimator2keras._engine import UNREADABLE, FileResult, rewrite_source
from estimator2keras._files import SourceFile, atomic_write, discover
from estimator2keras._notebook import notebook_diff, rewrite_notebook
from estimator2keras._registry import RuleSet


@dataclass
class RewriteOptions:
    write: bool = True
    out_dir: Path | None = None
    jobs: int = 1
    extra_rules: Sequence[str] = ()
    select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    excludes: Sequence[str] = ()
    #: Ignore pyproject.toml configuration ([tool.e2k]).
    isolated: bool = False


@dataclass
class RunSummary:
    results: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False
    write_errors: int = 0
    #: Files found but excluded by configuration.
    excluded: int = 0
    #: Every rule known to the run (all configurations), by code: for reports.
    rules: dict = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def changed(self) -> list[FileResult]:
        return [r for r in self.results if r.changed]

    def to_dict(self) -> dict:
        return {
            "tool": "estimator2keras",
            "version": __version__,
            "summary": {
                "files": len(self.results),
                "converted": self.count("converted"),
                "partial": self.count("partial"),
                "unchanged": self.count("unchanged"),
                "error": self.count("error"),
                "excluded": self.excluded,
                "interrupted": self.interrupted,
                "seconds": round(self.seconds, 3),
            },
            "files": [r.to_dict() for r in sorted(self.results, key=lambda r: r.path)],
        }


# -- workers -----------------------------------------------------------------------------
def _init_worker() -> None:
    # The parent handles Ctrl-C: it stops handing out work and reports what was done.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _process(path: str, settings: RuleSettings) -> FileResult:
    # Each worker builds the RuleSet of each distinct configuration once (cached).
    return process_file(Path(path), settings.load())


def process_file(path: Path, rules: RuleSet) -> FileResult:
    """Read and rewrite one file (nothing is written)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return FileResult(str(path), "error", b"", b"", [Finding(str(path), 1, 1, UNREADABLE, f"cannot read: {reason}", "error")])
    if path.suffix == ".ipynb":
        return rewrite_notebook(data, str(path), rules)
    return rewrite_source(data, str(path), rules)


# -- the run -----------------------------------------------------------------------------
def run(
    paths: Iterable[str | Path],
    options: RewriteOptions,
    on_result: Callable[[FileResult], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> RunSummary:
    """Rewrite every Python file under ``paths``; write results unless ``options.write`` is
    false. Each file's rules come from its nearest ``[tool.e2k]`` configuration and the
    options. ``on_start`` gets the number of files, ``on_result`` each file's result as soon
    as it is done (for progress)."""
    resolver = Resolver(CommandLine(options.extra_rules, options.select, options.ignore), options.isolated)
    found = discover(paths, options.excludes)
    settings: dict[str, RuleSettings] = {}
    files = []
    for source in found:
        chosen = resolver.settings_for(source.path)
        if chosen is not None:
            settings[str(source.path)] = chosen
            files.append(source)
    summary = RunSummary(excluded=len(found) - len(files))
    for distinct in set(settings.values()):
        # A bad rule module or code stops the run here, before any file is touched.
        summary.rules.update(distinct.load().rules)
    if on_start is not None:
        on_start(len(files))
    start = time.perf_counter()
    by_path = {str(f.path): f for f in files}

    def finish(result: FileResult) -> None:
        source = by_path[result.path]
        if options.write or options.out_dir is not None:
            _write(result, source, options, summary)
        summary.results.append(result)
        if on_result is not None:
            on_result(result)

    jobs = max(1, min(options.jobs, len(files)))
    try:
        if jobs == 1:
            for source in files:
                finish(process_file(source.path, settings[str(source.path)].load()))
        else:
            _run_pool(files, jobs, settings, finish, summary)
    except KeyboardInterrupt:
        summary.interrupted = True
    summary.seconds = time.perf_counter() - start
    return summary


def _run_pool(files, jobs, settings, finish, summary) -> None:
    pool = ProcessPoolExecutor(jobs, initializer=_init_worker)
    pending: set[Future] = set()
    queue = list(reversed(files))
    try:
        while queue or pending:
            while queue and len(pending) < jobs * 4:
                path = str(queue.pop().path)
                pending.add(pool.submit(_process, path, settings[path]))
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                finish(future.result())
    except KeyboardInterrupt:
        for future in pending:
            future.cancel()
        summary.interrupted = True
        # Finish what the workers already did, so that the report says what was written.
        for future in pending:
            if not future.cancelled():
                try:
                    finish(future.result())
                except Exception:
                    pass
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _write(result: FileResult, source: SourceFile, options: RewriteOptions, summary: RunSummary) -> None:
    if options.out_dir is not None:
        if result.status == "error" and not result.original:
            return
        target = Path(options.out_dir) / source.relative
        data = result.new
    elif result.changed:
        target = source.path
        data = result.new
    else:
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data)
    except OSError as exc:
        summary.write_errors += 1
        reason = exc.strerror or str(exc)
        result.status = "error"
        result.new = result.original
        result.findings.append(Finding(result.path, 1, 1, UNREADABLE, f"cannot write {target}: {reason}", "error"))


# -- output ------------------------------------------------------------------------------
def unified_diff(result: FileResult) -> str:
    if result.path.endswith(".ipynb"):
        return notebook_diff(result)
    old = result.original.decode("utf-8", errors="replace").splitlines(keepends=True)
    new = result.new.decode("utf-8", errors="replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(old, new, f"a/{result.path}", f"b/{result.path}"))


def write_report(summary: RunSummary, path: Path) -> None:
    Path(path).write_text(json.dumps(summary.to_dict(), indent=2) + "\n")


def summary_line(summary: RunSummary, wrote: bool) -> str:
    verb = "" if wrote else "would be "
    leftovers = sum(len(r.manual) for r in summary.results)
    parts = [
        f"{summary.count('converted')} {verb}converted",
        f"{summary.count('partial')} partial ({leftovers} left for a human)",
        f"{summary.count('unchanged')} unchanged",
        f"{summary.count('error')} error{'s' if summary.count('error') != 1 else ''}",
    ]
    files = len(summary.results)
    line = f"e2k: {', '.join(parts)} -- {files} file{'s' if files != 1 else ''} in {summary.seconds:.2f}s"
    if summary.interrupted:
        line += " (interrupted: the files not listed were not touched)"
    return line


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


