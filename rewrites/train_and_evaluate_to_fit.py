from __future__ import annotations

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from estimator2keras import _emit
from estimator2keras import _eval_result as eval_result
from estimator2keras._constants import integer_of
from estimator2keras._export import (
    best_export, export_path, export_signatures, model_dir_base, save_statement, serving_function, signature_names,
    signatures_dict,
)
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._training import (
    Hooks, call_hooks, callbacks_arg, guarded_fit, method_call, min_of, module_resolver, needs_step_guard,
    start_step,
)
from estimator2keras._units import Binding, bind_arguments, resolve, resolve_call, resolve_input_fn

TRAIN_SPEC = frozenset({"estimator.TrainSpec"})
EVAL_SPEC = frozenset({"estimator.EvalSpec"})
TRAIN_SPEC_SIGNATURE = ("input_fn", "max_steps", "hooks", "saving_listeners")
EVAL_SPEC_SIGNATURE = ("input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs", "throttle_secs")
TRAIN_AND_EVALUATE_SIGNATURE = ("estimator", "train_spec", "eval_spec")
#: EvalSpec's default number of evaluation steps.
EVAL_SPEC_DEFAULT_STEPS = 100
EXPORTERS = frozenset({"estimator.FinalExporter", "estimator.LatestExporter"})
BEST_EXPORTER = "estimator.BestExporter"
EXPORTER_SIGNATURE = ("name", "serving_input_receiver_fn", "assets_extra", "as_text", "exports_to_keep")
BEST_EXPORTER_SIGNATURE = ("name", "serving_input_receiver_fn", "event_file_pattern", "compare_fn", "assets_extra",
                           "as_text", "exports_to_keep")
#: fit's last epoch cut short at TrainSpec(max_steps=...) (not a multiple of the epochs' steps).
STOP_AT_STEP = '''
class {name}({tf}.keras.callbacks.Callback):
    """Stops training at a global step, as TrainSpec(max_steps=...) did: in the
    middle of an epoch if need be, which Keras still evaluates as it ends."""

    def __init__(self, last_step):
        super().__init__()
        self.last_step = last_step

    def on_train_batch_end(self, batch, logs=None):
        if self.model.optimizer.iterations.numpy() >= self.last_step:
            self.model.stop_training = True
'''
TIMING_NOTES = {
    "throttle_secs": "EvalSpec(throttle_secs=...): fit evaluates at fixed steps (or once, after training), not by time",
    "start_delay_secs": "EvalSpec(start_delay_secs=...) only delayed a separate evaluator job; there is none",
    "name": "EvalSpec(name=...) named the Estimator's eval_<name> directory; Keras returns the metrics",
}


