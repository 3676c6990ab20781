"""Helpers shared by the two bootstrap scripts (`_legacy_side.py`, `_keras_side.py`).

This file runs inside the user's interpreter, which may be a different Python with a
different TensorFlow than the one running `e2k`. It is loaded by path, imports nothing
from estimator2keras, and must work with numpy 1.x and 2.x, TF 2.15 and TF 2.21.
"""
from __future__ import annotations

import json
import os
import random
import runpy
import sys
import traceback

_THIS_DIR = os.path.dirname(os.path.abspath(__file__))
# Frames from these files are the harness, not the user's program: dropped from tracebacks.
_HARNESS_FILES = {
    os.path.join(_THIS_DIR, name) for name in ("_side_common.py", "_legacy_side.py", "_keras_side.py")
}
TRACEBACK_TAIL_LINES = 30

# Keras and TF1 layers that draw random numbers in training only; parity mode makes them
# act as at inference (identity) on both sides, because TF1 graph and TF2 eager random
# streams cannot be aligned.
_DROPOUT_LAYER_NAMES = (
    "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
    "AlphaDropout", "GaussianDropout", "GaussianNoise",
)


class HarnessStop(BaseException):
    """Ends the user's program early with a status for the host.

    A BaseException, like SystemExit, so that a user's `except Exception:` cannot
    swallow it.
    """

    def __init__(self, status: str, message: str, **details):
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details


def load_request(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def seed_python_and_numpy(seed: int) -> None:
    """Seed what the program may draw from before TensorFlow is even imported.

    `tf.compat.v1.layers` and Keras layers built in a model_fn take their op seeds from
    Python's `random` (DESIGN.md §5): seeding it makes the legacy graph repeatable.
    """
    random.seed(seed)
    try:
        import numpy as np
    except ImportError:  # a program without numpy has nothing to seed there
        return
    np.random.seed(seed)


def harness_devices(tf, replicas: int) -> tuple[list[str], str]:
    """The devices the N replicas run on: real GPUs when there are enough, else N CPUs.

    Returns (device names, kind) with kind "GPU" or "CPU". Listing physical devices does
    not initialise the runtime, so logical CPUs can still be configured afterwards.
    """
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) >= replicas:
        return [f"/gpu:{i}" for i in range(replicas)], "GPU"
    return [f"/cpu:{i}" for i in range(replicas)], "CPU"


def patch_mirrored_strategy(tf, harness: list[str], record: dict, cpu_cross_device_ops=None) -> None:
    """Make every MirroredStrategy (V1 and V2) run on the harness's devices.

    The user's own device list (or the default, which on a CPU-only machine is CPU:0
    alone) is replaced so that both sides run the same number of replicas.

    ``cpu_cross_device_ops`` (a class), when given, replaces the default cross-device
    reduction of a strategy on several harness CPUs that the program did not choose one for.
    The legacy side passes ``ReductionToOneDevice``: a TF1 graph under MirroredStrategy's
    default collective ops on virtual CPUs cannot all-gather sparse gradients (embedding
    lookups, a linear model's weights) whose sizes differ between replicas, and crashes;
    on GPUs, NCCL reduces sparse gradients to one device anyway.
    """
    from tensorflow.python.distribute import mirrored_strategy as ms

    for cls in (ms.MirroredStrategy, ms.MirroredStrategyV1):
        def __init__(self, devices=None, cross_device_ops=None, *args, _original=cls.__init__, **kwargs):
            record.setdefault("user_strategy_devices", []).append(list(devices) if devices else None)
            if cross_device_ops is None and cpu_cross_device_ops is not None and len(harness) > 1:
                cross_device_ops = cpu_cross_device_ops()
                note = (f"the Estimator's MirroredStrategy reduces gradients with {cpu_cross_device_ops.__name__} "
                        "on the harness's CPUs (its default collective ops cannot gather sparse gradients of "
                        "different sizes there; on GPUs NCCL reduces them to one device too)")
                if note not in record.setdefault("notes", []):
                    record["notes"].append(note)
            _original(self, list(harness), cross_device_ops, *args, **kwargs)

        cls.__init__ = __init__


