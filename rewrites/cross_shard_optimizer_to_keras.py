from __future__ import annotations

import libcst as cst

from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported

SIGNATURE = ("opt", "reduction", "name", "group_assignment")


class CrossShardOptimizerToKeras(ExpressionRule):
    """`tf.tpu.CrossShardOptimizer(optimizer)` becomes the Keras optimizer it wraps.

    ## What it does
    In a model_fn, `tf.compat.v1.tpu.CrossShardOptimizer(tf.compat.v1.train.AdamOptimizer(...))`
    becomes the Keras optimizer of the wrapped one (E2K101), and
    `CrossShardOptimizer(optimizer)` of an optimizer made just before becomes `optimizer`.

    ## Why
    The wrapper averaged the gradients of the TPU shards. A Keras model compiled under
    `TPUStrategy` (or any strategy) averages its replicas' gradients itself, with each
    replica's loss scaled by the global batch.

    ## Fix safety
    Safe with the default `reduction` (the mean over shards). A `reduction` of SUM, or
    `group_assignment`, is not converted.

    ## References
    - https://www.tensorflow.org/guide/migrate/tpu_estimator
    """

    code = "E2K605"
    summary = "tf.tpu.CrossShardOptimizer(opt) in a model_fn -> the Keras optimizer of opt (the strategy averages gradients)"
    safety = Safety.SAFE
    role = "optimizer"
    targets = ("tpu.CrossShardOptimizer", "contrib.tpu.CrossShardOptimizer")

    cases = [
        Case(
            id="wrapped-adam",
            before='''\
import tensorflow.compat.v1 as tf1


def input_fn():
    return tf1.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf1.layers.Dense(1)(features)
    loss = tf1.losses.mean_squared_error(labels=labels, predictions=logits)
    optimizer = tf1.tpu.CrossShardOptimizer(tf1.train.AdamOptimizer(0.01))
    train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
    return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf1.estimator.Estimator(model_fn=model_fn)
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf

from e2k_helpers import TF1Adam


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    optimizer = TF1Adam(0.01)
    model.compile(optimizer=optimizer, loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn())
''',
        ),
    ]

    def convert(self, call: cst.Call, ctx, tf: str):
        args = {}
        for index, arg in enumerate(call.args):
            if arg.star:
                raise Unsupported("arguments passed with * or ** cannot be translated", arg)
            args[arg.keyword.value if arg.keyword else SIGNATURE[index]] = arg.value
        for name in ("reduction", "group_assignment"):
            if name in args and not (isinstance(args[name], cst.Name) and args[name].value == "None"):
                raise Unsupported(f"CrossShardOptimizer({name}=...) is not converted", args[name])
        inner = args.get("opt")
        if inner is None:
            raise Unsupported("CrossShardOptimizer without an optimizer", call)
        if isinstance(inner, cst.Name):
            return inner.deep_clone()  # the optimizer made just before, converted there
        path = ctx.call_api_path(inner)
        rule = ctx.rules.expression_rule("optimizer", path) if path else None
        if rule is None or rule is type(self):
            raise Unsupported("the optimizer CrossShardOptimizer wraps is not one e2k converts", inner)
        return rule().convert(inner, ctx, tf)
