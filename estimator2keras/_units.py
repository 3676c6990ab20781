"""Estimator *units*: an Estimator together with what configures, feeds, trains and evaluates it.

A unit is found from the statement that builds the Estimator (``est = Estimator(...)``),
then resolved through names: its model_fn, its RunConfig and strategy, its TrainSpec /
EvalSpec, its input_fns and every use of ``est``. The unit rules (``UnitRule``) each plan
their part of the conversion on a ``ConversionPlan``; the plan is committed only when every
rule succeeded and every use of the Estimator was claimed. Otherwise nothing of the unit
changes, and the reason is marked in the file and reported.
"""
from __future__ import annotations


import builtins
import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterator

import libcst as cst
from libcst.metadata import Assignment, GlobalScope

from estimator2keras import _emit
from estimator2keras._nodes import fields_children
from estimator2keras._context import RewriteContext, iter_calls
from estimator2keras._modes import ModeTests
from estimator2keras._leftovers import is_estimator_api
from estimator2keras._rule import Unsupported, UnitRule
from estimator2keras._suppress import check_unit

if TYPE_CHECKING:
    pass

UNSUPPORTED_USE = "E2K902"


# ---------------------------------------------------------------------------------------
# Resolving names to what they were bound to
# ---------------------------------------------------------------------------------------
@dataclass
class Binding:
    """``name = value`` as a whole statement, the only assignment of ``name`` in its scope."""

    name: str
    statement: cst.SimpleStatementLine
    target: cst.Name
    value: cst.BaseExpression


def _single_assignment(ctx: RewriteContext, name: cst.Name):
    """The one assignment whose value ``name`` reads here (flow-sensitive: rebinding before
    or after this read, or in a branch that does not reach it, does not count)."""
    scope = ctx.scope(name)
    if scope is None:
        return None
    referents = set()
    for access in scope.accesses[name.value]:
        if access.node is name:
            referents = access.referents
            reaching = ctx.reaching(name)
            if reaching is not None:
                referents = {r for r in referents if r in reaching}
            break
    else:
        assignments = scope.assignments[name.value]
        referents = assignments
    if len(referents) != 1:
        return None
    return next(iter(referents))


def unpacking(ctx: RewriteContext, name: cst.Name):
    """``a, b = value``, the one assignment reaching ``name`` (one target, a tuple or list
    without ``*``): (the target ``name`` is there, the Assign, the tuple, its position in it);
    None for any other binding."""
    target = getattr(_single_assignment(ctx, name), "node", None)
    element = ctx.parent(target) if isinstance(target, cst.Name) else None
    tuple_ = ctx.parent(element) if isinstance(element, cst.Element) else None
    assign_target = ctx.parent(tuple_) if isinstance(tuple_, (cst.Tuple, cst.List)) else None
    assign = ctx.parent(assign_target) if isinstance(assign_target, cst.AssignTarget) else None
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1
            and not any(isinstance(e, cst.StarredElement) for e in tuple_.elements)):
        return None
    return target, assign, tuple_, next(i for i, e in enumerate(tuple_.elements) if e is element)


def resolve(ctx: RewriteContext, node: cst.BaseExpression) -> Binding | cst.FunctionDef | None:
    """What a Name stands for: a simple one-time binding, a function definition, or None.
    In a pass over a program's modules, a name another module defines (``model.input_fn``,
    or ``input_fn`` imported from it) stands for that definition."""
    if isinstance(node, cst.Attribute) and ctx._modules is not None:
        assignment = _foreign(ctx, node)
    elif not isinstance(node, cst.Name):
        return None
    else:
        assignment = _single_assignment(ctx, node)
        if ctx._modules is not None and isinstance(getattr(assignment, "node", None), cst.ImportFrom):
            assignment = _foreign(ctx, node)
    if not isinstance(assignment, Assignment):
        return None
    target = assignment.node
    if isinstance(target, cst.FunctionDef):
        return target
    if isinstance(target, cst.Name):
        statement = ctx.enclosing_statement(target)
        if (
            isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Assign)
            and len(statement.body[0].targets) == 1
            and statement.body[0].targets[0].target is target
        ):
            return Binding(target.value, statement, target, statement.body[0].value)
    return None


def _foreign(ctx: RewriteContext, node: cst.BaseExpression):
    from estimator2keras.analysis.federation import foreign_definition

    return foreign_definition(ctx, node)


def _assignment_of(ctx: RewriteContext, target: cst.CSTNode):
    """The scope's assignment made by ``target`` (a Name bound, a function or class defined)."""
    name = target.name.value if isinstance(target, (cst.FunctionDef, cst.ClassDef)) else getattr(target, "value", None)
    scope = ctx.scope(target)
    if scope is None or name is None:
        return None
    for assignment in scope.assignments[name]:
        node = getattr(assignment, "node", None)
        if node is target or (isinstance(node, (cst.Param, cst.FunctionDef, cst.ClassDef)) and node.name is target):
            return assignment
    return None


def value_of(ctx: RewriteContext, name: cst.Name) -> cst.BaseExpression | None:
    """The expression whose value ``name`` holds here: ``name = expr``; ``a, name = expr`` with
    a tuple literal, or a call of a function of the file whose one ``return`` gives a tuple
    (``train, train_y = make_set(120)``: the function's returned expression, read in its own
    scope). None when it cannot be told."""
    bound = resolve(ctx, name)
    if isinstance(bound, Binding):
        return bound.value
    assignment = _single_assignment(ctx, name)
    target = getattr(assignment, "node", None)
    if isinstance(target, cst.Param):
        return _argument_of(ctx, target)
    element = ctx.parent(target) if isinstance(target, cst.Name) else None
    tuple_ = ctx.parent(element) if isinstance(element, cst.Element) else None
    assign_target = ctx.parent(tuple_) if isinstance(tuple_, (cst.Tuple, cst.List)) else None
    assign = ctx.parent(assign_target) if isinstance(assign_target, cst.AssignTarget) else None
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    index = next(i for i, e in enumerate(tuple_.elements) if e is element)
    if any(isinstance(e, cst.StarredElement) for e in tuple_.elements):
        return None
    value = assign.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
        function = resolve(ctx, value.func)
        value = _single_return(function) if isinstance(function, cst.FunctionDef) else None
    if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(tuple_.elements):
        return value.elements[index].value
    return None


def _argument_of(ctx: RewriteContext, param: cst.Param, _depth: int = 0) -> cst.BaseExpression | None:
    """What a parameter holds when its function is called from one place only (in any
    module of the program): the argument given there, read through the caller's names, or
    the parameter's default. ``def build_estimator(config, num_classes=3)`` called once as
    ``build_estimator(config=run_config, num_classes=3)``: ``num_classes`` is ``3``."""
    parameters = ctx.parent(param)
    function = ctx.parent(parameters)
    if not isinstance(function, cst.FunctionDef) or param not in parameters.params or function.decorators:
        return None
    reads = reads_reached(ctx, function)
    if not reads or len(reads) != 1 or reads[0][1]:
        return None
    read = reads[0][0]
    call = ctx.parent(read)
    if not isinstance(call, cst.Call) or call.func is not read:
        return None
    try:
        bound = bind_arguments(call, tuple(p.name.value for p in parameters.params))
    except Unsupported:
        return None
    arg = bound.get(param.name.value)
    value = arg.value if arg is not None else param.default
    if isinstance(value, cst.Name) and arg is not None and _depth < 4:
        assignment = _single_assignment(ctx, value)
        outer = getattr(assignment, "node", None)
        if isinstance(outer, cst.Param):
            return _argument_of(ctx, outer, _depth + 1)
        found = value_of(ctx, value)
        return found if found is not None else value
    return value


def own_returns(function: cst.FunctionDef) -> list[cst.Return]:
    """The function's own ``return`` statements (not those of functions, classes or lambdas
    defined in it)."""
    returns = []
    stack = list(function.body.children)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, cst.Return):
            returns.append(node)
        stack.extend(node.children)
    return returns


def _single_return(function: cst.FunctionDef) -> cst.BaseExpression | None:
    """The value of a function's one ``return``, its last statement."""
    returns = own_returns(function)
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else []
    last = body[-1] if body else None
    if len(returns) != 1 or not (isinstance(last, cst.SimpleStatementLine) and last.body[-1] is returns[0]):
        return None
    return returns[0].value


def reads_reached(ctx: RewriteContext, target: cst.CSTNode) -> list[tuple[cst.Name, frozenset]] | None:
    """Every read that the value bound at ``target`` may reach, each with the other
    assignments that may reach it too (rebinding in a branch, in a loop); None when the
    binding cannot be found."""
    assignment = _assignment_of(ctx, target)
    if assignment is None:
        return None
    found = []
    for access in assignment.references:
        if not isinstance(access.node, cst.Name):
            continue
        reaching = ctx.reaching(access.node)
        if reaching is None:
            reaching = frozenset(access.referents)
        elif assignment not in reaching:
            continue
        found.append((access.node, frozenset(r for r in reaching if r is not assignment)))
    if ctx._modules is not None and isinstance(assignment.scope, GlobalScope):
        # Other modules of the program read it through their imports (``model.build_estimator``).
        from estimator2keras.analysis.federation import foreign_reads

        name = target.name if isinstance(target, (cst.FunctionDef, cst.ClassDef)) else target
        found += [(read, frozenset()) for read in foreign_reads(ctx, name)]
    return found


def accesses_of(ctx: RewriteContext, target: cst.Name) -> list[cst.Name] | None:
    """Every read of the value bound by ``target``; None when one of them may also read
    another assignment's value (the name is rebound on a path that reaches it)."""
    reached = reads_reached(ctx, target)
    if reached is None or any(others for _, others in reached):
        return None
    return [read for read, _ in reached]


def params_entry(ctx: RewriteContext, unit, node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``params["key"]`` read in a model_fn: the entry the Estimator's params give that key (a
    dict literal or ``dict(key=...)``, written there or bound to a name), else None."""
    if not (isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == "params"
            and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
            and isinstance(node.slice[0].slice.value, cst.SimpleString)):
        return None
    key = node.slice[0].slice.value.evaluated_value
    given = unit.arg_value("params") if unit is not None else None
    for _ in range(8):
        if not isinstance(given, cst.Name):
            break
        given = getattr(resolve(ctx, given), "value", None)
    if isinstance(given, cst.Dict):
        return next((e.value for e in given.elements if isinstance(e, cst.DictElement)
                     and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == key), None)
    if isinstance(given, cst.Call) and isinstance(given.func, cst.Name) and given.func.value == "dict":
        return next((a.value for a in given.args if a.keyword is not None and a.keyword.value == key), None)
    return None


def resolve_call(ctx: RewriteContext, node: cst.BaseExpression, paths: set[str] | frozenset[str]):
    """``node`` is a call to one of ``paths``, or a name bound once to such a call.

    Returns (call, binding-or-None), or (None, None).
    """
    if isinstance(node, cst.Call) and ctx.call_api_path(node) in paths:
        return node, None
    bound = resolve(ctx, node)
    if isinstance(bound, Binding) and isinstance(bound.value, cst.Call) and ctx.call_api_path(bound.value) in paths:
        return bound.value, bound
    return None, None


def bind_arguments(call: cst.Call, signature: tuple[str, ...]) -> dict[str, cst.Arg]:
    """Map a call's arguments to parameter names; positional ones through ``signature``."""
    bound: dict[str, cst.Arg] = {}
    position = 0
    for arg in call.args:
        if arg.star:
            raise Unsupported("arguments passed with * or ** cannot be followed", arg)
        if arg.keyword is None:
            if position >= len(signature):
                raise Unsupported("more positional arguments than the signature has", arg)
            bound[signature[position]] = arg
            position += 1
        else:
            bound[arg.keyword.value] = arg
    return bound


# ---------------------------------------------------------------------------------------
# Input functions
# ---------------------------------------------------------------------------------------
INPUT_FN_PARAMS = ("mode", "params", "config", "input_context")
MODE_STRINGS = {"train": "train", "eval": "eval", "predict": "infer"}


#: Estimator input_fns that build their batches from in-memory arrays.
ARRAY_INPUT_FNS = frozenset({"estimator.inputs.numpy_input_fn", "estimator.inputs.pandas_input_fn"})


@dataclass
class InputFn:
    """What was passed as ``input_fn``: a function, a lambda calling a function, or a
    ``numpy_input_fn(...)`` / ``pandas_input_fn(...)`` (the call itself, or a name bound to it)."""

    expr: cst.BaseExpression
    function: cst.FunctionDef | None = None
    lambda_: cst.Lambda | None = None
    #: ``train_input_fn = lambda: ...``: the name the lambda was bound to, passed by that name.
    lambda_binding: "Binding | None" = None
    helpers: list[cst.FunctionDef] = field(default_factory=list)
    #: The lambda's calls of ``helpers``, each with the function it calls.
    helper_calls: list[tuple[cst.Call, cst.FunctionDef]] = field(default_factory=list)
    #: The expression whose value is the input_fn, called by the Keras program to get the
    #: dataset: ``make_input_fn(x, y)`` returning ``function`` (a nested def) or ``lambda_``
    #: (``return lambda: ...``), or a name holding it (``train_input_fn`` of ``train_input_fn,
    #: eval_input_fn = get_input_fns(...)``, of ``train_input_fn = functools.partial(...)``).
    factory_call: cst.BaseExpression | None = None
    #: ``functools.partial(function, x, batch_size=8)``: the partial that is the input_fn
    #: (``function`` is the function it binds); the Estimator passed it only what it leaves.
    partial: cst.Call | None = None
    #: A function to map over the dataset (``model.preprocess``), set by the plan.
    dataset_map: str | None = None
    #: The calls of ``function`` the Keras program makes (``call_expression``), for rules
    #: that pass it more (E2K602 passes the global batch size).
    calls_made: list[cst.Call] = field(default_factory=list)
    #: The expressions giving the dataset that the Keras program reads (``call_expression``
    #: before ``dataset_map``): a call made, or the lambda's body (E2K602 joins their batches).
    datasets_made: list[cst.BaseExpression] = field(default_factory=list)
    #: ``numpy_input_fn(...)`` / ``pandas_input_fn(...)``, and the binding when it is named.
    array_call: cst.Call | None = None
    array_binding: Binding | None = None
    #: ``get_input_fn(df, shuffle=True)``, a function of the file returning ``array_call``:
    #: that call (the Estimator got its result), and the function. The call gives the dataset
    #: once the function returns it (E2K006).
    array_factory_call: cst.Call | None = None
    array_factory: cst.FunctionDef | None = None
    #: The calls of the program's functions that make the input_fn (``array_factory``'s and
    #: ``factory_call``'s), with the names bound to them on the way.
    chain: "FactoryChain | None" = None
    #: The input_fns a name may be when the Estimator reads it (``if use_dataset: def
    #: train_input_fn(): ... else: train_input_fn = numpy_input_fn(...)``): each converts, and
    #: each must be called the same way.
    alternatives: list["InputFn"] = field(default_factory=list)

    def definitions(self) -> list[cst.FunctionDef]:
        """Functions whose code builds the dataset (the input_fn itself, or what a lambda calls)."""
        if self.alternatives:
            return [d for alternative in self.alternatives for d in alternative.definitions()]
        if self.function is not None:
            return [self.function, *self.helpers]  # what it returns the call of builds it too
        return list(self.helpers)

    def may_repeat(self, ctx: RewriteContext, mode: str) -> bool:
        """True unless the dataset is visibly finite when the Estimator calls the input_fn in
        ``mode``: no ``.repeat()`` without a literal count in the code that runs then. Code under
        an ``if`` that cannot run is left out: ``if training:`` where the lambda passes
        ``training=False`` (or the default says so), ``if mode == ModeKeys.TRAIN:`` in eval."""
        if self.alternatives:
            return any(alternative.may_repeat(ctx, mode) for alternative in self.alternatives)
        if self.array_call is not None:
            epochs = _keyword_or_position(self.array_call, "num_epochs", 3)
            if epochs is not None and self.chain is not None:
                epochs = self.chain.value(ctx, epochs)  # `num_epochs=num_epochs`: the caller's
            return epochs is not None and not isinstance(epochs, cst.Integer)
        if self.function is not None:
            bound = _partial_call(self.partial) if self.partial is not None else None
            decider = _Decider(ctx, self.function, bound, mode)
            decider.add_enclosing(self._factory_decider(ctx), self.function)
            code = [(self.function.body, decider, self.function, bound)]
            code += [(fn.body, _Decider(ctx, fn, call, None), fn, call) for call, fn in self.helper_calls]
        else:
            code = [(fn.body, _Decider(ctx, fn, call, None), fn, call) for call, fn in self.helper_calls]
            if self.lambda_ is not None:
                code.append((self.lambda_.body, _Decider(ctx, None, None, None), None, None))
        for body, decider, fn, fn_call in code:
            for call in _live_calls(body, decider):
                if isinstance(call.func, cst.Attribute) and call.func.attr.value == "repeat":
                    count = _keyword_or_position(call, "count", 0)
                    if isinstance(count, cst.Integer) or _run_time_count(count):
                        continue
                    given = _argument_given(ctx, fn, fn_call, count)
                    if isinstance(given, cst.Integer):
                        continue  # `lambda: input_fn(data, num_epochs=2)`: the helper's parameter
                    if isinstance(given, cst.Name) and isinstance(self._factory_value(ctx, given), cst.Integer):
                        continue  # given the parameter of a factory (`return lambda: read(x, epochs)`)
                    if not isinstance(self._factory_value(ctx, count), cst.Integer):
                        return True
        return False

    def _factory_decider(self, ctx: RewriteContext) -> "_Decider | None":
        """What the factory call that made this input_fn passes its flags (``input_fn(x, y,
        repeat=False)`` returning a nested ``_fn`` that tests ``if repeat:``)."""
        if self.chain is not None and self.function is not None:
            # The flags the nested function tests, followed out through the chain's calls.
            decider = _Decider(ctx, None, None, None)
            own = {p.name.value for p in self.function.params.params}
            for node in _emit.walk(self.function.body):
                if not isinstance(node, cst.Name) or node.value in own or node.value in decider.constants:
                    continue
                value = self.chain.value(ctx, node)
                if value is not node and _literal_bool(value) is not None:
                    decider.constants[node.value] = _literal_bool(value)
            return decider
        if self.chain is not None:
            return None
        factory, call = self._factory(ctx)
        return _Decider(ctx, factory, call, None) if factory is not None else None

    def _factory(self, ctx: RewriteContext) -> tuple[cst.FunctionDef | None, cst.Call | None]:
        """The function of the program whose call made this input_fn, and that call."""
        call = self.factory_call
        if isinstance(call, cst.Name):  # `train_input_fn = make_input_fn(...)`, passed by name
            bound_name = resolve(ctx, call)
            call = bound_name.value if isinstance(bound_name, Binding) else None
        factory = resolve(ctx, call.func) if isinstance(call, cst.Call) else None
        return (factory, call) if isinstance(factory, cst.FunctionDef) else (None, None)

    def _factory_value(self, ctx: RewriteContext, node) -> cst.BaseExpression | None:
        """``repeat(num_epochs)`` in the input_fn a factory returns (TensorFlow's linear-model
        tutorial, ``make_input_fn(df, y, num_epochs=10)``): the factory call's argument for that
        parameter, or its default; through the calls of functions that return the factory's call
        (``get_train_input_fn()`` returning ``make_input_fn(x, y, num_epochs=epochs)``)."""
        if self.chain is not None:
            return self.chain.value(ctx, node)
        factory, call = self._factory(ctx)
        return _argument_given(ctx, factory, call, node) if factory is not None else None

    def call_expression(self, params: cst.BaseExpression | None, mode: str | None = None) -> cst.BaseExpression:
        """The expression that gives the dataset, as the Estimator would have called it in
        ``mode`` ("train", "eval" or "infer": what ``ModeKeys`` hold), mapped through
        ``dataset_map`` when the model preprocesses its features in tf.data."""
        if self.alternatives:
            made = [alternative.call_expression(params, mode) for alternative in self.alternatives]
            if len({_emit.code(m) for m in made}) != 1:
                raise Unsupported("the input_fns this name may be are not called the same way", self.expr)
            self.calls_made.extend(c for alternative in self.alternatives for c in alternative.calls_made)
            return made[0]
        dataset = self._dataset_expression(params, mode)
        self.datasets_made.append(dataset)
        if self.dataset_map is None:
            return dataset
        if not isinstance(dataset, (cst.Call, cst.Name, cst.Attribute, cst.Subscript)):
            dataset = dataset.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Call(
            func=cst.Attribute(dataset, cst.Name("map")), args=[cst.Arg(_emit.expr(self.dataset_map))])

    def _lambda_body(self, params: cst.BaseExpression | None, mode: str | None) -> cst.BaseExpression:
        """The lambda's body, with what the Estimator passed it written in: ``mode`` as its
        string, ``params["batch_size"]`` as the value the params dict holds for it
        (``lambda params: read(x, y, params["batch_size"])``, TPUEstimator's style)."""
        names = [p.name.value for p in self.lambda_.params.params]
        if not names:
            return self.lambda_.body
        values: dict[cst.CSTNode, cst.CSTNode] = {}
        stack: list[cst.CSTNode] = [self.lambda_.body]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Lambda):
                shadowing = {p.name.value for p in node.params.params}
                if shadowing & set(names):
                    raise Unsupported("a lambda inside the input_fn lambda rebinds its parameters", node)
            if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == "params" \
                    and "params" in names:
                values[node] = self._params_value(node, params)
                continue
            if isinstance(node, cst.Name) and node.value in names:
                if node.value == "mode":
                    if mode is None:
                        raise Unsupported("the input_fn takes `mode`, but e2k does not know the mode here", self.lambda_)
                    values[node] = cst.SimpleString(f'"{mode}"')
                    continue
                if params is None:
                    raise Unsupported("the input_fn takes `params`, but the Estimator has none", self.lambda_)
                if not isinstance(params, (cst.Name, cst.Attribute)):
                    raise Unsupported("the input_fn lambda passes `params` on whole; e2k writes in the values it "
                                      "reads (`params[\"batch_size\"]`)", node)
                values[node] = params
                continue
            stack.extend(node.children)
        return _emit.replace_in(self.lambda_.body, values)

    def _params_value(self, subscript: cst.Subscript, params: cst.BaseExpression | None) -> cst.BaseExpression:
        if params is None:
            raise Unsupported("the input_fn takes `params`, but the Estimator has none", self.lambda_)
        if isinstance(params, (cst.Name, cst.Attribute)):
            return subscript.with_changes(value=params)
        index = subscript.slice[0].slice if len(subscript.slice) == 1 else None
        key = index.value if isinstance(index, cst.Index) else None
        if isinstance(params, cst.Dict) and isinstance(key, cst.SimpleString):
            for element in params.elements:
                if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                        and element.key.evaluated_value == key.evaluated_value:
                    value = element.value
                    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer,
                                              cst.Float, cst.SimpleString, cst.List, cst.Dict, cst.Tuple)):
                        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                    return value
        raise Unsupported("the input_fn lambda reads a value of `params` e2k cannot find", subscript)

    def _params_read(self, params: cst.BaseExpression) -> cst.BaseExpression:
        """``params`` less the literal keys the input_fn never reads: ``{**params,
        "batch_size": 16}`` (what TPUEstimator gave an input_fn) is ``params`` to one that reads
        ``params.get("train_batch_size", 16)`` only. Unchanged when the function reads
        ``params`` other than by literal keys (passes it on, iterates it)."""
        if not isinstance(params, cst.Dict):
            return params
        keys = _literal_keys_read(self.function, "params")
        if keys is None:
            return params
        kept = [e for e in params.elements
                if not (isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                        and e.key.evaluated_value not in keys)]
        if len(kept) == len(params.elements):
            return params
        if len(kept) == 1 and isinstance(kept[0], cst.StarredDictElement):
            return kept[0].value  # `{**params}` is `params` to a function that only reads it
        if kept:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return params.with_changes(elements=kept)

    def _dataset_expression(self, params: cst.BaseExpression | None, mode: str | None) -> cst.BaseExpression:
        if self.array_call is not None:
            if self.array_binding is not None:
                return cst.Call(func=cst.Name(self.array_binding.name))
            if self.array_factory_call is not None:
                return self.array_factory_call  # the function returns the dataset now
            return self.array_call  # the input rule replaces the call with its dataset
        if self.lambda_ is not None and self.factory_call is None:
            return self._lambda_body(params, mode)
        if self.lambda_ is not None:
            passed, owner = list(self.lambda_.params.params), self.lambda_
        else:
            assert self.function is not None
            passed, owner = _left_by_partial(self.function, self.partial), self.function
        args = []
        for param in passed:
            name = param.name.value
            if name == "params":
                if params is None:
                    raise Unsupported("the input_fn takes `params`, but the Estimator has none", owner)
                args.append(_emit.keyword_arg(
                    "params", self._params_read(params) if self.lambda_ is None else params))
            elif name == "mode":  # the Estimator passes it, default or not (Estimator._call_input_fn)
                if mode is None:
                    raise Unsupported("the input_fn takes `mode`, but e2k does not know the mode here", owner)
                args.append(_emit.keyword_arg("mode", cst.SimpleString(f'"{mode}"')))
            elif name == "config" and param.default is None:
                args.append(_emit.keyword_arg("config", cst.Name("None")))
        if self.factory_call is not None:
            call = cst.Call(func=self.factory_call, args=_emit.call_args(args))
        elif self.partial is not None:
            # `functools.partial(input_fn, x, batch_size=8)` written where the Estimator read it:
            # the call it stood for (`input_fn(x, batch_size=8)`).
            call = cst.Call(func=self.partial.args[0].value, args=_emit.call_args([*self.partial.args[1:], *args]))
        else:
            call = cst.Call(func=cst.Name(self.function.name.value), args=_emit.call_args(args))
        self.calls_made.append(call)
        return call