def patch_logical_device_configuration(tf, record: dict) -> None:
    """Ignore the program's own CPU logical-device setup: the harness has set N CPUs.

    A program written for 2 replicas splits the CPU in 2; under `--replicas 1` or 4 the
    harness's N must win. Calls for GPUs pass through unchanged.
    """
    from tensorflow.python.framework import config as tf_config

    original = tf_config.set_logical_device_configuration

    def set_logical_device_configuration(device, logical_devices):
        if getattr(device, "device_type", None) == "CPU":
            record.setdefault("notes", []).append(
                "the program's own tf.config.set_logical_device_configuration for the CPU "
                f"({len(logical_devices)} devices) was ignored: the harness sets the replica devices")
            return None
        return original(device, logical_devices)

    for module in (tf.config, tf.config.experimental):
        for name in ("set_logical_device_configuration", "set_virtual_device_configuration"):
            if hasattr(module, name):
                setattr(module, name, set_logical_device_configuration)


def patch_shuffle(tf, record: list | None = None) -> None:
    """`Dataset.shuffle` becomes the identity: TF1 graph and TF2 eager shuffles differ.

    What each shuffle would have done is still recorded, so that the host can compare it (a
    lost shuffle buffer trains identically once shuffling is neutralised): each call appends
    ``{"kind", "buffer_size", "seed", "reshuffle"}`` to ``record`` (None: not static). The
    Estimator's ``numpy_input_fn``/``pandas_input_fn`` shuffle with a queue of
    ``queue_capacity`` examples, which a migration writes as ``Dataset.shuffle(queue_capacity)``:
    their shuffling is neutralised and recorded the same way (see patch_numpy_input_fn).
    """
    from tensorflow.python.data.ops import dataset_ops

    def note(kind, buffer_size, seed, reshuffle):
        if record is not None:
            record.append({"kind": kind, "buffer_size": _static_float(tf, buffer_size),
                           "seed": _static_float(tf, seed),
                           "reshuffle": None if reshuffle is None else bool(reshuffle)})

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None, name=None):
        note("Dataset.shuffle", buffer_size, seed, reshuffle_each_iteration)
        return self

    for cls_name in ("DatasetV2", "DatasetV1"):
        cls = getattr(dataset_ops, cls_name, None)
        if cls is not None and "shuffle" in vars(cls):
            cls.shuffle = shuffle
    experimental = getattr(tf.data, "experimental", None)
    if experimental is not None and hasattr(experimental, "shuffle_and_repeat"):
        def shuffle_and_repeat(buffer_size, count=None, seed=None):
            note("Dataset.shuffle", buffer_size, seed, None)
            return lambda dataset: dataset.repeat(count)
        experimental.shuffle_and_repeat = shuffle_and_repeat


