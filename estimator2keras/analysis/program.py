"""Whole-program conversion: a model_fn defined in one module, given to an Estimator in another.

Trainer packages split an Estimator program: ``trainer/model.py`` defines ``model_fn`` and
``trainer/task.py`` builds ``tf.estimator.Estimator(model_fn=model.model_fn, ...)`` (Google
Cloud's samples), or a script imports ``from model import model_fn``. The files of such a
program convert together:

1. ``links`` finds, with CPython's ``ast`` and before any file is converted, the files whose
   Estimator constructions name a function of another file of the run; each such group is
   converted by ``rewrite_program`` in one job.
2. Converting the consumer (``task.py``), E2K001 asks ``Program.foreign_model_fn`` what the
   model_fn becomes: the program converts it once in its own module's context (its names,
   its imports) and answers with the builder's name and arguments, or why it cannot.
3. When the consumer's unit converts, it requests that conversion of the provider; the
   provider (``model.py``) is converted again with the request, its model_fn replaced by the
   Keras model and its builder, as E2K001 replaces one in the same file.
4. A request the provider's conversion cannot honour (the builder named otherwise, the
   model_fn used there too) converts the whole group again without the program: each file
   as it converts alone, nothing half-written across files.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import libcst as cst
from libcst.metadata import GlobalScope

from estimator2keras._program import _bindings
from estimator2keras._program import _Modules as _RunModules

if TYPE_CHECKING:
    from estimator2keras._context import RewriteContext
    from estimator2keras._engine import FileResult
    from estimator2keras._registry import RuleSet


class _Modules(_RunModules):
    """The run's files as ``import`` finds them (``_program``), from the importing file."""

    def __init__(self, files):
        super().__init__(os.path.normpath(f) for f in files)

    def find(self, caller: str, level: int, dotted: str) -> str | None:  # noqa: D102 (the caller's file)
        return super().find(os.path.dirname(os.path.normpath(caller)), level, dotted)


# ---------------------------------------------------------------------------------------
# Finding the groups, before any conversion
# ---------------------------------------------------------------------------------------
#: Estimator constructors whose model_fn may come from another module (by their last name).
_CONSTRUCTORS = frozenset({"Estimator", "TPUEstimator"})


def links(sources: dict[str, bytes], modules: _Modules | None = None) -> list[set[str]]:
    """Groups of files to convert together: a file whose Estimator construction names a
    function of another file of the run, with that file. Only files that spell an Estimator
    constructor and ``model_fn`` are parsed."""
    modules = modules or _Modules(sources)
    edges: list[tuple[str, str]] = []
    for path, source in sources.items():
        if b"model_fn" not in source or not any(name.encode() + b"(" in source for name in _CONSTRUCTORS):
            continue
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for provider in _providers(tree, path, modules):
            if provider != os.path.normpath(path):
                edges.append((os.path.normpath(path), provider))
    groups: list[set[str]] = []
    for consumer, provider in edges:
        joined = [g for g in groups if consumer in g or provider in g]
        merged = {consumer, provider}.union(*joined)
        groups = [g for g in groups if g not in joined] + [merged]
    return groups


def _providers(tree: ast.Module, path: str, modules: _Modules) -> set[str]:
    imports = _bindings(tree)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if last not in _CONSTRUCTORS:
            continue
        value = next((k.value for k in node.keywords if k.arg == "model_fn"), node.args[0] if node.args else None)
        target = _function_file(value, imports, path, modules)
        if target is not None:
            found.add(target)
    return found


def _function_file(value, imports, path: str, modules: _Modules) -> str | None:
    """The file defining the function ``value`` names (``model.model_fn``, an imported name)."""
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        candidates = [(level, dotted) for level, dotted in imports.get(value.value.id, ())]
    elif isinstance(value, ast.Name):  # `from model import model_fn`: the module before the name
        candidates = [(level, dotted.rpartition(".")[0]) for level, dotted in imports.get(value.id, ())]
    else:
        return None
    return next((f for f in (modules.find(path, level, dotted) for level, dotted in candidates) if f), None)


