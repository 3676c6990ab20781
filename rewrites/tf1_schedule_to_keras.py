from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._modelfn import ScheduleConversion
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._translate import bind

#: TF1 decay -> (Keras schedule, TF1 signature, Keras positional names in order).
SCHEDULES = {
    "train.exponential_decay": ("ExponentialDecay",
        ("learning_rate", "global_step", "decay_steps", "decay_rate", "staircase", "name")),
    "train.inverse_time_decay": ("InverseTimeDecay",
        ("learning_rate", "global_step", "decay_steps", "decay_rate", "staircase", "name")),
    "train.natural_exp_decay": ("ExponentialDecay",
        ("learning_rate", "global_step", "decay_steps", "decay_rate", "staircase", "name")),
    "train.polynomial_decay": ("PolynomialDecay",
        ("learning_rate", "global_step", "decay_steps", "end_learning_rate", "power", "cycle", "name")),
    "train.cosine_decay": ("CosineDecay", ("learning_rate", "global_step", "decay_steps", "alpha", "name")),
    "train.piecewise_constant": ("PiecewiseConstantDecay", ("x", "boundaries", "values", "name")),
}
#: TF1 argument names that Keras calls otherwise.
RENAMES = {"learning_rate": "initial_learning_rate", "x": None, "global_step": None}


class Tf1ScheduleToKeras(ExpressionRule):
    """A TF1 learning-rate decay (`tf.train.exponential_decay(..., global_step, ...)`) becomes a Keras schedule.

    ## What it does
    Inside a converted model_fn, the decay that feeds the optimizer becomes the
    `tf.keras.optimizers.schedules` object with the same parameters; the `global_step`
    argument disappears, because a Keras schedule is evaluated at the optimizer's own step
    count (`optimizer.iterations`):

    | TF1 | Keras |
    |---|---|
    | `exponential_decay(lr, step, n, r, staircase)` | `ExponentialDecay(lr, n, r, staircase=...)` |
    | `natural_exp_decay(lr, step, n, r, staircase)` | `ExponentialDecay(lr, n, math.exp(-r), staircase=...)` |
    | `inverse_time_decay(lr, step, n, r, staircase)` | `InverseTimeDecay(lr, n, r, staircase=...)` |
    | `polynomial_decay(lr, step, n, end, power, cycle)` | `PolynomialDecay(lr, n, end, power, cycle)` |
    | `cosine_decay(lr, step, n, alpha)` | `CosineDecay(lr, n, alpha)` |
    | `piecewise_constant(step, boundaries, values)` | `PiecewiseConstantDecay(boundaries, values)` |

    A learning rate the model_fn computes from the global step by other means (a warmup
    `tf.minimum(1.0, tf.cast(global_step, tf.float32) / n)`, a function of the program given
    the step, a decay plus a floor), in the model_fn or in a function of the program making
    its train_op, becomes a `LearningRateSchedule` class whose `__call__(step)` computes the
    same expression at the optimizer's step; the values of the model_fn it reads are computed
    there too, the model_fn's `params` are the schedule's. A TF1 decay inside it, or inside a
    function of the program it calls with the step, is the Keras schedule called on the
    step (`ExponentialDecay(lr, n, r)(step)`): TensorFlow 2 runs TF1's decay as a function
    returning a function where Keras reads the rate eagerly.

    ## Why
    TF2 has no global step; the Keras optimizer counts its own updates, starting at 0 as the
    Estimator's global step did. The builder that compiles the model runs once: a rate
    computed there from a step would be one number, where the Estimator computed it at every
    step.

    ## Limitations
    Another optimizer setting computed from the global step (a momentum), and a rate that
    reads something the model_fn computes from its features or labels, are marked.

    ## Fix safety
    Safe: same formulas, same step count (`e2k parity` compares the learning rate of every
    step; fixture `hand_written_schedule`) (`natural_exp_decay`'s `exp(-r * t)` is
    `ExponentialDecay` with rate `exp(-r)`). A program that restored a global step from a
    checkpoint would start the Keras schedule at 0: see E2K400 for `model_dir`.

    ## References
    - https://www.tensorflow.org/api_docs/python/tf/keras/optimizers/schedules
    """

    code = "E2K102"
    summary = "tf.train.*_decay(lr, global_step, ...) -> tf.keras.optimizers.schedules.*"
    safety = Safety.SAFE
    role = "schedule"
    targets = tuple(SCHEDULES)

    cases = [
        Case(
            "tf1.train.exponential_decay(0.1, tf1.train.get_global_step(), 1000, 0.96, staircase=True)",
            "tf.keras.optimizers.schedules.ExponentialDecay(0.1, 1000, 0.96, staircase=True)",
            id="exponential",
        ),
        Case(
            "tf.train.piecewise_constant(global_step, [100, 200], [0.1, 0.01, 0.001])",
            "tf.keras.optimizers.schedules.PiecewiseConstantDecay([100, 200], [0.1, 0.01, 0.001])",
            id="piecewise",
        ),
        Case(
            id="warmup-by-hand",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(features, 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    global_step = tf.compat.v1.train.get_global_step()
    warmup = tf.minimum(1.0, tf.cast(global_step, tf.float32) / params["warmup"])
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(params["lr"] * warmup)
    train_op = optimizer.minimize(loss, global_step=global_step)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, params={"lr": 0.1, "warmup": 10})
estimator.train(input_fn, steps=20)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


class LearningRate(tf.keras.optimizers.schedules.LearningRateSchedule):
    """The model_fn's learning rate, computed from the optimizer's step."""

    def __init__(self, params):
        super().__init__()
        self.params = params

    def __call__(self, step):
        return self.params["lr"] * tf.minimum(
            1.0, tf.cast(step, tf.float32) / self.params["warmup"]
        )

    def get_config(self):
        return {"params": self.params}


def build_model(params):
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(LearningRate(params))
    model.compile(optimizer=optimizer, loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model({"lr": 0.1, "warmup": 10})
model.fit(input_fn(), steps_per_epoch=20)
''',
        ),
    ]

    def convert(self, call, ctx, tf) -> ScheduleConversion:
        path = ctx.call_api_path(call)
        keras, signature = SCHEDULES[path]
        bound = bind(call, signature)
        step_name = "x" if path == "train.piecewise_constant" else "global_step"
        step = bound.pop(step_name, None)
        if step is None:
            raise Unsupported("the decay does not say which step it reads")
        args = []
        positional = True
        for name in signature:
            if name == step_name:
                continue
            if name not in bound:
                positional = False
                continue
            arg = bound[name]
            value = arg.value
            if path == "train.natural_exp_decay" and name == "decay_rate":
                ctx.add_import("math")
                value = _emit.expr("math.exp(-{r})", r=value)
            keras_name = RENAMES.get(name, name)
            if positional and arg.keyword is None and name not in ("staircase", "cycle", "name"):
                args.append(cst.Arg(value))
            else:
                positional = False
                args.append(_emit.keyword_arg(keras_name, value))
        schedule = cst.Call(_emit.expr("{tf}.keras.optimizers.schedules.{k}", tf=tf, k=keras), args=_emit.call_args(args))
        return ScheduleConversion(schedule, step.value)
