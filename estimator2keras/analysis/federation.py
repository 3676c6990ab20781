"""Programs split across modules: one unit pass over all of their files.

Trainer packages split an Estimator program by role: ``trainer/model.py`` defines the
Estimator factory (``build_estimator(config, ...)``), the input_fns and the serving
function; ``trainer/task.py`` builds the RunConfig, the specs and calls
``train_and_evaluate``. Converted one file at a time, neither half can be converted: the
factory's calls are in the other file, and the other file's Estimator is built elsewhere.

Here the files that import one another are converted as one program:

1. ``groups`` finds, with CPython's ``ast`` and before any conversion, the files of the run
   linked by imports of one another (connected, each group small), one of them at least
   building an Estimator.
2. ``rewrite_group`` runs each file's passes up to the unit pass as usual, then one unit
   pass over all the files (``RewriteContext.begin_program_pass``): metadata, scopes,
   reaching definitions, findings and edits answer for the module that holds each node, and
   names resolve through the program's imports (``foreign_definition``, ``foreign_reads``).
   A unit is found where its Estimator is built and followed wherever its values go.
3. Imports the converted code needs are added to each module that reads them. The result
   is kept only if every module still defines what the others import from it and no module
   reads a name it does not define that it did not read before; otherwise (and when a
   rule fails) the files are converted without the program: nothing half-written.
"""
from __future__ import annotations

import ast
import builtins
import os
from typing import TYPE_CHECKING, Callable, Sequence

import libcst as cst
from libcst.metadata import Assignment, GlobalScope

from estimator2keras._program import _bindings
from estimator2keras.analysis.program import _import_of, _Modules

if TYPE_CHECKING:
    from estimator2keras._context import RewriteContext
    from estimator2keras._engine import FileResult
    from estimator2keras._registry import RuleSet

#: The most files one program pass takes (a larger import component is converted file by file).
MAX_GROUP = 12


# ---------------------------------------------------------------------------------------
# Finding the groups, before any conversion
# ---------------------------------------------------------------------------------------
def groups(sources: dict[str, bytes], builds: Callable[[bytes], bool],
           imported: Sequence[str] = ()) -> list[set[str]]:
    """Files linked by imports of one another, where one at least builds an Estimator
    (``builds`` tells from the bytes). A file of ``imported`` (one no rule has a word for,
    not read here) joins the group of a file of ``sources`` that imports it."""
    modules = _Modules([*sources, *imported])
    parent = {path: path for path in [*sources, *imported]}

    def find(path: str) -> str:
        while parent[path] != path:
            parent[path] = parent[parent[path]]
            path = parent[path]
        return path

    for path, source in sources.items():
        if b"import" not in source:
            continue
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for candidates in _bindings(tree).values():
            for level, dotted in candidates:
                found = modules.find(path, level, dotted) or modules.find(path, level, dotted.rpartition(".")[0])
                if found is not None and found != path:
                    parent[find(found)] = find(path)
    components: dict[str, set[str]] = {}
    for path in parent:
        components.setdefault(find(path), set()).add(path)
    return [group for group in components.values()
            if 1 < len(group) <= MAX_GROUP and any(p in sources and builds(sources[p]) for p in group)]


# ---------------------------------------------------------------------------------------
# Resolving names through the program's imports (during a program pass)
# ---------------------------------------------------------------------------------------
def _modules_of(ctx: "RewriteContext") -> _Modules | None:
    if ctx._modules is None:
        return None
    known = getattr(ctx, "_federation_modules", None)
    if known is None or known.files != set(ctx._modules):
        known = _Modules(ctx._modules)
        ctx._federation_modules = known
    return known


def _module_level(ctx: "RewriteContext", path: str, name: str):
    """The one module-level assignment of ``name`` in the program's module ``path``."""
    module = ctx._modules[path]
    if not module.body:
        return None
    ctx.resolve_module(path)
    scope = ctx.scope(module.body[0])
    if not isinstance(scope, GlobalScope):
        return None
    found = [a for a in scope.assignments[name] if isinstance(a, Assignment)]
    return found[0] if len(found) == 1 else None


def foreign_definition(ctx: "RewriteContext", node: cst.BaseExpression):
    """The module-level assignment, in another module of the program, that ``node`` names:
    ``model.input_fn`` after ``import trainer.model as model`` / ``from . import model``, or
    ``input_fn`` after ``from .model import input_fn``. None outside a program pass."""
    modules = _modules_of(ctx)
    if modules is None:
        return None
    caller = ctx.path_of(node)
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        bound = _import_of(ctx, node.value)
        if bound is None:
            return None
        level, module, attribute = bound
        dotted = f"{module}.{attribute}" if attribute and module else (attribute or module)
        found = modules.find(caller, level, dotted)
        name = node.attr.value
    elif isinstance(node, cst.Name):
        bound = _import_of(ctx, node)
        if bound is None or bound[2] is None:
            return None
        level, module, name = bound
        found = modules.find(caller, level, module)
    else:
        return None
    if found is None or found == caller:
        return None
    return _module_level(ctx, found, name)