# ---------------------------------------------------------------------------------------
# The conversion of a group
# ---------------------------------------------------------------------------------------
@dataclass
class ForeignModelFn:
    """What a model_fn of another module becomes: its builder, and how the consumer calls it."""

    provider: str
    name: str
    builder: str
    arguments: tuple[str, ...]
    predictions_kind: str | None


@dataclass
class Program:
    """The files of one group, and the conversions one asks of another."""

    sources: dict[str, bytes]
    rules_for: Callable[[str], "RuleSet"]
    modules: _Modules = field(init=False)
    #: provider path -> model_fn name -> what the consumer's committed conversion calls.
    requests: dict[str, dict[str, ForeignModelFn]] = field(default_factory=dict)
    _answers: dict[tuple[str, str], "ForeignModelFn | str"] = field(default_factory=dict)
    #: provider path -> model_fn name -> why it is left (its consumer's Estimator is refused).
    left: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.modules = _Modules(self.sources)

    # -- the consumer's side --------------------------------------------------------------
    def locate(self, ctx: "RewriteContext", node: cst.BaseExpression) -> tuple[str, str] | None:
        """(file, function name) of a model_fn named in ``ctx``'s module but defined in another
        file of the program: ``model.model_fn`` after ``import trainer.model as model``,
        ``model_fn`` after ``from model import model_fn``."""
        from estimator2keras._units import _single_assignment

        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            bound = _import_of(ctx, node.value)
            if bound is None:
                return None
            level, module, attribute = bound
            dotted = f"{module}.{attribute}" if attribute and module else (attribute or module)
            found = self.modules.find(ctx.path, level, dotted)
            return (found, node.attr.value) if found else None
        if isinstance(node, cst.Name):
            assignment = _single_assignment(ctx, node)
            bound = _import_of(ctx, node)
            if bound is None or assignment is None:
                return None
            level, module, attribute = bound
            if attribute is None:
                return None
            found = self.modules.find(ctx.path, level, module)
            return (found, attribute) if found else None
        return None

    def foreign_model_fn(self, ctx: "RewriteContext", node: cst.BaseExpression) -> "ForeignModelFn | str | None":
        """What the model_fn ``node`` names becomes in its own module (None: it is not one of
        the program's; a string: why it cannot convert)."""
        located = self.locate(ctx, node)
        if located is None:
            return None
        if located not in self._answers:
            self._answers[located] = self._convert(*located, plan=None)[0]
        return self._answers[located]

    def request(self, foreign: ForeignModelFn) -> None:
        self.requests.setdefault(foreign.provider, {})[foreign.name] = foreign

    def leave(self, provider: str, name: str, message: str, code: str) -> None:
        """The consumer's Estimator is refused: its model_fn ``name`` of ``provider`` stays, and
        the provider says why where it defines it."""
        self.left.setdefault(os.path.normpath(provider), {})[name] = (message, code)

    # -- the provider's side --------------------------------------------------------------
    def left_for(self, path: str) -> dict[str, tuple[str, str]]:
        return dict(self.left.get(os.path.normpath(path), {}))

    def requests_for(self, path: str) -> list[ForeignModelFn]:
        return list(self.requests.get(os.path.normpath(path), {}).values())

    def _convert(self, path: str, name: str, plan):
        """Convert the model_fn ``name`` of ``path`` in a context of its own (the same
        conversion its module's pass makes when asked): (answer, statements)."""
        from estimator2keras._context import RewriteContext
        from estimator2keras._rule import Unsupported

        source = self.sources.get(path)
        if source is None:
            return f"{os.path.basename(path)} is not read", None
        try:
            module = cst.parse_module(source)
        except Exception:
            return f"{os.path.basename(path)} does not parse", None
        ctx = RewriteContext(path, self.rules_for(path))
        ctx.begin_pass(module, "E2K001", parsed=True)
        try:
            return convert_foreign(ctx, name, None)
        except Unsupported as exc:
            return exc.reason, None
        finally:
            ctx.abandon_pass()


