"""Specialising a model_fn's body for one mode (TRAIN, EVAL or PREDICT).

A model_fn branches on ``mode``; Keras splits the same program into the model (used by all
three), ``compile`` (training and evaluation) and ``predict_step``. For each mode this
module walks the body as the Estimator would have run it: ``if`` statements on ``mode``
(``mode == ModeKeys.TRAIN``, ``mode != PREDICT``, ``mode in (...)``, a variable such as
``is_training = mode == ModeKeys.TRAIN``) are decided, ``assert mode == ...`` dropped, and
``with`` blocks that only name things are flattened. The result is the straight-line list of
statements that mode executes, ending with its ``return``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import RewriteContext
from estimator2keras._rule import Unsupported

TRAIN, EVAL, PREDICT = "train", "eval", "infer"
MODES = (TRAIN, EVAL, PREDICT)
MODE_KEYS = {
    "estimator.ModeKeys.TRAIN": TRAIN,
    "estimator.ModeKeys.EVAL": EVAL,
    "estimator.ModeKeys.PREDICT": PREDICT,
    "estimator.ModeKeys.INFER": PREDICT,
    "contrib.learn.ModeKeys.TRAIN": TRAIN,
    "contrib.learn.ModeKeys.EVAL": EVAL,
    "contrib.learn.ModeKeys.INFER": PREDICT,
}
#: `with` blocks whose body runs unchanged in Keras (names only, or dependencies Keras makes implicit).
FLATTENED_WITH = frozenset({"name_scope", "variable_scope", "compat.v1.name_scope", "control_dependencies"})
UNSUPPORTED = "E2K901"


@dataclass
class ModePath:
    """What one mode executes: statements in order (original nodes), and its return."""

    mode: str
    statements: list[cst.BaseSmallStatement] = field(default_factory=list)
    #: The statement line each small statement came from (for comments and positions).
    lines: list[cst.BaseStatement] = field(default_factory=list)
    ret: cst.Return | None = None
    #: Statements that ran inside `with tf.control_dependencies(...)`.
    under_control_dependencies: set[cst.BaseSmallStatement] = field(default_factory=set)


def _simple_loop(stmt: cst.For) -> bool:
    """A loop of simple statements, and of `if`s of them (``if dropout > 0: net = dropout(net)``
    inside a loop making layers), with no `else`, `break`, `continue` or `return`."""
    if stmt.orelse is not None or stmt.asynchronous is not None or not isinstance(stmt.body, cst.IndentedBlock):
        return False
    return _simple_block(stmt.body.body)


def _simple_block(statements) -> bool:
    for inner in statements:
        if isinstance(inner, cst.If):
            branch: cst.CSTNode | None = inner
            while branch is not None:
                if not isinstance(branch.body, cst.IndentedBlock) or not _simple_block(branch.body.body):
                    return False
                branch = getattr(branch, "orelse", None)
            continue
        if not isinstance(inner, cst.SimpleStatementLine):
            return False
        if any(isinstance(s, (cst.Return, cst.Break, cst.Continue)) for s in inner.body):
            return False
    return True


class ModeTests:
    """Deciding tests of a function's ``mode`` parameter (``mode == ModeKeys.TRAIN``, ...)."""

    def __init__(self, ctx: RewriteContext):
        self.ctx = ctx
        #: Variables bound to a test of the mode: name -> the set of modes where it is true.
        self.flags: dict[str, frozenset[str]] = {}

    def modes_where_true(self, test: cst.BaseExpression) -> frozenset[str] | None:
        """The modes in which ``test`` is true, or None when it is not a test of the mode."""
        if isinstance(test, cst.Name) and test.value in self.flags:
            return self.flags[test.value]
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self.modes_where_true(test.expression)
            return None if inner is None else frozenset(MODES) - inner
        if isinstance(test, cst.BooleanOperation):
            left, right = self.modes_where_true(test.left), self.modes_where_true(test.right)
            if left is None or right is None:
                return None
            return left & right if isinstance(test.operator, cst.And) else left | right
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            operator = target.operator
            left, right = test.left, target.comparator
            if self._is_mode(right) and not self._is_mode(left):
                left, right = right, left
            if not self._is_mode(left):
                return None
            if isinstance(operator, (cst.In, cst.NotIn)):
                if not isinstance(right, (cst.Tuple, cst.List, cst.Set)):
                    return None
                values = [self.mode_value(e.value) for e in right.elements]
                if None in values:
                    return None
                modes = frozenset(values)
            else:
                value = self.mode_value(right)
                if value is None:
                    return None
                modes = frozenset({value})
            if isinstance(operator, (cst.Equal, cst.Is, cst.In)):
                return modes
            if isinstance(operator, (cst.NotEqual, cst.IsNot, cst.NotIn)):
                return frozenset(MODES) - modes
        return None

    def _is_mode(self, node: cst.BaseExpression) -> bool:
        # libcst keeps parentheses on the node itself: `(mode)` is still a Name.
        return isinstance(node, cst.Name) and node.value == "mode"

    def mode_value(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.SimpleString) and node.evaluated_value in MODES:
            return node.evaluated_value
        path = self.ctx.api_path(node)
        return MODE_KEYS.get(path) if path else None

    def is_training_test(self, node: cst.BaseExpression) -> bool:
        """Is ``node`` true exactly when the Estimator trains (what Keras calls ``training``)?"""
        return self.modes_where_true(node) == frozenset({TRAIN})


