from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._units import bind_arguments, resolve_input_fn

TRAIN_SIGNATURE = ("input_fn", "hooks", "steps", "max_steps", "saving_listeners")
EVALUATE_SIGNATURE = ("input_fn", "steps", "hooks", "checkpoint_path", "name")


class EstimatorTrainEvaluateToFitEvaluate(UnitRule):
    """estimator.train / estimator.evaluate become model.fit / model.evaluate.

    ## What it does
    `estimator.train(input_fn, steps=N)` (or `max_steps=N`) becomes
    `model.fit(input_fn(), steps_per_epoch=N)`, and `estimator.evaluate(input_fn, steps=N)`
    becomes `model.evaluate(input_fn(), steps=N)`. When the result of `evaluate` is used,
    `return_dict=True` keeps it a dict of metric names to values, as the Estimator's was.

    ## Why
    A Keras model trains and evaluates itself; the input_fn is called once to give the
    dataset that `fit` and `evaluate` read.

    ## Fix safety
    Safe for one `train` call on a new model: `steps` (more steps) and `max_steps` (up to a
    global step) both train N steps then. Several `train(max_steps=...)` calls on the same
    Estimator are reported, since `fit` has no global step to stop at.

    ## Limitations
    Hooks, saving listeners and `checkpoint_path` are reported (E2K902). The Estimator's
    evaluation dict also held `global_step`; the Keras one does not.

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    """

    code = "E2K003"
    summary = "estimator.train/evaluate(input_fn) -> model.fit/evaluate(dataset)"
    safety = Safety.SAFE
    order = 50

    cases = [
        Case(
            id="train-then-evaluate",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=5)
metrics = estimator.evaluate(input_fn)
print(metrics["loss"])
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
model.fit(input_fn(), steps_per_epoch=5)
metrics = model.evaluate(input_fn(), return_dict=True)
print(metrics["loss"])
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        params = unit.arg_value("params")
        trains = plan.uses("method", "train")
        for use in trains:
            args = bind_arguments(use.call, TRAIN_SIGNATURE)
            for name in ("hooks", "saving_listeners"):
                if name in args:
                    raise Unsupported(f"train({name}=...) is not converted yet", args[name])
            if "max_steps" in args and len(trains) > 1:
                raise Unsupported("several train(max_steps=...) calls: Keras has no global step to stop at", use.call)
            if "steps" in args and "max_steps" in args:
                raise Unsupported("train() with both steps and max_steps", use.call)
            input_fn = resolve_input_fn(ctx, args["input_fn"].value)
            plan.register_input_fn(input_fn)
            new_args = [cst.Arg(input_fn.call_expression(params))]
            steps = args.get("steps") or args.get("max_steps")
            if steps is not None:
                new_args.append(_emit.keyword_arg("steps_per_epoch", steps.value))
            plan.replace(use.call, _method_call(plan.model_var, "fit", new_args))
            plan.claim_use(use)
            plan.fixed(use.call, self.code, "estimator.train -> model.fit")

        for use in plan.uses("method", "evaluate"):
            args = bind_arguments(use.call, EVALUATE_SIGNATURE)
            for name in ("hooks", "checkpoint_path"):
                if name in args:
                    raise Unsupported(f"evaluate({name}=...) is not converted yet", args[name])
            input_fn = resolve_input_fn(ctx, args["input_fn"].value)
            plan.register_input_fn(input_fn)
            new_args = [cst.Arg(input_fn.call_expression(params))]
            if "steps" in args:
                new_args.append(_emit.keyword_arg("steps", args["steps"].value))
            if not isinstance(ctx.parent(use.call), cst.Expr):
                new_args.append(_emit.keyword_arg("return_dict", cst.Name("True")))
            plan.replace(use.call, _method_call(plan.model_var, "evaluate", new_args))
            plan.claim_use(use)
            plan.fixed(use.call, self.code, "estimator.evaluate -> model.evaluate")


def _method_call(var: str, method: str, args: list[cst.Arg]) -> cst.Call:
    return cst.Call(cst.Attribute(cst.Name(var), cst.Name(method)), args=_emit.call_args(args))
