"""Values a program computes from constants, evaluated as Python would.

Real programs seldom spell their feature names and vocabularies as literals:
``CSV_COLUMNS = "age,workclass,education".split(",")``, ``FEATURES = [c for c in CSV_COLUMNS
if c != LABEL]``, ``NUMERIC = ["f%d" % i for i in range(4)]``. Where such a value is made only
of literals, module-level names bound once to such values, and the pure builtins and
string methods below, ``constant_value`` computes it, so that a loop over it is read like a
loop over the list it makes. Anything else (a call of the program, a file read, a name
bound twice) is not a constant: ``NotConstant``.
"""
from __future__ import annotations

import operator

import libcst as cst

#: Results larger than this are not spelled out (a loop over them would not be either).
MAX_ITEMS = 1000

_BINARY = {
    cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul, cst.Modulo: operator.mod,
    cst.FloorDivide: operator.floordiv, cst.Divide: operator.truediv,
}
_COMPARE = {
    cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt, cst.GreaterThan: operator.gt,
    cst.LessThanEqual: operator.le, cst.GreaterThanEqual: operator.ge,
    cst.In: lambda a, b: a in b, cst.NotIn: lambda a, b: a not in b,
}
#: Builtins that compute from their arguments only.
_BUILTINS = {"range": range, "len": len, "list": list, "tuple": tuple, "sorted": sorted, "str": str, "int": int,
             "float": float, "reversed": lambda x: list(reversed(x)), "enumerate": lambda x: list(enumerate(x)),
             "zip": lambda *xs: list(zip(*xs)), "dict": dict}
#: Methods of strings, lists and dicts that compute a new value without changing theirs.
_METHODS = {"split", "strip", "lstrip", "rstrip", "lower", "upper", "replace", "format", "join", "keys", "values",
            "items", "get", "startswith", "endswith", "copy", "index", "count"}
_SCALARS = (str, int, float, bool, type(None))


class NotConstant(Exception):
    """The value is not computed from constants alone."""


def constant_value(expr: cst.BaseExpression, lookup, env: dict | None = None, depth: int = 0):
    """The value of ``expr``. ``lookup(name_node)`` gives the expression a name is bound to
    once (or None); ``env`` the values of a comprehension's variables."""
    if depth > 40:
        raise NotConstant("too deep")
    env = env or {}
    again = lambda node, inner=env: constant_value(node, lookup, inner, depth + 1)  # noqa: E731
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)):
        value = expr.evaluated_value
        if value is None:
            raise NotConstant("an f-string")
        return value
    if isinstance(expr, cst.Name):
        if expr.value in env:
            return env[expr.value]
        if expr.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[expr.value]
        bound = lookup(expr)
        if bound is None:
            raise NotConstant(expr.value)
        return again(bound, {})
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        items = []
        for element in expr.elements:
            if isinstance(element, cst.StarredElement):
                items.extend(again(element.value))
            else:
                items.append(again(element.value))
        return _sized(tuple(items) if isinstance(expr, cst.Tuple) else set(items) if isinstance(expr, cst.Set) else items)
    if isinstance(expr, cst.Dict):
        out = {}
        for element in expr.elements:
            if not isinstance(element, cst.DictElement):
                raise NotConstant("a ** in a dict")
            out[again(element.key)] = again(element.value)
        return out
    if isinstance(expr, cst.BinaryOperation) and type(expr.operator) in _BINARY:
        try:
            return _sized(_BINARY[type(expr.operator)](again(expr.left), again(expr.right)))
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise NotConstant(str(exc)) from exc
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus, cst.Not)):
        value = again(expr.expression)
        return (-value if isinstance(expr.operator, cst.Minus) else +value if isinstance(expr.operator, cst.Plus)
                else not value)
    if isinstance(expr, cst.BooleanOperation):
        left = again(expr.left)
        if isinstance(expr.operator, cst.And):
            return again(expr.right) if left else left
        return left if left else again(expr.right)
    if isinstance(expr, cst.Comparison):
        left = again(expr.left)
        for target in expr.comparisons:
            compare = _COMPARE.get(type(target.operator))
            if compare is None:
                raise NotConstant("a comparison")
            right = again(target.comparator)
            if not compare(left, right):
                return False
            left = right
        return True
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        value, part = again(expr.value), expr.slice[0].slice
        try:
            if isinstance(part, cst.Index):
                return value[again(part.value)]
            bounds = [again(b) if b is not None else None for b in (part.lower, part.upper, part.step)]
            return value[slice(*bounds)]
        except (TypeError, KeyError, IndexError, ValueError) as exc:
            raise NotConstant(str(exc)) from exc
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "keys" \
            and not expr.args:
        # `x.keys()` of a dict literal whose keys are constants, whatever its values (arrays).
        receiver = expr.func.value
        for _ in range(8):
            if not (isinstance(receiver, cst.Name) and receiver.value not in env):
                break
            receiver = lookup(receiver)
        if isinstance(receiver, cst.Dict) and all(isinstance(e, cst.DictElement) for e in receiver.elements):
            return _sized([again(e.key) for e in receiver.elements])
    if isinstance(expr, cst.Call) and not any(a.star for a in expr.args):
        args = [again(a.value) for a in expr.args if a.keyword is None]
        kwargs = {a.keyword.value: again(a.value) for a in expr.args if a.keyword is not None}
        func = expr.func
        try:
            if isinstance(func, cst.Name) and func.value in _BUILTINS and func.value not in env and lookup(func) is None:
                return _sized(_BUILTINS[func.value](*args, **kwargs))
            if isinstance(func, cst.Attribute) and func.attr.value in _METHODS:
                receiver = again(func.value)
                if not isinstance(receiver, (str, list, tuple, dict)):
                    raise NotConstant("a method of something else")
                result = getattr(receiver, func.attr.value)(*args, **kwargs)
                return _sized(list(result) if func.attr.value in ("keys", "values", "items") else result)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise NotConstant(str(exc)) from exc
        raise NotConstant("a call")
    if isinstance(expr, cst.ListComp):
        return _sized(list(_comprehension(expr.elt, expr.for_in, lookup, env, depth)))
    raise NotConstant(type(expr).__name__)


