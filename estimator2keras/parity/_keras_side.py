"""Bootstrap that `e2k parity` runs, by path, in the target interpreter (TF 2.15 .. newest, Keras 2 or 3).

    python _keras_side.py REQUEST.json

It runs the user's migrated Keras program unchanged (runpy, as `__main__`) after patching
TensorFlow and Keras so that the run is comparable with the legacy one:

* N logical CPU devices (or N GPUs) and every MirroredStrategy placed on them; a program for
  Keras 3 on JAX (``backend: "jax"`` in the request, as ``--target jax`` writes it) runs on
  JAX with N CPU devices (XLA_FLAGS), set before the program starts Keras, its
  keras.distribution spreading the batch over them;
* before the first `Model.fit`, the model is built (on one batch of fit's data, under the
  model's strategy scope, when the program did not build it) and the legacy side's initial
  values are copied into it, paired by creation order and shape (names as a cross-check).
  A pairing failure ends the run with both variable tables;
* a callback records the loss of every step: it resets the metrics at the start of each
  batch, so the logs at the batch's end hold that step's loss (Keras logs are a running
  mean over the epoch otherwise);
* the metrics of every top-level `Model.evaluate`, and the model's weights after training.

Output (in the request's out_dir): result.json and weights.npz (initial_<i>, final_<i>, in
the legacy side's variable order). Standalone on purpose: imports nothing from estimator2keras.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import sys


def _load_common():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_side_common.py")
    spec = importlib.util.spec_from_file_location("_e2k_parity_side_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


common = _load_common()


class State:
    """What the instrumented Keras program did."""

    def __init__(self, request: dict):
        self.step_limit = request.get("steps")
        self.workers = int(request.get("workers", 1))
        self.neutralize_shuffle = bool(request.get("neutralize_shuffle"))
        self.legacy_variables: list[dict] = request.get("legacy_variables") or []
        self.initial_weights_path = request.get("initial_weights")
        self.model = None
        # Other models the program trains (a dict of them in a loop): they train as written,
        # unrecorded; ``model``, the request's ``model`` (0-based) in the order the program's
        # models first fit (the first by default), is the one compared.
        self.model_index = int(request.get("model") or 0)
        self.trained: list = []  # every model that fit, in the order each first fit
        self.other_models: list = []
        self.in_other_fit = False  # fit of a model not compared: its dropout is not recorded
        #: The legacy variables (places) the Estimator's warm start set: not copied, the migrated
        #: model keeps what its program gave them (a warm start it lost must show).
        self.warm_started: list[int] = list((request.get("legacy_warm_start") or {}).get("variables") or [])
        self.paired: list = []  # Keras weights in the legacy variable order
        self.losses: list[float] = []
        self.fit_calls = 0
        self.skipped_fit_calls = 0
        self.in_fit = False
        self.in_evaluate = False
        self.evaluations: list[dict] = []
        self.fit_validation: dict | None = None
        self.initial = None
        self.final = None
        self.replicas: int | None = None
        self.strategy: str | None = None
        self.worker_devices: list[str] | None = None
        self.variables: list[dict] = []
        self.pairing_notes: list[str] = []
        self.diverged: list[dict] = []
        self.dropout: list[dict] = []  # dropout and noise layers as fit trains (see patch_dropout)
        self.optimizers: list[dict] = []
        self.learning_rates: list = []  # the rate each step's update applies (None: unreadable)
        self.shuffles: list[dict] = []  # Dataset.shuffle calls, neutralised (see patch_shuffle)
        self.info: dict = {"notes": []}
        # `e2k checkpoint`: the legacy checkpoint's values are written into the model and its
        # optimizer, saved, restored, and the model's predictions read; nothing trains.
        self.checkpoint: dict | None = request.get("checkpoint")
        #: The Keras backend the program runs on (None: TensorFlow).
        self.backend: str | None = request.get("backend")
        self.written: dict | None = None
        self.predictions: dict | None = None

    @property
    def limit_reached(self) -> bool:
        return self.step_limit is not None and len(self.losses) >= self.step_limit


def _creation_order(weights):
    """Keras weights sorted by creation, which is the legacy graph's order for a faithful
    migration (a subclassed model's layer attributes may be listed in another order).

    TensorFlow numbers every variable it creates (`_unique_id` ends in a global counter);
    when that is unavailable the model's own order is kept.
    """
    keys = []
    for weight in weights:
        key = None
        for obj in (weight, getattr(weight, "_value", None)):
            uid = getattr(obj, "_unique_id", None)
            if isinstance(uid, str) and uid.rsplit("_", 1)[-1].isdigit():
                key = int(uid.rsplit("_", 1)[-1])
                break
        keys.append(key)
    if any(key is None for key in keys) or len(set(keys)) != len(keys):
        return list(weights)
    return [w for _, w in sorted(zip(keys, weights), key=lambda pair: pair[0])]


class _ReadOrder:
    """The order in which a model's first call reads its variables (TensorFlow's resource
    variables, and the per-device components of distributed ones), recorded while it runs."""

    def __init__(self, tf):
        from tensorflow.python.ops import resource_variable_ops

        self._cls = resource_variable_ops.BaseResourceVariable
        self._tf = tf
        self._first: dict[int, int] = {}
        self.tracing = False

    def call(self, model, features) -> None:
        """Run ``model`` on ``features`` traced (a tf.function), recording what it reads."""
        def forward(features):
            self.tracing = True
            try:
                return model(features, training=False)
            finally:
                self.tracing = False
        self._tf.function(forward, autograph=False)(features)

    def __enter__(self):
        first, executing_eagerly = self._first, self._tf.executing_eagerly
        self._saved = {name: getattr(self._cls, name) for name in ("_read_variable_op", "sparse_read")}

        def recording(name):
            original = self._saved[name]

            def read(variable, *args, **kwargs):
                # Eager reads, and those of the traced call (`traced`): an eager op reads a
                # variable in C (TensorFlow's fast path) without this method, a traced one here.
                # Not Keras 3's symbolic first call, which reads the weights that exist before
                # its layers have made theirs.
                if executing_eagerly() or self.tracing:
                    first.setdefault(id(variable), len(first))
                return original(variable, *args, **kwargs)
            return read

        for name in self._saved:
            setattr(self._cls, name, recording(name))
        return self

    def __exit__(self, *exc):
        for name, original in self._saved.items():
            setattr(self._cls, name, original)
        return False

    def _position(self, weight) -> int | None:
        seen, stack = set(), [weight]
        positions = []
        while stack:  # the weight, what it wraps (Keras 3), and its per-device components
            obj = stack.pop()
            if obj is None or id(obj) in seen:
                continue
            seen.add(id(obj))
            if id(obj) in self._first:
                positions.append(self._first[id(obj)])
            stack.append(getattr(obj, "_value", None))
            try:
                stack.extend(getattr(obj, "values", None) or ())
            except TypeError:
                pass
        return min(positions) if positions else None

    def ordered(self, weights: list) -> list:
        """``weights`` by first read; those the call did not read after, in their given order."""
        keyed = [(self._position(w), i, w) for i, w in enumerate(weights)]
        unread = len(self._first) + 1
        return [w for _, _, w in sorted(keyed, key=lambda k: (unread if k[0] is None else k[0], k[1]))]


def _by_names(legacy: list[dict], weights: list) -> list:
    """``weights`` in their order, but where two of one shape stand at each other's names
    (``gamma`` where the legacy table has ``beta`` and the other way round), swapped: an order
    read from a call can put a layer's own weights as its op reads them."""
    weights = list(weights)
    if len(legacy) != len(weights):
        return weights
    for i, theirs in enumerate(legacy):
        if _leaf(theirs["name"]) == _leaf(_weight_name(weights[i])):
            continue
        for j in range(i + 1, len(weights)):
            if (list(weights[j].shape) == list(weights[i].shape)
                    and _leaf(_weight_name(weights[j])) == _leaf(theirs["name"])
                    and _leaf(_weight_name(weights[i])) == _leaf(legacy[j]["name"])):
                weights[i], weights[j] = weights[j], weights[i]
                break
    return weights


