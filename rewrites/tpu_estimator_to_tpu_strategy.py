from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety
from estimator2keras._units import Binding, resolve
from estimator2keras.rewrites.estimator_to_keras_model import EstimatorToKerasModel

BATCH_SIZES = {"train": "train_batch_size", "eval": "eval_batch_size", "infer": "predict_batch_size"}
TPU_ONLY = ("eval_on_tpu", "export_to_tpu", "export_to_cpu", "export_saved_model_api_version")
CONNECT = """
if {use_tpu}:
    {resolver} = {cluster}
    {tf}.config.experimental_connect_to_cluster({resolver})
    {tf}.tpu.experimental.initialize_tpu_system({resolver})
    {strategy} = {tf}.distribute.TPUStrategy({resolver})
else:
    {strategy} = {tf}.distribute.get_strategy()
"""
#: TPUEstimator's `use_tpu` defaults to True: with no flag to test, the TPU is used.
CONNECT_ALWAYS = """
{resolver} = {cluster}
{tf}.config.experimental_connect_to_cluster({resolver})
{tf}.tpu.experimental.initialize_tpu_system({resolver})
{strategy} = {tf}.distribute.TPUStrategy({resolver})
"""


class TPUEstimatorToTPUStrategy(EstimatorToKerasModel):
    """TPUEstimator(model_fn, use_tpu=..., train_batch_size=...) becomes a Keras model under `TPUStrategy`.

    ## What it does
    The model_fn converts as an Estimator's does (E2K001; a `TPUEstimatorSpec` is read like
    an `EstimatorSpec`, `CrossShardOptimizer` is E2K605), and the model is built and compiled
    under

    ```python
    if use_tpu:
        resolver = <RunConfig(cluster=...), or TPUClusterResolver()>
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    else:
        strategy = tf.distribute.get_strategy()
    ```

    (only the default strategy for `use_tpu=False`, and no `if` where `use_tpu` is left at its
    default, True). The input_fns get the `params` the TPUEstimator gave them: the
    Estimator's, with `"batch_size"` set to `train_batch_size`, `eval_batch_size` or
    `predict_batch_size` where the input_fn reads it (one that reads only other keys, as
    `params.get("train_batch_size", 16)`, is called with the Estimator's `params` as they are,
    so a `TPUEstimator` in one branch and an `Estimator` in the other convert alike).

    ## Why
    TPUStrategy is how Keras trains on TPUs. A TPUEstimator passed each TPU core
    `batch_size // num_shards` examples; under TPUStrategy, `fit` splits the global batch
    across the cores itself, so the input_fn is given the global batch size.

    ## Fix safety
    Review. With `use_tpu=False` the program runs on the default strategy, as the
    TPUEstimator ran on the CPU. `TPUConfig(iterations_per_loop=N)` only set how many steps
    ran per host loop: pass `steps_per_execution=N` to `compile` for the same speed.
    `TPUEstimatorSpec(eval_metrics=(metric_fn, [labels, logits]))` (or a dict of tensors by
    the metric_fn's parameter names) is read as the `eval_metric_ops` the metric_fn returns,
    each parameter standing for the model_fn's tensor given for it: its metrics go to
    `compile` (E2K202), and the metric_fn goes when only the converted spec used it. A
    metric_fn that rebinds a name, does more than assign and return a dict, or is given
    anything but the model_fn's own names (`labels` for its `labels`) is reported (E2K604).

    ## Limitations
    `host_call`, `scaffold_fn`, an `if` around `CrossShardOptimizer` in the model_fn and
    embedding configurations are not converted (E2K901/E2K902).

    ## References
    - https://www.tensorflow.org/guide/migrate/tpu_estimator
    - https://www.tensorflow.org/guide/tpu
    """

    code = "E2K604"
    summary = "TPUEstimator(model_fn, use_tpu, *_batch_size) -> a Keras model under TPUStrategy (default strategy off TPU)"
    safety = Safety.REVIEW
    order = 11
    constructors = ("estimator.tpu.TPUEstimator", "contrib.tpu.TPUEstimator")
    signature = (
        "model_fn", "model_dir", "config", "params", "use_tpu", "train_batch_size", "eval_batch_size",
        "predict_batch_size", "batch_axis", "eval_on_tpu", "export_to_tpu", "export_to_cpu", "warm_start_from",
        "embedding_config_spec", "export_saved_model_api_version",
    )

    cases = [
        Case(
            id="tpu-estimator",
            before='''\
import tensorflow.compat.v1 as tf1


def input_fn(params):
    dataset = tf1.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    return dataset.repeat().batch(params["batch_size"], drop_remainder=True)


def model_fn(features, labels, mode, params):
    logits = tf1.layers.Dense(1)(features)
    loss = tf1.losses.mean_squared_error(labels=labels, predictions=logits)
    optimizer = tf1.tpu.CrossShardOptimizer(tf1.train.GradientDescentOptimizer(0.1))
    train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
    return tf1.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf1.estimator.tpu.RunConfig(tpu_config=tf1.estimator.tpu.TPUConfig(iterations_per_loop=100))
estimator = tf1.estimator.tpu.TPUEstimator(model_fn, config=config, use_tpu=False, train_batch_size=32)
estimator.train(input_fn, max_steps=1000)
''',
            after='''\
import tensorflow as tf


def input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    return dataset.repeat().batch(params["batch_size"], drop_remainder=True)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(0.1)
    model.compile(optimizer=optimizer, loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn(params={"batch_size": 32}), steps_per_epoch=1000)
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is not type(self):
            return
        super().plan(unit, plan, ctx)
        tf = plan.tf
        use_tpu = unit.arg_value("use_tpu")
        plan.claimed_args.update(name for name in ("use_tpu", *BATCH_SIZES.values()) if name in unit.args)
        for name in TPU_ONLY:
            if name in unit.args:
                plan.claimed_args.add(name)
                plan.fixed(unit.args[name], self.code, f"TPUEstimator({name}=...) has no Keras counterpart: TPUStrategy decides")
        self._config(unit, plan)
        if use_tpu is None or _emit.code(use_tpu) != "False":
            strategy = plan.unique_name("strategy")
            cluster = unit.config_value("cluster")
            if cluster is None or _emit.code(cluster) == "None":
                cluster = _emit.expr("{tf}.distribute.cluster_resolver.TPUClusterResolver()", tf=tf)
            template = CONNECT if use_tpu is not None and _emit.code(use_tpu) != "True" else CONNECT_ALWAYS
            if isinstance(cluster, cst.Name):  # the program's own resolver
                template = "\n".join(line for line in template.split("\n") if line.strip() != "{resolver} = {cluster}")
                template = template.replace("{resolver}", "{cluster}")
            created = _emit.statements(
                template, use_tpu=use_tpu if use_tpu is not None else cst.Name("True"), tf=tf,
                resolver=plan.unique_name("resolver") if not isinstance(cluster, cst.Name) else "", cluster=cluster,
                strategy=strategy)
            plan.before_build.extend(created)
            plan.scope_strategy = cst.Name(strategy)
        params = unit.arg_value("params")
        for mode, name in BATCH_SIZES.items():
            size = unit.arg_value(name)
            if size is None:
                continue
            if params is None:
                plan.input_params[mode] = _emit.expr('{{"batch_size": {b}}}', b=size)
            elif isinstance(params, cst.Dict):
                batch = cst.DictElement(cst.SimpleString('"batch_size"'), size)
                elements = [e.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                            for e in params.elements]
                plan.input_params[mode] = params.with_changes(elements=[*elements, batch])
            else:
                plan.input_params[mode] = _emit.expr('{{**{p}, "batch_size": {b}}}', p=params, b=size)
        plan.fixed(unit.call, self.code, "TPUEstimator -> Keras model under TPUStrategy (default strategy off TPU)")

    def _config(self, unit, plan) -> None:
        if "cluster" in unit.config_args:
            plan.claimed_config.add("cluster")
        tpu_config = unit.config_args.get("tpu_config")
        if tpu_config is not None:
            plan.claimed_config.add("tpu_config")
            plan.fixed(tpu_config, self.code, "TPUConfig(iterations_per_loop=N) set the steps per host loop: "
                                              "compile(steps_per_execution=N) does that in Keras")
            value = tpu_config.value if isinstance(tpu_config, cst.Arg) else tpu_config
            bound = resolve(plan.ctx, value) if isinstance(value, cst.Name) else None
            if isinstance(bound, Binding):
                # `tpu_config = tf.contrib.tpu.TPUConfig(...)` read by the RunConfig only: it goes with it.
                plan.remove_binding_if_only_here(bound, value)
