from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from dataclasses import dataclass, field

from libcst.metadata import QualifiedNameProvider

from estimator2keras._modelfn import MODEL_FN_PARAMS, convert_model_fn
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._units import Binding, _returned_function, accesses_of, bind_arguments, resolve


class EstimatorToKerasModel(UnitRule):
    """Estimator(model_fn=...) becomes a Keras model, built and compiled by a function.

    ## What it does
    Finds `tf.estimator.Estimator(model_fn=...)` (any import style: `tf.estimator`,
    `tf.compat.v1.estimator`, `import tensorflow.compat.v1 as tf1`, `from tensorflow import
    estimator`) and replaces the model_fn with a Keras model and a function that builds it,
    creates the optimizer and calls `compile`. The Estimator variable becomes the model
    (named `model`). The model_fn is read mode by mode, back from what each EstimatorSpec
    returns (an `if` on the mode, and a conditional expression on it in an assignment or an
    EstimatorSpec argument, `loss = ... if mode != ModeKeys.PREDICT else None`, taken as
    that mode runs it; fixture `mode_conditional_expressions`):

    - TRAIN's loss gives `compile(loss=...)` and the *model output*; the statements that
      compute it from `features` are the forward pass.
    - TRAIN's `train_op` (`optimizer.minimize(loss)`) gives `compile(optimizer=...)`, with
      its learning-rate schedule.
    - EVAL's `eval_metric_ops` give `compile(metrics=[...])`, under the same names.
    - PREDICT's `predictions` dict gives the model a `predict_step`. Where a prediction is a
      tensor inside the model (`"hidden": hidden`, an embedding served beside the output),
      `predict_step` runs the forward code of `call` itself, `training` False, and returns it.

    A forward pass that is one chain of layers from `features` becomes
    `tf.keras.Sequential([...])`. Anything else becomes a `tf.keras.Model` subclass whose
    `__init__` creates the layers (named after the user's variables: `conv1 = ...` becomes
    `self.conv1`) and whose `call(features, training=False)` runs the forward statements,
    comments included; `mode == ModeKeys.TRAIN` tests become the `training` flag, `params`
    becomes a constructor argument, layers built in a loop become a list of layers (the loop
    may run over a setting the model_fn reads from `params`, `hidden = params.get("hidden",
    [16, 8])`, which `__init__` computes too, and hold the user's `if`s: `if dropout > 0:`
    around a dropout stays in `call`, its layers made in `__init__` either way; fixture
    `layer_loop_with_switches`). A
    model_fn given as `functools.partial(model_fn, k=v)`, or returned by a factory
    (`make_model_fn(units)` defining and returning it), becomes a builder taking those
    names as arguments (`build_model(k=v)`). A model_fn that is a method of a class of the
    file (`Estimator(self.model_fn)` in a method of the class, `Estimator(trainer.model_fn)`
    on an instance made once) is converted as that partial of a function of the module: the
    `self` attributes it reads become the model's and builder's arguments, given where the
    Estimator was built (`build_model(hidden=self.hidden, lr=self.lr)`; a name the model_fn
    uses already takes the class's: `trainer_lr`), the Keras code placed before the class,
    which keeps its other members (fixture `method_model_fn_trainer`). It is refused, naming
    why, where lifting it could change what it computes: an attribute set other than once at
    the top of `__init__` (or in the class body), set by the model_fn, a method of `self` it
    calls, `self` used otherwise, a base class or subclass, `setattr`, the method used
    elsewhere too. A model_fn reached through an alias
    (`model_function = model_fn`) loses the alias with it. An Estimator a function returns
    (`def build_estimator(model_dir, model_type): return tf.estimator.Estimator(...)`, or bound
    to a name it returns) is built there as the model, returned, and followed into the
    variables its callers bind (`m = build_estimator(...)`: `m.train(...)` becomes
    `model.fit(...)`); what the Estimator's callers need besides (the checkpoints callback of
    its `model_dir`) is made where the function is called, its parameters given the call's
    arguments. A RunConfig the caller gives the function (`def create(args, config)`, called
    once) goes with its parameter; the Estimators its branches build (a classifier or a
    regressor by a setting, the Cloud ML template's `model.create`) may each take it as their
    `config`, and the caller's strategy scopes the call. The user's own `if` statements
    that do not test the mode (`if params["batch_norm"]:`, `if isinstance(features, dict):`)
    are kept in `call` as they were written; one that only wraps the optimizer in
    `CrossShardOptimizer` is left out (E2K605). A categorical cross-entropy of
    `tf.one_hot(labels, n)` becomes `SparseCategoricalCrossentropy` on the labels as they
    come. Ids the model_fn takes from its features and looks up itself
    (`tf.nn.embedding_lookup(table, features["ids"])`, `tf.one_hot(features["kind"], n)`,
    `tf.gather`) are cast to int64 in `call`: Keras 3 builds a model made under a
    distribution strategy on the mean of the replicas' first batches, a float tensor, which
    those ops refuse; the cast leaves integer ids as they are (fixture
    `integer_ids_mirrored`). A list or dict the model_fn fills a step at a time
    (`layers.append(tf.keras.layers.Dense(3))`, `extend`, `insert`, `update`, `add`,
    `setdefault`) is carried with its steps where the value goes (a Sequential's layers into
    `__init__`), and `eval_metric_ops["auc"] = tf.metrics.auc(...)` items are read with their
    dict (fixture `containers_built_in_steps`); any other change in place of a model_fn value
    (`layers.reverse()`, `hidden["a"] = ...`) leaves the model_fn as it was (E2K901). Layers,
    losses, optimizers, schedules and metrics are translated by their own rules (E2K3xx,
    E2K2xx, E2K1xx).

    ## Why
    `tf.estimator` was removed in TensorFlow 2.16. In Keras, the model_fn's parts have
    separate homes: the layers make the model, the loss, optimizer and metrics go to
    `compile`, predictions to `predict_step`, and the train op disappears because `fit`
    applies the gradients.

    ## Fix safety
    Safe: the fixtures (TensorFlow's own MNIST CNN and iris custom-Estimator tutorials among
    them) train to the same losses, weights and metrics under `e2k parity` with 2 replicas,
    on TF 2.15 and on the newest TensorFlow. The model_fn is converted entirely or not at
    all: any statement the converter cannot place leaves the model_fn and its Estimator
    untouched, marked E2K901.

    ## Limitations
    Not converted (E2K901, the model_fn left as it was): `tf.while_loop`, `variable_scope(reuse=...)`, `Scaffold`, gradient code other than
    `minimize`, EstimatorSpec hooks and `export_outputs`, an `if` that does not test the
    mode but returns from the model_fn or computes what a layer's constructor reads, a
    model output that depends on the labels. `model_dir` and
    `warm_start_from` are reported as E2K400. The conversion stops at the first construct
    it refuses; the others in the model_fn (and in the functions of the program it calls)
    that e2k converts nowhere are reported with it, each marked where it stands ("also in
    this model_fn: ..."): tf.contrib functions without a rule, `tf.get_variable` and other
    graph-era state, placeholders, tf.metrics and TF1 optimizers without a rule. So one run
    shows every blocker a human will meet in the model_fn, not one at a time.

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    - https://www.tensorflow.org/guide/migrate/model_mapping
    """

    code = "E2K001"
    summary = "Estimator(model_fn=...) -> a function that builds and compiles a Keras model"
    safety = Safety.SAFE
    order = 10
    constructors = ("estimator.Estimator",)
    signature = ("model_fn", "model_dir", "config", "params", "warm_start_from")

    cases = [
        Case(
            id="sequential",
            before='''\
import tensorflow.compat.v1 as tf1


def input_fn():
    return tf1.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf1.layers.Dense(1)(features)
    loss = tf1.losses.mean_squared_error(labels=labels, predictions=logits)
    train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf1.train.get_global_step())
    return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf1.estimator.Estimator(model_fn=model_fn)
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn())
''',
        ),
        Case(
            id="functools-partial",
            before='''\
import functools

import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def model_fn(features, labels, mode, hidden_units, learning_rate=0.1):
    net = features
    for units in hidden_units:
        net = tf.layers.dense(net, units, activation=tf.nn.relu)
    logits = tf.layers.dense(net, 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(learning_rate).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn=functools.partial(model_fn, hidden_units=[8, 4]))
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


class Model(tf.keras.Model):
    def __init__(self, hidden_units):
        super().__init__()
        self.dense_layers = [
            tf.keras.layers.Dense(units, activation=tf.nn.relu)
            for units in hidden_units
        ]
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        net = features
        for dense in self.dense_layers:
            net = dense(net)
        return self.logits(net)


def build_model(hidden_units, learning_rate):
    model = Model(hidden_units)
    model.compile(
        optimizer=tf.keras.optimizers.SGD(learning_rate),
        loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model(hidden_units=[8, 4], learning_rate=0.1)
model.fit(input_fn())
''',
        ),
        Case(
            id="model-fn-factory",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def make_model_fn(units, learning_rate=0.1):
    def model_fn(features, labels, mode):
        hidden = tf.layers.dense(features, units, activation=tf.nn.relu)
        logits = tf.layers.dense(hidden, 1)
        loss = tf.losses.mean_squared_error(labels, logits)
        train_op = tf.train.AdamOptimizer(learning_rate).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    return model_fn


estimator = tf.estimator.Estimator(model_fn=make_model_fn(16))
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf

from e2k_helpers import TF1Adam


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def build_model(units, learning_rate):
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(units, activation=tf.nn.relu),
        tf.keras.layers.Dense(1),
    ])
    model.compile(optimizer=TF1Adam(learning_rate), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model(units=16, learning_rate=0.1)
model.fit(input_fn())
''',
        ),
        Case(
            id="model-fn-alias",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def run():
    model_function = model_fn
    estimator = tf.estimator.Estimator(model_fn=model_function)
    estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


def run():
    model = build_model()
    model.fit(input_fn())
''',
        ),
        Case(
            id="estimator-factory",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def build_estimator(seed):
    config = tf.estimator.RunConfig(tf_random_seed=seed)
    return tf.estimator.Estimator(model_fn, config=config)


def main():
    estimator = build_estimator(7)
    estimator.train(input_fn, steps=3)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


def build_estimator(seed):
    tf.keras.utils.set_random_seed(seed)
    model = build_model()
    return model


def main():
    model = build_estimator(7)
    model.fit(input_fn(), steps_per_epoch=3)
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is not type(self):
            return
        model_fn = unit.arg_value("model_fn")
        if model_fn is None:
            raise Unsupported("the Estimator has no model_fn", unit.call)
        # `model_function = model_fn` (TensorFlow's official models): the alias goes with it.
        while isinstance(model_fn, cst.Name):
            alias = resolve(ctx, model_fn)
            if not (isinstance(alias, Binding) and isinstance(alias.value, (cst.Name, cst.Call))):
                break
            plan.remove_binding_if_only_here(alias, model_fn)
            model_fn = alias.value
        try:
            source = _model_fn_source(ctx, model_fn)
        except Unsupported:
            foreign = ctx.program.foreign_model_fn(ctx, model_fn) if ctx.program is not None else None
            if foreign is None:
                raise
            self._plan_foreign(unit, plan, ctx, model_fn, foreign)
            return
        fn, replaced = source.function, source.replaced
        reads = list(accesses_of(ctx, replaced.name) or [])
        foreign = ctx.path_of(replaced) != ctx.path_of(unit.call)
        if ctx._modules is not None:
            # In a program pass, another module's reads of it too (`model.model_fn` in task.py).
            from estimator2keras.analysis.federation import foreign_reads

            reads += foreign_reads(ctx, replaced.name)
        if any(read is not source.reference and not plan.in_group_call(read) for read in reads):
            raise Unsupported(f"`{replaced.name.value}` is used elsewhere too; e2k replaces it", replaced.name)
        scope = ctx.scope(replaced)
        taken = {a.name for a in scope.assignments} | {a.node.value for a in scope.accesses}
        try:
            if unit.wrappers:
                # `estimator = add_metrics(estimator, metric_fn)`: its metrics are EVAL's too (E2K205).
                from estimator2keras._added_metrics import convert_model_fn as convert_with_added_metrics

                conversion = convert_with_added_metrics(
                    fn, ctx, plan.tf, taken, plan, tuple(source.bound), replaced.name.value, unit)
            else:
                conversion = convert_model_fn(
                    fn, ctx, plan.tf, taken, plan, tuple(source.bound), stem=replaced.name.value
                )
        except Unsupported as exc:
            from estimator2keras._modelfn import other_blockers

            exc.also = [(node, reason, "E2K901") for node, reason in other_blockers(fn, ctx, exc.node)]
            raise
        plan.predictions_kind = conversion.predictions_kind
        plan.owned.append(fn)
        statements = list(conversion.statements)
        for i in range(1, len(statements)):
            # Definitions that replace one keep the blank lines between definitions.
            blank = [_emit.blank_line()] * (2 if isinstance(ctx.parent(replaced), cst.Module) else 1)
            statements[i] = statements[i].with_changes(leading_lines=blank)
        plan.replace_statement(replaced, statements)
        args = []
        for name in conversion.arguments:
            if name == "params":
                params = unit.arg_value("params")
                if params is None:
                    raise Unsupported("the model_fn reads `params`, but the Estimator passes none", fn)
                args.append(cst.Arg(params))
            else:
                args.append(_emit.keyword_arg(name, source.bound[name]))
        if isinstance(source.reference, cst.Attribute):
            builder = source.reference.with_changes(attr=cst.Name(conversion.builder_name))  # `model.build_model`
        else:
            builder = cst.Name(conversion.builder_name)
            unit_scope = ctx.scope(unit.call)
            if foreign and unit_scope is not None and any(
                    a.name == conversion.builder_name for a in unit_scope.assignments):
                # Imported by name from the model_fn's module (the program pass adds the import):
                # a name of the Estimator's module would shadow it.
                raise Unsupported(f"`{conversion.builder_name}` is already a name where the Estimator is built",
                                  unit.call)
        call = cst.Call(builder, args=_emit.call_args(args))
        plan.build.append(_emit.statement("{var} = {call}", var=plan.model_var, call=call))
        plan.claimed_args.update({"model_fn", "config", "params"})
        if source.partial:
            ctx.remove_import_if_unused("functools")
        plan.fixed(unit.call, self.code, f"Estimator -> Keras model built by `{conversion.builder_name}()`")


    def _plan_foreign(self, unit, plan, ctx, model_fn, foreign) -> None:
        """The model_fn is another file's of the program (``model.model_fn``, ``from model
        import model_fn``): that file replaces it by its Keras model and builder, and the
        Estimator becomes a call of that builder."""
        import os

        from estimator2keras.analysis.program import ForeignModelFn

        if not isinstance(foreign, ForeignModelFn):
            raise Unsupported(f"the model_fn, in {os.path.basename(ctx.program.locate(ctx, model_fn)[0])}: {foreign}",
                              model_fn)
        args = []
        for name in foreign.arguments:
            if name != "params":
                raise Unsupported(f"the model_fn needs `{name}`, which e2k does not pass across modules yet", model_fn)
            params = unit.arg_value("params")
            if params is None:
                raise Unsupported("the model_fn reads `params`, but the Estimator passes none", model_fn)
            args.append(cst.Arg(params))
        if isinstance(model_fn, cst.Attribute):
            builder = model_fn.with_changes(attr=cst.Name(foreign.builder))  # `model.build_model`
        else:
            # `from model import model_fn`: the import names the builder instead.
            scope = ctx.scope(model_fn)
            reads = [a.node for a in scope.accesses[model_fn.value]] if scope is not None else []
            alias = _import_alias(ctx, model_fn)
            if alias is None or any(read is not model_fn for read in reads):
                raise Unsupported(f"`{model_fn.value}` is used elsewhere too; e2k replaces its import", model_fn)
            plan.replace(alias, alias.with_changes(name=cst.Name(foreign.builder), asname=None))
            builder = cst.Name(foreign.builder)
        call = cst.Call(builder, args=_emit.call_args(args))
        plan.build.append(_emit.statement("{var} = {call}", var=plan.model_var, call=call))
        plan.predictions_kind = foreign.predictions_kind
        plan.claimed_args.update({"model_fn", "config", "params"})
        plan.on_commit.append(lambda: ctx.program.request(foreign))
        where = os.path.basename(foreign.provider)
        plan.fixed(unit.call, self.code, f"Estimator -> Keras model built by `{foreign.builder}()` ({where})")


def _import_alias(ctx, name: cst.Name):
    """The ``ImportAlias`` of ``from module import name`` that binds ``name``."""
    from estimator2keras._units import _single_assignment

    node = getattr(_single_assignment(ctx, name), "node", None)
    if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
        for alias in node.names:
            bound = alias.asname.name.value if alias.asname else _emit.code(alias.name)
            if bound == name.value:
                return alias
    return None


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


@dataclass
class _ModelFnSource:
    """Where the model_fn comes from, and what must be replaced to convert it."""

    function: cst.FunctionDef  # the model_fn's definition
    replaced: cst.FunctionDef  # the definition the Keras code replaces (a factory, or the model_fn)
    reference: cst.Name | cst.Attribute  # the name the Estimator's argument reads
    bound: dict[str, cst.BaseExpression] = field(default_factory=dict)  # extra names -> values
    partial: bool = False


def _model_fn_source(ctx, node: cst.BaseExpression) -> _ModelFnSource:
    """The model_fn passed as a name, `functools.partial(model_fn, k=v)`, or `make_model_fn(...)`.
    In a pass over a program's modules, also another module's: `model.model_fn`,
    `model.make_model_fn(...)`."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        fn = resolve(ctx, node)
        if isinstance(fn, cst.FunctionDef):
            return _ModelFnSource(fn, fn, node, _defaults(fn))
    if isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute)):
        names = {q.name for q in ctx.get_metadata(QualifiedNameProvider, node.func, set())}
        if "functools.partial" in names and node.args and isinstance(node.args[0].value, cst.Name):
            fn = resolve(ctx, node.args[0].value)
            if isinstance(fn, cst.FunctionDef):
                bound = _defaults(fn)
                for arg in node.args[1:]:
                    if arg.keyword is None or arg.star:
                        raise Unsupported("functools.partial with positional arguments is not converted", arg)
                    bound[arg.keyword.value] = arg.value
                return _ModelFnSource(fn, fn, node.args[0].value, _in_order(bound, fn), partial=True)
        factory = resolve(ctx, node.func)
        if isinstance(factory, cst.FunctionDef):
            inner = _returned_function(factory)
            body = factory.body.body if isinstance(factory.body, cst.IndentedBlock) else ()
            if body and _is_docstring(body[0]):
                body = body[1:]  # `"""Returns a model_fn ..."""`: the factory's docstring goes with it
            if inner is not None and len(body) == 2:
                bound = bind_arguments(node, tuple(p.name.value for p in factory.params.params))
                values = {k: a.value for k, a in bound.items()}
                for param in factory.params.params:
                    if param.name.value not in values:
                        if param.default is None:
                            raise Unsupported(f"the factory's `{param.name.value}` is not given", node)
                        values[param.name.value] = param.default
                return _ModelFnSource(inner, factory, node.func, _in_order(values, factory))
    method = _method_of_a_class(ctx, node)
    if method is not None:
        from estimator2keras._method_model_fn import WHY

        raise Unsupported(f"the model_fn is a method (`{_emit.code(node)}`) of the class `{method}`, which e2k "
                          "converts as a function of the module given the values it reads from `self`, but not this "
                          f"one: {WHY.get() or 'e2k does not resolve its instance'}", node)
    raise Unsupported("the model_fn is not a function defined in this file (or a partial / factory of one)", node)


def _method_of_a_class(ctx, node: cst.BaseExpression) -> str | None:
    """``self.model_fn`` (or ``Trainer.model_fn``) naming a method of a class of this file: the
    class's name."""
    if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)):
        return None
    owner = node.value.value
    classes = [n for n in ctx.module.body if isinstance(n, cst.ClassDef)]
    enclosing = ctx.parent(node)
    while enclosing is not None and not isinstance(enclosing, cst.ClassDef):
        enclosing = ctx.parent(enclosing)
    if owner in ("self", "cls") and enclosing is not None:
        candidates = [enclosing]
    else:
        candidates = [c for c in classes if c.name.value == owner]
    for klass in candidates:
        body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ()
        if any(isinstance(item, cst.FunctionDef) and item.name.value == node.attr.value for item in body):
            return klass.name.value
    return None


def _in_order(bound: dict, fn: cst.FunctionDef) -> dict:
    """``bound`` ordered as ``fn``'s parameters (the builder's arguments follow them)."""
    order = [p.name.value for p in fn.params.params]
    return dict(sorted(bound.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order)))


def _defaults(fn: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
    """Extra model_fn parameters with defaults: bound to those defaults."""
    return {
        p.name.value: p.default
        for p in fn.params.params
        if p.name.value not in MODEL_FN_PARAMS and p.default is not None
    }