def patch_numpy_input_fn(tf, record: list | None = None) -> None:
    """The Estimator's ``numpy_input_fn``/``pandas_input_fn`` with ``shuffle=True`` read in
    order instead (one thread), like a neutralised ``Dataset.shuffle``; the shuffle is recorded
    as a buffer of ``queue_capacity`` examples (what e2k writes: ``.shuffle(queue_capacity)``)."""
    try:
        from tensorflow_estimator.python.estimator.inputs import numpy_io, pandas_io
    except ImportError:  # no Estimator in this interpreter
        return
    import inspect

    def wrap(module, name):
        original = getattr(module, name, None)
        if original is None:
            return None
        signature = inspect.signature(original)

        def input_fn(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            if bound.arguments.get("shuffle"):
                if record is not None:
                    record.append({"kind": "Dataset.shuffle", "buffer_size": float(bound.arguments["queue_capacity"]),
                                   "seed": _static_float(tf, bound.arguments.get("seed")), "reshuffle": None})
                bound.arguments["shuffle"] = False
                bound.arguments["num_threads"] = 1
            return original(*bound.args, **bound.kwargs)

        setattr(module, name, input_fn)
        return original, input_fn

    replaced = [wrap(numpy_io, "numpy_input_fn"), wrap(pandas_io, "pandas_input_fn")]
    # the public names (tf.compat.v1.estimator.inputs.*) were bound when their modules loaded
    modules = [module for name, module in list(sys.modules.items())
               if name.startswith("tensorflow_estimator") and name.endswith("inputs") and module is not None]
    try:
        modules.append(tf.compat.v1.estimator.inputs)
    except Exception:  # noqa: BLE001 - no public name to replace
        pass
    for module in modules:
        for pair in replaced:
            if pair is None:
                continue
            original, wrapper = pair
            for attr in ("numpy_input_fn", "pandas_input_fn"):
                try:
                    if getattr(module, attr, None) is original:
                        setattr(module, attr, wrapper)
                except Exception:  # noqa: BLE001 - a module that refuses: its name is not used
                    continue


def patch_dropout(tf, record: list | None = None, gate=None) -> None:
    """Dropout and noise layers, and `tf.nn.dropout`, act as at inference (identity).

    What they would have done is still recorded, so that the host can compare it (parity
    mode must not be blind to a wrong rate): while ``gate()`` is true, each dropout or noise
    layer called in training, and each `tf.nn.dropout` call, appends ``{"kind", "value",
    "key"}`` to ``record`` once (a layer by identity, a function call by its call site), in
    the order of first use. ``value`` is the rate (GaussianNoise: the stddev), None when it
    is a tensor without a static value.
    """
    seen: set = set()

    def note(kind: str, value, key) -> None:
        if record is None or gate is None or not gate() or key in seen:
            return
        seen.add(key)
        record.append({"kind": kind, "value": _static_float(tf, value), "key": str(key[1:])})

    def identity_call(self, inputs, training=None, *args, **kwargs):
        if record is not None and gate is not None and gate() and _training(tf, training):
            kind = next((c.__name__ for c in type(self).__mro__ if c.__name__ in _DROPOUT_LAYER_NAMES), "Dropout")
            note(kind, getattr(self, "stddev" if kind == "GaussianNoise" else "rate", None),
                 ("layer", id(self), getattr(self, "name", "")))
        return inputs

    layers = tf.keras.layers
    for name in _DROPOUT_LAYER_NAMES:
        cls = getattr(layers, name, None)
        if cls is not None:
            cls.call = identity_call
    try:  # TensorFlow's own frozen copy of Keras: tf-slim's (tf.contrib.layers') dropout uses it
        from tensorflow.python.keras.layers import core as frozen_core
    except ImportError:  # not in the newest TensorFlow
        frozen_core = None
    for name in _DROPOUT_LAYER_NAMES:
        cls = getattr(frozen_core, name, None)
        if cls is not None:
            cls.call = identity_call

    def caller():
        frame = sys._getframe(2)
        return ("call", frame.f_code.co_filename, frame.f_lineno)

    def dropout(x, rate=None, *args, **kwargs):
        note("Dropout", rate, caller())
        return x

    def dropout_v1(x, keep_prob=None, *args, **kwargs):
        rate = kwargs.get("rate")
        if rate is None and keep_prob is not None:
            keep = _static_float(tf, keep_prob)
            rate = None if keep is None else 1.0 - keep
        note("Dropout", rate, caller())
        return x

    tf.nn.dropout = dropout
    tf.compat.v1.nn.dropout = dropout_v1


def _training(tf, training) -> bool:
    """Whether a dropout layer called with ``training`` would drop. None means Keras 2's
    learning phase, as the layer itself reads it (model_to_estimator sets it for the mode); a
    tensor without a static value may be true."""
    if training is None:
        phase = getattr(getattr(tf.keras, "backend", None), "learning_phase", None)
        try:
            training = phase() if phase is not None else None
        except Exception:  # noqa: BLE001 - Keras 3 has no learning phase
            training = None
    if training is None:
        return False
    if isinstance(training, (bool, int)):
        return bool(training)
    static = tf.get_static_value(training)
    return True if static is None else bool(static)


def _static_float(tf, value):
    """A Python number from a number or a tensor with a static value; None otherwise."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    try:
        static = tf.get_static_value(value)
    except Exception:  # noqa: BLE001 - a symbolic value: not comparable
        return None
    try:
        return None if static is None else float(static)
    except (TypeError, ValueError):
        return None


# TF1 optimizers as the Keras optimizer a migration writes, and where each keeps its
# hyper-parameters (the TF1 defaults are in them when the program left them out).
_TF1_OPTIMIZERS = {
    "AdamOptimizer": ("Adam", {"learning_rate": "_lr", "beta_1": "_beta1", "beta_2": "_beta2",
                               "epsilon": "_epsilon"}, {"amsgrad": False}),
    "MomentumOptimizer": ("SGD", {"learning_rate": "_learning_rate", "momentum": "_momentum",
                                  "nesterov": "_use_nesterov"}, {}),
    "GradientDescentOptimizer": ("SGD", {"learning_rate": "_learning_rate"}, {"momentum": 0.0, "nesterov": False}),
    "AdagradOptimizer": ("Adagrad", {"learning_rate": "_learning_rate",
                                     "initial_accumulator_value": "_initial_accumulator_value"}, {}),
    "RMSPropOptimizer": ("RMSprop", {"learning_rate": "_learning_rate", "rho": "_decay", "momentum": "_momentum",
                                     "epsilon": "_epsilon", "centered": "_centered"}, {}),
    "AdadeltaOptimizer": ("Adadelta", {"learning_rate": "_lr", "rho": "_rho", "epsilon": "_epsilon"}, {}),
    "FtrlOptimizer": ("Ftrl", {"learning_rate": "_learning_rate", "learning_rate_power": "_learning_rate_power",
                               "initial_accumulator_value": "_initial_accumulator_value",
                               "l1_regularization_strength": "_l1_regularization_strength",
                               "l2_regularization_strength": "_l2_regularization_strength",
                               "l2_shrinkage_regularization_strength": "_l2_shrinkage_regularization_strength",
                               "beta": "_beta"}, {}),
}
# Keras hyper-parameters compared with the TF1 ones (the others have no TF1 counterpart).
_KERAS_KEYS = {
    "Adam": ("learning_rate", "beta_1", "beta_2", "epsilon", "amsgrad"),
    "SGD": ("learning_rate", "momentum", "nesterov"),
    "Adagrad": ("learning_rate", "initial_accumulator_value"),
    "RMSprop": ("learning_rate", "rho", "momentum", "epsilon", "centered"),
    "Adadelta": ("learning_rate", "rho", "epsilon"),
    "Ftrl": ("learning_rate", "learning_rate_power", "initial_accumulator_value", "l1_regularization_strength",
             "l2_regularization_strength", "l2_shrinkage_regularization_strength", "beta"),
}


def describe_optimizer(tf, optimizer) -> dict:
    """``{"kind", "class", "params"}``: the optimizer as the Keras one a migration writes, with
    its hyper-parameters as it holds them (a value None: a tensor or schedule, not static)."""
    optimizer = getattr(optimizer, "inner_optimizer", None) or optimizer  # mixed precision's wrapper
    name = keras_kind(optimizer)
    if name in _TF1_OPTIMIZERS:
        kind, attributes, fixed = _TF1_OPTIMIZERS[name]
        params = {key: _hyperparameter(tf, getattr(optimizer, attribute, None)) for key, attribute in attributes.items()}
        return {"kind": kind, "class": name, "params": {**params, **fixed}}
    try:
        config = dict(optimizer.get_config())
    except Exception:  # noqa: BLE001 - an optimizer we cannot read is only not compared
        return {"kind": name, "class": name, "params": {}}
    keys = _KERAS_KEYS.get(name, ())
    return {"kind": name, "class": name, "params": {key: _hyperparameter(tf, config.get(key)) for key in keys
                                                    if key in config},
            "own": type(optimizer).__name__}  # (e2k's TF1Momentum: an SGD updating as TF1's Momentum)


def keras_kind(optimizer) -> str:
    """The optimizer's class, or the known class it subclasses (e2k's TF1RMSprop is a Keras
    RMSprop whose accumulators start where TF1's did)."""
    for klass in type(optimizer).__mro__:
        if klass.__name__ in _KERAS_KEYS or klass.__name__ in _TF1_OPTIMIZERS:
            return klass.__name__
    return type(optimizer).__name__


def tf1_learning_rate(optimizer):
    """A TF1 optimizer's learning rate as it holds it: a number, or a tensor (a decay of the
    global step) that the legacy side fetches at every step."""
    for attribute in ("_learning_rate", "_lr"):
        if hasattr(optimizer, attribute):
            return getattr(optimizer, attribute)
    return None


def keras_learning_rate(tf, optimizer):
    """The learning rate a Keras optimizer applies in its next update: a schedule evaluated at
    ``optimizer.iterations`` (Keras 2 and 3, and Keras 2's legacy optimizers with ``decay``);
    None when it cannot be read."""
    optimizer = getattr(optimizer, "inner_optimizer", None) or optimizer
    try:
        if hasattr(optimizer, "_decayed_lr") and hasattr(optimizer, "_hyper"):  # tf.keras.optimizers.legacy
            value = optimizer._decayed_lr(tf.float32)
        else:
            rate = getattr(optimizer, "_learning_rate", None)
            if rate is None:
                rate = optimizer.learning_rate
            value = rate(optimizer.iterations) if callable(rate) and not hasattr(rate, "assign") else rate
        value = value.numpy() if hasattr(value, "numpy") else value
        return float(value)
    except Exception:  # noqa: BLE001 - an optimizer we cannot read is only not compared
        return None


def _hyperparameter(tf, value):
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, dict) or callable(value):  # a serialized schedule, or a function of the step
        return None
    return _static_float(tf, value)