def _weight_name(weight) -> str:
    name = getattr(weight, "path", None) or weight.name
    return name[:-2] if name.endswith(":0") else name


def _leaf(name: str) -> str:
    return name.rsplit("/", 1)[-1].split(":")[0]


def _describe(weights, trainable: bool) -> list[dict]:
    return [
        {"name": _weight_name(w), "shape": [int(d) for d in w.shape],
         "dtype": str(getattr(w.dtype, "name", w.dtype)), "trainable": trainable}
        for w in weights
    ]


def _first_batch_features(x, kwargs_batch_size):
    """Features of one batch of fit's `x`, and `x` itself (replaced when it had to be peeked).

    Returns (features or None, x).
    """
    import numpy as np

    if x is None:
        return None, x
    if hasattr(x, "take") and hasattr(x, "element_spec"):  # tf.data.Dataset
        for element in x.take(1):
            return (element[0] if isinstance(element, (tuple, list)) else element), x
        return None, x
    if hasattr(x, "__getitem__") and hasattr(x, "__len__") and not isinstance(x, (np.ndarray, list, tuple, dict)) \
            and not hasattr(x, "shape"):
        element = x[0]  # keras.utils.Sequence / PyDataset
        return (element[0] if isinstance(element, (tuple, list)) else element), x
    if inspect.isgenerator(x) or hasattr(x, "__next__"):
        element = next(x)

        def put_back(rest=x):  # a generator again, with the peeked batch first
            yield element
            yield from rest

        return (element[0] if isinstance(element, (tuple, list)) else element), put_back()
    size = kwargs_batch_size or 32
    if isinstance(x, dict):
        return {k: v[:size] for k, v in x.items()}, x
    if isinstance(x, (list, tuple)):
        return [v[:size] for v in x], x
    return x[:size], x


