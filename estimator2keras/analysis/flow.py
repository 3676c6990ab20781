"""Reaching definitions: which assignments of a name may have made the value a read sees.

libcst's scope analysis answers "which assignments of ``x`` are there in this scope"; real
programs rebind names (``if use_tpu: est = TPUEstimator(...) else: est = Estimator(...)``,
a notebook cell run twice, ``m = build(...)`` then ``m = ...``), so the converter needs
"which of them reach *this* read". One pass over each function (or module) body computes
it for every read of a local name, following Python's evaluation order through ``if``/
``else`` joins, loops (two passes reach the fixed point of gen/kill sets), ``try``,
``with``, ``break``/``continue``/``return``/``raise``. The cost is linear in the body's size
(times two per nesting level of loops).

A read is answered only when the analysis saw every assignment of its name: a name also
assigned from a nested function (``global``/``nonlocal``), read from a nested function or
lambda (it may run at any time), or bound in a way the walk does not model, falls back to
all of libcst's referents, which is what the converter used before.
"""
from __future__ import annotations

from typing import Callable, Iterable

import libcst as cst

from estimator2keras._nodes import fields_children
from libcst.metadata import Assignment, BaseAssignment, ComprehensionScope, GlobalScope, Scope

State = dict[str, frozenset]  # name -> the assignments that may hold its value here
_UNREACHABLE = None


def _join(states: Iterable[State | None]) -> State | None:
    out: State | None = None
    for state in states:
        if state is None:
            continue
        if out is None:
            out = dict(state)
            continue
        for name, defs in state.items():
            out[name] = out.get(name, frozenset()) | defs
    return out


class _Loop:
    def __init__(self) -> None:
        self.breaks: list[State] = []
        self.continues: list[State] = []


