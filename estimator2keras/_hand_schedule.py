"""A learning rate the model_fn computes from the global step by hand, as a Keras schedule.

``lr = learn_rate(params, tf.train.get_or_create_global_step())`` (or
``0.0001 + tf.train.exponential_decay(lr0, global_step, n, r)``) was a tensor of the training
graph, computed at every step. A Keras builder runs once: the same code there would compute
one number. So it becomes a ``LearningRateSchedule`` whose ``__call__(step)`` runs that code
with the optimizer's step (Keras's ``iterations``, the updates applied so far, as the
Estimator's global step counted them)::

    class LearnRate(tf.keras.optimizers.schedules.LearningRateSchedule):
        def __init__(self, params):
            super().__init__()
            self.params = params

        def __call__(self, step):
            return learn_rate(self.params, step)

and a TF1 decay the code calls (in the expression, or in a function of the program it calls
with the step) is the Keras schedule of the same formula called on that step
(``tf.keras.optimizers.schedules.ExponentialDecay(lr0, n, r)(step)``): TF1's decay returns a
function, not a number, when TensorFlow 2 runs it eagerly.
"""
from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._hook_values import GLOBAL_STEP_CALLS as GLOBAL_STEP
from estimator2keras._nodes import walk as _walk

DOC = "The model_fn's learning rate, computed from the optimizer's step."
#: The rule that documents it (tf1-schedule-to-keras).
CODE = "E2K102"


class Helper:
    """Where the value is code of a function of the program that makes the train_op: its
    parameters (what the model_fn's call gives them) and its assignments (their values)."""

    def __init__(self, bound: dict, env: dict):
        self.bound, self.env = bound, env


def reads_global_step(reader, value: cst.BaseExpression, at: int, helper: Helper | None = None,
                      depth: int = 0) -> bool:
    """Does ``value`` read the global step, itself or through the names it reads (the
    model_fn's, or ``helper``'s)? Not a TF1 decay, nor a name bound to one: those are Keras
    schedules already (E2K102)."""
    if depth == 0 and helper is None and _is_decay(reader, value, at):
        return False
    if depth > 20:
        return False
    if any((reader.ctx.call_api_path(c) or "") in GLOBAL_STEP for c in iter_calls(value)):
        return True
    for name in reader.names_read(value):
        if helper is not None:
            if name.value in helper.env:
                if reads_global_step(reader, helper.env[name.value], at, helper, depth + 1):
                    return True
            elif name.value in helper.bound and reads_global_step(reader, helper.bound[name.value], at, None,
                                                                  depth + 1):
                return True
            continue
        d = reader.latest_def(name.value, at)
        if d is not None and (isinstance(d.value, cst.Call) and (reader.ctx.call_api_path(d.value) or "") in GLOBAL_STEP
                              or reads_global_step(reader, d.value, d.index, None, depth + 1)):
            return True
    return False


def _is_decay(reader, value: cst.BaseExpression, at: int) -> bool:
    if isinstance(value, cst.Name):
        d = reader.latest_def(value.value, at)
        value = d.value if d is not None else value
    return isinstance(value, cst.Call) and reader.role(value) == "schedule"


def schedule(reader, value: cst.BaseExpression, at: int, helper: Helper | None = None) -> cst.Call:
    """``value`` (an expression of the model_fn, or of ``helper``, reading the global step) as
    an instance of a ``LearningRateSchedule`` class written into ``reader.definitions``. The
    values it reads are computed in the schedule too (``lr = base * warmup``, ``warmup`` from
    the step); the model_fn's arguments it reads (``params``) are the schedule's."""
    arguments: list[str] = []
    body = _rewritten(reader, value, at, helper, arguments)
    class_name = _class_name(reader, value, at)
    reader.definitions.append(_schedule_class(reader, class_name, arguments, body))
    if reader.plan is not None:
        reader.plan.fixed(value, CODE, f"a learning rate computed from the global step by the program -> "
                                       f"`{class_name}`, a Keras LearningRateSchedule")
    return cst.Call(cst.Name(class_name), args=_emit.call_args([cst.Arg(cst.Name(a)) for a in arguments]))


