"""A model_fn that is a method of a class of the file (``Estimator(self.model_fn)`` in a method
of the class, ``Estimator(trainer.model_fn)`` on an instance made once at module level).

A bound method whose ``self.<attr>`` reads are values fixed once the instance is built is the
function of the module that takes those values, given them where the Estimator is built:
``functools.partial(model_fn, hidden=self.hidden, lr=self.lr)``, which E2K001 converts as any
partial (the values become the Keras model's and builder's arguments). ``lift`` writes the
file that way; ``rewrite_source`` converts that file, and keeps it only if the model_fn
converted: otherwise it converts the file as it was, where E2K001 names the method and says
why (``WHY``). ``lift`` declines, with a reason, whatever makes the two differ: a ``self``
attribute assigned anywhere but once at the top of ``__init__`` (or in the class body), set
by the model_fn, a method of ``self`` the model_fn calls, ``self`` used otherwise,
inheritance, ``setattr``, the method used elsewhere too.
"""
from __future__ import annotations

import contextvars
import re
from dataclasses import dataclass

import libcst as cst

from estimator2keras import _emit
from estimator2keras._modelfn_read import MODEL_FN_PARAMS
from estimator2keras._nodes import walk_in_order as _walk

#: Why the method model_fn of the file being converted was not converted (read by E2K001's finding).
WHY: contextvars.ContextVar[str | None] = contextvars.ContextVar("e2k_method_model_fn_why", default=None)


@dataclass
class Lift:
    source: bytes  # the file, its method now a function of the module given as a partial
    name: str  # that function's name
    first_line: int  # its lines in ``source``
    last_line: int


def _body(node) -> list:
    return list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _is_estimator(call: cst.Call) -> bool:
    text = _emit.code(call.func)
    return text == "Estimator" or text.endswith("estimator.Estimator")


def _model_fn_arg(call: cst.Call) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "model_fn":
            return arg
    if call.args and call.args[0].keyword is None and not call.args[0].star:
        return call.args[0]
    return None


class _Sites(cst.CSTVisitor):
    """Estimator calls given ``<receiver>.<method>``, with the class and method they are in."""

    def __init__(self):
        self.stack: list = []
        self.sites: list[tuple[cst.Call, cst.Arg, list]] = []

    def visit_ClassDef(self, node):
        self.stack.append(node)

    def leave_ClassDef(self, node):
        self.stack.pop()

    def visit_FunctionDef(self, node):
        self.stack.append(node)

    def leave_FunctionDef(self, node):
        self.stack.pop()

    def visit_Call(self, node):
        if _is_estimator(node):
            arg = _model_fn_arg(node)
            if arg is not None and isinstance(arg.value, cst.Attribute) and isinstance(arg.value.value, cst.Name):
                self.sites.append((node, arg, list(self.stack)))


def lift(source: bytes) -> Lift | str | None:
    """``source`` with its method model_fn lifted; a reason when it has one e2k does not lift;
    None when it has none."""
    try:
        module = cst.parse_module(source)
    except Exception:
        return None
    visitor = _Sites()
    module.visit(visitor)
    classes = {n.name.value: n for n in module.body if isinstance(n, cst.ClassDef)}
    found = []
    for call, arg, stack in visitor.sites:
        receiver, method_name = arg.value.value.value, arg.value.attr.value
        klass, site_method = None, None
        if len(stack) >= 2 and isinstance(stack[-1], cst.FunctionDef) and isinstance(stack[-2], cst.ClassDef):
            params = stack[-1].params.params
            if params and params[0].name.value == receiver:
                klass, site_method = stack[-2], stack[-1]
        if klass is None:
            made = [n for n in _walk(module) if isinstance(n, cst.Assign)
                    and any(isinstance(t.target, cst.Name) and t.target.value == receiver for t in n.targets)]
            if len(made) == 1 and isinstance(made[0].value, cst.Call) and isinstance(made[0].value.func, cst.Name):
                klass = classes.get(made[0].value.func.value)
        if klass is None:
            continue
        method = next((m for m in _body(klass) if isinstance(m, cst.FunctionDef) and m.name.value == method_name), None)
        if method is not None:
            found.append((call, arg, klass, method, site_method))
    if not found:
        return None
    if len(found) > 1:
        return "more than one Estimator is given a method as its model_fn; e2k lifts one"
    call, arg, klass, method, site_method = found[0]
    try:
        return _lift(module, call, arg, klass, method, site_method)
    except _Declined as exc:
        return str(exc)


class _Declined(Exception):
    pass