def enable_op_determinism(tf, record: dict) -> None:
    try:
        tf.config.experimental.enable_op_determinism()
    except AttributeError:  # older TF: the env var is the switch
        os.environ["TF_DETERMINISTIC_OPS"] = "1"
        record.setdefault("notes", []).append("op determinism via TF_DETERMINISTIC_OPS=1")


def versions(tf) -> dict:
    info = {"python": sys.version.split()[0], "tensorflow": tf.__version__}
    try:
        info["keras"] = tf.keras.__version__
    except AttributeError:
        try:
            import keras
            info["keras"] = keras.__version__
        except Exception:  # noqa: BLE001 - a version string is only informative
            info["keras"] = None
    try:
        import numpy as np
        info["numpy"] = np.__version__
    except ImportError:
        info["numpy"] = None
    return info


# Harness functions that do real work (not thin pass-through wrappers): an exception raised
# below one of them, deeper than the user's last frame, is a bug of ours, not the program's.
_ACTIVE_HARNESS_FUNCTIONS = {
    "begin", "after_create_session", "before_run", "after_run", "end",
    "_prepare_model", "_first_batch_features", "_creation_order", "_read", "_describe",
    "on_train_batch_begin", "on_train_batch_end", "on_test_end",
}
USER_FRAMES = 8
DEEPEST_FRAMES = 4


