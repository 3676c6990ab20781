"""The syntactic pre-filter: can this file build an Estimator unit at all?

Many files mention "estimator" (and so pass the byte pre-filter on rule keywords) without
ever building one: the tensorflow_estimator package itself, Keras' compatibility shims,
tests and helpers of a project being migrated. Resolving libcst metadata (scopes, qualified
names, parents, positions) on them dominated a rewrite of a large tree. A unit starts at a
call whose callee resolves to a constructor's API path such as ``estimator.Estimator``.
libcst's ``QualifiedNameProvider`` names a callee after a TensorFlow path only through an
import of the callee's first name (``tf`` of ``tf.estimator.Estimator(...)``, bound by
``import tensorflow as tf``; ``E`` bound by ``from tensorflow.estimator import Estimator as
E``); a name bound any other way is LOCAL, never an API. So the pre-filter spells each call's
callee as libcst does, substitutes every import of its first name, and asks whether the
result is a constructor's path: ``linear.LinearClassifier(...)`` after ``from
tensorflow_estimator.python.estimator.canned import linear`` is (``_names`` maps the
implementation modules to the public API; the library's own files are left by the engine
before this), a bare ``TPUEstimator(...)`` calling the
file's own class is not, ``tf1.estimator.Estimator(...)`` is. When no call is, the unit pass cannot find anything, and neither libcst's parse nor its
metadata is needed.

The check uses CPython's own parser (``ast``), several times faster than libcst's. It is
conservative: whatever it cannot decide (a file CPython does not parse, say) goes through
libcst as before, which reports what does not parse.

Skipping libcst never skips the check for Estimator code left (``_leftovers``, E2K905): the
engine gives it the tree parsed here, and the walk of that tree is shared (``index``), so a
file the pre-filter rules out costs one parse and one walk.
"""
from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field
from typing import AbstractSet

from estimator2keras._leftovers import index
from estimator2keras._names import api_path_of_qualified

#: Larger files are not parsed: libcst needs over half a gigabyte and minutes of one core per
#: megabyte of dense code, and no hand-written Estimator program comes near (generated code does).
MAX_PARSE_BYTES = 1 << 20


#: CPython's parser gives up on these (they are limits, not syntax errors); libcst's parser
#: crashes the process (stack overflow) or runs for minutes on the same inputs.
_TOO_DEEP = ("too many nested parentheses", "too many levels of indentation", "too many statically nested blocks")


class TooComplex(Exception):
    """The file is nested too deeply for a Python parser; it must not reach libcst's."""

    def __init__(self, message: str, line: int = 1):
        super().__init__(message)
        self.line = line


def mentions_any(source: bytes, names: AbstractSet[str]) -> bool:
    """Whether one of ``names`` may be in ``source``: a callee or an import naming a
    constructor has its name in the text, and an ASCII name is the same bytes in every
    encoding a Python file can declare (a non-ASCII name counts as present)."""
    return any(not name.isascii() or name.encode() in source for name in names)


def last_names(paths: AbstractSet[str]) -> set[str]:
    """``{"Estimator"}`` for ``{"estimator.Estimator"}``: what a call of one must spell."""
    return {path.rpartition(".")[2] for path in paths}


def parse(source: bytes) -> ast.Module | None:
    """CPython's tree of ``source``; None when CPython cannot parse it (libcst then parses it
    and reports why not).

    Raises ``TooComplex`` when CPython's parser hits one of its limits (nesting depth,
    recursion, memory).
    """
    try:
        with warnings.catch_warnings():
            # Invalid escapes and the like warn at parse time; they are the user's business.
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (RecursionError, MemoryError) as exc:
        raise TooComplex(f"nested too deeply for Python's own parser ({type(exc).__name__})") from None
    except SyntaxError as exc:
        if any(limit in str(exc.msg) for limit in _TOO_DEEP):
            raise TooComplex(f"{exc.msg} (Python's own parser stops there)", exc.lineno or 1) from None
        return None
    except Exception:  # ValueError (NUL bytes), an unknown encoding...: libcst reports it
        return None


