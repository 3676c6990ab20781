"""Running a rewrite over many files: workers, writing, diffs, the report and the summary."""
from __future__ import annotations

import difflib
import functools
import json
import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from estimator2keras import __version__, _helpers
from estimator2keras._config import CommandLine, Resolver, RuleSettings
from estimator2keras._context import Finding
from estimator2keras._engine import ESTIMATOR_CODE_LEFT, RULE_FAILED, UNREADABLE, FileResult, keywords_of, rewrite_source
from estimator2keras._files import InputError, SourceFile, atomic_write, discover
from estimator2keras._notebook import notebook_diff, rewrite_notebook
from estimator2keras._program import CALLS_ESTIMATOR_CODE, link
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
    #: "tensorflow" or "jax" (``--target``); None: the configuration's, else TensorFlow.
    target: str | None = None


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
    #: The helpers modules written beside converted files (``_helpers``), by path.
    helper_modules: dict = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def changed(self) -> list[FileResult]:
        return [r for r in self.results if r.changed]

    def coverage(self) -> dict:
        """The figures a team lead reads after a run over a tree: how many files hold
        Estimator code (converted or partial), how many converted fully, and what blocks the
        rest, each blocker (code and message) counted once per file, most frequent first;
        what blocked a conversion before the Estimator code that is left because of it (E2K905,
        code left in a file whose unit did not convert, or a call into such a module; an
        Estimator that converts only together with one that did not), which says where code
        stayed, not why."""
        blockers: Counter = Counter()
        for result in self.results:
            if result.status == "partial":
                blockers.update({(f.code, _blocker(f)) for f in result.manual})
        converted, partial = self.count("converted"), self.count("partial")
        return {
            "estimator_files": converted + partial,
            "converted": converted,
            "partial": partial,
            "error": self.count("error"),
            "blockers": [
                {"code": code, "message": message, "files": files, "kind": "left" if _consequence(code, message) else "cause"}
                for (code, message), files in sorted(blockers.items(),
                                                     key=lambda item: (_consequence(*item[0]), -item[1], item[0]))
            ],
        }

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
            "coverage": self.coverage(),
            "files": [r.to_dict() for r in sorted(self.results, key=lambda r: r.path)],
            "helper_modules": [m.to_dict() for _, m in sorted(self.helper_modules.items())],
        }


@dataclass
class HelperModule:
    """The module of helpers beside converted files (``_helpers``): where it goes, what it
    held before the run (None: it is new), what it holds now, and the files that import it."""

    path: str
    original: str | None
    text: str
    helpers: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"path": self.path, "new": self.original is None, "helpers": sorted(self.helpers),
                "files": sorted(self.files)}

    def diff(self) -> str:
        old = (self.original or "").splitlines(keepends=True)
        new = self.text.splitlines(keepends=True)
        return "".join(difflib.unified_diff(old, new, "/dev/null" if self.original is None else f"a/{self.path}",
                                            f"b/{self.path}"))


#: Estimator code left because another construct did not convert (``_leftovers``).
LEFT = "E2K905"
#: An Estimator left because one it shares code with did not convert (``_units._together``).
TOGETHER = "converts only together with "


def _consequence(code: str, message: str) -> bool:
    """Does the finding say where Estimator code stayed because of another, not why?"""
    return code == LEFT or message.startswith(TOGETHER)


def _blocker(finding: Finding) -> str:
    """A finding's message as a blocker: a call into another module's Estimator code names
    its call and place, which are the same blocker in every file."""
    if finding.code == ESTIMATOR_CODE_LEFT and finding.message.startswith("calls "):
        return CALLS_ESTIMATOR_CODE
    return finding.message


# -- workers -----------------------------------------------------------------------------
def _init_worker() -> None:
    # The parent handles Ctrl-C and SIGTERM (sent to the whole process group, say): it stops
    # handing out work, reports what was done and shuts the workers down. A worker that died
    # of the signal would break the pool under it (and Python 3.11's pool then prints a
    # traceback for the futures it had cancelled).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, functools.partial(_worker_sigterm, os.getppid()))


def _worker_sigterm(parent: int, signum, frame) -> None:
    if os.getppid() != parent:  # orphaned (the parent was killed): go, as SIGTERM asks
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


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


def _without_worker(path: Path, keywords: tuple[bytes, ...] | None) -> FileResult | None:
    """The byte pre-filter, in the parent: a file that no rule can match never costs a round
    trip to a worker. None when the file needs a worker (or cannot be read: it says why)."""
    if keywords is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if any(word in data for word in keywords):
        return None
    return FileResult(str(path), "unchanged", data, data)