def _prepare_model(tf, state: State, model, x, batch_size, strict: bool = False):
    """Build the model if needed, pair its weights with the legacy variables, copy them in."""
    import numpy as np

    strategy = _JaxDevices() if state.backend == "jax" else \
        getattr(model, "distribute_strategy", None) or tf.distribute.get_strategy()
    if not getattr(model, "built", False) or not model.weights:
        features, x = _first_batch_features(x, batch_size)
        if features is None:
            raise common.HarnessStop(
                "unsupported", "the model is not built before fit and the harness could not take a batch "
                           f"from fit's data ({type(x).__name__}) to build it; give the model an input shape")
        with strategy.scope():
            model(features, training=False)
    else:
        features = None

    # A metric's variables (Keras 2 lists those of metrics held as model attributes among the
    # model's weights) are bookkeeping, never model state.
    metric_variables = {id(v) for m in (getattr(model, "metrics", None) or []) for v in getattr(m, "variables", [])}
    legacy = state.legacy_variables
    legacy_trainable = [v for v in legacy if v["trainable"]]
    legacy_state = [v for v in legacy if not v["trainable"]]

    def shapes(table):
        return [list(v["shape"]) for v in table]

    trainable = _creation_order(list(model.trainable_weights))
    non_trainable = _creation_order([w for w in model.non_trainable_weights if id(w) not in metric_variables])
    if features is not None and shapes(legacy_trainable) != shapes(_describe(trainable, True)):
        # Weights a model makes in __init__ (`self.add_weight`, as a TF1 `get_variable` becomes)
        # exist before its layers build theirs; TF1 made each where the forward pass first
        # used it. The order in which a call of the built model first reads them is that order
        # (not the building call's: making a mirrored variable reads it, and Keras 3 traces
        # that call symbolically first).
        with strategy.scope(), _ReadOrder(tf) as reads:
            reads.call(model, features)
        trainable = reads.ordered(trainable)
        if shapes(legacy_state) != shapes(_describe(non_trainable, False)):
            non_trainable = reads.ordered(non_trainable)  # else created in order: a fused op reads them otherwise
    trainable = _by_names(legacy_trainable, trainable)
    non_trainable = _by_names(legacy_state, non_trainable)
    state.variables = _describe(trainable, True) + _describe(non_trainable, False)

    mine_trainable = state.variables[: len(trainable)]
    mine_state = state.variables[len(trainable):]
    if shapes(legacy_trainable) != shapes(mine_trainable):
        raise common.HarnessStop(
            "variables_mismatch",
            f"the migrated model's trainable variables do not match the Estimator's "
            f"({len(mine_trainable)} vs {len(legacy_trainable)}, paired by creation order and shape)",
            legacy_variables=legacy, migrated_variables=state.variables)
    paired = list(trainable)
    if legacy_state and shapes(legacy_state) == shapes(mine_state):
        paired += non_trainable
    elif strict and (legacy_state or mine_state):
        raise common.HarnessStop(
            "variables_mismatch",
            f"the migrated model's non-trainable variables (model state) do not match the Estimator's "
            f"({len(mine_state)} vs {len(legacy_state)}, paired by creation order and shape)",
            legacy_variables=legacy, migrated_variables=state.variables)
    elif legacy_state or mine_state:
        state.pairing_notes.append(
            f"non-trainable model state not paired (legacy: {len(legacy_state)}, migrated: "
            f"{len(mine_state)} variables): not copied and not compared")
        legacy = legacy_trainable
    for i, (theirs, mine) in enumerate(zip(legacy, state.variables)):
        if _leaf(theirs["name"]) != _leaf(mine["name"]):
            state.pairing_notes.append(
                f"variable #{i}: names differ (legacy {theirs['name']!r}, migrated {mine['name']!r}); "
                "paired by creation order and shape")
    state.paired = paired

    with np.load(state.initial_weights_path) as initial:
        values = [initial[f"initial_{i}"] for i in range(len(paired))]
    warm = set(state.warm_started)
    with strategy.scope():
        for i, (weight, value) in enumerate(zip(paired, values)):
            if i in warm:  # the Estimator's warm start set it: the migrated program must too
                continue
            weight.assign(value.astype(np.dtype(str(getattr(weight.dtype, "name", weight.dtype)))))
    state.initial = _read(paired)
    state.replicas = int(strategy.num_replicas_in_sync)
    name = getattr(strategy, "name", None) if isinstance(strategy, _JaxDevices) else type(strategy).__name__
    state.strategy = None if name is None or name.startswith("_Default") else name  # no strategy in the program
    try:
        state.worker_devices = list(strategy.extended.worker_devices)
    except (AttributeError, RuntimeError):
        state.worker_devices = None
    return x


class _JaxDevices:
    """What the harness asks of a strategy, for a Keras 3 program on JAX: its distribution's
    devices; the model needs no scope."""

    def __init__(self):
        import keras

        distribution = keras.distribution.distribution()
        # No distribution: JAX computes on its first device.
        self.devices = list(distribution.device_mesh.devices.flatten()) if distribution is not None else \
            keras.distribution.list_devices()[:1]
        #: How the report names it: the distribution's class (``keras.distribution.DataParallel``).
        self.name = f"keras.distribution.{type(distribution).__name__}" if distribution is not None else None
        self.num_replicas_in_sync = len(self.devices)
        self.extended = self

    @property
    def worker_devices(self):
        return [str(d) for d in self.devices]

    def scope(self):
        import contextlib

        return contextlib.nullcontext()