def _lift(module, call, arg, klass, method, site_method) -> Lift:
    cname, mname = klass.name.value, method.name.value
    if klass not in module.body:
        raise _Declined(f"`{cname}` is not a class of the module's top level")
    for base in klass.bases:
        if _emit.code(base.value) != "object" or base.keyword is not None:
            raise _Declined(f"`{cname}` derives from `{_emit.code(base.value)}`: e2k does not follow `self`'s "
                            "attributes through inheritance")
    for other in module.body:
        if isinstance(other, cst.ClassDef) and any(_emit.code(b.value) == cname for b in other.bases):
            raise _Declined(f"`{other.name.value}` derives from `{cname}` and may give `self` other values")
    if method.decorators:
        raise _Declined(f"`{mname}` is decorated")
    params = method.params
    if params.star_arg is not cst.MaybeSentinel.DEFAULT or params.star_kwarg is not None or params.kwonly_params \
            or params.posonly_params or not params.params:
        raise _Declined(f"`{mname}` takes arguments other than the model_fn's")
    self_name = params.params[0].name.value
    rest = params.params[1:]
    if any(p.name.value not in MODEL_FN_PARAMS for p in rest):
        raise _Declined(f"`{mname}` takes arguments other than the model_fn's "
                        f"({', '.join(p.name.value for p in rest if p.name.value not in MODEL_FN_PARAMS)})")
    methods = {m.name.value for m in _body(klass) if isinstance(m, cst.FunctionDef)}
    # What the method does with `self`: reads of data attributes only.
    targets = set()
    for node in _walk(method.body):
        if isinstance(node, cst.Assign):
            targets.update(id(n) for t in node.targets for n in _walk(t.target))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets.update(id(n) for n in _walk(node.target))
        elif isinstance(node, (cst.For, cst.CompFor)):
            targets.update(id(n) for n in _walk(node.target))
        elif isinstance(node, cst.Del):
            targets.update(id(n) for n in _walk(node.target))
    reads: dict[str, None] = {}
    attribute_values = {id(n.value): n for n in _walk(method.body) if isinstance(n, cst.Attribute)}
    for node in _walk(method.body):
        if isinstance(node, cst.Name) and node.value == self_name:
            attribute = attribute_values.get(id(node))
            if attribute is None:
                raise _Declined(f"`{mname}` uses `{self_name}` other than to read its attributes")
            attr = attribute.attr.value
            if id(attribute) in targets or id(node) in targets:
                raise _Declined(f"`{mname}` sets `{self_name}.{attr}`")
            if attr in methods:
                raise _Declined(f"`{mname}` calls the method `{self_name}.{attr}` of `{cname}`: e2k lifts a model_fn "
                                "that reads only `self`'s values; make the helper a function of the module")
            reads[attr] = None
    if any(isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) for n in _walk(method.body)
           if any(isinstance(m, cst.Name) and m.value == self_name for m in _walk(n))):
        raise _Declined(f"`{mname}` reads `{self_name}` in a function it defines")
    for node in _walk(module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("setattr", "vars"):
            raise _Declined(f"the module sets attributes with `{node.func.value}`")
    init = next((m for m in _body(klass) if isinstance(m, cst.FunctionDef) and m.name.value == "__init__"), None)
    class_level = {t.target.value for s in _body(klass) if isinstance(s, cst.SimpleStatementLine)
                   for small in s.body if isinstance(small, cst.Assign) for t in small.targets
                   if isinstance(t.target, cst.Name)}
    for attr in reads:
        sets = [n for n in _walk(module) for t in _targets(n) if isinstance(t, cst.Attribute) and t.attr.value == attr]
        if attr in class_level and not sets:
            continue
        where = _top_level_init_assignment(init, attr)
        if where is None or len(sets) != 1:
            if not sets:
                raise _Declined(f"`{self_name}.{attr}` is not set in `{cname}`")
            raise _Declined(f"`{self_name}.{attr}` is set other than once at the top of `{cname}.__init__` (it may "
                            "change after the Estimator is built, and the method reads it at each call)")
        if site_method is init:
            # Built in __init__: the value must be set before the Estimator.
            index = next((i for i, s in enumerate(_body(init)) if any(n is call for n in _walk(s))), None)
            if index is None or where >= index:
                raise _Declined(f"`{self_name}.{attr}` is set after the Estimator is built")
    # Names: the module's, the method's, none taken twice.
    module_names = _module_names(module)
    attrs = {id(n.attr) for n in _walk(method) if isinstance(n, cst.Attribute)}
    used = {n.value for n in _walk(method) if isinstance(n, cst.Name) and id(n) not in attrs} | module_names
    used |= {"functools"}
    name = mname if mname not in module_names else f"{_snake(cname)}_{mname}"
    if name in module_names:
        raise _Declined(f"`{mname}` is a name of the module too")
    renamed = {}
    for attr in reads:
        new = attr if attr not in used else f"{_snake(cname)}_{attr}"
        if new in used or new in renamed.values():
            raise _Declined(f"no name for `{self_name}.{attr}`")
        renamed[attr] = new
    # The function of the module.
    body = method.body.visit(_SelfReads(self_name, renamed))
    fn = method.with_changes(
        name=cst.Name(name), body=body,
        params=params.with_changes(params=[*rest, *(cst.Param(cst.Name(n)) for n in renamed.values())]),
        leading_lines=[cst.EmptyLine(), cst.EmptyLine()],
    )
    receiver = arg.value.value
    partial = cst.Call(
        cst.Attribute(cst.Name("functools"), cst.Name("partial")),
        args=[cst.Arg(cst.Name(name)), *(cst.Arg(cst.Attribute(receiver, cst.Name(attr)), keyword=cst.Name(new),
                                                 equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
                                         for attr, new in renamed.items())])
    others = [n for n in _walk(module) if isinstance(n, cst.Attribute) and n.attr.value == mname and n is not arg.value]
    if others:
        raise _Declined(f"`{mname}` is used elsewhere too (`{_emit.code(others[0])}`); e2k replaces the method")
    new_call = call.with_changes(args=[a.with_changes(value=partial) if a is arg else a for a in call.args])
    module = module.visit(_Replace({id(call): new_call}))
    klass2 = next(n for n in module.body if isinstance(n, cst.ClassDef) and n.name.value == cname)
    members = [m for m in _body(klass2) if not (isinstance(m, cst.FunctionDef) and m.name.value == mname)]
    if not members:
        members = [cst.SimpleStatementLine([cst.Pass()])]
    klass3 = klass2.with_changes(body=klass2.body.with_changes(body=members))
    statements = []
    for stmt in module.body:
        if stmt is klass2:
            statements += [fn, klass3.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])]
        else:
            statements.append(stmt)
    if not any(isinstance(s, cst.SimpleStatementLine) and any(
            isinstance(small, cst.Import) and any(_emit.code(a.name) == "functools" and a.asname is None
                                                 for a in small.names) for small in s.body) for s in statements):
        at = next((i for i, s in enumerate(statements) if isinstance(s, cst.SimpleStatementLine) and any(
            isinstance(small, (cst.Import, cst.ImportFrom)) and not (
                isinstance(small, cst.ImportFrom) and _emit.code(small.module or cst.Name("")) == "__future__")
            for small in s.body)), None)
        if at is None:
            raise _Declined("the module imports nothing")
        leading = statements[at].leading_lines
        statements[at] = statements[at].with_changes(leading_lines=[])
        statements.insert(at, cst.SimpleStatementLine([cst.Import([cst.ImportAlias(cst.Name("functools"))])],
                                                      leading_lines=leading))
    new_module = module.with_changes(body=statements)
    code = new_module.code
    head = code[:code.index(new_module.code_for_node(fn).lstrip("\n"))]
    first = head.count("\n") + 1
    last = first + new_module.code_for_node(fn).strip("\n").count("\n")
    return Lift(code.encode(module.encoding), name, first, last)


