from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._hook_values import keras_value
from estimator2keras._tensorboard import tensorboard_callback
from estimator2keras._training import HookConversion, HookSite, model_dir_checkpoints
from estimator2keras._units import bind_arguments

SIGNATURES = {
    "NanTensorHook": ("loss_tensor", "fail_on_nan_loss"),
    "StopAtStepHook": ("num_steps", "last_step"),
    "LoggingTensorHook": ("tensors", "every_n_iter", "every_n_secs", "at_end", "formatter"),
    "CheckpointSaverHook": (
        "checkpoint_dir", "save_secs", "save_steps", "saver", "checkpoint_basename", "scaffold", "listeners",
        "save_graph_def"),
    "SummarySaverHook": ("save_steps", "save_secs", "output_dir", "summary_writer", "scaffold", "summary_op"),
    "StepCounterHook": ("every_n_steps", "every_n_secs", "output_dir", "summary_writer"),
    "ProfilerHook": ("save_steps", "save_secs", "output_dir", "show_dataflow", "show_memory"),
}
#: Hooks that only make sense while training.
TRAINING_ONLY = frozenset({"NanTensorHook", "StopAtStepHook", "CheckpointSaverHook", "SummarySaverHook", "StepCounterHook"})
NOT_MODEL_DIR = (
    "with a CheckpointSaverHook the Estimator saved here and not to its model_dir, so a later evaluate() or "
    "predict() read model_dir's older (or no) checkpoint; the Keras program uses the trained model"
)
NOT_BY_NAME = (
    "LoggingTensorHook logged graph tensors, which a Keras model does not expose by name: log them from a "
    "tf.keras.callbacks.Callback (the loss and metrics are in its `logs`, the weights in `self.model`)"
)

LOGGING_TENSOR_CALLBACK = '''
class {name}({tf}.keras.callbacks.Callback):
    """Logs values every `every_n_iter` training steps, as a tf.train.LoggingTensorHook logged
    the tensors that held them: `tensors` maps each tag to a function of the model and the
    step's `logs` (where the loss and compiled metrics are their means over the steps so far)."""

    def __init__(self, tensors, every_n_iter):
        super().__init__()
        self.tensors = tensors
        self.every_n_iter = every_n_iter

    def on_train_begin(self, logs=None):
        self.iteration = 0

    def on_train_batch_end(self, batch, logs=None):
        if self.iteration % self.every_n_iter == 0:
            values = [f"{{tag}} = {{float(value(self.model, logs)):g}}" for tag, value in self.tensors.items()]
            {tf}.get_logger().info(", ".join(values))
        self.iteration += 1
'''


