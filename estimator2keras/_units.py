"""Estimator *units*: an Estimator together with what configures, feeds, trains and evaluates it.

A unit is found from the statement that builds the Estimator (``est = Estimator(...)``),
then resolved through names: its model_fn, its RunConfig and strategy, its TrainSpec /
EvalSpec, its input_fns and every use of ``est``. The unit rules (``UnitRule``) each plan
their part of the conversion on a ``ConversionPlan``; the plan is committed only when every
rule succeeded and every use of the Estimator was claimed. Otherwise nothing of the unit
changes, and the reason is marked in the file and reported.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

import libcst as cst
from libcst.metadata import Assignment, GlobalScope

from estimator2keras import _emit
from estimator2keras._context import RewriteContext, iter_calls
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
    scope = ctx.scope(name)
    if scope is None:
        return None
    referents = set()
    for access in scope.accesses[name.value]:
        if access.node is name:
            referents = access.referents
            break
    else:
        assignments = scope.assignments[name.value]
        referents = assignments
    if len(referents) != 1:
        return None
    return next(iter(referents))


def resolve(ctx: RewriteContext, node: cst.BaseExpression) -> Binding | cst.FunctionDef | None:
    """What a Name stands for: a simple one-time binding, a function definition, or None."""
    if not isinstance(node, cst.Name):
        return None
    assignment = _single_assignment(ctx, node)
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


def accesses_of(ctx: RewriteContext, target: cst.Name) -> list[cst.Name] | None:
    """Every read of the name bound by ``target``; None when the name is bound more than once."""
    scope = ctx.scope(target)
    if scope is None or len(scope.assignments[target.value]) != 1:
        return None
    (assignment,) = scope.assignments[target.value]
    reads = [a.node for a in assignment.references if isinstance(a.node, cst.Name)]
    return reads


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


@dataclass
class InputFn:
    """What was passed as ``input_fn``: a function, or a lambda calling a function."""

    expr: cst.BaseExpression
    function: cst.FunctionDef | None = None
    lambda_: cst.Lambda | None = None
    helpers: list[cst.FunctionDef] = field(default_factory=list)
    #: ``make_input_fn(x, y)``: the call that returns ``function`` (a nested def).
    factory_call: cst.Call | None = None
    #: A function to map over the dataset (``model.preprocess``), set by the plan.
    dataset_map: str | None = None

    def definitions(self) -> list[cst.FunctionDef]:
        """Functions whose code builds the dataset (the input_fn itself, or what a lambda calls)."""
        return [self.function] if self.function is not None else list(self.helpers)

    def bodies(self) -> list[cst.CSTNode]:
        nodes: list[cst.CSTNode] = [d.body for d in self.definitions()]
        if self.lambda_ is not None:
            nodes.append(self.lambda_.body)
        return nodes

    def may_repeat(self) -> bool:
        """True unless the dataset is visibly finite (no ``.repeat`` anywhere in its code)."""
        for body in self.bodies():
            for call in iter_calls(body):
                if isinstance(call.func, cst.Attribute) and call.func.attr.value == "repeat":
                    return True
        return False

    def call_expression(self, params: cst.BaseExpression | None) -> cst.BaseExpression:
        """The expression that gives the dataset, as the Estimator would have called it (and
        mapped through ``dataset_map``, when the model preprocesses its features in tf.data)."""
        if self.lambda_ is not None:
            dataset = self.lambda_.body
        else:
            assert self.function is not None
            args = []
            for param in self.function.params.params:
                if param.name.value == "params":
                    if params is None:
                        raise Unsupported("the input_fn takes `params`, but the Estimator has none", self.function)
                    args.append(_emit.keyword_arg("params", params))
            func = self.factory_call if self.factory_call is not None else cst.Name(self.function.name.value)
            dataset = cst.Call(func=func, args=_emit.call_args(args))
        if self.dataset_map is None:
            return dataset
        if not isinstance(dataset, (cst.Call, cst.Name, cst.Attribute, cst.Subscript)):
            dataset = dataset.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Call(
            func=cst.Attribute(dataset, cst.Name("map")), args=[cst.Arg(_emit.expr(self.dataset_map))])


def resolve_input_fn(ctx: RewriteContext, node: cst.BaseExpression) -> InputFn:
    bound = resolve(ctx, node)
    if isinstance(bound, cst.FunctionDef):
        _check_input_fn_params(bound)
        return InputFn(node, function=bound)
    if isinstance(node, cst.Lambda):
        params = node.params
        if params.params or isinstance(params.star_arg, (cst.Param, cst.ParamStar)) or params.kwonly_params or params.star_kwarg:
            raise Unsupported("an input_fn lambda with parameters is not converted yet", node)
        helpers = []
        for call in iter_calls(node.body):
            target = resolve(ctx, call.func) if isinstance(call.func, cst.Name) else None
            if isinstance(target, cst.FunctionDef):
                helpers.append(target)
        return InputFn(node, lambda_=node, helpers=helpers)
    if isinstance(node, cst.Call):
        factory = resolve(ctx, node.func) if isinstance(node.func, cst.Name) else None
        inner = _returned_function(factory) if isinstance(factory, cst.FunctionDef) else None
        if inner is not None:
            _check_input_fn_params(inner)
            return InputFn(node, function=inner, factory_call=node)
    raise Unsupported("this input_fn is not a function, a lambda or an input_fn factory that e2k can follow", node)


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


def _check_input_fn_params(fn: cst.FunctionDef) -> None:
    for param in fn.params.params:
        name = param.name.value
        if name not in INPUT_FN_PARAMS or name in ("mode", "config", "input_context"):
            if param.default is None:
                raise Unsupported(f"input_fn parameter `{name}` is not converted yet", fn)


# ---------------------------------------------------------------------------------------
# The unit
# ---------------------------------------------------------------------------------------
@dataclass
class Use:
    """One read of the Estimator variable, classified."""

    name: cst.Name
    kind: str  # "method" | "train_and_evaluate" | "other"
    call: cst.Call | None = None
    method: str | None = None


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
    config_args: dict[str, cst.Arg] = field(default_factory=dict)

    @property
    def var(self) -> str:
        return self.target.value

    def arg_value(self, name: str) -> cst.BaseExpression | None:
        arg = self.args.get(name)
        return arg.value if arg is not None else None

    def config_value(self, name: str) -> cst.BaseExpression | None:
        arg = self.config_args.get(name)
        return arg.value if arg is not None else None


RUN_CONFIG = frozenset({"estimator.RunConfig"})
RUN_CONFIG_SIGNATURE = (
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
    "save_checkpoints_secs", "session_config", "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours", "log_step_count_steps", "train_distribute",
    "device_fn", "protocol", "eval_distribute", "experimental_distribute",
    "experimental_max_worker_delay_secs", "session_creation_timeout_secs",
    "checkpoint_save_graph_def",
)
TRAIN_AND_EVALUATE = "estimator.train_and_evaluate"


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
    for call in iter_calls(ctx.module):
        path = ctx.call_api_path(call)
        owner = owners.get(path) if path else None
        if owner is None:
            continue
        try:
            yield _build_unit(ctx, call, path, owner)
        except Unsupported as exc:
            exc.node = exc.node or call
            exc.code = exc.code or UNSUPPORTED_USE
            yield exc


def _build_unit(ctx: RewriteContext, call: cst.Call, path: str, owner: type[UnitRule]) -> EstimatorUnit:
    statement = ctx.enclosing_statement(call)
    assign = None
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        assign = statement.body[0]
    if not (
        isinstance(assign, cst.Assign)
        and assign.value is call
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
    ):
        raise Unsupported(
            "the Estimator is not assigned to a name (`estimator = ...`), which e2k needs to follow its uses", call
        )
    target = assign.targets[0].target
    reads = accesses_of(ctx, target)
    if reads is None:
        raise Unsupported(f"`{target.value}` is assigned more than once", target)
    args = bind_arguments(call, owner.signature)
    unit = EstimatorUnit(owner, path, statement, call, target, args, [_classify(ctx, n) for n in reads])
    config = unit.arg_value("config")
    if config is not None:
        config_call, binding = resolve_call(ctx, config, RUN_CONFIG)
        if config_call is None:
            raise Unsupported("the Estimator's config is not a RunConfig(...) e2k can follow", config)
        if binding is not None:
            others = [n for n in accesses_of(ctx, binding.target) or [None] if n is not config]
            if others:
                raise Unsupported(f"the RunConfig `{binding.name}` is used elsewhere too", binding.target)
        unit.config_call, unit.config_binding = config_call, binding
        unit.config_args = bind_arguments(config_call, RUN_CONFIG_SIGNATURE)
    return unit


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
        self.scope_strategy: cst.BaseExpression | None = None
        #: A name the input_fns can read to scale per-replica batches; None when not visible.
        self.strategy_name: str | None = None
        self.has_strategy = False
        self.claimed_uses: set[cst.Name] = set()
        self.claimed_args: set[str] = set()
        self.claimed_config: set[str] = set()
        #: input_fns the Keras program now calls, registered by the rules that call them.
        self.input_fns: list[InputFn] = []
        #: Mapped over every dataset the Keras program feeds the model (``model.preprocess``).
        self.dataset_map: str | None = None
        self._subst: dict[cst.CSTNode, cst.CSTNode] = {}
        self._statements: dict[cst.BaseStatement, list[cst.BaseStatement]] = {}
        self._comments: list[tuple[cst.BaseStatement, str]] = []
        self._after_imports: list[cst.BaseStatement] = []
        self._fixed: list[tuple[cst.CSTNode, str, str]] = []
        self._leftovers: list[tuple[cst.CSTNode, str, str]] = []
        #: Imports the converted code needs (added only if the unit converts).
        self.imports: list[tuple[str, str | None, str | None]] = []

    # -- what rules call ------------------------------------------------------------------
    def replace(self, node: cst.CSTNode, new: cst.CSTNode) -> None:
        """Replace an original node, wherever it ends up. ``new`` must not contain ``node``
        itself (use ``node.deep_clone()``)."""
        known = self._subst.get(node)
        if known is not None and not known.deep_equals(new):
            raise Unsupported("two rules rewrite the same code differently", node, UNSUPPORTED_USE)
        self._subst[node] = new

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

    def register_input_fn(self, input_fn: InputFn) -> None:
        input_fn.dataset_map = self.dataset_map
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
        return [u for u in self.unit.uses if u.kind == kind and (not methods or u.method in methods)]

    def remove_binding_if_only_here(self, binding: Binding | None, used_at: cst.CSTNode) -> None:
        """Drop ``name = value`` when ``used_at`` is the name's only read; else refuse."""
        if binding is None:
            return
        reads = accesses_of(self.ctx, binding.target) or []
        if any(read is not used_at for read in reads):
            raise Unsupported(f"`{binding.name}` is used elsewhere too", binding.target, UNSUPPORTED_USE)
        self.remove_statement(binding.statement)

    # -- the engine's side ----------------------------------------------------------------
    def changes(self) -> list[tuple[cst.CSTNode, str | None]]:
        """What committing would change: (node, code) for each conversion reported, and
        (node, None) for each original node or statement replaced or removed."""
        replaced: list[cst.CSTNode] = [self.unit.statement, *self._subst, *self._statements]
        if self.unit.config_binding is not None:
            replaced.append(self.unit.config_binding.statement)
        return [(node, code) for node, code, _ in self._fixed] + [(node, None) for node in replaced]

    def _model_var_name(self) -> str:
        unit = self.unit
        if unit.var == "model":
            return "model"
        scope = self.ctx.scope(unit.target)
        taken = {a.name for a in scope.assignments} | {a.node.value for a in scope.accesses}
        return _emit.unique_name("model", taken)

    def finish(self) -> None:
        unit = self.unit
        for use in unit.uses:
            if use.name not in self.claimed_uses:
                what = f"`.{use.method}(...)`" if use.kind == "method" else "this use"
                raise Unsupported(f"{what} of the Estimator `{unit.var}` is not converted", use.name, UNSUPPORTED_USE)
        for name, arg in unit.args.items():
            if name not in self.claimed_args:
                self.leftover(arg, "E2K400", f"Estimator({name}=...) is not converted; the Keras program ignores it")
        for name, arg in unit.config_args.items():
            if name not in self.claimed_config:
                self.leftover(arg, "E2K400", f"RunConfig({name}=...) is not converted; the Keras program ignores it")
        if not self.build:
            raise Unsupported("no rule built a Keras model for this Estimator", unit.call, UNSUPPORTED_USE)

    def _inside(self, node: cst.CSTNode, statements) -> bool:
        current = node
        while current is not None:
            if current in statements:
                return True
            current = self.ctx.parent(current)
        return False

    def _substituted(self, node: cst.CSTNode) -> cst.CSTNode:
        return _emit.replace_in(node, self._subst)

    def commit(self) -> None:
        ctx, unit = self.ctx, self.unit
        build = [self._substituted(s) for s in self.build]
        if self.scope_strategy is not None:
            block = _emit.statement("with {s}.scope():\n    pass", s=self.scope_strategy)
            build = [block.with_changes(body=cst.IndentedBlock(body=build))]
        statements = dict(self._statements)
        statements[unit.statement] = [*(self._substituted(s) for s in self.before_build), *build]
        if unit.config_binding is not None:
            statements.setdefault(unit.config_binding.statement, [])
        for original, new in list(statements.items()):
            statements[original] = [self._substituted(s) for s in new]

        notes: list[tuple[cst.BaseStatement, str]] = list(self._comments)
        notes += [(ctx.enclosing_statement(node), f"# e2k: {code} {message}") for node, code, message in self._leftovers]
        tree_marks = []
        for statement, text in notes:
            owner = next((s for s in statements if self._inside(statement, {s})), None)
            if owner is None:
                tree_marks.append((statement, text))
            elif statements[owner]:
                first = statements[owner][0]
                statements[owner][0] = first.with_changes(
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
        for node, code, message in self._leftovers:
            ctx.report(node, message, code=code, kind="manual")
        replaced = set(statements)
        for node, new in self._subst.items():
            if not self._inside(node, replaced):
                ctx.edits.replace(node, self._substituted(new))
        for original, new in statements.items():
            ctx.edits.replace_statement(original, new)
        if self._after_imports:
            ctx.edits.insert_after_imports([self._substituted(s) for s in self._after_imports])
        for node, code, message in self._fixed:
            ctx.report(node, message, code=code, kind="fixed")


# ---------------------------------------------------------------------------------------
# The `tf` the emitted code uses
# ---------------------------------------------------------------------------------------
def tf_alias(ctx: RewriteContext) -> tuple[str, bool]:
    """The module-level name bound to the TensorFlow 2 root (``tf`` usually), and whether
    ``import tensorflow as tf`` must be added for it."""
    module_scope = ctx.scope(ctx.module.body[0]) if ctx.module.body else None
    if isinstance(module_scope, GlobalScope):
        for assignment in module_scope.assignments:
            node = getattr(assignment, "node", None)
            if isinstance(node, cst.Import):
                for alias in node.names:
                    if _emit.code(alias.name) == "tensorflow":
                        return (alias.asname.name.value if alias.asname else "tensorflow"), False
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
    for found in list(find_units(ctx, owners)):
        if isinstance(found, Unsupported):
            ctx.mark(found.node, found.reason, found.code)
            continue
        if ctx.is_suppressed(found.call, found.owner.code):
            continue  # `# e2k: ignore` on the Estimator: the whole unit stays as it is
        reported = len(ctx.findings)
        try:
            plan = ConversionPlan(found, ctx)
            ctx.active_plan = plan
            for rule in rules:
                if not ctx.enabled(rule.code):
                    reason = rule().required(found, plan, ctx)
                    if reason:
                        raise Unsupported(f"{rule.code} is disabled, but {reason}", found.call, rule.code)
                    continue
                try:
                    rule().plan(found, plan, ctx)
                except Unsupported as exc:
                    exc.code = exc.code or rule.code
                    raise
            plan.finish()
            check_unit(plan, ctx)
            plan.commit()
        except Unsupported as exc:
            del ctx.findings[reported:]
            ctx.mark(exc.node or found.call, exc.reason, exc.code or UNSUPPORTED_USE)
            continue
        finally:
            ctx.active_plan = None
        converted = True
    if converted:
        from estimator2keras._imports import CODE, compat_alias, rebind_tf, v2_switches

        if ctx.enabled(CODE):
            v2_switches(ctx, set(ctx.edits.replaced_statements()))
            alias = compat_alias(ctx)
            if alias is not None:
                rebind_tf(ctx, alias[0], set(ctx.edits.replaced_statements()))
        remove_unused_tf1_imports(ctx)


def remove_unused_tf1_imports(ctx: RewriteContext) -> None:
    """Drop the compat.v1 / estimator imports that a conversion left unused."""
    module_scope = ctx.scope(ctx.module.body[0]) if ctx.module.body else None
    if not isinstance(module_scope, GlobalScope):
        return
    for assignment in module_scope.assignments:
        node = getattr(assignment, "node", None)
        if isinstance(node, cst.Import):
            for alias in node.names:
                name = _emit.code(alias.name)
                if name.startswith(("tensorflow.compat", "tensorflow_estimator")):
                    ctx.remove_import_if_unused(name, asname=alias.asname.name.value if alias.asname else None)
        elif isinstance(node, cst.ImportFrom) and node.module is not None:
            module = _emit.code(node.module)
            if module.startswith(("tensorflow", "tensorflow_estimator")) and not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    if _emit.code(alias.name) in ("estimator", "v1") or module.startswith(
                        ("tensorflow.compat", "tensorflow_estimator", "tensorflow.estimator")
                    ):
                        ctx.remove_import_if_unused(
                            module, _emit.code(alias.name), alias.asname.name.value if alias.asname else None
                        )
