from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._units import bind_arguments, resolve_call

CONFIG_PROTO = frozenset({"ConfigProto"})
GPU_OPTIONS = frozenset({"GPUOptions"})
COMMENT = "From RunConfig(session_config=...): TensorFlow 2 configures devices once, before any op runs."
COMMENT_IN_PLACE = ("From RunConfig(session_config=...): TensorFlow 2 sets these once for the process, "
                    "before any op runs.")
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
import tensorflow as tf

# From RunConfig(session_config=...): TensorFlow 2 configures devices once, before any op runs.
tf.config.set_soft_device_placement(True)
tf.config.threading.set_intra_op_parallelism_threads(2)


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
import tensorflow as tf

# From RunConfig(session_config=...): TensorFlow 2 configures devices once, before any op runs.
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
    ]

    def plan(self, unit, plan, ctx) -> None:
        value = unit.config_value("session_config")
        if value is None:
            return
        plan.claimed_config.add("session_config")
        call, binding = resolve_call(ctx, value, CONFIG_PROTO)
        if call is None:
            plan.leftover(value, self.code, "this session_config is not a ConfigProto(...) e2k can read; set tf.config by hand")
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


def _literal(node: cst.BaseExpression):
    if isinstance(node, cst.Integer):
        return node.evaluated_value
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


__all__ = ["SessionConfigToTfConfig", "Unsupported"]