class _Interrupts:
    """Ctrl-C (SIGINT) and SIGTERM stop a run between two files, never while one is being
    written and recorded: each file is left as it was or replaced whole, and the summary
    lists every file that was written."""

    def __init__(self) -> None:
        self._previous: dict = {}
        self._deferring = 0
        self._pending = False
        #: A signal arrived (even one that code it interrupted swallowed: libcst's metadata
        #: resolution can turn the KeyboardInterrupt into another error).
        self.requested = False

    def __enter__(self) -> "_Interrupts":
        if threading.current_thread() is threading.main_thread():  # signal handlers live there
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous = signal.getsignal(signum)
                if previous is not signal.SIG_IGN:  # e.g. started with nohup: stay deaf to it
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _handle(self, signum, frame) -> None:
        self.requested = True
        if self._deferring:
            self._pending = True
        else:
            raise KeyboardInterrupt

    @contextmanager
    def deferred(self):
        """Hold an interruption until the end of the block."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
            if not self._deferring and self._pending:
                self._pending = False
                raise KeyboardInterrupt


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
    resolver = Resolver(CommandLine(options.extra_rules, options.select, options.ignore, options.target),
                        options.isolated)
    found = discover(paths, options.excludes)
    if options.out_dir is not None:
        # Two inputs mirrored to the same place (`e2k rewrite pkg_a pkg_b --out DIR`, both with
        # trainer/task.py): the second would overwrite the first. Refuse before writing anything.
        written: dict[Path, SourceFile] = {}
        for source in found:
            other = written.setdefault(source.relative, source)
            if other is not source:
                raise InputError(f"--out {options.out_dir} would get {source.relative} from both {other.path} and "
                                 f"{source.path}; convert them into separate --out directories")
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
    interrupts = _Interrupts()

    def finish(result: FileResult) -> None:
        source = by_path[result.path]
        with interrupts.deferred():
            if result.helpers and result.status != "error":
                # The helpers module first: the file written next imports it.
                _helper_module(result, source, options, summary)
            if options.write or options.out_dir is not None:
                _write(result, source, options, summary)
                result.release()  # written: only --diff and --check show the bytes later
            summary.results.append(result)
            if on_result is not None:
                on_result(result)

    with interrupts:
        try:
            todo = []
            early: dict[str, tuple[SourceFile, FileResult]] = {}
            keywords: dict[RuleSettings, tuple[bytes, ...] | None] = {}
            for source in files:
                chosen = settings[str(source.path)]
                if chosen not in keywords:
                    keywords[chosen] = keywords_of(chosen.load())
                result = _without_worker(source.path, keywords[chosen])
                if result is None:
                    todo.append(source)
                else:
                    early[os.path.normpath(str(source.path))] = (source, result)
            # A module no rule has a word for (an input_fn module) may still be part of a
            # program another file builds an Estimator in: it goes with its group.
            todo, groups = _programs(todo, settings, [source for source, _ in early.values()])
            grouped = {os.path.normpath(p) for group in groups for p in group.paths}
            for path, (_, result) in early.items():
                if path not in grouped:
                    finish(result)
            work: list = [*groups, *todo]  # the groups first: they take longest
            jobs = max(1, min(options.jobs, len(work)))
            if jobs == 1:
                for item in work:
                    if isinstance(item, _Group):
                        results = _process_group(item.paths, {p: settings[p] for p in item.paths}, item.federate)
                    else:
                        results = [process_file(item.path, settings[str(item.path)].load())]
                    if interrupts.requested:  # that file's result may be the interruption's doing
                        raise KeyboardInterrupt
                    for result in results:
                        finish(result)
            else:
                _run_pool(work, jobs, settings, finish, summary)
            if not summary.interrupted:
                # Calls from one file into Estimator code left in another (the program pass).
                link(summary.results, lambda r: settings[r.path].load().enabled(ESTIMATOR_CODE_LEFT))
        except KeyboardInterrupt:
            summary.interrupted = True
    summary.seconds = time.perf_counter() - start
    return summary


@dataclass(frozen=True)
class _Group:
    """Files converted in one job: the modules of a program (``federate``: one unit pass over
    them unless that leaves a human more, ``analysis.federation``), or a model_fn's consumer and
    provider (``analysis.program``)."""

    sources: tuple[SourceFile, ...]
    federate: bool

    @property
    def paths(self) -> list[str]:
        return [str(s.path) for s in self.sources]


def _programs(todo: list[SourceFile], settings, others: Sequence[SourceFile] = ()) -> tuple[list[SourceFile], list[_Group]]:
    """The files of ``todo`` that convert in groups, and the rest. A file of ``others`` (no
    rule's word in it) joins the group of a file of ``todo`` that imports it."""
    from estimator2keras._prefilter import last_names, mentions_any
    from estimator2keras.analysis.federation import groups
    from estimator2keras.analysis.program import links

    candidates = {}
    for source in todo:
        if source.path.suffix != ".py":
            continue
        try:
            data = source.path.read_bytes()
        except OSError:
            continue
        candidates[os.path.normpath(str(source.path))] = data
    imported = [os.path.normpath(str(s.path)) for s in others if s.path.suffix == ".py"]
    # One file with a rule's word and a module it imports without one (train.py and its
    # cols.py of feature columns) is a program too.
    if not candidates or len(candidates) + len(imported) < 2:
        return todo, []
    by_norm = {os.path.normpath(str(s.path)): s for s in [*todo, *others]}
    names = last_names(settings[str(by_norm[next(iter(candidates))].path)].load().constructor_paths())
    found = [_Group(tuple(by_norm[p] for p in sorted(g)), True)
             for g in groups(candidates, lambda source: mentions_any(source, names), imported)]
    grouped = {os.path.normpath(p) for g in found for p in g.paths}
    rest = {p: data for p, data in candidates.items() if p not in grouped}
    found += [_Group(tuple(by_norm[p] for p in sorted(g)), False) for g in (links(rest) if rest else [])]
    grouped = {os.path.normpath(p) for g in found for p in g.paths}
    return [s for s in todo if os.path.normpath(str(s.path)) not in grouped], found


def _process_group(paths: list[str], settings: dict[str, RuleSettings], federate: bool) -> list[FileResult]:
    """Convert the files of one group (in a worker, or in the parent with one job)."""
    from estimator2keras._context import sharing

    with sharing():  # the files parsed, and their metadata resolved, once for both conversions
        return _convert_group(paths, settings, federate)


def _convert_group(paths: list[str], settings: dict[str, RuleSettings], federate: bool) -> list[FileResult]:
    from estimator2keras.analysis.federation import rewrite_group
    from estimator2keras.analysis.program import links, rewrite_program

    sources = {}
    for path in paths:
        try:
            sources[os.path.normpath(path)] = Path(path).read_bytes()
        except OSError:
            return [process_file(Path(p), settings[p].load()) for p in paths]
    read = lambda p: sources[os.path.normpath(p)]  # noqa: E731
    rules_for = lambda p: settings[p].load()  # noqa: E731
    started = time.perf_counter()
    linked_groups = links(sources)

    def together():
        try:
            return rewrite_group(paths, read, rules_for)
        except Exception:  # a defect of the program pass costs its result, never the files'
            if os.environ.get("E2K_DEBUG_FEDERATION"):
                raise
            return None

    # The program pass sees what the files alone cannot: a factory converted in model.py whose
    # Estimator task.py still trains is converted there too, or left there with model.py; a
    # converted file calling another module's input function that still returns an iterator
    # gets it converted. Its result stands, unless a model_fn of another module goes through
    # the request protocol (analysis.program), whose conversion it may not make: then it must
    # leave a human less than the files converted that way.
    federated = together() if federate and not linked_groups else None
    if federated is not None:
        _debug(paths, started, None, federated, True)
        return federated
    alone: dict[str, FileResult] = {}
    for linked in linked_groups:
        for result in rewrite_program(sorted(linked), read, rules_for,
                                      lambda source, path, rules, program=None: rewrite_source(
                                          source, path, rules, program=program)):
            alone[os.path.normpath(result.path)] = result
    alone_results = [alone.get(os.path.normpath(p)) or rewrite_source(read(p), p, rules_for(p)) for p in paths]
    if not federate or not linked_groups or not any(r.changed or r.status in ("partial", "error") for r in alone_results):
        _debug(paths, started, alone_results, None, False)
        return alone_results
    federated = together()
    won = federated is not None and _left(federated) < _left(alone_results)
    _debug(paths, started, alone_results, federated, won)
    return federated if won else alone_results


def _debug(paths, started, alone, together, kept) -> None:
    if os.environ.get("E2K_DEBUG_FEDERATION"):
        print(f"program pass: {len(paths)} files from {paths[0]}: alone {alone and _left(alone)}, together "
              f"{together and _left(together)} ({time.perf_counter() - started:.2f} s){' kept' if kept else ''}")


def _left(results) -> tuple[int, int]:
    """What a human is left with: files not converted, then findings for a human."""
    results = list(results)
    return (sum(r.status in ("partial", "error") for r in results), sum(len(r.manual) for r in results))


def _run_pool(files, jobs, settings, finish, summary) -> None:
    """Rewrite ``files`` in ``jobs`` worker processes; the parent writes the results.

    A worker that dies (a crash in native code, the out-of-memory killer) breaks the pool: the
    files it had in flight are tried again one at a time in a fresh pool, so that only a file
    that kills a worker on its own is reported (E2K903), and the run goes on.
    """

    def submit(source) -> Future:
        if isinstance(source, _Group):
            return pool.submit(_process_group, source.paths, {p: settings[p] for p in source.paths}, source.federate)
        path = str(source.path)
        return pool.submit(_process, path, settings[path])

    def done_with(results) -> None:
        for result in results if isinstance(results, list) else [results]:
            finish(result)

    def died(source) -> None:
        for member in source.sources if isinstance(source, _Group) else [source]:
            finish(_worker_died(member))

    queue = list(reversed(files))
    retry: list[SourceFile] = []  # in flight when a worker died
    pending: dict[Future, SourceFile] = {}
    alone = False  # the one pending file is a retry
    pool = ProcessPoolExecutor(jobs, initializer=_init_worker)
    try:
        while queue or retry or pending:
            broken = False
            try:
                if retry:
                    if not pending:
                        source, alone = retry.pop(), True
                        pending[submit(source)] = source
                else:
                    alone = False
                    while queue and len(pending) < jobs * 4:
                        source = queue.pop()
                        pending[submit(source)] = source
            except BrokenProcessPool:  # broken before this file ran: it goes back where it was
                (retry if alone else queue).append(source)
                broken = True
            if pending and not broken:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    source = pending.pop(future)
                    try:
                        result = future.result()
                    except BrokenProcessPool:
                        broken = True
                        if alone:
                            died(source)
                        else:
                            retry.append(source)
                        continue
                    done_with(result)
            if broken:
                retry.extend(pending.values())  # they failed with the pool
                pending.clear()
                pool.shutdown(wait=True, cancel_futures=True)
                pool = ProcessPoolExecutor(jobs, initializer=_init_worker)
    except KeyboardInterrupt:
        for future in pending:
            future.cancel()
        summary.interrupted = True
        # Finish what the workers already did, so that the report says what was written.
        for future, source in pending.items():
            if not future.cancelled():
                try:
                    done_with(future.result())
                except Exception:
                    pass
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _worker_died(source: SourceFile) -> FileResult:
    path = str(source.path)
    message = (
        "e2k's worker process died converting this file (a crash in native code, or killed by the "
        "system for its memory); the file was left as it was"
    )
    try:
        data = source.path.read_bytes()
    except OSError:
        data = b""
    return FileResult(path, "error", data, data, [Finding(path, 1, 1, RULE_FAILED, message, "error")])


def _helper_module(result: FileResult, source: SourceFile, options: RewriteOptions, summary: RunSummary) -> None:
    """Add the helpers ``result`` took out of its file to the module beside it (written now,
    when the run writes)."""
    name = _helpers.module_name(str(source.path.parent))
    if options.out_dir is not None:
        target = Path(options.out_dir) / source.relative.parent / f"{name}.py"
    else:
        target = source.path.parent / f"{name}.py"
    key = os.path.normpath(str(target))
    module = summary.helper_modules.get(key)
    if module is None:
        try:
            existing = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):  # none there (or none e2k can read: written anew)
            existing = None
        if existing is not None and not _helpers.is_ours(existing):
            existing = None  # --out over an earlier mirror: the module of this name is e2k's
        module = summary.helper_modules[key] = HelperModule(str(target), existing, existing or "")
    text = _helpers.render(result.helpers, result.indent, module.text or None, result.limit)
    module.helpers = sorted({*module.helpers, *result.helpers})
    module.files.append(result.path)
    if text == module.text:
        return
    module.text = text
    if options.write or options.out_dir is not None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, text.encode("utf-8"), follow_symlinks=options.out_dir is None)
        except OSError as exc:
            _write_failed(result, target, exc, summary)


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
        if options.out_dir is not None:
            # The mirror tree is written as a tree: never through a link out of it.
            out = os.path.realpath(options.out_dir)
            if os.path.commonpath([out, os.path.realpath(target.parent)]) != out:
                raise PermissionError(f"{target.parent} leads out of {options.out_dir} through a symlink")
        atomic_write(target, data, follow_symlinks=options.out_dir is None)
    except OSError as exc:
        _write_failed(result, target, exc, summary)


def _write_failed(result: FileResult, target: Path, exc: OSError, summary: RunSummary) -> None:
    """A file (or the helpers module it imports) could not be written: the file is reported
    as an error, left as it was."""
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


