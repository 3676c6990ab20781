from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._nodes import sole_small, walk as _walk
from estimator2keras._rule import Case, ModuleRule, Safety, Unsupported
from estimator2keras._units import bind_arguments, tf_alias

#: tf.experimental.dtensor, as API paths name it.
DTENSOR = "experimental.dtensor."
#: Keras 2's DTensor optimizers -> the Keras optimizer of the same name (keras.optimizers.X).
DTENSOR_OPTIMIZERS = "keras.dtensor.experimental.optimizers."
LAYOUT_MAP = frozenset({"keras.dtensor.experimental.LayoutMap"})
LAYOUT_MAP_SCOPE = frozenset({"keras.dtensor.experimental.layout_map_scope"})
#: Keras 2 only (Keras 3's random ops draw from seeded generators already).
RANDOM_GENERATOR = frozenset({"keras.backend.experimental.enable_tf_random_generator"})
#: Keras's per-example loss functions -> the Loss class computing the same, and its parameters
#: after (y_true, y_pred).
LOSSES = {
    "sparse_categorical_crossentropy": ("SparseCategoricalCrossentropy", ("from_logits", "axis", "ignore_class")),
    "categorical_crossentropy": ("CategoricalCrossentropy", ("from_logits", "label_smoothing", "axis")),
    "binary_crossentropy": ("BinaryCrossentropy", ("from_logits", "label_smoothing", "axis")),
    "mean_squared_error": ("MeanSquaredError", ()),
    "mse": ("MeanSquaredError", ()),
    "MSE": ("MeanSquaredError", ()),
    "mean_absolute_error": ("MeanAbsoluteError", ()),
    "mae": ("MeanAbsoluteError", ()),
    "MAE": ("MeanAbsoluteError", ()),
    "huber": ("Huber", ("delta",)),
    "hinge": ("Hinge", ()),
    "log_cosh": ("LogCosh", ()),
    "kl_divergence": ("KLDivergence", ()),
    "poisson": ("Poisson", ()),
}
#: How the step reduced the per-example losses -> the Loss's reduction (None: its default,
#: the mean over the global batch, which is what a mean over a DTensor batch is).
REDUCTIONS = {"reduce_sum": "sum", "math.reduce_sum": "sum", "reduce_mean": None, "math.reduce_mean": None}
#: Calls a training loop may make around its steps only to show progress.
REPORTING_METHODS = frozenset({"reset_state", "reset_states", "result", "update", "items", "values", "keys",
                               "numpy", "append", "format"})
REPORTING_FUNCTIONS = frozenset({"print", "len", "float", "int", "str", "dict", "list", "round"})
REPORTING_API = frozenset({"keras.utils.Progbar", "print"})
#: What a step may call besides the model, its loss and the program's functions.
STEP_METHODS = frozenset({"gradient", "apply_gradients", "update_state", "values", "items"})
STEP_FUNCTIONS = frozenset({"len", "zip", "dict", "float", "list", "tuple"})

COMMENT = ("The training loop (its steps, the per-batch packing of DTensor inputs) -> compile and fit, "
           "which split each batch over the strategy's replicas; fit shows the loss and metrics.")