def _targets(node) -> list:
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        return [node.target]
    return []


def _top_level_init_assignment(init, attr: str) -> int | None:
    """The index of the statement of ``__init__``'s top level that sets ``self.<attr>``."""
    if init is None or not init.params.params:
        return None
    self_name = init.params.params[0].name.value
    for i, stmt in enumerate(_body(init)):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                for t in _targets(small):
                    if isinstance(t, cst.Attribute) and t.attr.value == attr and isinstance(t.value, cst.Name) \
                            and t.value.value == self_name:
                        return i
    return None


def _module_names(module: cst.Module) -> set[str]:
    names = set()
    for stmt in module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            names.add(stmt.name.value)
            continue
        for node in _walk(stmt):
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                names.update(n.value for t in _targets(node) for n in _walk(t)
                             if isinstance(n, cst.Name) and not isinstance(t, cst.Attribute))
            elif isinstance(node, cst.ImportAlias):
                bound = node.asname.name if node.asname else node.name
                names.add(_emit.code(bound).split(".")[0])
    return names


class _SelfReads(cst.CSTTransformer):
    def __init__(self, self_name: str, renamed: dict[str, str]):
        self.self_name, self.renamed = self_name, renamed

    def leave_Attribute(self, original, updated):
        if isinstance(original.value, cst.Name) and original.value.value == self.self_name:
            return cst.Name(self.renamed[original.attr.value], lpar=updated.lpar, rpar=updated.rpar)
        return updated


class _Replace(cst.CSTTransformer):
    def __init__(self, by_id: dict):
        self.by_id = by_id

    def leave_Call(self, original, updated):
        return self.by_id.get(id(original), updated)


def defines(source: bytes, name: str) -> bool:
    """Whether ``source`` still defines the function ``name`` at its top level (its model_fn
    was not converted)."""
    return re.search(rb"^def " + re.escape(name.encode()) + rb"\(", source, re.M) is not None
