"""The program pass: calls from one file of a tree into Estimator code left in another.

A directory given to ``e2k rewrite`` is a program. Its ``trainer/task.py`` often holds no
Estimator API of its own: it parses flags and calls ``model.train_and_evaluate(...)``,
defined in the sibling ``trainer/model.py``, which builds and trains the Estimator. When
``model.py`` keeps that code (a finding left for a human, or an Estimator API, inside the
function), ``task.py`` still runs Estimator code, and must not pass ``--check`` as
"unchanged". After every file is processed, this pass reports each such call (E2K905), in
the files reported unchanged, and follows the calls further: a function that calls Estimator
code still runs Estimator code.

It is linear in the size of the program: each file's imports are read with one regular
expression over its bytes; only a file that imports a module holding Estimator code is
parsed (by CPython's ``ast``), once; each call is resolved once.

Imports are resolved as Python resolves them for a script or a package: ``from . import
model`` / ``from .model import f`` relative to the file's package, ``import model`` and
``import trainer.model as model`` / ``from trainer import model`` against the file's
directory and each directory above it (a package root), looked up among the files of the run.
"""
from __future__ import annotations

import ast
import os
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from estimator2keras import _leftovers
from estimator2keras._context import Finding
from estimator2keras._engine import ESTIMATOR_CODE_LEFT, FileResult
from estimator2keras._leftovers import _dotted, column, parse, top_level_definitions
from estimator2keras._suppress import Suppressions

#: An import statement, for the words it names (parenthesised names over several lines too).
_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+[.\w]+[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*)|import[ \t]+[^\n]*)", re.MULTILINE)
_WORD = re.compile(rb"\w+")
#: Module names searched for in each file's bytes before every file's imports are indexed.
_SEARCHED_STEMS = 32
#: What every call this pass reports is, as a blocker counted over files (coverage summary).
CALLS_ESTIMATOR_CODE = "calls a function of another module that still runs Estimator code"
#: The code of the note on a file converted with the functions it calls: the program pass's.
CONVERTED_WITH = ESTIMATOR_CODE_LEFT


@dataclass(frozen=True)
class _Site:
    """A call in a caller file that may reach a function of another module."""

    line: int
    offset: int
    #: As written: ``model.train_and_evaluate``.
    text: str
    #: (module file, name) it may call, in the order tried.
    targets: tuple[tuple[str, str], ...]
    #: The caller's top-level definition holding the call, if any: (name, first line).
    within: tuple[str, int] | None


def _stem(path: str) -> str:
    """The name a module is imported by: ``model`` for model.py, the package for __init__.py."""
    p = Path(path)
    return p.parent.name if p.stem == "__init__" else p.stem


def _import_words(source: bytes) -> set[bytes]:
    words: set[bytes] = set()
    for match in _IMPORT.finditer(source):
        words.update(_WORD.findall(match.group()))
    return words


class _Modules:
    """Module names -> the files of the run, as imports find them."""

    def __init__(self, files: Iterable[str]):
        self.files = set(files)

    def _module_file(self, base: str, dotted: str) -> str | None:
        parts = [p for p in dotted.split(".") if p]
        stem = os.path.join(base, *parts)
        for candidate in ((stem + ".py") if parts else None, os.path.join(stem, "__init__.py")):
            if candidate is not None and candidate in self.files:
                return candidate
        return None

    def find(self, caller_dir: str, level: int, dotted: str) -> str | None:
        """The file of module ``dotted`` imported with ``level`` leading dots from a file in
        ``caller_dir``; None when it is not a file of the run."""
        if level:
            base = caller_dir
            for _ in range(level - 1):
                base = os.path.dirname(base)
            return self._module_file(base, dotted)
        if not dotted:
            return None
        base = caller_dir
        while True:
            found = self._module_file(base, dotted)
            if found is not None:
                return found
            parent = os.path.dirname(base)
            if parent == base:
                return None
            base = parent