class DTensorKerasToKeras3(ModuleRule):
    """A DTensor-Keras program (TensorFlow's "DTensor with Keras" tutorial) becomes a Keras program under `MirroredStrategy`.

    ## What it does
    For a program that trains a Keras model data-parallel over a one-dimensional DTensor
    mesh, as TensorFlow's tutorial does:

    - `mesh = dtensor.create_mesh([("batch", N)], devices=devices)` becomes
      `strategy = tf.distribute.MirroredStrategy(devices)`, and the statements that create
      the model, its optimizer and its metrics run under `with strategy.scope():`;
    - the `kernel_layout=`/`bias_layout=` (any `*_layout=`) and `mesh=` arguments of Keras's
      classes go, with the `dtensor.Layout` values they were given; a
      `tf.keras.dtensor.experimental.LayoutMap` goes, and the model built in its
      `layout_map.scope()` is built under the strategy's scope;
    - `tf.keras.dtensor.experimental.optimizers.X(..., mesh=mesh)` is `tf.keras.optimizers.X(...)`;
    - the custom training loop of the tutorial — a step function that computes the model's
      output under a `tf.GradientTape`, reduces a Keras per-example loss over the batch
      (`tf.reduce_sum` or `tf.reduce_mean`), applies the gradients of the trainable variables
      and updates the metrics; an evaluation step that updates the same kind of metrics; the
      per-batch `dtensor.pack` of the inputs; a loop over epochs — becomes
      `model.compile(optimizer=..., loss=..., metrics=[...])` and
      `model.fit(train_dataset, epochs=N, validation_data=eval_dataset)`. The loss is the
      Keras Loss class of the same function, with `reduction="sum"` where the step summed;
      the metrics keep the names the program gave them;
    - `tf.keras.backend.experimental.enable_tf_random_generator()` (Keras 2 only) goes.

    With `--target jax`, the strategy then becomes `keras.distribution.DataParallel`
    (E2K700).

    ## Why
    Keras 3 (TensorFlow 2.16+) removed `tf.keras.dtensor` and the layout arguments of its
    classes: these programs stop on the same release as Estimator programs. On a mesh with
    one batch dimension and replicated weights, DTensor trains a copy of the model on each
    device with a shard of each global batch, which is what `MirroredStrategy` does with
    `fit`: each replica computes its shard's loss, and the gradients are summed over the
    replicas, so a summed loss (`reduction="sum"`) or a mean over the global batch (Keras's
    default) is differentiated as the program did.

    ## Fix safety
    Review. Training computes what the program computed, step for step (`e2k parity`
    compares it). The loop's own printing gives way to fit's progress bar and its logs:
    fit's `loss` is the loss Keras differentiates (summed over the batch where the step
    summed), not the program's per-sample figure, and the evaluation metrics are prefixed
    `val_`.

    ## Limitations
    A mesh of several dimensions, weights sharded by their layouts (model parallelism) and
    a loop that does more than train, evaluate and show progress are marked, and nothing of
    the file is changed. The step must read its loss from one Keras loss function of the
    labels and the model's output.

    ## References
    - https://www.tensorflow.org/tutorials/distribute/dtensor_keras_tutorial
    - https://www.tensorflow.org/tutorials/distribute/keras
    - https://keras.io/guides/distribution/
    """

    code = "E2K607"
    name = "dtensor-keras-to-keras3"
    summary = "DTensor-Keras (mesh, layouts, packed custom loop) -> Keras under MirroredStrategy, compile and fit"
    safety = Safety.REVIEW
    keywords = ("dtensor",)
    order = 205
    notes = (COMMENT,)

    cases = [
        Case(
            id="tutorial-loop",
            before='''\
import tensorflow as tf
from tensorflow.experimental import dtensor

mesh = dtensor.create_mesh([("batch", 2)], devices=["CPU:0", "CPU:1"])
layout_2d = dtensor.Layout.replicated(mesh, 2)
layout_1d = dtensor.Layout.replicated(mesh, 1)
model = tf.keras.Sequential(
    [tf.keras.layers.Dense(3, kernel_layout=layout_2d, bias_layout=layout_1d)])
ds_train = tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [0, 2])).batch(2)


@tf.function
def train_step(model, x, y, optimizer, metrics):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = tf.reduce_sum(tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    for metric in metrics.values():
        metric.update_state(y_true=y, y_pred=logits)
    return {"loss": loss / len(x)}


def pack_dtensor_inputs(images, labels, image_layout, label_layout):
    num_local_devices = image_layout.mesh.num_local_devices()
    images = tf.split(images, num_local_devices)
    labels = tf.split(labels, num_local_devices)
    return dtensor.pack(images, image_layout), dtensor.pack(labels, label_layout)


optimizer = tf.keras.dtensor.experimental.optimizers.Adam(0.01, mesh=mesh)
metrics = {"accuracy": tf.keras.metrics.SparseCategoricalAccuracy(mesh=mesh)}
image_layout = dtensor.Layout.batch_sharded(mesh, "batch", rank=2)
label_layout = dtensor.Layout.batch_sharded(mesh, "batch", rank=1)
for epoch in range(3):
    for metric in metrics.values():
        metric.reset_state()
    for x, y in ds_train:
        x, y = pack_dtensor_inputs(x, y, image_layout, label_layout)
        results = train_step(model, x, y, optimizer, metrics)
    print(epoch, results["loss"].numpy(), metrics["accuracy"].result().numpy())
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K607 The training loop (its steps, the per-batch packing of DTensor inputs) -> compile and fit,
#   which split each batch over the strategy's replicas; fit shows the loss and metrics.
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.layers.Dense(3)])
ds_train = tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [0, 2])).batch(2)


with strategy.scope():
    optimizer = tf.keras.optimizers.Adam(0.01)
    metrics = {"accuracy": tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")}
    model.compile(
        optimizer=optimizer,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum"),
        metrics=list(metrics.values()))
model.fit(ds_train, epochs=3)
''',
        ),
    ]

    def transform(self, module: cst.Module, ctx) -> cst.Module:
        meshes = [c for c in iter_calls(module) if (ctx.call_api_path(c) or "").startswith(DTENSOR + "create_")]
        if not meshes or not _keras_on_mesh(module, ctx):
            return module  # TensorFlow's own DTensor (it stays in TensorFlow 2.16+), with no Keras on it
        try:
            if len(meshes) > 1:
                raise Unsupported("the program creates several DTensor meshes", meshes[1])
            _Conversion(ctx, module, meshes[0], self.code).run()
        except Unsupported as exc:
            ctx.mark(exc.node or meshes[0], exc.reason, self.code)
        return module


@dataclass
class _Step:
    """A training or evaluation step of the loop, in the terms of the loop's call."""

    function: cst.FunctionDef
    model: str
    x: str
    y: str | None
    metrics: str | None
    optimizer: str | None = None
    loss: cst.BaseExpression | None = None  # the Keras Loss made of the step's loss


@dataclass
class _Frame:
    """A function of the step, and what its parameters are in the terms of the loop's call."""

    fn: cst.FunctionDef
    names: dict


@dataclass
class _Loop:
    """The training loop: what it iterates and calls, and the statements it is."""

    statement: cst.For
    epochs: cst.BaseExpression | None
    train_data: cst.BaseExpression
    train_call: cst.Call
    eval_data: cst.BaseExpression | None = None
    eval_call: cst.Call | None = None