def _read(weights):
    """The values the program would save: a sync-on-read variable's aggregate, a mirrored
    variable's value."""
    import numpy as np

    return [np.array(w.numpy() if hasattr(w, "numpy") else w) for w in weights]


def _read_final(weights, descriptions):
    """Final values, and the mirrored variables whose per-replica copies diverged.

    Mirroring promises equal copies; Keras 3 breaks it for BatchNormalization's moving
    statistics under MirroredStrategy (each replica updates its own copy, aggregation NONE),
    and reads and saves replica 0's. Such a variable is read as the mean of its copies —
    what the Estimator checkpoints and Keras 2 saves (sync-on-read, MEAN) — and reported,
    with how far the copies and the saved copy are from that mean.
    """
    import numpy as np

    values, diverged = _read(weights), []
    for i, (weight, description) in enumerate(zip(weights, descriptions)):
        variable = getattr(weight, "_value", weight)
        if type(variable).__name__ != "MirroredVariable":
            continue
        try:
            copies = [np.asarray(c.numpy()) for c in variable.values]
        except (AttributeError, RuntimeError, TypeError):
            continue
        spread = max((float(np.max(np.abs(c - copies[0]))) for c in copies[1:] if c.size), default=0.0)
        if spread > 0:
            mean = np.mean(np.stack(copies), axis=0).astype(copies[0].dtype)
            diverged.append({"index": i, "name": description["name"], "max_diff": spread,
                             "saved_vs_mean": float(np.max(np.abs(values[i] - mean)))})
            values[i] = mean
    return values, diverged


def instrument(tf, state: State) -> None:
    """Patch Keras's Model.fit and Model.evaluate for a comparable, recorded run."""
    Model = tf.keras.Model

    class StepRecorder(tf.keras.callbacks.Callback):
        """Each step's own loss: metrics reset before the step, read after it."""

        def on_train_batch_begin(self, batch, logs=None):
            if not state.losses and state.warm_started and state.initial is not None:
                # A warm start the program makes as training begins (e2k's WarmStart callback)
                # is where the first step starts: those variables are read again.
                for i in state.warm_started:
                    if i < len(state.paired):
                        state.initial[i] = _read([state.paired[i]])[0]
            self.model.reset_metrics()
            optimizer = getattr(self.model, "optimizer", None)
            state.learning_rates.append(None if optimizer is None else common.keras_learning_rate(tf, optimizer))

        def on_train_batch_end(self, batch, logs=None):
            loss = (logs or {}).get("loss", float("nan"))
            if state.workers > 1:
                # Keras 2's batch logs sum the workers' losses under MultiWorkerMirroredStrategy;
                # its loss metric holds their mean, the value History reports for an epoch.
                tracker = next((m for m in self.model.metrics if m.name == "loss"), None)
                loss = tracker.result() if tracker is not None else loss
            state.losses.append(float(loss))
            if state.limit_reached:
                self.model.stop_training = True

    class EvaluationRecorder(tf.keras.callbacks.Callback):
        def on_test_end(self, logs=None):
            state.evaluations.append({str(k): common.to_float(v) for k, v in (logs or {}).items()})

    original_fit = Model.fit
    fit_signature = inspect.signature(original_fit)

    def fit(self, *args, **kwargs):
        if state.in_fit:
            return original_fit(self, *args, **kwargs)
        bound = fit_signature.bind(self, *args, **kwargs)
        if state.checkpoint is not None:
            return _checkpoint_fit(tf, state, self, bound)
        first = all(other is not self for other in state.trained)
        if first:
            state.trained.append(self)
            if len(state.trained) - 1 != state.model_index:
                state.other_models.append(self)
        if first and self is not state.model and len(state.trained) - 1 == state.model_index:
            state.model = self
            x = _prepare_model(tf, state, self, bound.arguments.get("x"), bound.arguments.get("batch_size"))
            if "x" in bound.arguments:
                bound.arguments["x"] = x
            optimizer = getattr(self, "optimizer", None)
            if optimizer is not None:
                state.optimizers = [common.describe_optimizer(tf, optimizer)]
        elif state.model is not self:
            state.in_fit = state.in_other_fit = True
            try:
                return original_fit(*bound.args, **bound.kwargs)
            finally:
                state.in_fit = state.in_other_fit = False
        if state.limit_reached:
            state.skipped_fit_calls += 1
            history = tf.keras.callbacks.History()
            history.history = {}
            return history
        state.fit_calls += 1
        callbacks = bound.arguments.get("callbacks") or []
        bound.arguments["callbacks"] = [StepRecorder()] + list(callbacks)
        if state.neutralize_shuffle and "shuffle" in fit_signature.parameters:
            bound.arguments["shuffle"] = False  # fit shuffles numpy inputs by default
        state.in_fit = True
        try:
            history = original_fit(*bound.args, **bound.kwargs)
        finally:
            state.in_fit = False
            state.final, state.diverged = _read_final(state.paired, state.variables)
        val = {k[4:]: common.to_float(v[-1]) for k, v in (getattr(history, "history", None) or {}).items()
               if k.startswith("val_") and v}
        if val:
            state.fit_validation = val
        return history

    Model.fit = fit

    original_evaluate = Model.evaluate
    evaluate_signature = inspect.signature(original_evaluate)

    def evaluate(self, *args, **kwargs):
        if state.in_fit or state.in_evaluate:
            return original_evaluate(self, *args, **kwargs)
        bound = evaluate_signature.bind(self, *args, **kwargs)
        if state.checkpoint is not None:
            if state.written is None:
                raise common.HarnessStop(
                    "unsupported", "the program evaluates before it trains: e2k checkpoint writes the "
                                   "checkpoint where the program first calls fit")
            # The program's callbacks are left out: a ModelDirCheckpoints would restore its own model_dir.
            bound.arguments["callbacks"] = [EvaluationRecorder()]
            state.in_evaluate = True
            try:
                original_evaluate(*bound.args, **bound.kwargs)
            finally:
                state.in_evaluate = False
            batches = int(state.checkpoint.get("eval_batches", 32))
            state.predictions = _predict(self, bound.arguments.get("x"), bound.arguments.get("steps"),
                                         bound.arguments.get("batch_size"), "eval", batches)
            raise common.HarnessStop("captured", "the restored model's evaluation and predictions were read")
        if self is not state.model and any(other is self for other in state.other_models):
            # Another model that trained: its own weights, not compared. A model that has not
            # trained is recorded: it evaluates what it restored, which must be the compared
            # model, as the legacy side's Estimator reading the compared one's model_dir does.
            return original_evaluate(self, *args, **kwargs)
        bound.arguments["callbacks"] = list(bound.arguments.get("callbacks") or []) + [EvaluationRecorder()]
        state.in_evaluate = True
        try:
            return original_evaluate(*bound.args, **bound.kwargs)
        finally:
            state.in_evaluate = False

    Model.evaluate = evaluate


