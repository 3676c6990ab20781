from __future__ import annotations

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from estimator2keras import Case, ModuleRule, Safety

HELPER = "team_ml.estimators.make_estimator"
#: make_estimator(model_fn, params=None, model_dir=None, num_gpus=1)
SIGNATURE = ("model_fn", "params", "model_dir", "num_gpus")


class MakeEstimatorToEstimator(ModuleRule):
    """`make_estimator(model_fn, ...)` becomes the `tf.estimator.Estimator(...)` it builds.

    ## What it does
    Replaces a call of the team's factory `team_ml.estimators.make_estimator(model_fn,
    params=None, model_dir=None, num_gpus=1)` with the Estimator it returns:
    `tf.estimator.Estimator(model_fn=..., params=..., model_dir=...)`, and with
    `num_gpus=N` (N > 1) a `RunConfig` that trains under a `MirroredStrategy`. It runs before
    e2k's Estimator conversion, which then turns that Estimator into Keras.

    ## Why
    e2k converts the Estimators it can see. Behind a factory, it sees only a function call;
    written out, the Estimator converts like any other.

    ## Fix safety
    Safe: the Estimator written out is exactly what `make_estimator` builds (see
    `team_ml/estimators.py`).

    ## Limitations
    `num_gpus` must be a number written in the call; other arguments are marked and left.
    The module must `import tensorflow as tf`.
    """

    code = "E2K801"
    summary = "make_estimator(model_fn, ...) -> the tf.estimator.Estimator(...) it builds"
    safety = Safety.SAFE
    #: Before e2k's unit conversion (500), so that it finds a plain Estimator.
    order = 100
    #: Files that do not contain this word are not even parsed.
    keywords = ("make_estimator",)

    cases = [
        Case(
            id="two-gpus",
            before='''\
import tensorflow as tf

from team_ml.estimators import make_estimator


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [[2.0], [4.0]])).batch(1)


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.Dense(params["units"])(features)
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = make_estimator(model_fn, params={"units": 1}, num_gpus=2)
estimator.train(input_fn)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per replica.
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [[2.0], [4.0]])).batch(
        1 * strategy.num_replicas_in_sync
    )


def build_model(params):
    model = tf.keras.Sequential([tf.keras.layers.Dense(params["units"])])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model({"units": 1})
model.fit(input_fn())
''',
        ),
        Case(
            id="not-our-helper",
            before='''\
from other_team import make_estimator

estimator = make_estimator(model_fn)
''',
        ),
    ]

    def transform(self, module: cst.Module, ctx) -> cst.Module:
        tf = _tensorflow_alias(module)
        for call in _calls(module):
            names = ctx.get_metadata(QualifiedNameProvider, call.func, set())
            if HELPER not in {name.name for name in names}:
                continue
            if tf is None:
                ctx.mark(call, "make_estimator(...) is not converted: the module does not `import tensorflow as tf`")
                continue
            args, problem = _bind(call)
            if problem:
                ctx.mark(call, f"make_estimator(...) is not converted: {problem}")
                continue
            new_args = [cst.Arg(args[name].value, keyword=cst.Name(name)) for name in ("model_fn", "params", "model_dir") if name in args]
            gpus = args.get("num_gpus")
            if gpus is not None and int(gpus.value.value) > 1:
                config = cst.parse_expression(f"{tf}.estimator.RunConfig(train_distribute={tf}.distribute.MirroredStrategy())")
                new_args.append(cst.Arg(config, keyword=cst.Name("config")))
            estimator = cst.Call(cst.parse_expression(f"{tf}.estimator.Estimator"), args=_commas(new_args))
            ctx.edits.replace(call, estimator)
            ctx.remove_import_if_unused("team_ml.estimators", "make_estimator")
            ctx.report(call, "make_estimator(...) -> tf.estimator.Estimator(...)")
        return module


def _calls(node: cst.CSTNode):
    if isinstance(node, cst.Call):
        yield node
    for child in node.children:
        yield from _calls(child)


def _tensorflow_alias(module: cst.Module) -> str | None:
    """The name `import tensorflow as tf` binds at module level (None: not imported so).

    Imports queued with ctx.add_import are added only after every pass, so the Estimator
    this rule writes must use a name the module already has."""
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if isinstance(alias.name, cst.Name) and alias.name.value == "tensorflow":
                            return alias.asname.name.value if alias.asname else "tensorflow"
    return None


def _bind(call: cst.Call) -> tuple[dict[str, cst.Arg], str | None]:
    args: dict[str, cst.Arg] = {}
    for position, arg in enumerate(call.args):
        if arg.star:
            return args, "arguments passed with * or ** cannot be followed"
        name = arg.keyword.value if arg.keyword else (SIGNATURE[position] if position < len(SIGNATURE) else None)
        if name not in SIGNATURE:
            return args, f"unknown argument {name or position}"
        args[name] = arg
    if "model_fn" not in args:
        return args, "no model_fn"
    gpus = args.get("num_gpus")
    if gpus is not None and not isinstance(gpus.value, cst.Integer):
        return args, "num_gpus is not a number written in the call"
    return args, None


def _commas(args: list[cst.Arg]) -> list[cst.Arg]:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [arg.with_changes(comma=comma) for arg in args[:-1]] + args[-1:]