class _Conversion:
    def __init__(self, ctx, module: cst.Module, mesh_call: cst.Call, code: str):
        self.ctx, self.module, self.mesh_call, self.code = ctx, module, mesh_call, code
        self.body = list(module.body)
        self.functions = {s.name.value: s for s in self.body if isinstance(s, cst.FunctionDef)}
        self.removed: list[cst.BaseStatement] = []  # top-level statements that go
        self.replacements: dict[cst.CSTNode, cst.CSTNode] = {}  # expressions rewritten in place
        self.flattened: dict[cst.With, list[cst.BaseStatement]] = {}  # layout_map.scope() blocks

    # -- reading -----------------------------------------------------------------------------
    def run(self) -> None:
        ctx = self.ctx
        mesh_statement = self._top_level(self.mesh_call)
        small = sole_small(mesh_statement)
        if not (isinstance(small, cst.Assign) and small.value is self.mesh_call and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)):
            raise Unsupported("the DTensor mesh is not assigned to a name at the module's top level", self.mesh_call)
        if ctx.call_api_path(self.mesh_call) != DTENSOR + "create_mesh":
            raise Unsupported(f"`{_emit.code(self.mesh_call.func)}` (a mesh over several clients) has no rule in e2k",
                              self.mesh_call)
        self.mesh = small.targets[0].target.value
        args = bind_arguments(self.mesh_call, ("mesh_dims", "mesh_name", "devices", "device_type", "use_xla_spmd"))
        dims = args.get("mesh_dims")
        if dims is None or not isinstance(dims.value, cst.List) or len(dims.value.elements) != 1:
            raise Unsupported("the mesh has several dimensions (or they are not written as a list): e2k converts "
                              "a mesh of one batch dimension (data parallelism)", self.mesh_call)
        devices = args.get("devices")
        self.layouts = self._layouts()
        self._layout_maps()
        self._keyword_arguments()
        self._copies()
        loop = self._loop()
        self._reporting(loop)
        self._steps_and_metrics(loop)
        self._random_generator()
        self._unused_definitions(loop)
        self._check_nothing_left(loop)
        self._emit(mesh_statement, devices, loop)

    def _top_level(self, node: cst.CSTNode) -> cst.BaseStatement:
        current = node
        while current is not None and not any(current is s for s in self.body):
            current = self.ctx.parent(current)
        if current is None:
            raise Unsupported("e2k converts a DTensor program written at the module's top level", node)
        return current

    def _api(self, node: cst.CSTNode) -> str:
        return (self.ctx.call_api_path(node) if isinstance(node, cst.Call) else self.ctx.api_path(node)) or ""

    def _layouts(self) -> dict[str, bool]:
        """Module-level names bound to a dtensor.Layout: name -> replicated?"""
        layouts: dict[str, bool] = {}
        for statement in self.body:
            small = sole_small(statement)
            if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call) \
                    and self._api(small.value).startswith(DTENSOR + "Layout") \
                    and not isinstance(small.targets[0].target, cst.Subscript):  # a LayoutMap's entry
                if len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
                    raise Unsupported("a layout is not assigned to one name", small)
                layouts[small.targets[0].target.value] = self._replicated(small.value)
                self.removed.append(statement)
        return layouts

    def _is_replicated(self, value: cst.BaseExpression) -> bool:
        """A name of a replicated layout of the program, or a replicated layout written there."""
        if isinstance(value, cst.Name):
            return bool(self.layouts.get(value.value))
        return isinstance(value, cst.Call) and self._api(value).startswith(DTENSOR + "Layout") \
            and self._replicated(value)

    def _replicated(self, call: cst.Call) -> bool:
        path = self._api(call)
        if path.endswith("Layout.replicated"):
            return True
        if path == DTENSOR + "Layout" and call.args and isinstance(call.args[0].value, (cst.List, cst.Tuple)):
            return all(self._api(e.value) == DTENSOR + "UNSHARDED" for e in call.args[0].value.elements)
        return False

    def _layout_maps(self) -> None:
        """``layout_map = LayoutMap(mesh=mesh)``, its entries, and ``with layout_map.scope():``."""
        self.layout_maps: set[str] = set()
        for statement in self.body:
            small = sole_small(statement)
            if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call) and self._api(small.value) in LAYOUT_MAP:
                if len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
                    raise Unsupported("a LayoutMap is not assigned to one name", small)
                self.layout_maps.add(small.targets[0].target.value)
                self.removed.append(statement)
            elif isinstance(small, cst.Assign) and len(small.targets) == 1 \
                    and isinstance(small.targets[0].target, cst.Subscript) \
                    and isinstance(small.targets[0].target.value, cst.Name) \
                    and small.targets[0].target.value.value in self.layout_maps:
                if not self._is_replicated(small.value):
                    raise Unsupported("this LayoutMap entry shards weights (model parallelism): e2k converts "
                                      "replicated weights only", small)
                self.removed.append(statement)
            elif isinstance(statement, cst.With) and len(statement.items) == 1 \
                    and isinstance(statement.items[0].item, cst.Call):
                item = statement.items[0].item
                func = item.func
                if isinstance(func, cst.Attribute) and func.attr.value == "scope" and isinstance(func.value, cst.Name) \
                        and func.value.value in self.layout_maps \
                        or self._api(item) in LAYOUT_MAP_SCOPE:
                    self.flattened[statement] = list(statement.body.body)

    def _keyword_arguments(self) -> None:
        """``mesh=`` and ``*_layout=`` of Keras classes go; dtensor optimizers are Keras's."""
        for call in iter_calls(self.module):
            path = self._api(call)
            if not path.startswith("keras."):
                continue
            kept = []
            for arg in call.args:
                keyword = arg.keyword.value if arg.keyword is not None else None
                if keyword == "mesh" or keyword is not None and keyword.endswith("_layout"):
                    if keyword != "mesh" and not self._is_replicated(arg.value):
                        raise Unsupported(f"`{keyword}=` shards this layer's weights (model parallelism), or is not "
                                          "a layout of the program: e2k converts replicated weights only", arg)
                    continue
                kept.append(arg)
            func = call.func
            if path.startswith(DTENSOR_OPTIMIZERS):
                func = _emit.expr(f"{self._tf()}.keras.optimizers.{path.rsplit('.', 1)[1]}")
            if len(kept) != len(call.args) or func is not call.func:
                self.replacements[call] = call.with_changes(func=func, args=_emit.call_args(kept))

    def _copies(self) -> None:
        """``dtensor.copy_to_mesh(x, layout=replicated)`` is ``x``: a replica holds it whole."""
        for call in iter_calls(self.module):
            if self._api(call) != DTENSOR + "copy_to_mesh":
                continue
            args = bind_arguments(call, ("tensor", "layout", "source_layout"))
            layout = args.get("layout")
            if set(args) != {"tensor", "layout"} or not self._is_replicated(layout.value):
                raise Unsupported("a tensor is copied to the mesh with a layout that shards it", call)
            self.replacements[call] = args["tensor"].value.with_changes(
                lpar=[], rpar=[]) if hasattr(args["tensor"].value, "lpar") else args["tensor"].value

    def _tf(self) -> str:
        if not hasattr(self, "_tf_name"):
            self._tf_name, needs_import = tf_alias(self.ctx)
            if needs_import:
                self.ctx.add_import("tensorflow", asname="tf")
        return self._tf_name

    # -- the loop ----------------------------------------------------------------------------
    def _loop(self) -> _Loop:
        """The top-level loop that calls the training step (directly or over epochs)."""
        steps = {name for name in self.functions if self._reaches(name, "apply_gradients")}
        if not steps:
            raise Unsupported("no function of the program applies gradients (a training step e2k converts)",
                              self.mesh_call)
        found = []
        for statement in self.body:
            if isinstance(statement, cst.For) and any(
                    isinstance(c.func, cst.Name) and c.func.value in steps for c in iter_calls(statement)):
                found.append(statement)
        if len(found) != 1:
            raise Unsupported("the training step is called in several loops, or in none at the module's top level",
                              self.mesh_call)
        outer = found[0]
        epochs = None
        inner_loops = [outer]
        if _is_range(outer.iter) and not _calls_in_own_body(outer, steps):
            epochs = _range_stop(outer.iter)
            inner_loops = [s for s in outer.body.body if isinstance(s, cst.For)]
        train = [f for f in inner_loops if any(isinstance(c.func, cst.Name) and c.func.value in steps
                                               for c in iter_calls(f))]
        if len(train) != 1:
            raise Unsupported("the training step is called in several loops", outer)
        train_loop = train[0]
        train_call = next(c for c in iter_calls(train_loop) if isinstance(c.func, cst.Name) and c.func.value in steps)
        loop = _Loop(outer, epochs, train_loop.iter, train_call)
        self.train_loop = train_loop
        self.eval_loop = None
        evaluations = [f for f in inner_loops if f is not train_loop and any(
            isinstance(c.func, cst.Name) and c.func.value in self.functions
            and self._evaluates(c.func.value) for c in iter_calls(f))]
        if len(evaluations) > 1:
            raise Unsupported("the loop evaluates in several loops", outer)
        if evaluations:
            self.eval_loop = evaluations[0]
            loop.eval_data = self.eval_loop.iter
            loop.eval_call = next(c for c in iter_calls(self.eval_loop) if isinstance(c.func, cst.Name)
                                  and c.func.value in self.functions and self._evaluates(c.func.value))
        return loop

    def _reaches(self, name: str, method: str, seen: frozenset = frozenset()) -> bool:
        """Does the program's function ``name`` call ``.method(...)``, itself or through the
        program's functions it calls?"""
        for call in iter_calls(self.functions[name]):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == method:
                return True
            if isinstance(call.func, cst.Name) and call.func.value in self.functions and call.func.value not in seen \
                    and call.func.value != name and self._reaches(call.func.value, method, seen | {name}):
                return True
        return False

    def _evaluates(self, name: str) -> bool:
        return not self._reaches(name, "apply_gradients") and self._reaches(name, "update_state")

    def _reporting(self, loop: _Loop) -> None:
        """Everything in the loop but its steps (and the packing of their inputs) only shows
        progress: else the loop does more than fit would."""
        data_loops = [self.train_loop] + ([self.eval_loop] if self.eval_loop is not None else [])
        step_calls = [loop.train_call] + ([loop.eval_call] if loop.eval_call is not None else [])
        assigned: set[str] = set()
        for data_loop, call in zip(data_loops, step_calls):
            self._batch_names(data_loop, call)
        for statement in _walk_statements(loop.statement):
            if statement is loop.statement or any(statement is d for d in data_loops):
                continue
            if self.ctx.within(statement, data_loops) and self._is_batch_statement(statement):
                continue
            if isinstance(statement, (cst.For, cst.If)):
                continue  # their bodies are read one by one
            for node in _walk(statement):
                if isinstance(node, cst.Call) and not any(node is c for c in step_calls) \
                        and not self._is_reporting_call(node):
                    raise Unsupported(f"the training loop does more than train, evaluate and show progress "
                                      f"(`{_emit.code(node)}`)", node)
                if isinstance(node, cst.AssignTarget):
                    assigned.update(n.value for n in _walk(node.target) if isinstance(n, cst.Name))
                if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
                    assigned.add(node.target.value)
        for statement in (loop.statement, *data_loops):
            for node in _walk(statement.target):
                if isinstance(node, cst.Name):
                    assigned.add(node.value)
        after = self.body[self.body.index(loop.statement) + 1:]
        for statement in after:
            for node in _walk(statement):
                if isinstance(node, cst.Name) and node.value in assigned - self.batch_names:
                    raise Unsupported(f"`{node.value}`, which the training loop computes, is read after it", node)
                if isinstance(node, cst.Name) and node.value in assigned & self.batch_names:
                    raise Unsupported(f"`{node.value}`, a batch of the training loop, is read after it", node)

    def _batch_names(self, data_loop: cst.For, call: cst.Call) -> None:
        """The names the loop binds to each batch's features and labels (through the
        unpacking of the batch and the packing of its parts)."""
        self.batch_names = getattr(self, "batch_names", set())
        target = data_loop.target
        self.batch_names.update(n.value for n in _walk(target) if isinstance(n, cst.Name))
        for statement in data_loop.body.body:
            if self._is_batch_statement(statement):
                small = statement.body[0]
                for target in small.targets:
                    self.batch_names.update(n.value for n in _walk(target.target) if isinstance(n, cst.Name))

    def _in_batch_order(self, step: _Step, data_loop: cst.For) -> None:
        """The step is given the batch's first element as the features, its second as the
        labels (what fit hands the model and the loss)."""
        pairs = []
        if isinstance(data_loop.target, cst.Tuple) and len(data_loop.target.elements) == 2:
            pairs.append(tuple(_emit.code(e.value) for e in data_loop.target.elements))
        for statement in data_loop.body.body:
            if not self._is_batch_statement(statement):
                continue
            small = statement.body[0]
            target = small.targets[0].target
            value = small.value
            if isinstance(value, cst.Tuple) and isinstance(target, cst.Tuple) and len(value.elements) == 2:
                indices = [_emit.code(e.value.slice[0].slice.value) if len(e.value.slice) == 1
                           and isinstance(e.value.slice[0].slice, cst.Index) else "" for e in value.elements]
                if indices != ["0", "1"] or not _emit.code(data_loop.target).isidentifier() \
                        or any(_emit.code(e.value.value) != _emit.code(data_loop.target) for e in value.elements):
                    raise Unsupported("the batch is not split into features and labels in order", statement)
                pairs.append(tuple(_emit.code(e.value) for e in target.elements))
            elif isinstance(value, cst.Call) and isinstance(target, cst.Tuple) and len(value.args) >= 2:
                given = tuple(_emit.code(a.value) for a in value.args[:2])
                if pairs and given != pairs[-1]:
                    raise Unsupported("the packed batch is not the batch's features and labels", statement)
                pairs.append(tuple(_emit.code(e.value) for e in target.elements))
        if not pairs or pairs[-1] != (step.x, step.y):
            raise Unsupported(f"`{step.function.name.value}` is not given the batch's features and labels in order",
                              data_loop)

    def _is_batch_statement(self, statement) -> bool:
        """``x, y = batch[0], batch[1]`` or ``x, y = pack_dtensor_inputs(x, y, ...)``."""
        small = sole_small(statement)
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            return False
        value = small.value
        if isinstance(value, cst.Tuple) and all(isinstance(e.value, cst.Subscript) for e in value.elements):
            return True
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in self.functions:
            return _packs(self.ctx, self.functions[value.func.value])
        return False

    def _is_reporting_call(self, call: cst.Call) -> bool:
        func = call.func
        if isinstance(func, cst.Name) and func.value in REPORTING_FUNCTIONS:
            return True
        if isinstance(func, cst.Attribute) and func.attr.value in REPORTING_METHODS:
            return True
        return self._api(call) in REPORTING_API

    def _steps_and_metrics(self, loop: _Loop) -> None:
        train_fn = self.functions[loop.train_call.func.value]
        self.train = self._step(train_fn, loop.train_call, training=True)
        self._in_batch_order(self.train, self.train_loop)
        self.evaluation = None
        if loop.eval_call is not None:
            self.evaluation = self._step(self.functions[loop.eval_call.func.value], loop.eval_call, training=False)
            self._in_batch_order(self.evaluation, self.eval_loop)
        self.metric_dicts = {}
        for step in (self.train, self.evaluation):
            if step is not None and step.metrics is not None:
                self.metric_dicts[step.metrics] = self._metrics_assignment(step.metrics)
        if self.evaluation is not None and self.evaluation.metrics is not None:
            train = self.metric_dicts.get(self.train.metrics)
            evaluation = self.metric_dicts[self.evaluation.metrics]
            if train is None or not _same_metrics(train[1], evaluation[1]):
                raise Unsupported("the evaluation updates other metrics than training: Keras evaluates with the "
                                  "metrics it trains with", evaluation[0])
            if self.evaluation.metrics != self.train.metrics:
                self.removed.append(evaluation[0])
        if self.train.metrics is not None:
            statement, value = self.metric_dicts[self.train.metrics]
            if isinstance(value, cst.Dict):
                for element in value.elements:
                    if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                            and isinstance(element.value, cst.Call) \
                            and not any(a.keyword is not None and a.keyword.value == "name" for a in element.value.args):
                        call = self.replacements.get(element.value, element.value)
                        self.replacements[element.value] = call.with_changes(
                            args=_emit.call_args([*call.args, _emit.keyword_arg("name", element.key)]))

    def _metrics_assignment(self, name: str):
        for statement in self.body:
            small = sole_small(statement)
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                    and small.targets[0].target.value == name:
                if not isinstance(small.value, (cst.Dict, cst.List, cst.Tuple)):
                    raise Unsupported(f"`{name}` is not a dict or list of metrics written in the program", small)
                for element in small.value.elements:
                    if not isinstance(element.value, cst.Call) or not self._api(element.value).startswith("keras.metrics."):
                        raise Unsupported(f"`{name}` holds something else than a Keras metric", element.value)
                return statement, small.value
        raise Unsupported(f"the metrics `{name}` are not assigned at the module's top level", self.mesh_call)

    def _step(self, fn: cst.FunctionDef, call: cst.Call, training: bool) -> _Step:
        """The step the loop calls, read with the program's functions it calls in turn (a step
        that computes its gradients in one tf.function and applies them in another)."""
        frames = self._frames(fn, call)
        forwards = [(frame, c) for frame in frames for c in iter_calls(frame.fn.body)
                    if isinstance(c.func, cst.Name) and c.func.value in frame.names
                    and any(a.keyword is not None and a.keyword.value == "training" for a in c.args)]
        if len(forwards) != 1:
            raise Unsupported(f"`{fn.name.value}` runs the model {'more than once' if forwards else 'nowhere'} "
                              "(a call with training=)", fn)
        frame, forward = forwards[0]
        given = next(a.value for a in forward.args if a.keyword is not None and a.keyword.value == "training")
        if _emit.code(given) != str(training):
            raise Unsupported(f"`{fn.name.value}` runs the model with training={_emit.code(given)}", forward)
        model = frame.names[forward.func.value]
        inputs = [a for a in forward.args if a.keyword is None]
        x = self._normal(inputs[0].value, frame) if len(inputs) == 1 else None
        if not model.isidentifier() or x is None or not x.isidentifier():
            raise Unsupported(f"`{fn.name.value}` does not run a model it is given on features it is given", forward)
        outputs = _assigned_name(self.ctx, forward)
        step = _Step(fn, model, x, None, None)
        step.metrics, step.y = self._metric_updates(frames, frame, outputs)
        if training:
            step.optimizer, step.loss, loss_y = self._training(frames, frame, model, outputs)
            if step.y is None:
                step.y = loss_y
            elif loss_y != step.y:
                raise Unsupported("the loss and the metrics compare the model's output with other labels", fn)
        elif step.y is None:
            raise Unsupported(f"`{fn.name.value}` updates no metric", fn)
        if not step.y.isidentifier():
            raise Unsupported(f"`{fn.name.value}` compares the model's output with `{step.y}`, not the labels "
                              "of the batch", fn)
        for frame in frames:
            self._only_results(frame, frames)
        if getattr(self, "model", model) != model:
            raise Unsupported("training and evaluation run different models", fn)
        self.model = model
        self.step_functions = getattr(self, "step_functions", set()) | {f.fn.name.value for f in frames}
        return step

    def _frames(self, fn: cst.FunctionDef, call: cst.Call) -> list[_Frame]:
        """The step function and the program's functions it calls, each with its parameters
        read in the terms of the loop's call (``variables`` -> ``model.trainable_variables``)."""
        root = _Frame(fn, {p: _emit.code(a.value) for p, a in bind_arguments(call, _params(fn)).items()})
        frames, queue = [root], [root]
        while queue:
            frame = queue.pop()
            for inner in iter_calls(frame.fn.body):
                if isinstance(inner.func, cst.Name) and inner.func.value in self.functions:
                    callee = self.functions[inner.func.value]
                    if any(f.fn is callee for f in frames):
                        raise Unsupported(f"`{callee.name.value}` is called twice by the step, or recursively", inner)
                    bound = bind_arguments(inner, _params(callee))
                    names = {p: self._normal(a.value, frame) for p, a in bound.items()}
                    frames.append(_Frame(callee, names))
                    queue.append(frames[-1])
        return frames

    def _normal(self, expr: cst.BaseExpression, frame: _Frame) -> str:
        """``expr`` of ``frame``'s function in the terms of the loop's call."""
        replacements = {n: cst.parse_expression(frame.names[n.value]) for n in _walk(expr)
                        if isinstance(n, cst.Name) and n.value in frame.names}
        return _emit.code(_emit.replace_in(expr, replacements))

    def _metric_updates(self, frames, forward_frame, outputs):
        """(the collection of metrics the step updates, the labels they compare) in the loop's terms."""
        holder = labels = None
        for frame in frames:
            for node in iter_calls(frame.fn.body):
                if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "update_state"):
                    continue
                bound = bind_arguments(node, ("y_true", "y_pred", "sample_weight"))
                prediction = bound.get("y_pred")
                if set(bound) != {"y_true", "y_pred"} or frame is not forward_frame \
                        or not (isinstance(prediction.value, cst.Name) and prediction.value.value == outputs):
                    raise Unsupported("a metric is updated with other values than the labels and the model's output",
                                      node)
                found = self._metric_holder(frame, node.func.value)
                y = self._normal(bound["y_true"].value, frame)
                if holder not in (None, found) or labels not in (None, y):
                    raise Unsupported("the step updates metrics of several collections, or with other labels", node)
                holder, labels = found, y
        return holder, labels

    def _metric_holder(self, frame: _Frame, metric: cst.BaseExpression) -> str:
        """``metric`` of ``for metric in metrics.values():`` (or ``metrics["a"]``) -> ``metrics``."""
        source = None
        if isinstance(metric, cst.Subscript):
            source = metric.value
        elif isinstance(metric, cst.Name):
            for node in _walk(frame.fn.body):
                if isinstance(node, cst.For) and isinstance(node.target, cst.Name) and node.target.value == metric.value:
                    source = node.iter
                    if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) \
                            and source.func.attr.value == "values" and not source.args:
                        source = source.func.value
        holder = self._normal(source, frame) if source is not None else ""
        if not holder.isidentifier():
            raise Unsupported("a metric that is not one of a collection the step is given is updated", metric)
        return holder

    def _training(self, frames, forward_frame, model: str, outputs: str):
        """(the optimizer, the Keras loss, the labels the loss compares) of a training step."""
        def calls(attribute):
            return [(f, c) for f in frames for c in iter_calls(f.fn.body)
                    if isinstance(c.func, cst.Attribute) and c.func.attr.value == attribute]

        gradients, applies = calls("gradient"), calls("apply_gradients")
        if len(gradients) != 1 or len(applies) != 1:
            raise Unsupported("the step takes gradients or applies them more than once", frames[0].fn)
        (gradient_frame, gradient), (apply_frame, apply) = gradients[0], applies[0]
        variables = f"{model}.trainable_variables"
        if len(gradient.args) != 2 or self._normal(gradient.args[1].value, gradient_frame) != variables:
            raise Unsupported(f"the gradients are not taken of `{variables}`", gradient)
        optimizer = self._normal(apply.func.value, apply_frame)
        applied = apply.args[0].value if len(apply.args) == 1 else None
        if not (optimizer.isidentifier() and isinstance(applied, cst.Call) and isinstance(applied.func, cst.Name)
                and applied.func.value == "zip" and len(applied.args) == 2
                and self._normal(applied.args[1].value, apply_frame) == variables):
            raise Unsupported(f"the gradients are not applied to `{variables}` by an optimizer the step is given",
                              apply)
        loss_name = gradient.args[0].value
        if gradient_frame is not forward_frame or not isinstance(loss_name, cst.Name):
            raise Unsupported("the loss is not computed where the model runs", gradient)
        loss = _assignment(gradient_frame.fn, loss_name.value)
        if loss is None:
            raise Unsupported(f"`{loss_name.value}` is assigned more than once, or not in the step", gradient)
        keras_loss, labels = self._keras_loss(loss, outputs)
        return optimizer, keras_loss, self._normal(labels, gradient_frame)

    def _keras_loss(self, value: cst.BaseExpression, outputs: str):
        """(the Keras Loss computing ``value``, the labels it compares)."""
        reduction = "none"
        if isinstance(value, cst.Call) and self._api(value) in REDUCTIONS and len(value.args) == 1:
            reduction = REDUCTIONS[self._api(value)]
            value = value.args[0].value
        if reduction == "none" or not isinstance(value, cst.Call):
            raise Unsupported("the step's loss is not a Keras loss function reduced by tf.reduce_sum or "
                              "tf.reduce_mean", value)
        path = self._api(value)
        name = path.rsplit(".", 1)[-1]
        if not path.startswith("keras.losses.") or name not in LOSSES:
            raise Unsupported(f"`{_emit.code(value.func)}` is not a Keras loss function e2k knows", value)
        cls, options = LOSSES[name]
        bound = bind_arguments(value, ("y_true", "y_pred", *options))
        prediction = bound.get("y_pred")
        if "y_true" not in bound or not (prediction is not None and isinstance(prediction.value, cst.Name)
                                         and prediction.value.value == outputs):
            raise Unsupported("the loss does not compare labels with the model's output", value)
        kept = [_emit.keyword_arg(k, bound[k].value) for k in options if k in bound]
        if reduction is not None:
            kept.append(_emit.keyword_arg("reduction", cst.SimpleString('"sum"')))
        return cst.Call(_emit.expr(f"{self._tf()}.keras.losses.{cls}"), args=_emit.call_args(kept)), bound["y_true"].value

    def _only_results(self, frame: _Frame, frames: list[_Frame]) -> None:
        """The step's other statements compute what it returns, nothing the program keeps."""
        fn = frame.fn
        steps = {f.fn.name.value for f in frames}
        for node in _walk(fn.body):
            if isinstance(node, (cst.Global, cst.Nonlocal)):
                raise Unsupported(f"`{fn.name.value}` changes the program's names", node)
            if not isinstance(node, cst.Call):
                continue
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in STEP_METHODS:
                continue
            if isinstance(func, cst.Name) and (func.value in STEP_FUNCTIONS or func.value in frame.names
                                               or func.value in steps):
                continue  # the model is a parameter; the program's functions are read too
            path = self._api(node)
            if path.startswith("keras.losses.") or path in REDUCTIONS or path == "GradientTape":
                continue
            raise Unsupported(f"`{fn.name.value}` does more than a step of training (`{_emit.code(node)}`)", node)

    def _random_generator(self) -> None:
        for statement in self.body:
            small = sole_small(statement)
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) \
                    and self._api(small.value) in RANDOM_GENERATOR:
                self.removed.append(statement)

    def _unused_definitions(self, loop: _Loop) -> None:
        """The step functions and the packing function, read only by the loop, go with it."""
        names = set(self.step_functions)
        for statement in _walk_statements(loop.statement):
            if self._is_batch_statement(statement) and isinstance(statement.body[0].value, cst.Call):
                names.add(statement.body[0].value.func.value)
        going = [loop.statement, *(self.functions[n] for n in names)]
        for name in sorted(names):
            fn = self.functions[name]
            if self._read_outside(name, going):
                raise Unsupported(f"`{name}` is used outside the training loop", fn)
            self.removed.append(fn)

    def _read_outside(self, name: str, inside: list[cst.CSTNode]) -> cst.Name | None:
        for node in _walk(self.module):
            if isinstance(node, cst.Name) and node.value == name and not self.ctx.within(node, inside):
                parent = self.ctx.parent(node)
                if isinstance(parent, cst.FunctionDef) and parent.name is node:
                    continue
                return node
        return None

    def _check_nothing_left(self, loop: _Loop) -> None:
        """No DTensor is read by what stays."""
        gone = [loop.statement, *self.removed, *(item for block in self.flattened for item in block.items)]
        watched = {self.mesh, *self.layouts, *self.layout_maps}
        for node in _walk(self.module):
            if any(node is s for s in gone):
                continue
            if isinstance(node, cst.Name) and node.value in watched or isinstance(node, (cst.Name, cst.Attribute)) \
                    and self._api(node).startswith(DTENSOR) and not isinstance(self.ctx.parent(node), cst.Attribute):
                if self.ctx.within(node, gone) or self._replaced(node):
                    continue
                if self.ctx.within(node, [s for s in self.body if _is_import(s)]):
                    continue
                if node is self.mesh_call or self.ctx.within(node, (self.mesh_call,)) \
                        or isinstance(self.ctx.parent(node), cst.AssignTarget) and node.value == self.mesh:
                    continue
                raise Unsupported(f"`{_emit.code(self.ctx.enclosing_statement(node) or node).strip()}` still "
                                  "reads DTensor, which e2k cannot convert", node)

    def _replaced(self, node) -> bool:
        current = node
        while current is not None:
            if current in self.replacements:
                # A replaced call drops the arguments that read DTensor: is the node one of them?
                new = self.replacements[current]
                return not any(node is n for n in _walk(new))
            current = self.ctx.parent(current)
        return False

    # -- writing -----------------------------------------------------------------------------
    def _emit(self, mesh_statement, devices, loop: _Loop) -> None:
        ctx, tf = self.ctx, self._tf()
        taken = {n.value for n in _walk(self.module) if isinstance(n, cst.Name)}
        strategy = _emit.unique_name("strategy", taken)
        create = _emit.statement("{s} = {tf}.distribute.MirroredStrategy({d})", s=strategy, tf=tf,
                                 d=devices.value if devices is not None else _emit.expr(""))
        if devices is None:
            create = _emit.statement("{s} = {tf}.distribute.MirroredStrategy()", s=strategy, tf=tf)
        ctx.edits.replace_statement(mesh_statement, [create.with_changes(leading_lines=mesh_statement.leading_lines)])
        removed = set(map(id, self.removed))
        for statement in self.removed:
            ctx.edits.remove_statement(statement)
        # The statements that create the model, its optimizer and metrics, under the scope.
        creating = []
        position = self.body.index(mesh_statement)
        last_creation = None
        for index, statement in enumerate(self.body):
            if id(statement) in removed or statement is loop.statement:
                continue
            if statement in self.flattened or self._creates_state(statement):
                if index < position:
                    raise Unsupported("Keras state is created before the mesh", statement)
                creating.append(index)
                last_creation = index
        if last_creation is None:
            raise Unsupported("the program creates no Keras model e2k can see", self.mesh_call)
        compile_call = self._compile()
        runs: list[list[int]] = []
        for index in creating:
            if runs:
                # One block where what comes between only makes what the next one reads
                # (`x = tf.zeros(...)` before `model(x)`).
                between = [i for i in range(runs[-1][-1] + 1, index) if id(self.body[i]) not in removed]
                read = {n.value for n in _walk(self.body[index]) if isinstance(n, cst.Name)}
                if len(between) <= 2 and all(_assigned_names(self.body[i]) & read for i in between):
                    runs[-1].extend([*between, index])
                    continue
            runs.append([index])
        scoped = {i for run in runs for i in run}
        for run in runs:
            inside: list[cst.BaseStatement] = []
            for index in run:
                statement = self.body[index]
                if statement in self.flattened:
                    inside.extend(_emit.replace_in(s, self.replacements) for s in self.flattened[statement])
                else:
                    inside.append(_emit.replace_in(statement, self.replacements))
                if index != run[0] and statement not in self.flattened:
                    # a block's statements keep their comments, not the blank lines between them
                    lines = [line for line in statement.leading_lines if line.comment is not None]
                    inside[-1] = inside[-1].with_changes(leading_lines=lines)
            if run is runs[-1]:
                inside.append(compile_call)
            first = self.body[run[0]]
            inside[0] = inside[0].with_changes(leading_lines=())
            block = _emit.statement("with {s}.scope():\n    pass", s=strategy).with_changes(
                body=cst.IndentedBlock(body=inside), leading_lines=first.leading_lines)
            ctx.edits.replace_statement(first, [block])
            for index in run[1:]:
                ctx.edits.remove_statement(self.body[index])
        for node, new in self.replacements.items():
            statement = self._top_level(node)
            if statement in self.flattened or id(statement) in removed or any(
                    statement is self.body[i] for i in scoped):
                continue
            ctx.edits.replace(node, new)
        fit = self._fit(loop)
        fit = _emit.with_comment(fit.with_changes(leading_lines=loop.statement.leading_lines), COMMENT)
        ctx.edits.replace_statement(loop.statement, [fit])
        ctx.remove_import_if_unused("tensorflow.experimental", "dtensor")
        ctx.report(self.mesh_call, "DTensor mesh -> MirroredStrategy; the custom training loop -> compile and fit",
                   self.code, kind="fixed")

    def _creates_state(self, statement) -> bool:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return False
        for node in _walk(statement):
            if isinstance(node, cst.Call):
                path = self._api(node)
                if path.startswith(("keras.layers.", "keras.models.", "keras.optimizers.", "keras.metrics.",
                                    DTENSOR_OPTIMIZERS)) or path in ("keras.Sequential", "keras.Model", "keras.Input"):
                    return True
                if isinstance(node.func, cst.Name) and (self._is_model_class(node.func.value)
                                                        or node.func.value == self.model):
                    return True  # the model built, or built by its first call
        return False

    def _is_model_class(self, name: str) -> bool:
        for statement in self.body:
            if isinstance(statement, cst.ClassDef) and statement.name.value == name:
                return any(self._api(b.value).startswith(("keras.Model", "keras.models.Model", "keras.layers.Layer"))
                           for b in statement.bases)
        return False

    def _compile(self) -> cst.BaseStatement:
        step = self.train
        args = [_emit.keyword_arg("optimizer", cst.Name(step.optimizer)), _emit.keyword_arg("loss", step.loss)]
        if step.metrics is not None:
            _, value = self.metric_dicts[step.metrics]
            metrics = _emit.expr(f"list({step.metrics}.values())") if isinstance(value, cst.Dict) \
                else cst.Name(step.metrics)
            args.append(_emit.keyword_arg("metrics", metrics))
        call = cst.Call(_emit.expr(f"{self.model}.compile"), args=_emit.call_args(args))
        return cst.SimpleStatementLine([cst.Expr(call)])

    def _fit(self, loop: _Loop) -> cst.BaseStatement:
        args = [cst.Arg(loop.train_data)]
        if loop.epochs is not None and _emit.code(loop.epochs) != "1":
            args.append(_emit.keyword_arg("epochs", loop.epochs))
        if loop.eval_data is not None:
            args.append(_emit.keyword_arg("validation_data", loop.eval_data))
        call = cst.Call(_emit.expr(f"{self.model}.fit"), args=_emit.call_args(args))
        return cst.SimpleStatementLine([cst.Expr(call)])