def _checkpoint_fit(tf, state: State, model, bound):
    """`e2k checkpoint`: the first fit writes the legacy checkpoint's values into the model and its
    optimizer and saves them; no fit trains."""
    history = tf.keras.callbacks.History()
    history.history = {}
    if state.written is not None:
        state.skipped_fit_calls += 1
        return history
    state.model = model
    state.fit_calls += 1
    x = _prepare_model(tf, state, model, bound.arguments.get("x"), bound.arguments.get("batch_size"), strict=True)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        raise common.HarnessStop("unsupported", "the model has no optimizer when fit is called (compile it first)")
    state.optimizers = [common.describe_optimizer(tf, optimizer)]
    checkpoint_write(tf, state, model, optimizer)
    batches = int(state.checkpoint.get("train_batches", 8))
    state.predictions = _predict(model, x, bound.arguments.get("steps_per_epoch"),
                                 bound.arguments.get("batch_size"), "train", batches)
    return history


# Where each Keras optimizer (2.11+ and Keras 3) keeps the slot a TF1 or Keras legacy optimizer
# names: {Keras class: {legacy slot name: attribute holding one slot per trainable variable}}.
_SLOT_ATTRIBUTES = {
    "Adam": {"m": "_momentums", "v": "_velocities", "vhat": "_velocity_hats"},
    "Adagrad": {"accumulator": "_accumulators"},
    "SGD": {"momentum": "momentums"},
    "RMSprop": {"rms": "_velocities", "momentum": "_momentums", "mg": "_average_gradients"},
    "Ftrl": {"accum": "_accumulators", "accumulator": "_accumulators", "linear": "_linears"},
    "Adadelta": {"accum": "_accumulated_grads", "accum_update": "_accumulated_delta_vars"},
}


class _Refused(Exception):
    pass


def model_optimizers(model) -> list:
    """The model's optimizer and the other optimizers it holds as attributes (a wide & deep
    model's linear_optimizer), each once."""
    found = []
    for candidate in [getattr(model, "optimizer", None)] + list(vars(model).values()):
        if candidate is not None and hasattr(candidate, "apply_gradients") and hasattr(candidate, "iterations") \
                and not hasattr(candidate, "layers") and all(candidate is not f for f in found):
            found.append(candidate)
    return found


def _built(optimizer) -> bool:
    return bool(getattr(optimizer, "built", False) or getattr(optimizer, "_built", False))