def foreign_reads(ctx: "RewriteContext", target: cst.CSTNode) -> list[cst.BaseExpression]:
    """Reads, in the other modules of the program, of the module-level name ``target``
    binds (a function's name, an assigned Name): ``model.build_estimator`` (the Attribute)
    after ``import model``, or the Names bound by ``from model import build_estimator``."""
    modules = _modules_of(ctx)
    if modules is None:
        return []
    name = target.value if isinstance(target, cst.Name) else None
    if name is None:
        return []
    home = ctx.path_of(target)
    reads: list[cst.BaseExpression] = []
    sources = getattr(ctx, "_program_sources", {})
    for path, module in ctx._modules.items():
        if path == home or not module.body or (path in sources and name.encode() not in sources[path]):
            continue  # a module whose text does not spell the name does not read it
        ctx.resolve_module(path)
        scope = ctx.scope(module.body[0])
        if not isinstance(scope, GlobalScope):
            continue
        for assignment in scope.assignments:
            node = getattr(assignment, "node", None)
            if not isinstance(node, (cst.Import, cst.ImportFrom)) or not isinstance(assignment, Assignment):
                continue
            for access in assignment.references:
                read = access.node
                if not isinstance(read, cst.Name):
                    continue
                bound = _import_of(ctx, read)
                if bound is None:
                    continue
                level, dotted, attribute = bound
                parent = ctx.parent(read)
                if isinstance(parent, cst.Attribute) and parent.value is read and parent.attr.value == name:
                    full = f"{dotted}.{attribute}" if attribute and dotted else (attribute or dotted)
                    if modules.find(path, level, full) == home:
                        reads.append(parent)
                elif attribute == name and modules.find(path, level, dotted) == home:
                    reads.append(read)
    return reads


# ---------------------------------------------------------------------------------------
# Converting a group
# ---------------------------------------------------------------------------------------
def rewrite_group(paths: list[str], read: Callable[[str], bytes],
                  rules_for: Callable[[str], "RuleSet"]) -> list["FileResult"] | None:
    """Convert the files of one group in one unit pass; None when the program pass cannot
    be used (a rule failed, or the result would break a module): convert them otherwise."""
    from estimator2keras._engine import Job

    jobs = {p: Job(read(p), p, rules_for(p), force=True) for p in paths}
    live = {os.path.normpath(p): job for p, job in jobs.items() if job.result is None}
    if len(live) < 2:
        return None
    for job in live.values():
        for step in job.passes[:job.unit_index]:
            if not job.run(step):
                return None
    primary = sorted(live)[0]
    ctx = live[primary].ctx
    try:
        trees = ctx.begin_program_pass(
            {p: job.module for p, job in live.items()}, "E2K001",
            parsed={p: job.module is job.parsed for p, job in live.items()},
            suppressions={p: job.ctx.suppressions for p, job in live.items()})
        ctx._program_sources = {p: job.source for p, job in live.items()}
        for path, job in live.items():
            ctx.current = path
            job.run_shared(trees[path], "E2K001", ctx)
        ctx.current = primary
        from estimator2keras import _emit
        from estimator2keras._units import convert_units

        token = _emit.LINE_LIMIT.set(live[primary].line_limit)
        try:
            convert_units(ctx)
        finally:
            _emit.LINE_LIMIT.reset(token)
        results = ctx.finish_program_pass()
    except Exception:
        if os.environ.get("E2K_DEBUG_FEDERATION"):
            raise
        return None
    findings, ctx.findings = ctx.findings, []
    suppressed, ctx.suppressed = ctx.suppressed, []
    for path, job in live.items():
        job.ctx.findings.extend(f for f in findings if os.path.normpath(f.path) == path)
        job.ctx.suppressed.extend(f for f in suppressed if os.path.normpath(f.path) == path)
        job.module = results[path]
    broken = _unsound(live, ctx)
    if broken is not None and os.environ.get("E2K_DEBUG_FEDERATION") == "keep":
        print("federation would be refused:", broken)
        broken = None
    if broken is not None:
        if os.environ.get("E2K_DEBUG_FEDERATION"):
            print("federation refused:", broken)
        return None
    for job in live.values():
        for step in job.passes[job.unit_index + 1:]:
            if not job.run(step):
                return None
    return [job.result if job.result is not None else job.finish() for job in jobs.values()]


