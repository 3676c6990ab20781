from __future__ import annotations

import libcst as cst
from libcst.metadata import GlobalScope

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._symbols import tf2_respellings
from estimator2keras._units import Binding, resolve, resolve_call

STRATEGIES = {
    "distribute.MirroredStrategy": "MirroredStrategy",
    "contrib.distribute.MirroredStrategy": "MirroredStrategy",
    "distribute.OneDeviceStrategy": "OneDeviceStrategy",
    "contrib.distribute.OneDeviceStrategy": "OneDeviceStrategy",
    "distribute.MultiWorkerMirroredStrategy": "MultiWorkerMirroredStrategy",
    "distribute.experimental.MultiWorkerMirroredStrategy": "MultiWorkerMirroredStrategy",
    "distribute.experimental.CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
    "contrib.distribute.CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
}
#: Strategies whose workers each run the program (TF_CONFIG names them).
MULTI_WORKER = frozenset({"MultiWorkerMirroredStrategy"})


class RunConfigDistributeToStrategyScope(UnitRule):
    """RunConfig(train_distribute=strategy) becomes a model built under `strategy.scope()`.

    ## What it does
    Takes the strategy given to `RunConfig(train_distribute=..., eval_distribute=...)`,
    keeps it as a variable (created with its TF2 name, `tf.distribute.MirroredStrategy`),
    and builds and compiles the Keras model inside `with strategy.scope():`. `fit`,
    `evaluate` and `predict` then run on all of the strategy's replicas.

    A strategy made by a function of the module (`train_distribute=distribution_strategy()`,
    a function that picks `OneDeviceStrategy` or `MirroredStrategy` by the number of GPUs)
    is called once, as `strategy = distribution_strategy()` (or under the name the program
    bound its call to, `distribution = get_distribution_strategy(flags.num_gpus)`), and each
    strategy its `return`s give gets its TF2 name there; a `return None` (no GPU: official
    models' `get_distribution_strategy`) returns `tf.distribute.get_strategy()`, the one
    device the Estimator trained on. `tf.contrib.distribute.MirroredStrategy(num_gpus=n)`
    becomes `tf.distribute.MirroredStrategy(devices=[f"/gpu:{i}" for i in range(n)])`, the
    devices contrib's `num_gpus` meant. A strategy or None by a condition (`strategy =
    MirroredStrategy() if args.num_gpus > 1 else None`, or `strategy = None` then `if ...:
    strategy = MirroredStrategy()`) keeps the choice, with `tf.distribute.get_strategy()`,
    TensorFlow's default strategy (one device, as RunConfig(train_distribute=None) trained),
    in place of None. A strategy returned by a function another module
    defines (`distribution_utils.get_distribution_strategy(...)`) is taken as that function
    makes it, or TensorFlow's default strategy where it returns None (`... or
    tf.distribute.get_strategy()`): the model is built under its scope, and that module
    converts on its own.

    ## Why
    Keras has no RunConfig: a model is distributed by creating its variables, optimizer and
    metrics under the strategy's scope (TensorFlow's migration guide, "Migrate single-worker
    multiple-GPU training").

    ## Fix safety
    Safe together with E2K602, which turns the Estimator's per-replica batches into the
    global batches Keras splits across replicas; without it, each replica would see a
    fraction of the examples it saw before. The fixture `seed_mirrored_linear` (2 replicas)
    ends with bit-identical weights.

    ## Limitations
    `MirroredStrategy`, `OneDeviceStrategy`, and `MultiWorkerMirroredStrategy` /
    `CollectiveAllReduceStrategy` (E2K606 makes its input read as the Estimator read it).
    Different strategies for training and evaluation, or `eval_distribute` alone, are
    reported (E2K902) and not converted; so is a function that takes arguments or returns
    anything else than one of these strategies.

    ## References
    - https://www.tensorflow.org/guide/migrate/mirrored_strategy
    """

    code = "E2K601"
    summary = "RunConfig(train_distribute=S) -> the model built and compiled under S.scope()"
    safety = Safety.SAFE
    order = 30

    cases = [
        Case(
            id="named-strategy",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [[2.0], [4.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf.distribute.MirroredStrategy()
config = tf.estimator.RunConfig(train_distribute=strategy)
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per replica.
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [[2.0], [4.0]])).batch(
        1 * strategy.num_replicas_in_sync
    )


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model()
model.fit(input_fn())
''',
        ),
    ]

    def required(self, unit, plan, ctx):
        if unit.config_value("train_distribute") is not None or unit.config_value("eval_distribute") is not None:
            return "the Estimator trains under a distribution strategy"
        return None

    def plan(self, unit, plan, ctx) -> None:
        train = unit.config_value("train_distribute")
        evaluation = unit.config_value("eval_distribute")
        if train is None and evaluation is None:
            return
        if train is None:
            raise Unsupported("only eval_distribute is set; e2k converts a training strategy", evaluation)
        if evaluation is not None and not evaluation.deep_equals(train):
            raise Unsupported("training and evaluation use different strategies", evaluation)
        call, binding = resolve_call(ctx, train, frozenset(STRATEGIES))
        optional = _optional_strategy(ctx, train) if call is None else None
        if optional is not None:
            # `strategy = MirroredStrategy() if args.num_gpus > 1 else None` (or `strategy = None`
            # then `if ...: strategy = MirroredStrategy()`): without one, the Estimator trained
            # on one device, which is TensorFlow's default strategy.
            call, binding, nones = optional
            for none in nones:
                plan.replace(none, _emit.expr("{tf}.distribute.get_strategy()", tf=plan.tf))
        if call is None:
            made = _made_by_function(ctx, train)
            bound = None
            if made is None and isinstance(train, cst.Name):
                # `distribution = get_distribution_strategy(flags.num_gpus)` first.
                bound = resolve(ctx, train)
                made = _made_by_function(ctx, bound.value) if isinstance(bound, Binding) else None
            if made is not None:
                self._from_function(unit, train, made, plan, ctx, bound)
                return
            imported = _imported_call(ctx, train)
            if imported is None:
                raise Unsupported("the strategy is not one e2k converts (MirroredStrategy, OneDeviceStrategy, "
                                  "or a function of the program returning one)", train)
            self._from_import(unit, train, imported, plan, ctx)
            return
        plan.claimed_config.update({"train_distribute", "eval_distribute"})
        plan.has_strategy = True
        plan.multi_worker = STRATEGIES[ctx.call_api_path(call)] in MULTI_WORKER
        tf2_class = _emit.expr("{tf}.distribute.{cls}", tf=plan.tf, cls=STRATEGIES[ctx.call_api_path(call)])
        if binding is not None:
            # Also when spelled alike: in TF1 code, `tf.distribute.MirroredStrategy` is the V1
            # class, which the module's other TF1 names would respell as compat.v1.
            plan.replace(call.func, tf2_class)
            for arg in call.args:
                for node, new in tf2_respellings(ctx, arg, plan.tf):
                    plan.replace(node, new)
            _num_gpus(call, plan, ctx)
            plan.scope_strategy = cst.Name(binding.name)
            if isinstance(ctx.scope(binding.target), GlobalScope):
                plan.strategy_name = binding.name
        else:
            scope = ctx.scope(unit.statement)
            name = _emit.unique_name("strategy", plan.names_taken())
            respelled = dict(tf2_respellings(ctx, call, plan.tf))
            created = _emit.replace_in(call, respelled).with_changes(func=tf2_class)
            created = created.with_changes(args=_devices_for_num_gpus(created, ctx.call_api_path(call)))
            plan.before_build.append(_emit.statement("{name} = {call}", name=name, call=created))
            plan.scope_strategy = cst.Name(name)
            plan.strategy_made_inline = name
            if isinstance(scope, GlobalScope):
                plan.strategy_name = name
        plan.fixed(train, self.code, "the model is built and compiled under the strategy's scope")

    def _from_import(self, unit, train, imported, plan, ctx) -> None:
        """A strategy from another module's function: the model is built under its scope, the
        strategy as that function makes it."""
        call, binding = imported
        plan.claimed_config.update({"train_distribute", "eval_distribute"})
        plan.has_strategy = True
        # The function may return None (`if num_gpus == 0: return None`, official models'
        # distribution_utils): the Estimator then trained with TensorFlow's default strategy.
        either = _emit.expr("{c} or {tf}.distribute.get_strategy()", c=call.deep_clone(), tf=plan.tf)
        if binding is not None:
            plan.replace(call, either)
        _name_strategy(unit, plan, ctx, binding, either)
        anchor = binding.target if binding is not None else train
        plan.fixed(anchor, self.code, f"the model is built under the strategy `{_emit.code(call.func)}` returns")

    def _from_function(self, unit, train, made, plan, ctx, bound=None) -> None:
        """``train_distribute=distribution_strategy()``: each strategy the function returns gets
        its TF2 name there; the program calls the function once, before the model is built."""
        plan.claimed_config.update({"train_distribute", "eval_distribute"})
        plan.has_strategy = True
        nones = [n for n in made if isinstance(n, cst.Name)]
        made = [c for c in made if isinstance(c, cst.Call)]
        for none in nones:
            plan.replace(none, _emit.expr("{tf}.distribute.get_strategy()", tf=plan.tf))
        plan.multi_worker = any(STRATEGIES[ctx.call_api_path(c)] in MULTI_WORKER for c in made)
        for call in made:
            tf2_class = _emit.expr("{tf}.distribute.{cls}", tf=plan.tf, cls=STRATEGIES[ctx.call_api_path(call)])
            plan.replace(call.func, tf2_class)  # also when spelled alike: `tf` may be compat.v1 here
            for arg in call.args:
                for node, new in tf2_respellings(ctx, arg, plan.tf):
                    plan.replace(node, new)
            _num_gpus(call, plan, ctx)
        _name_strategy(unit, plan, ctx, bound, train.deep_clone())
        plan.fixed(train, self.code, "the model is built and compiled under the strategy the function returns")


def _name_strategy(unit, plan, ctx, bound, made: cst.BaseExpression) -> None:
    """The name the model is built under the scope of: the program's (``bound``, the binding of
    the strategy's name), or ``strategy = <made>`` written before the model is built."""
    if bound is not None:
        name, scope = bound.name, ctx.scope(bound.target)
    else:
        name, scope = _emit.unique_name("strategy", plan.names_taken()), ctx.scope(unit.statement)
        plan.before_build.append(_emit.statement("{name} = {call}", name=name, call=made))
        plan.strategy_made_inline = name
    plan.scope_strategy = cst.Name(name)
    if isinstance(scope, GlobalScope):
        plan.strategy_name = name


def _optional_strategy(ctx, train: cst.BaseExpression):
    """A strategy name bound to a strategy or None by a condition: ``s = Mirrored() if c else
    None``, or ``s = None`` and ``s = Mirrored()`` in an `if`, both reaching the RunConfig's
    read. (the strategy's call, a Binding of its name, the `None` nodes); None otherwise."""
    from estimator2keras._units import Binding, reaching_bindings

    if not isinstance(train, cst.Name):
        return None
    bindings = reaching_bindings(ctx, train)
    if not bindings:
        return None
    calls, nones = [], []
    for binding in bindings:
        value = binding.value
        options = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
        for option in options:
            if isinstance(option, cst.Name) and option.value == "None":
                nones.append(option)
            elif isinstance(option, cst.Call) and ctx.call_api_path(option) in STRATEGIES:
                calls.append((option, binding))
            else:
                return None
    if len(calls) != 1 or not nones:
        return None
    call, binding = calls[0]
    return call, Binding(binding.name, binding.statement, binding.target, call), nones


def _imported_call(ctx, node):
    """``distribution_utils.get_distribution_strategy(...)`` (or a name bound once to it): a
    call of a function another module defines, whose strategy e2k takes as it comes. (call,
    binding or None), or None."""
    from estimator2keras._units import Binding, _single_assignment, resolve

    binding = None
    if isinstance(node, cst.Name):
        bound = resolve(ctx, node)
        if not (isinstance(bound, Binding) and isinstance(bound.value, cst.Call)):
            return None
        binding, node = bound, bound.value
    if not isinstance(node, cst.Call) or ctx.call_api_path(node) is not None:
        return None
    head = node.func
    while isinstance(head, cst.Attribute):
        head = head.value
    if not isinstance(head, cst.Name):
        return None
    assignment = _single_assignment(ctx, head)
    if not isinstance(getattr(assignment, "node", None), (cst.Import, cst.ImportFrom)):
        return None  # a function of this module, or a value e2k cannot follow
    return node, binding


def _made_by_function(ctx, node) -> list[cst.Call] | None:
    """``distribution_strategy()``, a function of this module whose every ``return`` gives a
    strategy e2k converts (chosen by the number of GPUs, say): those calls."""
    from estimator2keras._units import _single_assignment

    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name)):
        return None
    assignment = _single_assignment(ctx, node.func)
    function = getattr(assignment, "node", None)
    if not isinstance(function, cst.FunctionDef) or function.decorators:
        return None
    returns, stack = [], list(function.body.children)
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(current, (cst.Yield, cst.Await)):
            return None
        if isinstance(current, cst.Return):
            returns.append(current.value)
        stack.extend(current.children)
    # `if num_gpus == 0: return None`: no strategy, TensorFlow's default one (one device).
    calls = [v for v in returns if isinstance(v, cst.Call) and ctx.call_api_path(v) in STRATEGIES]
    nones = [v for v in returns if isinstance(v, cst.Name) and v.value == "None"]
    if not calls or len(calls) + len(nones) != len(returns):
        return None
    return calls + nones


def _num_gpus(call: cst.Call, plan, ctx) -> None:
    """``tf.contrib.distribute.MirroredStrategy(num_gpus=n)``: TF2's takes the devices."""
    args = _devices_for_num_gpus(call, ctx.call_api_path(call))
    if args is not call.args:
        for old, new in zip(call.args, args):
            if old is not new:
                plan.replace(old, new)


def _devices_for_num_gpus(call: cst.Call, path: str | None):
    if path != "contrib.distribute.MirroredStrategy":
        return call.args
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == "num_gpus":
            devices = _emit.expr('[f"/gpu:{{i}}" for i in range({n})]', n=arg.value)
            args[i] = arg.with_changes(keyword=cst.Name("devices"), value=devices)
    return args
