from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._training import (
    Hooks, call_hooks, callbacks_arg, guarded_fit, method_call, min_of, module_resolver, needs_step_guard,
    start_step,
)
from estimator2keras._units import bind_arguments, resolve_call, resolve_input_fn

TRAIN_SPEC = frozenset({"estimator.TrainSpec"})
EVAL_SPEC = frozenset({"estimator.EvalSpec"})
TRAIN_SPEC_SIGNATURE = ("input_fn", "max_steps", "hooks", "saving_listeners")
EVAL_SPEC_SIGNATURE = ("input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs", "throttle_secs")
TRAIN_AND_EVALUATE_SIGNATURE = ("estimator", "train_spec", "eval_spec")
#: EvalSpec's default number of evaluation steps.
EVAL_SPEC_DEFAULT_STEPS = 100
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
      checkpoint: `fit(..., epochs=max_steps // N, steps_per_epoch=N, validation_data=...,
      validation_steps=...)`.
    - `throttle_secs`, `start_delay_secs` and `name` are accounted for (reported).

    ## Why
    `train_and_evaluate` trains until the input ends or `max_steps`, evaluates new
    checkpoints while it trains, and evaluates the final one. On one machine, `fit` (with
    `validation_data` where evaluations were placed) followed by `evaluate` does the same.

    ## Fix safety
    Safe for the final evaluation. Evaluations timed in seconds (`throttle_secs`, 600 by
    default, against checkpoints every `save_checkpoints_secs`) cannot be placed at a step;
    the Keras program evaluates once, at the end. `start_delay_secs` only delayed a separate
    evaluator job. An assignment of the result becomes the `evaluate(..., return_dict=True)`
    dict and an empty list of exports. When `max_steps` was already reached (a restored
    model), the Estimator skipped training and returned no metrics; the Keras program still
    evaluates.

    ## Limitations
    Saving listeners and exporters are reported (E2K902), not converted.

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
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn(), steps_per_epoch=10)
model.evaluate(input_fn(), steps=100)
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
            if "exporters" in evaluation and not _is_none(evaluation["exporters"].value):
                raise Unsupported("EvalSpec(exporters=...) is not converted yet", evaluation["exporters"])
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
            if max_steps is None and train_input.may_repeat():
                raise Unsupported(
                    "TrainSpec without max_steps on an input that repeats forever: the Estimator trained until "
                    "stopped, Keras fit (TF 2.15) needs a step count", train_call)
            plan.register_input_fn(train_input)
            plan.register_input_fn(eval_input)
            eval_steps = None
            if "steps" in evaluation:
                if not _is_none(evaluation["steps"].value):
                    eval_steps = evaluation["steps"].value
            elif eval_input.may_repeat():
                eval_steps = cst.Integer(str(EVAL_SPEC_DEFAULT_STEPS))
            self._claim_timing(evaluation, plan)

            model = plan.model_var
            dataset = [cst.Arg(plan.dataset(train_input.call_expression(plan.params_for("train"), "train")))]
            periodic = self._periodic(unit, train_hooks, evaluation, max_steps, train_call)
            fit_statements: list[cst.BaseStatement]
            if periodic is not None:
                fit_statements = [self._periodic_fit(plan, ctx, call, periodic, dataset, eval_input, params,
                                                     eval_steps, train_hooks, eval_hooks, max_steps)]
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
                new = [*fit_statements, _emit.statement("{c}", c=evaluate)]
            elif isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1:
                eval_args.append(_emit.keyword_arg("return_dict", cst.Name("True")))
                evaluate = method_call(model, "evaluate", eval_args)
                new = [*fit_statements, *self._assign_result(small.targets[0].target, evaluate)]
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

    def _periodic(self, unit, hooks, evaluation, max_steps, train_call) -> int | None:
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
            raise Unsupported(
                f"{why} needs the evaluations at every checkpoint: RunConfig(save_checkpoints_steps=N) with a "
                "literal N says where they were", hooks.early_stops[0].node)
        steps = interval.evaluated_value
        if not (isinstance(max_steps, cst.Integer) and max_steps.evaluated_value % steps == 0):
            if not hooks.early_stops:
                return None
            raise Unsupported(
                f"{why}: TrainSpec(max_steps=...) must be a literal multiple of save_checkpoints_steps "
                f"({steps}) for fit to evaluate where the Estimator did", train_call)
        return steps

    def _periodic_fit(self, plan, ctx, call, steps, dataset, eval_input, params, eval_steps, train_hooks, eval_hooks,
                      max_steps):
        model = plan.model_var
        fit_args = [*dataset, _emit.keyword_arg("epochs", cst.Integer(str(max_steps.evaluated_value // steps)))]
        if plan.may_restore:
            fit_args.append(_emit.keyword_arg(
                "initial_epoch", _emit.expr("{s} // {n}", s=start_step(plan), n=str(steps))))
        fit_args.append(_emit.keyword_arg("steps_per_epoch", cst.Integer(str(steps))))
        fit_args.append(_emit.keyword_arg("validation_data", plan.dataset(eval_input.call_expression(plan.params_for("eval"), "eval"))))
        if eval_steps is not None:
            fit_args.append(_emit.keyword_arg("validation_steps", eval_steps.deep_clone()))
        hooks = Hooks()
        hooks.extend(train_hooks)
        hooks.callbacks += [c.deep_clone() for c in eval_hooks.callbacks]
        for stop in train_hooks.early_stops:
            hooks.callbacks.append(self._early_stopping(plan, stop, steps))
        callbacks = callbacks_arg(plan, hooks, training=True)
        if callbacks is not None:
            fit_args.append(callbacks)
        fit_args += list(plan.fit_keywords)
        fit = method_call(model, "fit", fit_args)
        statement = _emit.fit_line(_emit.statement("{c}", c=fit), _depth(ctx, call), ctx.module.default_indent)
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
    def _assign_result(target: cst.BaseAssignTargetExpression, evaluate: cst.Call) -> list[cst.BaseStatement]:
        # train_and_evaluate returned (eval_result, export_results).
        if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
            metrics, exports = (e.value for e in target.elements)
            return [
                _emit.statement("{t} = {e}", t=metrics, e=evaluate),
                _emit.statement("{t} = []", t=exports),
            ]
        return [_emit.statement("{t} = ({e}, [])", t=target, e=evaluate)]


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
