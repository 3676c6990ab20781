from __future__ import annotations

import libcst as cst

from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._translate import translate
from estimator2keras._units import bind_arguments
from estimator2keras.rewrites.tf1_optimizer_to_keras import OPTIMIZERS, exact_update

SIGNATURE = (
    "loss", "global_step", "learning_rate", "optimizer", "gradient_noise_scale", "gradient_multipliers",
    "clip_gradients", "learning_rate_decay_fn", "update_ops", "variables", "name", "summaries",
    "colocate_gradients_with_ops", "increment_global_step",
)
#: optimize_loss's optimizer names: the TF1 optimizer each made, with the arguments it added
#: (tensorflow/contrib/layers/python/layers/optimizers.py, OPTIMIZER_CLS_NAMES).
BY_NAME = {
    "Adagrad": ("train.AdagradOptimizer", {}),
    "Adam": ("train.AdamOptimizer", {}),
    "Ftrl": ("train.FtrlOptimizer", {}),
    "Momentum": ("train.MomentumOptimizer", {"momentum": "0.9"}),
    "SGD": ("train.GradientDescentOptimizer", {}),
}
#: Arguments that change nothing a Keras model computes.
IGNORED = frozenset({"name", "summaries", "colocate_gradients_with_ops", "update_ops"})


class Tf1OptimizeLossToKeras(ExpressionRule):
    """`tf.contrib.layers.optimize_loss(loss, global_step, lr, optimizer="Adam")` becomes the Keras optimizer it made.

    ## What it does
    In a converted model_fn, a train_op made by `optimize_loss` with an optimizer named by
    a string (`"Adam"`, `"Adagrad"`, `"Ftrl"`, `"Momentum"`, `"SGD"`) becomes the Keras
    optimizer of the TF1 optimizer it created, TF1 defaults written out as E2K101 writes
    them (`Momentum` is TF1 Momentum with `momentum=0.9`, as optimize_loss made it). Its
    summaries, name and update ops (Keras runs batch-norm updates itself) are left out.

    ## Why
    `tf.contrib` is gone since TensorFlow 2.0; the TF 1.x tutorials built their train_op
    with it. Keras's `compile(optimizer=...)` does what it did: minimise the loss, step the
    optimizer's iterations.

    ## Fix safety
    Safe: the same optimizer, the same learning rate, applied to the same loss. `"Adam"` is
    `TF1Adam`, as `tf.train.AdamOptimizer` is (E2K101). `clip_gradients=5.0` (a number or a
    setting) clipped the gradients' global norm: the optimizer's `global_clipnorm=5.0`, as
    `tf.clip_by_global_norm` is (E2K103, with its note on TF 2.15 under a strategy).

    ## Limitations
    An optimizer given as a class, an instance or a function, a function as
    `clip_gradients`, `gradient_noise_scale`, `gradient_multipliers`,
    `learning_rate_decay_fn` and `variables` are not converted (the model_fn is left as it
    was, E2K901).

    ## References
    - https://www.tensorflow.org/guide/migrate/metrics_optimizers
    """

    code = "E2K104"
    summary = "tf.contrib.layers.optimize_loss(loss, step, lr, optimizer='Adam') -> the Keras optimizer it made"
    safety = Safety.SAFE
    role = "optimize_loss"
    targets = ("contrib.layers.optimize_loss",)

    cases = [
        Case(
            "tf.contrib.layers.optimize_loss(loss=loss, global_step=tf1.train.get_global_step(), learning_rate=1e-4, optimizer='Adam')",
            "tf.keras.optimizers.Adam(1e-4, epsilon=1e-08)",
            id="adam",
        ),
        Case(
            "tf.contrib.layers.optimize_loss(loss, step, 0.1, 'Momentum')",
            "tf.keras.optimizers.SGD(0.1, momentum=0.9)",
            id="momentum",
        ),
    ]

    def convert(self, call, ctx, tf):
        args = bind_arguments(call, SIGNATURE)
        for name in args:
            if name == "clip_gradients" and clip_norm(args[name].value) is not None:
                continue  # the compile reader gives the optimizer its global_clipnorm
            if name not in ("loss", "global_step", "learning_rate", "optimizer", "increment_global_step") + tuple(IGNORED):
                raise Unsupported(f"optimize_loss({name}=...) is not converted", args[name])
        optimizer = args.get("optimizer")
        name = optimizer.value.evaluated_value if optimizer is not None and isinstance(optimizer.value, cst.SimpleString) else None
        if name not in BY_NAME or "learning_rate" not in args:
            raise Unsupported("optimize_loss with an optimizer other than a named one and a learning rate is not converted",
                              optimizer or call)
        path, added = BY_NAME[name]
        made = cst.Call(cst.Name(path.rpartition(".")[2]), args=[cst.Arg(args["learning_rate"].value)] + [
            cst.Arg(cst.parse_expression(v), keyword=cst.Name(k)) for k, v in added.items()])
        new, _ = translate(made, OPTIMIZERS[path], tf)
        return exact_update(self, path, call, new, ctx, tf)


def clip_norm(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """``clip_gradients=5.0`` (or a setting: ``params["clip"]``, ``FLAGS.clip``): the global
    norm optimize_loss clipped the gradients to; None for a function, which clipped otherwise."""
    if isinstance(value, (cst.Integer, cst.Float, cst.Subscript, cst.Attribute)):
        return value
    return None