def _unsound(live: dict, ctx: "RewriteContext") -> str | None:
    """Queue, in each module, the imports its converted code reads (TensorFlow's, and the
    names another module of the program defines, imported the way the module already imports
    that module), and the removal of imports of names another module no longer defines and
    nothing reads; then why the program would break (None: every module reads only names it
    defines, or read before, and still defines what the others import from it)."""
    from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

    before, after = {}, {}
    for path, job in live.items():
        before[path] = _parse(job.parsed.code)
        after[path] = _parse(job.module.code) if job.module is not job.parsed else before[path]
        if before[path] is None or after[path] is None:
            return f"{path} does not parse"
    modules = _Modules(live)
    defined = {path: _top_level(after[path]) for path in live}
    # What each module defines itself (not what it imports): where a name is imported from.
    own = {path: _top_level(after[path], imports=False) for path in live}
    for path, job in live.items():
        bound = _bound(after[path])
        read = _read(after[path])
        imports = _from_imports(after[path], path, modules)
        if job.module is not job.parsed:
            for module, obj, asname in ctx._program_imports:
                name = asname or obj or module.split(".")[0]
                if name in read and name not in bound:
                    AddImportsVisitor.add_needed_import(job.ctx._codemod, module, obj, asname)
                    bound.add(name)
            for module, obj, asname in ctx._program_removals.get(path, ()):
                RemoveImportsVisitor.remove_unused_import(job.ctx._codemod, module, obj, asname)
            for name in sorted(read - _read(before[path]) - bound - set(dir(builtins))):
                # `train_fn()` where `import input` gave `input.train_fn`: imported by name, from
                # the module that defines it, as this module imports that module already.
                homes = [home for home in live if home != path and name in own[home]]
                spec = imports.get(homes[0]) if len(homes) == 1 else None
                if spec is None:
                    return f"{path} would read {name}, which it does not define"
                AddImportsVisitor.add_needed_import(job.ctx._codemod, spec[1], name, None, spec[0])
                bound.add(name)
        for home, (level, module, names) in imports.items():
            for name, asname in names:
                if modules.find(path, level, f"{module}.{name}" if module else name) is not None:
                    continue  # `from trainer import task`: a module of the package, not a name
                if name not in defined[home]:
                    if (asname or name) in read:
                        return f"{path} imports {name}, which {home} would no longer define"
                    # Imported for what the conversion replaced (`from model import model_fn`).
                    RemoveImportsVisitor.remove_unused_import(job.ctx._codemod, ("." * level) + module, name, asname)
        imported = _bindings(after[path])
        for node in _module_attribute_reads(after[path], set(imported)):
            for level, dotted in imported.get(node.value.id, ()):
                home = modules.find(path, level, dotted)
                if home is not None and home != path and node.attr not in defined[home]:
                    return f"{path} reads {node.value.id}.{node.attr}, which {home} would no longer define"
    return None


def _from_imports(tree: ast.Module, path: str, modules: _Modules) -> dict[str, tuple[int, str, list]]:
    """How the module ``path`` imports each other module of the program: the file -> (level,
    dotted module as written, the names ``from`` it imports with their aliases). A module
    imported whole (``import input``) can be imported from too (``from input import f``)."""
    found: dict[str, tuple[int, str, list]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and not any(a.name == "*" for a in node.names):
            home = modules.find(path, node.level, node.module or "")
            if home is not None and home != path:
                entry = found.setdefault(home, (node.level, node.module or "", []))
                entry[2].extend((a.name, a.asname) for a in node.names)
            for alias in node.names:  # `from . import model`: the module itself
                dotted = f"{node.module}.{alias.name}" if node.module else alias.name
                home = modules.find(path, node.level, dotted)
                if home is not None and home != path:
                    found.setdefault(home, (node.level, dotted, []))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                home = modules.find(path, 0, alias.name)
                if home is not None and home != path:
                    found.setdefault(home, (0, alias.name, []))
    return found


def _module_attribute_reads(tree: ast.Module, names: set[str]):
    """``name.attr`` reads where ``name`` is one of the module-level ``names`` (not a
    parameter or local of an enclosing function that shadows it)."""
    def walk(node, shadowed):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            local = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            shadowed = shadowed | local
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names
                and node.value.id not in shadowed):
            yield node
        for child in ast.iter_child_nodes(node):
            yield from walk(child, shadowed)

    yield from walk(tree, frozenset())


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _read(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _bound(tree: ast.Module) -> set[str]:
    """Every name the module binds anywhere (an approximation of its scopes: enough to tell
    a name the conversion reads but never defines)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names


def _top_level(tree: ast.Module, imports: bool = True) -> set[str]:
    """The names a module binds at its top level (with those its imports bind, or not)."""
    names: set[str] = set()
    for node in tree.body:
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) else [node]:
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(sub.name)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.add(sub.id)
            elif imports and isinstance(sub, (ast.Import, ast.ImportFrom)):
                names.update(a.asname or a.name.split(".")[0] for a in sub.names)
    return names