def _rewritten(reader, value: cst.BaseExpression, at: int, helper: Helper | None, arguments: list[str],
               depth: int = 0) -> cst.BaseExpression:
    """``value`` as the schedule's ``__call__`` computes it: the global step is ``step``, a TF1
    decay the Keras schedule called on it, the model_fn's arguments ``self.<name>``, the
    values it reads their own values (in parentheses where an operator needs them), TF1 names
    in their TF2 spelling."""
    from estimator2keras._symbols import tf2_respellings

    ctx = reader.ctx
    if depth > 20:
        reader.refuse(value, "the learning rate is computed from the global step in too many steps")
    replacements: dict[cst.CSTNode, cst.CSTNode] = {}
    decays = []
    for call in iter_calls(value):
        path = ctx.call_api_path(call) or ""
        if path in GLOBAL_STEP:
            replacements[call] = cst.Name("step")
        elif reader.role(call) == "schedule":  # its step read goes with it
            replacements[call] = _decay_at_step(reader, call, at, helper)
            decays.append(call)

    def computed(inner_value, inner_at, inner_helper):
        inner = _rewritten(reader, inner_value, inner_at, inner_helper, arguments, depth + 1)
        if isinstance(inner, (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp,
                              cst.UnaryOperation)):
            inner = inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return inner

    for name in reader.names_read(value):
        if ctx.within(name, decays):
            continue
        if helper is not None and name.value in helper.env:
            replacements[name] = computed(helper.env[name.value], at, helper)
            continue
        given = helper.bound.get(name.value) if helper is not None else None
        if given is not None and not (isinstance(given, cst.Name) and given.value in reader.arguments):
            replacements[name] = computed(given, at, None)  # what the model_fn gives the function
            continue
        d = reader.latest_def(name.value, at) if helper is None else None
        if d is not None:
            if isinstance(d.value, cst.Call) and (ctx.call_api_path(d.value) or "") in GLOBAL_STEP:
                reader.consumed.add(d.small)
                replacements[name] = cst.Name("step")
                continue
            if not isinstance(d.small, cst.Assign) or len(d.small.targets) != 1:
                reader.refuse(name, f"`{name.value}` is not assigned once where the learning rate reads it")
            replacements[name] = computed(d.value, d.index, None)
            continue
        if given is not None:
            in_builder = given.value
        elif helper is None and name.value in reader.arguments:
            in_builder = name.value
        elif reader._is_module_name(name):
            _decays_in_functions(reader, name)
            continue
        else:
            reader.refuse(name, f"the learning rate computed from the global step reads `{name.value}`, "
                                "which e2k does not hand a schedule")
        if in_builder not in arguments:
            arguments.append(in_builder)
        replacements[name] = cst.parse_expression(f"self.{in_builder}")
    replaced = list(replacements)
    for node, new in tf2_respellings(ctx, value, reader.tf):
        # (a respelling written over a whole call would lose what is replaced inside it)
        if not ctx.within(node, replaced) and not any(ctx.within(r, (node,)) for r in replaced):
            replacements[node] = new
    return _emit.replace_in(value, replacements)


def _decay_at_step(reader, call: cst.Call, at: int, helper: Helper | None) -> cst.Call:
    """A TF1 decay in the expression: the Keras schedule called on the step."""
    conversion = reader.translate("schedule", call)
    step = conversion.global_step
    if step is None or not reads_global_step(reader, step, at, helper):
        reader.refuse(call, "a learning-rate decay computed from the global step reads another step")
    return cst.Call(conversion.keras_schedule, args=[cst.Arg(cst.Name("step"))])


def _decays_in_functions(reader, name: cst.Name, seen: set | None = None) -> None:
    """A function of the program the schedule calls: the TF1 decays in it computed from one of
    its parameters (the step it is given) are the Keras schedules called on it."""
    from estimator2keras._units import resolve

    seen = set() if seen is None else seen
    parent = reader.ctx.parent(name)
    if not (isinstance(parent, cst.Call) and parent.func is name):
        return
    fn = resolve(reader.ctx, name)
    if not isinstance(fn, cst.FunctionDef) or fn.name.value in seen or not isinstance(reader.ctx.parent(fn), cst.Module):
        return
    seen.add(fn.name.value)
    params = {p.name.value for p in fn.params.params}
    for call in iter_calls(fn.body):
        if reader.role(call) == "schedule":
            conversion = reader.translate("schedule", call)
            step = conversion.global_step
            if not (isinstance(step, cst.Name) and step.value in params):
                reader.refuse(call, f"`{fn.name.value}` decays the learning rate with another step than the one "
                                    "it is given")
            reader.plan.replace(call, cst.Call(conversion.keras_schedule, args=[cst.Arg(step.deep_clone())]))
        elif isinstance(call.func, cst.Name):
            _decays_in_functions(reader, call.func, seen)


