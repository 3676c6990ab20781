"""What the Estimator's train / evaluate / predict calls become: fit, evaluate, predict with
their callbacks and step counts.

Shared by the unit rules that emit those calls (E2K002, E2K003) and by the rules that give
them callbacks: RunConfig settings (E2K402-E2K405) register callbacks every training ``fit``
of the unit gets; hooks (E2K406-E2K408: expression rules with the roles ``"hook"`` and
``"hook_class"``) become callbacks of the call they were passed to.

Step counts are kept apart as the Estimator kept them: ``steps=N`` trains N more steps,
``max_steps=N`` trains until the global step reaches N. A Keras model's global step is
``model.optimizer.iterations``; when it may already be above 0 (a checkpoint restored from
``model_dir``, an earlier ``fit`` of the same model, a call in a loop) the emitted code
trains only the steps left.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import libcst as cst

from estimator2keras import _emit, _tensorboard
from estimator2keras._rule import Unsupported

if TYPE_CHECKING:
    from estimator2keras._context import RewriteContext
    from estimator2keras._units import ConversionPlan

HOOK_ROLE = "hook"
HOOK_CLASS_ROLE = "hook_class"
UNSUPPORTED_USE = "E2K902"
#: The Keras callback methods a SessionRunHook's methods become, by phase.
PHASE_METHODS = {
    "train": ("on_train_begin", "on_train_batch_begin", "on_train_batch_end", "on_train_end"),
    "eval": ("on_test_begin", "on_test_batch_begin", "on_test_batch_end", "on_test_end"),
    "predict": ("on_predict_begin", "on_predict_batch_begin", "on_predict_batch_end", "on_predict_end"),
}


# ---------------------------------------------------------------------------------------
# Hooks
# ---------------------------------------------------------------------------------------
@dataclass
class HookSite:
    """Where a hook is converted: its unit's plan, the phase it ran in, and how names in
    its code resolve (module-level bindings, or a model_fn's assignments)."""

    plan: "ConversionPlan"
    phase: str
    resolve: Callable[[cst.BaseExpression], cst.BaseExpression]


@dataclass
class EarlyStop:
    """An early-stopping hook: stop when ``metric`` has not improved for ``max_steps`` steps."""

    metric: str
    mode: str  # "min" | "max"
    max_steps: cst.BaseExpression
    min_steps: cst.BaseExpression | None
    node: cst.CSTNode


@dataclass
class HookConversion:
    """What one hook becomes. A hook rule returns one of these from ``convert``.

    ``callback``: a Keras callback for the call; ``num_steps`` / ``last_step``: a
    ``StopAtStepHook``'s limits, folded into the call's step count; ``early_stop``: an
    early-stopping hook (needs evaluations during ``fit``); ``note``: what the Keras program
    does instead (reported as converted); ``dropped``: why the hook is not carried over
    (reported for a human); ``estimator_arg``: the Estimator passed to the hook, a use of
    it that the conversion accounts for.
    """

    callback: cst.BaseExpression | None = None
    num_steps: cst.BaseExpression | None = None
    last_step: cst.BaseExpression | None = None
    early_stop: EarlyStop | None = None
    note: str | None = None
    dropped: str | None = None
    estimator_arg: cst.CSTNode | None = None


@dataclass
class Hooks:
    """The hooks of one call, converted."""

    callbacks: list[cst.BaseExpression] = field(default_factory=list)
    num_steps: list[cst.BaseExpression] = field(default_factory=list)
    last_step: list[cst.BaseExpression] = field(default_factory=list)
    early_stops: list[EarlyStop] = field(default_factory=list)

    def extend(self, other: "Hooks") -> None:
        self.callbacks += other.callbacks
        self.num_steps += other.num_steps
        self.last_step += other.last_step
        self.early_stops += other.early_stops


def module_resolver(ctx: "RewriteContext", plan: "ConversionPlan") -> Callable[[cst.BaseExpression], cst.BaseExpression]:
    """Follows a module-level name to the value it is bound to once; the binding is removed
    (its value moves into the converted call) when this unit's calls are its only readers."""
    from estimator2keras._units import Binding, accesses_of, reads_reached, resolve

    def follow(node: cst.BaseExpression) -> cst.BaseExpression:
        seen = 0
        while isinstance(node, cst.Name) and seen < 20:
            bound = resolve(ctx, node)
            # Several bindings: `if model_type == "LINEAR": ... exporter = FinalExporter(d, fn)
            # else: ... exporter = FinalExporter(d, fn)`, one value whichever branch ran.
            bindings = [bound] if isinstance(bound, Binding) else _same_in_every_branch(ctx, node)
            if not bindings:
                return node
            for binding in bindings:
                reads = accesses_of(ctx, binding.target)
                if reads is None:  # the branches' bindings reach the same reads
                    reads = [] if len(bindings) == 1 else [r for r, _ in reads_reached(ctx, binding.target) or []]
                if not all(plan.owns(read) for read in reads):
                    raise Unsupported(f"`{binding.name}` is used outside this Estimator's calls too", binding.target,
                                      UNSUPPORTED_USE)
                plan.take_binding(binding)  # what it reads moves with it into the unit's code
            node = bindings[0].value
            seen += 1
        return node

    return follow


def _same_in_every_branch(ctx: "RewriteContext", name: cst.Name) -> list | None:
    """The bindings of ``name`` that reach this read when there are several (an if/elif
    binding it in each branch) and all bind the same expression, written alike and reading
    the same names: each as a Binding; None otherwise."""
    from estimator2keras._units import reaching_bindings

    bindings = reaching_bindings(ctx, name)
    if bindings is None or len(bindings) < 2:
        return None
    first = bindings[0].value
    if not all(b.value.deep_equals(first) for b in bindings[1:]):
        return None
    # The names the expression reads must be the same bindings at each of them.
    names = _names_read(first)
    for binding in bindings[1:]:
        for a, b in zip(names, _names_read(binding.value)):
            if ctx.reaching(a) != ctx.reaching(b):
                return None
    return sorted(bindings, key=lambda b: ctx.position(b.statement))


def _names_read(node: cst.CSTNode) -> list[cst.Name]:
    """The Name nodes ``node`` reads, in order: not an attribute's name nor a keyword, but
    those inside its lambdas too (unlike ``_units._names_in``): a lambda reads the branch's names."""
    out, stack = [], [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Attribute):
            stack.append(current.value)
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        elif isinstance(current, cst.Name):
            out.append(current)
        else:
            stack.extend(reversed(list(current.children)))
    return out


def convert_hooks(site: HookSite, hooks: cst.BaseExpression, ctx: "RewriteContext") -> Hooks:
    """Every hook of a ``hooks=[...]`` argument as what Keras does instead."""
    out = Hooks()
    value = site.resolve(hooks)
    if isinstance(value, cst.Name) and value.value == "None":
        return out
    if isinstance(value, cst.Call):
        from estimator2keras._hook_helpers import helper_hooks

        return helper_hooks(site, value, ctx, hooks)  # hooks a function of the program returns
    if not isinstance(value, (cst.List, cst.Tuple)):
        raise Unsupported("these hooks are not a list e2k can follow", hooks, UNSUPPORTED_USE)
    for element in value.elements:
        if isinstance(element, cst.StarredElement):
            raise Unsupported("hooks passed with * cannot be followed", element, UNSUPPORTED_USE)
        out.extend(convert_hook(site, element.value, ctx))
    return out


def convert_hook(site: HookSite, node: cst.BaseExpression, ctx: "RewriteContext") -> Hooks:
    plan = site.plan
    call = site.resolve(node)
    if not isinstance(call, cst.Call):
        raise Unsupported("this hook is not created by a call e2k can follow", node, UNSUPPORTED_USE)
    out = Hooks()
    klass = _module_class(ctx, call.func)
    if klass is not None:
        rule = _hook_class_rule(ctx, klass)
        if rule is None:
            raise Unsupported(f"`{klass.name.value}` is not a SessionRunHook e2k converts", call, UNSUPPORTED_USE)
        plan.hook_classes.setdefault(klass, (rule, set()))[1].add(site.phase)
        out.callbacks.append(call.deep_clone() if call is node else call)
        return out
    path = ctx.call_api_path(call)
    rule = ctx.rules.expression_rule(HOOK_ROLE, path) if path else None
    if rule is None:
        role = ctx.rules.expression_role(path) if path else None
        why = "its rule is disabled" if role == HOOK_ROLE else "e2k has no rule for it"
        raise Unsupported(f"the hook `{_emit.code(call.func)}` is not converted: {why}", call, UNSUPPORTED_USE)
    try:
        result: HookConversion = rule().convert(call, ctx, plan.tf, site)
    except Unsupported as exc:
        exc.code = exc.code or rule.code
        exc.node = exc.node or call
        raise
    if result.estimator_arg is not None:
        plan.claimed_hook_args.add(result.estimator_arg)
    if result.callback is not None:
        out.callbacks.append(result.callback)
    if result.num_steps is not None:
        out.num_steps.append(result.num_steps)
    if result.last_step is not None:
        out.last_step.append(result.last_step)
    if result.early_stop is not None:
        out.early_stops.append(result.early_stop)
    if result.dropped is not None:
        plan.leftover(node, rule.code, result.dropped)  # where the hook was passed: its binding may go
    else:
        plan.fixed(call, rule.code, result.note or f"`{_emit.code(call.func)}` -> a Keras callback")
    return out


def call_hooks(plan, ctx, phase: str, hooks_arg, resolve) -> Hooks:
    """The hooks of one call: those passed to it, and those its model_fn's EstimatorSpec returns."""
    hooks = Hooks()
    for expr, spec_resolve in plan.spec_hooks[phase]:
        converted = convert_hooks(HookSite(plan, phase, _with_params(plan, ctx, spec_resolve)), expr, ctx)
        # The callbacks are made where the Keras program trains: what they read of the model_fn
        # (`SummarySaverHook(output_dir=params["model_dir"])`) is written as the call site has it.
        converted.callbacks = [_at_call_site(plan, ctx, callback, expr) for callback in converted.callbacks]
        hooks.extend(converted)
    if hooks_arg is not None:
        hooks.extend(convert_hooks(HookSite(plan, phase, resolve), hooks_arg.value, ctx))
    return hooks


def _with_params(plan, ctx: "RewriteContext", follow: Callable) -> Callable:
    """The model_fn's follower, reading ``params["key"]`` as the Estimator's params give it."""
    from estimator2keras._units import params_entry

    def resolve(node: cst.BaseExpression) -> cst.BaseExpression:
        node = follow(node)
        entry = params_entry(ctx, plan.unit, node)
        return entry if entry is not None else node

    return resolve


def _at_call_site(plan, ctx: "RewriteContext", callback: cst.BaseExpression, origin: cst.CSTNode) -> cst.BaseExpression:
    """``callback``, made from a hook the model_fn returned, as the code that trains can write
    it: ``params["key"]`` becomes the entry of the params the Estimator was given (a dict
    literal, or a name bound once to one); any other name of the model_fn is refused (it
    raised a NameError where fit is called)."""
    from libcst.metadata import FunctionScope

    from estimator2keras._units import params_entry

    site_scope = ctx.scope(plan.unit.call)
    replacements: dict = {}
    for node in _emit.walk(callback):
        if not isinstance(node, cst.Name):
            continue
        scope = ctx.scope(node)
        if not isinstance(scope, FunctionScope) or scope is site_scope or not scope.assignments[node.value]:
            continue  # a module's name (or a builtin): the same where fit is called
        parent = ctx.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node or isinstance(parent, cst.Arg) and parent.keyword is node:
            continue
        entry = params_entry(ctx, plan.unit, parent) if isinstance(parent, cst.Subscript) and parent.value is node else None
        if entry is not None:
            if all(
                    not isinstance(ctx.scope(n), FunctionScope) or ctx.scope(n) is site_scope
                    for n in _emit.walk(entry) if isinstance(n, cst.Name)):
                replacements[parent] = entry.deep_clone()
                continue
        read = parent if isinstance(parent, cst.Subscript) and parent.value is node else node
        raise Unsupported(f"a hook the model_fn returns reads `{_emit.code(read)}` of the model_fn, which the code "
                          "that trains has not: compute it where the Estimator is built, or pass the hook to train()",
                          origin, UNSUPPORTED_USE)
    return _emit.replace_in(callback, replacements) if replacements else callback


def _module_class(ctx: "RewriteContext", func: cst.BaseExpression) -> cst.ClassDef | None:
    """The class of the program ``func`` names: of this module, or, in a pass over a program's
    modules, of another one (``hooks_lib.ExamplesPerSecondHook``, or the name imported)."""
    if ctx._modules is not None and isinstance(func, (cst.Name, cst.Attribute)):
        from estimator2keras._units import _foreign, _single_assignment

        assignment = _foreign(ctx, func) if isinstance(func, cst.Attribute) or isinstance(
            getattr(_single_assignment(ctx, func), "node", None), cst.ImportFrom) else None
        if isinstance(getattr(assignment, "node", None), cst.ClassDef):
            return assignment.node
    if not isinstance(func, cst.Name):
        return None
    scope = ctx.scope(func)
    if scope is None:
        return None
    for access in scope.accesses[func.value]:
        if access.node is func:
            referents = list(access.referents)
            if len(referents) == 1 and isinstance(getattr(referents[0], "node", None), cst.ClassDef):
                return referents[0].node
    return None


def _hook_class_rule(ctx: "RewriteContext", klass: cst.ClassDef):
    for base in klass.bases:
        path = ctx.api_path(base.value)
        if path:
            rule = ctx.rules.expression_rule(HOOK_CLASS_ROLE, path)
            if rule is not None:
                return rule
    return None


def convert_hook_classes(plan: "ConversionPlan", ctx: "RewriteContext") -> None:
    """Rewrite each SessionRunHook subclass this unit uses, once, for all phases it ran in."""
    for klass, (rule, phases) in plan.hook_classes.items():
        from estimator2keras._units import accesses_of

        reads = accesses_of(ctx, klass.name) or []
        if not all(plan.owns(read) for read in reads):
            raise Unsupported(f"the hook class `{klass.name.value}` is used outside this Estimator's calls", klass, UNSUPPORTED_USE)
        try:
            new = rule().convert_class(klass, ctx, plan.tf, plan, sorted(phases))
        except Unsupported as exc:
            exc.code = exc.code or rule.code
            exc.node = exc.node or klass
            raise
        plan.replace_statement(klass, [new])
        plan.fixed(klass, rule.code, f"SessionRunHook `{klass.name.value}` -> a Keras Callback")


# ---------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------
MODEL_DIR_CHECKPOINTS = '''
class {name}({tf}.keras.callbacks.Callback):
    """An Estimator's model_dir for a Keras model and its optimizer: the latest checkpoint is
    restored when the model first trains, evaluates or predicts, and training saves one every
    `save_steps` steps or `save_secs` seconds and when it ends, numbered by global step."""

    def __init__(self, model, directory, max_to_keep=5, keep_checkpoint_every_n_hours=None,
                 save_steps=None, save_secs=None, restore=True):
        super().__init__()
        # No model_dir (None, or a flag left empty): the Estimator used a temporary directory.
        directory = directory or tempfile.mkdtemp()
        self.optimizer = model.optimizer
        self.keep = (max_to_keep, keep_checkpoint_every_n_hours)
        checkpoint = {tf}.train.Checkpoint(model=model, optimizer=model.optimizer)
        # The directory as a CheckpointManager takes it (e2k parity gives each run its own).
        self.directory = self.aside = {tf}.train.CheckpointManager(checkpoint, directory, *self.keep).directory
        if not model.distribute_strategy.extended.should_checkpoint:
            # Another worker than the chief of a multi-worker strategy: it saves too (the
            # variables are read collectively), but aside, as under an Estimator.
            self.aside = tempfile.mkdtemp()
        self.save_steps = save_steps
        self.save_secs = save_secs
        self.restored = not restore
        self.writer = None

    def latest(self):
        """The latest checkpoint in the directory as it is now: like the Estimator, which read
        its model_dir when it ran, not when it was made (a program may empty it in between)."""
        latest = {tf}.train.latest_checkpoint(self.directory)
        if latest and "_CHECKPOINTABLE_OBJECT_GRAPH" not in dict({tf}.train.list_variables(latest)):
            # A TF1 checkpoint by variable names: the Keras model's variables have none of them.
            raise ValueError(
                f"{{latest}} is an Estimator's checkpoint, which this "
                "Keras model cannot restore: convert the model_dir with "
                "`e2k checkpoint` (its docs: checkpoints.md)")
        return latest

    def global_step(self):
        """The step training goes on from: the latest checkpoint's until it is restored."""
        latest = None if self.restored else self.latest()
        if latest is None:
            return int(self.optimizer.iterations.numpy())
        return int(latest.rsplit("-", 1)[-1])

    def restore(self, kind):
        # Not before: Keras 3 restores into a model only once it is built, which it is when
        # a callback starts under a distribution strategy, and else in the first step.
        if self.writer is not None:
            return
        latest = None if self.restored else self.latest()
        if not self.model.built and hasattr({tf}.keras, "version"):
            step = getattr(self.model, f"{{kind}}_function")

            def first_step(data):
                setattr(self.model, f"{{kind}}_function", step)
                if isinstance(data, (list, tuple)):  # Keras 3's predict passes its batches
                    self.build({tf}.nest.map_structure({tf}.type_spec_from_value, data[0]))
                else:
                    self.build(data.element_spec)
                self.restore(kind)
                return step(data)

            setattr(self.model, f"{{kind}}_function", first_step)
            return
        # Keras 3 keeps a layer's list of layers where tf.train.Checkpoint does not look
        # (keras-team/keras#19425): its weights are listed too.
        weights = {{"weights": self.model.weights}} if hasattr({tf}.keras, "version") else {{}}
        checkpoint = {tf}.train.Checkpoint(model=self.model, optimizer=self.optimizer, **weights)
        self.writer = {tf}.train.CheckpointManager(checkpoint, self.aside, *self.keep)
        if latest is not None:
            try:
                checkpoint.restore(latest).assert_existing_objects_matched()
            except AssertionError as error:
                raise ValueError(
                    f"{{latest}} does not hold every weight of this model, "
                    "which would start from its initial values: another "
                    "program wrote it, or another Keras (Keras 2 and 3 "
                    f"name the weights otherwise). {{error}}") from None
        self.restored = True

    def build(self, spec):
        """Builds the model on a batch of zeros shaped like the data's (its first step would)."""
        def zeros(spec):
            shape = [1 if size is None else size for size in spec.shape]
            if isinstance(spec, {tf}.SparseTensorSpec):
                return {tf}.sparse.from_dense({tf}.zeros(shape, spec.dtype))
            if isinstance(spec, {tf}.RaggedTensorSpec):
                return {tf}.RaggedTensor.from_tensor({tf}.zeros(shape, spec.dtype), ragged_rank=spec.ragged_rank)
            return {tf}.zeros(shape, spec.dtype)
        features = {tf}.keras.utils.unpack_x_y_sample_weight(spec)[0]
        self.model({tf}.nest.map_structure(zeros, features), training=False)

    def on_train_begin(self, logs=None):
        self.step = self.saved_step = self.global_step()
        self.restore("train")
        self.saved_time = time.time()

    def on_test_begin(self, logs=None):
        self.restore("test")

    def on_predict_begin(self, logs=None):
        self.restore("predict")

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        steps_due = self.save_steps and self.step - self.saved_step >= self.save_steps
        secs_due = self.save_secs and time.time() - self.saved_time >= self.save_secs
        if steps_due or secs_due:
            self.save()

    def on_train_end(self, logs=None):
        if self.step != self.saved_step and (self.save_steps or self.save_secs):
            self.save()

    def save(self):
        self.writer.save(checkpoint_number=self.step)
        self.saved_step, self.saved_time = self.step, time.time()
'''


def model_dir_checkpoints(
    plan: "ConversionPlan", directory: cst.BaseExpression, *, max_to_keep: cst.BaseExpression | None = None,
    keep_hours: cst.BaseExpression | None = None, steps: cst.BaseExpression | None = None,
    secs: cst.BaseExpression | None = None, restore: bool,
) -> cst.BaseExpression:
    """A ModelDirCheckpoints callback (its class added to the file once) for ``directory``."""
    plan.imports += [("tempfile", None, None), ("time", None, None)]
    # The class reads TensorFlow by the unit's alias: a module of the program that gets the
    # class without importing TensorFlow (task.py, where model.py built the Estimator) imports it.
    plan.imports.append(("tensorflow", None, None if plan.tf == "tensorflow" else plan.tf))
    klass = plan.add_helper(
        "ModelDirCheckpoints", lambda name: _emit.statements(MODEL_DIR_CHECKPOINTS, name=name, tf=plan.tf))
    args = [cst.Arg(cst.Name(plan.model_var)), cst.Arg(directory)]
    for keyword, value in (("max_to_keep", max_to_keep), ("keep_checkpoint_every_n_hours", keep_hours),
                           ("save_steps", steps), ("save_secs", secs)):
        if value is not None:
            args.append(_emit.keyword_arg(keyword, value))
    if not restore:
        args.append(_emit.keyword_arg("restore", cst.Name("False")))
    return cst.Call(cst.Name(klass), args=_emit.call_args(args))


def start_step(plan: "ConversionPlan") -> cst.BaseExpression:
    """The global step the next ``fit`` starts from, read before it runs."""
    if plan.checkpoints is not None:
        return _emit.expr("{c}.global_step()", c=plan.checkpoints)
    return _emit.expr("int({m}.optimizer.iterations.numpy())", m=plan.model_var)


# ---------------------------------------------------------------------------------------
# The calls
# ---------------------------------------------------------------------------------------
def min_of(values: list[cst.BaseExpression], node: cst.CSTNode, what: str) -> cst.BaseExpression | None:
    """The smallest of step limits (literal integers), or the only one."""
    values = [v for v in values if not (isinstance(v, cst.Name) and v.value == "None")]
    # The same limit written twice (`StopAtStepHook(last_step=MAX_STEPS)` and
    # `max_steps=MAX_STEPS`, or `args.max_steps` both times): one limit.
    unique: dict[str, cst.BaseExpression] = {}
    for value in values:
        plain = not any(isinstance(n, (cst.Call, cst.Subscript, cst.BinaryOperation)) for n in _emit.walk(value))
        unique.setdefault(_emit.code(value) if plain else str(id(value)), value)
    values = list(unique.values())
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    if all(isinstance(v, cst.Integer) for v in values):
        return min(values, key=lambda v: v.evaluated_value)
    raise Unsupported(f"several {what} limits that are not literal numbers", node, UNSUPPORTED_USE)


def needs_step_guard(plan: "ConversionPlan", ctx: "RewriteContext", call: cst.CSTNode) -> bool:
    """May the global step be above 0 when this training call starts?"""
    if plan.may_restore:
        return True
    trainings = plan.uses("method", "train") + plan.uses("train_and_evaluate")
    if len(trainings) > 1:
        return True
    current = ctx.parent(call)
    while current is not None:
        if isinstance(current, (cst.For, cst.While, cst.CompFor)):
            return True
        if isinstance(current, cst.FunctionDef) and plan.unit_is_outside(current):
            return True  # a function may train the module's model more than once
        current = ctx.parent(current)
    return False


def callbacks_arg(plan: "ConversionPlan", hooks: Hooks | None, training: bool) -> cst.Arg | None:
    """``callbacks=...`` for a call: the unit's (training only) and the hooks' callbacks."""
    own = list(hooks.callbacks) if hooks else []
    if training and plan.fit_callbacks:
        # A hook's TensorBoard writing what the RunConfig's summaries already write (a
        # SummarySaverHook on the model_dir): one TensorBoard callback per fit, which is all
        # Keras runs (two crash when their summary writers close).
        shared_code = {_emit.code(c) for c in plan.fit_callbacks}
        own = [c for c in own if _emit.code(c) not in shared_code]
        boards = [c for c in [*plan.fit_callbacks, *own] if _tensorboard.is_callback(c)]
        if len(boards) > 1:
            raise Unsupported("two TensorBoard callbacks would write during one fit (the RunConfig's summaries and a "
                              "summary hook's, with other settings), which Keras cannot run: keep one",
                              next((c for c in own if c in boards), boards[-1]), UNSUPPORTED_USE)
    if not training and plan.checkpoints is not None:
        own.insert(0, cst.Name(plan.checkpoints))  # restores model_dir before an evaluation or prediction
    shared = plan.callbacks_name() if training else None
    if training and plan.callbacks_inline():
        listed = {_emit.code(c) for c in own}
        own = [*(c.deep_clone() for c in plan.fit_callbacks if _emit.code(c) not in listed), *own]
    if len(own) == 1 and isinstance(own[0], cst.StarredElement):  # the list a function returns (E2K406)
        if not shared:
            return _emit.keyword_arg("callbacks", own[0].value)
        return _emit.keyword_arg("callbacks", _emit.expr("{s} + {l}", s=shared, l=own[0].value))
    if shared and own:
        value = _emit.expr("{s} + {l}", s=shared, l=_list(own))
    elif shared:
        value = cst.Name(shared)
    elif own:
        value = _list(own)
    else:
        return None
    return _emit.keyword_arg("callbacks", value)


def _list(values: list[cst.BaseExpression]) -> cst.List:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    elements = [v.with_changes(comma=comma) if isinstance(v, cst.StarredElement) else cst.Element(v, comma=comma)
                for v in values]
    if elements:
        elements[-1] = elements[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return cst.List(elements)


def method_call(var: str, method: str, args: list[cst.Arg]) -> cst.Call:
    return cst.Call(cst.Attribute(cst.Name(var), cst.Name(method)), args=_emit.call_args(args))


def guarded_fit(plan: "ConversionPlan", max_steps: cst.BaseExpression, fit_args: list[cst.Arg],
                more: list[cst.Arg]) -> list[cst.BaseStatement]:
    """``max_steps``: train until the global step reaches it, or not at all."""
    left = plan.steps_left_name()
    fit = method_call(plan.model_var, "fit", [*fit_args, _emit.keyword_arg("steps_per_epoch", cst.Name(left)), *more])
    first = _emit.statement("{left} = {max} - {start}", left=left, max=max_steps, start=start_step(plan))
    first = _emit.with_comment(first, "max_steps counts from global step 0, as in the Estimator: train only the steps left.")
    guard = _emit.statement("if {left} > 0:\n    pass", left=left)
    guard = guard.with_changes(body=cst.IndentedBlock(body=[_emit.statement("{c}", c=fit)]))
    return [first, guard]


def per_example(predictions: cst.BaseExpression, tf: str) -> cst.BaseExpression:
    """Keras ``predict`` concatenates the batches; the Estimator yielded one example at a time."""
    return _emit.expr("{tf}.data.Dataset.from_tensor_slices({p}).as_numpy_iterator()", tf=tf, p=predictions)


__all__ = [
    "EarlyStop", "HookConversion", "HookSite", "Hooks", "PHASE_METHODS", "convert_hooks", "model_dir_checkpoints",
    "start_step",
]
