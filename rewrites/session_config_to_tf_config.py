from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._units import accesses_of, bind_arguments, module_imports, own_returns, resolve, resolve_call
from estimator2keras.rewrites.distribute_strategy_scope import MULTI_WORKER, STRATEGIES

CONFIG_PROTO = frozenset({"ConfigProto"})
GPU_OPTIONS = frozenset({"GPUOptions"})
COMMENT = "From RunConfig(session_config=...): TF2 configures devices before any op runs."
COMMENT_IN_PLACE = ("From RunConfig(session_config=...): TensorFlow 2 sets these once for the process, "
                    "before any op runs.")
CLUSTER_ONLY = ("From RunConfig(session_config=...): its device_filters only chose the tasks a session reached",
                "in a parameter-server cluster (TF_CONFIG); this program trains in its own process.")
#: Settings made by one call of the value as it is.
SETTERS = {
    "allow_soft_placement": "{tf}.config.set_soft_device_placement({v})",
    "log_device_placement": "{tf}.debugging.set_log_device_placement({v})",
    "intra_op_parallelism_threads": "{tf}.config.threading.set_intra_op_parallelism_threads({v})",
    "inter_op_parallelism_threads": "{tf}.config.threading.set_inter_op_parallelism_threads({v})",
}


class SessionConfigToTfConfig(UnitRule):
    """RunConfig(session_config=ConfigProto(...)) becomes `tf.config` calls at the top of the module.

    ## What it does
    Translates the `ConfigProto` given as `RunConfig(session_config=...)` into the
    TensorFlow 2 calls that do the same for the whole process, placed right after the
    imports (they must run before TensorFlow starts):

    | ConfigProto | TensorFlow 2 |
    |---|---|
    | `device_count={"CPU": n}` (n > 1) | `tf.config.set_logical_device_configuration` with n logical CPUs |
    | `device_count={"GPU": 0}` | `tf.config.set_visible_devices([], "GPU")` |
    | `allow_soft_placement=b` | `tf.config.set_soft_device_placement(b)` |
    | `log_device_placement=b` | `tf.debugging.set_log_device_placement(b)` |
    | `intra_op_parallelism_threads=n` | `tf.config.threading.set_intra_op_parallelism_threads(n)` |
    | `inter_op_parallelism_threads=n` | `tf.config.threading.set_inter_op_parallelism_threads(n)` |
    | `gpu_options=GPUOptions(allow_growth=True)` | `tf.config.experimental.set_memory_growth(gpu, True)` for every GPU |
    | `gpu_options=GPUOptions(visible_device_list="0,1")` | `tf.config.set_visible_devices` of those GPUs |

    A `session_config` made by a function of the program whose every `return` gives None or a
    `ConfigProto(device_filters=...)` (Cloud ML Engine's trainers pick the filters by the
    TF_CONFIG task) sets nothing: device filters only limited which tasks of a
    parameter-server cluster a session reached, and the converted program trains in its own
    process. A comment says so; the function goes when nothing else calls it, with the imports
    only it read.

    ## Why
    TensorFlow 2 has no sessions; device and threading settings are made once per process
    with `tf.config`, before the runtime initialises.

    ## Fix safety
    Safe for the settings in the table. They now apply to the whole program, not only to
    the Estimator's sessions. A setting of the table whose value is not a literal
    (`intra_op_parallelism_threads=flags_obj.intra_op_parallelism_threads`, TensorFlow's
    official models) is made where the program made the `ConfigProto`, the one place its value
    is known: there it must still come before the first op the program runs, which TensorFlow
    checks (a `RuntimeError` at that line, never a silent difference). Other fields (for
    example `gpu_options.per_process_gpu_memory_fraction`, which TF2 expresses as a memory
    limit in MB), and such values in a `ConfigProto` written inside the `RunConfig(...)`, are
    left for a human and reported (E2K401).

    ## References
    - https://www.tensorflow.org/api_docs/python/tf/config
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    """

    code = "E2K401"
    notes = (COMMENT, COMMENT_IN_PLACE, " ".join(CLUSTER_ONLY))
    summary = "RunConfig(session_config=ConfigProto(...)) -> tf.config calls after the imports"
    safety = Safety.SAFE
    order = 20
    keywords = ("estimator",)

    cases = [
        Case(
            id="threads-and-placement",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


session_config = tf.ConfigProto(allow_soft_placement=True, intra_op_parallelism_threads=2)
config = tf.estimator.RunConfig(session_config=session_config)
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K401 From RunConfig(session_config=...): TF2 configures devices before any op runs.
import tensorflow as tf

tf.config.set_soft_device_placement(True)
tf.config.threading.set_intra_op_parallelism_threads(2)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
model.fit(input_fn())
''',
        ),
        Case(
            id="gpu-options",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


gpu_options = tf.GPUOptions(allow_growth=True, visible_device_list="0", per_process_gpu_memory_fraction=0.5)
session_config = tf.ConfigProto(gpu_options=gpu_options, allow_soft_placement=True)
estimator = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(session_config=session_config))
estimator.train(input_fn)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K401 From RunConfig(session_config=...): TF2 configures devices before any op runs.
import tensorflow as tf

for gpu in tf.config.list_physical_devices("GPU"):
    tf.config.experimental.set_memory_growth(gpu, True)
tf.config.set_visible_devices(
    [gpu for i, gpu in enumerate(tf.config.list_physical_devices("GPU")) if i in (0,)], "GPU")
tf.config.set_soft_device_placement(True)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


# e2k: E2K401 GPUOptions(per_process_gpu_memory_fraction=...) is not converted; set it with tf.config by hand (a memory limit is a LogicalDeviceConfiguration(memory_limit=MB))
model = build_model()
model.fit(input_fn())
''',
            findings=('E2K401',),
        ),
        Case(
            id="device-filters-by-task",
            before='''\
import json
import os

import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def get_session_config():
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    if tf_config.get("task", {}).get("type") == "master":
        return tf.ConfigProto(device_filters=["/job:ps", "/job:master"])
    elif tf_config.get("task", {}).get("type") == "worker":
        return tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:%d" % tf_config["task"]["index"]])


config = tf.estimator.RunConfig(session_config=get_session_config())
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K401 From RunConfig(session_config=...): its device_filters only chose the tasks a session reached in a
#   parameter-server cluster (TF_CONFIG); this program trains in its own process.
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn())
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        value = unit.config_value("session_config")
        if value is None:
            return
        plan.claimed_config.add("session_config")
        call, binding = resolve_call(ctx, value, CONFIG_PROTO)
        if call is None:
            if not self._cluster_filters_only(value, unit, plan, ctx):
                plan.leftover(value, self.code,
                              "this session_config is not a ConfigProto(...) e2k can read; set tf.config by hand")
            return
        tf = plan.tf
        statements: list[cst.BaseStatement] = []
        in_place: list[cst.BaseStatement] = []
        arguments = bind_arguments(call, ())
        # One value known only where the ConfigProto is made puts all the settings there.
        together = binding is not None and any(
            name in SETTERS and _literal(arg.value) is None for name, arg in arguments.items())
        for name, arg in arguments.items():
            if name == "gpu_options":
                statements.extend(self._gpu_options(arg.value, plan, ctx))
                continue
            converted = self._convert(name, arg.value, tf)
            if together and name in SETTERS:
                # `ConfigProto(intra_op_parallelism_threads=flags.threads)`: a value known only
                # where the ConfigProto is made; the call takes its place there.
                in_place.append(_emit.statement(SETTERS[name], tf=tf, v=arg.value))
            elif converted is None:
                plan.leftover(arg, self.code, f"ConfigProto({name}=...) is not converted; set it with tf.config by hand")
            else:
                statements.extend(converted)
        if in_place:
            in_place[0] = _emit.with_comment(in_place[0], COMMENT_IN_PLACE)
            in_place[0] = in_place[0].with_changes(leading_lines=[*binding.statement.leading_lines, *in_place[0].leading_lines])
        plan.remove_binding_if_only_here(binding, value, in_place)
        if statements:
            statements[0] = _emit.with_comment(statements[0], COMMENT)
            plan.insert_after_imports(statements)
        if statements or in_place:
            plan.fixed(value, self.code, "session_config -> tf.config calls")

    def _cluster_filters_only(self, value: cst.BaseExpression, unit, plan, ctx) -> bool:
        """``session_config=_get_session_config_from_env_var()`` (Cloud ML Engine's trainer
        template): a function of the program whose every ``return`` gives None or a
        ``ConfigProto(device_filters=...)``, picked by the TF_CONFIG task. Device filters only
        limited which tasks of a parameter-server cluster a session reached: there is nothing
        to set in a program that trains in its own process. The function goes when nothing
        else calls it."""
        function = resolve(ctx, value.func) if isinstance(value, cst.Call) else None
        if not isinstance(function, cst.FunctionDef) or _multi_worker(unit, ctx):
            return False  # a multi-worker strategy reads TF_CONFIG: its cluster is the Keras program's too
        returns = [r.value for r in _returns(function)]
        if not any(returns) or not all(
                r is None or isinstance(r, cst.Name) and r.value == "None"
                or isinstance(r, cst.Call) and ctx.call_api_path(r) in CONFIG_PROTO
                and set(bind_arguments(r, ())) == {"device_filters"}
                for r in returns):
            return False
        reads = accesses_of(ctx, function.name)
        if reads is not None and all(read is value.func for read in reads):
            plan.remove_statement(function)
            # What only the function read (`import json` for TF_CONFIG) goes with it.
            read = {n.value for n in m.findall(function, m.Name())}
            plan.on_commit.append(lambda: _remove_imports_if_unused(ctx, function, read))
        for line in CLUSTER_ONLY:
            plan.comment(ctx.enclosing_statement(value), line)
        plan.fixed(value, self.code, "session_config of device_filters only: nothing to set")
        return True

    def _convert(self, name: str, value: cst.BaseExpression, tf: str) -> list[cst.BaseStatement] | None:
        if name == "device_count":
            return self._device_count(value, tf)
        literal = _literal(value)
        if literal is None:
            return None
        template = SETTERS.get(name)
        return [_emit.statement(template, tf=tf, v=value)] if template else None

    def _gpu_options(self, value: cst.BaseExpression, plan, ctx) -> list[cst.BaseStatement]:
        """`GPUOptions(allow_growth=True, visible_device_list="0,1")` -> memory growth, visible GPUs."""
        call, binding = resolve_call(ctx, value, GPU_OPTIONS)
        if call is None:
            plan.leftover(value, self.code, "these gpu_options are not a GPUOptions(...) e2k can read; set tf.config by hand")
            return []
        plan.remove_binding_if_only_here(binding, value)
        tf, out = plan.tf, []
        for name, arg in bind_arguments(call, ()).items():
            literal = _literal(arg.value)
            devices = arg.value.evaluated_value if isinstance(arg.value, cst.SimpleString) else None
            if name == "allow_growth" and isinstance(literal, bool):
                if literal:
                    out.append(_emit.statement(
                        """
                        for gpu in {tf}.config.list_physical_devices("GPU"):
                            {tf}.config.experimental.set_memory_growth(gpu, True)
                        """, tf=tf))
            elif name == "visible_device_list" and isinstance(devices, str) and all(
                    d.strip().isdigit() for d in devices.split(",")):
                indices = ", ".join(d.strip() for d in devices.split(",")) + ("," if "," not in devices else "")
                out.append(_emit.statement(
                    """
                    {tf}.config.set_visible_devices(
                        [gpu for i, gpu in enumerate({tf}.config.list_physical_devices("GPU")) if i in ({i})], "GPU")
                    """, tf=tf, i=indices))
            else:
                plan.leftover(arg, self.code, f"GPUOptions({name}=...) is not converted; set it with tf.config by hand "
                                              "(a memory limit is a LogicalDeviceConfiguration(memory_limit=MB))")
        return out

    def _device_count(self, value: cst.BaseExpression, tf: str) -> list[cst.BaseStatement] | None:
        if not isinstance(value, cst.Dict):
            return None
        out = []
        for element in value.elements:
            if not isinstance(element, cst.DictElement):
                return None
            key = element.key.evaluated_value if isinstance(element.key, cst.SimpleString) else None
            count = _literal(element.value)
            if key not in ("CPU", "GPU") or not isinstance(count, int):
                return None
            if key == "CPU" and count > 1:
                out.append(
                    _emit.statement(
                        """
                        {tf}.config.set_logical_device_configuration(
                            {tf}.config.list_physical_devices("CPU")[0],
                            [{tf}.config.LogicalDeviceConfiguration()] * {n})
                        """,
                        tf=tf,
                        n=str(count),
                    )
                )
            elif key == "GPU" and count == 0:
                out.append(_emit.statement('{tf}.config.set_visible_devices([], "GPU")', tf=tf))
            elif not (key == "CPU" and count == 1):
                return None
        return out


def _multi_worker(unit, ctx) -> bool:
    """Does the Estimator train under a strategy whose workers TF_CONFIG names?"""
    value = unit.config_value("train_distribute")
    call, _ = resolve_call(ctx, value, frozenset(STRATEGIES)) if value is not None else (None, None)
    return call is not None and STRATEGIES[ctx.call_api_path(call)] in MULTI_WORKER


def _remove_imports_if_unused(ctx, removed: cst.CSTNode, names: set[str]) -> None:
    """Drop the imports of ``removed``'s module binding one of ``names`` (what it read) if
    nothing reads them any more."""
    current = ctx.current
    try:
        if ctx._modules is not None:
            ctx.current = ctx.path_of(removed)
        for bound, module, obj, asname in module_imports(ctx):
            if bound in names:
                ctx.remove_import_if_unused(module, obj, asname)
    finally:
        ctx.current = current


def _returns(function: cst.FunctionDef) -> list[cst.Return]:
    """The function's own ``return`` statements; a body that can end without one counts as
    returning None (an implicit ``Return``)."""
    found = own_returns(function)
    last = function.body.body[-1] if function.body.body else None
    ends = isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], (cst.Return, cst.Raise))
    return found if ends else [*found, cst.Return()]


def _literal(node: cst.BaseExpression):
    if isinstance(node, cst.Integer):
        return node.evaluated_value
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


__all__ = ["SessionConfigToTfConfig", "Unsupported"]
