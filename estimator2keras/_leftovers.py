"""Fail closed: find every reference to an Estimator API that is left in a module.

The conversion starts at the Estimator constructors it recognises and follows values from
there; whatever it does not reach stays as it was. This module does not depend on any of
that: after every pass has run, it reads the module's final text with CPython's ``ast``
and names every expression that still refers to an Estimator API, resolved through imports
(``import tensorflow.compat.v1 as tf1``, ``from tensorflow import estimator as est``,
``from tensorflow.estimator import *``, ``import tensorflow_estimator``) and through aliases
bound by a plain assignment at module level (``tf1 = tf.compat.v1``, ``Est =
tf.estimator.Estimator``). The engine reports each one (E2K905), so that a file that still
runs Estimator code is never "unchanged" or "converted".

What counts as an Estimator API (``is_estimator_api``): anything under ``tf.estimator`` /
``tf.compat.v1.estimator`` / ``tensorflow_estimator`` / ``tensorflow.python.estimator``,
any API name with "estimator" in one of its parts (``tf.contrib.tpu.TPUEstimator``,
``tf.keras.estimator.model_to_estimator``, ``tf.contrib.estimator``,
``tf.contrib.boosted_trees.estimator_batch``), ``tf.contrib.learn``, the TPU Estimator's
``tf.contrib.tpu.RunConfig`` / ``TPUConfig`` / ``InputPipelineConfig``, and Keras'
``multi_gpu_model``.

It must stay cheap: a file whose bytes contain none of ``KEYWORDS`` cannot spell such a
reference (an import or a chain must name the namespace) and is never parsed for it.
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import difflib
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Iterator

from estimator2keras._names import api_path_of_qualified

#: A module that refers to an Estimator API spells one of these somewhere: the namespace in
#: an import or an attribute chain (case-sensitive bytes: "stimator" covers Estimator,
#: estimator, TPUEstimator, tensorflow_estimator, model_to_estimator). ``KEYWORDS`` is the
#: coarse filter for a whole tree (fewer words, fewer scans of each file's bytes);
#: ``mentions_estimator`` is exact ("contributors" in a licence header is no reference).
KEYWORDS = (b"stimator", b"contrib", b"multi_gpu_model", b"dtensor")
_EXACT = (b"stimator", b"contrib.", b"contrib import", b"import contrib", b"multi_gpu_model", b"dtensor")

_TPU_ESTIMATOR_SETTINGS = frozenset({"RunConfig", "TPUConfig", "InputPipelineConfig"})

#: What ``from tensorflow.estimator import *`` binds that programs use, for a module with
#: more than one star import (with one, every name the module does not bind is its).
_STAR_NAMES = frozenset(
    """Estimator EstimatorSpec RunConfig TrainSpec EvalSpec train_and_evaluate ModeKeys
    DNNClassifier DNNRegressor DNNEstimator LinearClassifier LinearRegressor LinearEstimator
    DNNLinearCombinedClassifier DNNLinearCombinedRegressor DNNLinearCombinedEstimator
    BaselineClassifier BaselineRegressor BaselineEstimator BoostedTreesClassifier
    BoostedTreesRegressor BoostedTreesEstimator WarmStartSettings VocabInfo Exporter
    FinalExporter LatestExporter BestExporter inputs export experimental tpu
    classifier_parse_example_spec regressor_parse_example_spec add_metrics
    CheckpointSaverHook LoggingTensorHook StopAtStepHook SessionRunHook Head
    TPUEstimator TPUEstimatorSpec TPUConfig InputPipelineConfig Experiment learn_runner
    numpy_input_fn pandas_input_fn""".split()
)
_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__builtins__", "__spec__", "__path__"}


def mentions_estimator(source: bytes) -> bool:
    """Whether ``source`` may refer to an Estimator API (False: it cannot)."""
    return any(word in source for word in _EXACT)


@lru_cache(maxsize=8192)
def is_estimator_api(qualified: str) -> bool:
    """Whether the fully qualified ``qualified`` (``tensorflow.compat.v1.estimator.RunConfig``)
    names an Estimator API."""
    if qualified == "tensorflow_estimator" or qualified.startswith("tensorflow_estimator."):
        return True
    path = api_path_of_qualified(qualified)
    if not path:
        return False
    parts = path.split(".")
    if any("estimator" in part.lower() for part in parts):
        return True
    if parts[:2] == ["contrib", "learn"]:
        return True
    if parts[:2] == ["contrib", "tpu"] and len(parts) > 2 and parts[2] in _TPU_ESTIMATOR_SETTINGS:
        return True
    return "multi_gpu_model" in parts


@dataclass(frozen=True)
class Reference:
    """One expression (or import) left in a module that refers to an Estimator API."""

    line: int
    #: 0-based offset in the line's UTF-8 bytes, as ``ast`` gives it.
    offset: int
    #: As written (``tf.estimator.EstimatorSpec``).
    text: str
    #: The fully qualified name it resolves to (``tensorflow.estimator.EstimatorSpec``).
    qualified: str = ""
    #: Why it is left, where the reference says more than its name (a class derived from it).
    note: str = ""
    #: "keras": Keras 2's DTensor API (``find_keras_removed``), not an Estimator's.
    kind: str = ""

    def describe(self) -> str:
        """``tf.estimator.EstimatorSpec`` as written; a name that an import or an alias
        renamed, with what it stands for (``Modes.EVAL (tf.estimator.ModeKeys.EVAL)``)."""
        if not self.qualified:
            return self.text
        note = f": {self.note}" if self.note else ""
        path = api_path_of_qualified(self.qualified) or self.qualified
        rest = self.text.partition(".")[2]
        if rest and (rest == path or rest.endswith("." + path)):
            return self.text + note
        spelled = "tf." + self.qualified[len("tensorflow."):] if self.qualified.startswith("tensorflow.") else self.qualified
        return f"{self.text} ({spelled}){note}"


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


class _Bindings:
    """What each name of a module may stand for, as fully qualified names: every import in
    any scope (a superset, as the pre-filter reads them) and module-level aliases."""

    def __init__(self) -> None:
        self.names: dict[str, set[str]] = {}
        #: (node, qualified module) of ``from <Estimator namespace> import *``.
        self.stars: list[tuple[ast.ImportFrom, str]] = []
        self.other_stars = 0
        #: (node, bound name, qualified) of each import of an Estimator API.
        self.imports: list[tuple[ast.stmt, str, str]] = []

    def add(self, name: str, qualified: str) -> None:
        self.names.setdefault(name, set()).add(qualified)

    def resolve(self, dotted: str) -> set[str]:
        first, dot, rest = dotted.partition(".")
        return {q + dot + rest for q in self.names.get(first, ())}


def _read_imports(imports: Iterable[ast.stmt], bindings: _Bindings) -> None:
    for node in imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    name, qualified = alias.asname, alias.name
                else:  # `import a.b.c` binds `a`; `a.b.c.X` is named as written
                    name = qualified = alias.name.partition(".")[0]
                bindings.add(name, qualified)
                if is_estimator_api(alias.name):
                    bindings.imports.append((node, name, alias.name))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:  # relative imports never name TensorFlow
                if alias.name == "*":
                    if is_estimator_api(node.module):
                        bindings.stars.append((node, node.module))
                    else:
                        bindings.other_stars += 1
                    continue
                name, qualified = alias.asname or alias.name, f"{node.module}.{alias.name}"
                bindings.add(name, qualified)
                if is_estimator_api(qualified):
                    bindings.imports.append((node, name, qualified))
        elif isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            bindings.other_stars += 1


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True)
class Index:
    """What the pre-filter and this check read of a module, gathered in one walk."""

    imports: list[ast.stmt]
    #: The outermost attribute chains and names (``tf.estimator.ModeKeys.TRAIN``, not also
    #: ``tf.estimator``), with their dotted text.
    chains: list[tuple[ast.expr, str]]
    #: The callee of every ``name(...)`` / ``a.b(...)`` call.
    calls: list[ast.expr]
    #: Every ``name = <name or attribute>`` (an alias, maybe), in any scope.
    aliases: list[ast.Assign]


_last: tuple[ast.Module, Index] | None = None


def index(tree: ast.Module) -> Index:
    """The module's ``Index`` (the last one is kept: the pre-filter and the check read the
    same tree of a file that the passes did not change).

    This walk is the check's whole cost on a file that only mentions "estimator", so it is
    written out: ``ast.walk`` also visits every ``Load()`` and reads fields generically."""
    global _last
    if _last is not None and _last[0] is tree:
        return _last[1]
    imports: list[ast.stmt] = []
    chains: list[tuple[ast.expr, str]] = []
    calls: list[ast.expr] = []
    aliases: list[ast.Assign] = []
    stack: list[ast.AST] = [tree]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        kind = type(node)
        if kind is ast.Name:
            chains.append((node, node.id))  # type: ignore[attr-defined]
            continue
        if kind is ast.Attribute:
            dotted = _dotted(node)  # type: ignore[arg-type]
            if dotted is not None:
                chains.append((node, dotted))  # type: ignore[arg-type]
                continue
        elif kind is ast.Import or kind is ast.ImportFrom:
            imports.append(node)  # type: ignore[arg-type]
            continue
        elif kind is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            if type(func) is ast.Name or type(func) is ast.Attribute:
                calls.append(func)
        elif kind is ast.Assign:
            targets, value = node.targets, node.value  # type: ignore[attr-defined]
            if len(targets) == 1 and type(targets[0]) is ast.Name and (type(value) is ast.Name or type(value) is ast.Attribute):
                aliases.append(node)  # type: ignore[arg-type]
        fields = _CHILD_FIELDS.get(kind)
        if fields is None:
            fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f != "ctx")
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        push(item)
            elif isinstance(value, ast.AST):
                push(value)
    found = Index(imports, chains, calls, aliases)
    _last = (tree, found)
    return found


def _module_statements(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """The module's statements in order, into if/try/with/for blocks (not defs or classes)."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _module_statements(getattr(statement, field, ()) or ())
        for handler in getattr(statement, "handlers", ()) or ():
            yield from _module_statements(handler.body)


