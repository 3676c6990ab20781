"""Hooks returned by a function of the program (``hooks_helper.get_train_hooks(names, ...)``,
TensorFlow's official models and their copies).

A function of the same module whose every ``return`` is a list of hooks, each of which
becomes a callback that reads only what the hook read (``LoggingTensorHook``,
``NanTensorHook``; ``StepCounterHook`` goes, ``fit`` logs its steps per second), converts in
place: it returns the list of callbacks, and the call gives what it returns to ``fit`` as
``callbacks``. It must be called only by the Estimator calls that convert.

Otherwise the unit is refused (E2K902), naming the function and what decides: a helper in
another module builds its hooks where e2k does not edit, often chosen at run time (by name,
from a registry of functions, from flags); e2k reads every hook it can build (the function,
and the functions of its module it reaches, a registry dict of functions included) and
names the ones it has no rule for.
"""
from __future__ import annotations

import os

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Unsupported
from estimator2keras._nodes import walk_in_order as _walk

UNSUPPORTED_USE = "E2K902"
#: TensorFlow's official models' hook factory (`official.utils.logs.hooks_helper`, and
#: `official.r1.utils.logs` after the models moved there): every hook it can return by name
#: (LoggingTensorHook of the learning rate, loss and accuracy, ProfilerHook,
#: ExamplesPerSecondHook, LoggingMetricHook, StepCounterHook) only logs or profiles.
OFFICIAL_LOGGING_HOOKS = frozenset({
    "official.utils.logs.hooks_helper.get_train_hooks",
    "official.r1.utils.logs.hooks_helper.get_train_hooks",
})
LOGGING_HOOKS_NOTE = (
    "the hooks TensorFlow's official hooks_helper returns only log and profile (tensors, examples per second, "
    "a profile): they go; fit logs the loss and metrics at every step, and "
    "tf.keras.callbacks.TensorBoard(profile_batch=...) profiles")
#: Hooks whose callbacks read only what the hook call itself reads (not the model, not the
#: call they are passed to), so that they can be made where the hook was.
SELF_CONTAINED = frozenset({"LoggingTensorHook", "NanTensorHook", "StepCounterHook", "SummarySaverHook"})


def helper_hooks(site, call: cst.Call, ctx, node: cst.CSTNode):
    """Raise the refusal for hooks returned by ``call``, naming the helper and what it builds."""
    helper = _emit.code(call.func)
    from estimator2keras._symbols import _roots

    if _roots(ctx, call.func) & OFFICIAL_LOGGING_HOOKS:
        from estimator2keras._training import Hooks

        site.plan.fixed(call, "E2K406", LOGGING_HOOKS_NOTE)
        return Hooks()
    found = _helper_module(ctx, call.func)
    if found is None:
        raise Unsupported(f"the hooks come from `{helper}(...)`, a function whose source is not in this "
                          "program: e2k cannot tell which hooks it returns", node, UNSUPPORTED_USE)
    hctx, module, fn, where = found
    if hctx is ctx:
        converted = _convert_local(site, ctx, call, fn)
        if isinstance(converted, str):
            raise Unsupported(f"the hooks come from `{helper}(...)` ({where}): {converted}", node, UNSUPPORTED_USE)
        return converted
    try:
        _refuse(helper, hctx, module, fn, where, node)
    finally:
        hctx.abandon_pass()