def _import_of(ctx: "RewriteContext", name: cst.Name) -> tuple[int, str, str | None] | None:
    """(level, module, attribute) of the import binding ``name``, or None."""
    from estimator2keras._units import _single_assignment

    assignment = _single_assignment(ctx, name)
    node = getattr(assignment, "node", None)
    if isinstance(node, cst.Import):
        for alias in node.names:
            bound = alias.asname.name.value if alias.asname else cst.Module([]).code_for_node(alias.name).split(".")[0]
            if bound == name.value:
                dotted = cst.Module([]).code_for_node(alias.name)
                return (0, dotted, None) if alias.asname or "." not in dotted else None
    if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
        module = cst.Module([]).code_for_node(node.module) if node.module is not None else ""
        for alias in node.names:
            bound = alias.asname.name.value if alias.asname else cst.Module([]).code_for_node(alias.name)
            if bound == name.value:
                return (len(node.relative), module, cst.Module([]).code_for_node(alias.name))
    return None


def convert_foreign(ctx: "RewriteContext", name: str, expected: ForeignModelFn | None):
    """Convert the module-level model_fn ``name`` of ``ctx``'s module (raises Unsupported):
    (ForeignModelFn, the statements that replace its definition). With ``expected``, the
    answer must be the one the consumer was given."""
    from estimator2keras import _emit
    from estimator2keras._modelfn import convert_model_fn
    from estimator2keras._rule import Unsupported
    from estimator2keras._units import accesses_of, tf_alias

    fn = next((s for s in ctx.module.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)
    if fn is None:
        raise Unsupported(f"`{name}` is not a function defined at the top of its module", None)
    if accesses_of(ctx, fn.name):
        raise Unsupported(f"`{name}` is used in its own module too; e2k replaces it", fn.name)
    scope = ctx.scope(fn)
    if not isinstance(scope, GlobalScope):
        raise Unsupported(f"`{name}` is not a module-level function", fn)
    taken = {a.name for a in scope.assignments} | {a.node.value for a in scope.accesses}
    reported = len(ctx.findings)
    tf, needs_import = tf_alias(ctx)
    conversion = convert_model_fn(fn, ctx, tf, taken, None)
    if len(ctx.findings) > reported:
        raise Unsupported(f"`{name}` converts only with notes for a human, which e2k does not carry across modules yet", fn)
    answer = ForeignModelFn(os.path.normpath(ctx.path), name, conversion.builder_name, tuple(conversion.arguments),
                            conversion.predictions_kind)
    if expected is not None and (answer.builder, answer.arguments) != (expected.builder, expected.arguments):
        raise Unsupported(f"`{name}` converts to `{answer.builder}` here, not to what its caller was given", fn)
    statements = list(conversion.statements)
    for i in range(1, len(statements)):
        statements[i] = statements[i].with_changes(leading_lines=[_emit.blank_line()] * 2)
    if needs_import:
        ctx.add_import("tensorflow", asname="tf")
    return answer, statements


def rewrite_program(paths: list[str], read: Callable[[str], bytes], rules_for: Callable[[str], "RuleSet"],
                    rewrite: Callable[..., "FileResult"]) -> list["FileResult"]:
    """Convert the files of one group together; every file old or new. ``rewrite(source,
    path, rules, program=...)`` converts one file."""
    sources = {os.path.normpath(p): read(p) for p in paths}
    program = Program(sources, rules_for)
    first = {p: rewrite(sources[os.path.normpath(p)], p, rules_for(p), program=program) for p in paths}
    if not program.requests and not program.left:
        return list(first.values())
    results = dict(first)
    for path in paths:
        if program.left_for(path) and not program.requests_for(path):
            # A model_fn left with its refused Estimator: marked with why, in its own file.
            results[path] = rewrite(sources[os.path.normpath(path)], path, rules_for(path), program=program)
    if not program.requests:
        return list(results.values())
    for path in paths:
        if program.requests_for(path):
            results[path] = rewrite(sources[os.path.normpath(path)], path, rules_for(path), program=program)
            if not getattr(results[path], "program_honoured", False):
                # The provider could not make what its consumer now calls: each file alone.
                return [rewrite(sources[os.path.normpath(p)], p, rules_for(p)) for p in paths]
    return list(results.values())
