"""The legacy side's recording of a Keras 2 program that trains in its own loop (TensorFlow's
"DTensor with Keras" tutorial: a GradientTape step, ``optimizer.apply_gradients``).

Loaded by path by ``_legacy_side.py`` (it imports nothing from estimator2keras). It records
what the Estimator side records, read where a custom loop has it:

* each training step's loss: the tensor the step differentiated (``GradientTape.gradient``'s
  target), fetched from the step's ``tf.function`` as an extra output (its trace is wrapped:
  the program's functions return what they returned);
* the model's weights (trainable, then non-trainable) before the first training step and at
  the end, the model being the ``tf.keras.Model`` given to the step;
* for the envelope run, every trainable weight nudged by ulps after each step.

A DTensor mesh of one dimension is made on the harness's devices, whatever the program's
size: both sides run the same replicas.
"""
from __future__ import annotations

import functools
import os
import threading


class CustomLoop:
    def __init__(self, tf, rec, program_dir: str, devices: list[str], common):
        self.tf, self.rec, self.program_dir, self.devices, self.common = tf, rec, program_dir, devices, common
        self.state = threading.local()
        self.model = None
        self.snapshot = None
        self.pending = None  # (the loss of the gradients last taken, the model), until applied
        self.steps = 0

    # -- patches -------------------------------------------------------------------------------
    def install(self) -> None:
        tf = self.tf
        loop = self
        state = self.state
        original_gradient = tf.GradientTape.gradient

        def gradient(tape, target, sources, *args, **kwargs):
            result = original_gradient(tape, target, sources, *args, **kwargs)
            if tf.executing_eagerly():
                loop.pending = (target, None)  # a step not compiled: its loss is at hand
            else:
                state.target = target
            return result

        tf.GradientTape.gradient = gradient
        optimizers = [tf.keras.optimizers.Optimizer]
        legacy = getattr(getattr(tf.keras.optimizers, "legacy", None), "Optimizer", None)
        if legacy is not None:
            optimizers.append(legacy)
        for cls in optimizers:
            def apply_gradients(optimizer, *args, _original=cls.apply_gradients, **kwargs):
                result = _original(optimizer, *args, **kwargs)
                if id(optimizer) not in loop.rec.optimizer_ids:
                    loop.rec.optimizer_ids.add(id(optimizer))
                    loop.rec.optimizers.append(loop.common.describe_optimizer(tf, optimizer))
                if tf.executing_eagerly():
                    loop.applied()
                else:
                    state.applied = True
                return result

            cls.apply_gradients = apply_gradients
        original_function = tf.function

        def function(func=None, *args, **kwargs):
            if func is None:
                return lambda f: function(f, *args, **kwargs)
            if not loop.is_program(func):
                return original_function(func, *args, **kwargs)
            return loop.compiled(func, original_function(loop.traced(func), *args, **kwargs))

        tf.function = function
        self._patch_mesh()
        # The program trains in its own thread: what its dropout layers would have dropped is recorded there.
        self.rec.recording_thread = threading.get_ident()

    def _patch_mesh(self) -> None:
        try:
            from tensorflow.experimental import dtensor
        except ImportError:
            return
        original = dtensor.create_mesh
        kind = "GPU" if self.devices[0].lower().startswith("/gpu") else "CPU"
        harness = [f"{kind}:{i}" for i in range(len(self.devices))]
        notes = self.rec.info["notes"]

        def create_mesh(mesh_dims=None, mesh_name="", devices=None, *args, **kwargs):
            dims = list(mesh_dims or [])
            if len(dims) != 1:
                return original(mesh_dims, mesh_name, devices, *args, **kwargs)
            name, size = dims[0]
            if size != len(harness):
                notes.append(f"the program's mesh ({name}={size}) runs on the harness's {len(harness)} devices")
            return original([(name, len(harness))], mesh_name, harness, *args, **kwargs)

        dtensor.create_mesh = create_mesh

    def is_program(self, func) -> bool:
        code = getattr(func, "__code__", None)
        path = os.path.abspath(code.co_filename) if code is not None else ""
        return path.startswith(self.program_dir + os.sep)

    def traced(self, func):
        """The function as traced: its own outputs, with the loss it differentiated and
        whether it applied gradients (a step may do both, or each in its own tf.function)."""
        loop, state = self, self.state

        @functools.wraps(func)
        def step(*args, **kwargs):
            saved = (getattr(state, "target", None), getattr(state, "applied", False))
            state.target, state.applied = None, False
            try:
                out = func(*args, **kwargs)
            finally:
                target, applied = state.target, state.applied
                state.target, state.applied = saved
            extras = {}
            if target is not None:
                extras["e2k_loss"] = target
            if applied:
                extras["e2k_applied"] = loop.tf.constant(True)
            return {"e2k_outputs": out, **extras} if extras else out

        return step

    def compiled(self, func, compiled):
        loop, state, tf = self, self.state, self.tf

        @functools.wraps(func)
        def call(*args, **kwargs):
            models = [v for v in (*args, *kwargs.values()) if isinstance(v, tf.keras.Model)]
            eager = tf.executing_eagerly()
            if eager and loop.rec.initial is None and models:
                loop.snapshot = (models[0], loop.values(models[0]))
            out = compiled(*args, **kwargs)
            if isinstance(out, dict) and "e2k_outputs" in out:
                if eager:
                    if "e2k_loss" in out:
                        loop.pending = (out["e2k_loss"], models[0] if models else None)
                    if "e2k_applied" in out:
                        loop.applied()
                else:  # called while another function traces: that one returns them
                    if "e2k_loss" in out:
                        state.target = out["e2k_loss"]
                    if "e2k_applied" in out:
                        state.applied = True
                out = out["e2k_outputs"]
            return out

        for name in ("get_concrete_function", "python_function"):
            if hasattr(compiled, name):
                setattr(call, name, getattr(compiled, name))
        return call

    def applied(self) -> None:
        """Gradients were applied: the step's loss, seen when they were taken, is recorded."""
        if self.pending is None:
            return  # gradients of no tape the harness saw
        loss, model = self.pending
        self.pending = None
        self.record(loss, model)

    # -- recording -----------------------------------------------------------------------------
    def record(self, loss, model=None) -> None:
        rec = self.rec
        if self.model is None:
            if model is None and self.snapshot is not None:
                model = self.snapshot[0]
            if model is None:
                return
            self.model = model
            rec.variables = self.table(model)
            rec.initial = self.snapshot[1] if self.snapshot is not None and self.snapshot[0] is model \
                else self.values(model)
            rec.training_calls += 1
            rec.replicas = len(self.devices)
        rec.losses.append(float(self.numpy(loss)))
        self.steps += 1
        if rec.perturb is not None:
            self.nudge()
        if rec.limit_reached:
            raise self.common.HarnessStop("ok", f"the {len(rec.losses)} steps asked for are recorded")

    def finish(self) -> None:
        if self.model is not None:
            self.rec.final = self.values(self.model)

    def weights(self, model):
        return list(model.trainable_weights) + [w for w in model.non_trainable_weights]

    def table(self, model) -> list[dict]:
        table = []
        trainable = {id(w) for w in model.trainable_weights}
        for w in self.weights(model):
            name = w.name[:-2] if w.name.endswith(":0") else w.name
            table.append({"name": name, "shape": [int(d) for d in w.shape], "dtype": w.dtype.base_dtype.name,
                          "trainable": id(w) in trainable})
        return table

    def numpy(self, value):
        import numpy as np

        try:
            return np.asarray(value.numpy())
        except Exception:  # noqa: BLE001 - a DTensor: its first component (replicated)
            from tensorflow.experimental import dtensor

            return np.asarray(dtensor.unpack(value)[0].numpy())

    def values(self, model):
        return [self.numpy(w.read_value()) for w in self.weights(model)]

    def nudge(self) -> None:
        """Every non-zero element of every float trainable weight moved by ulps, up or down
        (directions from (seed, step)), after each step."""
        import numpy as np

        perturb = self.rec.perturb
        seed, ulps = int(perturb.get("seed", 0)), int(perturb.get("ulps", 1))
        rng = np.random.default_rng([seed, self.steps])
        elements = variables = 0
        for w in self.model.trainable_weights:
            value = self.numpy(w.read_value())
            elements += value.size
            if value.dtype not in (np.float32, np.float64):
                continue
            variables += 1
            size = np.abs(value)
            ulp = np.nextafter(size, np.inf, dtype=value.dtype) - size
            step = np.where(rng.random(value.shape) < 0.5, -ulp, ulp) * value.dtype.type(ulps)
            moved = np.where(value == 0, value, value + step).astype(value.dtype)
            self.assign(w, moved)
        self.rec.nudge = _Described({"seed": seed, "ulps": ulps, "every_step": True, "elements": elements,
                                     "variables": variables})

    def assign(self, variable, value) -> None:
        layout = getattr(variable, "layout", None)
        if layout is not None:
            from tensorflow.experimental import dtensor

            value = dtensor.copy_to_mesh(self.tf.constant(value), layout)
        variable.assign(value)


class _Described:
    def __init__(self, description: dict):
        self.description = description

    def describe(self) -> dict:
        return self.description