def _convert_local(site, ctx, call: cst.Call, fn: cst.FunctionDef):
    """A function of this module whose every ``return`` is a list of hooks that each become
    one Keras callback: each list becomes the list of those callbacks, and the call passes
    what the function returns as ``callbacks``. Returns the call's ``Hooks``, or why not."""
    from estimator2keras._training import HOOK_ROLE, Hooks
    from estimator2keras._units import accesses_of

    plan = site.plan
    if site.phase != "train":
        return "hooks a function returns are converted for training only"
    reads = accesses_of(ctx, fn.name) or []
    if not reads or not all(plan.owns(read) for read in reads):
        return f"`{fn.name.value}` is also called elsewhere, and e2k would change what it returns"
    returns = [n for n in _walk(fn.body) if isinstance(n, cst.Return)]
    if not returns or any(isinstance(n, (cst.FunctionDef, cst.Lambda, cst.Yield)) for n in _walk(fn.body)):
        return "it is not a function that returns lists of hooks"
    from estimator2keras._units import Binding, resolve

    local = _Local(ctx, fn)
    made = []
    named: dict[cst.Call, cst.BaseExpression | None] = {}  # hooks bound to a name: what they became
    for ret in returns:
        if not isinstance(ret.value, (cst.List, cst.Tuple)):
            return f"it returns `{_emit.code(ret.value) if ret.value else 'None'}`, not a list of hooks e2k can follow"
        callbacks = []
        for element in ret.value.elements:
            bound = resolve(ctx, element.value) if isinstance(element.value, cst.Name) else None
            if isinstance(bound, Binding) and isinstance(bound.value, cst.Call) and _contains(fn, bound.statement):
                # `logging_hook = LoggingTensorHook(...)` in the function, returned by name.
                hook = bound.value
                if hook not in named:
                    converted = _convert_one(ctx, plan, site, local, hook)
                    if isinstance(converted, str):
                        return converted
                    rule, result = converted
                    if result.callback is None:
                        return f"`{element.value.value}` becomes no callback (fit does what it did), but is returned"
                    plan.replace(hook, result.callback)
                    named[hook] = result.callback
                    made.append((hook, rule, result))
                callbacks.append(element)
                continue
            if isinstance(element, cst.StarredElement) or not isinstance(element.value, cst.Call):
                return f"`{_emit.code(element.value)}` in the list it returns is not a hook e2k can follow"
            hook = element.value
            converted = _convert_one(ctx, plan, site, local, hook)
            if isinstance(converted, str):
                return converted
            rule, result = converted
            if result.callback is not None:  # the hooks that only logged what fit logs go
                callbacks.append(element.with_changes(value=result.callback))
            made.append((hook, rule, result))
        if callbacks and ret.value.elements:
            callbacks[-1] = callbacks[-1].with_changes(comma=ret.value.elements[-1].comma)  # the list's own layout
        if isinstance(ret.value, cst.List):
            plan.replace(ret.value, ret.value.with_changes(elements=callbacks))
        else:  # a list, which the call's other callbacks are added to
            plan.replace(ret.value, cst.List(elements=callbacks))
    for hook, rule, result in made:
        plan.fixed(hook, rule.code, result.note or f"`{_emit.code(hook.func)}` -> a Keras callback")
    plan.owned.append(fn)
    hooks = Hooks()
    hooks.callbacks.append(cst.StarredElement(call.deep_clone()))
    return hooks


def _convert_one(ctx, plan, site, local, hook: cst.Call):
    """(rule, HookConversion) of one hook the function makes, or why it does not convert there."""
    from estimator2keras._training import HOOK_ROLE, HookSite

    path = ctx.call_api_path(hook)
    rule = ctx.rules.expression_rule(HOOK_ROLE, path) if path else None
    if rule is None:
        return f"it returns `{_emit.code(hook.func)}(...)`, which e2k has no rule for"
    if path.rsplit(".", 1)[-1] not in SELF_CONTAINED:
        return (f"it returns `{_emit.code(hook.func)}(...)`, whose callback needs the model or the call "
                "it was passed to, which the function does not see")
    try:
        result = rule().convert(hook, ctx, plan.tf, HookSite(plan, site.phase, local.resolve))
    except Unsupported as exc:
        return f"`{_emit.code(hook.func)}(...)`: {exc.reason}"
    if result.dropped is not None:
        return f"`{_emit.code(hook.func)}(...)`: {result.dropped}"
    if result.num_steps is not None or result.last_step is not None or result.early_stop is not None \
            or result.estimator_arg is not None:
        return f"`{_emit.code(hook.func)}(...)` changes how long training runs, which a returned list cannot say"
    return rule, result


def _contains(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    return any(n is node for n in _walk(root))


class _Local:
    """Names in a helper function: its own single assignments, then the module's bindings,
    followed without moving them (the function stays where it is)."""

    def __init__(self, ctx, fn: cst.FunctionDef):
        self.ctx, self.fn = ctx, fn

    def resolve(self, node: cst.BaseExpression) -> cst.BaseExpression:
        from estimator2keras._units import Binding, resolve

        for _ in range(10):
            if not isinstance(node, cst.Name):
                return node
            bound = resolve(self.ctx, node)
            if not isinstance(bound, Binding):
                return node
            node = bound.value
        return node


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
                      "hooks where they are passed or in a function of the same module, not in another module",
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