# -- helpers -----------------------------------------------------------------------------------
def _keras_on_mesh(module: cst.Module, ctx) -> bool:
    """Does the module use Keras 2's DTensor integration: ``tf.keras.dtensor``, or a ``mesh=``
    or ``*_layout=`` argument of a Keras class?"""
    for call in iter_calls(module):
        path = ctx.call_api_path(call) or ""
        if path.startswith("keras.dtensor.") or path.startswith("keras.") and any(
                a.keyword is not None and (a.keyword.value == "mesh" or a.keyword.value.endswith("_layout"))
                for a in call.args):
            return True
    return False


def _packs(ctx, fn: cst.FunctionDef) -> bool:
    return any((ctx.call_api_path(c) or "") == DTENSOR + "pack" for c in iter_calls(fn))


def _is_range(node) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "range"


def _range_stop(node: cst.Call) -> cst.BaseExpression:
    if len(node.args) != 1:
        raise Unsupported("the epochs are counted from another start than 0", node)
    return node.args[0].value


def _calls_in_own_body(loop: cst.For, names: set[str]) -> bool:
    for statement in loop.body.body:
        if isinstance(statement, cst.For):
            continue
        if any(isinstance(c.func, cst.Name) and c.func.value in names for c in iter_calls(statement)):
            return True
    return False