def _bindings(tree: ast.Module) -> dict[str, list[tuple[int, str]]]:
    """Each name an import binds -> (level, dotted path of what it names)."""
    bound: dict[str, list[tuple[int, str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound.setdefault(alias.asname, []).append((0, alias.name))
                else:
                    first = alias.name.partition(".")[0]
                    bound.setdefault(first, []).append((0, first))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    continue
                dotted = f"{node.module}.{alias.name}" if node.module else alias.name
                bound.setdefault(alias.asname or alias.name, []).append((node.level, dotted))
    return bound


def _sites(tree: ast.Module, path: str, modules: _Modules) -> list[_Site]:
    """The calls in ``tree`` (the file ``path``) of a function or class another file of the
    run defines."""
    bound = _bindings(tree)
    if not bound:
        return []
    caller_dir = os.path.dirname(path)
    within: dict[int, tuple[str, int]] = {}
    for name, first, last in top_level_definitions(tree):
        for line in range(first, last + 1):
            within[line] = (name, first)
    sites = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        text = _dotted(node.func)
        if text is None:
            continue
        first, _, rest = text.partition(".")
        targets = []
        for level, base in bound.get(first, ()):
            parts = [*(p for p in base.split(".") if p), *(p for p in rest.split(".") if p)]
            # `model.train_and_evaluate`: module `model`, name `train_and_evaluate`;
            # `pkg.model.Trainer.fit`: the longest module prefix that is a file of the run.
            for cut in range(len(parts) - 1, -1, -1):
                module = modules.find(caller_dir, level, ".".join(parts[:cut]))
                if module is not None and module != path:
                    targets.append((module, parts[cut]))
                    break
        if targets:
            sites.append(_Site(node.lineno, node.col_offset, text, tuple(targets), within.get(node.lineno)))
    return sites


def link(results: list[FileResult], enabled: Callable[[FileResult], bool]) -> int:
    """Report, in the files reported unchanged, every call into a function of another file of
    the run that still holds Estimator code (directly, or through such calls). Returns the
    number of findings added. ``enabled(result)``: whether E2K905 is enabled for that file."""
    by_path: dict[str, FileResult] = {}
    for result in results:
        if not result.path.endswith(".py"):
            continue
        if result.status == "error":
            if not result.original or result.definitions:
                continue
            # A file e2k could not convert stays as it was: its definitions that refer to an
            # Estimator API still run Estimator code, and a caller reported unchanged must
            # say so (fail closed: a crash in model.py never makes task.py look migrated).
            tree = _leftovers.parse(result.original)
            if tree is None:
                continue
            held = {r.line for r in _leftovers.find_references(tree)}
            result.definitions = _leftovers.holding(_leftovers.top_level_definitions(tree), held)
        by_path[os.path.abspath(result.path)] = result
    # (module file, name) -> its first line, for each definition that holds Estimator code.
    holding: dict[tuple[str, str], int] = {}
    queue: deque[tuple[str, str]] = deque()
    converted: set[tuple[str, str]] = set()
    for path, result in by_path.items():
        for name, first, _ in result.definitions:
            holding[(path, name)] = first
            queue.append((path, name))
        converted.update((path, name) for name in result.converted_definitions)
    if not queue and not converted:
        return 0

    callers = {path: r for path, r in by_path.items() if r.status == "unchanged" and enabled(r)}
    modules = _Modules(by_path)
    sources: dict[str, bytes | None] = {}
    words: dict[str, set[bytes]] = {}
    by_word: dict[bytes, list[str]] | None = None  # once there are too many stems to search
    parsed: set[str] = set()
    sites_to: dict[tuple[str, str], list[tuple[str, _Site]]] = {}
    stems_seen: set[str] = set()
    reported: set[tuple[str, int, int]] = set()
    suppressions: dict[str, Suppressions] = {}
    added = 0

    def source(caller: str) -> bytes | None:
        if caller not in sources:
            sources[caller] = _source_of(callers[caller], caller)
        return sources[caller]

    def importers(stem: bytes) -> Iterable[str]:
        """The callers that import a module named ``stem``: a search of each caller's bytes
        for the few first stems, an index of every caller's imported words beyond them (each
        caller read once either way: linear)."""
        nonlocal by_word
        if by_word is None and len(stems_seen) <= _SEARCHED_STEMS:
            for caller in callers:
                if caller in parsed:
                    continue
                data = source(caller)
                if data is None or stem not in data:
                    continue
                if caller not in words:
                    words[caller] = _import_words(data)
                if stem in words[caller]:
                    yield caller
            return
        if by_word is None:
            by_word = {}
            for caller in callers:
                data = source(caller) if caller not in parsed else None
                if data is not None:
                    for word in words.get(caller) or _import_words(data):
                        by_word.setdefault(word, []).append(caller)
        yield from by_word.get(stem, ())

    def flag(caller: str, site: _Site, target: tuple[str, str]) -> None:
        nonlocal added
        key = (caller, site.line, site.offset)
        if key in reported:
            return
        reported.add(key)
        result, data = by_path[caller], source(caller) or b""
        if caller not in suppressions:
            suppressions[caller] = Suppressions.from_source(data) if b"e2k" in data else Suppressions()
        if suppressions[caller].covers(site.line, ESTIMATOR_CODE_LEFT):
            return
        module, name = target
        where = f"{by_path[module].path}:{holding[target]}"  # as the file is listed
        col = column(data.splitlines(), site.line, site.offset)
        message = f"calls {site.text} ({where}), which still runs Estimator code"
        result.findings.append(Finding(result.path, site.line, col, ESTIMATOR_CODE_LEFT, message, "manual"))
        result.status = "partial"
        added += 1
        if site.within is not None:
            reached = (caller, site.within[0])
            if reached not in holding:
                holding[reached] = site.within[1]
                queue.append(reached)

    def index_sites(target: tuple[str, str]) -> None:
        """Read, once, the callers of ``target``'s module: their calls into other files."""
        stem = _stem(target[0])
        if stem in stems_seen:
            return
        stems_seen.add(stem)
        for caller in list(importers(stem.encode())):
            if caller in parsed:
                continue
            parsed.add(caller)
            tree = parse(source(caller) or b"")
            for site in _sites(tree, caller, modules) if tree is not None else ():
                for called in site.targets:
                    sites_to.setdefault(called, []).append((caller, site))
                    if called in holding:
                        flag(caller, site, called)

    while queue:
        target = queue.popleft()
        index_sites(target)
        for caller, site in sites_to.get(target, ()):
            flag(caller, site, target)
    # A file that only calls what the conversion converted (`model.train_and_evaluate(...)`)
    # is converted with it: it runs no Estimator code now, and needs no edit of its own.
    for target in sorted(converted):
        index_sites(target)
        for caller, site in sites_to.get(target, ()):
            result = by_path[caller]
            if result.status != "unchanged" or caller not in callers:
                continue
            data = source(caller) or b""
            col = column(data.splitlines(), site.line, site.offset)
            where = f"{by_path[target[0]].path}"
            result.findings.append(Finding(
                result.path, site.line, col, CONVERTED_WITH,
                f"calls {site.text} ({where}), which e2k converted: this file needs no change of its own", "fixed"))
            result.status = "converted"
    return added


def _source_of(result: FileResult, path: str) -> bytes | None:
    """The file's bytes: kept in the result, or read again once written (released)."""
    if result._changed is None:
        return result.original
    try:
        return Path(path).read_bytes()
    except OSError:
        return None