def _optimizer_slots(tf, optimizers, trainable, slots):
    """The Keras slot variable for each legacy slot entry ({"variable", "slot", "group", ...}).

    The entries of one legacy optimizer (a group) go to one Keras optimizer of the same kind,
    whose slots are built for exactly that optimizer's variables when it is not built yet
    (the variables fit applies it to, or its own subset in a custom train_step)."""
    groups: dict = {}
    for entry in slots:
        groups.setdefault(entry.get("group", 0), []).append(entry)
    found: dict = {}
    used: list = []
    for group, entries in groups.items():
        kind = entries[0]["kind"]
        indices = sorted({e["variable"] for e in entries})
        candidates = [o for o in optimizers
                      if common.keras_kind(getattr(o, "inner_optimizer", None) or o) == kind and all(o is not u for u in used)]
        if not candidates:
            kinds = ", ".join(type(o).__name__ for o in optimizers) or "none"
            raise _Refused(f"the Estimator's {entries[0]['optimizer']} (slots {entries[0]['name']!r}, ...) has no "
                           f"counterpart among the migrated model's optimizers ({kinds})")
        optimizer = candidates[0]
        used.append(optimizer)
        inner = getattr(optimizer, "inner_optimizer", None) or optimizer
        variables = [trainable[i] for i in indices]
        legacy_keras = hasattr(inner, "get_slot_names")  # tf.keras.optimizers.legacy.*
        if legacy_keras:
            inner._create_all_weights(variables)
        elif not _built(inner):
            inner.build(variables)
        for entry in entries:
            variable = trainable[entry["variable"]]
            slot = None
            if legacy_keras:
                names = {"accum": "accumulator"}
                try:
                    slot = inner.get_slot(variable, names.get(entry["slot"], entry["slot"]))
                except (KeyError, ValueError):
                    slot = None
            else:
                attribute = _SLOT_ATTRIBUTES.get(kind, {}).get(entry["slot"])
                holder = getattr(inner, attribute, None) if attribute else None
                if holder:
                    index = _slot_index(inner, variable, variables, indices.index(entry["variable"]))
                    slot = holder[index] if index is not None and index < len(holder) else None
            if slot is None:
                raise _Refused(f"the Estimator's optimizer slot {entry['name']!r} ({entry['optimizer']} "
                               f"slot {entry['slot']!r}) has no counterpart in the migrated {type(inner).__name__}")
            if [int(d) for d in slot.shape] != list(entry["shape"]):
                raise _Refused(f"the Estimator's optimizer slot {entry['name']!r} {entry['shape']} and its "
                               f"counterpart {_weight_name(slot)!r} {[int(d) for d in slot.shape]} differ in shape")
            found[id(entry)] = slot
    return [found[id(entry)] for entry in slots]


def _slot_index(optimizer, variable, trainable, position):
    for lookup in ("_get_variable_index",):  # Keras 3
        method = getattr(optimizer, lookup, None)
        if method is not None:
            try:
                return method(variable)
            except (KeyError, AttributeError):
                pass
    index_dict = getattr(optimizer, "_index_dict", None)  # Keras 2.11+
    if index_dict is not None:
        try:
            return index_dict[optimizer._var_key(variable)]
        except (KeyError, AttributeError):
            pass
    return position


def _assign(weight, value):
    import numpy as np

    weight.assign(np.asarray(value).astype(np.dtype(str(getattr(weight.dtype, "name", weight.dtype)))))


def checkpoint_write(tf, state: State, model, optimizer) -> None:
    """Assign the optimizer's slots and iterations from the legacy checkpoint (the model's
    weights are assigned by _prepare_model), save the model_dir checkpoint and the weights
    file, then zero everything and restore both to prove they load."""
    import numpy as np

    request = state.checkpoint
    strategy = getattr(model, "distribute_strategy", None) or tf.distribute.get_strategy()
    trainable = state.paired[:len([v for v in state.variables if v["trainable"]])]
    values = np.load(request["values"])
    slots = request.get("slots") or []
    optimizers = model_optimizers(model)
    with strategy.scope():
        try:
            slot_weights = _optimizer_slots(tf, optimizers, trainable, slots)
        except _Refused as exc:
            raise common.HarnessStop("variables_mismatch", str(exc), legacy_variables=state.legacy_variables,
                                     migrated_variables=state.variables) from None
        for i, (entry, slot) in enumerate(zip(slots, slot_weights)):
            _assign(slot, values[f"slot_{i}"] * entry.get("scale", 1.0))
        step = request.get("global_step")
        iterations = []
        for each in optimizers:  # every optimizer stepped with the global step
            counter = getattr(getattr(each, "inner_optimizer", None) or each, "iterations", None)
            if step is not None and counter is not None and all(counter is not c for c in iterations):
                _assign(counter, step)
                iterations.append(counter)
    written = list(state.paired) + slot_weights + iterations
    expected = [np.asarray(v) for v in _read(written)]
    mapping = [{"legacy": legacy["name"], "migrated": mine["name"], "shape": mine["shape"],
                "what": "weight" if mine["trainable"] else "model state (non-trainable)"}
               for legacy, mine in zip(state.legacy_variables, state.variables[:len(state.paired)])]
    mapping += [{"legacy": entry["name"], "migrated": _weight_name(slot), "shape": entry["shape"],
                 "what": f"{entry['optimizer']} slot {entry['slot']}"
                 + (f" (x {entry['scale']:.6g}: minus the learning rate)" if "scale" in entry else "")}
                for entry, slot in zip(slots, slot_weights)]
    mapping += [{"legacy": request.get("global_step_name") or "global_step", "migrated": _weight_name(counter),
                 "shape": [], "what": "global step"} for counter in iterations]

    stage = request["stage_dir"]
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, **_listed_weights(tf, model))
    manager = tf.train.CheckpointManager(checkpoint, stage, max_to_keep=1)
    path = manager.save(checkpoint_number=int(step or 0))
    weights_file = os.path.join(stage, request.get("weights_file", "model.weights.h5"))
    model.save_weights(weights_file)

    def zero():
        with strategy.scope():
            for weight in written:
                _assign(weight, np.zeros([int(d) for d in weight.shape]))

    def unchanged(weights, what):
        bad = [_weight_name(w) for w, got, want in zip(weights, _read(weights), expected)
               if not np.array_equal(np.asarray(got), want)]
        if bad:
            raise RuntimeError(f"{what} did not restore {', '.join(bad[:5])}")

    zero()
    try:
        model.load_weights(weights_file)
    except (TypeError, ValueError) as exc:
        # Keras 2 saves the metrics a model holds as attributes among its weights and cannot
        # load their sync-on-read variables back under a MirroredStrategy: no weights file
        # rather than one that does not load.
        os.remove(weights_file)
        state.info["notes"].append(
            f"no {os.path.basename(weights_file)} written: this Keras cannot load it back into the model "
            f"({type(exc).__name__}: {common.exception_summary(exc)}); restore the checkpoint instead, "
            "tf.train.Checkpoint(model=model).restore(...)")
        weights_file = None
    else:
        unchanged(written[:len(state.paired)], "the weights file")
    zero()
    tf.train.Checkpoint(model=model, optimizer=optimizer, **_listed_weights(tf, model)).restore(
        path).assert_existing_objects_matched()
    unchanged(written, "the written checkpoint")
    state.written = {"checkpoint": os.path.basename(path),
                     "weights_file": os.path.basename(weights_file) if weights_file else None,
                     "mapping": mapping, "global_step": step}


