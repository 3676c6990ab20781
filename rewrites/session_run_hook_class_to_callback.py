from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import MARK_PREFIX
from estimator2keras._edits import is_docstring
from estimator2keras._nodes import walk as _walk
from estimator2keras._hook_values import GLOBAL_STEP, GLOBAL_STEP_CALLS, LOSS, KerasValue, keras_value
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._training import PHASE_METHODS, HookSite

#: SessionRunHook method -> (index into PHASE_METHODS, the Keras parameters after self).
HOOK_METHODS = {
    "begin": (0, "logs=None"),
    "after_create_session": (0, "logs=None"),
    "before_run": (1, "batch, logs=None"),
    "after_run": (2, "batch, logs=None"),
    "end": (3, "logs=None"),
}
GRAPH_LOOKUP = (
    "a SessionRunHook looked a tensor up in the TF1 graph here, which a Keras callback does not have (it would "
    "raise a KeyError): read the loss and metrics from `logs`, the weights from `self.model`"
)
FETCHED = (
    "a SessionRunHook fetched graph tensors here (SessionRunArgs / run_values), which Keras does not "
    "expose by name: read the loss and metrics from `logs`, the weights from `self.model`"
)
SESSION = "a SessionRunHook used its session here; a Keras callback has none (use `self.model`)"
NOT_STOPPABLE = (
    "a callback stops fit but not evaluate() or predict(), which this hook also stopped under the Estimator"
)
NOT_STOPPABLE_ONLY = (
    "the hook stopped evaluate() or predict() here (`request_stop()`), which a Keras callback cannot stop"
)
CODE = "E2K407"
#: Above a callback method that reads the loss the hook fetched: what Keras logs is not the same number.
LOSS_NOTE = ('logs["loss"] is the mean loss of the epoch\'s steps so far (what fit shows), not the loss of '
             "this step alone, which the hook fetched.")