def _class_name(reader, value: cst.BaseExpression, at: int) -> str:
    from estimator2keras._modelfn import class_name_for

    d = reader.latest_def(value.value, at) if isinstance(value, cst.Name) else None
    value = d.value if d is not None else value  # `lr = learn_rate(...)`: LearnRate
    taken = {n.value for n in _walk(reader.ctx.module) if isinstance(n, cst.Name)}
    taken |= {s.name.value for s in reader.definitions if isinstance(s, cst.ClassDef)}
    preferred = "LearningRate"
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
        preferred = class_name_for(value.func.value).removesuffix("Model") or preferred
    return _emit.unique_name(preferred, taken)


def _schedule_class(reader, name: str, arguments: list[str], body: cst.BaseExpression) -> cst.ClassDef:
    indent = reader.ctx.module.default_indent
    init = "".join(f"{indent}self.{a} = {a}\n" for a in arguments)
    config = ", ".join(f'"{a}": self.{a}' for a in arguments)
    code = (f"class {name}({reader.tf}.keras.optimizers.schedules.LearningRateSchedule):\n"
            f'{indent}"""{DOC}"""\n\n'
            f"{indent}def __init__(self{''.join(', ' + a for a in arguments)}):\n"
            f"{indent}{indent}super().__init__()\n"
            + "".join(f"{indent}{line}" for line in init.splitlines(keepends=True))
            + f"\n{indent}def __call__(self, step):\n"
            f"{indent}{indent}return {_emit.code(body)}\n\n"
            f"{indent}def get_config(self):\n"
            f"{indent}{indent}return {{{config}}}\n")
    return cst.parse_statement(code, config=reader.ctx.module.config_for_parsing)


def translated_optimizer(reader, optimizer: cst.Call, at: int, helper: Helper | None = None) -> cst.Call:
    """The Keras optimizer of ``optimizer`` (``reader.translate``), given a schedule for the
    learning rate it computed from the global step
    (``tf.train.AdamOptimizer(learn_rate(params, tf.train.get_global_step()))``)."""
    schedules = {}
    for index, arg in enumerate(optimizer.args):
        if arg.star:
            reader.refuse(arg, "the optimizer is given arguments with * or **")
        if not reads_global_step(reader, arg.value, at, helper):
            continue
        first = index == 0 and arg.keyword is None
        if not (first or arg.keyword is not None and arg.keyword.value == "learning_rate"):
            reader.refuse(arg, "an optimizer setting other than the learning rate is computed from the global step")
        schedules[arg.value] = schedule(reader, arg.value, at, helper)
    keras = _sparse_safe(reader, reader.translate("optimizer", optimizer))
    if not schedules:
        return keras
    found = {node for node in _walk(keras) if node in schedules}
    if found != set(schedules):
        reader.refuse(optimizer, "e2k cannot give this optimizer the schedule of its learning rate")
    return _emit.replace_in(keras, schedules)


def _sparse_safe(reader, keras: cst.BaseExpression) -> cst.BaseExpression:
    """Keras Adagrad, where the model_fn gives a variable a sparse gradient (an embedding
    lookup): ``TF1Adagrad``, which sums the rows a batch looked up twice before squaring them,
    as TF1 did (Keras 3 squares each apart). (``TF1Adam`` does so itself.)"""
    if not (isinstance(keras, cst.Call) and _emit.code(keras.func).endswith("keras.optimizers.Adagrad")
            and reader.plan is not None and reader._sparse_source() is not None):
        return keras
    from estimator2keras.rewrites.tf1_optimizer_to_keras import TF1_ADAGRAD

    tf = reader.tf
    name = reader.plan.add_helper("TF1Adagrad", lambda given: _emit.statements(TF1_ADAGRAD, name=given, tf=tf))
    return keras.with_changes(func=cst.Name(name))
