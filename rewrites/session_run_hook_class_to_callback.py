from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import MARK_PREFIX
from estimator2keras._edits import is_docstring
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._training import PHASE_METHODS

#: SessionRunHook method -> (index into PHASE_METHODS, the Keras parameters after self).
HOOK_METHODS = {
    "begin": (0, "logs=None"),
    "after_create_session": (0, "logs=None"),
    "before_run": (1, "batch, logs=None"),
    "after_run": (2, "batch, logs=None"),
    "end": (3, "logs=None"),
}
FETCHED = (
    "a SessionRunHook fetched graph tensors here (SessionRunArgs / run_values), which Keras does not "
    "expose by name: read the loss and metrics from `logs`, the weights from `self.model`"
)
SESSION = "a SessionRunHook used its session here; a Keras callback has none (use `self.model`)"
NOT_STOPPABLE = (
    "a callback stops fit but not evaluate() or predict(), which this hook also stopped under the Estimator"
)
CODE = "E2K407"


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

    ## Fix safety
    Review. What a hook fetched from the graph (`return SessionRunArgs(...)` in `before_run`,
    `run_values` in `after_run`) and what it did with its `session` has no Keras counterpart:
    those lines are kept, marked `# e2k: E2K407`, and reported, and must be rewritten to read
    `logs` (the loss and metrics) or `self.model`.

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
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn(), steps_per_epoch=1000, callbacks=[TimingHook()])
''',
        ),
    ]

    def convert(self, call, ctx, tf, site):  # instances are converted through their class
        raise Unsupported("a SessionRunHook base class is not a hook", call)

    def convert_class(self, klass: cst.ClassDef, ctx, tf: str, plan, phases: list[str]) -> cst.ClassDef:
        order = [p for p in ("train", "eval", "predict") if p in phases]
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
            new = self._method(statement, ctx, plan, order, keras_params)
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
        return klass.with_changes(bases=bases, body=klass.body.with_changes(body=body), leading_lines=())

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

    def _method(self, fn: cst.FunctionDef, ctx, plan, phases: list[str], keras_params: str) -> cst.FunctionDef:
        name = fn.name.value
        index = HOOK_METHODS[name][0]
        phase = phases[0]
        params = [p.name.value for p in fn.params.params[1:]]
        rewriter = _HookBody(params, phases)
        new_body = fn.body.visit(rewriter)
        for node, message in rewriter.marked:
            plan.leftover_marked_in_new_code(node, CODE, message)
        if not new_body.body:
            new_body = new_body.with_changes(body=[_emit.statement("pass")])
        header = _emit.statement(f"def {PHASE_METHODS[phase][index]}(self, {keras_params}):\n    pass")
        return fn.with_changes(name=header.name, params=header.params, body=new_body)


class _HookBody(cst.CSTTransformer):
    """A hook method's body as a callback's: request_stop -> stop_training, fetches marked."""

    def __init__(self, params: list[str], phases: list[str]):
        super().__init__()
        self.params = set(params)
        self.phases = phases
        self.marked: list[tuple[cst.CSTNode, str]] = []

    def leave_SimpleStatementLine(self, original, updated):
        text = _emit.code(original)
        small = original.body[0] if len(original.body) == 1 else None
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = _emit.code(small.value.func)
            if func.endswith(".request_stop") and func.split(".")[0] in self.params and "train" in self.phases:
                stop = _emit.statement("self.model.stop_training = True").with_changes(
                    leading_lines=updated.leading_lines, trailing_whitespace=updated.trailing_whitespace)
                if self.phases != ["train"]:  # the same method also runs in evaluate() or predict()
                    return self._mark(original, stop, NOT_STOPPABLE)
                return stop
            if func.startswith("super().") and func.split(".")[-1] in HOOK_METHODS:
                return cst.RemoveFromParent()
        if isinstance(small, cst.Return) and small.value is not None and "SessionRunArgs" in text:
            return self._mark(original, updated.with_changes(body=[cst.Pass()]), FETCHED)
        names = {n.value for n in _names(original)}
        if names & self.params:
            session = any(p in names for p in self.params if p in ("session", "coord", "sess"))
            return self._mark(original, updated, SESSION if session else FETCHED)
        return updated

    def _mark(self, original, updated, message):
        self.marked.append((original, message))
        line = cst.EmptyLine(comment=cst.Comment(f"{MARK_PREFIX}{CODE} {message}"))
        return updated.with_changes(leading_lines=[*updated.leading_lines, line])


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