def _listed_weights(tf, model) -> dict:
    """The model's weights listed beside it, as e2k's ModelDirCheckpoints lists them on Keras 3
    (tf.train.Checkpoint does not see a Keras 3 layer's list of layers, keras-team/keras#19425):
    the checkpoint written is the one that callback restores."""
    return {"weights": model.weights} if hasattr(tf.keras, "version") else {}


def _predict(model, x, steps, batch_size, source: str, max_batches: int) -> dict:
    """The model's predictions on fit's or evaluate's data, its first ``max_batches`` batches."""
    import numpy as np

    if x is None:
        return {"source": source, "arrays": {}}
    batches = max_batches if steps is None else min(int(steps), max_batches)
    if hasattr(x, "take") and hasattr(x, "element_spec"):
        output = model.predict(x.take(batches), verbose=0)
    else:
        size = batch_size or 32
        if isinstance(x, dict):
            data = {k: v[: size * batches] for k, v in x.items()}
        elif isinstance(x, (list, tuple)):
            data = [v[: size * batches] for v in x]
        else:
            data = x[: size * batches]
        output = model.predict(data, batch_size=size, verbose=0)
    if isinstance(output, dict):
        arrays = {str(k): np.asarray(v) for k, v in output.items()}
    elif isinstance(output, (list, tuple)):
        arrays = {str(i): np.asarray(v) for i, v in enumerate(output)}
    else:
        arrays = {"": np.asarray(output)}
    return {"source": source, "arrays": arrays}


#: What holds the migrated program's model_dir, or writes where the Estimator wrote into its
#: model_dir: (class under tf.train / tf.keras.callbacks, its directory argument, default).
#: ModelCheckpoint's argument is a file path: its directory is redirected, its name kept.
MODEL_DIR_HOLDERS = (
    ("train", "CheckpointManager", "directory", None),
    ("keras", "BackupAndRestore", "backup_dir", None),
    ("keras", "ModelCheckpoint", "filepath", None),
    ("keras", "TensorBoard", "log_dir", "logs"),
)


def patch_model_dirs(tf, out_dir: str, notes: list, resume: str | None = None) -> None:
    """The migrated program's model_dir, however it spells it, in fresh temporary directories,
    as the Estimator's: each directory a tf.train.CheckpointManager manages (e2k's
    ModelDirCheckpoints restores the latest checkpoint there and saves there), a Keras
    BackupAndRestore's backup_dir, a ModelCheckpoint's directory and a TensorBoard's log_dir
    become fresh directories under the run's out_dir (one per directory the program names, per
    kind), so that nothing left by an earlier run is restored and nothing is written into the
    user's directories. With ``resume`` (`e2k parity --from-checkpoint`) each CheckpointManager
    directory starts as a copy of the converted checkpoint, so the program resumes from it as it
    would from its model_dir. Directories already under out_dir (Keras's own, inside a redirected
    one) are left as they are."""
    import shutil
    import tempfile

    fresh: dict = {}

    def redirect(kind: str, directory) -> str:
        user = os.path.abspath(os.fspath(directory))
        inside = os.path.abspath(out_dir).rstrip(os.sep) + os.sep
        if (user + os.sep).startswith(inside):
            return os.fspath(directory)
        if (kind, user) not in fresh:
            path = fresh[kind, user] = tempfile.mkdtemp(prefix=f"{kind}_", dir=out_dir)
            copied = kind == "CheckpointManager" and resume
            if copied:
                for name in os.listdir(resume):
                    shutil.copy2(os.path.join(resume, name), os.path.join(path, name))
            notes.append(f"{kind} directory {user} ran in a fresh temporary directory"
                         f"{' (a copy of the converted checkpoint)' if copied else ''}: "
                         "nothing was read from it or written to it")
        return fresh[kind, user]

    for module, name, parameter, default in MODEL_DIR_HOLDERS:
        cls = getattr(tf.train if module == "train" else tf.keras.callbacks, name, None)
        if cls is None:
            continue
        original = cls.__init__
        try:
            signature = inspect.signature(original)
        except (TypeError, ValueError):
            continue

        def __init__(self, *args, _original=original, _signature=signature, _kind=name, _parameter=parameter,
                     _default=default, **kwargs):
            try:
                bound = _signature.bind(self, *args, **kwargs)
            except TypeError:  # the program's own mistake: let the class say so
                return _original(self, *args, **kwargs)
            value = bound.arguments.get(_parameter, _default)
            if value is not None and not (isinstance(value, str) and "://" in value):
                value = os.fspath(value)
                if _kind == "ModelCheckpoint":
                    head, tail = os.path.split(value)
                    bound.arguments[_parameter] = os.path.join(redirect(_kind, head or os.curdir), tail)
                else:
                    bound.arguments[_parameter] = redirect(_kind, value)
            return _original(*bound.args, **bound.kwargs)

        cls.__init__ = __init__