class _ScopeWalk:
    """Walks one scope's body in evaluation order, recording the reaching assignments of
    every Name it passes (whether or not it is a read: callers look up reads only)."""

    def __init__(self, scope: Scope, scope_of: Callable[[cst.CSTNode], Scope | None]):
        self.scope = scope
        self.scope_of = scope_of
        self.defs: dict[cst.CSTNode, list[Assignment]] = {}
        for assignment in scope.assignments:
            if isinstance(assignment, Assignment):
                self.defs.setdefault(assignment.node, []).append(assignment)
        self.seen: set[int] = set()  # ids of the assignments the walk passed
        self.reaching: dict[cst.Name, frozenset] = {}
        self.loops: list[_Loop] = []
        self.handlers: list[list[State]] = []  # per enclosing try: every state its body passed

    # -- the walk -------------------------------------------------------------------------
    def run(self, body: cst.CSTNode, entry: State) -> None:
        self.block(body, entry)

    def block(self, node: cst.CSTNode | None, state: State | None) -> State | None:
        if node is None:
            return state
        if isinstance(node, (cst.IndentedBlock, cst.Module)):
            for statement in node.body:
                state = self.statement(statement, state)
            return state
        if isinstance(node, cst.SimpleStatementSuite):
            for small in node.body:
                state = self.small(small, state)
            return state
        return self.statement(node, state)

    def statement(self, node: cst.CSTNode, state: State | None) -> State | None:
        if state is None:
            return None  # unreachable code (after return/raise/break) reaches nothing
        for handler in self.handlers:
            handler.append(state)
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                state = self.small(small, state)
                if state is None:
                    return None
            return state
        if isinstance(node, cst.If):
            state = self.expr(node.test, state)
            taken = self.block(node.body, state)
            other = self.block(node.orelse.body if isinstance(node.orelse, cst.Else) else node.orelse, state) \
                if node.orelse is not None else state
            return _join([taken, other])
        if isinstance(node, cst.For):
            state = self.expr(node.iter, state)
            return self.loop(state, lambda s: self.block(node.body, self.bind(node.target, s)), node.orelse)
        if isinstance(node, cst.While):
            return self.loop(state, lambda s: self.block(node.body, self.expr(node.test, s)), node.orelse,
                             test=node.test)
        if isinstance(node, cst.With):
            for item in node.items:
                state = self.expr(item.item, state)
                if item.asname is not None:
                    state = self.bind(item.asname.name, state)
            return self.block(node.body, state)
        if isinstance(node, cst.Try):
            return self.try_(node, state)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            for decorator in node.decorators:
                state = self.expr(decorator.decorator, state)
            if isinstance(node, cst.FunctionDef):
                for param in [*node.params.params, *node.params.kwonly_params, *node.params.posonly_params]:
                    if param.default is not None:
                        state = self.expr(param.default, state)
            else:
                for arg in node.bases + node.keywords:
                    state = self.expr(arg.value, state)
            return self.define(node, state)  # its body is a scope of its own
        if isinstance(node, cst.Match):
            state = self.expr(node.subject, state)
            return _join([state, *(self.block(case.body, self.generic(case.pattern, state)) for case in node.cases)])
        return self.generic(node, state)

    def small(self, node: cst.CSTNode, state: State) -> State | None:
        if isinstance(node, cst.Assign):
            state = self.expr(node.value, state)
            for target in node.targets:
                state = self.bind(target.target, state)
            return state
        if isinstance(node, cst.AnnAssign):
            if node.value is not None:
                state = self.expr(node.value, state)
                return self.bind(node.target, state)
            return state
        if isinstance(node, cst.AugAssign):
            state = self.expr(node.value, state)
            state = self.expr(node.target, state)  # read, then written
            return self.bind(node.target, state)
        if isinstance(node, (cst.Return, cst.Raise)):
            self.generic(node, state)
            return _UNREACHABLE
        if isinstance(node, cst.Break):
            if self.loops:
                self.loops[-1].breaks.append(state)
            return _UNREACHABLE
        if isinstance(node, cst.Continue):
            if self.loops:
                self.loops[-1].continues.append(state)
            return _UNREACHABLE
        return self.generic(node, state)

    def loop(self, entry: State, body: Callable[[State], State | None], orelse, test=None) -> State | None:
        """A loop runs its body zero or more times: the second pass starts from the entry
        joined with what the first pass left (gen/kill sets reach their fixed point there)."""
        state = entry
        for _ in range(2):
            frame = _Loop()
            self.loops.append(frame)
            end = body(state)
            self.loops.pop()
            state = _join([entry, end, *frame.continues])
        if test is not None:
            state = self.expr(test, state)
        after = self.block(orelse.body, state) if orelse is not None else state
        return _join([after, *frame.breaks])

    def try_(self, node: cst.Try, state: State) -> State | None:
        passed: list[State] = [state]
        self.handlers.append(passed)
        end = self.block(node.body, state)
        self.handlers.pop()
        raised = _join([*passed, end]) if end is not None else _join(passed)
        outs = [self.block(node.orelse.body, end) if node.orelse is not None else end]
        for handler in node.handlers:
            entry = raised
            if handler.type is not None and entry is not None:
                entry = self.expr(handler.type, entry)
            if handler.name is not None and entry is not None:
                entry = self.bind(handler.name.name, entry)
            outs.append(self.block(handler.body, entry))
        out = _join(outs)
        if node.finalbody is not None:
            final_entry = _join([out, raised])
            final = self.block(node.finalbody.body, final_entry)
            return final if out is not None else None
        return out

    # -- expressions and bindings ---------------------------------------------------------
    def expr(self, node: cst.CSTNode, state: State) -> State:
        return self.generic(node, state)

    def generic(self, node: cst.CSTNode, state: State) -> State:
        """Children in source order (close to evaluation order for expressions); nested
        functions, lambdas and classes are not entered: their reads fall back."""
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, cst.Name):
                self.reaching[current] = state.get(current.value, frozenset())
            elif current in self.defs:
                state = self.define(current, state)
            if isinstance(current, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(current, cst.NamedExpr):
                state = self.generic(current.value, state)
                state = self.bind(current.target, state)
                continue
            stack.extend(reversed(fields_children(current)))
        return state

    def bind(self, target: cst.CSTNode, state: State) -> State:
        """An assignment target: subscripts and attributes are reads; names are (re)bound."""
        if isinstance(target, cst.Name):
            return self.define(target, state)
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                state = self.bind(element.value, state)
            return state
        if isinstance(target, cst.StarredElement):
            return self.bind(target.value, state)
        return self.generic(target, state)

    def define(self, node: cst.CSTNode, state: State) -> State:
        assignments = self.defs.get(node)
        if not assignments:
            return state
        state = dict(state)
        for assignment in assignments:
            self.seen.add(id(assignment))
            state[assignment.name] = frozenset([assignment])
        return state


class ReachingDefinitions:
    """Reaching assignments of reads, computed per scope on first question."""

    def __init__(self, scope_of: Callable[[cst.CSTNode], Scope | None], module: cst.Module):
        self.scope_of = scope_of
        self.module = module  # libcst's GlobalScope does not hold its node
        self._walks: dict[int, tuple[_ScopeWalk, set[str]] | None] = {}

    def reaching(self, read: cst.Name) -> frozenset[BaseAssignment] | None:
        """The assignments (of the read's own scope) that may reach ``read``; None when
        the analysis cannot tell (the caller falls back to all referents)."""
        scope = self.scope_of(read)
        if scope is None:
            return None
        if isinstance(scope, ComprehensionScope):
            # A comprehension runs where it stands: its reads of enclosing names see that state.
            parent = scope.parent
            while isinstance(parent, ComprehensionScope):
                parent = parent.parent
            if read.value in scope.assignments:
                return None
            scope = parent
        if read.value not in scope.assignments:
            return None  # a global or a closure's variable: not this walk's to answer
        result = self._walk(scope)
        if result is None:
            return None
        walk, untracked = result
        if read.value in untracked or read not in walk.reaching:
            return None
        return walk.reaching[read]

    def _walk(self, scope: Scope):
        key = id(scope)
        if key in self._walks:
            return self._walks[key]
        node = self.module if isinstance(scope, GlobalScope) else getattr(scope, "node", None)
        walk = _ScopeWalk(scope, self.scope_of)
        entry: State = {}
        if isinstance(node, cst.Module):
            body = node
        elif isinstance(node, cst.FunctionDef):
            body = node.body
            params = node.params
            for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
                entry = walk.define(param.name, entry) if param.name in walk.defs else walk.define(param, entry)
            for star in (params.star_arg, params.star_kwarg):
                if isinstance(star, cst.Param):
                    entry = walk.define(star.name, entry) if star.name in walk.defs else walk.define(star, entry)
        elif isinstance(node, cst.ClassDef):
            body = node.body
        else:
            self._walks[key] = None
            return None
        walk.run(body, entry)
        # A name with an assignment the walk never passed (global/nonlocal from elsewhere,
        # a binding form not modelled) is not answered.
        untracked = {a.name for a in scope.assignments if id(a) not in walk.seen}
        self._walks[key] = (walk, untracked)
        return self._walks[key]
