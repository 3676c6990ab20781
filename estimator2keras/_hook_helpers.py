"""Hooks returned by a function of the program (``hooks_helper.get_train_hooks(names, ...)``,
TensorFlow's official models and their copies).

Such a helper builds its hooks where e2k cannot see which ones a run gets (by name, from a
registry of functions, from flags). e2k reads every hook the helper can build (the helper,
and the functions of its module it reaches, a registry dict of functions included) and
reports the helper with the hooks that decide: the ones e2k has no rule for, or, when it
would convert them all, that it does not convert hooks through a function yet.
"""
from __future__ import annotations

import os

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Unsupported

UNSUPPORTED_USE = "E2K902"


def helper_hooks(site, call: cst.Call, ctx, node: cst.CSTNode):
    """Raise the refusal for hooks returned by ``call``, naming the helper and what it builds."""
    helper = _emit.code(call.func)
    found = _helper_module(ctx, call.func)
    if found is None:
        raise Unsupported(f"the hooks come from `{helper}(...)`, a function whose source is not in this "
                          "program: e2k cannot tell which hooks it returns", node, UNSUPPORTED_USE)
    hctx, module, fn, where = found
    try:
        _refuse(helper, hctx, module, fn, where, node)
    finally:
        if hctx is not ctx:
            hctx.abandon_pass()


def _refuse(helper: str, hctx, module, fn, where: str, node):
    hooks = _reachable_hooks(hctx, module, fn)
    if not hooks:
        raise Unsupported(f"the hooks come from `{helper}(...)` ({where}), which builds no hook e2k can see",
                          node, UNSUPPORTED_USE)
    unknown = [h for h in hooks if not _has_rule(hctx, h)]
    if unknown:
        names = ", ".join(f"`{_emit.code(h.func)}(...)` (line {hctx.position(h)[0]})" for h in unknown)
        raise Unsupported(f"the hooks come from `{helper}(...)` ({where}), which can return {names}, which e2k has "
                          "no rule for: the hooks it returns are not converted", node, UNSUPPORTED_USE)
    names = ", ".join(sorted({_emit.code(h.func) for h in hooks}))
    raise Unsupported(f"the hooks come from `{helper}(...)` ({where}), which returns {names}: e2k converts these "
                      "hooks where they are passed, not through a function; pass them to the call",
                      node, UNSUPPORTED_USE)


def _helper_module(ctx, func: cst.BaseExpression):
    """(a context of the helper's module, its module node, the FunctionDef, where) or None."""
    if isinstance(func, cst.Name):
        fn = _module_function(ctx.module, func.value)
        scope = ctx.scope(func)
        if fn is not None and scope is not None:
            for access in scope.accesses[func.value]:
                if access.node is func:
                    referents = list(access.referents)
                    if len(referents) == 1 and getattr(referents[0], "node", None) is fn:
                        return ctx, ctx.module, fn, "this module"
    located = _locate(ctx, func)
    if located is None:
        return None
    path, name = located
    try:
        with open(path, "rb") as f:  # read only, to name the hooks it builds
            module = cst.parse_module(f.read())
    except Exception:
        return None
    fn = _module_function(module, name)
    if fn is None:
        return None
    from estimator2keras._context import RewriteContext

    hctx = RewriteContext(path, ctx.rules)
    hctx.begin_pass(module, "E2K406", parsed=True)  # only to read API paths and lines; abandoned
    return hctx, module, fn, os.path.basename(path)


def _locate(ctx, func: cst.BaseExpression) -> tuple[str, str] | None:
    """(file, function name) of ``module.function`` imported from a file beside this one
    (``from . import hooks_helper``, ``import hooks_helper``) or up its directories."""
    from estimator2keras.analysis.program import _import_of

    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    bound = _import_of(ctx, func.value)
    if bound is None or not ctx.path:
        return None
    level, module, attribute = bound
    dotted = f"{module}.{attribute}" if attribute and module else (attribute or module)
    parts = [p for p in (dotted or "").split(".") if p]
    if not parts:
        return None
    base = os.path.dirname(os.path.abspath(ctx.path))
    for _ in range(max(level - 1, 0)):
        base = os.path.dirname(base)
    while True:
        stem = os.path.join(base, *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate, func.attr.value
        parent = os.path.dirname(base)
        if level or parent == base:
            return None
        base = parent


def _module_function(module: cst.Module, name: str) -> cst.FunctionDef | None:
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return statement
    return None


def _reachable_hooks(ctx, module: cst.Module, fn: cst.FunctionDef) -> list[cst.Call]:
    """The hook constructions in ``fn`` and in the module's functions it reaches (directly or
    through module-level values that name them, such as a registry dict)."""
    functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    values = {}
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            values[target.target.value] = small.value
    seen_functions, seen_values = set(), set()
    todo: list[cst.CSTNode] = [fn]
    hooks: list[cst.Call] = []
    while todo:
        node = todo.pop()
        for inner in _walk(node):
            if isinstance(inner, cst.Call) and _is_hook(ctx, inner) and inner not in hooks:
                hooks.append(inner)
            if isinstance(inner, cst.Name):
                if inner.value in functions and inner.value not in seen_functions:
                    seen_functions.add(inner.value)
                    todo.append(functions[inner.value])
                elif inner.value in values and inner.value not in seen_values:
                    seen_values.add(inner.value)
                    todo.append(values[inner.value])
    return hooks


def _is_hook(ctx, call: cst.Call) -> bool:
    if not isinstance(call.func, (cst.Name, cst.Attribute)):
        return False
    name = call.func.value if isinstance(call.func, cst.Name) else call.func.attr.value
    return name.endswith("Hook") or _has_rule(ctx, call)


def _has_rule(ctx, call: cst.Call) -> bool:
    from estimator2keras._training import HOOK_ROLE

    path = ctx.call_api_path(call)
    return bool(path) and ctx.rules.expression_rule(HOOK_ROLE, path) is not None


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))
