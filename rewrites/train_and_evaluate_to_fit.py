from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._units import bind_arguments, resolve_call, resolve_input_fn

TRAIN_SPEC = frozenset({"estimator.TrainSpec"})
EVAL_SPEC = frozenset({"estimator.EvalSpec"})
TRAIN_SPEC_SIGNATURE = ("input_fn", "max_steps", "hooks", "saving_listeners")
EVAL_SPEC_SIGNATURE = ("input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs", "throttle_secs")
TRAIN_AND_EVALUATE_SIGNATURE = ("estimator", "train_spec", "eval_spec")
#: EvalSpec's default number of evaluation steps.
EVAL_SPEC_DEFAULT_STEPS = 100


class TrainAndEvaluateToFit(UnitRule):
    """train_and_evaluate(estimator, TrainSpec, EvalSpec) becomes `fit` then `evaluate`.

    ## What it does
    Replaces `tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)` with
    `model.fit(<train dataset>)` followed by `model.evaluate(<eval dataset>)`, and removes the
    `TrainSpec` / `EvalSpec` that only served it. `TrainSpec(max_steps=N)` becomes
    `fit(..., steps_per_epoch=N)`. `EvalSpec(steps=N)` becomes `evaluate(..., steps=N)`;
    EvalSpec's default of 100 steps is written out when the eval input_fn may repeat
    (`.repeat()`), and left out when its dataset visibly ends.

    ## Why
    `train_and_evaluate` trains until the input ends or `max_steps`, then evaluates on the
    final checkpoint. On one machine, `fit` followed by `evaluate` does the same with Keras.

    ## Fix safety
    Safe for the final evaluation. `train_and_evaluate` also evaluated at every checkpoint
    after `throttle_secs` (600 s by default); the Keras program evaluates once, at the end
    (add `validation_data=` to `fit` for evaluations during training). An assignment of the
    result becomes the `evaluate(..., return_dict=True)` dict and an empty list of exports.

    ## Limitations
    Hooks, saving listeners and exporters in the specs are reported (E2K902), not converted.

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    - https://www.tensorflow.org/guide/migrate/evaluator
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
        for use in plan.uses("train_and_evaluate"):
            call = use.call
            args = bind_arguments(call, TRAIN_AND_EVALUATE_SIGNATURE)
            train_call, train_binding = resolve_call(ctx, args["train_spec"].value, TRAIN_SPEC)
            eval_call, eval_binding = resolve_call(ctx, args["eval_spec"].value, EVAL_SPEC)
            if train_call is None or eval_call is None:
                raise Unsupported("the TrainSpec or EvalSpec is not one e2k can follow", call)
            train = bind_arguments(train_call, TRAIN_SPEC_SIGNATURE)
            evaluation = bind_arguments(eval_call, EVAL_SPEC_SIGNATURE)
            for name in ("hooks", "saving_listeners"):
                if name in train:
                    raise Unsupported(f"TrainSpec({name}=...) is not converted yet", train[name])
            for name in ("hooks", "exporters"):
                if name in evaluation:
                    raise Unsupported(f"EvalSpec({name}=...) is not converted yet", evaluation[name])

            train_input = resolve_input_fn(ctx, train["input_fn"].value)
            eval_input = resolve_input_fn(ctx, evaluation["input_fn"].value)
            plan.register_input_fn(train_input)
            plan.register_input_fn(eval_input)

            fit_args = [cst.Arg(train_input.call_expression(params))]
            if "max_steps" in train:
                fit_args.append(_emit.keyword_arg("steps_per_epoch", train["max_steps"].value))
            eval_args = [cst.Arg(eval_input.call_expression(params))]
            if "steps" in evaluation:
                if not _is_none(evaluation["steps"].value):
                    eval_args.append(_emit.keyword_arg("steps", evaluation["steps"].value))
            elif eval_input.may_repeat():
                eval_args.append(_emit.keyword_arg("steps", cst.Integer(str(EVAL_SPEC_DEFAULT_STEPS))))

            model = cst.Name(plan.model_var)
            fit = cst.Call(cst.Attribute(model, cst.Name("fit")), args=_emit.call_args(fit_args))
            statement = ctx.enclosing_statement(call)
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
            if isinstance(small, cst.Expr) and small.value is call:
                evaluate = cst.Call(cst.Attribute(model, cst.Name("evaluate")), args=_emit.call_args(eval_args))
                new = [_emit.statement("{c}", c=fit), _emit.statement("{c}", c=evaluate)]
            elif isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1:
                eval_args.append(_emit.keyword_arg("return_dict", cst.Name("True")))
                evaluate = cst.Call(cst.Attribute(model, cst.Name("evaluate")), args=_emit.call_args(eval_args))
                new = [_emit.statement("{c}", c=fit), *self._assign_result(small.targets[0].target, evaluate)]
            else:
                raise Unsupported("train_and_evaluate(...) is used inside an expression e2k does not rewrite", call)
            plan.replace_statement(statement, new)
            plan.remove_binding_if_only_here(train_binding, args["train_spec"].value)
            plan.remove_binding_if_only_here(eval_binding, args["eval_spec"].value)
            plan.claim_use(use)
            plan.fixed(call, self.code, "train_and_evaluate -> fit + evaluate")

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