def _literal_keys_read(fn: cst.FunctionDef, param: str) -> set[str] | None:
    """The string keys ``fn`` reads of its parameter ``param`` (``params["batch_size"]``,
    ``params.get("shuffle", True)``), or None when it uses the parameter any other way, or
    binds the name anywhere (an assignment, a nested function's parameter)."""
    if not any(p.name.value == param for p in fn.params.params):
        return None
    keys: set[str] = set()
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None, cst.CSTNode | None]] = [(fn.body, None, None)]
    while stack:
        node, parent, grandparent = stack.pop()
        if isinstance(node, cst.Name) and node.value == param:
            if isinstance(parent, cst.Subscript) and parent.value is node and len(parent.slice) == 1 \
                    and not isinstance(grandparent, (cst.AssignTarget, cst.Del)):
                index = parent.slice[0].slice
                key = index.value if isinstance(index, cst.Index) else None
                if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
                    keys.add(key.evaluated_value)
                    continue
            if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == "get" \
                    and isinstance(grandparent, cst.Call) and grandparent.func is parent and grandparent.args:
                first = grandparent.args[0]
                if first.keyword is None and isinstance(first.value, cst.SimpleString) \
                        and isinstance(first.value.evaluated_value, str):
                    keys.add(first.value.evaluated_value)
                    continue
            return None  # passed on, iterated, rebound, a parameter of a nested function...
        stack.extend((child, node, parent) for child in node.children)
    return keys