def may_build_unit(source: bytes, constructor_paths: AbstractSet[str], tree: ast.Module | None = None) -> bool:
    """False only when no call in ``source`` can resolve to one of the API paths
    ``constructor_paths`` (``{"estimator.Estimator"}``); True when one may, or when CPython
    cannot parse ``source`` (libcst then parses it and reports why not). ``tree`` is
    CPython's tree of ``source`` when the caller has it already.

    Raises ``TooComplex`` when CPython's parser hits one of its limits (nesting depth,
    recursion, memory).
    """
    if tree is None:
        tree = parse(source)
        if tree is None:
            return True
    if not mentions_any(source, last_names(constructor_paths)):
        return False
    # libcst's QualifiedNameProvider gives a callee a non-local name only through an import
    # of its first name (anything else is LOCAL, which is never a TensorFlow API): `tf` of
    # `tf.estimator.Estimator` bound by `import tensorflow as tf` makes it
    # `tensorflow.estimator.Estimator`. Every import of the name, in any scope, is tried: a
    # superset of what libcst can resolve.
    imports: dict[str, set[str]] = {}
    scanned = index(tree)  # one walk, shared with the check for Estimator code left
    for node in scanned.imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports.setdefault(alias.asname, set()).add(alias.name)
                else:  # `import a.b.c` binds `a`, and `a.b.c.X` is named as written
                    first = alias.name.partition(".")[0]
                    imports.setdefault(first, set()).add(first)
        elif node.module and not node.level:
            for alias in node.names:  # relative imports never name TensorFlow
                if alias.name != "*":
                    imports.setdefault(alias.asname or alias.name, set()).add(f"{node.module}.{alias.name}")
    # Aliases by assignment (`tf1 = tf.compat.v1`, `est = tf1.estimator`, `E = est.Estimator`)
    # name what they are bound to, as RewriteContext.api_path follows them: in any scope, a
    # superset again, chains followed until nothing new is named.
    aliases = [(node.targets[0].id, _full_name(node.value)) for node in scanned.aliases]
    grown = True
    while grown:
        grown = False
        for alias, value in aliases:
            first, dot, rest = value.partition(".")
            for qualified in list(imports.get(first, ())):
                named = qualified + dot + rest
                if named not in imports.setdefault(alias, set()):
                    imports[alias].add(named)
                    grown = True
    calls = scanned.calls  # `name(...)` / `a.b(...)`, as _names.call_api_path
    for func in calls:
        name = _full_name(func)
        first, dot, rest = name.partition(".")
        for qualified in imports.get(first, ()):
            if api_path_of_qualified(qualified + dot + rest) in constructor_paths:
                return True
    return False


def _full_name(node: ast.expr) -> str:
    """``libcst.helpers.get_full_name_for_node`` on CPython's tree, quirks included
    (``f().x`` is ``f.x``; what it cannot name is ``"None"``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_full_name(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _full_name(node.func)
    if isinstance(node, ast.Subscript):
        return _full_name(node.value)
    return "None"


@dataclass(frozen=True)
class Screening:
    """What a file that passed the keyword pre-filter needs."""

    #: libcst must parse it (a unit may start here, or module rules run on every file).
    parse: bool
    #: The unit pass may find a unit.
    units: bool
    #: Why it must not be parsed at all (reported as E2K900 at ``line``), or None.
    error: str | None = None
    line: int = 1
    #: CPython's tree of the file, when the screening built one (the engine's check for
    #: Estimator code left reads it instead of parsing the file again).
    tree: ast.Module | None = field(default=None, compare=False, repr=False)


def screen(source: bytes, constructor_paths: AbstractSet[str], module_rules: bool) -> Screening:
    """Decide, without libcst, whether ``source`` needs libcst's parse and the unit pass."""
    if len(source) > MAX_PARSE_BYTES:
        if not module_rules and not mentions_any(source, last_names(constructor_paths)):
            return Screening(parse=False, units=False)  # no unit can start here
        size = f"{len(source) / 2**20:.1f} MB"
        return Screening(False, False, f"not converted: {size} is more than e2k parses ({MAX_PARSE_BYTES >> 20} MB)")
    try:
        tree = parse(source)
        units = may_build_unit(source, constructor_paths, tree) if tree is not None else True
    except TooComplex as exc:
        return Screening(False, False, f"cannot parse: {exc}", exc.line)
    return Screening(parse=units or module_rules, units=units, tree=tree)
