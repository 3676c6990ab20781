from __future__ import annotations

import libcst as cst

from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._training import EarlyStop, HookConversion, HookSite
from estimator2keras._units import bind_arguments

SIGNATURE = ("estimator", "metric_name", "max_steps_without_improvement", "eval_dir", "min_steps",
             "run_every_secs", "run_every_steps")
MODES = {"stop_if_no_decrease_hook": "min", "stop_if_no_increase_hook": "max"}


class EarlyStoppingHookToCallback(ExpressionRule):
    """`stop_if_no_decrease_hook` / `stop_if_no_increase_hook` become `tf.keras.callbacks.EarlyStopping`.

    ## What it does
    In `train_and_evaluate(estimator, TrainSpec(..., hooks=[hook]), EvalSpec(...))`, an
    early-stopping hook becomes

    `tf.keras.callbacks.EarlyStopping(monitor="val_<metric>", patience=P, mode="min")`

    and `fit` evaluates where the Estimator did: after every checkpoint, that is every
    `save_checkpoints_steps` steps (E2K002 writes `epochs=max_steps // N, steps_per_epoch=N,
    validation_data=...`). The hook stopped when `step - best_step >= max_steps_without_decrease`;
    with an evaluation every N steps that is `patience = ceil(max_steps_without_decrease / N)`
    evaluations. `min_steps` becomes `start_from_epoch`.

    ## Why
    The hook read the evaluation results the Estimator wrote to `eval_dir` and asked the
    training session to stop; Keras's `EarlyStopping` reads the validation metrics of `fit`.

    ## Fix safety
    Review. The Estimator checked every `run_every_secs` (60 by default) or
    `run_every_steps`; Keras checks after each evaluation. With checks every step
    (`run_every_steps=1`) both stop at the same step (fixture `early_stopping`). With
    `run_every_steps` > 1 the hook checked at steps counted from the global step it read in
    the same run as the training op, which that op may or may not have incremented yet: it
    saw the evaluation that stopped training one or two steps after it, and the Estimator
    trained that many steps more (then evaluated and exported there), from one run of the
    same program to the next (measured on TF 2.15: 13 or 14 steps where Keras stops at 12).
    `e2k parity` reports it as a step-count difference; no conversion can reproduce a race.
    With a check every 60 seconds, the Estimator stopped later, or, in a program shorter
    than a minute, never.

    ## Limitations
    Needs `RunConfig(save_checkpoints_steps=N)`, `EvalSpec(throttle_secs=0)` is not needed
    (Keras evaluates at every epoch), and `TrainSpec(max_steps=...)` a multiple of N. A
    custom `eval_dir`, `stop_if_higher_hook` / `stop_if_lower_hook` and
    `make_early_stopping_hook` are not converted (E2K902).

    ## References
    - https://www.tensorflow.org/guide/migrate/early_stopping
    """

    code = "E2K408"
    summary = "stop_if_no_decrease_hook / stop_if_no_increase_hook -> tf.keras.callbacks.EarlyStopping on the validation metric"
    safety = Safety.REVIEW
    role = "hook"
    targets = tuple(f"{module}.{name}" for name in MODES for module in ("estimator.experimental", "contrib.estimator"))

    cases = [
        Case(
            id="no-decrease",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf.estimator.RunConfig(save_checkpoints_steps=100)
estimator = tf.estimator.Estimator(model_fn, config=config)
early_stopping = tf.estimator.experimental.stop_if_no_decrease_hook(
    estimator, "loss", max_steps_without_decrease=300, run_every_secs=None, run_every_steps=100)
train_spec = tf.estimator.TrainSpec(input_fn, max_steps=1000, hooks=[early_stopping])
eval_spec = tf.estimator.EvalSpec(input_fn, steps=10)
tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
# Evaluate after every checkpoint (every 100 steps), as train_and_evaluate did.
model.fit(
    input_fn(),
    epochs=10,
    steps_per_epoch=100,
    validation_data=input_fn().take(10),
    callbacks=[tf.keras.callbacks.EarlyStopping(monitor="val_loss", patience=3, mode="min")])
model.evaluate(input_fn(), steps=10)
''',
        ),
    ]

    def convert(self, call: cst.Call, ctx, tf: str, site: HookSite) -> HookConversion:
        name = (ctx.call_api_path(call) or "").rsplit(".", 1)[-1]
        args = {k: a.value for k, a in bind_arguments(call, SIGNATURE).items()}
        if site.phase != "train":
            raise Unsupported("an early-stopping hook outside training is not converted", call)
        estimator = args.get("estimator")
        if not (isinstance(estimator, cst.Name) and estimator.value == site.plan.unit.var):
            raise Unsupported("the early-stopping hook watches another Estimator", call)
        if "eval_dir" in args and not (isinstance(args["eval_dir"], cst.Name) and args["eval_dir"].value == "None"):
            raise Unsupported("early stopping on a custom eval_dir is not converted", args["eval_dir"])
        metric = args.get("metric_name")
        if not isinstance(metric, cst.SimpleString):
            raise Unsupported("the early-stopping metric is not a string literal", call)
        limit = args.get("max_steps_without_improvement") or _keyword(call, "max_steps_without_decrease", "max_steps_without_increase")
        if limit is None:
            raise Unsupported("the early-stopping hook has no max_steps_without_decrease", call)
        stop = EarlyStop(metric.evaluated_value, MODES[name], limit, args.get("min_steps"), call)
        note = f"{name} -> tf.keras.callbacks.EarlyStopping on val_{stop.metric}"
        every = args.get("run_every_steps")
        if not (isinstance(every, cst.Integer) and every.evaluated_value == 1):
            note += (" (the Estimator's hook, checking every run_every_steps > 1 steps or on a timer, stopped a step "
                     "or more after the evaluation that stopped it; Keras stops at that evaluation)")
        return HookConversion(early_stop=stop, estimator_arg=estimator, note=note)


def _keyword(call: cst.Call, *names: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in names:
            return arg.value
    return None