class TrainAndEvaluateToFit(UnitRule):
    """train_and_evaluate(estimator, TrainSpec, EvalSpec) becomes `fit` then `evaluate`.

    ## What it does
    Replaces `tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)` with
    `model.fit(<train dataset>)` followed by `model.evaluate(<eval dataset>)`, and removes the
    `TrainSpec` / `EvalSpec` that only served it.

    - `TrainSpec(max_steps=N)` becomes `fit(..., steps_per_epoch=N)`; when the model may
      already be past step 0 (restored from `model_dir`, trained before), only the steps left
      to N are trained, as the Estimator did.
    - `EvalSpec(steps=N)` becomes `evaluate(..., steps=N)`; EvalSpec's default of 100 steps
      is written out when the eval input may repeat forever, and left out when it ends.
    - The specs' `hooks` become callbacks of `fit` and `evaluate` (E2K406-E2K408).
    - With `EvalSpec(throttle_secs=0)` and `RunConfig(save_checkpoints_steps=N)`, or with an
      early-stopping hook, `fit` evaluates every N steps as the Estimator evaluated every
      checkpoint: `fit(..., epochs=max_steps // N, steps_per_epoch=N,
      validation_data=<eval dataset>.take(steps))`: each evaluation reads the eval input anew,
      as the Estimator's did. Where `max_steps` is no multiple of N, or a flag
      (`max_steps=args.max_steps`), the Estimator's last round was shorter, ended by a
      checkpoint and its evaluation: `epochs=(args.max_steps + N - 1) // N` and a
      `StopAtStep(args.max_steps)` callback stopping the last epoch there (Keras evaluates an
      epoch stopped early as it ends); a model that may already be at `max_steps` (restored
      from its model_dir) takes no step (fixture `early_stopping_max_steps_flag`).
    - `throttle_secs`, `start_delay_secs` and `name` are accounted for (reported).

    ## Why
    `train_and_evaluate` trains until the input ends or `max_steps`, evaluates new
    checkpoints while it trains, and evaluates the final one. On one machine, `fit` (with
    `validation_data` where evaluations were placed) followed by `evaluate` does the same.

    ## Fix safety
    Safe for the final evaluation. Evaluations timed in seconds (`throttle_secs`, 600 by
    default, against checkpoints every `save_checkpoints_secs`) cannot be placed at a step;
    the Keras program evaluates once, at the end. `start_delay_secs` only delayed a separate
    evaluator job. An assignment of the result (or `return train_and_evaluate(...)`) becomes
    the `evaluate(..., return_dict=True)` dict and the list of exports; an assignment's reads
    are checked as E2K003 checks `evaluate()`'s
    (`metrics["global_step"]` reads `model.optimizer.iterations`, a key the Keras dict lacks is
    marked at the read). When `max_steps` was already reached (a restored
    model), the Estimator skipped training and returned no metrics; the Keras program still
    evaluates.

    - `EvalSpec(exporters=[FinalExporter(name, serving_input_receiver_fn)])` (or a
      `LatestExporter`) exports the trained model to `model_dir/export/<name>/<timestamp>`
      with the serving signature the Estimator exported (E2K007), and the assigned result's
      export list holds those paths. The name may be an expression (a flag holding an export
      directory: `os.path.join` keeps the Estimator's meaning, an absolute name winning); where
      the model_dir may be None when the program runs, the path falls back to the checkpoints
      callback's directory (`args.job_dir or checkpoints.directory`), the temporary
      one the Estimator would have used. An exporter (or a
      serving function's alias) bound alike in each branch of an if/elif is that one exporter.

    - `BestExporter` exported after each evaluation whose loss was the lowest so far, keeping
      the newest `exports_to_keep`. Where `fit` evaluates periodically, a `BestExport` callback
      does the same after each of its evaluations (`val_loss`), into
      `model_dir/export/<name>/<timestamp>`; where the Estimator evaluated once, at the end, that
      evaluation was the best and the model is exported then, as by a `FinalExporter`.
      BestExporter also compared with the evaluations an earlier run left in the model_dir's
      eval events: `BestExport` keeps the lowest loss it exported at in
      `export/<name>/best_loss` and reads it when the program runs again. With the one
      evaluation at the end, that is converted only in a fresh model_dir (`tempfile.mkdtemp()`,
      trained once). A `compare_fn` other than the loss is reported.

    ## Limitations
    Saving listeners are reported (E2K902), not converted. A
    `LatestExporter` exported after every evaluation (keeping `exports_to_keep`); the Keras
    program exports once, the final model, which is the newest export it kept.

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    - https://www.tensorflow.org/guide/migrate/evaluator
    - https://www.tensorflow.org/guide/migrate/early_stopping
    """

    code = "E2K002"
    summary = "train_and_evaluate(est, TrainSpec, EvalSpec) -> model.fit(...) + model.evaluate(...)"
    safety = Safety.SAFE
    order = 50

    cases = [
        Case(
            id="specs",
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
train_spec = tf.estimator.TrainSpec(input_fn, max_steps=10)
eval_spec = tf.estimator.EvalSpec(input_fn)
tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
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
model.fit(input_fn(), steps_per_epoch=10)
model.evaluate(input_fn(), steps=100)
''',
        ),
        Case(
            id="final-exporter",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]] * 4}, [[2.0]] * 4)).batch(2)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


serving_input_fn = tf.estimator.export.build_raw_serving_input_receiver_fn({"x": tf.zeros([1, 2])})
estimator = tf.estimator.Estimator(model_fn, model_dir="/tmp/model")
train_spec = tf.estimator.TrainSpec(input_fn, max_steps=4)
exporter = tf.estimator.FinalExporter("serving", serving_input_fn)
eval_spec = tf.estimator.EvalSpec(input_fn, exporters=[exporter])
metrics, exports = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K402 ModelDirCheckpoints restores and saves checkpoints in model_dir, as the Estimator did.
import os
import time

import tensorflow as tf

from e2k_helpers import ModelDirCheckpoints, serving_signature


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]] * 4}, [[2.0]] * 4)).batch(2)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.logits(features["x"])

    def predict_step(self, data):
        features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
        logits = self(features, training=False)
        return {"logits": logits}


def build_model():
    model = Model()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


# The serving signature the Estimator exported: one input per feature, predictions out.
@tf.function(input_signature=[serving_signature({"x": tf.zeros([1, 2])})])
def serving_input_fn(features):
    return model.predict_step(features)


model = build_model()
checkpoints = ModelDirCheckpoints(model, "/tmp/model", save_secs=600)
# max_steps counts from global step 0, as in the Estimator: train only the steps left.
steps_left = 4 - checkpoints.global_step()
if steps_left > 0:
    model.fit(input_fn(), steps_per_epoch=steps_left, callbacks=[checkpoints])
metrics = model.evaluate(input_fn(), callbacks=[checkpoints], return_dict=True)
export_path = os.fsencode(os.path.join("/tmp/model", "export", "serving", str(int(time.time()))))
tf.saved_model.save(model, export_path, signatures={"serving_default": serving_input_fn})
exports = [export_path]
''',
        ),
        Case(
            id="best-exporter",
            before='''\
import tempfile

import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[2.0], [4.0]])).repeat().batch(2)


def model_fn(features, labels, mode):
    predictions = tf.layers.Dense(1)(features["x"])
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.mean_squared_error(labels, predictions)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


model_dir = tempfile.mkdtemp()
config = tf.estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=5)
estimator = tf.estimator.Estimator(model_fn, config=config)
serving_input_fn = tf.estimator.export.build_raw_serving_input_receiver_fn({"x": tf.placeholder(tf.float32, [None, 1])})
exporter = tf.estimator.BestExporter(serving_input_receiver_fn=serving_input_fn, exports_to_keep=3)
tf.estimator.train_and_evaluate(
    estimator,
    tf.estimator.TrainSpec(input_fn, max_steps=10),
    tf.estimator.EvalSpec(input_fn, steps=1, exporters=[exporter], throttle_secs=0))
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K402 ModelDirCheckpoints restores and saves checkpoints in model_dir, as the Estimator did.
import os
import tempfile

import tensorflow as tf

from e2k_helpers import BestExport, ModelDirCheckpoints


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[2.0], [4.0]])).repeat().batch(2)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.predictions = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.predictions(features["x"])


def build_model():
    model = Model()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model_dir = tempfile.mkdtemp()
model = build_model()
checkpoints = ModelDirCheckpoints(model, model_dir, save_steps=5)


# The serving signature the Estimator exported: one input per feature, predictions out.
@tf.function(input_signature=[{"x": tf.TensorSpec([None, 1], tf.float32, name="x")}])
def serving_input_fn(features):
    return {"output": model.predict_step(features)}


best_exporter = BestExport(
    os.path.join(model_dir, "export", "best_exporter"),
    {"serving_default": serving_input_fn},
    exports_to_keep=3)
# Evaluate after every checkpoint (every 5 steps), as train_and_evaluate did.
model.fit(
    input_fn(),
    epochs=2,
    initial_epoch=checkpoints.global_step() // 5,
    steps_per_epoch=5,
    validation_data=input_fn().take(1),
    callbacks=[checkpoints, best_exporter])
model.evaluate(input_fn(), steps=1, callbacks=[checkpoints])
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        params = unit.arg_value("params")
        resolve = module_resolver(ctx, plan)
        for use in plan.uses("train_and_evaluate"):
            call = use.call
            args = bind_arguments(call, TRAIN_AND_EVALUATE_SIGNATURE)
            train_call, train_binding = resolve_call(ctx, args["train_spec"].value, TRAIN_SPEC)
            eval_call, eval_binding = resolve_call(ctx, args["eval_spec"].value, EVAL_SPEC)
            if train_call is None or eval_call is None:
                raise Unsupported("the TrainSpec or EvalSpec is not one e2k can follow", call)
            plan.owned.extend([train_call, eval_call])
            train = bind_arguments(train_call, TRAIN_SPEC_SIGNATURE)
            evaluation = bind_arguments(eval_call, EVAL_SPEC_SIGNATURE)
            if "saving_listeners" in train and not _is_none(train["saving_listeners"].value):
                raise Unsupported("TrainSpec(saving_listeners=...) is not converted yet", train["saving_listeners"])
            train_hooks = call_hooks(plan, ctx, "train", train.get("hooks"), resolve)
            eval_hooks = call_hooks(plan, ctx, "eval", evaluation.get("hooks"), resolve)
            if eval_hooks.num_steps or eval_hooks.last_step or eval_hooks.early_stops:
                raise Unsupported("a training hook (StopAtStepHook, early stopping) in the EvalSpec", eval_call)
            if train_hooks.num_steps:
                raise Unsupported("StopAtStepHook(num_steps=...) in a TrainSpec is not converted", train_call)
            max_steps = min_of(
                [v for v in [_value(train, "max_steps")] if v is not None] + train_hooks.last_step, train_call, "max_steps")

            train_input = resolve_input_fn(ctx, train["input_fn"].value)
            eval_input = resolve_input_fn(ctx, evaluation["input_fn"].value)
            if max_steps is None and train_input.may_repeat(ctx, "train"):
                raise Unsupported(
                    "TrainSpec without max_steps on an input that repeats forever: the Estimator trained until "
                    "stopped, Keras fit (TF 2.15) needs a step count", train_call)
            plan.register_input_fn(train_input)
            plan.register_input_fn(eval_input)
            eval_steps = None
            if "steps" in evaluation:
                if not _is_none(evaluation["steps"].value):
                    eval_steps = evaluation["steps"].value
            elif eval_input.may_repeat(ctx, "eval"):
                eval_steps = cst.Integer(str(EVAL_SPEC_DEFAULT_STEPS))
            self._claim_timing(evaluation, plan)

            model = plan.model_var
            dataset = [cst.Arg(plan.dataset(train_input.call_expression(plan.params_for("train"), "train")))]
            periodic = self._periodic(unit, train_hooks, evaluation, max_steps, train_call, ctx)
            fit_callbacks: list[cst.BaseExpression] = []
            exports, paths, export_callbacks = self._exporters(
                unit, evaluation.get("exporters"), plan, ctx, resolve, periodic is not None)
            fit_statements: list[cst.BaseStatement]
            if periodic is not None:
                named = []
                for callback in export_callbacks:
                    name = plan.unique_name("best_exporter")
                    named.append(_emit.fit_line(_emit.statement("{n} = {c}", n=name, c=callback), _depth(ctx, call),
                                                ctx.module.default_indent))
                    fit_callbacks.append(cst.Name(name))
                fit_statements = [*named, self._periodic_fit(plan, ctx, call, periodic, dataset, eval_input, params,
                                                             eval_steps, train_hooks, eval_hooks, max_steps,
                                                             fit_callbacks)]
            else:
                more = [a for a in [callbacks_arg(plan, train_hooks, training=True)] if a is not None]
                more += list(plan.fit_keywords)
                if max_steps is not None and needs_step_guard(plan, ctx, call):
                    fit_statements = guarded_fit(plan, max_steps, dataset, more)
                else:
                    steps = [_emit.keyword_arg("steps_per_epoch", max_steps)] if max_steps is not None else []
                    fit = method_call(model, "fit", [*dataset, *steps, *more])
                    fit_statements = [_emit.fit_line(_emit.statement("{c}", c=fit), _depth(ctx, call), ctx.module.default_indent)]

            eval_args = [cst.Arg(plan.dataset(eval_input.call_expression(plan.params_for("eval"), "eval")))]
            if eval_steps is not None:
                eval_args.append(_emit.keyword_arg("steps", eval_steps))
            eval_callbacks = callbacks_arg(plan, eval_hooks, training=False)
            if eval_callbacks is not None:
                eval_args.append(eval_callbacks)
            statement = ctx.enclosing_statement(call)
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
            if isinstance(small, cst.Expr) and small.value is call:
                evaluate = method_call(model, "evaluate", eval_args)
                new = [*fit_statements, _emit.statement("{c}", c=evaluate), *exports]
            elif isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1:
                eval_args.append(_emit.keyword_arg("return_dict", cst.Name("True")))
                evaluate = method_call(model, "evaluate", eval_args)
                assigned = self._assign_result(small.targets[0].target, evaluate, paths)
                result = small.targets[0].target  # (eval_result, export_results) unpacked
                if isinstance(result, (cst.Tuple, cst.List)) and len(result.elements) == 2 \
                        and isinstance(result.elements[0].value, cst.Name):
                    eval_result.check_reads(result.elements[0].value, plan, ctx, self.code)
                new = [*fit_statements, assigned[0], *exports, *assigned[1:]]  # exported after the last evaluation
            elif isinstance(small, cst.Return) and small.value is call:
                # `return tf.estimator.train_and_evaluate(...)`: what it returned, (eval_result,
                # export_results), the evaluation's metrics and the exporters' paths.
                eval_args.append(_emit.keyword_arg("return_dict", cst.Name("True")))
                evaluate = method_call(model, "evaluate", eval_args)
                metrics = plan.unique_name("eval_result")
                new = [*fit_statements, _emit.statement("{t} = {e}", t=metrics, e=evaluate), *exports,
                       _emit.statement(f"return {metrics}, [{', '.join(paths)}]")]
            else:
                raise Unsupported("train_and_evaluate(...) is used inside an expression e2k does not rewrite", call)
            plan.replace_statement(statement, new)
            plan.remove_binding_if_only_here(train_binding, args["train_spec"].value)
            plan.remove_binding_if_only_here(eval_binding, args["eval_spec"].value)
            plan.claim_use(use)
            plan.fixed(call, self.code, "train_and_evaluate -> fit + evaluate")

    def _claim_timing(self, evaluation, plan) -> None:
        for name in ("throttle_secs", "start_delay_secs", "name"):
            if name in evaluation:
                plan.fixed(evaluation[name], self.code, TIMING_NOTES[name])

    def _periodic(self, unit, hooks, evaluation, max_steps, train_call, ctx) -> int | None:
        """Every how many steps `fit` evaluates (the checkpoint interval), or None for once at the end.

        The Estimator evaluated each new checkpoint once `throttle_secs` had passed: at every
        checkpoint with `throttle_secs=0`; early stopping needs those evaluations too.
        """
        throttle = evaluation.get("throttle_secs")
        every_checkpoint = throttle is not None and _emit.code(throttle.value) == "0"
        if not hooks.early_stops and not every_checkpoint:
            return None
        interval = unit.config_value("save_checkpoints_steps")
        why = "early stopping" if hooks.early_stops else "EvalSpec(throttle_secs=0)"
        if not isinstance(interval, cst.Integer):
            if not hooks.early_stops:
                return None  # time-based checkpoints: the evaluations cannot be placed; the final one is kept
            given = "save_checkpoints_steps" in unit.config_args
            raise Unsupported(
                f"{why} needs the evaluations at every checkpoint: RunConfig(save_checkpoints_steps=N) with a "
                "literal N says where they were" + ("" if given else " (with no such setting the Estimator "
                "checkpointed every 600 seconds, at steps no conversion can know)"), hooks.early_stops[0].node)
        steps = interval.evaluated_value
        total = integer_of(ctx, max_steps)  # a literal, or a constant (MAX_STEPS = 60)
        if not (total is not None and total % steps == 0):
            if not hooks.early_stops:
                return None
            if max_steps is None:
                raise Unsupported(f"{why} with no TrainSpec(max_steps=...): the Estimator trained until the input ended "
                                  "or the hook stopped it, which fit's epochs of a fixed number of steps cannot say",
                                  train_call)
            # `max_steps=FLAGS.max_steps`: the last round of steps may be shorter (StopAtStep).
        return steps

    def _periodic_fit(self, plan, ctx, call, steps, dataset, eval_input, params, eval_steps, train_hooks, eval_hooks,
                      max_steps, export_callbacks=()):
        model = plan.model_var
        total = integer_of(ctx, max_steps)
        stop = None
        if total is not None and total % steps == 0:
            epochs = cst.Integer(str(total // steps)) if isinstance(max_steps, cst.Integer) \
                else _emit.expr("{m} // {s}", m=max_steps, s=str(steps))
        else:
            # The Estimator checkpointed (and evaluated) every `steps` and at max_steps: the last
            # epoch stops there, and Keras evaluates it as it ends.
            epochs = cst.Integer(str(-(-total // steps))) if total is not None \
                else _emit.expr("({m} + {r}) // {s}", m=max_steps, r=str(steps - 1), s=str(steps))
            helper = plan.add_helper("StopAtStep", lambda name: _emit.statements(STOP_AT_STEP, name=name, tf=plan.tf))
            stop = _emit.expr("{h}({m})", h=helper, m=max_steps.deep_clone())
        fit_args = [*dataset, _emit.keyword_arg("epochs", epochs)]
        if plan.may_restore:
            fit_args.append(_emit.keyword_arg(
                "initial_epoch", _emit.expr("{s} // {n}", s=start_step(plan), n=str(steps))))
        fit_args.append(_emit.keyword_arg("steps_per_epoch", cst.Integer(str(steps))))
        validation = plan.dataset(eval_input.call_expression(plan.params_for("eval"), "eval"))
        if eval_steps is not None:
            # Each evaluation read the eval input anew for N steps: `.take(N)`. Keras 2's
            # `validation_steps=N` reuses one iterator, and a finite input shorter than N
            # was evaluated after the first epoch only.
            if not isinstance(validation, (cst.Call, cst.Name, cst.Attribute)):
                validation = validation.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            validation = _emit.expr("{d}.take({n})", d=validation, n=eval_steps.deep_clone())
        fit_args.append(_emit.keyword_arg("validation_data", validation))
        hooks = Hooks()
        hooks.extend(train_hooks)
        hooks.callbacks += [c.deep_clone() for c in eval_hooks.callbacks]
        for early_stop in train_hooks.early_stops:
            hooks.callbacks.append(self._early_stopping(plan, early_stop, steps))
        if stop is not None:
            hooks.callbacks.append(stop)
        hooks.callbacks += list(export_callbacks)
        callbacks = callbacks_arg(plan, hooks, training=True)
        if callbacks is not None:
            fit_args.append(callbacks)
        fit_args += list(plan.fit_keywords)
        fit = method_call(model, "fit", fit_args)
        guarded = stop is not None and needs_step_guard(plan, ctx, call)
        statement = _emit.fit_line(_emit.statement("{c}", c=fit), _depth(ctx, call) + guarded, ctx.module.default_indent)
        if guarded:  # StopAtStep stops after a step: a model already at max_steps must not take one
            statement = _emit.statement("if {s} < {m}:\n    pass", s=start_step(plan), m=max_steps.deep_clone()).with_changes(
                body=cst.IndentedBlock(body=[statement]))
        return _emit.with_comment(statement, f"Evaluate after every checkpoint (every {steps} steps), as train_and_evaluate did.")

    def _early_stopping(self, plan, stop, steps: int) -> cst.BaseExpression:
        limit = stop.max_steps
        if not isinstance(limit, cst.Integer):
            raise Unsupported("max_steps_without_decrease is not a literal number", limit)
        patience = -(-limit.evaluated_value // steps)
        args = [
            _emit.keyword_arg("monitor", cst.SimpleString(f'"val_{stop.metric}"')),
            _emit.keyword_arg("patience", cst.Integer(str(patience))),
            _emit.keyword_arg("mode", cst.SimpleString(f'"{stop.mode}"')),
        ]
        if stop.min_steps is not None:
            if not isinstance(stop.min_steps, cst.Integer):
                raise Unsupported("min_steps is not a literal number", stop.min_steps)
            start = max(-(-stop.min_steps.evaluated_value // steps) - 1, 0)
            if start:
                args.append(_emit.keyword_arg("start_from_epoch", cst.Integer(str(start))))
        return cst.Call(_emit.expr("{tf}.keras.callbacks.EarlyStopping", tf=plan.tf), args=_emit.call_args(args))

    @staticmethod
    def _assign_result(target: cst.BaseAssignTargetExpression, evaluate: cst.Call,
                       paths: list[str] = ()) -> list[cst.BaseStatement]:
        # train_and_evaluate returned (eval_result, export_results): the exporters' paths.
        exported = "[" + ", ".join(paths) + "]"
        if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
            metrics, exports = (e.value for e in target.elements)
            assigned = [_emit.statement("{t} = {e}", t=metrics, e=evaluate)]
            if not (isinstance(exports, cst.Name) and exports.value == "_"):  # `metrics, _ = ...`: unread
                assigned.append(_emit.statement("{t} = {x}", t=exports, x=exported))
            return assigned
        if paths:
            return [_emit.statement("{t} = ({e}, None)", t=target, e=evaluate),
                    _emit.statement("{t} = ({t}[0], {x})", t=target, x=exported)]
        return [_emit.statement("{t} = ({e}, [])", t=target, e=evaluate)]

    def _exporters(self, unit, arg, plan, ctx, resolve, periodic: bool = False):
        """FinalExporter / LatestExporter: the model exported to model_dir/export/<name> after
        training, as the Estimator exported the final checkpoint (statements, path names).
        BestExporter: a callback of the periodic ``fit`` exporting after each evaluation with the
        lowest loss so far; with one evaluation, at the end, that one is the best (callbacks)."""
        if arg is None or _is_none(arg.value):
            return [], [], []
        value = resolve(arg.value)
        if not isinstance(value, (cst.List, cst.Tuple)):
            value = cst.List([cst.Element(value)])
        statements: list[cst.BaseStatement] = []
        paths: list[str] = []
        callbacks: list[cst.BaseExpression] = []
        # Each exporter followed first: their serving functions are the exports' own, all of
        # them (a FinalExporter and a LatestExporter of one function: census samples).
        resolved = [(element, resolve(element.value)) for element in value.elements]
        for element, exporter in resolved:
            kind = ctx.call_api_path(exporter) if isinstance(exporter, cst.Call) else None
            if kind == BEST_EXPORTER:
                callback = self._best_exporter(unit, exporter, plan, ctx, periodic)
                if callback is not None:
                    callbacks.append(callback)
                    continue
            elif kind not in EXPORTERS:
                if isinstance(exporter, cst.Name):
                    # Bound otherwise on some path (an exporter per branch of an `if`, each another).
                    raise Unsupported(f"`{exporter.value}` may hold different exporters where it is read (bound in "
                                      "branches to different ones, or to something else): e2k converts one exporter "
                                      "per use", element.value)
                raise Unsupported("only FinalExporter, LatestExporter and BestExporter are converted", element.value)
            found = bind_arguments(exporter, EXPORTER_SIGNATURE if kind in EXPORTERS else BEST_EXPORTER_SIGNATURE)
            for name in ("assets_extra", "as_text"):
                if name in found and _emit.code(found[name].value) not in ("None", "False"):
                    raise Unsupported(f"an exporter with {name}= is not converted", found[name])
            name = found.get("name")
            if name is None or _is_none(name.value):
                raise Unsupported("an exporter without a name", exporter)
            if plan.model_dir is None:
                plan.fixed(exporter, self.code, "no model_dir: the Estimator exported into a temporary directory")
                continue
            names = signature_names(plan, ctx, exporter)
            signatures, inline, after = export_signatures(
                found["serving_input_receiver_fn"].value, plan, ctx, self.code, names)
            # The Estimator exported to <model_dir>/export/<name> (os.path.join: an absolute name wins).
            part = name.value.evaluated_value if isinstance(name.value, cst.SimpleString) else name.value
            path = export_path(plan, model_dir_base(plan), "export", part)
            target = plan.unique_name("export_path")
            statements += [*inline, _emit.statement("{t} = {p}", t=target, p=path),
                           save_statement(plan, ctx, cst.Name(target), signatures)]
            if after:
                statements.append(_emit.statement(after.format(path=target)))
            paths.append(target)
            plan.fixed(exporter, self.code, f"{kind.rsplit('.', 1)[-1]} -> the model exported after training")
        return statements, paths, callbacks

    def _best_exporter(self, unit, exporter, plan, ctx, periodic: bool) -> cst.BaseExpression | None:
        """BestExporter exported when an evaluation's loss was the lowest it had seen (in the
        model_dir's eval events too). Under a periodic ``fit``: a BestExport callback. With one
        evaluation, at the end: None, exported like a FinalExporter (the first is the best)."""
        found = bind_arguments(exporter, BEST_EXPORTER_SIGNATURE)
        if "compare_fn" in found and not _is_none(found["compare_fn"].value):
            raise Unsupported("BestExporter(compare_fn=...) is not converted: the Keras export compares the loss",
                              found["compare_fn"])
        for name in ("event_file_pattern", "assets_extra", "as_text"):
            if name in found and _emit.code(found[name].value) not in ("None", "False", '"eval/*.tfevents.*"',
                                                                       "'eval/*.tfevents.*'"):
                raise Unsupported(f"a BestExporter with {name}= is not converted", found[name])
        if not periodic:
            if plan.may_restore and not _fresh_model_dir(unit, plan, ctx):
                raise Unsupported("BestExporter compared the one evaluation with those already in the model_dir, "
                                  "which the Keras program does not read; the model may be restored from one here "
                                  "(with an evaluation at every checkpoint, EvalSpec(throttle_secs=0), it converts)",
                                  exporter)
            return None
        name = found.get("name")
        if name is None:
            name_text = "best_exporter"  # BestExporter's default name
        elif isinstance(name.value, cst.SimpleString):
            name_text = name.value.evaluated_value
        else:
            raise Unsupported("the exporter's name is not a string literal", exporter)
        if plan.model_dir is None:
            plan.fixed(exporter, self.code, "no model_dir: the Estimator exported into a temporary directory")
            return None
        names = signature_names(plan, ctx, exporter)
        function, inline = serving_function(found["serving_input_receiver_fn"].value, plan, ctx, self.code, names)
        if inline:
            raise Unsupported("a BestExporter's serving function that is not a function of the file", exporter)
        keep = found.get("exports_to_keep")
        plan.fixed(exporter, self.code, "BestExporter -> a callback exporting after each evaluation with a lower loss")
        return best_export(plan, model_dir_base(plan), name_text, signatures_dict(names, function),
                           keep.value if keep is not None else None)



def _fresh_model_dir(unit, plan, ctx) -> bool:
    """Is the model_dir a new empty directory (``tempfile.mkdtemp()``, or a name bound once to
    one) that the unit trains in once? Then it holds no earlier checkpoint or evaluation."""
    value = unit.arg_value("model_dir") or unit.config_value("model_dir")
    if isinstance(value, cst.Name):
        bound = resolve(ctx, value)
        value = bound.value if isinstance(bound, Binding) else None
    if not isinstance(value, cst.Call):
        return False
    names = {q.name for q in ctx.get_metadata(QualifiedNameProvider, value.func, set())}
    trainings = plan.uses("method", "train") + plan.uses("train_and_evaluate")
    return bool(names & {"tempfile.mkdtemp", "tempfile.TemporaryDirectory"}) and len(trainings) == 1


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _value(args, name):
    arg = args.get(name)
    return None if arg is None or _is_none(arg.value) else arg.value


def _depth(ctx, node) -> int:
    depth = 0
    current = ctx.parent(node)
    while current is not None:
        if isinstance(current, cst.IndentedBlock):
            depth += 1
        current = ctx.parent(current)
    return depth