class SessionRunHookToCallback(ExpressionRule):
    """TensorFlow's built-in SessionRunHooks become Keras callbacks, or what `fit` does instead.

    ## What it does
    Each hook passed to `train`/`evaluate`/`predict(hooks=...)`, `TrainSpec`/`EvalSpec(hooks=...)`
    or returned in `EstimatorSpec(training_hooks=..., evaluation_hooks=..., prediction_hooks=...)`
    is converted where it was used:

    | hook | Keras |
    |---|---|
    | `NanTensorHook(loss)` | `tf.keras.callbacks.TerminateOnNaN()` |
    | `StopAtStepHook(num_steps=N)` / `(last_step=N)` | the call's `steps=N` / `max_steps=N` (E2K003) |
    | `CheckpointSaverHook(dir, save_steps=N)` | `ModelDirCheckpoints(model, dir, save_steps=N, restore=False)` (see E2K402) |
    | `SummarySaverHook(save_steps=N, output_dir=dir)` | `tf.keras.callbacks.TensorBoard(dir, update_freq=N)` |
    | `LoggingTensorHook({"loss": loss})`, `StepCounterHook` | `fit`'s progress logging (loss, steps per second) |
    | `LoggingTensorHook(["learning_rate", "cross_entropy"], every_n_iter=N)` of other values | `LoggingTensorCallback({...}, every_n_iter=N)` (below) |

    A `LoggingTensorHook` logs graph tensors, given as tensors of the model_fn or by the
    names `tf.identity(value, "name")` gave them there. Those whose value a Keras model still
    has are logged by a `LoggingTensorCallback` (a small callback class added to the file),
    every N training steps from the start of each `fit`, as the hook did:

    | the tensor in the model_fn | read in the callback |
    |---|---|
    | the TRAIN `EstimatorSpec`'s `loss` (`tf.identity(loss, "cross_entropy")`) | `logs["loss"]` |
    | a `tf.metrics.*` value or update op (`accuracy[1]`, `acc_op`) computed as an `eval_metric_ops` entry is | `logs["<its key>"]` |
    | `tf.metrics.mean(loss)`'s value or update op (the mean loss) | `logs["loss"]` |
    | the learning rate given to the optimizer (`params["learning_rate"]`, a constant, a decayed rate) | `model.optimizer.learning_rate` |
    | `tf.train.get_global_step()`, or the name `"global_step"` | `model.optimizer.iterations - 1` (the step that ran) |

    A tensor with none of these counterparts (an activation, `tf.nn.softmax(logits,
    name="softmax_tensor")`, a name e2k does not find in the model_fn) leaves the hook
    unconverted, reported with the tensor it names.

    ## Why
    Keras has no sessions to hook into; callbacks are called at the same points (begin,
    before and after each step, end), and Keras has built-in callbacks for what the
    built-in hooks did.

    ## Fix safety
    Review. `NanTensorHook` raised `NanLossDuringTrainingError`; `TerminateOnNaN` stops
    training and the program goes on. `SummarySaverHook` wrote the graph's summary ops;
    `TensorBoard` writes the loss and compiled metrics; TensorFlow 2.20 and later need `pip
    install tensorboard` for it (it stops `fit` after the first batch without), and the
    report's finding for the hook says so, as E2K409's does. A `LoggingTensorHook` of tensors with
    no Keras counterpart, and hooks timed in seconds (`every_n_secs` of a `LoggingTensorHook`,
    `save_secs` of a `SummarySaverHook`, `ProfilerHook`), are not carried over and are reported.

    `LoggingTensorCallback` logs the same values at the same steps, but not quite the same
    numbers, which is why this stays a review and not a safe fix (training is not affected:
    the callback only reads): Keras reports the loss and metrics in `logs` as their means
    over the epoch's steps so far, where the hook printed the step's own loss (a
    `tf.metrics.*` update op was already such a running value). The callback runs after the
    step: the global step it logs is the count of steps before it (`iterations - 1`), the
    value the hook fetched with the step; a decayed learning rate is the step's own on Keras 2
    (TF 2.15) but the next step's on Keras 3 (measured).

    ## Limitations
    Hooks given a `saver`, `scaffold`, `summary_writer` or `listeners` are not converted
    (the unit is left as it was, E2K902), nor are other hooks without a rule. A
    `LoggingTensorHook` of named tensors converts for training only (`fit`), with
    `every_n_iter`.

    Hooks returned by a function of the same module (`hooks=get_train_hooks(...)`) convert
    when each `return` of the function is a list of hooks (or of names bound to hooks in it)
    that each become a callback reading only what the hook read (`LoggingTensorHook`,
    `NanTensorHook`; a `StepCounterHook` goes): the function returns the callbacks, and
    `fit` gets `callbacks=get_train_hooks(...)`. It must be called only by the Estimator calls
    that convert. `hooks_helper.get_train_hooks(...)` of TensorFlow's official models
    (`official.utils.logs`, `official.r1.utils.logs`) returns, whichever names it is given,
    hooks that only log or profile (the learning rate, loss and accuracy, examples per
    second, a profile): they go, reported, as `fit` logs the loss and metrics and the
    `TensorBoard` callback profiles. Any other function (in another module; hooks chosen at
    run time; a hook whose callback needs the model, such as a `CheckpointSaverHook`) leaves
    the unit reported (E2K902), naming the function and, when e2k can read it, the hooks it
    can return that e2k has no rule for.

    ## References
    - https://www.tensorflow.org/guide/migrate/logging_stop_hook
    - https://www.tensorflow.org/guide/migrate/sessionrunhook_callback
    - https://www.tensorflow.org/guide/migrate/checkpoint_saver
    """

    code = "E2K406"
    summary = "NanTensorHook, StopAtStepHook, CheckpointSaverHook, SummarySaverHook, LoggingTensorHook -> Keras callbacks"
    safety = Safety.REVIEW
    role = "hook"
    targets = tuple(f"{module}.{name}" for name in SIGNATURES for module in ("train", "estimator"))

    cases = [
        Case(
            id="stop-and-nan",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    logging_hook = tf.train.LoggingTensorHook({"loss": loss}, every_n_iter=10)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[logging_hook])


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, hooks=[tf.train.StopAtStepHook(num_steps=20), tf.train.NanTensorHook(None)])
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn(), steps_per_epoch=20, callbacks=[tf.keras.callbacks.TerminateOnNaN()])
''',
        ),
        Case(
            id="logging-named-tensors",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
logging_hook = tf.train.LoggingTensorHook({"probabilities": "softmax_tensor"}, every_n_iter=50)
estimator.train(input_fn, steps=100, hooks=[logging_hook])
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
# e2k: E2K406 LoggingTensorHook: the tensor 'softmax_tensor' is not named with tf.identity(..., 'softmax_tensor') in the model_fn, so e2k cannot tell what it holds; log it from a tf.keras.callbacks.Callback, or leave it out
model.fit(input_fn(), steps_per_epoch=100)
''',
            findings=('E2K406',),
        ),
        Case(
            id="logging-named-values",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode, params):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    optimizer = tf.train.GradientDescentOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, tf.train.get_global_step())
    tf.identity(params["learning_rate"], "learning_rate")
    tf.identity(loss, name="mse")
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, params={"learning_rate": 0.1})
logging_hook = tf.train.LoggingTensorHook(["global_step", "learning_rate", "mse"], every_n_iter=10)
estimator.train(input_fn, steps=100, hooks=[logging_hook])
''',
            after='''\