def configure_devices(tf, devices: list[str], kind: str) -> None:
    """N logical CPUs on the first physical CPU, before TensorFlow initialises."""
    if kind == "CPU" and len(devices) > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in devices])


def main(request_path: str) -> int:
    request = common.load_request(request_path)
    out_dir = request["out_dir"]
    common.set_program_path(request["program"])
    state = State(request)
    result: dict = {"side": "migrated", "status": "harness_error", "program": request["program"]}
    try:
        common.seed_python_and_numpy(request["seed"])
        if state.backend == "jax":
            # Before Keras (and JAX) start: the backend, and the devices the replicas are.
            os.environ["KERAS_BACKEND"] = "jax"
            os.environ["XLA_FLAGS"] = " ".join(
                [os.environ.get("XLA_FLAGS", ""), f"--xla_force_host_platform_device_count={request['replicas']}"]).strip()
        try:
            import tensorflow as tf
        except ImportError as exc:
            result.update(status="environment", error={
                "type": "ImportError", "message": f"cannot import tensorflow in {sys.executable}: {exc}"})
            return 2
        result["versions"] = common.versions(tf)
        devices, kind = common.harness_devices(tf, request["replicas"])
        result["harness_devices"] = devices
        if state.backend == "jax":
            import keras

            result["versions"]["backend"] = f"JAX {__import__('jax').__version__}, Keras {keras.__version__}"
        else:
            configure_devices(tf, devices, kind)
        tf.keras.utils.set_random_seed(request["seed"])
        common.patch_mirrored_strategy(tf, devices, state.info)
        common.patch_logical_device_configuration(tf, state.info)
        if request["neutralize_shuffle"]:
            common.patch_shuffle(tf, state.shuffles)
        if request["neutralize_dropout"]:
            common.patch_dropout(tf, state.dropout, lambda: state.in_fit and not state.in_other_fit)
        if request["op_determinism"]:
            common.enable_op_determinism(tf, state.info)
        instrument(tf, state)
        if state.checkpoint is None:  # `e2k checkpoint` writes where it is told, and trains nothing
            patch_model_dirs(tf, out_dir, state.info["notes"], (request.get("resume") or {}).get("model_dir"))

        status, error = common.run_program(request["program"], request.get("args", ()))
        if state.checkpoint is not None and status == "captured":
            status, error = "ok", None
        if status == "ok" and state.fit_calls == 0:
            status, error = "no_training", {
                "type": "NoTraining", "message": "the program never called Model.fit"}
        result["status"] = status
        if error:
            result["error"] = error
        _save(state, result, out_dir)
        return 0 if status == "ok" else 2
    except BaseException as exc:  # noqa: BLE001 - a bug of ours: report it, never hang
        return common.harness_error(result, exc)
    finally:
        common.write_json(os.path.join(out_dir, "result.json"), result)


def _save(state: State, result: dict, out_dir: str) -> None:
    evaluations = list(state.evaluations)
    result.update(
        losses=state.losses,
        replicas=state.replicas,
        strategy=state.strategy,
        worker_devices=state.worker_devices,
        training_calls=state.fit_calls,
        skipped_training_calls=state.skipped_fit_calls,
        models_trained=len(state.trained),
        model_index=state.model_index,
        variables=state.variables,
        evaluations=evaluations,
        fit_validation=state.fit_validation,
        pairing_notes=state.pairing_notes,
        diverged_replica_copies=state.diverged,
        dropout=state.dropout,
        optimizers=state.optimizers,
        learning_rates=state.learning_rates,
        shuffles=state.shuffles,
        notes=state.info.get("notes", []),
        user_strategy_devices=state.info.get("user_strategy_devices", []),
    )
    common.save_weights(out_dir, result, state.initial, state.final)
    if state.checkpoint is not None:
        import numpy as np

        predictions = state.predictions or {"source": None, "arrays": {}}
        keys = sorted(predictions["arrays"])
        np.savez(os.path.join(out_dir, "predictions.npz"),
                 **{f"prediction_{j}": common.plain_array(predictions["arrays"][key]) for j, key in enumerate(keys)})
        result["checkpoint"] = {**(state.written or {}), "prediction_source": predictions["source"],
                                "prediction_keys": keys}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