class SessionRunHookClassToCallback(ExpressionRule):
    """A `SessionRunHook` subclass becomes a `tf.keras.callbacks.Callback` subclass.

    ## What it does
    A class deriving from `tf.estimator.SessionRunHook` (or `tf.compat.v1.train.SessionRunHook`)
    whose instances are passed as hooks derives from `tf.keras.callbacks.Callback` instead,
    and its methods become the callback methods called at the same points:

    | SessionRunHook | Callback (training; `on_test_*` for evaluation, `on_predict_*` for prediction) |
    |---|---|
    | `begin(self)`, `after_create_session(self, session, coord)` | `on_train_begin(self, logs=None)` |
    | `before_run(self, run_context)` | `on_train_batch_begin(self, batch, logs=None)` |
    | `after_run(self, run_context, run_values)` | `on_train_batch_end(self, batch, logs=None)` |
    | `end(self, session)` | `on_train_end(self, logs=None)` |

    `run_context.request_stop()` becomes `self.model.stop_training = True`. A hook used in
    several phases gets the other phases' methods as aliases (`on_test_begin = on_train_begin`).
    `super().__init__()` is added to an `__init__` that lacks it.

    ## Why
    Keras calls callbacks where an Estimator's MonitoredSession called hooks: at the start,
    before and after every step, and at the end of `fit`, `evaluate` and `predict`.

    A hook that fetches values (`return SessionRunArgs(fetches)` in `before_run`, read as
    `run_values.results` in `after_run`) converts when every value it fetches is one a Keras
    model still has. The fetches may be a value, a list, a tuple or a dict of: attributes set
    in `begin` / `after_create_session` / `__init__`, `tf.train.get_global_step()`, tensor names
    (`"cross_entropy:0"`, `graph.get_tensor_by_name(self.loss_name + ":0")` with the name given
    to the hook's constructor, the same for every instance). An attribute set in several of
    those methods holds what the last one that ran gave it (`__init__` keeps the tensor's
    name, `begin` rebinds it to the tensor looked up by that name). Each is read as E2K406 reads a
    `LoggingTensorHook`'s tensors: the loss is `logs["loss"]`, a compiled metric
    `logs["<name>"]`, the learning rate `self.model.optimizer.learning_rate.numpy()`, the global
    step `self.model.optimizer.iterations.numpy() - 1`. `run_values.results` becomes the same
    structure of those values; the `return SessionRunArgs(...)` and the statements of `begin`
    that only looked the fetched tensors up go.

    ## Fix safety
    Review. Keras reports the loss and the metrics in `logs` as their means over the epoch's
    steps so far, where a fetched loss tensor was the step's own (the callback method that
    reads `logs["loss"]` says so in a comment above it), and a callback reads the
    optimizer after the step (the global step is given as the step that ran, `iterations - 1`,
    as the hook fetched it; a decayed learning rate is the step's own on Keras 2, the next
    step's on Keras 3).

    ## Limitations
    A hook converts completely or not at all. A callback has no `run_values`, no `session`
    and no TF1 graph: a callback method still reading `run_values.results` raised a NameError
    at the first step. So a hook class with anything of these left, whatever its spelling,
    is not converted, and neither is the Estimator it is passed to (its `train()` keeps the
    hook): what it fetches that has no Keras counterpart (an activation, a tensor e2k cannot
    trace to the model_fn, such as an attribute a helper method looked up, an attribute the
    hook also uses otherwise, fetches returned only on some steps), a read of `run_values`
    other than its `results`, a read of a hook method's parameters that is not
    `run_context.request_stop()` on its own line in a hook used in training
    (`session.run(...)` in `end`, `run_context.session`, a hook that stops evaluation
    only), and each lookup of a tensor in the TF1 graph
    (`tf.get_default_graph().get_tensor_by_name(...)` in `begin`, which raised a KeyError in
    a tester's callback). Each such statement is marked `# e2k: E2K407`, with the value named,
    and reported, in every hook class the Estimator is given; the hook must be rewritten by
    hand as a callback that reads `logs` (the loss and metrics) or `self.model`.

    ## References
    - https://www.tensorflow.org/guide/migrate/sessionrunhook_callback
    """

    code = CODE
    summary = "class MyHook(SessionRunHook) -> class MyHook(tf.keras.callbacks.Callback) with the mapped methods"
    safety = Safety.REVIEW
    role = "hook_class"
    targets = ("train.SessionRunHook", "estimator.SessionRunHook")

    cases = [
        Case(
            id="timing-hook",
            before='''\
import time

import tensorflow as tf


class TimingHook(tf.estimator.SessionRunHook):
    """Prints the time of every step."""

    def begin(self):
        self.times = []

    def before_run(self, run_context):
        self.start = time.time()

    def after_run(self, run_context, run_values):
        self.times.append(time.time() - self.start)
        if len(self.times) >= 100:
            run_context.request_stop()


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=1000, hooks=[TimingHook()])
''',
            after='''\
import time

import tensorflow as tf


class TimingHook(tf.keras.callbacks.Callback):
    """Prints the time of every step."""

    def on_train_begin(self, logs=None):
        self.times = []

    def on_train_batch_begin(self, batch, logs=None):
        self.start = time.time()

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.time() - self.start)
        if len(self.times) >= 100:
            self.model.stop_training = True


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
model.fit(input_fn(), steps_per_epoch=1000, callbacks=[TimingHook()])
''',
        ),
        Case(
            id="fetches-the-loss-and-step",
            before='''\
import tensorflow as tf


class LossPrinterHook(tf.train.SessionRunHook):
    def __init__(self, every_n_steps):
        self.every_n_steps = every_n_steps

    def begin(self):
        self.global_step = tf.train.get_global_step()

    def before_run(self, run_context):
        return tf.train.SessionRunArgs([self.global_step, "cross_entropy:0"])

    def after_run(self, run_context, run_values):
        step, loss = run_values.results
        if step % self.every_n_steps == 0:
            print(step, loss)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    tf.identity(loss, name="cross_entropy")
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=100, hooks=[LossPrinterHook(10)])
''',
            after='''\
import tensorflow as tf


class LossPrinterHook(tf.keras.callbacks.Callback):
    def __init__(self, every_n_steps):
        super().__init__()
        self.every_n_steps = every_n_steps

    # logs["loss"] is the mean loss of the epoch's steps so far (what fit shows), not the loss
    # of this step alone, which the hook fetched.
    def on_train_batch_end(self, batch, logs=None):
        step, loss = self.model.optimizer.iterations.numpy() - 1, logs["loss"]
        if step % self.every_n_steps == 0:
            print(step, loss)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
model.fit(input_fn(), steps_per_epoch=100, callbacks=[LossPrinterHook(10)])
''',
        ),
        Case(
            id="fetches-an-activation",
            before='''\
import tensorflow as tf


class ActivationHook(tf.train.SessionRunHook):
    def before_run(self, run_context):
        return tf.train.SessionRunArgs("hidden:0")

    def after_run(self, run_context, run_values):
        print(run_values.results.mean())


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    hidden = tf.identity(tf.layers.Dense(4)(features), name="hidden")
    logits = tf.layers.Dense(1)(hidden)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=100, hooks=[ActivationHook()])
''',
            after='''\
import tensorflow as tf


class ActivationHook(tf.train.SessionRunHook):
    def before_run(self, run_context):
        # e2k: E2K407 `ActivationHook` is not converted (nor the Estimator it is passed to): the tensor 'hidden' (`tf.layers.Dense(4)(features)` in the model_fn) is not the loss, a compiled metric, the learning rate or the global step: a Keras model does not expose it; read the loss and metrics from `logs`, the weights from `self.model`
        return tf.train.SessionRunArgs("hidden:0")

    def after_run(self, run_context, run_values):
        # e2k: E2K407 `ActivationHook` is not converted (nor the Estimator it is passed to): the tensor 'hidden' (`tf.layers.Dense(4)(features)` in the model_fn) is not the loss, a compiled metric, the learning rate or the global step: a Keras model does not expose it; read the loss and metrics from `logs`, the weights from `self.model`
        print(run_values.results.mean())


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    hidden = tf.identity(tf.layers.Dense(4)(features), name="hidden")
    logits = tf.layers.Dense(1)(hidden)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=100, hooks=[ActivationHook()])
''',
            findings=("E2K407",),
        ),
    ]

    def convert(self, call, ctx, tf, site):  # instances are converted through their class
        raise Unsupported("a SessionRunHook base class is not a hook", call)

    def convert_class(self, klass: cst.ClassDef, ctx, tf: str, plan, phases: list[str]) -> cst.ClassDef:
        new, left, stoppable = self._convert(klass, ctx, tf, plan, phases)
        if left:
            # Said for the unit's other hook classes too, which stay with it.
            for other, (rule, other_phases) in list(plan.hook_classes.items()):
                if other is not klass and issubclass(rule, SessionRunHookClassToCallback):
                    left += rule()._convert(other, ctx, tf, plan, sorted(other_phases))[1]
            raise _left_as_it_was(left)
        for node, message in stoppable:
            plan.leftover_marked_in_new_code(node, CODE, message)
        return new

    def _convert(self, klass: cst.ClassDef, ctx, tf: str, plan, phases: list[str]):
        """(the callback class, what a callback could not run as (node, why, the class), the
        statements marked NOT_STOPPABLE); nothing reported."""
        order = [p for p in ("train", "eval", "predict") if p in phases]
        original = klass
        fetches = _Fetches(klass, ctx, plan, order)
        klass, fetched = fetches.convert()
        left: list[tuple[cst.CSTNode, str, cst.ClassDef]] = []  # what a callback could not run: the class stays
        stoppable: list[tuple[cst.CSTNode, str]] = []
        bases = []
        for base in klass.bases:
            if ctx.api_path(base.value) in self.targets:
                base = base.with_changes(value=_emit.expr("{tf}.keras.callbacks.Callback", tf=tf))
            bases.append(base)
        body: list[cst.BaseStatement] = []
        begin_extra: list[cst.BaseStatement] = []
        aliases: list[cst.BaseStatement] = []
        begin_index = None
        for statement in klass.body.body:
            if not isinstance(statement, cst.FunctionDef):
                body.append(statement)
                continue
            name = statement.name.value
            if name == "__init__":
                body.append(self._init(statement))
                continue
            if name not in HOOK_METHODS:
                body.append(statement)
                continue
            index, keras_params = HOOK_METHODS[name]
            new, marked = self._method(statement, order, keras_params, fetched)
            for node, message in marked:
                node = fetches.origin.get(node, node)  # after_run's statements, as the source has them
                if message == NOT_STOPPABLE:
                    stoppable.append((node, message))
                else:
                    left.append((node, message, original))
            if name == "after_create_session":
                begin_extra.extend(new.body.body)
                continue
            if index == 0:
                begin_index = len(body)
            body.append(new)
            for other in order[1:]:
                aliases.append(_emit.statement(f"{PHASE_METHODS[other][index]} = {PHASE_METHODS[order[0]][index]}"))
        if begin_extra:
            if begin_index is None:
                method = _emit.statement(f"def {PHASE_METHODS[order[0]][0]}(self, logs=None):\n    pass")
                body.append(method.with_changes(body=cst.IndentedBlock(body=begin_extra),
                                                leading_lines=[_emit.blank_line()]))
                for other in order[1:]:
                    aliases.append(_emit.statement(f"{PHASE_METHODS[other][0]} = {PHASE_METHODS[order[0]][0]}"))
            else:
                method = body[begin_index]
                body[begin_index] = method.with_changes(body=method.body.with_changes(body=[*method.body.body, *begin_extra]))
        if aliases:
            aliases[0] = aliases[0].with_changes(leading_lines=[_emit.blank_line()])
            body.extend(aliases)
        # The statement replaced keeps its own blank lines and comments above the class.
        new = klass.with_changes(bases=bases, body=klass.body.with_changes(body=body), leading_lines=())
        return new, left, stoppable

    def _init(self, init: cst.FunctionDef) -> cst.FunctionDef:
        for statement in init.body.body:
            if "super().__init__(" in _emit.code(statement) or "super(" in _emit.code(statement):
                return init
        first = _emit.statement("super().__init__()")
        statements = list(init.body.body)
        if statements and is_docstring(statements[0]):
            statements.insert(1, first)
        else:
            statements.insert(0, first)
        return init.with_changes(body=init.body.with_changes(body=statements))

    def _method(self, fn: cst.FunctionDef, phases: list[str], keras_params: str,
                fetched: str | None = None) -> tuple[cst.FunctionDef, list[tuple[cst.CSTNode, str]]]:
        """The callback method, and the statements of ``fn`` marked in it with why."""
        name = fn.name.value
        index = HOOK_METHODS[name][0]
        phase = phases[0]
        params = [p.name.value for p in fn.params.params[1:]]
        rewriter = _HookBody(params, phases, fetched or FETCHED)
        new_body = fn.body.visit(rewriter)
        marked = list(rewriter.marked)
        # Whatever still reads the hook method's parameters (an `if run_values.results > 1:`,
        # `if done: run_context.request_stop()` on one line, `*args`): the callback method has
        # other parameters, and it would raise a NameError there.
        seen = {node for node, _ in marked}
        for statement, read in _parameter_reads(new_body, _parameters(fn)):
            statement = rewriter.origin.get(statement, statement)
            if statement in seen:
                continue
            seen.add(statement)
            if read in ("session", "coord", "sess"):
                message = SESSION
            elif fetched is not None and name == "after_run" and read in params[1:2]:
                message = fetched  # `run_values`: what it held is not converted
            else:
                message = (f"`{read}`, a parameter of the hook's `{name}`, is read here, which the callback's "
                           f"`{PHASE_METHODS[phase][index]}` does not have")
            marked.append((statement, message))
        if not new_body.body:
            new_body = new_body.with_changes(body=[_emit.statement("pass")])
        header = _emit.statement(f"def {PHASE_METHODS[phase][index]}(self, {keras_params}):\n    pass")
        return fn.with_changes(name=header.name, params=header.params, body=new_body), marked