def _argument_given(ctx: RewriteContext, fn: cst.FunctionDef | None, call: cst.Call | None,
                    node: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The value a parameter of ``fn`` that ``node`` reads has when ``fn`` is called by
    ``call`` (its argument there, or its default; None without a call: the Estimator calls it
    with no argument but its own)."""
    if fn is None or not isinstance(node, cst.Name):
        return None
    params = {p.name.value: p for p in fn.params.params}
    param = params.get(node.value)
    scope = ctx.scope(node)
    assignments = list(scope[node.value]) if scope is not None else []
    if param is None or len(assignments) != 1 or getattr(assignments[0], "node", None) is not param:
        return None  # read in a nested function too: the one assignment it sees is the parameter
    if call is None:
        return param.default
    try:
        bound = bind_arguments(call, tuple(params))
    except Unsupported:
        return None
    return bound[node.value].value if node.value in bound else param.default


class _Decider:
    """Which way an ``if`` of an input_fn goes when it is called so: a parameter the call
    passes a literal ``True``/``False`` (or leaves at such a default), or, when the mode is
    known, a test of the ``mode`` parameter. None: it cannot tell."""

    def __init__(self, ctx: RewriteContext, fn: cst.FunctionDef | None, call: cst.Call | None, mode: str | None):
        self.constants: dict[str, bool] = {}
        self.mode = None
        self.tests = ModeTests(ctx)
        if fn is None:
            return
        params = fn.params.params
        names = [p.name.value for p in params]
        self.mode = mode if "mode" in names else None
        for param in params:
            if param.default is not None and _literal_bool(param.default) is not None:
                self.constants[param.name.value] = _literal_bool(param.default)
        if call is not None:
            for index, arg in enumerate(call.args):
                if arg.star:
                    self.constants.clear()  # *args / **kwargs: nothing is known
                    return
                name = arg.keyword.value if arg.keyword is not None else (names[index] if index < len(names) else None)
                if name is None:
                    continue
                value = _literal_bool(arg.value)
                if value is None:
                    self.constants.pop(name, None)
                else:
                    self.constants[name] = value
        for param in params:  # a parameter the function assigns again says nothing
            scope = ctx.scope(param.name)
            if scope is None or len(scope.assignments[param.name.value]) != 1:
                self.constants.pop(param.name.value, None)
                if param.name.value == "mode":
                    return
        if self.mode is None and call is not None and "mode" in names:
            # `lambda: input_fn(params, tf.estimator.ModeKeys.EVAL)`: the mode the call passes.
            given = _keyword_or_position(call, "mode", names.index("mode"))
            self.mode = self.tests.mode_value(given) if given is not None else None
        if self.mode is not None:
            # `training = mode == tf.estimator.ModeKeys.TRAIN`, then `if training:`.
            for node in _walk_statements(fn):
                if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                    name = node.targets[0].target
                    scope = ctx.scope(name)
                    modes = self.tests.modes_where_true(node.value)
                    if modes is not None and scope is not None and len(scope.assignments[name.value]) == 1:
                        self.tests.flags[name.value] = modes

    def add_enclosing(self, outer: "_Decider | None", fn: cst.FunctionDef) -> None:
        """The flags of the function ``fn`` is nested in, as its call fixed them, where ``fn``
        reads them as its closure (not shadowed by its own parameters)."""
        if outer is None:
            return
        own = {p.name.value for p in fn.params.params}
        for name, value in outer.constants.items():
            if name not in own:
                self.constants.setdefault(name, value)

    def decide(self, test: cst.BaseExpression) -> bool | None:
        if isinstance(test, cst.Name) and test.value in self.constants:
            return self.constants[test.value]
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self.decide(test.expression)
            return None if inner is None else not inner
        if self.mode is not None:
            modes = self.tests.modes_where_true(test)
            if modes is not None:
                return self.mode in modes
        return None


def _walk_statements(fn: cst.FunctionDef) -> Iterator[cst.CSTNode]:
    """The nodes of ``fn``'s own body (not of functions nested in it)."""
    stack = list(fn.body.children)
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        yield current
        stack.extend(current.children)


def _literal_bool(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _live_calls(node: cst.CSTNode, decider: _Decider) -> Iterator[cst.Call]:
    """The calls in ``node`` outside the branches of ``if`` statements and expressions that
    ``decider`` knows are not taken."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.If, cst.IfExp)):
            taken = decider.decide(current.test)
            if taken is not None:
                branch = current.body if taken else current.orelse
                if branch is not None:
                    stack.append(branch)
                continue
        if isinstance(current, cst.Call):
            yield current
        stack.extend(reversed(current.children))


def resolve_input_fn(ctx: RewriteContext, node: cst.BaseExpression) -> InputFn:
    alternatives = _alternative_input_fns(ctx, node)
    if alternatives is not None:
        return alternatives
    array_call, binding = resolve_call(ctx, node, ARRAY_INPUT_FNS)
    if array_call is not None:
        return InputFn(node, array_call=array_call, array_binding=binding)
    made = _factory_input_fn(ctx, node)
    if made is not None:
        return made
    bound = resolve(ctx, node)
    if isinstance(bound, cst.FunctionDef):
        _check_input_fn_params(ctx, bound)
        return InputFn(node, function=bound, **_delegates(ctx, bound))
    if isinstance(bound, Binding) and isinstance(bound.value, cst.Lambda):
        # `train_input_fn = lambda: model.input_fn(...)`, passed by its name.
        found = _lambda_input_fn(ctx, node, bound.value)
        found.lambda_binding = bound
        return found
    if isinstance(node, cst.Lambda):
        return _lambda_input_fn(ctx, node, node)
    if _partial_function(ctx, node) is not None:
        # `input_fn=functools.partial(input_fn, x, batch_size=8)`: the Keras program calls it so.
        return _partial_input_fn(ctx, node, node, None)
    if isinstance(bound, Binding) and _partial_function(ctx, bound.value) is not None:
        return _partial_input_fn(ctx, node, bound.value, node)  # `train_input_fn = functools.partial(...)`
    unpacked = _unpacked_input_fn(ctx, node)
    if unpacked is not None:
        return unpacked
    raise Unsupported(_not_followed(ctx, node), node)


def _not_followed(ctx: RewriteContext, node: cst.BaseExpression) -> str:
    """Why ``node`` is no input_fn e2k follows, as precisely as e2k can tell."""
    reason = "this input_fn is not a function, a lambda, a functools.partial or an input_fn factory that e2k can follow"
    call = node
    if isinstance(node, (cst.Name, cst.Attribute)):
        bound = resolve(ctx, node)
        call = bound.value if isinstance(bound, Binding) else None
        if bound is None and isinstance(node, cst.Name) and _single_assignment(ctx, node) is None:
            scope = ctx.scope(node)
            if scope is not None and not scope.assignments[node.value] and not hasattr(builtins, node.value):
                if not scope[node.value]:
                    return (f"`{node.value}` is defined nowhere the program can see: Python raises a NameError "
                            "here (a missing import?)")
                return f"`{node.value}` is not defined here"
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            scope = ctx.scope(node.value)
            if scope is not None and not scope.assignments[node.value.value] and \
                    not hasattr(builtins, node.value.value):
                if not scope[node.value.value]:
                    return (f"`{node.value.value}` (of `{_emit.code(node)}`) is defined nowhere the program can see: "
                            "Python raises a NameError here (a missing import?)")
                return f"`{node.value.value}` (of `{_emit.code(node)}`) is not defined here"
    if isinstance(call, cst.Call) and isinstance(call.func, (cst.Name, cst.Attribute)):
        function = resolve(ctx, call.func)
        if isinstance(function, cst.FunctionDef):
            returned = _single_return(function)
            what = f"`{_emit.code(call.func)}`"
            if returned is None:
                return f"{reason}: {what} has more than one return, or none last"
            try:
                bind_arguments(call, tuple(p.name.value for p in function.params.params))
            except Unsupported:
                return f"{reason}: {what} is called with more positional arguments than it takes"
            return f"{reason}: {what} returns `{_emit.code(returned)}`, not a function e2k follows"
    return reason


def _partial_function(ctx: RewriteContext, node: cst.BaseExpression | None) -> cst.FunctionDef | None:
    """``functools.partial(fn, ...)`` of a function of the program (positional arguments
    first, none passed with ``*`` or ``**``): ``fn``'s definition; None for anything else."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute)) and node.args):
        return None
    from libcst.metadata import QualifiedNameProvider

    names = {q.name for q in ctx.get_metadata(QualifiedNameProvider, node.func, set())}
    if "functools.partial" not in names:
        return None
    first = node.args[0]
    if first.keyword is not None or first.star or not isinstance(first.value, (cst.Name, cst.Attribute)):
        return None
    if any(arg.star for arg in node.args):
        return None
    function = resolve(ctx, first.value)
    return function if isinstance(function, cst.FunctionDef) else None


def _partial_call(partial: cst.Call) -> cst.Call:
    """The call a partial stands for, with the arguments it binds (``fn(x, batch_size=8)``):
    read to bind the function's parameters, never written."""
    return cst.Call(func=partial.args[0].value, args=partial.args[1:])


def _left_by_partial(function: cst.FunctionDef, partial: cst.Call | None) -> list[cst.Param]:
    """The parameters a partial leaves to its caller (all of them without one): TensorFlow's
    fn_args drops the positional ones it binds and its keywords, and the Estimator passes
    ``mode``, ``params`` and ``config`` to those left."""
    params = list(function.params.params)
    if partial is None:
        return params
    positional = [a for a in partial.args[1:] if a.keyword is None]
    keywords = {a.keyword.value for a in partial.args[1:] if a.keyword is not None}
    return [p for p in params[len(positional):] if p.name.value not in keywords]


def _partial_input_fn(ctx: RewriteContext, node: cst.BaseExpression, partial: cst.Call,
                      name: cst.BaseExpression | None, chain: "FactoryChain | None" = None) -> InputFn:
    """The input_fn a ``functools.partial`` makes; ``name``: what holds it (a name, a factory's
    call), which the Keras program calls; None: the partial is written where it is read."""
    function = _partial_function(ctx, partial)
    try:
        bind_arguments(_partial_call(partial), tuple(p.name.value for p in function.params.params))
    except Unsupported:
        raise Unsupported("the functools.partial passes more positional arguments than the function takes", partial)
    _check_input_fn_params(ctx, function, _left_by_partial(function, partial))
    return InputFn(node, function=function, partial=partial, factory_call=name, chain=chain)


def _returned_callable(ctx: RewriteContext, function: cst.FunctionDef, value: cst.BaseExpression | None):
    """What a function returns as an input_fn, read in its own scope: a nested ``def`` (by its
    name), a lambda or a ``functools.partial`` (written in the return, or bound once to a name
    it returns). None for anything else."""
    if isinstance(value, cst.Name):
        bound = resolve(ctx, value)
        if isinstance(bound, cst.FunctionDef):
            return bound
        if isinstance(bound, Binding) and ctx.within(bound.statement, (function,)):
            value = bound.value
    if isinstance(value, cst.Lambda) or _partial_function(ctx, value) is not None:
        return value
    return None


def _callable_input_fn(ctx: RewriteContext, node: cst.BaseExpression, made, holder: cst.BaseExpression,
                       chain: "FactoryChain") -> InputFn:
    """The input_fn ``made`` (what ``_returned_callable`` found), which ``holder`` holds once
    the chain's calls are made: the Keras program calls ``holder``."""
    if isinstance(made, cst.FunctionDef):
        _check_input_fn_params(ctx, made)
        return InputFn(node, function=made, factory_call=holder, chain=chain)
    if isinstance(made, cst.Lambda):
        found = _lambda_input_fn(ctx, node, made)
        found.factory_call, found.chain = holder, chain
        return found
    return _partial_input_fn(ctx, node, made, holder, chain)


def _unpacked_input_fn(ctx: RewriteContext, node: cst.BaseExpression) -> InputFn | None:
    """``train_input_fn, eval_input_fn = get_input_fns(...)`` (a data-loading function whose one
    ``return`` is a tuple of input_fns: nested defs, lambdas, partials): the element this name
    holds. The Keras program calls the name (``train_input_fn()``)."""
    if not isinstance(node, cst.Name):
        return None
    found = unpacking(ctx, node)
    if found is None:
        return None
    _, assign, tuple_, index = found
    call = assign.value
    if not (isinstance(call, cst.Call) and isinstance(call.func, (cst.Name, cst.Attribute))):
        return None
    function = resolve(ctx, call.func)
    if not isinstance(function, cst.FunctionDef) or function.decorators:
        return None
    returned = _single_return(function)
    if not (isinstance(returned, (cst.Tuple, cst.List)) and len(returned.elements) == len(tuple_.elements)) \
            or any(isinstance(e, cst.StarredElement) for e in returned.elements):
        return None
    made = _returned_callable(ctx, function, returned.elements[index].value)
    if made is None:
        return None
    return _callable_input_fn(ctx, node, made, node, FactoryChain([(call, function)], []))


def _delegates(ctx: RewriteContext, function: cst.FunctionDef) -> dict:
    """``def train_input(): return inputs.input_fn(files, batch_size=...)``: a function whose
    ``return`` gives the call of a function of the program, which builds its dataset (as a
    lambda's would): ``helpers`` and ``helper_calls`` of its InputFn."""
    helpers, helper_calls = [], []
    for statement in function.body.body if isinstance(function.body, cst.IndentedBlock) else ():
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
            else None
        call = small.value if isinstance(small, cst.Return) else None
        if not (isinstance(call, cst.Call) and isinstance(call.func, (cst.Name, cst.Attribute))):
            continue
        target = resolve(ctx, call.func)
        if isinstance(target, cst.FunctionDef) and target is not function:
            if target not in helpers:
                helpers.append(target)
            helper_calls.append((call, target))
    return {"helpers": helpers, "helper_calls": helper_calls}


def _lambda_input_fn(ctx: RewriteContext, node: cst.BaseExpression, lambda_: cst.Lambda) -> InputFn:
    params = lambda_.params
    if isinstance(params.star_arg, (cst.Param, cst.ParamStar)) or params.kwonly_params or params.star_kwarg \
            or params.posonly_params:
        raise Unsupported("an input_fn lambda with *args, **kwargs or keyword-only parameters is not converted", lambda_)
    for param in params.params:
        if param.name.value not in ("params", "mode") or param.default is not None:
            raise Unsupported(f"input_fn lambda parameter `{param.name.value}` is not one e2k can pass", lambda_)
    helpers, helper_calls = [], []
    for call in iter_calls(lambda_.body):
        # A function of this module, or of another module of the program (``model.input_fn``).
        target = resolve(ctx, call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
        if isinstance(target, cst.FunctionDef):
            if target not in helpers:
                helpers.append(target)
            helper_calls.append((call, target))
    return InputFn(node, lambda_=lambda_, helpers=helpers, helper_calls=helper_calls)


def _alternative_input_fns(ctx: RewriteContext, node: cst.BaseExpression) -> InputFn | None:
    """A name that more than one definition may reach where the Estimator reads it, each a
    function or a name bound once to an input_fn value: one InputFn for each."""
    if not isinstance(node, cst.Name):
        return None
    reaching = ctx.reaching(node)
    if reaching is None or len(reaching) < 2:
        return None
    alternatives = []
    for assignment in sorted(reaching, key=lambda a: ctx.position(getattr(a, "node", None) or node)):
        target = getattr(assignment, "node", None)
        if isinstance(target, cst.FunctionDef):
            _check_input_fn_params(ctx, target)
            alternatives.append(InputFn(node, function=target, **_delegates(ctx, target)))
            continue
        statement = ctx.enclosing_statement(target) if isinstance(target, cst.Name) else None
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and small.targets[0].target is target):
            raise Unsupported(f"`{node.value}` may be one of several values here, not each an input_fn e2k follows", node)
        binding = Binding(target.value, statement, target, small.value)
        if isinstance(small.value, cst.Call) and ctx.call_api_path(small.value) in ARRAY_INPUT_FNS:
            alternatives.append(InputFn(node, array_call=small.value, array_binding=binding))
            continue
        raise Unsupported(f"`{node.value}` may be one of several values here, not each an input_fn e2k follows", node)
    return InputFn(node, alternatives=alternatives)


@dataclass
class FactoryChain:
    """An input_fn made by calling functions of the program, followed from the expression the
    Estimator reads (``train_input_fn``, bound to ``read_mnist(x, y, num_epochs=None)``, whose
    one ``return`` is ``numpy_input_fn(...)``; or ``get_train_input_fn()`` returning
    ``make_input_fn(x, y)``, which returns its nested ``def input_fn``).

    ``frames`` are (call, function called) from the outermost call in, each function's one
    ``return`` being the next call (through names bound once: ``bindings``)."""

    frames: list[tuple[cst.Call, cst.FunctionDef]]
    bindings: list[Binding]
    #: What the innermost function returns: a ``numpy_input_fn(...)`` / ``pandas_input_fn(...)``
    #: call (its ``return`` statement's value), or the nested function it defines.
    array_call: cst.Call | None = None
    function: cst.FunctionDef | None = None
    #: Or a lambda or a ``functools.partial`` it returns (``return lambda: read(x, y)``).
    made: cst.BaseExpression | None = None

    def value(self, ctx: RewriteContext, node: cst.BaseExpression | None) -> cst.BaseExpression | None:
        """What ``node``, read in the innermost function (or a function nested in it), holds
        when the chain's calls are made: a parameter's argument, followed outward through the
        calls (each argument is read in its caller), or its default; ``node`` itself when it
        is not a parameter. None when the arguments cannot be bound (``*args``)."""
        for call, function in reversed(self.frames):
            if not isinstance(node, cst.Name):
                return node
            param = getattr(_single_assignment(ctx, node), "node", None)
            if not isinstance(param, cst.Param) or all(param is not p for p in function.params.params):
                return node
            try:
                bound = bind_arguments(call, tuple(p.name.value for p in function.params.params))
            except Unsupported:
                return None
            arg = bound.get(param.name.value)
            if arg is None:
                return param.default  # read where the function is defined, not in its caller
            node = arg.value
        return node


#: How many calls and names deep an input_fn factory is followed.
_CHAIN_DEPTH = 8


def factory_chain(ctx: RewriteContext, node: cst.BaseExpression) -> FactoryChain | None:
    """The chain of calls of the program's functions that makes the input_fn ``node`` is (a
    name bound once, a call), ending in a function whose one ``return`` is ``numpy_input_fn(...)``
    / ``pandas_input_fn(...)`` or a nested function it defines; None when ``node`` is not that.
    The arguments of each call bind its function's parameters (``FactoryChain.value``)."""
    frames: list[tuple[cst.Call, cst.FunctionDef]] = []
    bindings: list[Binding] = []
    current = node
    for _ in range(_CHAIN_DEPTH):
        if isinstance(current, (cst.Name, cst.Attribute)):
            bound = resolve(ctx, current)
            if not isinstance(bound, Binding) or not isinstance(bound.value, cst.Call):
                return None
            bindings.append(bound)
            current = bound.value
            continue
        if not (isinstance(current, cst.Call) and isinstance(current.func, (cst.Name, cst.Attribute))):
            return None
        if ctx.call_api_path(current) in ARRAY_INPUT_FNS:
            return None  # a numpy_input_fn(...) itself, not a function of the program's
        function = resolve(ctx, current.func)
        if not isinstance(function, cst.FunctionDef):
            return None
        positional = [a for a in current.args if a.keyword is None and not a.star]
        if not isinstance(function.params.star_arg, cst.Param) and len(positional) > len(function.params.params):
            return None  # a call that fails (`make_dataset(batch_size, x, y)` of `def make_dataset(x, y)`)
        frames.append((current, function))
        inner = _returned_function(function)
        if inner is not None:
            return FactoryChain(frames, bindings, function=inner)
        returned = _single_return(function)
        made = _returned_callable(ctx, function, returned)
        if made is not None and not isinstance(made, cst.FunctionDef):
            return FactoryChain(frames, bindings, made=made)
        if isinstance(returned, cst.Call) and ctx.call_api_path(returned) in ARRAY_INPUT_FNS:
            # Converted, each function returns the dataset: a decorator may expect otherwise.
            if any(f.decorators for _, f in frames):
                return None
            return FactoryChain(frames, bindings, array_call=returned)
        if returned is None:
            return None
        current = returned
    return None


def chain_used_elsewhere(ctx: RewriteContext, plan: "ConversionPlan", chain: FactoryChain):
    """Converted, each function of an array input_fn's chain returns the dataset, and each name
    bound on the way holds it: every read of them must be one the converted program makes (the
    unit's own calls, or a call of the chain of one of its input_fns). The first function or
    binding read elsewhere, or None."""
    made = [c for i in plan.input_fns if i.chain is not None and i.array_call is not None for c, _ in i.chain.frames]
    for item in [*(f for _, f in chain.frames), *chain.bindings]:
        reads = accesses_of(ctx, item.name if isinstance(item, cst.FunctionDef) else item.target)
        if not reads or not all(plan.owns(read) or ctx.within(read, made) for read in reads):
            return item
    return None


def _factory_input_fn(ctx: RewriteContext, node: cst.BaseExpression) -> InputFn | None:
    """``input_fn=get_input_fn(df, num_epochs=None, shuffle=True)`` where the function's one
    ``return`` is a ``numpy_input_fn(...)`` / ``pandas_input_fn(...)`` (TensorFlow's 2017-2018
    tutorials), or its nested ``def input_fn``; passed directly, through names bound once
    (``train_input_fn = read_mnist(x, y)``) and through functions returning such a call."""
    chain = factory_chain(ctx, node)
    if chain is None:
        return None
    if chain.array_call is not None:
        return InputFn(node, array_call=chain.array_call, array_factory_call=node,
                       array_factory=chain.frames[-1][1], chain=chain)
    if chain.made is not None:
        return _callable_input_fn(ctx, node, chain.made, node, chain)
    _check_input_fn_params(ctx, chain.function)
    return InputFn(node, function=chain.function, factory_call=node, chain=chain)


def _returned_function(factory: cst.FunctionDef) -> cst.FunctionDef | None:
    """The nested function a factory returns (``def make(): def input_fn(): ...; return input_fn``)."""
    body = factory.body.body if isinstance(factory.body, cst.IndentedBlock) else []
    nested = {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 and isinstance(last.body[0], cst.Return):
        value = last.body[0].value
        if isinstance(value, cst.Name) and value.value in nested:
            return nested[value.value]
    return None


def _check_input_fn_params(ctx: RewriteContext, fn: cst.FunctionDef, left: list[cst.Param] | None = None) -> None:
    """The parameters the Estimator fills (``left``: those a partial leaves, default all) are
    ones e2k can pass."""
    params = fn.params
    if isinstance(params.star_arg, cst.Param) or params.kwonly_params or params.star_kwarg or params.posonly_params:
        raise Unsupported("an input_fn with *args, **kwargs or keyword-only parameters is not converted", fn)
    for param in (params.params if left is None else left):
        name = param.name.value
        # The Estimator passes its RunConfig to a `config` parameter, default or not.
        if name == "config" and _reads(ctx, param.name):
            raise Unsupported("the input_fn reads the Estimator's `config`, which Keras does not have", fn)
        if name == "input_context" and _reads(ctx, param.name):
            # Under a strategy the Estimator gave each worker an InputContext (its shard of the
            # data, its per-replica batch); called without one, the input_fn reads everything.
            raise Unsupported("the input_fn reads `input_context`, which the Estimator gave it under a distribution "
                              "strategy (each worker's shard, the per-replica batch) and e2k does not pass: give "
                              "it to fit through strategy.distribute_datasets_from_function", fn)
        if param.default is not None:
            continue
        if name not in INPUT_FN_PARAMS or name == "input_context":
            raise Unsupported(f"input_fn parameter `{name}` is not one e2k can pass", fn)


def _reads(ctx: RewriteContext, name: cst.Name) -> bool:
    """Does the parameter ``name`` have any reads in its function?"""
    scope = ctx.scope(name)
    if scope is None:
        return True
    for assignment in scope.assignments[name.value]:
        if assignment.references:
            return True
    return False


def _run_time_count(count: cst.BaseExpression | None) -> bool:
    """``repeat(args.epochs)``, ``repeat(FLAGS.num_epochs)``, ``repeat(params["epochs"])``: a
    count the program is given when it runs, taken for a count (the dataset ends). Run with
    None instead, the dataset repeats forever; Keras then stops with an error asking for a
    step count, where the Estimator trained until stopped: loud, never a silent difference."""
    return isinstance(count, (cst.Attribute, cst.Subscript))


def _keyword_or_position(call: cst.Call, keyword: str, position: int) -> cst.BaseExpression | None:
    for index, arg in enumerate(call.args):
        if (arg.keyword is None and index == position) or (arg.keyword is not None and arg.keyword.value == keyword):
            return arg.value
    return None


# ---------------------------------------------------------------------------------------
# The unit
# ---------------------------------------------------------------------------------------
@dataclass
class Use:
    """One read of the Estimator variable, classified."""

    name: cst.Name
    kind: str  # "method" | "train_and_evaluate" | "passed" (handed to a function of the program) | "other"
    call: cst.Call | None = None
    method: str | None = None
    #: The read stays what it is in the Keras program (``est`` of ``for name, est in
    #: estimators.items()``, ``estimators["dnn"]``): it holds the model now. ``name`` may then
    #: be a Subscript.
    receiver: bool = False


@dataclass
class ConfigFactory:
    """``def create_run_config(args): ...; return tf.estimator.RunConfig(...)`` and its call."""

    function: cst.FunctionDef
    call: cst.Call
    #: ``return RunConfig(...)``, the function's last statement.
    returned: cst.SimpleStatementLine
    #: Each parameter the settings read -> the value the call gives it.
    values: dict[str, cst.BaseExpression]
    #: The strategy the function computes itself (``train_distribute=distribution_strategy``,
    #: a local of it): the function then returns it, and its call binds that name.
    strategy: str | None = None
    #: Other locals the settings read, bound once from the parameters and the module
    #: (``session_config = ConfigProto(...)``): read as their values.
    locals: dict[str, Binding] = field(default_factory=dict)


@dataclass
class EstimatorUnit:
    owner: type[UnitRule]
    api_path: str
    statement: cst.SimpleStatementLine
    call: cst.Call
    target: cst.Name
    args: dict[str, cst.Arg]
    uses: list[Use]
    config_call: cst.Call | None = None
    config_binding: Binding | None = None
    #: Bindings of the RunConfig before ``replace(...)`` made the one the Estimator reads.
    config_earlier: list[Binding] = field(default_factory=list)
    config_args: dict[str, cst.Arg] = field(default_factory=dict)
    #: The factory's parameter the config comes through, and the argument of its call.
    config_parameter: tuple[cst.Param, cst.Arg] | None = None
    #: Settings of the RunConfig read back (``run_config.model_dir``): (attribute, value).
    config_reads: list[tuple[cst.Attribute, cst.BaseExpression]] = field(default_factory=list)
    #: Settings read back whose value is computed (``model_dir=args.model_dir or
    #: tempfile.mkdtemp()``, once): bound to a name where the RunConfig was, read by that name
    #: there and wherever the program gives it: (the setting's value, the name).
    config_bound: list[tuple[cst.BaseExpression, str]] = field(default_factory=list)
    #: Reads of the variable that another assignment may reach too (``if tpu: est = A(...)
    #: else: est = B(...)``; ``est.train()``), each with those assignments.
    shared: dict[cst.Name, frozenset] = field(default_factory=dict)
    #: The Estimator is built in a function that returns it (``def build_estimator(...):
    #: return DNNClassifier(...)``, TensorFlow's official wide & deep): the function, and the
    #: statements that call it (``m = build_estimator(model_dir, "wide")``); ``target`` and the
    #: uses are those of the calls' variables.
    factory: cst.FunctionDef | None = None
    sites: list[tuple[cst.SimpleStatementLine, cst.Call, cst.Name]] = field(default_factory=list)
    #: ``return m`` in the factory, when the Estimator was bound to ``m`` there first.
    returned: cst.Name | None = None
    #: The Estimator is built inside an expression: an element of a dict, list or tuple
    #: literal bound to one name (``estimators = {"dnn": DNNClassifier(...), ...}``: that
    #: binding, ``target`` its name), or the receiver of its own method (``LinearClassifier(
    #: ...).train(...)``). Its model is built above ``statement`` and the call replaced by
    #: the model's variable; the uses keep their receivers (``Use.receiver``).
    container: Binding | None = None
    detached: bool = False
    #: The name the model gets (from the element's key), and how messages name the Estimator.
    preferred: str = "model"
    label: str | None = None
    #: ``estimator = add_metrics(estimator, metric_fn)`` statements (``_added_metrics.Wrapper``):
    #: the uses of the names they bind are the unit's; their metrics go to compile().
    wrappers: list = field(default_factory=list)
    #: ``estimator = forward_features(estimator, keys)``: its wrappers (read by the canned model).
    forwarded: list = field(default_factory=list)
    #: The canned model took them (its predictions carry the features).
    forwarding_converted: bool = False
    #: Their metric_fns, read by the model's conversion (None: it did not take them).
    metric_fns: list | None = None
    #: ``if use_tpu: config = RunConfig(A) else: config = RunConfig(B)`` then one Estimator
    #: reading ``config``: one unit per branch's RunConfig (this one's is ``config_binding``),
    #: converted together like Estimators built in the two branches (``_join_pair``). The
    #: statement that places this unit in its branch (its RunConfig's); None: ``statement``.
    anchor: cst.BaseStatement | None = None
    #: The other branches' RunConfig bindings, each a unit of its own (``find_units``).
    other_configs: list[Binding] = field(default_factory=list)
    #: The RunConfig is made by a function of the program (``run_config =
    #: create_run_config(args)``): its settings are read where that function's one
    #: ``return`` makes it, its parameters standing for the call's values.
    config_factory: ConfigFactory | None = None

    @property
    def var(self) -> str:
        return self.label or self.target.value

    def arg_value(self, name: str) -> cst.BaseExpression | None:
        arg = self.args.get(name)
        return arg.value if arg is not None else None

    def config_value(self, name: str) -> cst.BaseExpression | None:
        arg = self.config_args.get(name)
        return arg.value if arg is not None else None


TPU_RUN_CONFIG = frozenset({"estimator.tpu.RunConfig", "contrib.tpu.RunConfig"})
#: tf.contrib.learn's RunConfig (TF 1.x tutorials) holds the same settings, in another order.
LEARN_RUN_CONFIG = "contrib.learn.RunConfig"
RUN_CONFIG = frozenset({"estimator.RunConfig", LEARN_RUN_CONFIG}) | TPU_RUN_CONFIG
RUN_CONFIG_SIGNATURE = (
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
    "save_checkpoints_secs", "session_config", "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours", "log_step_count_steps", "train_distribute",
    "device_fn", "protocol", "eval_distribute", "experimental_distribute",
    "experimental_max_worker_delay_secs", "session_creation_timeout_secs",
    "checkpoint_save_graph_def",
)
TPU_RUN_CONFIG_SIGNATURE = ("tpu_config", "evaluation_master", "master", "cluster")
LEARN_RUN_CONFIG_SIGNATURE = (
    "master", "num_cores", "log_device_placement", "gpu_memory_fraction", "tf_random_seed",
    "save_summary_steps", "save_checkpoints_secs", "save_checkpoints_steps", "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours", "log_step_count_steps", "evaluation_master", "model_dir", "session_config",
)
TRAIN_AND_EVALUATE = "estimator.train_and_evaluate"


def _through_functions(ctx: RewriteContext, reached: list):
    """``train_and_evaluate(classifier)``: an Estimator handed to a function of the program
    called there alone, whose parameter is bound by nothing else. Its reads of the parameter
    are the unit's uses too (the parameter holds the model in the Keras program), and the
    argument is a use of its own (``passed``: it passes the model). (reads, the arguments,
    the reads inside the functions)."""
    out, passed, inside = [], set(), set()
    for read, others in reached:
        arg = ctx.parent(read)
        call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        function = resolve(ctx, call.func) if isinstance(call, cst.Call) and call.func is not read \
            and isinstance(call.func, (cst.Name, cst.Attribute)) and arg.value is read and not arg.star else None
        if others or not isinstance(function, cst.FunctionDef) or function.decorators:
            out.append((read, others))
            continue
        names = tuple(p.name.value for p in function.params.params)
        try:
            bound = bind_arguments(call, names)
        except Unsupported:
            out.append((read, others))
            continue
        param = next((p for p in function.params.params if bound.get(p.name.value) is arg), None)
        callers = accesses_of(ctx, function.name)
        found = reads_reached(ctx, param.name) if param is not None else None
        if not callers or callers != [call.func] or found is None or any(o for _, o in found) \
                or any(r is read for r, _ in found):
            out.append((read, others))
            continue
        passed.add(read)
        out.append((read, others))
        for inner, inner_others in found:
            inside.add(inner)
            out.append((inner, inner_others))
    return out, passed, inside


def _displays(ctx: RewriteContext, name: cst.CSTNode) -> bool:
    """Whether the read only shows the Estimator: the whole expression statement (a notebook
    cell's displayed value), or the one argument of ``print(...)``."""
    if not isinstance(name, cst.Name):
        return False
    parent = ctx.parent(name)
    if isinstance(parent, cst.Expr):
        return True
    if isinstance(parent, cst.Arg) and parent.keyword is None and parent.star == "":
        call = ctx.parent(parent)
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "print" \
            and len(call.args) == 1
    return False


def _use_text(ctx: RewriteContext, name: cst.CSTNode) -> str:
    """How a report names a use of the Estimator it does not convert: the expression around
    the read (``classifier.model_dir``, ``all_classifiers[...] = classifier``), cut short."""
    node, parent = name, ctx.parent(name)
    while isinstance(parent, (cst.Attribute, cst.Subscript, cst.Arg, cst.Call, cst.Element, cst.List, cst.Tuple)) \
            and len(_emit.code(parent)) <= 60:
        node, parent = parent, ctx.parent(parent)
    text = " ".join(_emit.code(node).split())
    if node is name:
        statement = ctx.enclosing_statement(name)
        if isinstance(statement, cst.SimpleStatementLine):
            text = "; ".join(" ".join(_emit.code(small).split()) for small in statement.body)
    return f"this use (`{text[:70]}`)"


def _classify(ctx: RewriteContext, name: cst.Name) -> Use:
    parent = ctx.parent(name)
    if isinstance(parent, cst.Attribute) and parent.value is name:
        grandparent = ctx.parent(parent)
        if isinstance(grandparent, cst.Call) and grandparent.func is parent:
            return Use(name, "method", grandparent, parent.attr.value)
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        if isinstance(call, cst.Call) and ctx.call_api_path(call) == TRAIN_AND_EVALUATE:
            first = call.args[0] if call.args else None
            if (parent is first and parent.keyword is None) or (parent.keyword and parent.keyword.value == "estimator"):
                return Use(name, "train_and_evaluate", call)
    return Use(name, "other")


def find_units(ctx: RewriteContext, owners: dict[str, type[UnitRule]]) -> Iterator[EstimatorUnit | Unsupported]:
    """Every Estimator construction in the module, as a unit or as the reason it is not one."""
    last = {path.rpartition(".")[2] for path in owners}
    sources = getattr(ctx, "_program_sources", None)
    if ctx._modules is not None and sources:
        # A program's modules whose text names no constructor build no Estimator.
        modules = [m for p, m in ctx._modules.items() if any(n.encode() in sources.get(p, b"") for n in last)]
    else:
        modules = list(ctx.program_modules.values())
    calls = (call for module in modules for call in iter_calls(module))
    for call in calls:
        if not _may_construct(ctx, call, last):
            continue
        path = ctx.call_api_path(call)
        owner = owners.get(path) if path else None
        if owner is None:
            continue
        try:
            unit = _build_unit(ctx, call, path, owner)
            yield unit
            for binding in unit.other_configs:
                variant = replace(unit, config_args={}, config_reads=[], config_earlier=[], config_bound=[],
                                  anchor=None, other_configs=[])
                yield _configure_unit(ctx, variant, binding)
        except Unsupported as exc:
            exc.node = exc.node or call
            exc.code = exc.code or UNSUPPORTED_USE
            exc.estimator_calls = [call]
            yield exc


def _may_construct(ctx: RewriteContext, call: cst.Call, last: set[str]) -> bool:
    """Whether ``call`` may resolve to a constructor whose class is named one of ``last``,
    without resolving it: ``a.b.Estimator(...)`` ends with the class's name; a bare name is
    the class's, or an alias (``E`` of ``from ... import Estimator as E`` or of
    ``E = tf.estimator.Estimator``). Resolving every call of a file took a tenth of a
    conversion."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value in last
    if not isinstance(func, cst.Name):
        return False
    if func.value in last:
        return True
    scope = ctx.scope(func)
    if scope is None:
        return True
    return any(isinstance(getattr(a, "node", None), (cst.Import, cst.ImportFrom, cst.Name))
               for a in scope.assignments[func.value]) if scope.assignments[func.value] else False


def _build_unit(ctx: RewriteContext, call: cst.Call, path: str, owner: type[UnitRule]) -> EstimatorUnit:
    statement = ctx.enclosing_statement(call)
    small = None
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
    factory, sites, returned, returned_others = None, [], None, frozenset()
    if isinstance(small, cst.Return) and small.value is call:
        # `def build_estimator(...): return tf.estimator.DNNClassifier(...)`
        factory = _enclosing_function(ctx, statement)
        sites = _factory_sites(ctx, factory, call)
        target = sites[0][2]
    elif (
        isinstance(small, cst.Assign)
        and small.value is call
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
    ):
        target = small.targets[0].target
    else:
        return _build_detached_unit(ctx, call, path, owner, statement)
    reached = reads_reached(ctx, target) if factory is None else None
    if factory is None:
        if reached is None:
            raise Unsupported(f"the uses of `{target.value}` cannot be followed", target)
        returns = [(read, others) for read, others in reached if isinstance(ctx.parent(read), cst.Return)]
        if returns:
            # `m = tf.estimator.LinearClassifier(...)` ... `return m`: a factory too (each branch
            # of an if/elif binding `m` is one, converted together).
            if len(returns) != 1 or len(reached) != 1:
                raise Unsupported(f"`{target.value}` is returned and used in the function that builds it", returns[0][0])
            returned, returned_others = returns[0]
            factory = _enclosing_function(ctx, statement)
            sites = _factory_sites(ctx, factory, call)
    if factory is not None:
        reached = []
        for _, _, site_target in sites:
            found = reads_reached(ctx, site_target)
            if found is None:
                raise Unsupported(f"the uses of `{site_target.value}` cannot be followed", site_target)
            reached += found
        target = sites[0][2]
    args = bind_arguments(call, owner.signature)
    from estimator2keras._added_metrics import check_earlier_evaluations, follow

    reached, wrappers = follow(ctx, reached)
    reached, passed, inside = _through_functions(ctx, reached)
    uses = [Use(n, "passed") if n in passed else _classify(ctx, n) for n, _ in reached]
    for use in uses:
        if use.name in inside:
            use.receiver = True  # the function's parameter holds the model: its calls keep it
    unit = EstimatorUnit(owner, path, statement, call, target, args, uses)
    unit.wrappers = [w for w in wrappers if w.kind == "metrics"]
    unit.forwarded = [w for w in wrappers if w.kind == "features"]
    check_earlier_evaluations(ctx, unit)
    _check_experiment(ctx, unit)
    unit.shared = {read: others for read, others in reached if others}
    unit.factory, unit.sites, unit.returned = factory, sites, returned
    if returned is not None and returned_others:
        unit.shared[returned] = returned_others  # the Estimators of the other branches
    return _configure_unit(ctx, unit)


#: tf.contrib.learn's Experiment (run by learn_runner.run(experiment_fn, run_config, hparams)).
EXPERIMENT = frozenset({"contrib.learn.Experiment", "contrib.learn.python.learn.Experiment"})


def _check_experiment(ctx: RewriteContext, unit: EstimatorUnit) -> None:
    """An Estimator that a tf.contrib.learn Experiment runs, or that an experiment_fn returns
    with its specs (``return estimator, train_spec, eval_spec``), is refused saying why and
    what e2k converts instead: an Experiment exists only in TensorFlow 1 (no parity run can
    compare it), and it maps one to one to train_and_evaluate."""
    for use in unit.uses:
        if use.kind != "other":
            continue
        arg = ctx.parent(use.name)
        call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        if isinstance(call, cst.Call) and ctx.call_api_path(call) in EXPERIMENT:
            raise Unsupported(
                "the Estimator is run by a tf.contrib.learn.Experiment (learn_runner's experiment_fn), which only "
                "TensorFlow 1 has: e2k cannot run it to prove a conversion. Experiment(estimator, train_input_fn, "
                "eval_input_fn, train_steps, eval_steps) is tf.estimator.train_and_evaluate(estimator, "
                "TrainSpec(train_input_fn, max_steps=train_steps), EvalSpec(eval_input_fn, steps=eval_steps)) "
                "since TensorFlow 1.4: build the Estimator and call that where learn_runner.run was, and e2k "
                "converts it", use.name, UNSUPPORTED_USE)
        element = ctx.parent(use.name)
        holder = ctx.parent(element) if isinstance(element, cst.Element) else None
        if isinstance(holder, (cst.Tuple, cst.List)) and isinstance(ctx.parent(holder), cst.Return):
            raise Unsupported(
                "the Estimator is returned together with other values (an experiment_fn's `return estimator, "
                "train_spec, eval_spec`): e2k follows an Estimator a function returns alone, and specs made where "
                "train_and_evaluate reads them", use.name, UNSUPPORTED_USE)


def _configure_unit(ctx: RewriteContext, unit: EstimatorUnit, chosen: Binding | None = None) -> EstimatorUnit:
    """The unit's RunConfig, followed from ``config=`` (``chosen``: the binding of one branch
    of an `if` that binds it in each, ``_config_branches``)."""
    factory = unit.factory
    config = unit.arg_value("config")
    if config is not None and factory is not None:
        config = _through_parameter(ctx, unit, config)
    if config is not None:
        config_call, binding = resolve_call(ctx, config, RUN_CONFIG)
        replacements: list[cst.Call] = []
        if config_call is None and chosen is None:
            branches = _config_branches(ctx, config)
            if branches:
                chosen, unit.other_configs = branches[0], branches[1:]
        if chosen is not None:
            config_call, binding, unit.anchor = chosen.value, chosen, chosen.statement
        if config_call is None:
            config_call, binding, replacements, unit.config_earlier = _replaced_run_config(ctx, config)
        if config_call is None:
            unit.config_factory, binding = _config_factory(ctx, config)
            config_call = unit.config_factory.returned.body[0].value if unit.config_factory is not None else None
        if config_call is None:
            raise Unsupported(_config_not_followed(ctx, unit, config), config)
        tpu = ctx.call_api_path(config_call) in TPU_RUN_CONFIG
        learn = ctx.call_api_path(config_call) == LEARN_RUN_CONFIG
        unit.config_args = bind_arguments(
            config_call, TPU_RUN_CONFIG_SIGNATURE if tpu else LEARN_RUN_CONFIG_SIGNATURE if learn else RUN_CONFIG_SIGNATURE)
        for replacement in replacements:  # `run_config.replace(model_dir=...)`: its settings win
            for arg in replacement.args:
                if arg.keyword is None or arg.star:
                    raise Unsupported("RunConfig.replace(...) takes its settings by keyword", arg)
                unit.config_args[arg.keyword.value] = arg
        if binding is not None:
            # A branch's RunConfig: the reads after the `if` reach the other branch's too.
            reads = [r for r, _ in reads_reached(ctx, binding.target) or []] if chosen is not None \
                else accesses_of(ctx, binding.target)
            others = [n for n in reads or [None] if n is not config]
            for other in others:
                setting = _config_setting_read(ctx, other, unit.config_args, unit.config_factory is not None) or _config_setting_bound(
                    ctx, unit, other, binding)
                if setting is not None:
                    unit.config_reads.append(setting)
                elif other is None or not (_in_estimator_call(ctx, other) or _config_into_factory(ctx, other)):
                    raise Unsupported(f"the RunConfig `{binding.name}` is used elsewhere too", binding.target)
        unit.config_call, unit.config_binding = config_call, binding
    return unit


def reaching_bindings(ctx: RewriteContext, read: cst.Name) -> list[Binding] | None:
    """The assignments that may reach ``read`` (flow-sensitive), each a plain ``name = value``
    statement, as Bindings; None when that cannot be told or one of them is something else."""
    reaching = ctx.reaching(read)
    if not reaching:
        return None
    bindings = []
    for assignment in reaching:
        target = getattr(assignment, "node", None)
        statement = ctx.enclosing_statement(target) if isinstance(target, cst.Name) else None
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
            else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and small.targets[0].target is target):
            return None
        bindings.append(Binding(target.value, statement, target, small.value))
    return bindings


def _config_branches(ctx: RewriteContext, config: cst.BaseExpression) -> list[Binding] | None:
    """``if params["use_tpu"]: config = tpu.RunConfig(cluster=...) else: config =
    tpu.RunConfig()`` and one Estimator reading ``config`` after the `if`: the RunConfig
    binding of each branch, the `if`'s body first; None when ``config`` is not two such
    bindings, or when the `if`'s test may read differently after it (the join writes the
    Estimator's code under that test again)."""
    if not isinstance(config, cst.Name):
        return None
    bindings = reaching_bindings(ctx, config)
    if bindings is None or len(bindings) != 2 or not all(
            isinstance(b.value, cst.Call) and ctx.call_api_path(b.value) in RUN_CONFIG for b in bindings):
        return None
    branch = _branch_between(ctx, bindings[0].statement, bindings[1].statement)
    if branch is None or not _stable_test(ctx, branch[0].test) or ctx.within(config, (branch[0],)):
        return None
    return bindings if branch[1] else bindings[::-1]


def _config_factory(ctx: RewriteContext, config: cst.BaseExpression) -> tuple[ConfigFactory | None, Binding | None]:
    """``config=create_run_config(args)``, or ``run_config = create_run_config(args)`` read
    there: a function of the program ending in ``return tf.estimator.RunConfig(...)`` (its
    only return). Each setting must read the function's parameters (the call gives them),
    names of the module, or, for the strategy, a local the function computes (it then
    returns that). (None, None) when ``config`` is not such a call; refused, naming the
    setting, when a setting reads another local."""
    call, binding = config, None
    if isinstance(config, cst.Name):
        bound = resolve(ctx, config)
        if not isinstance(bound, Binding):
            return None, None
        call, binding = bound.value, bound
    if not (isinstance(call, cst.Call) and isinstance(call.func, (cst.Name, cst.Attribute))):
        return None, None
    function = resolve(ctx, call.func)
    if not isinstance(function, cst.FunctionDef) or function.decorators or not isinstance(function.body, cst.IndentedBlock):
        return None, None
    last = function.body.body[-1]
    small = last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
    if not (isinstance(small, cst.Return) and isinstance(small.value, cst.Call)
            and ctx.call_api_path(small.value) in RUN_CONFIG):
        return None, None
    what = f"`{_emit.code(call.func)}(...)`"
    if any(isinstance(node, cst.Return) and node is not small for node in _emit.walk(function.body)):
        raise Unsupported(f"the RunConfig is made by {what}, which returns elsewhere too", call, UNSUPPORTED_USE)
    params = function.params
    if params.star_arg != cst.MaybeSentinel.DEFAULT or params.kwonly_params or params.star_kwarg or params.posonly_params:
        raise Unsupported(f"the RunConfig is made by {what}, whose parameters e2k does not read (*args, **kwargs)",
                          call, UNSUPPORTED_USE)
    names = tuple(p.name.value for p in params.params)
    given = {k: a.value for k, a in bind_arguments(call, names).items()}
    values: dict[str, cst.BaseExpression] = {}
    locals_: dict[str, Binding] = {}
    strategy = None
    local_scope = ctx.scope(small)

    def read(expr: cst.BaseExpression, setting: str | None, depth: int) -> None:
        nonlocal strategy
        for node in _emit.walk(expr):
            if not isinstance(node, cst.Name) or not _is_read(ctx, node):
                continue
            assignment = _single_assignment(ctx, node)
            target = getattr(assignment, "node", None)
            param = next((p for p in params.params if target is p or target is p.name), None) if target is not None else None
            if param is not None:
                value = given.get(param.name.value, param.default)
                if value is None:
                    raise Unsupported(f"{what} is called without `{param.name.value}`", call, UNSUPPORTED_USE)
                values[param.name.value] = value
                continue
            scope = ctx.scope(node)
            if not (scope is local_scope and scope.assignments[node.value]):
                if ctx.path_of(function) != ctx.path_of(call) and ctx.api_path(node) is None \
                        and not hasattr(builtins, node.value):
                    # Read where the function is called, another module: its names are not there.
                    raise Unsupported(f"the RunConfig made by {what} reads `{node.value}`, a name of its module, "
                                      "which e2k would have to import where the function is called",
                                      node, UNSUPPORTED_USE)
                continue  # a name of the module
            if depth == 0 and setting in ("train_distribute", "eval_distribute") and expr is node \
                    and strategy in (None, node.value):
                strategy = node.value
                continue
            bound = resolve(ctx, node)
            if depth == 0 and isinstance(bound, Binding) and bound.statement in function.body.body:
                # `session_config = tf.compat.v1.ConfigProto(...)` then `session_config=session_config`:
                # its value, read where the function is called (from its parameters and the module).
                locals_[node.value] = bound
                read(bound.value, setting, depth + 1)
                continue
            raise Unsupported(f"the RunConfig's {f'`{setting}`' if setting else 'setting'} reads `{node.value}`, which "
                              f"{what} computes; e2k reads the settings where the function is called",
                              node, UNSUPPORTED_USE)

    for arg in small.value.args:
        read(arg.value, arg.keyword.value if arg.keyword is not None else None, 0)
    reads = accesses_of(ctx, function.name)
    if reads is None or any(r is not call.func for r in reads):
        # It returns the strategy from now on (or goes): a second caller would get that.
        raise Unsupported(f"{what} makes the RunConfig, and is used elsewhere too", call, UNSUPPORTED_USE)
    if strategy is None:
        rest = [s for s in function.body.body[:-1] if not _is_docstring_line(s)
                and not any(s is b.statement for b in locals_.values())]
        if rest:
            raise Unsupported(f"{what} does more than make the RunConfig (`{_emit.code(rest[0]).strip()[:60]}`), "
                              "which the Keras program would lose", rest[0], UNSUPPORTED_USE)
    return ConfigFactory(function, call, last, values, strategy, locals_), binding


def _is_docstring_line(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(
        statement.body[0], cst.Expr) and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _is_read(ctx: RewriteContext, node: cst.Name) -> bool:
    parent = ctx.parent(node)
    if isinstance(parent, cst.Attribute) and parent.attr is node:
        return False
    if isinstance(parent, cst.Arg) and parent.keyword is node:
        return False
    return True


def _config_not_followed(ctx: RewriteContext, unit: EstimatorUnit, config: cst.BaseExpression) -> str:
    """Why the Estimator's ``config=`` is not followed, as precisely as e2k can tell."""
    reason = "the Estimator's config is not a RunConfig(...) e2k can follow"
    if not isinstance(config, cst.Name):
        return reason
    param = getattr(_single_assignment(ctx, config), "node", None)
    if isinstance(param, cst.Param):
        function = ctx.parent(ctx.parent(param))
        name = function.name.value if isinstance(function, cst.FunctionDef) else "its function"
        reads = reads_reached(ctx, function) if isinstance(function, cst.FunctionDef) else None
        calls = [r for r, _ in reads or [] if isinstance(ctx.parent(r), cst.Call) and ctx.parent(r).func is r]
        if reads and not calls:
            return (f"{reason}: it is `{name}`'s parameter `{config.value}`, and `{name}` is passed on "
                    "(`learn_runner.run(experiment_fn, run_config=...)`) rather than called")
        return (f"{reason}: it is `{name}`'s parameter `{config.value}`; e2k follows a RunConfig given to a "
                "function that returns the Estimator alone")
    bound = resolve(ctx, config)
    if isinstance(bound, Binding) and isinstance(bound.value, cst.Call) and isinstance(
            bound.value.func, (cst.Name, cst.Attribute)) and isinstance(resolve(ctx, bound.value.func), cst.FunctionDef):
        return (f"{reason}: it is made by `{_emit.code(bound.value.func)}(...)`; e2k follows a RunConfig(...) "
                "written where the Estimator reads it or bound to a name")
    return reason


#: Containers a program's Estimators are held in, literal and bound to one name.
_CONTAINERS = (cst.Dict, cst.List, cst.Tuple)
#: Reads of a container that do not touch its Estimators (``len(estimators)``, its keys).
_HARMLESS_METHODS = frozenset({"keys"})


def _build_detached_unit(ctx: RewriteContext, call: cst.Call, path: str, owner: type[UnitRule],
                         statement: cst.CSTNode) -> EstimatorUnit:
    """An Estimator built inside an expression: an element of a dict/list/tuple literal bound
    to one name, whose uses are the loops over it and its subscripts, or the receiver of its
    own method (``LinearClassifier(columns).train(input_fn)``). Anything else is refused,
    saying which construct e2k cannot follow."""
    parent = ctx.parent(call)
    if isinstance(parent, cst.Attribute) and parent.value is call:
        method = ctx.parent(parent)
        if not (isinstance(method, cst.Call) and method.func is parent):
            raise Unsupported(f"`.{parent.attr.value}` of an Estimator that is not bound to a name is read, which "
                              "e2k does not follow", parent)
        unit = EstimatorUnit(owner, path, statement, call, _leftmost_name(call.func), bind_arguments(call, owner.signature),
                             [Use(call, "method", method, parent.attr.value)])
        unit.detached, unit.label = True, f"{_emit.code(call.func)}(...)"
        return _configure_unit(ctx, unit)
    element = parent
    literal = ctx.parent(element) if isinstance(element, (cst.Element, cst.DictElement)) else None
    if _is_pair(literal) and literal.elements[1] is element and isinstance(ctx.parent(literal), cst.Element) \
            and isinstance(ctx.parent(ctx.parent(literal)), (cst.List, cst.Tuple)):
        # `estimators = [("linear", LinearClassifier(...)), ("dnn", DNNClassifier(...))]`: a
        # list of (name, Estimator) pairs, followed as a dict of them is.
        element = ctx.parent(literal)
        literal = ctx.parent(element)
        if not all(isinstance(e, cst.Element) and _is_pair(e.value) for e in literal.elements):
            raise Unsupported("the list holding this (name, Estimator) pair holds other values too", call)
        call_of = lambda e: e.value.elements[1].value  # noqa: E731 - the Estimator of a pair
    else:
        call_of = lambda e: e.value  # noqa: E731
    if not (isinstance(literal, _CONTAINERS) and call_of(element) is call):
        where = _emit.code(parent.func) if isinstance(parent, cst.Call) else None
        if isinstance(parent, cst.Arg):
            outer = ctx.parent(parent)
            where = _emit.code(outer.func) if isinstance(outer, cst.Call) else None
        raise Unsupported(
            (f"the Estimator is passed straight to `{where}(...)`" if where else "the Estimator is built inside an "
             "expression") + ": e2k follows an Estimator bound to a name (`estimator = ...`) or returned, one held "
             "in a dict or list bound to a name (`estimators = {...}`), or one whose method is called on it", call)
    binding = _container_binding(ctx, literal)
    if binding is None:
        loop = ctx.parent(literal)
        if isinstance(loop, (cst.For, cst.CompFor)) and loop.iter is literal:
            raise Unsupported(f"the Estimators are built in the {_kind(literal)} the loop goes over: bind them to one "
                              "name first (`estimators = {\"linear\": ..., \"dnn\": ...}`, then `for name, est in "
                              "estimators.items():`), which e2k follows", call)
        raise Unsupported(f"the {_kind(literal)} holding this Estimator is not bound to one name (`estimators = "
                          f"...`), which e2k needs to follow the Estimators it holds", call)
    constructors = {p for rule in ctx.rules.unit_rules(include_disabled=True) for p in rule.constructors}
    if any(not (isinstance(e, (cst.Element, cst.DictElement)) and isinstance(call_of(e), cst.Call)
                and ctx.call_api_path(call_of(e)) in constructors) for e in literal.elements):
        raise Unsupported(f"`{binding.name}` holds other values than Estimators built in it, which e2k cannot "
                          "convert together", binding.target)
    key = _element_key(literal, element)
    if key is None:
        raise Unsupported(f"the keys of `{binding.name}` are not strings or numbers written out", element)
    uses: list[Use] = []
    shared: dict = {}
    reads = reads_reached(ctx, binding.target)
    if reads is None or any(others for _, others in reads):
        raise Unsupported(f"`{binding.name}` may hold other values where it is read", binding.target)
    for read, _ in reads:
        for held, receiver in _container_read(ctx, binding, literal, read):
            if held is not None and held != key:
                continue  # another Estimator of the container
            use = _classify(ctx, receiver)
            use.receiver = True
            uses.append(use)
            if held is None:
                shared[receiver] = frozenset()  # every Estimator of the container may be here
    unit = EstimatorUnit(owner, path, statement, call, binding.target, bind_arguments(call, owner.signature), uses)
    unit.shared, unit.container, unit.detached = shared, binding, True
    unit.label = f"{binding.name}[{key!r}]"
    # Distinct for each Estimator of the container (they convert together, each its own name).
    position = next(i for i, e in enumerate(literal.elements) if e is element)
    unit.preferred = f"{key}_model" if isinstance(key, str) and key.isidentifier() else f"model_{position}"
    return _configure_unit(ctx, unit)


def _leftmost_name(node: cst.BaseExpression) -> cst.Name:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node


def _kind(literal: cst.CSTNode) -> str:
    return {cst.Dict: "dict", cst.List: "list", cst.Tuple: "tuple"}[type(literal)]


def _container_binding(ctx: RewriteContext, literal: cst.CSTNode) -> Binding | None:
    """``estimators = {...}``: the binding whose whole value is ``literal``."""
    statement = ctx.enclosing_statement(literal)
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
    if not (isinstance(small, cst.Assign) and small.value is literal and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)):
        return None
    return Binding(small.targets[0].target.value, statement, small.targets[0].target, literal)


def _element_key(literal: cst.CSTNode, element: cst.CSTNode):
    """The key a subscript reads ``element`` by: the dict key's value, or the position (a
    (name, Estimator) pair's name)."""
    if isinstance(literal, cst.Dict):
        return _literal_key(element.key)
    if _is_pair(element.value):
        return _literal_key(element.value.elements[0].value)
    return next(i for i, e in enumerate(literal.elements) if e is element)


def _is_pair(node) -> bool:
    """``("linear", LinearClassifier(...))``: a tuple of a name written out and a call."""
    return isinstance(node, cst.Tuple) and len(node.elements) == 2 \
        and all(isinstance(e, cst.Element) for e in node.elements) \
        and isinstance(node.elements[0].value, cst.SimpleString) and isinstance(node.elements[1].value, cst.Call)


def _literal_key(node: cst.BaseExpression | None):
    if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
        return node.evaluated_value
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    return None


def _container_read(ctx: RewriteContext, binding: Binding, literal: cst.CSTNode, read: cst.Name):
    """What a read of the container gives of its Estimators: (key, receiver) pairs, the key
    None when it may be any of them. ``estimators["dnn"]``: that one, read by the subscript;
    ``for name, est in estimators.items()`` (``.values()``, a list iterated, ``enumerate``),
    or a comprehension: each read of the loop's variable; ``estimators[name]``: any.
    ``len(estimators)``, its keys: none. Anything else is refused."""
    parent = ctx.parent(read)
    name = binding.name
    pairs = isinstance(literal, (cst.List, cst.Tuple)) and bool(literal.elements) \
        and all(isinstance(e, cst.Element) and _is_pair(e.value) for e in literal.elements)
    if pairs:
        loop = parent
        if not (isinstance(loop, (cst.For, cst.CompFor)) and loop.iter is read):
            raise Unsupported(f"`{name}`, a list of (name, Estimator) pairs, is used here other than by a for loop "
                              "over them, which e2k follows", read)
        return _loop_reads(ctx, name, loop, 1)
    if isinstance(parent, cst.Subscript) and parent.value is read:
        if isinstance(ctx.parent(parent), (cst.AssignTarget, cst.Del, cst.AugAssign)) or len(parent.slice) != 1 \
                or not isinstance(parent.slice[0].slice, cst.Index):
            raise Unsupported(f"`{name}` is changed or sliced here, which e2k does not follow", parent)
        index = parent.slice[0].slice.value
        key = _literal_key(index)
        if key is None and isinstance(index, (cst.SimpleString, cst.Integer, cst.ConcatenatedString)):
            raise Unsupported(f"`{name}[...]` with a key e2k cannot read", parent)
        if key is not None and key not in [_element_key(literal, e) for e in literal.elements]:
            raise Unsupported(f"`{name}` has no Estimator under {key!r}", parent)
        return [(key, parent)]
    iterated, position = read, None
    if isinstance(parent, cst.Attribute) and parent.value is read:
        method = ctx.parent(parent)
        if not (isinstance(method, cst.Call) and method.func is parent and not method.args):
            raise Unsupported(f"`{name}.{parent.attr.value}` is not something e2k follows the Estimators through", parent)
        if parent.attr.value in _HARMLESS_METHODS:
            return []
        if parent.attr.value not in ("items", "values") or not isinstance(literal, cst.Dict):
            raise Unsupported(f"`{name}.{parent.attr.value}()` is not something e2k follows the Estimators through",
                              parent)
        iterated, position = method, 1 if parent.attr.value == "items" else None
    elif isinstance(parent, cst.Arg) and isinstance(ctx.parent(parent), cst.Call):
        outer = ctx.parent(parent)
        builtin = _emit.code(outer.func)
        if builtin == "len" and len(outer.args) == 1:
            return []
        if builtin != "enumerate" or outer.args[0] is not parent or isinstance(literal, cst.Dict):
            raise Unsupported(f"`{name}` is passed to `{builtin}(...)`, which e2k does not follow its Estimators "
                              "into", read)
        iterated, position = outer, 1
    elif isinstance(literal, cst.Dict):
        loop = ctx.parent(read)
        if isinstance(loop, (cst.For, cst.CompFor)) and loop.iter is read:
            return []  # its keys; `estimators[name]` in the loop reads the Estimators
    loop = ctx.parent(iterated)
    if not (isinstance(loop, (cst.For, cst.CompFor)) and loop.iter is iterated):
        raise Unsupported(f"`{name}` is used here other than by a for loop over its Estimators or a subscript "
                          f"(`{name}[...]`), which e2k needs to follow the Estimators it holds", read)
    return _loop_reads(ctx, name, loop, position)


def _loop_reads(ctx: RewriteContext, name: str, loop, position: int | None):
    """The reads of the Estimator a loop over a container binds (at ``position`` of a pair)."""
    target = loop.target
    if position is not None:
        elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else None
        if elements is None or len(elements) != 2 or any(isinstance(e, cst.StarredElement) for e in elements):
            raise Unsupported(f"the loop over `{name}` does not unpack (key, Estimator) pairs", target)
        target = elements[position].value
    if not isinstance(target, cst.Name):
        raise Unsupported(f"the loop over `{name}` does not bind each Estimator to a name", target)
    reached = reads_reached(ctx, target)
    if reached is None:
        raise Unsupported(f"the uses of `{target.value}` cannot be followed", target)
    for other_read, others in reached:
        if others:
            raise Unsupported(f"`{target.value}` here may also hold another value than an Estimator of `{name}`",
                              other_read)
    return [(None, r) for r, _ in reached]


def _replaced_run_config(ctx: RewriteContext, node: cst.BaseExpression, _depth: int = 0):
    """``run_config = tf.estimator.RunConfig(...)`` then ``run_config = run_config.replace(
    model_dir=...)`` (RunConfig.replace returns a copy with those settings): (the RunConfig
    call, the binding the Estimator reads, the ``replace`` calls in order, the earlier
    bindings, each read only by the next ``replace``); Nones when ``node`` is not that."""
    nothing = None, None, [], []
    binding = resolve(ctx, node) if isinstance(node, cst.Name) else None
    value = binding.value if isinstance(binding, Binding) else node
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "replace") or _depth > 4:
        return nothing
    receiver = value.func.value
    base, base_binding = resolve_call(ctx, receiver, RUN_CONFIG)
    if base is not None:
        replacements, earlier = [value], [base_binding] if base_binding is not None else []
    else:
        base, base_binding, inner, earlier = _replaced_run_config(ctx, receiver, _depth + 1)
        if base is None:
            return nothing
        replacements = [*inner, value]
        earlier = [*earlier, base_binding] if base_binding is not None else earlier
    previous = earlier[-1] if earlier else None
    if previous is not None and (accesses_of(ctx, previous.target) or [None]) != [receiver]:
        raise Unsupported(f"the RunConfig `{previous.name}` is used for more than its replace(...)", previous.target)
    return base, binding if isinstance(binding, Binding) else None, replacements, earlier


#: Values a RunConfig setting read back can be replaced with (read once, the same each time).
_STABLE = (cst.Name, cst.Attribute, cst.SimpleString, cst.Integer, cst.Float)


def _config_setting_read(ctx: RewriteContext, read: cst.CSTNode | None, settings: dict[str, cst.Arg],
                         factory: bool = False):
    """``run_config.model_dir`` where the RunConfig was given ``model_dir=args.job_dir``: the
    setting's value, read in place of the attribute (the RunConfig goes). ``factory``: the
    settings were written in a function of the program, their names made the call's values
    where they are read (``_config_factory``)."""
    parent = ctx.parent(read) if read is not None else None
    if not (isinstance(parent, cst.Attribute) and parent.value is read):
        return None
    arg = settings.get(parent.attr.value)
    if arg is None or not isinstance(arg.value, _STABLE) or ctx.path_of(arg.value) != ctx.path_of(read) and not factory:
        return None
    if isinstance(ctx.parent(parent), cst.AssignTarget) or not isinstance(read, cst.Name):
        return None
    return parent, arg.value


def _config_setting_bound(ctx: RewriteContext, unit: EstimatorUnit, read: cst.CSTNode | None, binding: Binding):
    """``config.model_dir`` where the RunConfig was given ``model_dir=args.model_dir or
    tempfile.mkdtemp()``, computed once: the value is bound to a name where the RunConfig was
    (``model_dir = ...``), and that name is read here and wherever the setting is given."""
    parent = ctx.parent(read) if read is not None else None
    if not (isinstance(parent, cst.Attribute) and parent.value is read and isinstance(read, cst.Name)) \
            or isinstance(ctx.parent(parent), cst.AssignTarget):
        return None
    arg = unit.config_args.get(parent.attr.value)
    if arg is None or ctx.path_of(arg.value) != ctx.path_of(read) \
            or ctx.scope(binding.target) is not ctx.scope(read):
        return None
    for value, name in unit.config_bound:
        if value is arg.value:
            return parent, cst.Name(name)
    scope = ctx.scope(binding.target)
    taken = {a.name for a in scope.assignments} if scope is not None else set()
    taken |= {name for _, name in unit.config_bound}
    name = _emit.unique_name(parent.attr.value, taken)
    unit.config_bound.append((arg.value, name))
    return parent, cst.Name(name)


def _through_parameter(ctx: RewriteContext, unit: EstimatorUnit, value: cst.BaseExpression) -> cst.BaseExpression:
    """``config=config`` in ``def build_estimator(config, ...)``: the factory's parameter
    stands for the argument its one call gives (``build_estimator(config=run_config)``,
    in this module or another). The conversion drops the parameter and the argument."""
    factory = unit.factory
    if not isinstance(value, cst.Name):
        return value
    assignment = _single_assignment(ctx, value)
    param = getattr(assignment, "node", None)
    if not isinstance(param, cst.Param) or param not in factory.params.params:
        return value
    reads = accesses_of(ctx, param.name)
    # Each Estimator the factory may build (one per branch, converted together) reads it as its config.
    if not reads or any(r is not value and not _config_of_estimator(ctx, r, factory) for r in reads):
        raise Unsupported(f"the factory's `{param.name.value}` is used for more than the Estimator's config", param)
    if len(unit.sites) != 1:
        raise Unsupported(f"`{factory.name.value}` is called in more than one place, each with its own "
                          f"`{param.name.value}`", param, UNSUPPORTED_USE)
    _, call, _ = unit.sites[0]
    names = tuple(p.name.value for p in factory.params.params)
    arg = bind_arguments(call, names).get(param.name.value)
    if arg is None:
        raise Unsupported(f"`{factory.name.value}` is called without its `{param.name.value}`", call, UNSUPPORTED_USE)
    unit.config_parameter = (param, arg)
    return arg.value


def _config_of_estimator(ctx: RewriteContext, read: cst.Name, factory: cst.FunctionDef) -> bool:
    """Is ``read`` the ``config=`` of an Estimator built in ``factory``?"""
    arg = ctx.parent(read)
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
    return (isinstance(arg, cst.Arg) and arg.keyword is not None and arg.keyword.value == "config"
            and isinstance(call, cst.Call) and _in_estimator_call(ctx, read) and ctx.within(call, (factory,)))


def _config_into_factory(ctx: RewriteContext, read: cst.CSTNode) -> bool:
    """Is ``read`` an argument of a call of a factory of the program whose parameter is only
    the ``config=`` of the Estimators it builds (``if use_keras: est = make_keras_estimator(
    output_dir, config) else: est = Estimator(..., config=config)``: that Estimator's own unit)?"""
    arg = ctx.parent(read)
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(call, cst.Call) or arg.star:
        return False
    factory = resolve(ctx, call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
    if not isinstance(factory, cst.FunctionDef):
        return False
    names = tuple(p.name.value for p in factory.params.params)
    try:
        bound = bind_arguments(call, names)
    except Unsupported:
        return False
    param = next((p for p in factory.params.params if bound.get(p.name.value) is arg), None)
    reads = accesses_of(ctx, param.name) if param is not None else None
    return bool(reads) and all(_config_of_estimator(ctx, r, factory) for r in reads)


def _without(items, dropped):
    """A parameter or argument list without ``dropped``, its commas as they were."""
    kept = [item for item in items if item is not dropped]
    if kept and items and items[-1] is dropped:
        kept[-1] = kept[-1].with_changes(comma=dropped.comma)
    return kept


def _enclosing_function(ctx: RewriteContext, statement: cst.CSTNode) -> cst.FunctionDef:
    current = ctx.parent(statement)
    while current is not None and not isinstance(current, cst.FunctionDef):
        current = ctx.parent(current)
    if current is None:
        raise Unsupported("the Estimator is returned outside a function", statement)
    return current


def _factory_sites(ctx: RewriteContext, factory: cst.FunctionDef, call: cst.Call):
    """Where a function returning an Estimator is called: each call must be bound to a name
    (``m = build_estimator(...)``), the name's uses being the Estimator's."""
    if factory.decorators:
        raise Unsupported("the function that returns the Estimator is decorated", factory)
    reads = accesses_of(ctx, factory.name)
    if not reads:
        raise Unsupported(f"`{factory.name.value}` returns the Estimator, but e2k finds no call of it to follow", call)
    sites = []
    for read in reads:
        site_call = ctx.parent(read)
        statement = ctx.enclosing_statement(read)
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        if not (isinstance(site_call, cst.Call) and site_call.func is read and isinstance(small, cst.Assign)
                and small.value is site_call and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            raise Unsupported(f"`{factory.name.value}` returns the Estimator; this use of it is not a call bound to "
                              "a name, which e2k needs to follow its result", read)
        sites.append((statement, site_call, small.targets[0].target))
    return sites


def _in_estimator_call(ctx: RewriteContext, node: cst.CSTNode) -> bool:
    """Is ``node`` an argument of an Estimator construction (another unit: the two then
    convert together, see ``_groups``)?"""
    owners = {path for rule in ctx.rules.unit_rules(include_disabled=True) for path in rule.constructors}
    current = ctx.parent(node)
    while current is not None and not isinstance(current, cst.BaseStatement):
        if isinstance(current, cst.Call) and ctx.call_api_path(current) in owners:
            return True
        current = ctx.parent(current)
    return False


# ---------------------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------------------
class ConversionPlan:
    """Everything the unit rules decided, staged until all of them succeeded.

    Rules record replacements of original nodes (``replace``) and of whole statements
    (``replace_statement``). Original code can move into new code (a lambda input_fn's body
    becomes the argument of ``fit``), so replacements are applied at commit both to the tree
    and to every piece of new code that embeds a moved node.
    """

    def __init__(self, unit: EstimatorUnit, ctx: RewriteContext):
        self.unit = unit
        self.ctx = ctx
        self.tf, self._needs_tf_import = tf_alias(ctx)
        self.model_var: str = self._model_var_name()
        self.build: list[cst.BaseStatement] = []
        self.before_build: list[cst.BaseStatement] = []
        #: Definitions the build reads (a canned model's classes) that stay where the model is
        #: built, in a factory too (``before_build`` goes to the factory's caller there).
        self.local_definitions: list[cst.BaseStatement] = []
        self.scope_strategy: cst.BaseExpression | None = None
        #: A name the input_fns can read to scale per-replica batches; None when not visible.
        self.strategy_name: str | None = None
        #: The name the Keras program binds, before the model is built, to a strategy the
        #: program made inline (``RunConfig(train_distribute=tf.distribute.MirroredStrategy())``).
        self.strategy_made_inline: str | None = None
        self.has_strategy = False
        #: The Keras model exists already (``model_to_estimator(keras_model=model)``): no
        #: rule builds one, and the unit's statement only goes.
        self.prebuilt = False
        #: The Estimator constructions converted together with this one (itself included):
        #: what they read of a shared definition (model_fn, feature columns, RunConfig) goes
        #: with all of them.
        self.group_calls: tuple[cst.Call, ...] = (unit.call,)
        #: Called once the unit is committed (a request to another file of the program).
        self.on_commit: list[Callable[[], None]] = []
        #: Scale batches by ``model.distribute_strategy``'s replicas (Estimators of one group
        #: with and without a strategy share the code that calls their input_fns).
        self.replicas_of_model = False
        #: The strategy runs one program per worker (MultiWorkerMirroredStrategy).
        self.multi_worker = False
        #: A function the unit's datasets go through before fit/evaluate/predict read them.
        self.dataset_wrapper: str | None = None
        self.claimed_uses: set[cst.Name] = set()
        self.claimed_args: set[str] = set()
        self.claimed_config: set[str] = set()
        #: input_fns the Keras program now calls, registered by the rules that call them.
        self.input_fns: list[InputFn] = []
        #: Mapped over every dataset the Keras program feeds the model (``model.preprocess``).
        self.dataset_map: str | None = None
        self._subst: dict[cst.CSTNode, cst.CSTNode] = {}
        #: Nodes of code that moves into new code, each with what makes its wrapper (``wrap``).
        self._wraps: dict[cst.CSTNode, Callable[[cst.CSTNode], cst.CSTNode]] = {}
        self._statements: dict[cst.BaseStatement, list[cst.BaseStatement]] = {}
        self._comments: list[tuple[cst.BaseStatement, str]] = []
        self._after_imports: list[cst.BaseStatement] = []
        self._fixed: list[tuple[cst.CSTNode, str, str]] = []
        self._leftovers: list[tuple[cst.CSTNode, str, str]] = []
        self._reported: list[tuple[cst.CSTNode, str, str]] = []
        #: Imports the converted code needs (added only if the unit converts).
        self.imports: list[tuple[str, str | None, str | None]] = []
        #: Statements right after the model is built, outside the strategy scope (restoring
        #: the model_dir's latest checkpoint, the callbacks list).
        self.after_build: list[cst.BaseStatement] = []
        #: Keras callbacks every training ``fit`` of the unit gets (what RunConfig did).
        self.fit_callbacks: list[cst.BaseExpression] = []
        #: The name of the list holding ``fit_callbacks`` (set when the list is emitted).
        self.callbacks_var: str | None = None
        #: Keyword arguments every training ``fit`` gets (``verbose=0``).
        self.fit_keywords: list[cst.Arg] = []
        #: The model_dir as the converted code reads it, when the unit has one.
        self.model_dir: cst.BaseExpression | None = None
        #: The name of the ModelDirCheckpoints callback when the model_dir is converted.
        self.checkpoints: str | None = None
        #: True when the model may start with a global step above 0 (restored from model_dir).
        self.may_restore = False
        #: Hooks the model_fn's EstimatorSpecs return, by phase ("train", "eval", "predict"):
        #: (the hooks expression, a resolver of names in the model_fn).
        self.spec_hooks: dict[str, list[tuple[cst.BaseExpression, Callable]]] = {"train": [], "eval": [], "predict": []}
        #: What the model_fn's PREDICT spec returns: "dict", "output" (the model output), "tensor" or None.
        self.predictions_kind: str | None = None
        #: TRAIN's ``EstimatorSpec(loss=...)`` as written in the model_fn (hooks may log it).
        self.spec_loss: cst.BaseExpression | None = None
        #: PREDICT's ``EstimatorSpec(predictions=...)`` as written in the model_fn.
        self.spec_predictions: cst.BaseExpression | None = None
        #: PREDICT's ``EstimatorSpec(export_outputs=...)`` and a resolver of names in the model_fn.
        self.spec_export_outputs: tuple[cst.BaseExpression, Callable] | None = None
        #: Uses of the Estimator other than its methods that a rule converted (a hook's argument).
        self._names: set[str] = set()
        self._helpers: list[tuple[str, list[cst.BaseStatement]]] = []
        #: Code that belongs to this unit (its calls, specs, model_fn): a binding read only
        #: there can move into the converted code.
        self.owned: list[cst.CSTNode] = [u.call for u in unit.uses if u.call is not None]
        self.removed_bindings: set[cst.BaseStatement] = set()
        #: SessionRunHook subclasses the unit's hooks instantiate: class -> (rule, phases).
        self.hook_classes: dict[cst.ClassDef, tuple[type, set[str]]] = {}
        #: Estimator reads inside hooks that a hook rule converted (early stopping's argument).
        self.claimed_hook_args: set[cst.CSTNode] = set()
        self._steps_left: str | None = None
        #: The params an input_fn gets, by mode ("train", "eval", "infer"), when they are not
        #: the Estimator's own (a TPUEstimator adds the mode's batch size).
        self.input_params: dict[str, cst.BaseExpression] = {}
        #: Iterator calls in input_fns that a rule took apart (the dataset is returned instead).
        self.iterator_calls: set[cst.Call] = set()
        #: Serving functions already defined for serving_input_receiver_fns (node -> name).
        self.serving_functions: dict[cst.CSTNode, str] = {}
        #: The signatures a canned Estimator exports (set by _canned); None: the model_fn's.
        self.export_signatures: list[str] | None = None
        #: A canned Estimator's head ("binary", "multi", "regression"): its classify / regress
        #: signatures on a single string input (_export.export_signatures).
        self.canned_head: str | None = None
        #: (name, element) of export outputs the Estimator left out of its export (regression /
        #: classification ones on a receiver of other inputs), read by ``_export.signature_names``.
        self.omitted_outputs: list[tuple[str, cst.DictElement]] = []
        #: The model's method giving the export's PredictOutput when it is not the PREDICT
        #: predictions (``PredictOutput({"classes": classes, "probabilities": ...})``); None: predict_step.
        self.export_method: str | None = None
        # RunConfig settings read back (``run_config.model_dir``) read their value, or the name it
        # is bound to: known to every rule from the start (an export path written from them).
        for attribute, value in unit.config_reads:
            self.replace(attribute, value.deep_clone())
        for value, name in unit.config_bound:
            self.replace(value, cst.Name(name))  # wherever a rule writes the setting

    # -- what rules call ------------------------------------------------------------------
    def replace(self, node: cst.CSTNode, new: cst.CSTNode) -> None:
        """Replace an original node, wherever it ends up. ``new`` must not contain ``node``
        itself (use ``node.deep_clone()``)."""
        known = self._subst.get(node)
        if node in self._wraps or known is not None and not known.deep_equals(new):
            raise Unsupported("two rules rewrite the same code differently", node, UNSUPPORTED_USE)
        self._subst[node] = new

    def wrap(self, node: cst.CSTNode, make: Callable[[cst.CSTNode], cst.CSTNode]) -> None:
        """Wrap a node of code that moves into new code (the dataset a lambda input_fn gives,
        a call the Keras program makes) in ``make(node)``, where it ends up; the other rules'
        edits inside it are kept."""
        if node in self._subst or node in self._wraps:
            raise Unsupported("two rules rewrite the same code differently", node, UNSUPPORTED_USE)
        self._wraps[node] = make

    def replace_statement(self, statement: cst.BaseStatement, new: list[cst.BaseStatement]) -> None:
        if statement in self._statements:
            raise Unsupported("two rules rewrite the same statement", statement, UNSUPPORTED_USE)
        self._statements[statement] = list(new)

    def remove_statement(self, statement: cst.BaseStatement) -> None:
        self.replace_statement(statement, [])

    def comment(self, statement: cst.BaseStatement, text: str) -> None:
        """A plain explanatory comment above ``statement`` (not a leftover)."""
        self._comments.append((statement, f"# {text}"))

    def insert_after_imports(self, statements: list[cst.BaseStatement]) -> None:
        self._after_imports.extend(statements)

    def fixed(self, node: cst.CSTNode, code: str, message: str) -> None:
        self._fixed.append((node, code, message))

    def leftover(self, node: cst.CSTNode, code: str, message: str) -> None:
        """Converted around, but this part needs a human: marked in the file and reported."""
        if self.ctx.is_suppressed(node, code):
            return  # `# e2k: ignore`: the human has looked
        self._leftovers.append((node, code, message))

    def leftover_marked_in_new_code(self, node: cst.CSTNode, code: str, message: str) -> None:
        """Like ``leftover``, for a rule that put the ``# e2k:`` mark into its new code itself."""
        self._reported.append((node, code, message))

    def names_taken(self) -> set[str]:
        """Names bound or read where the unit's code goes: the scope of the Estimator's
        variable, and the factory's that builds it (if any)."""
        taken: set[str] = set()
        for node in (self.unit.target, self.unit.statement):
            scope = self.ctx.scope(node)
            if scope is not None:
                taken |= {a.name for a in scope.assignments} | {a.node.value for a in scope.accesses}
        return taken

    def unique_name(self, preferred: str) -> str:
        """A name free in the unit's scope and not yet given out by this plan."""
        taken = self.names_taken() | self._names | _module_names(self.ctx)
        name = _emit.unique_name(preferred, taken)
        self._names.add(name)
        return name

    def add_helper(self, name: str, make: Callable[[str], list[cst.BaseStatement]]) -> str:
        """A module-level definition (a callback class) placed after the imports once per
        file; returns the name it is defined under."""
        for key, (given, _) in self._helpers:
            if key == name:
                return given
        emitted = _emitted_helpers(self.ctx)
        if name in emitted:
            # Added by an earlier unit, to its module: this unit's module may need it too
            # (commit adds it there, once per module).
            given = emitted[name]
            self._helpers.append((name, (given, make(given))))
            return given
        given = _emit.unique_name(name, _module_names(self.ctx) | self._names)
        self._names.add(given)
        self._helpers.append((name, (given, make(given))))
        return given

    def add_fit_callback(self, callback: cst.BaseExpression) -> None:
        self.fit_callbacks.append(callback)

    def dataset(self, expression: cst.BaseExpression) -> cst.BaseExpression:
        """What ``fit``/``evaluate``/``predict`` read of a dataset the unit's input_fn gives."""
        if self.dataset_wrapper is None:
            return expression
        return cst.Call(cst.Name(self.dataset_wrapper), args=[cst.Arg(expression)])

    def params_for(self, mode: str) -> cst.BaseExpression | None:
        """The ``params`` the Estimator passed to an input_fn called in ``mode``."""
        if mode in self.input_params:
            return self.input_params[mode]
        return self.unit.arg_value("params")

    def callbacks_inline(self) -> bool:
        """The ``fit_callbacks`` are names (``checkpoints``): each ``fit`` lists them itself,
        with no variable holding the list (a callback made by a call is made once, in it)."""
        return bool(self.fit_callbacks) and all(isinstance(c, cst.Name) for c in self.fit_callbacks)

    def callbacks_name(self) -> str | None:
        """The variable holding the unit's ``fit_callbacks`` (None when there are none, or
        when each ``fit`` lists them)."""
        if not self.fit_callbacks or self.callbacks_inline():
            return None
        if self.callbacks_var is None:
            self.callbacks_var = self.unique_name("callbacks")
        return self.callbacks_var

    def steps_left_name(self) -> str:
        if self._steps_left is None:
            self._steps_left = self.unique_name("steps_left")
        return self._steps_left

    def owns(self, node: cst.CSTNode) -> bool:
        current = node
        while current is not None:
            if any(current is owned for owned in self.owned):
                return True
            current = self.ctx.parent(current)
        return False

    def unit_is_outside(self, function: cst.FunctionDef) -> bool:
        """Is the Estimator built outside ``function`` (so that calling it twice trains one model twice)?"""
        current = self.ctx.parent(self.unit.statement)
        while current is not None:
            if current is function:
                return False
            current = self.ctx.parent(current)
        return True

    def stable_expression(self, value: cst.BaseExpression, preferred: str) -> cst.BaseExpression:
        """``value`` when it can be written twice (a name, a literal), else a new variable
        bound to it after the model is built."""
        if isinstance(self._subst.get(value), cst.Name):  # bound to a name already (config_bound)
            return self._subst[value].deep_clone()
        if isinstance(value, (cst.Name, cst.SimpleString, cst.Integer, cst.Float)) or (
            isinstance(value, cst.Attribute) and _emit.code(value).replace(".", "").replace("_", "").isalnum()
        ):
            return value
        name = self.unique_name(preferred)
        statement = _emit.statement("{n} = {v}", n=name, v=value)
        shared = self.unit.config_binding
        if shared is not None and len(self.group_calls) > 1 and self._inside(value, {shared.statement}):
            # A RunConfig several Estimators read was made once: its value (a fresh temporary
            # model_dir) is computed once, where it was, for all of them.
            self._statements.setdefault(shared.statement, []).append(statement)
        else:
            self.after_build.append(statement)
        return cst.Name(name)

    def register_input_fn(self, input_fn: InputFn) -> None:
        input_fn.dataset_map = self.dataset_map
        binding = input_fn.lambda_binding
        if binding is not None and not self.ctx.edits.is_replaced(binding.statement):
            # The lambda's body is what the Keras calls read: its name goes when only the spec read it.
            reads = accesses_of(self.ctx, binding.target)
            if reads is not None and all(r is input_fn.expr or self.in_group_call(r) for r in reads):
                self._statements.setdefault(binding.statement, [])
        for alternative in input_fn.alternatives:
            self.register_input_fn(alternative)
        if input_fn.partial is not None and input_fn.factory_call is None:
            # The partial becomes the call it stood for: its import goes when nothing else reads it.
            func = input_fn.partial.func
            if isinstance(func, cst.Name):
                self.ctx.remove_import_if_unused("functools", func.value)
            else:
                self.ctx.remove_import_if_unused("functools")
        self.input_fns.append(input_fn)

    def input_definitions(self) -> list[cst.FunctionDef]:
        """Each function that builds a dataset for this unit, once."""
        seen: list[cst.FunctionDef] = []
        for input_fn in self.input_fns:
            for definition in input_fn.definitions():
                if all(definition is not other for other in seen):
                    seen.append(definition)
        return seen

    def input_code(self) -> list[cst.CSTNode]:
        """Every piece of code that builds a dataset for this unit, once: the input
        functions' bodies, and the bodies of lambdas that build it themselves (a lambda
        that calls a helper function is covered by the helper's body)."""
        nodes: list[cst.CSTNode] = [d.body for d in self.input_definitions()]
        for input_fn in self.input_fns:
            if input_fn.lambda_ is not None and not input_fn.helpers and all(input_fn.lambda_.body is not n for n in nodes):
                nodes.append(input_fn.lambda_.body)
        return nodes

    def claim_use(self, use: Use) -> None:
        self.claimed_uses.add(use.name)

    def uses(self, kind: str, *methods: str) -> list[Use]:
        """The unit's uses of that kind (and method), in the order they appear in the file."""
        found = [u for u in self.unit.uses if u.kind == kind and (not methods or u.method in methods)]
        return sorted(found, key=lambda u: self.ctx.position(u.name))

    def in_group_call(self, node: cst.CSTNode) -> bool:
        """Is ``node`` inside one of the group's Estimator constructions?"""
        return self.ctx.within(node, self.group_calls)

    def _reader_of(self, name: str, statements: dict, ctx: RewriteContext) -> cst.CSTNode | None:
        """An original node whose new code reads ``name``, in a pass over a program's modules
        (outside one, every helper goes to this file: None)."""
        if ctx._modules is None:
            return None
        for original, new in statements.items():
            if any(name in _names_read(s) for s in new):
                return original
        for original, new in self._subst.items():
            if name in _names_read(new):
                return original
        return None

    def take_binding(self, binding: Binding) -> None:
        """``name = value`` read only by the unit's code: the statement goes (once), its value
        moving into the code the unit writes (what it reads is the unit's own)."""
        if binding.statement not in self.removed_bindings:
            self.removed_bindings.add(binding.statement)
            self.remove_statement(binding.statement)
            self.owned.append(binding.value)

    def remove_binding_if_only_here(self, binding: Binding | None, used_at: cst.CSTNode,
                                    replacement: list[cst.BaseStatement] = ()) -> None:
        """Drop ``name = value`` (for ``replacement``, if given) when ``used_at`` is the name's
        only read (reads by the other Estimators converted with this one aside); else refuse."""
        if binding is None:
            return
        reads = accesses_of(self.ctx, binding.target)
        if reads is None or any(read is not used_at and not self.in_group_call(read) for read in reads):
            raise Unsupported(f"`{binding.name}` is used elsewhere too", binding.target, UNSUPPORTED_USE)
        self.replace_statement(binding.statement, list(replacement))

    # -- the engine's side ----------------------------------------------------------------
    def changes(self) -> list[tuple[cst.CSTNode, str | None]]:
        """What committing would change: (node, code) for each conversion reported, and
        (node, None) for each original node or statement replaced or removed."""
        replaced: list[cst.CSTNode] = [self.unit.statement, *self._subst, *self._statements]
        if self.unit.config_binding is not None:
            replaced.append(self.unit.config_binding.statement)
        replaced += [b.statement for b in self.unit.config_earlier]
        return [(node, code) for node, code, _ in self._fixed] + [(node, None) for node in replaced]

    def _model_var_name(self) -> str:
        unit = self.unit
        if unit.detached:  # named after its key in the container (`dnn_model`), or `model`
            return _emit.unique_name(unit.preferred, self.names_taken())
        if unit.var == "model" and unit.factory is None:
            return "model"
        return _emit.unique_name("model", self.names_taken() - {unit.var})

    def finish(self) -> None:
        unit = self.unit
        from estimator2keras._training import convert_hook_classes

        convert_hook_classes(self, self.ctx)
        if self.fit_callbacks:
            self.callbacks_name()
        for use in unit.uses:
            if use.kind == "passed":
                # `train_and_evaluate(classifier)`: the function is handed the model.
                if use.name.value != self.model_var:
                    self.replace(use.name, cst.Name(self.model_var))
                self._check_passed(use)
                continue
            if use.name in self.claimed_hook_args:
                continue
            if use.name not in self.claimed_uses and _displays(self.ctx, use.name):
                # `estimator` alone in a notebook cell, `print(estimator)`: the model is shown
                if use.name.value != self.model_var:
                    self.replace(use.name, cst.Name(self.model_var))
                self.fixed(use.name, UNSUPPORTED_USE, f"`{use.name.value}` shown (a cell's value, print) -> the "
                                                      f"Keras model `{self.model_var}` shown")
                continue
            if use.name not in self.claimed_uses:
                what = f"`.{use.method}(...)`" if use.kind == "method" else _use_text(self.ctx, use.name)
                raise Unsupported(f"{what} of the Estimator `{unit.var}` is not converted", use.name, UNSUPPORTED_USE)
        for name, arg in unit.args.items():
            if name not in self.claimed_args:
                self.leftover(arg, "E2K400", f"Estimator({name}=...) is not converted; the Keras program runs without it")
        for name, arg in unit.config_args.items():
            if name not in self.claimed_config:
                self.leftover(arg, "E2K400", f"RunConfig({name}=...) is not converted; the Keras program runs without it")
        if not self.build and not self.prebuilt:
            raise Unsupported("no rule built a Keras model for this Estimator", unit.call, UNSUPPORTED_USE)
        if unit.factory is not None:
            self._prepare_factory_sites()
        if unit.container is not None:
            self._prepare_container()
        if unit.config_factory is not None:
            self._prepare_config_factory()

    def _check_passed(self, use: Use) -> None:
        """The function handed the model reads nothing the conversion binds beside it where
        the Estimator was (its checkpoints callback, its strategy), unless those are the
        module's names: a function's locals are not the other function's."""
        ctx = self.ctx
        if isinstance(ctx.scope(self.unit.statement), GlobalScope):
            return
        call = ctx.parent(ctx.parent(use.name))
        function = resolve(ctx, call.func)
        bound = {t.value for s in [*self.before_build, *self.after_build] for t in _emit.walk(s)
                 if isinstance(t, cst.AssignTarget) and isinstance(t.target, cst.Name) for t in [t.target]}
        if self.scope_strategy is not None:
            bound.add(_emit.code(self.scope_strategy))
        bound.discard(self.model_var)
        written = [new for node, new in [*self._subst.items(), *self._statements.items()]
                   if isinstance(function, cst.FunctionDef) and ctx.within(node, (function,))]
        for new in written:
            for item in new if isinstance(new, list) else [new]:
                read = next((n.value for n in _emit.walk(item) if isinstance(n, cst.Name) and n.value in bound), None)
                if read is not None:
                    raise Unsupported(f"`{function.name.value}` is handed the Estimator, and its converted code would "
                                      f"read `{read}`, which the Keras program makes where the Estimator was built "
                                      "(another function's local)", use.name, UNSUPPORTED_USE)

    def _prepare_config_factory(self) -> None:
        """The function that made the RunConfig: its settings are read where it is called (its
        parameters become the call's values). When it computes the strategy itself, it returns
        that instead, renamed for it (``create_run_config`` -> ``create_strategy``), and its call
        binds the strategy's name; otherwise it goes, with its call."""
        unit, ctx = self.unit, self.ctx
        made = unit.config_factory
        function, call = made.function, made.call
        config = made.returned.body[0].value

        def params_of(expr):
            return {node: made.values[node.value].deep_clone() for node in _emit.walk(expr)
                    if isinstance(node, cst.Name) and node.value in made.values and _is_read(ctx, node)}

        for arg in config.args:
            for node in _emit.walk(arg.value):
                if not isinstance(node, cst.Name) or not _is_read(ctx, node) or node.value == made.strategy:
                    continue
                if node.value in made.values:
                    self.replace(node, made.values[node.value].deep_clone())
                elif node.value in made.locals:
                    local = made.locals[node.value]
                    self.replace(node, _emit.replace_in(local.value, params_of(local.value)))
        for local in made.locals.values():
            reads = accesses_of(ctx, local.target)
            if reads and all(ctx.within(r, (config,)) for r in reads) and local.statement not in self._statements:
                self.remove_statement(local.statement)  # only the RunConfig read it (unless a rule did)
        site = unit.config_binding.statement if unit.config_binding is not None else None
        bound = [_emit.statement("{n} = {v}", n=name, v=value.deep_clone()) for value, name in unit.config_bound]
        if made.strategy is None:
            self.remove_statement(function)
            if site is not None:
                self.replace_statement(site, bound)
            return
        name = function.name.value
        renamed = name.replace("run_config", "strategy").replace("config", "strategy")
        if renamed != name and renamed not in self.names_taken():
            self.replace(function.name, cst.Name(renamed))
            func = call.func
            self.replace(func, cst.Name(renamed) if isinstance(func, cst.Name) else func.with_changes(attr=cst.Name(renamed)))
        else:
            renamed = name
        self.replace_statement(made.returned, [_emit.statement(f"return {made.strategy}").with_changes(
            leading_lines=made.returned.leading_lines)])
        func = _emit.code(call.func).rpartition(".")[0]
        called = call.with_changes(func=_emit.expr(f"{func}.{renamed}" if func else renamed))
        statement = _emit.statement("{n} = {v}", n=made.strategy, v=called)
        if site is not None:
            self.replace_statement(site, [statement.with_changes(leading_lines=site.leading_lines), *bound])
        else:
            self.before_build.insert(0, statement)
        self.fixed(call, "E2K001", f"RunConfig made by `{name}(...)` -> its settings where it is called, its "
                                    f"strategy returned by `{renamed}(...)`")

    def _prepare_container(self) -> None:
        """An Estimator of a dict or list literal: its model is built above the literal and
        held in its place; the code converted for each use keeps the use's receiver (``est``
        of the loop, ``estimators["dnn"]``), which holds the model now."""
        unit = self.unit
        if self.after_build or self.fit_callbacks:
            raise Unsupported(
                f"the Estimators of `{unit.container.name}` would each need their own callbacks or checkpoints "
                "(model_dir, RunConfig, hooks), which the calls made through the container cannot give each",
                unit.call, UNSUPPORTED_USE)
        self.replace(unit.call, cst.Name(self.model_var))
        for original in [*self._subst, *self._statements]:
            receivers = {_emit.code(r) for r in self._receivers_in(original)}
            if len(receivers) > 1:
                raise Unsupported(f"this code reads {' and '.join(sorted(receivers))}, one Estimator of "
                                  f"`{unit.container.name}` two ways, which e2k does not convert", original,
                                  UNSUPPORTED_USE)

    def _receivers_in(self, original: cst.CSTNode) -> list[cst.CSTNode]:
        """The receivers of the unit's uses that ``original`` holds and that stay as written."""
        return [use.name for use in self.unit.uses if use.receiver and self._inside(use.name, {original})]

    def _retargeted(self, original: cst.CSTNode, new: cst.CSTNode) -> cst.CSTNode:
        """``new`` (the code written for ``original``) reading the model through the receiver
        of the use it converts, where the model's variable stood."""
        receivers = self._receivers_in(original)
        if not receivers:
            return new
        receiver, found = receivers[0], {}
        stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(new, None)]
        while stack:
            node, parent = stack.pop()
            if isinstance(node, cst.Name) and node.value == self.model_var and not (
                    isinstance(parent, cst.Attribute) and parent.attr is node) and not (
                    isinstance(parent, cst.Arg) and parent.keyword is node):
                found[node] = receiver.deep_clone()
            stack.extend((child, node) for child in node.children)
        return _emit.replace_in(new, found)

    def _prepare_factory_sites(self) -> None:
        """What is made after the model is built moves to where the factory is called: the
        factory's parameters it reads become the arguments of that call (``model_dir`` ->
        ``FLAGS.model_dir``); a value the factory computes itself cannot move, and refuses."""
        unit, ctx = self.unit, self.ctx
        factory = unit.factory
        if unit.returned is not None:
            self.replace(unit.returned, cst.Name(self.model_var))
        names = [p.name.value for p in factory.params.params]
        if factory.params.star_arg != cst.MaybeSentinel.DEFAULT or factory.params.kwonly_params or factory.params.star_kwarg:
            raise Unsupported("the factory takes *args, **kwargs or keyword-only parameters", factory, UNSUPPORTED_USE)
        after = [*self.after_build, *self.fit_callbacks]
        read = [n for statement in after for n in _names_in(statement) if ctx.within(n, (factory,))]
        scope = ctx.scope(factory.body)
        self._site_values: dict[cst.BaseStatement, dict] = {}
        #: Arguments the moved code reads too, computed once before the call: node -> (name, value).
        self._site_bound: dict[cst.BaseStatement, dict] = {}
        for site, call, _ in unit.sites:
            bound = {k: a.value for k, a in bind_arguments(call, tuple(names)).items()}
            values, once = {}, {}
            site_scope = ctx.scope(site)
            taken = ({a.name for a in site_scope.assignments} | {a.node.value for a in site_scope.accesses}) if site_scope else set()
            for name in read:
                if name.value in names:
                    if name.value in bound:
                        value = bound[name.value]
                        if not isinstance(value, (cst.Name, cst.Attribute, cst.SimpleString, cst.Integer, cst.Float)):
                            # `build_estimator(args.model_dir or tempfile.mkdtemp(), ...)`: the
                            # value is computed once, for the call and the code that moves.
                            if value not in once:
                                variable = _emit.unique_name(name.value, taken | {n for n, _ in once.values()})
                                once[value] = (variable, value)
                            value = cst.Name(once[value][0])
                        values[name] = value
                    else:
                        default = next(p.default for p in factory.params.params if p.name.value == name.value)
                        if default is None:
                            raise Unsupported(f"`{name.value}` is not given here", call, UNSUPPORTED_USE)
                        values[name] = default
                elif scope is not None and scope.assignments[name.value]:
                    raise Unsupported(
                        f"`{name.value}`, computed in `{factory.name.value}`, is needed where it is called "
                        "(for the Estimator's checkpoints or callbacks)", name, UNSUPPORTED_USE)
            self._site_values[site] = values
            self._site_bound[site] = once

    def _inside(self, node: cst.CSTNode, statements) -> bool:
        current = node
        while current is not None:
            if current in statements:
                return True
            current = self.ctx.parent(current)
        return False

    def _substituted(self, node: cst.CSTNode) -> cst.CSTNode:
        # The pass's queued node edits too (a module rule sharing the unit pass, E2K009's
        # ModeKeys -> strings): code this unit moves into new statements carries them.
        queued = self.ctx.edits.substitutions() if self.ctx.edits is not None else {}
        if not queued and not self._wraps:
            return _emit.replace_in(node, self._subst)
        return _emit.replace_in(node, {**queued, **self._subst, **self._wraps})

    def _build_and_after(self) -> tuple[list[cst.BaseStatement], list[cst.BaseStatement]]:
        """The statements building the model (under the strategy's scope), and those after it
        (its callbacks)."""
        build = [self._substituted(s) for s in self.build]
        # A factory given its RunConfig by its caller: the strategy is the caller's, and the
        # factory's call is what runs under its scope (the model is built in that call).
        scope_at_site = self.unit.factory is not None and self.unit.config_parameter is not None
        if self.scope_strategy is not None and not scope_at_site and build:  # (a model built before: nothing here)
            block = _emit.statement("with {s}.scope():\n    pass", s=self.scope_strategy)
            build = [block.with_changes(body=cst.IndentedBlock(body=build))]
        after = list(self.after_build)
        if self.fit_callbacks and not self.callbacks_inline():
            listed = _emit.vertical_list(self.fit_callbacks) if len(self.fit_callbacks) > 1 else cst.List(
                [cst.Element(self.fit_callbacks[0])])
            listing = _emit.statement("{n} = {v}", n=self.callbacks_var, v=listed)
            from estimator2keras import _tensorboard

            if any(_tensorboard.is_callback(c) for c in self.fit_callbacks):
                listing = _emit.with_comment(listing, _tensorboard.NOTE)
            after.append(listing)
        return build, after

    def unit_statement(self) -> list[cst.BaseStatement]:
        """What the Estimator's own statement becomes (an Estimator bound to a name, not in a
        factory): the strategy, the model built under its scope, its callbacks."""
        build, after = self._build_and_after()
        return [*(self._substituted(s) for s in self.before_build), *build, *(self._substituted(s) for s in after)]

    def commit(self) -> None:
        ctx, unit = self.ctx, self.unit
        build, after = self._build_and_after()
        scope_at_site = unit.factory is not None and unit.config_parameter is not None
        statements = dict(self._statements)
        inserted: list[cst.BaseStatement] = []
        if unit.detached:
            # Built inside an expression (a dict of Estimators): the model is built above it.
            inserted = [*(self._substituted(s) for s in self.before_build), *build,
                        *(self._substituted(s) for s in after)]
        elif unit.factory is None:
            if unit.statement not in statements:  # (joined with another branch's RunConfig: written then)
                statements[unit.statement] = self.unit_statement()
        else:
            # The factory builds and returns the model; what the Estimator's callers get
            # besides (its checkpoints callback...) is made where it is called.
            ending = [_emit.statement(f"return {self.model_var}")] if unit.returned is None else []
            before = [] if scope_at_site else [self._substituted(s) for s in self.before_build]
            local = _emit.nested([self._substituted(s) for s in self.local_definitions], ctx.module.default_indent)
            statements[unit.statement] = [*local, *before, *build, *ending]
            if unit.config_parameter is not None:
                param, _ = unit.config_parameter
                params = unit.factory.params
                self.replace(params, params.with_changes(params=_without(params.params, param)))
            for site, call, target in unit.sites:
                bound, values = self._site_bound[site], self._site_values[site]
                renamed = _emit.replace_in(site.body[0], {a: cst.Name(n) for a, (n, _) in bound.items()})
                renamed = renamed.with_changes(targets=[renamed.targets[0].with_changes(target=cst.Name(self.model_var))])
                if unit.config_parameter is not None:
                    _, arg = unit.config_parameter
                    index = next(i for i, a in enumerate(call.args) if a is arg)
                    renamed = renamed.with_changes(value=renamed.value.with_changes(
                        args=_without(renamed.value.args, renamed.value.args[index])))
                # The factory's parameters first: the plan's substitutions rebuild the nodes.
                moved = [self._substituted(_emit.replace_in(s, values)) for s in after]
                first = [_emit.statement("{n} = {v}", n=name, v=value) for name, value in bound.values()]
                if first:
                    first[0] = first[0].with_changes(leading_lines=site.leading_lines)
                    renamed_line = site.with_changes(body=[renamed], leading_lines=[])
                else:
                    renamed_line = site.with_changes(body=[renamed])
                if scope_at_site and self.scope_strategy is not None:
                    block = _emit.statement("with {s}.scope():\n    pass", s=self.scope_strategy)
                    renamed_line = block.with_changes(
                        body=cst.IndentedBlock(body=[renamed_line.with_changes(leading_lines=[])]),
                        leading_lines=renamed_line.leading_lines)
                if scope_at_site:
                    # What the caller's RunConfig made (its strategy, its seed) is made by the caller.
                    made = [self._substituted(s) for s in self.before_build]
                    if made and not first:
                        made[0] = made[0].with_changes(leading_lines=renamed_line.leading_lines)
                        renamed_line = renamed_line.with_changes(leading_lines=[])
                    first = [*first, *made]
                statements[site] = [*first, renamed_line, *moved]
        if unit.config_binding is not None:
            # A setting read back, computed once: bound where the RunConfig was.
            statements.setdefault(unit.config_binding.statement, [
                _emit.statement("{n} = {v}", n=name, v=value.deep_clone()) for value, name in unit.config_bound])
        for earlier in unit.config_earlier:
            statements.setdefault(earlier.statement, [])
        for original, new in list(statements.items()):
            statements[original] = [self._retargeted(original, self._substituted(s)) for s in new]

        notes: list[tuple[cst.BaseStatement, str]] = list(self._comments)
        notes += [(ctx.enclosing_statement(node), f"# e2k: {code} {message}") for node, code, message in self._leftovers]
        tree_marks = []
        for statement, text in notes:
            owner = next((s for s in statements if self._inside(statement, {s})), None)
            if owner is not None and not statements[owner] and owner is not unit.statement:
                owner = unit.statement  # a note on removed code (a RunConfig setting) goes where the model is built
            if inserted and (owner is unit.statement or (owner is None and statement is unit.statement)):
                written = inserted  # where the model of an Estimator built in an expression is built
            elif owner is None:
                tree_marks.append((statement, text))
                continue
            else:
                written = statements[owner]
            if written:
                first = written[0]
                if any(line.comment is not None and line.comment.value == text for line in first.leading_lines):
                    continue  # two notes of removed code that say the same: once
                written[0] = first.with_changes(
                    leading_lines=[*first.leading_lines, cst.EmptyLine(comment=cst.Comment(text))]
                )
            else:
                raise Unsupported("a note would be lost with a removed statement", statement, UNSUPPORTED_USE)

        # Nothing below can fail: the unit is converted.
        ctx.active_plan = None
        if self._needs_tf_import:
            ctx.add_import("tensorflow", asname="tf")
        for module, obj, asname in self.imports:
            ctx.add_import(module, obj, asname)
        for statement, text in tree_marks:
            ctx.edits.mark(statement, text)
        for node, code, message in [*self._leftovers, *self._reported]:
            line, col = ctx.position(node)
            if any(f.line == line and f.col == col and f.code == code and f.message == message
                   and f.path == ctx.path_of(node) for f in ctx.findings):
                continue  # the model_fn of two Estimators (each branch's) read alike: one finding
            ctx.report(node, message, code=code, kind="manual")
        replaced = set(statements)
        for node, new in self._subst.items():
            # A node inside another replaced node only matters in that node's new code, where
            # `_substituted` already put it.
            if not self._inside(node, replaced) and not self._inside(ctx.parent(node), self._subst):
                ctx.edits.replace(node, self._retargeted(node, self._substituted(new)))
        for original, new in statements.items():
            ctx.edits.replace_statement(original, new)
        if inserted:
            ctx.edits.insert_before(unit.statement, inserted)
        for node in [n for n in ctx.edits._nodes
                     if n not in self._subst and (self._inside(n, replaced) or self._inside(ctx.parent(n), self._subst))]:
            ctx.edits.absorb(node)  # written into the new statements above, or gone with them
        emitted = _emitted_helpers(ctx)
        near = unit.sites[0][0] if unit.factory is not None else unit.statement
        # Each helper goes to the module whose new code reads it: a canned model class to the
        # factory's module that builds it, the checkpoint callback to where fit is called.
        placed: dict[str, tuple[cst.CSTNode, list[cst.BaseStatement]]] = {}
        if self._after_imports:
            placed[ctx.path_of(near)] = (near, [self._substituted(s) for s in self._after_imports])
        wanted = [(key, given, definitions) for key, (given, definitions) in self._helpers]
        readers = {given: self._reader_of(given, statements, ctx) for _, given, _ in wanted}
        for _ in wanted:  # a helper only another helper reads (a layer of a model class) goes with it
            for _, given, _ in wanted:
                if readers[given] is None:
                    readers[given] = next((readers[other] for _, other, code in wanted if other != given
                                           and readers[other] is not None
                                           and any(given in _names_read(d) for d in code)), None)
        for key, given, definitions in wanted:
            where = readers[given] or near
            if (ctx.path_of(where), key) in emitted:
                continue  # this module has it already
            emitted[key] = emitted[(ctx.path_of(where), key)] = given
            at, helpers = placed.setdefault(ctx.path_of(where), (where, []))
            target = ctx.resolved_modules().get(ctx.path_of(at), ctx.module)
            definitions = _emit.reindent_docstrings(list(definitions), target.default_indent)
            # Two blank lines before a class or function; the insertion adds one of its own.
            blank = [_emit.blank_line()] * (2 if helpers else 1)
            definitions[0] = definitions[0].with_changes(leading_lines=[*blank, *definitions[0].leading_lines])
            helpers.extend(definitions)
        for at, statements_here in placed.values():
            if statements_here:
                ctx.insert_after_imports(statements_here, near=at)
        for node, code, message in self._fixed:
            ctx.report(node, message, code=code, kind="fixed")
        for callback in self.on_commit:
            callback()


def _module_names(ctx: RewriteContext) -> set[str]:
    """Every name bound or read at module level (a helper defined there must not clash); in
    a pass over a program's modules, in any of them."""
    names: set[str] = set()
    for module in ctx.resolved_modules().values():  # where converted code can go
        scope = ctx.scope(module.body[0]) if module.body else None
        if scope is not None:
            names |= {a.name for a in scope.assignments} | {a.node.value for a in scope.accesses}
    return names


def _emitted_helpers(ctx: RewriteContext) -> dict:
    """Helpers already added by an earlier unit: key -> name, and (module path, key) -> name
    for each module that has it."""
    emitted = getattr(ctx, "_e2k_helpers", None)
    if emitted is None:
        emitted = {}
        ctx._e2k_helpers = emitted
    return emitted


# ---------------------------------------------------------------------------------------
# The `tf` the emitted code uses
# ---------------------------------------------------------------------------------------
def tf_alias(ctx: RewriteContext) -> tuple[str, bool]:
    """The module-level name bound to the TensorFlow 2 root (``tf`` usually), and whether
    ``import tensorflow as tf`` must be added for it. In a pass over a program's modules,
    converted code may go to any of them: they must agree."""
    if ctx._modules is not None:
        current = ctx.current
        answers = set()
        try:
            for path in ctx.resolved_modules():
                ctx.current = path
                answers.add(_tf_alias(ctx)[0])
        finally:
            ctx.current = current
        if len(answers) > 1:
            raise Unsupported("the modules of the program name TensorFlow differently ("
                              + ", ".join(sorted(answers)) + ")", None, UNSUPPORTED_USE)
    return _tf_alias(ctx)


def _tf_alias(ctx: RewriteContext) -> tuple[str, bool]:
    root = _tensorflow_root(ctx)
    if root is not None:
        return root, False
    module_scope = ctx.scope(ctx.module.body[0]) if ctx.module.body else None
    if isinstance(module_scope, GlobalScope):
        from estimator2keras._imports import compat_alias

        if compat_alias(ctx) is not None:
            return "tf", False  # `tf` is rebound to TensorFlow 2 once the units convert
        if module_scope.assignments["tf"]:
            raise Unsupported(
                "`tf` is bound to something other than `import tensorflow as tf` "
                "(for example tensorflow.compat.v1); e2k does not rewrite that import style yet",
                ctx.module.body[0],
                UNSUPPORTED_USE,
            )
    return "tf", True


# ---------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------
def convert_units(ctx: RewriteContext) -> None:
    """Find every Estimator unit in ``ctx.module`` and convert those that convert entirely."""
    rules = ctx.rules.unit_rules(include_disabled=True)
    owners = {path: rule for rule in rules if ctx.enabled(rule.code) for path in rule.constructors}
    if not owners:
        return
    converted = False
    found = list(find_units(ctx, owners))
    #: Every Estimator construction of the module (E2K410 looks for the one a warm start reads).
    ctx.estimator_units = [unit for unit in found if isinstance(unit, EstimatorUnit)]
    for group in _groups(ctx, found):
        if isinstance(group, Unsupported):
            ctx.mark(group.node, group.reason, group.code)
            _mark_model_fns_left(ctx, getattr(group, "estimator_calls", []), group)
            continue
        if any(ctx.is_suppressed(unit.call, unit.owner.code) for unit in group):
            continue  # `# e2k: ignore` on the Estimator: the whole unit stays as it is
        reported = len(ctx.findings)
        plans: list[ConversionPlan] = []
        ctx.current = ctx.path_of(group[0].statement)  # a program's module: where its code is written
        try:
            for unit in group:
                plans.append(_plan(unit, rules, ctx, group))
            strategies = {_emit.code(p.scope_strategy) if p.scope_strategy is not None else None for p in plans}
            if len(plans) > 1 and len(strategies) > 1 and any(p.has_strategy for p in plans):
                # A branch with a strategy and one without (or another) share the calls after
                # them: the replica count is the model's own strategy's, right for each. (Not
                # for a TPUEstimator's TPUStrategy alone: its input_fns were given the global batch.)
                plans = [_plan(unit, rules, ctx, group, replicas_of_model=True) for unit in group]
            _check_shared_uses(plans, ctx)
            for plan in plans:
                plan.commit()
        except Unsupported as exc:
            del ctx.findings[reported:]
            ctx.mark(exc.node or group[0].call, exc.reason, exc.code or UNSUPPORTED_USE)
            if exc.node is not None and ctx.path_of(exc.node) != ctx.path_of(group[0].call):
                # Refused in another module of the program (its model_fn's): said here too, where
                # the Estimator and the code left with it are.
                where = f"{os.path.basename(ctx.path_of(exc.node))}:{ctx.position(exc.node)[0]}"
                ctx.mark(group[0].call, f"not converted: {exc.reason} ({where})", exc.code or UNSUPPORTED_USE)
            _mark_model_fns_left(ctx, [unit.call for unit in group], exc)
            for node, reason, code in getattr(exc, "also", ()):  # the unit's other blockers
                ctx.mark(node, reason, code)
            if len(group) > 1:
                for unit in group:
                    if exc.node is None or not ctx.within(exc.node, (unit.statement,)):
                        ctx.mark(unit.call, _together(unit, group, ctx), UNSUPPORTED_USE)
            continue
        finally:
            ctx.active_plan = None
            ctx.current = ctx.path
        converted = True
    if ctx.program is not None and ctx.program.requests_for(ctx.path):
        converted = _convert_requested(ctx) or converted
    elif ctx.program is not None and ctx.program.left_for(ctx.path):
        _mark_left_by_consumers(ctx)
    if converted:
        for path in ctx.resolved_modules():  # a module no query reached has nothing converted
            ctx.current = path
            try:
                _after_conversion(ctx)
            finally:
                ctx.current = ctx.path


def _mark_model_fns_left(ctx: RewriteContext, calls: list[cst.Call], exc: Unsupported) -> None:
    """A model_fn of another module left with its refused Estimator: said there too, where its
    Estimator API is left (``mnist.model_fn`` given to an Estimator in main.py)."""
    for call in calls:
        try:
            value = bind_arguments(call, ("model_fn", "model_dir", "config", "params", "warm_start_from")).get("model_fn")
        except Unsupported:
            continue
        current, ctx.current = ctx.current, ctx.path_of(call)  # names resolved in the Estimator's module
        try:
            fn = resolve(ctx, value.value) if value is not None and isinstance(value.value, (cst.Name, cst.Attribute)) else None
        finally:
            ctx.current = current
        where = f"{os.path.basename(ctx.path_of(call))}:{ctx.position(call)[0]}"
        message = f"left as it is with its Estimator ({where}), which is not converted: {exc.reason}"
        if isinstance(fn, cst.FunctionDef) and ctx.path_of(fn) != ctx.path_of(call) \
                and (exc.node is None or ctx.path_of(exc.node) != ctx.path_of(fn)):
            ctx.mark(fn, message, exc.code or UNSUPPORTED_USE)
        elif fn is None and value is not None and ctx.program is not None:
            # Converted file by file (analysis.program): the model_fn's file is told, and says it.
            located = ctx.program.locate(ctx, value.value)
            if located is not None:
                ctx.program.leave(*located, message, exc.code or UNSUPPORTED_USE)


def _mark_left_by_consumers(ctx: RewriteContext) -> None:
    """This file's model_fns whose Estimator, in another file, is refused (``Program.leave``)."""
    for name, (message, code) in ctx.program.left_for(ctx.path).items():
        for statement in ctx.module.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                ctx.mark(statement, message, code)


def _after_conversion(ctx: RewriteContext) -> None:
    """In the module being written: aliases and imports only the converted code read go,
    and ``tf`` is TensorFlow 2 again."""
    _remove_unused_aliases(ctx)
    from estimator2keras._imports import CODE, compat_alias, rebind_tf, v2_switches

    if ctx.enabled(CODE):
        v2_switches(ctx, set(ctx.edits.replaced_statements()))
        alias = compat_alias(ctx)
        from estimator2keras._imports import respell_contrib, respell_tf1_names, rewrite_contrib_calls

        root = "tf" if alias is not None else _tensorflow_root(ctx) if ctx.edits else None
        if root is not None:
            rewrite_contrib_calls(ctx, root, set(ctx.edits.replaced_statements()))
        if alias is not None:
            rebind_tf(ctx, alias[0], set(ctx.edits.replaced_statements()))
            respell_contrib(ctx, "tf", set(ctx.edits.replaced_statements()))
        elif root is not None:
            respell_tf1_names(ctx, root, set(ctx.edits.replaced_statements()))
    remove_unused_tf1_imports(ctx)


def _tensorflow_root(ctx: RewriteContext) -> str | None:
    """The module-level name ``import tensorflow [as tf]`` binds in the module being written."""
    scope = ctx.scope(ctx.module.body[0]) if ctx.module.body else None
    if not isinstance(scope, GlobalScope):
        return None
    for assignment in scope.assignments:
        node = getattr(assignment, "node", None)
        if isinstance(node, cst.Import):
            for alias in node.names:
                if _emit.code(alias.name) == "tensorflow":
                    return alias.asname.name.value if alias.asname else "tensorflow"
    return None


def _convert_requested(ctx: RewriteContext) -> bool:
    """The model_fns other files of the program convert their Estimators with: replaced here
    by the Keras model and builder they were promised (``analysis.program``)."""
    from estimator2keras.analysis.program import convert_foreign

    requests = ctx.program.requests_for(ctx.path)
    planned = []
    for foreign in requests:
        try:
            _, statements = convert_foreign(ctx, foreign.name, foreign)
        except Unsupported:
            ctx.program_honoured = False
            return False
        fn = next(s for s in ctx.module.body if isinstance(s, cst.FunctionDef) and s.name.value == foreign.name)
        planned.append((fn, statements))
    for fn, statements in planned:
        ctx.edits.replace_statement(fn, statements)
        ctx.report(fn, f"model_fn -> the Keras model built by `{_emit.code(statements[-1].name)}()`, for the "
                       "Estimator another file of the program builds", code="E2K001", kind="fixed")
    ctx.program_honoured = True
    return True


def _plan(unit: EstimatorUnit, rules, ctx: RewriteContext, group: list[EstimatorUnit],
          replicas_of_model: bool = False) -> ConversionPlan:
    plan = ConversionPlan(unit, ctx)
    plan.replicas_of_model = replicas_of_model
    plan.group_calls = tuple(member.call for member in group)
    ctx.active_plan = plan
    for rule in rules:
        if not ctx.enabled(rule.code):
            reason = rule().required(unit, plan, ctx)
            if reason:
                raise Unsupported(f"{rule.code} is disabled, but {reason}", unit.call, rule.code)
            continue
        try:
            rule().plan(unit, plan, ctx)
        except Unsupported as exc:
            exc.code = exc.code or rule.code
            raise
    plan.finish()
    check_unit(plan, ctx)
    ctx.active_plan = None
    return plan


def _groups(ctx: RewriteContext, found: list) -> Iterator[list[EstimatorUnit] | Unsupported]:
    """Units that share reads of their variable convert together or not at all: each
    Estimator a branch builds becomes a model, and the calls after the join convert once.
    A read that another kind of value may reach too (``est = add_metrics(est, ...)``,
    ``est = make_keras_estimator()``) keeps the unit from converting."""
    units = [f for f in found if isinstance(f, EstimatorUnit)]
    by_assignment = {}
    for unit in units:
        targets = [unit.target]
        if unit.returned is not None:  # `m = Estimator(...)` in a factory: `m` is the unit's too
            targets.append(unit.statement.body[0].targets[0].target)
        for target in targets:
            assignment = _assignment_of(ctx, target)
            if assignment is not None:
                by_assignment[assignment] = unit
    group_of = {id(unit): [unit] for unit in units}
    refused: dict[int, Unsupported] = {}

    def join(unit: EstimatorUnit, partner: EstimatorUnit) -> None:
        mine, theirs = group_of[id(unit)], group_of[id(partner)]
        if mine is not theirs:
            mine.extend(theirs)
            for member in theirs:
                group_of[id(member)] = mine

    # One Estimator read by a RunConfig of each branch of an `if`: a unit each, together.
    by_call: dict[int, EstimatorUnit] = {}
    for unit in units:
        if id(unit.call) in by_call:
            join(unit, by_call[id(unit.call)])
        else:
            by_call[id(unit.call)] = unit
    # Estimators built from one definition (a model_fn, a list of feature columns, a
    # RunConfig: a notebook cell run again with other settings) convert together: the
    # definition is replaced once, for all of them.
    readers: dict[object, EstimatorUnit] = {}
    for unit in units:
        for arg in unit.call.args:
            for node in _names_in(arg.value):
                assignment = _single_assignment(ctx, node)
                if assignment is None or isinstance(getattr(assignment, "node", None), (cst.Import, cst.ImportFrom)):
                    continue
                if assignment in readers:
                    join(unit, readers[assignment])
                else:
                    readers[assignment] = unit
    # The Estimators of one dict or list literal share its loops: they convert together.
    holders: dict[cst.CSTNode, EstimatorUnit] = {}
    for unit in units:
        if unit.container is not None:
            if unit.container.statement in holders:
                join(unit, holders[unit.container.statement])
            else:
                holders[unit.container.statement] = unit
    for unit in units:
        for read, others in unit.shared.items():
            for other in others:
                partner = by_assignment.get(other)
                if partner is None:
                    node = getattr(other, "node", read)
                    line = ctx.position(node)[0]
                    refused.setdefault(id(unit), Unsupported(
                        f"`{unit.var}` here may also hold the value assigned on line {line}, which is not an "
                        "Estimator e2k converts", read, UNSUPPORTED_USE))
                    continue
                join(unit, partner)
    emitted: set[int] = set()
    for item in found:
        if isinstance(item, Unsupported):
            yield item
            continue
        group = group_of[id(item)]
        if id(group) in emitted:
            continue
        emitted.add(id(group))
        reasons = [refused[id(u)] for u in group if id(u) in refused]
        if reasons:
            for unit in group:
                exc = refused.get(id(unit)) or Unsupported(_together(unit, group, ctx), unit.call, UNSUPPORTED_USE)
                exc.estimator_calls = [unit.call]
                yield exc
            continue
        yield sorted(group, key=lambda u: ctx.position(u.call))


def _names_read(node: cst.CSTNode) -> Iterator[str]:
    """The names ``node`` may read: not an attribute's name (``x.layers``), a keyword
    (``f(layers=...)``) or a definition's name."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current.value
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        elif isinstance(current, (cst.FunctionDef, cst.ClassDef)):
            stack.extend(c for c in fields_children(current) if c is not current.name)
        else:
            stack.extend(fields_children(current))


def _names_in(node: cst.CSTNode) -> Iterator[cst.Name]:
    """The names an Estimator argument reads (not attribute names, keywords or lambdas' own)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        elif not isinstance(current, (cst.Lambda, cst.FunctionDef)):
            stack.extend(fields_children(current))


def _together(unit: EstimatorUnit, group: list[EstimatorUnit], ctx: RewriteContext) -> str:
    # Named by their code, not their line: a notebook's lines are not the program's.
    others = ", ".join(f"`{_emit.code(u.call.func)}(...)`" for u in group if u is not unit)
    return f"converts only together with {others} (they share definitions or uses)"


def _check_shared_uses(plans: list[ConversionPlan], ctx: RewriteContext) -> None:
    """The plans of a group must write the same code wherever they meet (a shared
    ``est.train(...)``, the model_fn they both convert, a class they both define): compared
    pair by pair as each plan would commit it, every substitution applied. Two Estimators
    built in the two branches of an `if` may write a statement after it differently: it is
    written in both versions under the same test (``_join_pair``)."""
    if len(plans) == 2:
        _join_pair(plans[0], plans[1], ctx)
    for index, first in enumerate(plans):
        for other in plans[index + 1:]:
            _check_pair(first, other, ctx)


#: What a test may be made of to be read again after its `if` with the same value: names
#: (never rebound), their attributes and items, literals, comparisons and boolean operators.
_STABLE_TEST = (cst.Name, cst.Attribute, cst.Subscript, cst.SubscriptElement, cst.Index, cst.SimpleString,
                cst.Integer, cst.Float, cst.Comparison, cst.ComparisonTarget, cst.BooleanOperation,
                cst.UnaryOperation, cst.Not, cst.And, cst.Or, cst.Equal, cst.NotEqual, cst.In, cst.NotIn,
                cst.Is, cst.IsNot, cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual,
                cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket, cst.List, cst.Tuple,
                cst.Element, cst.Comma, cst.Dot)


def _separating_if(ctx: RewriteContext, first: EstimatorUnit, other: EstimatorUnit) -> tuple[cst.If, bool] | None:
    """The `if` whose body builds one of the two Estimators (or binds its RunConfig, when the
    two share one Estimator) and whose `elif`/`else` the other: (the `if`, whether ``first``
    is the one in its body)."""
    return _branch_between(ctx, _placed(first), _placed(other))


def _placed(unit: EstimatorUnit) -> cst.CSTNode:
    """The statement that places ``unit``'s Estimator where the program holds it: its
    RunConfig's branch, the one call of the factory building it (``if use_keras: est =
    make_keras_estimator(...) else: est = Estimator(...)``), else its own statement."""
    if unit.anchor is not None:
        return unit.anchor
    if unit.factory is not None and len(unit.sites) == 1:
        return unit.sites[0][0]
    return unit.statement


def _branch_between(ctx: RewriteContext, one: cst.CSTNode, two: cst.CSTNode) -> tuple[cst.If, bool] | None:
    """The innermost `if` holding ``one`` in its body and ``two`` in its `elif`/`else`, or the
    reverse: (the `if`, whether ``one`` is in its body); None when no `if` separates them."""
    def chain(node):
        out = []
        while node is not None:
            out.append(node)
            node = ctx.parent(node)
        return out

    mine, theirs = chain(one), chain(two)
    for candidate in mine:
        if not isinstance(candidate, cst.If) or candidate not in theirs:
            continue
        in_body = [ctx.within(n, (candidate.body,)) for n in (one, two)]
        in_else = [candidate.orelse is not None and ctx.within(n, (candidate.orelse,)) for n in (one, two)]
        if in_body[0] and in_else[1]:
            return candidate, True
        if in_body[1] and in_else[0]:
            return candidate, False
        return None
    return None


def _stable_test(ctx: RewriteContext, test: cst.BaseExpression) -> bool:
    """``test`` reads the same after its `if`: made of names bound once (a parameter, a
    module constant, ``args = parse_args()``) and their attributes, items and comparisons."""
    for node in _emit.walk(test):
        if not isinstance(node, (*_STABLE_TEST, cst.BaseParenthesizableWhitespace, cst.Newline, cst.EmptyLine,
                                 cst.Comment, cst.TrailingWhitespace)):
            return False
    for node in _emit.walk(test):
        parent = ctx.parent(node)
        if not isinstance(node, cst.Name) or isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        scope = ctx.scope(node)
        if scope is None or len(list(scope[node.value])) > 1:  # bound more than once, here or in an outer scope
            return False
        if changed_in_place(ctx, node):  # `args.use_tpu = False`, `params.update(...)`: the value changes
            return False
    return True


def changed_in_place(ctx: RewriteContext, name: cst.Name) -> bool:
    """The object ``name`` holds is changed after it is bound, wherever it is read: a method
    that changes it (``KEYS.append("b")``, ``params.update(...)``), an assignment to an
    attribute or an item of it (``args.use_tpu = False``, ``VOCABS["x"] = ...``, ``del``), or
    ``KEYS += [...]``."""
    scope = ctx.scope(name)
    for assignment in (scope[name.value] if scope is not None else ()):
        for access in getattr(assignment, "references", ()):
            inner, outer = access.node, ctx.parent(access.node)
            while isinstance(outer, (cst.Attribute, cst.Subscript)) and outer.value is inner:
                if isinstance(outer, cst.Attribute) and outer.attr.value in MUTATORS and isinstance(
                        ctx.parent(outer), cst.Call):
                    return True
                inner, outer = outer, ctx.parent(outer)
            if inner is not access.node and isinstance(outer, (cst.AssignTarget, cst.Del)):
                return True
            if isinstance(outer, (cst.AugAssign, cst.AnnAssign)) and outer.target is inner:
                return True
    return False


#: Methods that change the object they are called on (a dict of params, a list of keys).
MUTATORS = frozenset({"update", "pop", "popitem", "setdefault", "clear", "append", "extend", "insert", "remove",
                      "sort", "reverse", "__setitem__", "__setattr__", "__delitem__"})


def _join_pair(first: ConversionPlan, other: ConversionPlan, ctx: RewriteContext) -> None:
    """Statements after an `if` that built one Estimator in each branch, which the two
    conversions write differently (``model.fit(train_input_fn(params={**params, "batch_size":
    ...}))`` for a TPUEstimator, ``model.fit(train_input_fn(params=params))`` for an
    Estimator): each is written as ``if TEST: <one> else: <the other>``, TEST being the `if`'s
    own test, which reads the same there. Nothing changes where the test could differ, where the
    statement is a definition (a module-level function has no branch to be in), or where the
    Estimators are held in a container."""
    if first.unit.container is not None or other.unit.container is not None:
        return
    found = _separating_if(ctx, first.unit, other.unit)
    if found is None:
        return
    branch, first_in_body = found
    if not _stable_test(ctx, branch.test):
        return
    pair = (first, other)
    if first.unit.statement is other.unit.statement:
        # One Estimator read by each branch's RunConfig: its statement is written for each.
        one, two = first.unit_statement(), other.unit_statement()
        new = _merged(*((one, two) if first_in_body else (two, one)), branch.test)
        for plan in pair:
            plan._statements[plan.unit.statement] = list(new)
    touched = set(first._statements) | set(other._statements) | set(first._subst) | set(other._subst)
    joined: set[cst.CSTNode] = set()
    end = ctx.position(branch)
    for node in sorted(touched, key=lambda n: (ctx.path_of(n), ctx.position(n))):
        if ctx.within(node, joined) or _written(first, node) == _written(other, node):
            continue
        statement = node if isinstance(node, cst.BaseStatement) and any(node in p._statements for p in pair) \
            else ctx.enclosing_statement(node)
        if statement is None or isinstance(statement, (cst.FunctionDef, cst.ClassDef)) \
                or ctx.path_of(statement) != ctx.path_of(branch) or ctx.within(statement, (branch,)) \
                or ctx.position(statement) < end or ctx.scope(statement) is not ctx.scope(branch):
            continue
        if any(ctx.within(s, (statement,)) and s is not statement for p in pair for s in p._statements):
            continue  # a statement inside it rewritten on its own: not joined here
        versions = []
        for plan in pair:
            written = plan._statements.get(statement, [statement])
            versions.append([plan._retargeted(statement, plan._substituted(s)) for s in written])
        one, two = versions if first_in_body else versions[::-1]
        new = _merged(one, two, branch.test)
        for plan in pair:
            for key in [k for k in plan._subst if ctx.within(k, (statement,))]:
                del plan._subst[key]
            for key in [k for k in plan._wraps if ctx.within(k, (statement,))]:
                del plan._wraps[key]
            plan._statements[statement] = list(new)
        joined.add(statement)


def _merged(one: list, two: list, test: cst.BaseExpression) -> list:
    """Two versions of the same statements, as one: what they share written once, what
    differs under ``if test: ... else: ...``, as deep as the versions share their blocks
    (``if steps_left > 0:`` around two different ``model.fit`` calls keeps one `if`)."""
    same = lambda a, b: _emit.code(a) == _emit.code(b)  # noqa: E731 - one comparison, named
    start = 0
    while start < min(len(one), len(two)) and same(one[start], two[start]):
        start += 1
    end = 0
    while end < min(len(one), len(two)) - start and same(one[len(one) - 1 - end], two[len(two) - 1 - end]):
        end += 1
    head, tail = one[:start], one[len(one) - end:]
    a, b = one[start:len(one) - end], two[start:len(two) - end]
    if not a and not b:
        return one
    if len(a) == 1 and len(b) == 1 and isinstance(a[0], (cst.If, cst.With)) and type(a[0]) is type(b[0]) \
            and isinstance(a[0].body, cst.IndentedBlock) and isinstance(b[0].body, cst.IndentedBlock) \
            and getattr(a[0], "orelse", None) is None and getattr(b[0], "orelse", None) is None \
            and same(a[0].with_changes(body=cst.IndentedBlock([])), b[0].with_changes(body=cst.IndentedBlock([]))):
        inner = _merged(list(a[0].body.body), list(b[0].body.body), test)
        return [*head, a[0].with_changes(body=a[0].body.with_changes(body=inner)), *tail]
    lead = a[0].leading_lines if a and hasattr(a[0], "leading_lines") else []
    a = _decided(a, test, True) or [cst.SimpleStatementLine([cst.Pass()])]
    b = _decided(b, test, False) or [cst.SimpleStatementLine([cst.Pass()])]
    for block in (a, b):
        if hasattr(block[0], "leading_lines"):
            block[0] = block[0].with_changes(leading_lines=[])
    branch = cst.If(test=test.deep_clone(), body=cst.IndentedBlock(body=a),
                    orelse=cst.Else(body=cst.IndentedBlock(body=b)), leading_lines=lead)
    return [*head, branch, *tail]


def _decided(statements: list, test: cst.BaseExpression, value: bool) -> list:
    """``statements`` written under ``if test:`` (``value`` True) or its `else`: an `if` among
    them testing the same (a TPUEstimator's ``use_tpu=params["use_tpu"]`` when the RunConfig
    was chosen by that test too) is its body, or its `else`, there."""
    out = []
    for statement in statements:
        if isinstance(statement, cst.If) and statement.test.deep_equals(test) and (
                value or statement.orelse is None or isinstance(statement.orelse, cst.Else)):
            kept = statement.body.body if value else statement.orelse.body.body if statement.orelse else []
            kept = list(kept)
            if kept and hasattr(kept[0], "leading_lines"):
                kept[0] = kept[0].with_changes(leading_lines=[*statement.leading_lines, *kept[0].leading_lines])
            out += kept
        else:
            out.append(statement)
    return out


def _written(plan: ConversionPlan, node) -> str:
    if node in plan._statements:
        return "".join(_emit.code(plan._retargeted(node, plan._substituted(s))) for s in plan._statements[node])
    if node in plan._subst:
        return _emit.code(plan._retargeted(node, plan._substituted(plan._subst[node])))
    return "<unchanged>"


def _check_pair(first: ConversionPlan, other: ConversionPlan, ctx: RewriteContext) -> None:
    lines = f"the Estimators on lines {ctx.position(first.unit.call)[0]} and {ctx.position(other.unit.call)[0]}"
    mine = {key: "".join(_emit.code(d) for d in definitions) for key, (_, definitions) in first._helpers}
    for key, (_, definitions) in other._helpers:
        if key in mine and mine[key] != "".join(_emit.code(d) for d in definitions):
            raise Unsupported(f"{lines} need different definitions named `{key}`", other.unit.call, UNSUPPORTED_USE)
    pair = (first, other)
    meeting = set(first._statements) & set(other._statements)
    # Reads of a container's loop are shared by its Estimators only (not by another Estimator
    # converted with them because it reads the same feature columns).
    meeting |= {ctx.enclosing_statement(read) for plan, partner in (pair, pair[::-1]) for read in plan.unit.shared
                if plan.unit.container is None or read in partner.unit.shared}
    touched = set(first._statements) | set(other._statements) | set(first._subst) | set(other._subst)
    # In the program's order: the first difference is reported, the same one at every run.
    for node in sorted(touched, key=lambda n: (ctx.path_of(n), ctx.position(n))):
        if ctx.within(node, meeting) and _written(first, node) != _written(other, node):
            one, two = (" ".join(_written(p, node).split()) for p in (first, other))
            start = next((i for i, (a, b) in enumerate(zip(one, two)) if a != b), min(len(one), len(two)))
            one, two = (f"...{text[max(0, start - 20):start + 40]}" for text in (one, two))
            raise Unsupported(f"{lines} convert this code differently (`{one}` / `{two}`)", node, UNSUPPORTED_USE)


def _remove_unused_aliases(ctx: RewriteContext) -> None:
    """``tf1 = tf.compat.v1``, ``layers = tf1.layers``: module aliases by assignment that only
    the converted code read go with it (``tf.compat.v1.layers`` is gone under Keras 3, and an
    alias of it would fail where the program starts)."""
    module_scope = ctx.scope(ctx.module.body[0]) if ctx.module.body else None
    if not isinstance(module_scope, GlobalScope):
        return
    aliases = []
    for statement in ctx.module.body:
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        if (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                and isinstance(small.value, (cst.Name, cst.Attribute)) and ctx.api_path(small.value) is not None):
            assignment = _assignment_of(ctx, small.targets[0].target)
            if assignment is not None:
                aliases.append((statement, assignment))
    # Names the new code reads (a helper's `activation=ACTIVATION` moved into a model's
    # `__init__`): an alias they name stays, whatever it stood for.
    written = [*ctx.edits._nodes.values(), *(s for new in ctx.edits._statements.values() for s in new),
               *ctx.edits._after_imports]
    read_by_new_code = {name for code in written for name in _names_read(code)}
    aliases = [(s, a) for s, a in aliases if a.name not in read_by_new_code]
    removed: set[cst.BaseStatement] = set()
    changed = True
    while changed:  # an alias read only by another alias that goes, goes too
        changed = False
        for statement, assignment in aliases:
            if statement in removed or ctx.edits.is_replaced(statement):
                continue
            reads = [a.node for a in assignment.references]
            if all(ctx.edits.covers(read, ctx.parent) or ctx.within(read, removed) for read in reads):
                removed.add(statement)
                changed = True
    for statement in removed:
        ctx.edits.remove_statement(statement)


def module_imports(ctx: RewriteContext) -> Iterator[tuple[str, str, str | None, str | None]]:
    """Each name an absolute import of the module binds at module level: (the name bound, the
    module, the object imported from it or None for ``import module``, the ``as`` name or None),
    as ``remove_import_if_unused`` takes them."""
    module_scope = ctx.scope(ctx.module.body[0]) if ctx.module.body else None
    if not isinstance(module_scope, GlobalScope):
        return
    seen: set[int] = set()
    for assignment in module_scope.assignments:
        node = getattr(assignment, "node", None)
        if id(node) in seen:
            continue  # one assignment per name the statement binds: its names are read once
        seen.add(id(node))
        if isinstance(node, cst.Import):
            for alias in node.names:
                name = _emit.code(alias.name)
                asname = alias.asname.name.value if alias.asname else None
                yield asname or name.split(".")[0], name, None, asname
        elif isinstance(node, cst.ImportFrom) and node.module is not None and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                asname = alias.asname.name.value if alias.asname else None
                yield asname or _emit.code(alias.name), _emit.code(node.module), _emit.code(alias.name), asname


def remove_unused_tf1_imports(ctx: RewriteContext) -> None:
    """Drop the compat.v1 / estimator imports that a conversion left unused."""
    for _, module, obj, asname in module_imports(ctx):
        if obj is None:
            # tensorflow.contrib is gone from TensorFlow 2: an import of it left unused would
            # fail where the converted program starts.
            if module.startswith(("tensorflow.compat", "tensorflow_estimator", "tf_slim", "tensorflow.contrib")) \
                    or module == "tf_slim" or is_estimator_api(module):
                # tf_slim (tf.contrib.layers kept outside TensorFlow): its layers became Keras's.
                ctx.remove_import_if_unused(module, asname=asname)
        elif module.startswith(("tensorflow", "tensorflow_estimator", "tf_slim")) and (
            # `from tensorflow.python.estimator.model_fn import ModeKeys`: any spelling of an
            # Estimator API, as the leftovers check reads it.
            obj in ("estimator", "v1", "contrib") or module.startswith(
                ("tensorflow.compat", "tensorflow_estimator", "tensorflow.estimator", "tf_slim", "tensorflow.contrib")
            ) or is_estimator_api(f"{module}.{obj}")
        ):
            ctx.remove_import_if_unused(module, obj, asname)