class ModeAnalysis(ModeTests):
    """Mode facts of one model_fn: which names hold a mode test, and each mode's path."""

    def __init__(self, fn: cst.FunctionDef, ctx: RewriteContext):
        super().__init__(ctx)
        self.fn = fn
        #: Nodes (tests, flag names) that stand for "the model is training".
        self.training_tests: list[cst.CSTNode] = []
        self.paths = {mode: self._walk(mode) for mode in MODES}

    # -- walking ----------------------------------------------------------------------------
    def _walk(self, mode: str) -> ModePath:
        path = ModePath(mode)
        body = self.fn.body
        if not isinstance(body, cst.IndentedBlock):
            raise Unsupported("a one-line model_fn is not converted", self.fn, UNSUPPORTED)
        if not self._walk_block(body.body, path, under_dependencies=False):
            raise Unsupported(f"in mode {mode!r} the model_fn does not return an EstimatorSpec", self.fn, UNSUPPORTED)
        return path

    def _walk_block(self, statements, path: ModePath, under_dependencies: bool) -> bool:
        """Append what ``path.mode`` runs of ``statements``; True once it has returned."""
        for index, stmt in enumerate(statements):
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Return):
                        path.ret = small
                        path.lines.append(stmt)
                        return True
                    if isinstance(small, cst.Assert) and self.modes_where_true(small.test) is not None:
                        continue
                    if isinstance(small, cst.Pass):
                        continue
                    if isinstance(small, cst.Del) and self._deletes_parameters(small):
                        continue  # `del labels, config`: the idiom for an unused argument
                    if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                        continue  # a docstring
                    self._note_flag(small)
                    path.statements.append(small)
                    path.lines.append(stmt)
                    if under_dependencies:
                        path.under_control_dependencies.add(small)
            elif isinstance(stmt, cst.If):
                following = statements[index + 1] if index + 1 < len(statements) else None
                if self._walk_if(stmt, path, under_dependencies, following):
                    return True
            elif isinstance(stmt, cst.With):
                kind = self._with_kind(stmt)
                if kind is None:
                    raise Unsupported(self.unknown_with(stmt), stmt, UNSUPPORTED)
                inner = under_dependencies or kind == "control_dependencies"
                if self._walk_block(stmt.body.body, path, inner):
                    return True
            elif isinstance(stmt, cst.FunctionDef):
                continue  # a helper defined in the model_fn: read where it is called (_modelfn_read)
            elif isinstance(stmt, cst.For) and _simple_loop(stmt):
                # A loop of simple statements (layers built in a loop) is one step of the path.
                path.statements.append(stmt)
                path.lines.append(stmt)
            else:
                what = type(stmt).__name__.lower()
                if isinstance(stmt, (cst.For, cst.While)):
                    reason = f"this `{what}` loop in the model_fn is not converted (e2k converts loops of simple statements)"
                else:
                    reason = f"a `{what}` statement in the model_fn is not converted"
                raise Unsupported(reason, stmt, UNSUPPORTED)
        return False

    def _walk_if(self, stmt: cst.If, path: ModePath, under_dependencies: bool,
                 following: cst.BaseStatement | None = None) -> bool:
        modes = self.modes_where_true(stmt.test)
        if modes is None:
            same = self._same_return(stmt, following)
            if same is not None:
                # `if params["use_tpu"]: return TPUEstimatorSpec(...) else: return
                # EstimatorSpec(...)` with the same arguments: one return, either way.
                path.ret = same
                path.lines.append(stmt)
                return True
            # `if params["batch_norm"]:`, `if isinstance(features, dict):`: the user's own
            # switch runs in Keras as it ran in the model_fn, kept whole as one step.
            reason = self._kept_if(stmt)
            if reason is not None:
                raise Unsupported(reason, stmt, UNSUPPORTED)
            path.statements.append(stmt)
            path.lines.append(stmt)
            if under_dependencies:
                path.under_control_dependencies.add(stmt)
            return False
        if path.mode in modes:
            return self._walk_block(stmt.body.body, path, under_dependencies)
        orelse = stmt.orelse
        if isinstance(orelse, cst.If):
            return self._walk_if(orelse, path, under_dependencies)
        if isinstance(orelse, cst.Else):
            return self._walk_block(orelse.body.body, path, under_dependencies)
        return False

    def _same_return(self, stmt: cst.If, following: cst.BaseStatement | None = None) -> cst.Return | None:
        """The first return of an ``if``/``else`` whose every branch only returns an
        EstimatorSpec (or TPUEstimatorSpec) call with the same arguments; else None. An ``if``
        with no ``else`` counts the statement ``following`` it as its ``else`` (``if use_tpu:
        return TPUEstimatorSpec(...)`` then ``return EstimatorSpec(...)``)."""
        returns = []
        current: cst.BaseSuite | cst.If | cst.Else | cst.BaseStatement | None = stmt
        while current is not None:
            if isinstance(current, cst.If):
                if self.modes_where_true(current.test) is not None:
                    return None
                body = current.body
                current = current.orelse if current.orelse is not None else following
            elif isinstance(current, cst.Else):
                body, current = current.body, None
            else:  # the statement after an `if` that has no `else`
                body, current = cst.IndentedBlock(body=[current]), None
            lines = body.body if isinstance(body, cst.IndentedBlock) else []
            small = lines[0].body[0] if len(lines) == 1 and isinstance(lines[0], cst.SimpleStatementLine) \
                and len(lines[0].body) == 1 else None
            if not (isinstance(small, cst.Return) and isinstance(small.value, cst.Call)):
                return None
            if (self.ctx.call_api_path(small.value) or "").rpartition(".")[2] not in ("EstimatorSpec", "TPUEstimatorSpec"):
                return None
            returns.append(small)
        if len(returns) < 2:
            return None
        keyed = [{(a.keyword.value if a.keyword else i): cst.Module([]).code_for_node(a.value)
                  for i, a in enumerate(r.value.args)} for r in returns]
        return returns[0] if all(k == keyed[0] for k in keyed[1:]) else None

    def _deletes_parameters(self, small: cst.Del) -> bool:
        params = {p.name.value for p in self.fn.params.params}
        target = small.target
        names = [e.value for e in target.elements] if isinstance(target, cst.Tuple) else [target]
        return all(isinstance(n, cst.Name) and n.value in params for n in names)

    def _kept_if(self, stmt: cst.If) -> str | None:
        """Why an ``if`` that does not test the mode cannot be kept as one step (None: it can):
        its branches hold simple statements, loops of them, helper functions, scope ``with``s
        and further such ``if``s, and neither return nor test the mode."""
        branches: list[cst.BaseSuite] = [stmt.body]
        orelse = stmt.orelse
        while orelse is not None:
            if isinstance(orelse, cst.If):
                if self.modes_where_true(orelse.test) is not None:
                    return "an `if` whose `elif` tests the mode is not converted"
                branches.append(orelse.body)
                orelse = orelse.orelse
            else:
                branches.append(orelse.body)
                orelse = None
        for branch in branches:
            reason = self._kept_block(branch)
            if reason is not None:
                return reason
        return None

    def _kept_block(self, block: cst.BaseSuite) -> str | None:
        for inner in block.body if isinstance(block, cst.IndentedBlock) else [block]:
            if isinstance(inner, cst.If):
                if self.modes_where_true(inner.test) is not None:
                    return "an `if` on the mode inside an `if` on something else is not converted"
                reason = self._kept_if(inner)
                if reason is not None:
                    return reason
            elif isinstance(inner, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in inner.body:
                    if isinstance(small, (cst.Return, cst.Break, cst.Continue)):
                        return "an `if` that does not test the mode and returns from the model_fn is not converted"
            elif isinstance(inner, cst.FunctionDef) and not self._called(inner.name.value):
                # A function handed on, not called here (`if use_tpu: def tpu_scaffold(): ...`
                # then `scaffold_fn = tpu_scaffold`): where it goes says what it is for.
                continue
            elif isinstance(inner, cst.With) and self._with_kind(inner) is not None:
                reason = self._kept_block(inner.body)
                if reason is not None:
                    return reason
            elif isinstance(inner, cst.With):
                return self.unknown_with(inner)
            else:
                return f"a `{type(inner).__name__.lower()}` statement inside an `if` of the model_fn is not converted"
        return None

    def _called(self, name: str) -> bool:
        return any(isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name
                   for node in _emit.walk(self.fn))

    def unknown_with(self, stmt: cst.With) -> str:
        """Why a ``with`` block of the model_fn is not converted, naming what it enters."""
        named = []
        for item in stmt.items:
            call = item.item
            path = self.ctx.call_api_path(call) if isinstance(call, cst.Call) else None
            if path is not None and path not in FLATTENED_WITH:
                named.append(f"`{_emit.code(call.func)}` (tf.{path})")
        if named:
            return f"the model_fn runs its code inside {', '.join(named)}, which e2k has no rule for"
        return "this `with` block is not converted"

    def _with_kind(self, stmt: cst.With) -> str | None:
        kinds = set()
        for item in stmt.items:
            call = item.item
            path = self.ctx.call_api_path(call) if isinstance(call, cst.Call) else None
            if path not in FLATTENED_WITH or item.asname is not None:
                return None
            if path == "variable_scope" and any(a.keyword and a.keyword.value == "reuse" for a in call.args):
                return None
            kinds.add(path)
        return "control_dependencies" if "control_dependencies" in kinds else "scope"

    def _note_flag(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            modes = self.modes_where_true(small.value)
            if modes is not None:
                self.flags[small.targets[0].target.value] = modes