def _left_as_it_was(left: list[tuple[cst.CSTNode, str, cst.ClassDef]]) -> Unsupported:
    """The refusal of hook classes a callback could not run as they would be converted: the
    classes and the Estimator they are passed to stay as they were (a callback reading
    `run_values`, a `session` or the TF1 graph would raise at its first step), each statement
    left reported."""
    found = []
    for item in left:
        if item not in found:
            found.append(item)
    said = [(node, f"`{klass.name.value}` is not converted (nor the Estimator it is passed to): {message}")
            for node, message, klass in found]
    refusal = Unsupported(said[0][1], said[0][0], CODE)
    refusal.also = [(node, message, CODE) for node, message in said[1:]]
    return refusal


class _Traced(cst.CSTTransformer):
    """A transformer that keeps, for each statement it makes, the statement it made it from."""

    def __init__(self):
        super().__init__()
        self.origin: dict[cst.CSTNode, cst.CSTNode] = {}

    def on_leave(self, original_node, updated_node):
        result = super().on_leave(original_node, updated_node)
        if isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) \
                and isinstance(result, cst.CSTNode):
            self.origin[result] = self.origin.get(original_node, original_node)
        return result


class _HookBody(_Traced):
    """A hook method's body as a callback's: request_stop -> stop_training, fetches marked."""

    def __init__(self, params: list[str], phases: list[str], fetched: str = FETCHED):
        super().__init__()
        self.params = set(params)
        self.phases = phases
        self.fetched = fetched
        self.marked: list[tuple[cst.CSTNode, str]] = []

    def leave_SimpleStatementLine(self, original, updated):
        text = _emit.code(original)
        small = original.body[0] if len(original.body) == 1 else None
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = _emit.code(small.value.func)
            if func.endswith(".request_stop") and func.split(".")[0] in self.params and "train" not in self.phases:
                return self._mark(original, updated, NOT_STOPPABLE_ONLY)
            if func.endswith(".request_stop") and func.split(".")[0] in self.params:
                stop = _emit.statement("self.model.stop_training = True").with_changes(
                    leading_lines=updated.leading_lines, trailing_whitespace=updated.trailing_whitespace)
                if self.phases != ["train"]:  # the same method also runs in evaluate() or predict()
                    return self._mark(original, stop, NOT_STOPPABLE)
                return stop
            if func.startswith("super().") and func.split(".")[-1] in HOOK_METHODS:
                return cst.RemoveFromParent()
        if isinstance(small, cst.Return) and small.value is not None and "SessionRunArgs" in text:
            return self._mark(original, updated.with_changes(body=[cst.Pass()]), self.fetched)
        if "get_default_graph" in text or any(f".{lookup}(" in text for lookup in GRAPH_LOOKUPS):
            # A tensor looked up in the TF1 graph (for the fetches left above): a Keras
            # callback runs with no graph to look it up in (it would raise a KeyError).
            return self._mark(original, updated, GRAPH_LOOKUP)
        names = {n.value for n in _names(original)}
        if names & self.params:
            session = any(p in names for p in self.params if p in ("session", "coord", "sess"))
            return self._mark(original, updated, SESSION if session else self.fetched)
        return updated

    def _mark(self, original, updated, message):
        self.marked.append((original, message))
        line = cst.EmptyLine(comment=cst.Comment(f"{MARK_PREFIX}{CODE} {message}"))
        return updated.with_changes(leading_lines=[*updated.leading_lines, line])


