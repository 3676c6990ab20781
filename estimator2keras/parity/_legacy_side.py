"""Bootstrap that `e2k parity` runs, by path, in the legacy interpreter (TF 2.15 + Estimator).

    python _legacy_side.py REQUEST.json

It runs the user's Estimator program unchanged (runpy, as `__main__`) after patching
TensorFlow so that the run is comparable, and records what the Estimator did:

* the loss of every training step, as the Estimator reports it, and how the Estimator
  reduced it over replicas (SUM or MEAN: read from what TensorFlow did, see
  `_get_loss_reduce_op_for_reporting` in tensorflow_estimator's estimator.py);
* the model's variables (trainable, then non-trainable model state) at the start of
  training and at its end, in creation order, with names and shapes;
* the metrics of every `Estimator.evaluate` (train_and_evaluate calls it too).

Output (in the request's out_dir): result.json and weights.npz (initial_<i>, final_<i>).
Standalone on purpose: imports nothing from estimator2keras.
"""
from __future__ import annotations

import glob
import importlib.util
import inspect
import os
import sys
import tempfile
import threading


def _load_common():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_side_common.py")
    spec = importlib.util.spec_from_file_location("_e2k_parity_side_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


common = _load_common()


class Recorder:
    """What the instrumented Estimator did, filled in by the patches and the hook."""

    def __init__(self, request: dict):
        self.step_limit = request.get("steps")
        self.seed = request["seed"]
        self.losses: list[float] = []
        self.training_calls = 0
        self.skipped_training_calls = 0
        # The Estimator compared: the request's ``model`` (0-based) in the order the program's
        # Estimators first train (the first by default). Others (a dict of Estimators trained
        # in a loop) train as written, unrecorded; the host runs the program once per model.
        self.model_index = int(request.get("model") or 0)
        self.trained: list = []  # every Estimator that trained, in the order each first trained
        self.compared = None
        self.other_models: list = []
        #: The compared Estimator's warm start: where from, and which compared variables (their
        #: places in ``variables``) it set, read back from the checkpoint (``_warm_started``).
        self.warm_start: dict | None = None
        self.in_model_to_estimator = 0  # inside model_to_estimator (its Estimator's warm start is no warm start)
        self.variables: list[dict] | None = None  # trainable first, then model state
        self.initial = None
        self.final = None
        self.loss_reduction: str | None = None
        self.loss_divided_by_replicas = False
        self.replicas: int | None = None
        #: Replicas of the last evaluation: 1 when the RunConfig had no eval_distribute (the
        #: Estimator then evaluates on one device, with the input_fn's batch as it is).
        self.eval_replicas: int | None = None
        self.strategy: str | None = None
        self.worker_devices: list[str] | None = None
        self.evaluations: list[dict] = []
        # each evaluation's batches, {"losses": [...], "examples": [...]} (None when unread: an
        # evaluation with eval_distribute, a loss or batch size the harness cannot fetch)
        self.evaluation_batches: list[dict | None] = []
        self.info: dict = {"notes": []}
        self.model_dirs: dict = {}
        # The envelope run: the same program, its trainable values nudged by one ulp at every step.
        self.perturb: dict | None = request.get("perturb")
        self.nudge = None  # the last training graph's _Nudge
        # What parity mode neutralises or cannot see in the losses, for the host to compare:
        # the dropout and the optimizers of the first training model_fn call (the first
        # replica's), in order of first use.
        self.dropout: list[dict] = []
        self.recording_thread: int | None = None  # the thread recording it
        self.dropout_recorded = False
        self.optimizers: list[dict] = []
        self.optimizer_ids: set = set()
        # the learning rate of every step, when the optimizer holds a tensor (a decay of the
        # global step): fetched with the loss, the value the step's update used
        self.learning_rates: list[float] = []
        self.shuffles: list[dict] = []  # Dataset.shuffle calls, neutralised (see patch_shuffle)
        # `e2k checkpoint`: the Estimator restores a copy of the user's model_dir; its values
        # (model, optimizer slots, global step) are read when the session starts, no step runs.
        self.checkpoint: dict | None = request.get("checkpoint")
        self.resume_from: str | None = (request.get("resume") or {}).get("model_dir")
        self.captured = False
        self.capture: dict = {}
        self.predictions = None  # {"source", "arrays"}: the restored model's predictions

    @property
    def limit_reached(self) -> bool:
        return self.step_limit is not None and len(self.losses) >= self.step_limit


def _model_variables(tf, graph):
    """(trainable, state) variables of the model in the training graph, in creation order.

    State = non-trainable variables that existed when the optimizer was first applied
    (BatchNorm moving statistics and the like): optimizer slots, global_step and metric
    variables are created later or elsewhere and are never model state.
    """
    # Under MirroredStrategy a `tf.Variable` (not `get_variable`) leaves its per-replica
    # components in the trainable collection (`b`, `b/replica_1`) and the mirrored variable
    # among the global ones: each counts once, as the mirrored variable.
    mirrored = {}
    for v in tf.compat.v1.global_variables():
        for component in getattr(v, "values", None) or () if hasattr(v, "_values") else ():
            mirrored[id(component)] = v
    trainable = []
    for v in tf.compat.v1.trainable_variables():
        v = mirrored.get(id(v), v)
        if all(v is not seen for seen in trainable):
            trainable.append(v)
    global_step = tf.compat.v1.train.get_global_step(graph)
    snapshot = getattr(graph, "_e2k_variables_before_optimizer", None)
    if snapshot is None:
        return trainable, [], False
    trainable_ids = {id(v) for v in trainable}
    state = [
        v for v in snapshot
        if id(v) not in trainable_ids and id(mirrored.get(id(v), v)) not in trainable_ids and v is not global_step
        and "global_step" not in v.op.name
    ]
    return trainable, state, True


#: TF1 RNN cells whose variables are presented in Keras's layout: class name -> kind.
_RNN_CELLS = {"GRUCell": "GRU", "BasicLSTMCell": "LSTM", "LSTMCell": "LSTM"}
#: The cells built so far, by their variables' names (a cell builds inside dynamic_rnn's
#: while-loop graph, whose variables live in the training graph under the same names).
_RNN_CELL_RECORDS: list[dict] = []


def _patch_rnn_cells(tf) -> None:
    """Record the variables each TF1 GRU / LSTM cell builds (in the order it
    makes them) and its forget_bias, for ``_keras_layout``."""
    import importlib

    for module_name in ("keras.src.layers.rnn.legacy_cells", "tensorflow.python.keras.layers.legacy_rnn.rnn_cell_impl"):
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 - not in this TensorFlow
            continue
        for class_name, kind in _RNN_CELLS.items():
            cls = getattr(module, class_name, None)
            if cls is None or getattr(cls.build, "_e2k_patched", False):
                continue

            def build(self, inputs_shape, _original=cls.build, _kind=kind):
                _original(self, inputs_shape)
                if _kind == "GRU":
                    variables = [self._gate_kernel, self._gate_bias, self._candidate_kernel, self._candidate_bias]
                else:
                    variables = [self._kernel, self._bias]
                # A projection or peepholes have no Keras counterpart: left as TF1 made them.
                if getattr(self, "_num_proj", None) is None and not getattr(self, "_use_peepholes", False) \
                        and getattr(self, "_state_is_tuple", True):
                    names = [v.op.name for v in variables]
                    if all(names != cell["names"] for cell in _RNN_CELL_RECORDS):
                        _RNN_CELL_RECORDS.append({"kind": _kind, "names": names, "class": type(self).__name__,
                                      "forget_bias": float(getattr(self, "_forget_bias", 0.0))})

            build._e2k_patched = True
            cls.build = build


class _Layout:
    """The model's variables as the harness compares them (``_keras_layout``): ``table`` and
    ``reads`` (one per compared variable), ``trainable`` (how many of them), ``views`` (the
    place in the table of each variable read as it is) and ``groups`` ((cell record, the
    places of its variables, the place of its first view) for each RNN cell)."""

    def __init__(self):
        self.table: list[dict] = []
        self.reads: list = []
        self.trainable = 0
        self.views: dict[int, int] = {}
        self.groups: list[tuple[dict, list[int], int]] = []


def _keras_layout(tf, graph, variables, trainable_count) -> _Layout:
    """The model's variables as the harness compares them: each TF1 GRU / LSTM cell's variables
    presented as a Keras GRU (reset_after=False) / LSTM layer's kernel, recurrent_kernel and
    bias, in its place; every other variable as it is.

    GRUCell: ``gates/kernel`` [in+u, 2u] (r, u), ``gates/bias``, ``candidate/kernel`` [in+u, u],
    ``candidate/bias``; Keras's columns are (z, r, h) with z TF1's u, the input rows first.
    LSTM cells: ``kernel`` [in+u, 4u] (i, j, f, o), ``bias``, forget_bias added at run time;
    Keras's columns are (i, f, c=j, o) and its bias holds the forget bias."""
    index = {v.op.name: i for i, v in enumerate(variables)}
    groups = {}
    for cell in _RNN_CELL_RECORDS:
        places = [index.get(name) for name in cell["names"]]
        if None not in places and max(places) < trainable_count:
            groups[min(places)] = (cell, places)
    members = {i for _, places in groups.values() for i in places}
    layout = _Layout()
    for i, v in enumerate(variables):
        if i in groups:
            cell, places = groups[i]
            layout.groups.append((cell, places, len(layout.table)))
            values = [tf.identity(variables[p]) for p in places]
            for name, value in _cell_views(tf, cell, values):
                layout.table.append({"name": name, "shape": [int(d) for d in value.shape], "dtype": value.dtype.name,
                                     "trainable": True, "layout": cell["class"], "sources": cell["names"]})
                layout.reads.append(value)
                layout.trainable += 1
            continue
        if i in members:
            continue
        layout.views[i] = len(layout.table)
        layout.table.append({"name": v.op.name, "shape": [int(d) for d in v.shape], "dtype": v.dtype.base_dtype.name,
                             "trainable": i < trainable_count})
        layout.reads.append(tf.identity(v))
        layout.trainable += i < trainable_count
    return layout


def _cell_views(tf, cell, values, forget_bias: bool = True):
    """(name, tensor) of a cell's kernel, recurrent_kernel and bias in Keras's layout, from its
    TF1 variables' ``values`` (or from their optimizer slots, which take no forget bias)."""
    prefix = cell["names"][0].rsplit("/", 2 if cell["kind"] == "GRU" else 1)[0]
    if cell["kind"] == "GRU":
        gate_kernel, gate_bias, candidate_kernel, candidate_bias = values
        units = int(candidate_bias.shape[0])
        inputs = int(gate_kernel.shape[0]) - units

        def columns(rows):
            return tf.concat([gate_kernel[rows, units:], gate_kernel[rows, :units], candidate_kernel[rows]], 1)

        kernel, recurrent = columns(slice(None, inputs)), columns(slice(inputs, None))
        bias = tf.concat([gate_bias[units:], gate_bias[:units], candidate_bias], 0)
    else:
        matrix, vector = values
        units = int(vector.shape[0]) // 4
        inputs = int(matrix.shape[0]) - units
        i, j, f, o = tf.split(matrix, 4, axis=1)
        b_i, b_j, b_f, b_o = tf.split(vector, 4)
        ordered = tf.concat([i, f, j, o], 1)
        kernel, recurrent = ordered[:inputs], ordered[inputs:]
        if forget_bias:
            b_f = b_f + tf.constant(cell["forget_bias"], vector.dtype)
        bias = tf.concat([b_i, b_f, b_j, b_o], 0)
    return [(f"{prefix}/kernel", kernel), (f"{prefix}/recurrent_kernel", recurrent), (f"{prefix}/bias", bias)]


def _warm_started(tf, settings, table: list[dict], values: list) -> dict | None:
    """Which compared variables an Estimator's warm start set (``settings``: its
    WarmStartSettings): those whose value when the session starts is the checkpoint's. Read back
    rather than matched from ``vars_to_warm_start``, so a regex, a list, or a renaming
    (``var_name_to_prev_var_name``) all count as the Estimator applied them."""
    import numpy as np

    path = getattr(settings, "ckpt_to_initialize_from", None)
    if not path:
        return None
    try:
        reader = tf.train.load_checkpoint(os.fspath(path))
    except Exception:  # noqa: BLE001 - no checkpoint there: nothing warm-started
        return {"from": os.fspath(path), "variables": []}
    renamed = dict(getattr(settings, "var_name_to_prev_var_name", None) or {})
    places = []
    for i, (entry, value) in enumerate(zip(table, values)):
        if entry.get("sources"):  # an RNN cell read in Keras's layout: not a checkpoint tensor
            continue
        name = renamed.get(entry["name"], entry["name"])
        try:
            if not reader.has_tensor(name):
                continue
            saved = np.asarray(reader.get_tensor(name))
        except Exception:  # noqa: BLE001 - unreadable: not counted
            continue
        value = np.asarray(value)
        # the envelope run nudged its values by a few ulps after the warm start
        if saved.shape == value.shape and np.allclose(saved, value, rtol=1e-5, atol=0.0):
            places.append(i)
    return {"from": os.fspath(path), "variables": places}


def _make_hook(tf, rec: Recorder, loss_tensor, warm_start=None):
    class ParityHook(tf.compat.v1.train.SessionRunHook):
        """Per-step loss, initial and final variable values of one training call."""

        def begin(self):
            graph = tf.compat.v1.get_default_graph()
            trainable, state, have_state = _model_variables(tf, graph)
            self._variables = trainable + state
            # Read tensors are built now, before the graph is finalized: reading a distributed
            # variable (e.g. BatchNorm's sync-on-read moving mean) adds ops to the graph. RNN
            # cells' variables are read in Keras's layout (`_keras_layout`).
            layout = _keras_layout(tf, graph, self._variables, len(trainable))
            table, self._reads = layout.table, layout.reads
            self._nudge = None
            if rec.perturb is not None:  # each training call builds its graph: its own ops
                self._nudge = _Nudge(tf, trainable, int(rec.perturb.get("seed", 0)),
                                     int(rec.perturb.get("ulps", 1)))
                rec.nudge = self._nudge
            if rec.checkpoint is not None:
                self._capture = _CheckpointReads(tf, graph, trainable, layout)
            if rec.variables is None:
                rec.variables = table
                if not have_state:
                    rec.info["notes"].append(
                        "no optimizer was seen building the model, so non-trainable model state "
                        "is not compared")
            elif [(v["name"], v["shape"]) for v in table] != [(v["name"], v["shape"]) for v in rec.variables]:
                rec.info["notes"].append("a later training call built different variables; "
                                         "the first call's table is used")
                self._reads = None
            self._fetches = loss_tensor
            optimizers = getattr(graph, "_e2k_replica_optimizers", [])
            rate = common.tf1_learning_rate(optimizers[0]) if len(optimizers) == 1 else None
            # a tensor of this graph outside a cond or loop (fetchable at every step)
            if rate is not None and not isinstance(rate, (int, float)) and not callable(rate) \
                    and getattr(rate, "graph", None) is graph \
                    and getattr(getattr(rate, "op", None), "_control_flow_context", None) is None:
                self._fetches = [loss_tensor, rate]
            op = getattr(graph, "_e2k_reporting_reduce_op", None)
            if op is not None:
                rec.loss_reduction = op
            rec.loss_divided_by_replicas = bool(getattr(graph, "_e2k_loss_divided_by_replicas", False))

        def after_create_session(self, session, coord):
            if rec.checkpoint is not None and not rec.captured:
                # The session restored the model_dir's checkpoint: read it, and train no step.
                rec.initial = session.run(self._reads) if self._reads else []
                rec.capture = self._capture.read(session)
                rec.captured = True
                raise _Captured()
            if rec.initial is None and self._reads:
                if warm_start is not None:
                    rec.warm_start = _warm_started(tf, warm_start, rec.variables, session.run(self._reads))
                    if rec.warm_start is not None:  # named as the program names it
                        for user, fresh in rec.model_dirs.items():
                            if _inside(rec.warm_start["from"], fresh):
                                rec.warm_start["from"] = os.path.normpath(os.path.join(
                                    user, os.path.relpath(rec.warm_start["from"], fresh)))
                if self._nudge is not None:
                    self._nudge(session, 0)
                rec.initial = session.run(self._reads)

        def before_run(self, run_context):
            return tf.compat.v1.train.SessionRunArgs(self._fetches)

        def after_run(self, run_context, run_values):
            if isinstance(self._fetches, list):
                loss, rate = run_values.results
                rec.learning_rates.append(float(rate))
            else:
                loss = run_values.results
            rec.losses.append(float(loss))
            if self._nudge is not None:
                self._nudge(run_context.session, len(rec.losses))
            if rec.limit_reached:
                run_context.request_stop()

        def end(self, session):
            if self._reads:
                rec.final = session.run(self._reads)

    return ParityHook()


class _Captured(Exception):
    """Ends the checkpoint run's training call once the restored values are read."""


# Non-slot variables of TF1 optimizers: (attribute, what it is)
_BETA_POWERS = ("_beta1_power", "_beta2_power")


class _CheckpointReads:
    """Read tensors, built in the hook's begin(), for what `e2k checkpoint` carries over besides
    the model's variables: each optimizer slot of each trainable variable (TF1 and Keras legacy
    optimizers alike: ``get_slot_names``/``get_slot``), TF1 Adam's beta powers, the global step.
    Slots are numbered by the compared variables of ``layout``: an RNN cell's slots are read
    in Keras's layout, as its variables are."""

    def __init__(self, tf, graph, trainable, layout: _Layout):
        self.slots: list[dict] = []
        self.extra: list[dict] = []
        self._extra_reads: list = []  # one per entry of self.extra, in order
        reads = []
        seen: set = set()
        for number, optimizer in enumerate(getattr(graph, "_e2k_optimizer_objects", [])):
            kind = common.describe_optimizer(tf, optimizer)["kind"]
            try:
                names = list(optimizer.get_slot_names())
            except Exception:  # noqa: BLE001 - an optimizer without slots
                names = []
            scale = None
            if type(optimizer).__name__ == "MomentumOptimizer":
                # TF1 accumulates gradients (var -= lr * accum); Keras's SGD keeps the step itself
                # (m = momentum * m - lr * grad; var += m): its momentum is -lr * accum, with the
                # learning rate of the restored step.
                scale = len(self.extra)
                rate = optimizer._learning_rate
                rate = rate() if callable(rate) else rate
                self.extra.append({"role": "learning_rate", "name": f"{type(optimizer).__name__} learning rate",
                                   "kind": kind})
                reads_extra_rate = tf.identity(tf.cast(tf.convert_to_tensor(rate), tf.float64))
            def slot_of(variable, slot_name):
                try:
                    return optimizer.get_slot(variable, slot_name)
                except Exception:  # noqa: BLE001 - Keras legacy: KeyError before the slots exist
                    return None

            def entry(place, slot_name, name, shape, **more):
                return {"variable": place, "slot": slot_name, "name": name, "group": number, "shape": shape,
                        "kind": kind, "optimizer": type(optimizer).__name__, "scale_by": scale, **more}

            cells = {min(places): (cell, places, start) for cell, places, start in layout.groups}
            for i, variable in enumerate(trainable):
                if i in cells:  # an RNN cell's slots, one per Keras weight
                    cell, places, start = cells[i]
                    for slot_name in names:
                        slots = [slot_of(trainable[p], slot_name) for p in places]
                        if any(slot is None or slot.op.name in seen for slot in slots):
                            continue
                        seen.update(slot.op.name for slot in slots)
                        views = _cell_views(tf, cell, [tf.identity(slot) for slot in slots], forget_bias=False)
                        for k, (name, value) in enumerate(views):
                            self.slots.append(entry(start + k, slot_name, f"{name}/{slot_name}",
                                                    [int(d) for d in value.shape],
                                                    sources=[slot.op.name for slot in slots]))
                            reads.append(value)
                    continue
                if i not in layout.views:
                    continue  # a cell's other variables: read with its first
                for slot_name in names:
                    slot = slot_of(variable, slot_name)
                    if slot is None or slot.op.name in seen:
                        continue
                    seen.add(slot.op.name)
                    self.slots.append(entry(layout.views[i], slot_name, slot.op.name, [int(d) for d in slot.shape]))
                    reads.append(tf.identity(slot))
            if scale is not None:
                self._extra_reads.append(reads_extra_rate)
            for attribute in _BETA_POWERS:
                power = getattr(optimizer, attribute, None)
                if power is None:
                    get = getattr(optimizer, "_get_beta_accumulators", None)
                    try:
                        power = dict(zip(_BETA_POWERS, get()))[attribute] if get else None
                    except Exception:  # noqa: BLE001 - not built in this graph
                        power = None
                if power is not None and power.op.name not in seen:
                    seen.add(power.op.name)
                    self.extra.append({"role": attribute.strip("_"), "name": power.op.name, "kind": kind,
                                       "beta": float(getattr(optimizer, "_beta1" if "1" in attribute else "_beta2"))})
                    self._extra_reads.append(tf.identity(power))
        step = tf.compat.v1.train.get_global_step(graph)
        if step is not None:
            self.extra.append({"role": "global_step", "name": step.op.name})
            self._extra_reads.append(tf.identity(step))
        self._reads = reads + self._extra_reads

    def read(self, session) -> dict:
        values = session.run(self._reads) if self._reads else []
        slot_values = values[:len(self.slots)]
        extra = values[len(self.slots):]
        for entry, value in zip(self.extra, extra):
            entry["value"] = float(value)
        for entry in self.slots:
            if entry.get("scale_by") is not None:
                entry["scale"] = -self.extra[entry["scale_by"]]["value"]
        return {"slots": self.slots, "slot_values": slot_values, "extra": self.extra}


class _Nudge:
    """The envelope run's perturbation: every non-zero element of every float32/float64
    trainable variable moved by one ulp, up or down at random, when the training session
    starts and again after every step.

    At every step, not once: a one-time nudge of the initial values heals (the next updates
    round it away), while a migration differs from the Estimator at every step (another
    order of reduction, another kernel); the nudged weights make every sum of the forward
    and backward pass differ at its own rounding level, as those do. Directions come from
    stateless random ops seeded with (seed, step): the program's random streams are left
    alone. Zeros stay zeros (one ulp of 0 is a denormal, which CPUs flush to zero). The ops
    are built in the hook's begin(), before the graph is finalized; a MirroredVariable's
    copies all get the same value.
    """

    def __init__(self, tf, variables, seed: int, ulps: int = 1):
        from tensorflow.python.ops import resource_variable_ops

        self.seed = seed
        self.ulps = ulps
        self.counter = tf.compat.v1.placeholder(tf.int64, shape=[], name="e2k_nudge_counter")
        assigns = []
        self.elements = self.nudged_variables = 0
        for i, variable in enumerate(variables):
            dtype = variable.dtype.base_dtype
            self.elements += int(variable.shape.num_elements() or 0)
            if dtype not in (tf.float32, tf.float64):
                continue
            self.nudged_variables += 1
            value = tf.identity(variable)
            draw = tf.random.stateless_uniform(
                tf.shape(value), seed=tf.stack([tf.constant(seed * 100003 + i, tf.int64), self.counter]))
            size = tf.abs(value)
            ulp = tf.math.nextafter(size, tf.constant(float("inf"), dtype)) - size
            step = tf.where(draw < 0.5, -ulp, ulp) * tf.constant(float(ulps), dtype)
            moved = tf.where(tf.equal(value, 0), value, value + step)
            for copy in list(getattr(variable, "values", None) or [variable]):
                with tf.device(copy.device):
                    if resource_variable_ops.is_resource_variable(copy):
                        assigns.append(resource_variable_ops.assign_variable_op(copy.handle, moved))
                    else:
                        assigns.append(tf.compat.v1.assign(copy, moved).op)
        self.op = tf.group(*assigns) if assigns else None

    def __call__(self, session, step: int) -> None:
        """Nudge now: ``step`` 0 when the session starts, k after the k-th step (the seed of
        the directions)."""
        if self.op is not None:
            session.run(self.op, {self.counter: step})

    def describe(self) -> dict:
        return {"seed": self.seed, "ulps": self.ulps, "every_step": True, "elements": self.elements,
                "variables": self.nudged_variables}


def _fresh_model_dir(rec: Recorder, out_dir: str, user_dir) -> str:
    """A fresh model_dir per user model_dir: a checkpoint left by an earlier run must not
    be restored, nor anything written into the user's directory, yet two Estimators sharing a
    model_dir keep sharing it. A directory the harness made (model_to_estimator's, passed on to
    the Estimator it builds) is kept. ``rec.model_dirs`` maps each user's directory to where
    it ran, for a warm start from it (``_warm_start_from``)."""
    key = os.fspath(user_dir) if user_dir else None
    if rec.checkpoint is not None:  # every Estimator of the program restores the copy of OLD_DIR
        if key is not None and not _inside(key, out_dir):  # a warm start from it reads the copy too
            rec.model_dirs.setdefault(key, rec.checkpoint["model_dir"])
        return rec.checkpoint["model_dir"]
    if key is not None and _inside(key, out_dir):
        return key
    if key is None or key not in rec.model_dirs:
        path = tempfile.mkdtemp(prefix="model_dir_", dir=out_dir)
        if rec.resume_from:  # `e2k parity --from-checkpoint`: every model_dir starts from it
            import shutil

            for name in os.listdir(rec.resume_from):
                shutil.copy2(os.path.join(rec.resume_from, name), os.path.join(path, name))
        if key is None:
            return path
        rec.model_dirs[key] = path
        rec.info["notes"].append(
            f"model_dir {key} ran in a fresh temporary directory{' (a copy of the checkpoint resumed from)' if rec.resume_from else ''}: "
            "nothing was read from it or written to it")
    return rec.model_dirs[key]


def _warm_start_from(rec: Recorder, out_dir: str, warm):
    """``warm_start_from`` (a path, or ``WarmStartSettings(ckpt_to_initialize_from=...)``) read
    where its model_dir ran: a path that names a model_dir of the program (the directory, or a
    checkpoint in it) names its fresh directory, where that Estimator wrote its checkpoints
    (``_fresh_model_dir``); the user's directory holds none of this run's. Any other path (a
    checkpoint the program did not train) is read as it is."""
    settings = None
    path = warm
    if hasattr(warm, "ckpt_to_initialize_from") and hasattr(warm, "_replace"):
        settings, path = warm, warm.ckpt_to_initialize_from
    if not isinstance(path, (str, os.PathLike)) or not rec.model_dirs:
        return warm
    text = os.fspath(path)
    if "://" in text or _inside(text, out_dir):
        return warm
    target = os.path.abspath(text)
    # The innermost model_dir holding it first (`/runs` and `/runs/first` may both be model_dirs).
    for user, fresh in sorted(rec.model_dirs.items(), key=lambda item: -len(os.path.abspath(item[0]))):
        base = os.path.abspath(user)
        if target == base:
            moved = fresh
        elif _inside(target, base):
            moved = os.path.join(fresh, os.path.relpath(target, base))
        else:
            continue
        if not (os.path.exists(moved) or glob.glob(glob.escape(moved) + "*")):
            # Written where the program named it, not where its model_dir ran (model_to_estimator
            # saves the Keras model's weights into the model_dir it was given): read it there.
            return warm
        note = f"warm_start_from {text} read the temporary directory that model_dir ran in: nothing was read from yours"
        if note not in rec.info["notes"]:
            rec.info["notes"].append(note)
        return moved if settings is None else settings._replace(ckpt_to_initialize_from=moved)
    return warm


def _model_dir_hint(rec: Recorder, kind: str | None, message: str) -> str:
    """A program that writes its own files into its model_dir (`eval_results.json` beside the
    checkpoints) finds no directory there under e2k parity, which ran the Estimator's
    model_dir in a temporary directory: the crash says so."""
    if kind not in ("FileNotFoundError", "NotADirectoryError") or not rec.model_dirs:
        return message
    for user in rec.model_dirs:
        if isinstance(user, (str, os.PathLike)) and os.path.abspath(os.fspath(user)) in message:
            return (f"{message} (e2k parity ran the Estimator's model_dir {os.fspath(user)} in a temporary "
                    "directory, so the program's own files there find no directory: make it in the program "
                    "(os.makedirs(model_dir, exist_ok=True)) before writing into it)")
    return message


def _inside(path: str, directory: str) -> bool:
    path, directory = os.path.abspath(path), os.path.abspath(directory)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _patch_model_to_estimator(rec: Recorder, out_dir: str) -> None:
    """model_to_estimator writes the Keras model's first checkpoint into model_dir/keras, or
    warm-starts from one already there, before it builds the Estimator: its model_dir is
    redirected like an Estimator's."""
    try:
        from tensorflow_estimator.python.estimator import keras_lib
    except ImportError:  # pragma: no cover - every tensorflow-estimator 2.x has it
        return
    original = keras_lib.model_to_estimator
    signature = inspect.signature(original)

    def model_to_estimator(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)
        config = bound.arguments.get("config")
        user_dir = bound.arguments.get("model_dir") or getattr(config, "model_dir", None)
        if user_dir:
            model_dir = _fresh_model_dir(rec, out_dir, user_dir)
            if bound.arguments.get("model_dir"):
                bound.arguments["model_dir"] = model_dir
            if getattr(config, "model_dir", None):
                bound.arguments["config"] = config.replace(model_dir=model_dir)
        # Its Estimator warm-starts from the Keras model's own first checkpoint: the model's
        # initialisation, copied into the migrated model as any Estimator's (not a warm start
        # the migration must keep; see Recorder.warm_start).
        rec.in_model_to_estimator += 1
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            rec.in_model_to_estimator -= 1

    keras_lib.model_to_estimator = model_to_estimator


def instrument(tf, request: dict, rec: Recorder, devices: list[str], device_kind: str) -> None:
    """Patch TensorFlow and the Estimator for a comparable, recorded run."""
    from tensorflow_estimator.python.estimator import estimator as estimator_lib

    Estimator = estimator_lib.Estimator
    replicas = len(devices)
    out_dir = request["out_dir"]

    original_init = Estimator.__init__
    init_signature = inspect.signature(original_init)

    def __init__(self, *args, **kwargs):
        bound = init_signature.bind(self, *args, **kwargs)
        config = bound.arguments.get("config")
        user_dir = bound.arguments.get("model_dir") or getattr(config, "model_dir", None)
        model_dir = _fresh_model_dir(rec, out_dir, user_dir)
        bound.arguments["model_dir"] = model_dir
        if bound.arguments.get("warm_start_from") is not None:
            bound.arguments["warm_start_from"] = _warm_start_from(rec, out_dir, bound.arguments["warm_start_from"])
        if config is not None:
            if config.model_dir is not None:
                config = config.replace(model_dir=model_dir)
            if config.tf_random_seed is None:
                config = config.replace(tf_random_seed=rec.seed)
            bound.arguments["config"] = config
        original_init(*bound.args, **bound.kwargs)
        self._e2k_keras_first_checkpoint = bool(rec.in_model_to_estimator)
        if config is None and self._config.tf_random_seed is None:
            self._config = self._config.replace(tf_random_seed=rec.seed)
        if device_kind == "CPU":
            # MirroredStrategy on N CPUs needs N CPU devices in the session (DESIGN.md §5).
            session_config = tf.compat.v1.ConfigProto()
            if self._session_config is not None:
                session_config.CopyFrom(self._session_config)
            session_config.device_count["CPU"] = max(session_config.device_count.get("CPU", 0), replicas)
            self._session_config = session_config
            self._config = self._config.replace(session_config=session_config)

    Estimator.__init__ = __init__
    _patch_model_to_estimator(rec, out_dir)

    original_train = Estimator.train
    train_signature = inspect.signature(original_train)

    def train(self, *args, **kwargs):
        if rec.checkpoint is not None:
            return _checkpoint_train(self, *args, **kwargs)
        if all(other is not self for other in rec.trained):
            rec.trained.append(self)
            if len(rec.trained) - 1 == rec.model_index:
                rec.compared = self
            else:
                rec.other_models.append(self)
        if self is not rec.compared:
            return original_train(self, *args, **kwargs)
        if rec.limit_reached:
            rec.skipped_training_calls += 1
            return self
        rec.training_calls += 1
        return original_train(self, *args, **kwargs)

    def _checkpoint_train(self, *args, **kwargs):
        """One training call builds the graph and restores the checkpoint; the hook reads the
        values and stops it before its first step. Later calls train nothing."""
        if rec.captured:
            rec.skipped_training_calls += 1
            return self
        bound = train_signature.bind(self, *args, **kwargs)
        bound.arguments["steps"], bound.arguments["max_steps"] = 1, None
        bound.arguments["saving_listeners"] = None  # train_and_evaluate's: no evaluation from a save
        rec.training_calls += 1
        try:
            original_train(*bound.args, **bound.kwargs)
        except _Captured:
            pass
        except Exception as exc:  # noqa: BLE001 - the checkpoint does not fit this program's graph
            if not rec.captured and type(exc).__name__ in ("NotFoundError", "InvalidArgumentError",
                                                           "FailedPreconditionError"):
                raise common.HarnessStop("restore_failed", _restore_error(exc)) from None
            raise
        if not rec.captured:
            raise common.HarnessStop("unsupported", "the Estimator trained without restoring a checkpoint")
        rec.predictions = _predictions(self, bound.arguments["input_fn"], "train", train_batches, rec)
        return self

    eval_batches = int((rec.checkpoint or {}).get("eval_batches", 32)) * replicas
    train_batches = int((rec.checkpoint or {}).get("train_batches", 8)) * replicas

    Estimator.train = train

    original_with_spec = Estimator._train_with_estimator_spec

    def _train_with_estimator_spec(self, estimator_spec, worker_hooks, *args, **kwargs):
        if rec.checkpoint is None and self is not rec.compared:  # another Estimator: not recorded
            return original_with_spec(self, estimator_spec, worker_hooks, *args, **kwargs)
        strategy = self._train_distribution
        if strategy is not None:
            rec.replicas = int(strategy.num_replicas_in_sync)
            rec.strategy = type(strategy).__name__
            rec.worker_devices = list(strategy.extended.worker_devices)
        else:
            rec.replicas = 1
            rec.strategy = None
            rec.loss_reduction = "none"
        warm = None if getattr(self, "_e2k_keras_first_checkpoint", False) else getattr(self, "_warm_start_settings", None)
        worker_hooks.append(_make_hook(tf, rec, estimator_spec.loss, warm))
        return original_with_spec(self, estimator_spec, worker_hooks, *args, **kwargs)

    Estimator._train_with_estimator_spec = _train_with_estimator_spec

    original_call_model_fn = Estimator._call_model_fn

    def _call_model_fn(self, features, labels, mode, config):
        if mode == "eval":
            spec = original_call_model_fn(self, features, labels, mode, config)
            if self._eval_distribution is None:
                _note_eval_batch(tf, spec, features, labels)
            return spec
        # under MirroredStrategy the model_fn runs once per replica, each in its own thread
        # and at the same time: record the first replica's call only, in its thread
        if mode != "train" or rec.dropout_recorded or rec.recording_thread is not None \
                or (rec.checkpoint is None and self is not rec.compared):
            return original_call_model_fn(self, features, labels, mode, config)
        rec.recording_thread = threading.get_ident()
        try:
            return original_call_model_fn(self, features, labels, mode, config)
        finally:
            rec.recording_thread = None
            rec.dropout_recorded = True

    Estimator._call_model_fn = _call_model_fn

    original_reduce_op = estimator_lib._get_loss_reduce_op_for_reporting

    def _get_loss_reduce_op_for_reporting():
        op = original_reduce_op()
        graph = tf.compat.v1.get_default_graph()
        graph._e2k_reporting_reduce_op = "mean" if op == tf.distribute.ReduceOp.MEAN else "sum"
        return op

    estimator_lib._get_loss_reduce_op_for_reporting = _get_loss_reduce_op_for_reporting

    original_evaluate = Estimator.evaluate

    evaluate_signature = inspect.signature(original_evaluate)

    def evaluate(self, *args, **kwargs):
        if rec.checkpoint is not None:
            if not rec.captured:
                raise common.HarnessStop(
                    "unsupported", "the program evaluates before it trains: e2k checkpoint reads the "
                                   "checkpoint through the Estimator's training graph")
            bound = evaluate_signature.bind(self, *args, **kwargs)
            metrics = original_evaluate(self, *args, **kwargs)
            rec.evaluations.append({str(k): common.to_float(v) for k, v in (metrics or {}).items()})
            rec.predictions = _predictions(self, bound.arguments["input_fn"], "eval", eval_batches, rec)
            raise common.HarnessStop("captured", "the restored model's evaluation and predictions were read")
        if self is not rec.compared and (rec.compared is not None or any(o is self for o in rec.other_models)) \
                and not _reads_compared(self):
            return original_evaluate(self, *args, **kwargs)  # another Estimator than the one compared
        eval_strategy = getattr(self, "_eval_distribution", None)
        rec.eval_replicas = int(eval_strategy.num_replicas_in_sync) if eval_strategy is not None else 1
        bound = evaluate_signature.bind(self, *args, **kwargs)
        batches = _EvalBatches(tf)
        bound.arguments["hooks"] = list(bound.arguments.get("hooks") or []) + [batches.hook]
        metrics = original_evaluate(*bound.args, **bound.kwargs)
        rec.evaluations.append({str(k): common.to_float(v) for k, v in (metrics or {}).items()})
        rec.evaluation_batches.append(batches.result())
        return metrics

    def _reads_compared(estimator) -> bool:
        """An Estimator that has not trained and evaluates the compared one's model_dir (a notebook
        cell building a second Estimator from the same model_fn and RunConfig): its evaluation is
        the compared model's, and a migration that evaluates anything else must show."""
        if any(other is estimator for other in rec.other_models):
            return False
        if rec.compared is None:
            return False
        try:
            return os.path.realpath(estimator.model_dir) == os.path.realpath(rec.compared.model_dir)
        except (AttributeError, TypeError):
            return False

    Estimator.evaluate = evaluate

    _patch_optimizers(tf, rec)


def _note_eval_batch(tf, spec, features, labels) -> None:
    """Keep, on the evaluation graph, the model_fn's loss and the number of examples in its batch
    (the first dimension of the labels, else of the features), for _EvalBatches to fetch."""
    loss = getattr(spec, "loss", None)
    if loss is None or getattr(loss, "shape", None) is None or loss.shape.rank != 0:
        return
    examples = None
    for tensor in tf.nest.flatten(labels) + tf.nest.flatten(features):
        if isinstance(tensor, tf.SparseTensor):
            examples = tensor.dense_shape[0]
        elif isinstance(tensor, tf.Tensor) and tensor.shape.rank:
            examples = tf.shape(tensor, out_type=tf.int64)[0]
        else:
            continue
        break
    if examples is not None:
        loss.graph._e2k_eval_batch = (loss, examples)


class _EvalBatches:
    """Each evaluation batch's loss and number of examples, fetched by a hook with the batch's
    metric updates: the Estimator's eval loss is their plain mean, Keras's the mean weighed by
    the examples (see example_weighted_eval_loss in _compare.py)."""

    def __init__(self, tf):
        self.losses: list[float] = []
        self.examples: list[int] = []
        self.fetch = None
        batches = self

        class Hook(tf.compat.v1.train.SessionRunHook):
            def begin(self):
                batches.fetch = getattr(tf.compat.v1.get_default_graph(), "_e2k_eval_batch", None)

            def before_run(self, run_context):
                return tf.compat.v1.train.SessionRunArgs(batches.fetch) if batches.fetch is not None else None

            def after_run(self, run_context, run_values):
                if batches.fetch is not None and run_values.results is not None:
                    loss, examples = run_values.results
                    batches.losses.append(float(loss))
                    batches.examples.append(int(examples))

        self.hook = Hook()

    def result(self) -> dict | None:
        if self.fetch is None or not self.losses:
            return None
        return {"losses": self.losses, "examples": self.examples}


def _restore_error(exc: BaseException) -> str:
    """The line of a failed restore that names the variable (TF's messages run to pages)."""
    import re

    text = str(exc)
    for pattern in (r"Key \S+ not found in checkpoint", r"[^\n]*shapes? [^\n]*(match|differ)[^\n]*",
                    r"[^\n]*tensor_name = \S+[^\n]*"):
        found = re.search(pattern, text)
        if found:
            return found.group(0).strip()[:300]
    return common.exception_summary(exc)


def _predictions(estimator, input_fn, source: str, max_batches: int, rec: Recorder) -> dict:
    """The restored model's predictions on ``input_fn`` (its first ``max_batches`` per-replica
    batches: an input may repeat forever), concatenated: {key: array} or {"": array}. Empty,
    with a note, when the model_fn makes no predictions (many handle TRAIN and EVAL only)."""
    import numpy as np

    batches = []
    try:
        for i, batch in enumerate(estimator.predict(input_fn, yield_single_examples=False)):
            if i >= max_batches:
                break
            batches.append(batch if isinstance(batch, dict) else {"": batch})
    except Exception as exc:  # noqa: BLE001 - a model_fn without PREDICT mode
        note = f"the Estimator made no predictions on the {source} input ({common.exception_summary(exc)})"
        if note not in rec.info["notes"]:
            rec.info["notes"].append(note)
        return {"source": source, "arrays": {}}
    arrays = {}
    for key in (batches[0] if batches else {}):
        arrays[key] = np.concatenate([np.asarray(b[key]) for b in batches])
    return {"source": source, "arrays": arrays}


def _patch_optimizers(tf, rec: Recorder) -> None:
    """Remember the graph's variables when an optimizer is first applied (see _model_variables),
    and whether the loss a Keras optimizer differentiates was already divided by the replicas."""
    classes = []
    from tensorflow.python.training import optimizer as tf1_optimizer
    classes.append(tf1_optimizer.Optimizer)
    keras_optimizer = getattr(getattr(tf.keras.optimizers, "legacy", None), "Optimizer", None)
    if keras_optimizer is not None:
        classes.append(keras_optimizer)
    for cls in classes:
        original = cls.apply_gradients

        def apply_gradients(self, *args, _original=original, **kwargs):
            graph = tf.compat.v1.get_default_graph()
            if not hasattr(graph, "_e2k_variables_before_optimizer"):
                graph._e2k_variables_before_optimizer = list(tf.compat.v1.global_variables())
            if not hasattr(graph, "_e2k_optimizer_objects"):
                graph._e2k_optimizer_objects = []
            known = graph._e2k_optimizer_objects
            if all(o is not self for o in known):
                known.append(self)
            # the optimizers of one replica (the first to apply one): each replica's model_fn
            # makes its own, with the same learning rate
            thread = getattr(graph, "_e2k_replica_thread", None)
            if thread is None:
                graph._e2k_replica_thread = thread = threading.get_ident()
                graph._e2k_replica_optimizers = []
            if thread == threading.get_ident() and all(o is not self for o in graph._e2k_replica_optimizers):
                graph._e2k_replica_optimizers.append(self)
            if rec.recording_thread == threading.get_ident() and id(self) not in rec.optimizer_ids:
                rec.optimizer_ids.add(id(self))
                rec.optimizers.append(common.describe_optimizer(tf, self))
            return _original(self, *args, **kwargs)

        cls.apply_gradients = apply_gradients

    if keras_optimizer is None:
        return
    # TF1 optimizers divide by the replicas themselves and flag it (the Estimator then reports
    # the MEAN). Keras optimizers do not: TF2 canned heads (base_head, baseline,
    # dnn_linear_combined) write `loss *= 1. / num_replicas` before `get_updates`, and the
    # Estimator still reports the SUM of the undivided losses. Seen here, from the graph.
    for name in ("get_updates", "minimize"):
        original = getattr(keras_optimizer, name)

        def method(self, loss, *args, _original=original, **kwargs):
            if _divided_by_replicas(tf, loss):
                tf.compat.v1.get_default_graph()._e2k_loss_divided_by_replicas = True
            return _original(self, loss, *args, **kwargs)

        setattr(keras_optimizer, name, method)


def _divided_by_replicas(tf, loss) -> bool:
    """Whether ``loss`` is `x * (1/N)` or `x / N`, N the replicas in sync."""
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    op = getattr(loss, "op", None)
    if replicas <= 1 or op is None or op.type not in ("Mul", "RealDiv", "Div"):
        return False
    inputs = list(op.inputs)
    for i, tensor in enumerate(inputs):
        value = tf.get_static_value(tensor)
        if value is None or getattr(value, "size", 1) != 1:
            continue
        value = float(value)
        if op.type == "Mul" and abs(value * replicas - 1.0) < 1e-6:
            return True
        if op.type != "Mul" and i == 1 and abs(value - replicas) < 1e-6:
            return True
    return False


def _redirect_exports(tf, out_dir: str) -> None:
    """The envelope run's exports go to its own directory: it runs the program a second time,
    at the same time as the legacy run, and must neither add a second export where the program
    exports nor collide with the legacy run's (export directories are named by the second).
    The program still gets a path it can load back."""
    import itertools

    from tensorflow_estimator.python.estimator import estimator as estimator_lib

    base = os.path.join(out_dir, "exports")
    for name in ("export_saved_model", "export_savedmodel", "experimental_export_all_saved_models"):
        original = getattr(estimator_lib.Estimator, name, None)
        if original is None:
            continue

        def method(self, export_dir_base, *args, _original=original, **kwargs):
            # An exporter (LatestExporter) lists its own export directory after exporting.
            tf.io.gfile.makedirs(export_dir_base)
            return _original(self, base, *args, **kwargs)

        setattr(estimator_lib.Estimator, name, method)
    original_save = tf.saved_model.save
    counter = itertools.count()

    def save(obj, export_dir, *args, **kwargs):
        return original_save(obj, os.path.join(out_dir, "saved_models", str(next(counter))), *args, **kwargs)

    tf.saved_model.save = save


def main(request_path: str) -> int:
    request = common.load_request(request_path)
    out_dir = request["out_dir"]
    common.set_program_path(request["program"])
    rec = Recorder(request)
    result: dict = {"side": "legacy", "status": "harness_error", "program": request["program"]}
    try:
        common.seed_python_and_numpy(request["seed"])
        try:
            import tensorflow as tf
        except ImportError as exc:
            result.update(status="environment", error={
                "type": "ImportError", "message": f"cannot import tensorflow in {sys.executable}: {exc}"})
            return 2
        try:
            import tensorflow_estimator  # noqa: F401
        except ImportError:
            result.update(status="environment", error={
                "type": "ImportError",
                "message": f"{sys.executable} has TensorFlow {tf.__version__} but no tensorflow_estimator; "
                           "pass --legacy-python with TF 2.15 + tensorflow-estimator 2.15"})
            return 2
        result["versions"] = common.versions(tf)
        devices, kind = common.harness_devices(tf, request["replicas"])
        result["harness_devices"] = devices
        tf.random.set_seed(request["seed"])
        tf.compat.v1.set_random_seed(request["seed"])
        common.patch_mirrored_strategy(
            tf, devices, rec.info, tf.distribute.ReductionToOneDevice if kind == "CPU" else None)
        common.patch_logical_device_configuration(tf, rec.info)
        if request["neutralize_shuffle"]:
            common.patch_shuffle(tf, rec.shuffles)
            common.patch_numpy_input_fn(tf, rec.shuffles)
        if request["neutralize_dropout"]:
            common.patch_dropout(tf, rec.dropout, lambda: rec.recording_thread == threading.get_ident())
        if request["op_determinism"]:
            common.enable_op_determinism(tf, rec.info)
        loop = None
        if request.get("custom_loop"):
            loop = _custom_loop(tf, request, rec, devices, kind)
        else:
            instrument(tf, request, rec, devices, kind)
        _patch_rnn_cells(tf)
        if rec.perturb is not None:
            _redirect_exports(tf, out_dir)

        status, error = common.run_program(request["program"], request.get("args", ()))
        if status == "crashed" and error:
            error["message"] = _model_dir_hint(rec, error.get("type"), error.get("message") or "")
        if loop is not None:
            if status == "ok" and error is not None and error.get("type") == "HarnessStop":
                error = None  # the steps asked for are recorded
            loop.finish()
        if rec.checkpoint is not None and status in ("ok", "captured"):
            status, error = ("ok", None) if rec.captured else ("no_training", {
                "type": "NoTraining",
                "message": "the program never trained an Estimator, so its checkpoint was never restored"})
        if status == "ok" and rec.training_calls == 0:
            status, error = "no_training", {
                "type": "NoTraining",
                "message": "the program never trained an Estimator (no Estimator.train or "
                           "train_and_evaluate call ran)"}
        elif status == "ok" and not rec.losses and rec.checkpoint is None:
            status, error = "no_training", {
                "type": "NoTraining", "message": "Estimator training ran 0 steps (empty input?)"}
        result["status"] = status
        if error:
            result["error"] = error
        _save(rec, result, out_dir)
        return 0 if status == "ok" else 2
    except BaseException as exc:  # noqa: BLE001 - a bug of ours: report it, never hang
        return common.harness_error(result, exc)
    finally:
        common.write_json(os.path.join(out_dir, "result.json"), result)


def _custom_loop(tf, request: dict, rec: Recorder, devices: list[str], kind: str):
    """A Keras program that trains in its own loop: its steps recorded (_custom_loop.py), on
    the harness's N devices (logical CPUs set up before TensorFlow starts)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_custom_loop.py")
    spec = importlib.util.spec_from_file_location("_e2k_parity_custom_loop", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if kind == "CPU" and len(devices) > 1:
        from tensorflow.python.framework import config as tf_config

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf_config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in devices])
    program_dir = os.path.dirname(os.path.abspath(request["program"]))
    loop = module.CustomLoop(tf, rec, program_dir, devices, common)
    loop.install()
    return loop


def _save(rec: Recorder, result: dict, out_dir: str) -> None:
    result.update(
        losses=rec.losses,
        loss_reduction=rec.loss_reduction,
        loss_divided_by_replicas=rec.loss_divided_by_replicas,
        replicas=rec.replicas,
        eval_replicas=rec.eval_replicas,
        strategy=rec.strategy,
        worker_devices=rec.worker_devices,
        training_calls=rec.training_calls,
        skipped_training_calls=rec.skipped_training_calls,
        models_trained=len(rec.trained),
        model_index=rec.model_index,
        warm_start=rec.warm_start,
        variables=rec.variables or [],
        evaluations=rec.evaluations,
        evaluation_batches=rec.evaluation_batches,
        notes=rec.info.get("notes", []),
        user_strategy_devices=rec.info.get("user_strategy_devices", []),
        perturbation=rec.nudge.describe() if rec.nudge is not None else None,
        dropout=rec.dropout,
        optimizers=rec.optimizers,
        learning_rates=rec.learning_rates,
        shuffles=rec.shuffles,
    )
    common.save_weights(out_dir, result, rec.initial, rec.final)
    if rec.checkpoint is not None:
        _save_checkpoint_capture(rec, result, out_dir)


def _save_checkpoint_capture(rec: Recorder, result: dict, out_dir: str) -> None:
    """The restored checkpoint's slots and other values, its keys, and the predictions."""
    import numpy as np
    import tensorflow as tf

    capture = rec.capture or {}
    arrays = {f"slot_{i}": np.asarray(v) for i, v in enumerate(capture.get("slot_values") or [])}
    predictions = rec.predictions or {"source": None, "arrays": {}}
    keys = sorted(predictions["arrays"])
    for j, key in enumerate(keys):
        arrays[f"prediction_{j}"] = common.plain_array(predictions["arrays"][key])
    np.savez(os.path.join(out_dir, "checkpoint_values.npz"), **arrays)
    latest = tf.train.latest_checkpoint(rec.checkpoint["model_dir"])
    result["checkpoint"] = {
        "slots": capture.get("slots") or [],
        "extra": capture.get("extra") or [],
        "keys": [[name, list(shape)] for name, shape in tf.train.list_variables(latest)] if latest else [],
        "prediction_source": predictions["source"],
        "prediction_keys": keys,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