def _walk_statements(node):
    for child in _walk(node):
        if isinstance(child, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            yield child


def _is_import(statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)


def _params(fn: cst.FunctionDef) -> tuple[str, ...]:
    params = fn.params
    if not isinstance(params.star_arg, cst.MaybeSentinel) or params.kwonly_params or params.star_kwarg is not None:
        raise Unsupported(f"`{fn.name.value}` takes * or keyword-only arguments", fn)
    return tuple(p.name.value for p in (*params.posonly_params, *params.params))


def _assigned_names(statement: cst.BaseStatement) -> set[str]:
    """The names a simple assignment statement binds (none for any other statement)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1 \
            or not isinstance(statement.body[0], cst.Assign):
        return set()
    return {n.value for t in statement.body[0].targets for n in _walk(t.target) if isinstance(n, cst.Name)}


def _assigned_name(ctx, call: cst.Call) -> str:
    parent = ctx.parent(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target.value
    raise Unsupported("the model's output is not assigned to a name", call)


def _assignment(fn: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    found = [n.value for n in _walk(fn.body) if isinstance(n, cst.Assign)
             and any(isinstance(t.target, cst.Name) and t.target.value == name for t in n.targets)]
    return found[0] if len(found) == 1 else None


def _same_metrics(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """The same metric classes with the same arguments, but their names and meshes."""
    def signature(value):
        calls = [e.value for e in value.elements]
        return [(_emit.code(c.func), sorted(_emit.code(a) for a in c.args
                                            if not (a.keyword is not None and a.keyword.value in ("name", "mesh"))))
                for c in calls]

    return signature(a) == signature(b)