def _parameters(fn: cst.FunctionDef) -> set[str]:
    """Every parameter name of ``fn`` but ``self``."""
    params = fn.params
    found = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            found.append(star)
    return {p.name.value for p in found} - {"self"}


def _parameter_reads(body: cst.CSTNode, names: set[str]) -> list[tuple[cst.CSTNode, str]]:
    """(the innermost statement, the name) of each read of ``names`` in ``body``: a name, not
    an attribute's or a keyword's."""
    found = []
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(body, None)]
    while stack:
        node, statement = stack.pop()
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            statement = node
        if isinstance(node, cst.Name):
            if node.value in names and statement is not None:
                found.append((statement, node.value))
            continue
        if isinstance(node, cst.Attribute):
            stack.append((node.value, statement))
            continue
        if isinstance(node, cst.Arg):
            stack.append((node.value, statement))
            continue
        stack.extend((child, statement) for child in reversed(node.children))
    return found


def _names(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        if isinstance(current, cst.Attribute):
            stack.append(current.value)  # `x.params` reads x, not a name `params`
            continue
        stack.extend(current.children)



SESSION_RUN_ARGS = frozenset({"train.SessionRunArgs", "estimator.SessionRunArgs"})
GRAPH_LOOKUPS = ("get_tensor_by_name", "as_graph_element")
#: Methods where a hook creates or looks up the tensors it fetches (the graph is built).
SETUP_METHODS = ("__init__", "begin", "after_create_session")


class _Fetches:
    """A hook that fetches values with ``SessionRunArgs`` and reads them in ``after_run``:
    when each value is one a Keras model still has (the loss, a compiled metric, the
    learning rate, the global step), ``run_values.results`` becomes those values read from
    ``logs`` and ``self.model``, and the code that only made the fetches goes. Otherwise the
    class is left to the marking of ``_HookBody``, with the value named."""

    def __init__(self, klass: cst.ClassDef, ctx, plan, phases: list[str]):
        self.klass, self.ctx, self.plan, self.phases = klass, ctx, plan, phases
        self.methods = {s.name.value: s for s in klass.body.body if isinstance(s, cst.FunctionDef)}
        #: A statement of the converted ``after_run`` -> the statement of the source it was.
        self.origin: dict[cst.CSTNode, cst.CSTNode] = {}

    def convert(self) -> tuple[cst.ClassDef, str | None]:
        """The class with its fetches converted, or as it was and why not."""
        before = self.methods.get("before_run")
        returned = _fetch_return(before, self.ctx) if before is not None else None
        if returned is None:
            return self.klass, None
        statement, fetches = returned
        after = self.methods.get("after_run")
        try:
            if self.phases != ["train"]:
                raise Unsupported(f"a hook that fetches values in {' and '.join(self.phases)} is not converted", statement)
            results, attributes = self._results(fetches, statement)
            setup = self._setup_statements(attributes, statement)
            new_after = self._after_run(after, results) if after is not None else None
            if new_after is not None and LOSS in _emit.code(results):
                new_after = _emit.with_comment(new_after, LOSS_NOTE)
        except Unsupported as exc:
            return self.klass, f"{exc.reason}; read the loss and metrics from `logs`, the weights from `self.model`"
        body = []
        for item in self.klass.body.body:
            if item is before:
                rest = [s for s in before.body.body if s is not statement]
                if any(not is_docstring(s) for s in rest):
                    body.append(before.with_changes(body=before.body.with_changes(body=rest)))
                continue
            if item is after:
                body.append(new_after)
                continue
            if isinstance(item, cst.FunctionDef) and item.name.value in SETUP_METHODS:
                rest = [s for s in item.body.body if s not in setup]
                if not rest:
                    continue  # it only made the fetches
                if all(is_docstring(s) for s in rest) and item.name.value != "__init__":
                    continue
                item = item.with_changes(body=item.body.with_changes(body=rest))
            body.append(item)
        return self.klass.with_changes(body=self.klass.body.with_changes(body=body)), None

    # -- what is fetched ------------------------------------------------------------------
    def _results(self, fetches: cst.BaseExpression, at: cst.CSTNode):
        """``run_values.results`` as a Keras expression, and the attributes the fetches read."""
        attributes: set[str] = set()

        def one(node: cst.BaseExpression) -> cst.BaseExpression:
            value = self._value(node, attributes)
            return cst.parse_expression(value.read.replace("model.", "self.model.", 1) if value.read.startswith("model.")
                                        else value.read)

        if isinstance(fetches, cst.Dict):
            elements = []
            for e in fetches.elements:
                if not isinstance(e, cst.DictElement):
                    raise Unsupported("fetches given with ** are not converted", e)
                elements.append(e.with_changes(value=one(e.value)))
            return fetches.with_changes(elements=elements), attributes
        if isinstance(fetches, (cst.List, cst.Tuple)):
            elements = []
            for e in fetches.elements:
                if isinstance(e, cst.StarredElement):
                    raise Unsupported("fetches given with * are not converted", e)
                elements.append(e.with_changes(value=one(e.value)))
            return fetches.with_changes(elements=elements), attributes
        return one(fetches), attributes

    def _value(self, node: cst.BaseExpression, attributes: set[str]) -> KerasValue:
        original = node
        node = self._attribute_or_argument(node, attributes)
        site = HookSite(self.plan, "train", lambda n: n)
        if isinstance(node, cst.Call):
            path = self.ctx.call_api_path(node) or ""
            if path in GLOBAL_STEP_CALLS:
                return KerasValue(GLOBAL_STEP, "the global step")
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in GRAPH_LOOKUPS and node.args:
                node = node.args[0].value
                if (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add)
                        and isinstance(node.right, cst.SimpleString) and node.right.evaluated_value == ":0"):
                    node = node.left  # `name + ":0"`: the tensor's name
                node = self._attribute_or_argument(node, set())  # `self.loss_name`: kept, it is not fetched
        if isinstance(node, cst.SimpleString):
            return keras_value(site, self.ctx, node)
        fetched, found = _emit.code(original), _emit.code(node)
        what = f"`{fetched}`" if fetched == found else f"`{fetched}` (`{found}`)"
        raise Unsupported(f"the hook fetches {what}, which is not the loss, "
                          "a compiled metric, the learning rate or the global step", original)

    def _attribute_or_argument(self, node: cst.BaseExpression, attributes: set[str]) -> cst.BaseExpression:
        """``self.x`` -> what the setup methods assign it; an ``__init__`` parameter -> what
        the instances are given."""
        if _self_attribute(node):
            attributes.add(node.attr.value)
            node = self._assigned(node.attr.value, node)
        if isinstance(node, cst.Name):
            node = self._constructor_argument(node)
        return node

    def _assigned(self, attribute: str, at: cst.CSTNode) -> cst.BaseExpression:
        """What ``self.<attribute>`` holds where ``at`` reads it: the last assignment that ran
        before, the setup methods running in their order (``__init__`` keeps the tensor's name,
        ``begin`` looks the tensor up by it; ``before_run`` fetches what ``begin`` made)."""
        found = []
        for order, name in enumerate(SETUP_METHODS):
            fn = self.methods.get(name)
            for index, statement in enumerate(fn.body.body if fn is not None else ()):
                small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and _self_attribute(small.targets[0].target) \
                        and small.targets[0].target.attr.value == attribute:
                    if self.ctx.within(at, (statement,)):
                        continue  # `self.x = f(self.x)` reads the value before it
                    found.append(((order, index), statement, small.value))
        if len(found) > 1:
            inside = [(order, fn) for order, fn in enumerate(self.methods.get(n) for n in SETUP_METHODS)
                      if fn is not None and self.ctx.within(at, (fn,))]
            if inside:
                order, fn = inside[0]
                here = next(i for i, statement in enumerate(fn.body.body) if self.ctx.within(at, (statement,)))
                found = [f for f in found if f[0] < (order, here)]
            found = sorted(found, key=lambda f: f[0])[-1:]
        if len(found) != 1:
            raise Unsupported(f"e2k cannot tell which value `self.{attribute}` holds when the hook fetches it", at)
        return found[0][2]

    def _constructor_argument(self, name: cst.Name) -> cst.BaseExpression:
        """A parameter of ``__init__``: the value every instantiation of the class gives it."""
        init = self.methods.get("__init__")
        params = [p.name.value for p in init.params.params[1:]] if init is not None else []
        if name.value not in params:
            return name
        from estimator2keras._units import accesses_of, bind_arguments

        values = set()
        given = None
        for read in accesses_of(self.ctx, self.klass.name) or []:
            call = self.ctx.parent(read)
            if not (isinstance(call, cst.Call) and call.func is read):
                raise Unsupported(f"`{self.klass.name.value}` is used otherwise than instantiated", read)
            arg = bind_arguments(call, tuple(params)).get(name.value)
            default = next((p.default for p in init.params.params[1:] if p.name.value == name.value), None)
            value = arg.value if arg is not None else default
            if value is None:
                raise Unsupported(f"`{self.klass.name.value}(...)` is not given `{name.value}`", call)
            values.add(_emit.code(value))
            given = value
        if len(values) != 1:
            raise Unsupported(f"the instances of `{self.klass.name.value}` fetch different values (`{name.value}`)", name)
        return given

    def _setup_statements(self, attributes: set[str], at: cst.CSTNode) -> set[cst.BaseStatement]:
        """The statements that only made the fetched attributes (they go)."""
        statements = set()
        for attribute in attributes:
            made = []  # the statements making it (`self.x = x` in __init__, then `self.x = f(self.x)`...)
            for name in SETUP_METHODS:
                fn = self.methods.get(name)
                for statement in fn.body.body if fn is not None else ():
                    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
                    if isinstance(small, cst.Assign) and _self_attribute(small.targets[0].target) \
                            and small.targets[0].target.attr.value == attribute:
                        made.append(statement)
                        if name != "__init__":  # __init__ keeps what it was given
                            statements.add(statement)
            uses = 0
            for fn in self.methods.values():
                for node in _walk(fn):
                    if _self_attribute(node) and node.attr.value == attribute and not any(
                            self.ctx.within(node, (statement,)) for statement in made):
                        uses += 1
            if uses > 1:  # its fetch: anything more reads the graph tensor itself
                raise Unsupported(f"`self.{attribute}` is used besides being fetched", at)
        return statements

    def _after_run(self, after: cst.FunctionDef, results: cst.BaseExpression) -> cst.FunctionDef:
        params = [p.name.value for p in after.params.params[1:]]
        if len(params) < 2:
            return after
        run_values = params[1]

        def is_results(node) -> bool:
            return (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
                    and node.value.value == run_values and node.attr.value == "results")

        class Results(_Traced):
            def leave_Assign(self, original, updated):
                # `step, loss = run_values.results`: the values unpacked from a tuple.
                if is_results(original.value) and isinstance(results, (cst.List, cst.Tuple)) \
                        and len(original.targets) == 1 and isinstance(original.targets[0].target, cst.Tuple):
                    return updated.with_changes(value=cst.Tuple(elements=results.deep_clone().elements, lpar=[], rpar=[]))
                return updated

            def leave_Subscript(self, original, updated):
                # `run_values.results["loss"]`, `run_values.results[0]`: that value itself.
                if is_results(original.value) and len(original.slice) == 1 and isinstance(original.slice[0].slice, cst.Index):
                    key = original.slice[0].slice.value
                    if isinstance(results, cst.Dict) and isinstance(key, cst.SimpleString):
                        for e in results.elements:
                            if isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == key.evaluated_value:
                                return e.value.deep_clone()
                    if isinstance(results, (cst.List, cst.Tuple)) and isinstance(key, cst.Integer) \
                            and int(key.value) < len(results.elements):
                        return results.elements[int(key.value)].value.deep_clone()
                return updated

            def leave_Attribute(self, original, updated):
                return results.deep_clone() if is_results(original) else updated

        results_of = Results()
        new = after.visit(results_of)
        self.origin.update(results_of.origin)
        for node in _walk(new.body):
            if isinstance(node, cst.Name) and node.value == run_values:
                raise Unsupported(f"`{run_values}` is read otherwise than `{run_values}.results`", after)
        return new


def _fetch_return(fn: cst.FunctionDef, ctx):
    """``return SessionRunArgs(fetches)`` as the last statement of ``before_run``."""
    statements = list(fn.body.body)
    if not statements or not isinstance(statements[-1], cst.SimpleStatementLine):
        return None
    small = statements[-1].body[0]
    if not (isinstance(small, cst.Return) and isinstance(small.value, cst.Call)):
        return None
    if ctx.call_api_path(small.value) not in SESSION_RUN_ARGS:
        return None
    from estimator2keras._units import bind_arguments

    try:
        args = bind_arguments(small.value, ("fetches", "feed_dict", "options"))
    except Unsupported:
        return None
    if set(args) != {"fetches"}:
        return None
    return statements[-1], args["fetches"].value


def _self_attribute(node) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"