def _is_harness(frame) -> bool:
    return os.path.abspath(frame.filename) in _HARNESS_FILES


def _is_runpy(frame) -> bool:
    return frame.filename.endswith(os.sep + "runpy.py") or frame.filename.startswith("<frozen runpy")


def _is_user(frame, program_dir: str | None) -> bool:
    return bool(program_dir) and os.path.abspath(frame.filename).startswith(program_dir + os.sep)


def crashed_in_harness(exc: BaseException, program_dir: str | None) -> bool:
    """True when the exception comes from the harness's own work, below the user's code."""
    frames = traceback.extract_tb(exc.__traceback__)
    last_user = max((i for i, f in enumerate(frames) if _is_user(f, program_dir)), default=-1)
    return any(_is_harness(f) and f.name in _ACTIVE_HARNESS_FUNCTIONS for f in frames[last_user + 1:])


def traceback_tail(exc: BaseException, program_dir: str | None = None) -> str:
    """The part of a traceback a person needs: the program's own frames (up to 8) and the
    deepest 4 frames, the exception; the harness's frames and runpy's are left out."""
    frames = [
        frame for frame in traceback.extract_tb(exc.__traceback__)
        if not _is_harness(frame) and not _is_runpy(frame)
    ]
    user = [i for i, f in enumerate(frames) if _is_user(f, program_dir)][-USER_FRAMES:]
    keep = sorted(set(user) | set(range(max(0, len(frames) - DEEPEST_FRAMES), len(frames))))
    lines = ["Traceback (most recent call last):"]
    previous = -1
    for i in keep:
        if i != previous + 1:
            lines.append("  ...")
        lines += traceback.format_list([frames[i]])[0].rstrip("\n").splitlines()
        previous = i
    lines += "".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n").splitlines()
    if len(lines) > TRACEBACK_TAIL_LINES + 10:
        lines = lines[:TRACEBACK_TAIL_LINES] + ["  ..."] + lines[-10:]
    return "\n".join(lines)


