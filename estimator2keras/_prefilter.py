"""The syntactic pre-filter: can this file build an Estimator unit at all?

Many files mention "estimator" (and so pass the byte pre-filter on rule keywords) without
ever building one: the tensorflow_estimator package itself, Keras' compatibility shims,
tests and helpers of a project being migrated. Resolving libcst metadata (scopes, qualified
names, parents, positions) on them dominated a rewrite of a large tree. A unit starts at a
call whose callee resolves to a constructor path such as ``estimator.Estimator``; libcst's
``QualifiedNameProvider`` can only resolve a callee spelled with the constructor's last name
after a dot (``tf.estimator.Estimator(...)``) or with a name an import bound to it
(``from tensorflow.estimator import Estimator``, ``... import Estimator as E``); a bare
``TPUEstimator(...)`` calling the file's own class is not a unit. So when no call of the
file is spelled that way, the unit pass cannot find anything, and neither libcst's parse
nor its metadata is needed.

The check uses CPython's own parser (``ast``), several times faster than libcst's. It is
conservative: whatever it cannot decide (a file CPython does not parse, say) goes through
libcst as before, which reports what does not parse.
"""
from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from typing import AbstractSet

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


def may_build_unit(source: bytes, constructor_names: AbstractSet[str]) -> bool:
    """False only when no call in ``source`` can resolve to one of the constructors whose
    last names are ``constructor_names`` (``{"Estimator"}``); True when it may, or when
    CPython cannot parse ``source`` (libcst then parses it and reports why not).

    Raises ``TooComplex`` when CPython's parser hits one of its limits (nesting depth,
    recursion, memory).
    """
    try:
        with warnings.catch_warnings():
            # Invalid escapes and the like warn at parse time; they are the user's business.
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (RecursionError, MemoryError) as exc:
        raise TooComplex(f"nested too deeply for Python's own parser ({type(exc).__name__})") from None
    except SyntaxError as exc:
        if any(limit in str(exc.msg) for limit in _TOO_DEEP):
            raise TooComplex(f"{exc.msg} (Python's own parser stops there)", exc.lineno or 1) from None
        return True
    except Exception:  # ValueError (NUL bytes), an unknown encoding...: libcst reports it
        return True
    if not mentions_any(source, constructor_names):
        return False
    # libcst resolves `Name(...)` to an API path only when an import binds the name (a class
    # or function of the file's own is LOCAL, and no TensorFlow constructor); `a.Name(...)`
    # may resolve through any import of `a`.
    attributes: set[str] = set()  # `a.Name(...)`: the last names of such callees
    names: set[str] = set()  # `Name(...)`
    imported = set()  # names an import binds to a constructor (`from ... import Estimator as E`)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                attributes.add(func.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                last = alias.name.rpartition(".")[2]
                if last in constructor_names:
                    imported.add(alias.asname or last)
    return not names.isdisjoint(imported) or not attributes.isdisjoint(constructor_names | imported)


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


def screen(source: bytes, constructor_names: AbstractSet[str], module_rules: bool) -> Screening:
    """Decide, without libcst, whether ``source`` needs libcst's parse and the unit pass."""
    if len(source) > MAX_PARSE_BYTES:
        if not module_rules and not mentions_any(source, constructor_names):
            return Screening(parse=False, units=False)  # no unit can start here
        size = f"{len(source) / 2**20:.1f} MB"
        return Screening(False, False, f"not converted: {size} is more than e2k parses ({MAX_PARSE_BYTES >> 20} MB)")
    try:
        units = may_build_unit(source, constructor_names)
    except TooComplex as exc:
        return Screening(False, False, f"cannot parse: {exc}", exc.line)
    return Screening(parse=units or module_rules, units=units)
