from __future__ import annotations

import libcst as cst
from libcst.metadata import GlobalScope

from estimator2keras import _emit
from estimator2keras import _eval_result as eval_result
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._training import (
    call_hooks, callbacks_arg, guarded_fit, method_call, min_of, module_resolver,
    needs_step_guard, per_example,
)
from estimator2keras._units import accesses_of, bind_arguments, resolve_input_fn

TRAIN_SIGNATURE = ("input_fn", "hooks", "steps", "max_steps", "saving_listeners")
EVALUATE_SIGNATURE = ("input_fn", "steps", "hooks", "checkpoint_path", "name")
PREDICT_SIGNATURE = ("input_fn", "predict_keys", "hooks", "checkpoint_path", "yield_single_examples")


class EstimatorTrainEvaluateToFitEvaluate(UnitRule):
    """estimator.train / evaluate / predict become model.fit / evaluate / predict.

    ## What it does
    - `estimator.train(input_fn, steps=N)` becomes `model.fit(input_fn(), steps_per_epoch=N)`:
      N more steps. `train(input_fn, max_steps=N)` trains until the global step
      (`model.optimizer.iterations`) is N: `steps_per_epoch=N` on a new model, and
      `steps_left = N - int(model.optimizer.iterations.numpy())` / `if steps_left > 0: model.fit(...)`
      when the model may be past step 0 (restored from `model_dir`, trained by an earlier
      call, or trained in a loop).
    - `estimator.evaluate(input_fn, steps=N)` becomes `model.evaluate(input_fn(), steps=N)`;
      when its result is used, `return_dict=True` keeps it a dict of metric names to values.
    - `estimator.predict(input_fn)` becomes
      `tf.data.Dataset.from_tensor_slices(model.predict(input_fn())).as_numpy_iterator()`:
      Keras predicts all batches at once, and this iterates over one example at a time (a
      dict of arrays per example, or an array), as the Estimator yielded them.
      `predict_keys` keeps only those keys. `predict(input_fn, yield_single_examples=False)`
      becomes `(model.predict_on_batch(...) for batch in input_fn())`: one dict of arrays per
      batch of the input, as the Estimator yielded them (its labels, if the input has them, left
      out by `tf.keras.utils.unpack_x_y_sample_weight`).
    - `hooks=` become callbacks (E2K406-E2K408); the model_fn's `training_hooks`,
      `evaluation_hooks` and `prediction_hooks` go to every `fit`, `evaluate`, `predict`.
    - `checkpoint_path=tf.train.latest_checkpoint(model_dir)` (with a converted `model_dir`,
      E2K402) is what the model restores anyway, and goes.
    - An input_fn taking `mode` is called with the mode's string (`"train"`, `"eval"`,
      `"infer"`: the values of `ModeKeys`), one taking `params` with the Estimator's params.
      A lambda taking them (`lambda params: read(x, y, params["batch_size"])`, TPUEstimator's
      style) gives its body with the values written in: `read(x, y, 8)`, `"train"`. A name
      bound to an input_fn in each branch of an `if` (`def train_input_fn(): ...` in one,
      `train_input_fn = numpy_input_fn(...)` in the other) converts in each branch, when each
      is called the same way.
    - An input_fn the program holds as a value is called where it was held, the mode and
      params passed as above: one a factory returns (a nested `def`, a lambda, a
      `functools.partial`: `make_input_fn(x, y)()`), one of the pair a data-loading function
      returns (`train_input_fn, eval_input_fn = get_input_fns(...)`: `train_input_fn()`), a
      name bound to a `functools.partial` (`train_input_fn()`). A partial written where the
      Estimator read it becomes the call it stood for (`functools.partial(read, x, y,
      batch_size=8)` -> `read(x, y, batch_size=8)`); the Estimator passed `mode`, `params` and
      `config` only to the parameters the partial leaves. What e2k cannot follow is reported
      with the reason (a name that is not defined, a call with more arguments than its
      function takes, a function that returns a Dataset instead of an input_fn).
    - Estimators held in a dict, list or tuple literal bound to one name (`estimators =
      {"linear": LinearClassifier(...), "dnn": DNNClassifier(...)}`) become their models, each
      built above the literal under a name from its key (`linear_model`, `dnn_model`; in a
      list `model_0`, `model_1`) and held in its place, so the container keeps its shape. Their
      uses keep their receivers, which hold the models now: the variable of a loop over the
      container (`for name, est in estimators.items()`, `.values()`, a list iterated or
      `enumerate`d, comprehensions) and subscripts (`estimators["dnn"].predict(...)`;
      `estimators[name]` with a key e2k cannot read may be any of them). The Estimators of a
      container convert together, and the code their loop shares must convert alike for each.
      `len()` and the keys are read as they were. An Estimator whose method is called on it
      directly (`tf.estimator.LinearClassifier(columns).train(input_fn, steps=5)`) is built
      above that statement.

    ## Why
    A Keras model trains, evaluates and predicts itself; the input_fn is called once to give
    the dataset that `fit`, `evaluate` and `predict` read.

    ## Fix safety
    Safe: the step counts mean what they meant (`steps` more steps, `max_steps` up to a global
    step). The Estimator's evaluation dict also held `global_step`; the Keras one does not:
    where the result is assigned, each `metrics["global_step"]` (or `.get("global_step")`) becomes
    `int(model.optimizer.iterations.numpy())`, the step the model was trained to. A read of
    another key the Estimator gave and the Keras dict has not (a metric left for a human, one Keras
    cannot compute exactly) is left marked at the read; the whole dict printed or iterated is
    reported with what it lacks.
    `predict` runs the whole input before the first example is seen, so a predict input that
    repeats forever is not converted. What repeats is read from the code that runs in that
    call: e2k decides the `if`s on a parameter the call passes a literal `True` / `False` (or
    leaves at such a default), as in `input_fn(x, y, training=False)`, and the `if`s on
    `mode` of an input_fn that takes it: the Estimator's mode, or the one the program's call
    passes (`lambda: input_fn(params, tf.estimator.ModeKeys.EVAL)`), directly or through a
    name bound once to a test of it (`training = mode == ModeKeys.TRAIN`, then `if
    training:`). A count is read through the call too:
    `repeat(num_epochs)` in `input_fn(data, num_epochs=None)` called as
    `lambda: input_fn(data, num_epochs=2)` repeats twice. A count the program is given when it runs
    (`repeat(args.epochs)`, `repeat(FLAGS.num_epochs)`) is taken for a count: run with `None`
    instead, the dataset repeats forever and Keras stops with an error asking for a step
    count where the Estimator trained until stopped; a loud difference, never a silent one.

    ## Limitations
    Saving listeners, `predict(yield_single_examples=False, hooks=...)`, a `checkpoint_path=` other than
    the model_dir's latest checkpoint, and a `train()` without steps on an input that repeats
    forever are reported (E2K902); so is the value of `train()` used (`est.train(...).evaluate(
    ...)`: train returned the Estimator, `fit` returns a History). A container of Estimators is
    refused, saying which construct, when it is passed to a function, printed, changed
    (`estimators["x"] = ...`) or read by a key it does not hold, when it holds other values
    than Estimators built in it, or when its Estimators need callbacks of their own (a
    `model_dir`'s checkpoints, hooks): the calls the loop shares cannot give each its own. An
    Estimator passed straight to a function, or held in a literal that is not bound to one
    name, is refused too.

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
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
model.fit(input_fn(), steps_per_epoch=5)
metrics = model.evaluate(input_fn(), return_dict=True)
print(metrics["loss"])
''',
        ),
        Case(
            id="max-steps-and-predict",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 4}, [[2.0]] * 4)).batch(2)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    predictions = {"logits": logits, "doubled": logits * 2.0}
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, max_steps=5)
estimator.train(input_fn, max_steps=10)
for prediction in estimator.predict(input_fn):
    print(prediction["doubled"])
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 4}, [[2.0]] * 4)).batch(2)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.logits(features["x"])

    def predict_step(self, data):
        features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
        logits = self(features, training=False)
        return {"logits": logits, "doubled": logits * 2.0}


def build_model():
    model = Model()
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
# max_steps counts from global step 0, as in the Estimator: train only the steps left.
steps_left = 5 - int(model.optimizer.iterations.numpy())
if steps_left > 0:
    model.fit(input_fn(), steps_per_epoch=steps_left)
steps_left = 10 - int(model.optimizer.iterations.numpy())
if steps_left > 0:
    model.fit(input_fn(), steps_per_epoch=steps_left)
for prediction in tf.data.Dataset.from_tensor_slices(
    model.predict(input_fn())
).as_numpy_iterator():
    print(prediction["doubled"])
''',
        ),
        Case(
            id="repeats-only-when-training",
            before='''\
import tensorflow as tf


def input_fn(features, labels, training=True, batch_size=2):
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    if training:
        dataset = dataset.shuffle(10).repeat()
    return dataset.batch(batch_size)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=logits)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


x, y = [[1.0], [2.0]], [[2.0], [4.0]]
estimator = tf.estimator.Estimator(model_fn)
estimator.train(lambda: input_fn(x, y), steps=10)
print(list(estimator.predict(lambda: input_fn(x, y, training=False))))
''',
            after='''\
import tensorflow as tf


def input_fn(features, labels, training=True, batch_size=2):
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    if training:
        dataset = dataset.shuffle(10).repeat()
    return dataset.batch(batch_size)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


x, y = [[1.0], [2.0]], [[2.0], [4.0]]
model = build_model()
model.fit(input_fn(x, y), steps_per_epoch=10)
print(
    list(
        tf.data.Dataset.from_tensor_slices(
            model.predict(input_fn(x, y, training=False))
        ).as_numpy_iterator()
    )
)
''',
        ),
        Case(
            id="repeats-only-in-train-mode",
            before='''\
import tensorflow as tf


def input_fn(mode):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [[2.0], [4.0]]))
    if mode == tf.estimator.ModeKeys.TRAIN:
        dataset = dataset.repeat()
    return dataset.batch(2)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=logits)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=10)
print(list(estimator.predict(input_fn)))
''',
            after='''\
import tensorflow as tf


def input_fn(mode):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [[2.0], [4.0]]))
    if mode == "train":
        dataset = dataset.repeat()
    return dataset.batch(2)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
model.fit(input_fn(mode="train"), steps_per_epoch=10)
print(
    list(
        tf.data.Dataset.from_tensor_slices(
            model.predict(input_fn(mode="infer"))
        ).as_numpy_iterator()
    )
)
''',
        ),
        Case(
            id="predict-repeats-forever",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=logits)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=10)
print(next(estimator.predict(input_fn)))
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=logits)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=10)
# e2k: E2K003 this predict input_fn may repeat forever: the Estimator yielded predictions lazily, Keras predict reads the whole dataset
print(next(estimator.predict(input_fn)))
''',
            findings=('E2K003',),
        ),
        Case(
            id="evaluation-global-step",
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
estimator.train(input_fn, steps=10)
metrics = estimator.evaluate(input_fn, steps=2)
print("loss %.4f at step %d" % (metrics["loss"], metrics["global_step"]))
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
metrics = model.evaluate(input_fn(), steps=2, return_dict=True)
print("loss %.4f at step %d" % (metrics["loss"], int(model.optimizer.iterations.numpy())))
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        params = unit.arg_value("params")
        resolve = module_resolver(ctx, plan)
        for use in plan.uses("method", "train"):
            self._train(use, plan, ctx, params, resolve)
        for use in plan.uses("method", "evaluate"):
            self._evaluate(use, plan, ctx, params, resolve)
        for use in plan.uses("method", "predict"):
            self._predict(use, plan, ctx, params, resolve)

    def _train(self, use, plan, ctx, params, resolve) -> None:
        args = bind_arguments(use.call, TRAIN_SIGNATURE)
        if "saving_listeners" in args and not _is_none(args["saving_listeners"].value):
            raise Unsupported("train(saving_listeners=...) is not converted yet", args["saving_listeners"])
        hooks = call_hooks(plan, ctx, "train", args.get("hooks"), resolve)
        if hooks.early_stops:
            raise Unsupported(
                "an early-stopping hook in train(): e2k converts it in train_and_evaluate, where Keras can "
                "evaluate during fit", hooks.early_stops[0].node)
        used = ctx.parent(use.call)
        if not isinstance(used, cst.Expr):
            # `est.train(...).evaluate(...)`: train returned the Estimator, fit returns a History.
            raise Unsupported("the value of `.train(...)` (the Estimator itself) is used; Keras fit returns a "
                              "History: call train as a statement, then use the Estimator", use.call)
        steps = min_of([v for v in [_value(args, "steps")] if v is not None] + hooks.num_steps, use.call, "steps")
        max_steps = min_of([v for v in [_value(args, "max_steps")] if v is not None] + hooks.last_step, use.call, "max_steps")
        if steps is not None and max_steps is not None:
            raise Unsupported("train() with both steps and max_steps (or a StopAtStepHook mixing them)", use.call)
        input_fn = resolve_input_fn(ctx, args["input_fn"].value)
        if steps is None and max_steps is None and input_fn.may_repeat(ctx, "train"):
            raise Unsupported(
                "train() without steps on an input that repeats forever: the Estimator trained until a hook "
                "stopped it, Keras fit (TF 2.15) needs steps_per_epoch; give train() steps", use.call)
        plan.register_input_fn(input_fn)
        dataset = [cst.Arg(plan.dataset(input_fn.call_expression(plan.params_for("train"), "train")))]
        more = [a for a in [callbacks_arg(plan, hooks, training=True)] if a is not None] + list(plan.fit_keywords)
        if max_steps is not None and needs_step_guard(plan, ctx, use.call):
            statement = _expression_statement(ctx, use.call)
            if statement is None:
                raise Unsupported("train(max_steps=...) is used inside an expression; e2k rewrites it as statements", use.call)
            plan.replace_statement(statement, guarded_fit(plan, max_steps, dataset, more))
        else:
            limit = steps if steps is not None else max_steps
            steps_arg = [_emit.keyword_arg("steps_per_epoch", limit)] if limit is not None else []
            plan.replace(use.call, method_call(plan.model_var, "fit", [*dataset, *steps_arg, *more]))
        plan.claim_use(use)
        plan.fixed(use.call, self.code, "estimator.train -> model.fit")

    def _evaluate(self, use, plan, ctx, params, resolve) -> None:
        args = bind_arguments(use.call, EVALUATE_SIGNATURE)
        hooks = call_hooks(plan, ctx, "eval", args.get("hooks"), resolve)
        if hooks.num_steps or hooks.last_step or hooks.early_stops:
            raise Unsupported("a training hook (StopAtStepHook, early stopping) passed to evaluate()", use.call)
        input_fn = resolve_input_fn(ctx, args["input_fn"].value)
        plan.register_input_fn(input_fn)
        new_args = [cst.Arg(plan.dataset(input_fn.call_expression(plan.params_for("eval"), "eval")))]
        if "steps" in args and not _is_none(args["steps"].value):
            new_args.append(_emit.keyword_arg("steps", args["steps"].value))
        callbacks = callbacks_arg(plan, hooks, training=False)
        if callbacks is not None:
            new_args.append(callbacks)
        shown = str(ctx.path).endswith(".ipynb") and isinstance(ctx.scope(use.call), GlobalScope)
        if not isinstance(ctx.parent(use.call), cst.Expr) or shown:
            # (A notebook cell shows the value of its last expression: a dict, as the Estimator gave.)
            new_args.append(_emit.keyword_arg("return_dict", cst.Name("True")))
        plan.replace(use.call, method_call(plan.model_var, "evaluate", new_args))
        parent = ctx.parent(use.call)
        if isinstance(parent, cst.Assign) and parent.value is use.call:
            if len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
                eval_result.check_reads(parent.targets[0].target, plan, ctx, self.code)
        elif not isinstance(parent, cst.Expr):
            eval_result.check_reads(use.call, plan, ctx, self.code)
        self._checkpoint_path(use, args, plan, ctx)
        plan.claim_use(use)
        plan.fixed(use.call, self.code, "estimator.evaluate -> model.evaluate")

    def _predict(self, use, plan, ctx, params, resolve) -> None:
        args = bind_arguments(use.call, PREDICT_SIGNATURE)
        single = args.get("yield_single_examples")
        batched = single is not None and _emit.code(single.value) == "False"
        if single is not None and not batched and _emit.code(single.value) != "True":
            raise Unsupported("predict(yield_single_examples=...) of a value known only when the program runs is "
                              "not converted", single)
        hooks = call_hooks(plan, ctx, "predict", args.get("hooks"), resolve)
        if batched and args.get("hooks") is not None and not _is_none(args["hooks"].value):
            raise Unsupported("predict(yield_single_examples=False, hooks=...): predict_on_batch takes no callbacks",
                              args["hooks"])
        if hooks.num_steps or hooks.last_step or hooks.early_stops:
            raise Unsupported("a training hook (StopAtStepHook, early stopping) passed to predict()", use.call)
        input_fn = resolve_input_fn(ctx, args["input_fn"].value)
        if input_fn.may_repeat(ctx, "infer"):
            raise Unsupported(
                "this predict input_fn may repeat forever: the Estimator yielded predictions lazily, Keras "
                "predict reads the whole dataset", args["input_fn"])
        plan.register_input_fn(input_fn)
        dataset = plan.dataset(input_fn.call_expression(plan.params_for("infer"), "infer"))
        new_args = [cst.Arg(dataset)]
        callbacks = callbacks_arg(plan, hooks, training=False)
        if callbacks is not None:
            new_args.append(callbacks)
        predictions: cst.BaseExpression = method_call(plan.model_var, "predict", new_args)
        if batched:
            # One dict of arrays (or one array) per batch of the input, as the Estimator yielded
            # them; a batch's labels, where the input has them, are left out as predict left them.
            predictions = _emit.expr("{m}.predict_on_batch({tf}.keras.utils.unpack_x_y_sample_weight(batch)[0])",
                                     m=plan.model_var, tf=plan.tf)
        keys = args.get("predict_keys")
        if keys is not None and not _is_none(keys.value):
            if plan.predictions_kind != "dict":
                raise Unsupported("predict_keys= needs predictions that are a dict", keys)
            wanted = keys.value if not isinstance(keys.value, cst.SimpleString) else cst.List([cst.Element(keys.value)])
            predictions = _emit.expr(
                "{{key: value for key, value in {p}.items() if key in {k}}}", p=predictions, k=wanted)
        if batched:
            plan.replace(use.call, _emit.expr("({p} for batch in {d})", p=predictions, d=dataset))
        else:
            plan.replace(use.call, per_example(predictions, plan.tf))
        self._checkpoint_path(use, args, plan, ctx)
        plan.claim_use(use)
        plan.fixed(use.call, self.code, "estimator.predict -> model.predict_on_batch, one batch at a time" if batched
                   else "estimator.predict -> model.predict, one example at a time")

    def _checkpoint_path(self, use, args, plan, ctx) -> None:
        """``checkpoint_path=tf.train.latest_checkpoint(model_dir)`` is what the Estimator read anyway."""
        path = args.get("checkpoint_path")
        if path is None or _is_none(path.value):
            return
        value = path.value
        latest = (
            isinstance(value, cst.Call) and ctx.call_api_path(value) == "train.latest_checkpoint" and len(value.args) == 1
            and plan.model_dir is not None and _emit.code(value.args[0].value) == _emit.code(plan.model_dir)
        )
        if not latest:
            raise Unsupported(
                "checkpoint_path= other than the model_dir's latest checkpoint is not converted: restore it with "
                "tf.train.Checkpoint(model=model).restore(path) before the call", path)
        plan.fixed(path, self.code, "checkpoint_path=latest_checkpoint(model_dir): the model_dir's latest, as by default")


def _value(args, name):
    arg = args.get(name)
    return None if arg is None or _is_none(arg.value) else arg.value


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _expression_statement(ctx, call: cst.Call) -> cst.SimpleStatementLine | None:
    statement = ctx.enclosing_statement(call)
    if (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and statement.body[0].value is call
    ):
        return statement
    return None