def _comprehension(elt, for_in: cst.CompFor, lookup, env: dict, depth: int):
    values = constant_value(for_in.iter, lookup, env, depth + 1)
    for value in _sized(list(values)):
        inner = {**env, **bind_target(for_in.target, value)}
        if not all(constant_value(test.test, lookup, inner, depth + 1) for test in for_in.ifs):
            continue
        if for_in.inner_for_in is not None:
            yield from _comprehension(elt, for_in.inner_for_in, lookup, inner, depth)
        else:
            yield constant_value(elt, lookup, inner, depth + 1)


def bind_target(target: cst.BaseAssignTargetExpression, value) -> dict:
    """``for name, vocab in ...``: each name of the target with its part of ``value``."""
    if isinstance(target, cst.Name):
        return {target.value: value}
    if isinstance(target, (cst.Tuple, cst.List)):
        if not isinstance(value, (tuple, list)) or len(value) != len(target.elements):
            raise NotConstant("unpacking")
        out = {}
        for element, part in zip(target.elements, value):
            out.update(bind_target(element.value, part))
        return out
    raise NotConstant("a target")


def _sized(value):
    if isinstance(value, (list, tuple, set, dict, str)) and len(value) > MAX_ITEMS * (100 if isinstance(value, str) else 1):
        raise NotConstant("too large")
    if isinstance(value, range):
        if len(value) > MAX_ITEMS:
            raise NotConstant("too large")
        return list(value)
    return value


def as_node(value) -> cst.BaseExpression:
    """A literal spelling ``value`` (scalars, and tuples and lists of them)."""
    if isinstance(value, _SCALARS) or isinstance(value, (tuple, list)) and all(
            isinstance(v, (*_SCALARS, tuple, list)) for v in value):
        return cst.parse_expression(repr(value))
    raise NotConstant("not a literal")


def integer_of(ctx, expr: cst.BaseExpression | None) -> int | None:
    """The integer ``expr`` always is: a literal, or a module constant computed from literals
    (``MAX_STEPS = 60``, bound once and never changed); None otherwise (a flag, a parameter)."""
    from libcst.metadata import BuiltinScope

    from estimator2keras._units import changed_in_place, value_of

    def lookup(name: cst.Name):
        scope = ctx.scope(name)
        assignments = list(scope[name.value]) if scope is not None else []
        if len(assignments) != 1 or isinstance(assignments[0].scope, BuiltinScope) \
                or isinstance(getattr(assignments[0], "node", None), cst.Param) or changed_in_place(ctx, name):
            return None
        return value_of(ctx, name)

    if expr is None:
        return None
    expr = _module_attributes(ctx, expr)
    try:
        value = constant_value(expr, lookup)
    except NotConstant:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _module_attributes(ctx, expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` with each ``module.NAME`` of another module of the program (``len(
    metadata.TARGET_LABELS)``) replaced by the value that module binds it to once (its own
    nodes: their names are read in their module)."""
    from estimator2keras._nodes import walk
    from estimator2keras._units import Binding, resolve

    if getattr(ctx, "_modules", None) is None:
        return expr
    found = {}
    for node in walk(expr):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            bound = resolve(ctx, node)
            if isinstance(bound, Binding) and ctx.path_of(bound.value) != ctx.path_of(node):
                found[node] = bound.value
    if not found:
        return expr
    from estimator2keras._emit import replace_in

    return replace_in(expr, found)