def _read_aliases(tree: ast.Module, bindings: _Bindings) -> None:
    """``tf1 = tf.compat.v1``, ``est = tf1.estimator``, ``Est = est.Estimator``: in order, at
    module level, a name bound to a chain that resolves to TensorFlow stands for it too."""
    for statement in _module_statements(tree.body):
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        dotted = _dotted(value)
        if dotted is None:
            continue
        resolved = {q for q in bindings.resolve(dotted) if q.startswith("tensorflow") or api_path_of_qualified(q) is not None}
        if not resolved:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                for qualified in resolved:
                    bindings.add(target.id, qualified)


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the module binds anywhere (for star imports: the rest come from them)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add(alias.asname or alias.name.partition(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return bound


def find_references(tree: ast.Module) -> list[Reference]:
    """Every reference to an Estimator API in ``tree``, in file order: one per expression
    (the longest attribute chain: ``tf.estimator.ModeKeys.TRAIN``, not also
    ``tf.estimator``), plus each import of one whose names are used nowhere else."""
    found_in = index(tree)
    imports, chains = found_in.imports, found_in.chains
    if not imports:
        return []
    bindings = _Bindings()
    _read_imports(imports, bindings)
    if not bindings.names and not bindings.stars:
        return []
    _read_aliases(tree, bindings)
    # With `from tensorflow.estimator import *`, a name the module does not bind is the
    # star import's (when other star imports could bind it too, only the names it exports).
    bound: set[str] = _bound_names(tree) if bindings.stars else set()
    only_known = bindings.other_stars > 0 or len(bindings.stars) > 1
    star_module = bindings.stars[0][1] if bindings.stars else ""

    found: list[Reference] = []
    used_names: set[str] = set()
    stars_used = False
    names = bindings.names
    for node, dotted in chains:
        first, dot, rest = dotted.partition(".")
        if first not in names:
            if not bindings.stars or first in bound or first in _BUILTINS or (only_known and first not in _STAR_NAMES):
                continue
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                continue
            qualified = {f"{star_module}.{dotted}"}
            from_star = True
        else:
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                continue
            qualified = {q + dot + rest for q in names[first]}
            from_star = False
        hits = sorted(q for q in qualified if is_estimator_api(q))
        if hits:
            found.append(Reference(node.lineno, node.col_offset, dotted, hits[0]))
            used_names.add(first)
            stars_used = stars_used or from_star
    for node, name, qualified in bindings.imports:
        if name not in used_names:
            found.append(Reference(node.lineno, node.col_offset, _import_text(node, qualified)))
    if not stars_used:
        for node, module in bindings.stars:
            found.append(Reference(node.lineno, node.col_offset, f"from {module} import *"))
    found.sort(key=lambda r: (r.line, r.offset))
    if any(r.text.endswith("Estimator") for r in found):
        found = _subclassed(tree, found)
    return found


def _subclassed(tree: ast.Module, found: list[Reference]) -> list[Reference]:
    """References that are the base of a class of the program (``class RegressionEstimator(
    tf.estimator.Estimator)``), noted as such: the program builds its own Estimator class."""
    at = {(r.line, r.offset): i for i, r in enumerate(found)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                index = at.get((base.lineno, base.col_offset))
                if index is not None:
                    found[index] = dataclasses.replace(found[index], note=(
                        f"the program's class `{node.name}` derives from it, which e2k does not convert (it "
                        "converts Estimators of tf.estimator's own classes): build the Estimator with a "
                        "function that returns it, its model_fn a function of the module, then convert"))
    return found


#: TensorFlow 1 modules TensorFlow 2 has not even under ``tf.compat.v1``.
REMOVED = ("contrib.", "examples.tutorials.")


def _is_contrib_api(qualified: str) -> bool:
    """Does the fully qualified name name tf.contrib (or the tutorials' ``input_data``, also
    gone from TensorFlow 2), other than an Estimator API?"""
    return (api_path_of_qualified(qualified) or "").startswith(REMOVED) and not is_estimator_api(qualified)


def removed_module(reference: Reference) -> str:
    """The module of TensorFlow 1 the reference names, which TensorFlow 2 has not."""
    path = api_path_of_qualified(reference.qualified) or ""
    return "tensorflow.examples.tutorials" if path.startswith("examples.") else "tf.contrib"


def is_contrib(reference: Reference) -> bool:
    """Is the reference one of ``find_contrib``'s (tf.contrib, not an Estimator API)?"""
    return bool(reference.qualified) and _is_contrib_api(reference.qualified)


def _module_bindings(tree: ast.Module) -> _Bindings | None:
    """What the module's imports and module-level aliases bind (None: nothing of TensorFlow's)."""
    found_in = index(tree)
    if not found_in.imports:
        return None
    bindings = _Bindings()
    _read_imports(found_in.imports, bindings)
    if not bindings.names:
        return None
    _read_aliases(tree, bindings)
    return bindings


def _qualified(bindings: _Bindings, dotted: str) -> list[str]:
    """The fully qualified names ``dotted`` (``tf.keras.layers.Dense``) may stand for."""
    first, dot, rest = dotted.partition(".")
    return sorted(q + dot + rest for q in bindings.names.get(first, ()))


def _chains_to(tree: ast.Module, bindings: _Bindings, wanted, kind: str = "") -> list[Reference]:
    """Each read of a name or attribute chain that resolves to a qualified name ``wanted`` takes."""
    found = []
    for node, dotted in index(tree).chains:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            continue
        hits = [q for q in _qualified(bindings, dotted) if wanted(q)]
        if hits:
            found.append(Reference(node.lineno, node.col_offset, dotted, hits[0], kind=kind))
    return found


def find_contrib(tree: ast.Module) -> list[Reference]:
    """Every reference to ``tf.contrib`` (not an Estimator API: those are ``find_references``'s)
    in ``tree``, in file order: TensorFlow 2 has no ``tf.contrib``, so code a conversion left
    calling it fails where the converted program runs it."""
    bindings = _module_bindings(tree)
    return [] if bindings is None else _chains_to(tree, bindings, _is_contrib_api)


#: Keras 2's DTensor integration, which Keras 3 (TensorFlow 2.16+) removed with Estimator:
#: the tf.keras.dtensor namespace, and the layout and mesh arguments of Keras's own classes.
KERAS_REMOVED = "keras.dtensor"
_DTENSOR_KEYWORDS = ("mesh",)  # and every "*_layout" keyword: kernel_layout=, bias_layout=...


def is_keras_removed(reference: Reference) -> bool:
    """Is the reference one of ``find_keras_removed``'s (Keras 2's DTensor API)?"""
    return reference.kind == "keras"


def find_keras_removed(tree: ast.Module) -> list[Reference]:
    """Every use of Keras 2's DTensor integration in ``tree``, in file order: a reference to
    ``tf.keras.dtensor`` (``LayoutMap``, its optimizers), and a ``mesh=`` or ``*_layout=``
    argument of a tf.keras class (``Dense(kernel_layout=...)``, ``metrics.Mean(mesh=mesh)``).
    Keras 3 has none of them: the program stops running on the TensorFlow that removed
    Estimator (docs/jax-target.md says what replaces them: ``keras.distribution``)."""
    bindings = _module_bindings(tree)
    if bindings is None:
        return []
    found = _chains_to(tree, bindings, lambda q: (api_path_of_qualified(q) or "").startswith(KERAS_REMOVED), "keras")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        dotted = _dotted(node.func)
        keras = [q for q in _qualified(bindings, dotted or "") if (api_path_of_qualified(q) or "").startswith("keras.")
                 and not (api_path_of_qualified(q) or "").startswith(KERAS_REMOVED)]
        if not keras:
            continue
        for keyword in node.keywords:
            if keyword.arg and (keyword.arg in _DTENSOR_KEYWORDS or keyword.arg.endswith("_layout")):
                found.append(Reference(keyword.value.lineno, keyword.value.col_offset,
                                       f"{dotted}({keyword.arg}=...)", kind="keras"))
    return sorted(found, key=lambda r: (r.line, r.offset))


def _import_text(node: ast.stmt, qualified: str) -> str:
    if isinstance(node, ast.ImportFrom):
        module, _, name = qualified.rpartition(".")
        return f"from {module} import {name}"
    return f"import {qualified}"


def parse(source: bytes) -> ast.Module | None:
    """CPython's tree of ``source``, or None when CPython cannot build one."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


# -- positions ---------------------------------------------------------------------------
def column(lines: list[bytes], line: int, offset: int) -> int:
    """The 1-based column (in characters, as findings count) of a UTF-8 byte offset."""
    if 0 < line <= len(lines):
        return len(lines[line - 1][:offset].decode("utf-8", errors="replace")) + 1
    return offset + 1


class LineMap:
    """Lines of a rewritten text -> the lines of the original that they come from (for a
    line the rewrite wrote, the original line it replaced or was inserted at), so that
    findings on the output are reported where the user sees them in their file."""

    def __init__(self, original: list[bytes], new: list[bytes]):
        self.same = original == new
        self._blocks = [] if self.same else difflib.SequenceMatcher(None, original, new, autojunk=False).get_opcodes()
        self._last = max(1, len(original))

    def __call__(self, line: int) -> tuple[int, bool]:
        """(original line, whether the line is the original one, unchanged)."""
        if self.same:
            return line, True
        for tag, i1, i2, j1, j2 in self._blocks:
            if j1 < line <= j2:
                if tag == "equal":
                    return i1 + (line - j1), True
                return min(i1 + 1, self._last), False
        return self._last, False

    def forward(self, line: int) -> range:
        """The lines of the rewritten text that line ``line`` of the original became: itself
        where unchanged, every line of the block written in its place; none where it went."""
        if self.same:
            return range(line, line + 1)
        for tag, i1, i2, j1, j2 in self._blocks:
            if i1 < line <= i2:
                if tag == "equal":
                    return range(j1 + line - i1, j1 + line - i1 + 1)
                return range(j1 + 1, j2 + 1)
        return range(0)


# -- definitions, for the program-level pass ---------------------------------------------
def top_level_definitions(tree: ast.Module) -> tuple[tuple[str, int, int], ...]:
    """(name, first line, last line) of each function and class a module defines at its top
    level (in if/try blocks too), decorators included."""
    out = []
    for statement in _module_statements(tree.body):
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([statement.lineno, *(d.lineno for d in statement.decorator_list)])
            out.append((statement.name, start, statement.end_lineno or statement.lineno))
    return tuple(out)


def holding(definitions: Iterable[tuple[str, int, int]], lines: Iterable[int]) -> tuple[tuple[str, int, int], ...]:
    """The ``definitions`` whose lines hold one of ``lines``."""
    import bisect

    marks = sorted(set(lines))
    out = []
    for name, first, last in definitions:
        at = bisect.bisect_left(marks, first)
        if at < len(marks) and marks[at] <= last:
            out.append((name, first, last))
    return tuple(out)


@dataclass(frozen=True)
class Code:
    """One piece of a module's top-level code: a function or class (``name``), or a statement
    of the module's own code (named "<module>"; of an if/for/with/try block, its header)."""

    name: str
    first: int
    last: int
    #: The module-level names it binds, and those it reads (a function's own locals left out).
    binds: frozenset[str]
    reads: frozenset[str]


_BLOCKS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try) + (
    (ast.TryStar,) if hasattr(ast, "TryStar") else ()) + ((ast.Match,) if hasattr(ast, "Match") else ())


def _names(nodes: Iterable[ast.AST]) -> tuple[set[str], set[str]]:
    """(bound, read) names in ``nodes`` and everything under them."""
    bound: set[str] = set()
    read: set[str] = set()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Name):
                (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update(alias.asname or alias.name.partition(".")[0] for alias in node.names if alias.name != "*")
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not top:
                bound.add(node.name)
    return bound, read


def top_level_code(tree: ast.Module) -> list[Code]:
    """Each function and class the module defines at its top level (in if/try blocks too,
    decorators included), and each other statement of its top-level code, in order: a
    simple statement whole, a block by its header (its body's statements come apart)."""
    out: list[Code] = []
    for statement in _module_statements(tree.body):
        first = statement.lineno
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([first, *(d.lineno for d in statement.decorator_list)])
            parameters = [statement.args] if hasattr(statement, "args") else []
            inner, read = _names([*statement.decorator_list, *getattr(statement, "bases", ()),
                                  *getattr(statement, "keywords", ()), *parameters, *statement.body])
            declared = {n for node in ast.walk(statement) if isinstance(node, (ast.Global, ast.Nonlocal))
                        for n in node.names}
            # What the function binds is its own, unless declared global; what it reads that it
            # does not bind is the module's.
            out.append(Code(statement.name, first, statement.end_lineno or first,
                            frozenset({statement.name} | (inner & declared)), frozenset(read - (inner - declared))))
        elif isinstance(statement, _BLOCKS):
            parts = [value for field, value in ast.iter_fields(statement)
                     if field not in ("body", "orelse", "finalbody", "handlers", "cases")]
            header = [p for part in parts for p in (part if isinstance(part, list) else [part])
                      if isinstance(p, ast.AST)]
            for case in getattr(statement, "cases", ()):  # `case Pattern(x) if guard:`
                header += [case.pattern] + ([case.guard] if case.guard is not None else [])
            bound, read = _names(header)
            body = [s.lineno for s in getattr(statement, "body", ()) or ()]
            last = max(first, min(body) - 1) if body else (statement.end_lineno or first)
            out.append(Code("<module>", first, last, frozenset(bound), frozenset(read)))
        else:
            bound, read = _names([statement])
            out.append(Code("<module>", first, statement.end_lineno or first, frozenset(bound), frozenset(read)))
    return out