import tensorflow as tf

from e2k_helpers import LoggingTensorCallback


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def build_model(params):
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(params["learning_rate"])
    model.compile(optimizer=optimizer, loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model({"learning_rate": 0.1})
model.fit(input_fn(), steps_per_epoch=100, callbacks=[LoggingTensorCallback({
    "global_step": lambda model, logs: model.optimizer.iterations.numpy() - 1,
    "learning_rate": lambda model, logs: model.optimizer.learning_rate.numpy(),
    "mse": lambda model, logs: logs["loss"],
}, every_n_iter=10)])
''',
        ),
        Case(
            id="hooks-from-a-function",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    tf.identity(loss, name="mse")
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def get_train_hooks(every_n_iter):
    return [
        tf.train.LoggingTensorHook({"mse": "mse"}, every_n_iter=every_n_iter),
        tf.train.StepCounterHook(every_n_steps=every_n_iter),
    ]


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=100, hooks=get_train_hooks(10))
''',
            after='''\
import tensorflow as tf

from e2k_helpers import LoggingTensorCallback


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


def get_train_hooks(every_n_iter):
    return [
        LoggingTensorCallback({
            "mse": lambda model, logs: logs["loss"],
        }, every_n_iter=every_n_iter),
    ]


model = build_model()
model.fit(input_fn(), steps_per_epoch=100, callbacks=get_train_hooks(10))
''',
        ),
        Case(
            id="logging-an-activation",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    hidden = tf.layers.Dense(4, activation=tf.nn.relu)(features)
    logits = tf.layers.Dense(1)(hidden)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    tf.identity(hidden, name="hidden_activation")
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=100, hooks=[tf.train.LoggingTensorHook({"hidden": "hidden_activation"}, every_n_iter=10)])
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation=tf.nn.relu), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
# e2k: E2K406 LoggingTensorHook: the tensor 'hidden_activation' (`hidden` in the model_fn) is not the loss, a compiled metric, the learning rate or the global step: a Keras model does not expose it; log it from a tf.keras.callbacks.Callback, or leave it out
model.fit(input_fn(), steps_per_epoch=100)
''',
            findings=('E2K406',),
        ),
    ]

    def convert(self, call: cst.Call, ctx, tf: str, site: HookSite) -> HookConversion:
        self.ctx = ctx
        name = (ctx.call_api_path(call) or "").rsplit(".", 1)[-1]
        args = {k: a.value for k, a in bind_arguments(call, SIGNATURES[name]).items()}
        if name in TRAINING_ONLY and site.phase != "train":
            raise Unsupported(f"{name} outside training is not converted", call)
        for key in ("saver", "scaffold", "summary_writer", "listeners", "formatter"):
            if key in args and not _is_none(args[key]):
                raise Unsupported(f"{name}({key}=...) is not converted", args[key])
        return getattr(self, f"_{name}")(call, args, tf, site)

    def _NanTensorHook(self, call, args, tf, site):
        return HookConversion(callback=_emit.expr("{tf}.keras.callbacks.TerminateOnNaN()", tf=tf),
                              note="NanTensorHook -> tf.keras.callbacks.TerminateOnNaN")

    def _StopAtStepHook(self, call, args, tf, site):
        if ("num_steps" in args) == ("last_step" in args):
            raise Unsupported("StopAtStepHook needs exactly one of num_steps and last_step", call)
        if "num_steps" in args:
            return HookConversion(num_steps=args["num_steps"], note="StopAtStepHook(num_steps=N) -> fit for N steps")
        return HookConversion(last_step=args["last_step"], note="StopAtStepHook(last_step=N) -> fit up to global step N")

    def _LoggingTensorHook(self, call, args, tf, site):
        tensors = site.resolve(args["tensors"]) if "tensors" in args else None
        entries: list[tuple[str, cst.BaseExpression]] = []
        if isinstance(tensors, cst.Dict):
            for e in tensors.elements:
                if not (isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)):
                    return HookConversion(dropped=NOT_BY_NAME)
                entries.append((e.key.evaluated_value, e.value))
        elif isinstance(tensors, (cst.List, cst.Tuple)):
            for e in tensors.elements:
                if isinstance(e, cst.StarredElement):
                    return HookConversion(dropped=NOT_BY_NAME)
                label = e.value.evaluated_value if isinstance(e.value, cst.SimpleString) else _emit.code(e.value)
                entries.append((label, e.value))
        if entries and all(self._loss_or_step(v, site) for _, v in entries):
            return HookConversion(note="LoggingTensorHook of the loss -> fit's progress logging")
        if not entries:
            return HookConversion(dropped=NOT_BY_NAME)
        for key in ("every_n_secs", "at_end"):
            if key in args and not _is_none(args[key]) and _emit.code(args[key]) != "False":
                return HookConversion(dropped=f"LoggingTensorHook({key}=...) is not carried over: "
                                              "the callback it becomes logs every N steps")
        if "every_n_iter" not in args:
            return HookConversion(dropped=NOT_BY_NAME)
        if site.phase != "train":
            call_name = {"eval": "evaluate()", "predict": "predict()"}.get(site.phase, site.phase)
            return HookConversion(dropped=f"a LoggingTensorHook passed to {call_name} is not converted (the callback "
                                          "it would become logs training steps): log from a tf.keras.callbacks.Callback's "
                                          f"on_{'test' if site.phase == 'eval' else site.phase}_batch_end, or leave it out")
        values = []
        for label, node in entries:
            try:
                values.append((label, keras_value(site, self.ctx, node)))
            except Unsupported as exc:
                return HookConversion(dropped=f"LoggingTensorHook: {exc.reason}; log it from a "
                                              "tf.keras.callbacks.Callback, or leave it out")
        klass = site.plan.add_helper(
            "LoggingTensorCallback", lambda name: _emit.statements(LOGGING_TENSOR_CALLBACK, name=name, tf=tf))
        extra = " " * self._extra_indent(call)
        lines = "".join(f"\n{extra}    {_quote(label)}: lambda model, logs: {value.read}," for label, value in values)
        callback = cst.parse_expression(
            f"{klass}({{{lines}\n{extra}}}, every_n_iter={_emit.code(args['every_n_iter'])})")
        what = ", ".join(f"{label!r} ({value.what})" for label, value in values)
        return HookConversion(callback=callback, note=f"LoggingTensorHook of {what} -> a {klass} reading them "
                                                      "from the optimizer and fit's logs")

    def _extra_indent(self, call: cst.Call) -> int:
        """How far the hook's line is indented beyond its statement's (a hook on a line of
        its own in a list), for the lines of the callback that replaces it."""
        try:
            statement = self.ctx.enclosing_statement(call)
            line = self.ctx.position(call)[0]
            first = self.ctx.position(statement)[0]
            lines = self.ctx.module.code.splitlines()
            indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
            base = len(lines[first - 1]) - len(lines[first - 1].lstrip())
        except Exception:
            return 0
        return max(indent - base, 0)

    def _loss_or_step(self, value, site) -> bool:
        loss = site.plan.spec_loss
        if isinstance(value, cst.Name) and isinstance(loss, cst.Name) and value.value == loss.value and site.phase == "train":
            return True
        resolved = site.resolve(value)
        return isinstance(resolved, cst.Call) and _emit.code(resolved.func).endswith(("get_global_step", "get_or_create_global_step"))

    def _CheckpointSaverHook(self, call, args, tf, site):
        if ("save_steps" in args) == ("save_secs" in args):
            raise Unsupported("CheckpointSaverHook needs exactly one of save_steps and save_secs", call)
        saver = model_dir_checkpoints(site.plan, args["checkpoint_dir"], steps=args.get("save_steps"),
                                      secs=args.get("save_secs"), restore=False)
        given = args["checkpoint_dir"]
        if site.plan.model_dir is None or _emit.code(site.plan.model_dir) not in (
                _emit.code(given), _emit.code(site.resolve(given))):  # `params["model_dir"]` given the model_dir
            site.plan.leftover(call, self.code, NOT_MODEL_DIR)
        return HookConversion(callback=saver, note="CheckpointSaverHook -> a ModelDirCheckpoints callback that saves")

    def _SummarySaverHook(self, call, args, tf, site):
        if "save_secs" in args and not _is_none(args["save_secs"]):
            return HookConversion(dropped="SummarySaverHook(save_secs=...) is not carried over: Keras's TensorBoard "
                                          "callback writes every N steps (update_freq=N) or every epoch")
        if "output_dir" not in args or "save_steps" not in args:
            raise Unsupported("SummarySaverHook without output_dir and save_steps is not converted", call)
        callback, note = tensorboard_callback(tf, args["output_dir"], args["save_steps"], "SummarySaverHook")
        return HookConversion(callback=callback, note=note)

    def _StepCounterHook(self, call, args, tf, site):
        return HookConversion(note="StepCounterHook -> fit's progress logging (steps per second)")

    def _ProfilerHook(self, call, args, tf, site):
        return HookConversion(dropped="ProfilerHook is not carried over: profile with "
                                      "tf.keras.callbacks.TensorBoard(profile_batch=...)")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"