def exception_summary(exc: BaseException) -> str:
    """One line for the exception. TensorFlow's "in user code:" messages end with the real error."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if len(lines) > 1 and lines[0].endswith(":") else lines[0]
    return line[:500]


def program_entry(path: str) -> tuple[str, str | None]:
    """Where the user's program runs from, and its module name if it is one of a package.

    A file beside an ``__init__.py`` is a package's module (``trainer/task.py``, which says
    ``from trainer import model``): it runs as ``python -m trainer.task`` from the directory
    above the package. Any other file runs as ``python PATH``, from its own directory.
    """
    path = os.path.abspath(path)
    root, module = os.path.dirname(path), [os.path.splitext(os.path.basename(path))[0]]
    while os.path.isfile(os.path.join(root, "__init__.py")) and os.path.dirname(root) != root:
        root, package = os.path.split(root)
        module.insert(0, package)
    return root, (".".join(module) if len(module) > 1 else None)


def set_program_path(path: str) -> tuple[str, str | None]:
    """The program's root first on sys.path (before TensorFlow is imported), as Python puts it;
    ``program_entry(path)``."""
    root, module = program_entry(path)
    sys.path[0] = root
    if module is not None:
        # As `python PATH` would too: a package's module may import its siblings by name.
        sys.path.insert(1, os.path.dirname(os.path.abspath(path)))
    return root, module


def run_program(path: str, args: list[str] | tuple[str, ...] = ()) -> tuple[str, dict | None]:
    """Run the user's program as Python would (see program_entry): its root is cwd and sys.path[0].

    Returns ("ok", None) or (status, error) where error has type, message, traceback.
    """
    path = os.path.abspath(path)
    program_dir, module = set_program_path(path)
    os.chdir(program_dir)
    sys.argv = [path, *args]
    try:
        if module is None:
            runpy.run_path(path, run_name="__main__")
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code in (None, 0):
            return "ok", None
        return "crashed", {
            "type": "SystemExit", "message": f"the program exited with status {exc.code!r}",
            "traceback": traceback_tail(exc, program_dir),
        }
    except HarnessStop as stop:
        return stop.status, {"type": "HarnessStop", "message": stop.message, **stop.details}
    except BaseException as exc:  # noqa: BLE001 - any crash of the user's program is reported
        return ("harness_error" if crashed_in_harness(exc, program_dir) else "crashed"), {
            "type": type(exc).__name__,
            "message": exception_summary(exc),
            "traceback": traceback_tail(exc, program_dir),
        }
    return "ok", None


def save_weights(out_dir: str, result: dict, initial, final) -> None:
    """Write the initial and final weights to ``weights.npz`` and name the file in ``result``."""
    import numpy as np

    arrays = {}
    for prefix, values in (("initial", initial), ("final", final)):
        for i, value in enumerate(values or []):
            arrays[f"{prefix}_{i}"] = np.asarray(value)
    np.savez(os.path.join(out_dir, "weights.npz"), **arrays)
    result["weights_file"] = "weights.npz"


def harness_error(result: dict, exc: BaseException) -> int:
    """Record a failure of the harness itself (a bug of ours: reported, never a hang)."""
    result["status"] = "harness_error"
    result["error"] = {"type": type(exc).__name__, "message": str(exc), "traceback": traceback_tail(exc)}
    return 2


def plain_array(value):
    """A numpy array np.load reads without pickle: strings (bytes or objects) as unicode."""
    import numpy as np

    array = np.asarray(value)
    if array.dtype.kind in "OS":
        flat = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in array.reshape(-1)]
        array = np.array(flat, dtype=str).reshape(array.shape)
    return array


def write_json(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=_json_default)
    os.replace(tmp, path)


def _json_default(value):
    # numpy scalars and arrays, without importing numpy here
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def to_float(value):
    """A Python float (or list) from a numpy/TF scalar; None stays None."""
    if value is None:
        return None
    if hasattr(value, "numpy"):
        value = value.numpy()
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [to_float(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)
