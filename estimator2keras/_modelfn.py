"""Converting a model_fn into Keras: a model, its compile arguments, and its predictions.

The model_fn is specialised for each mode (``_modes``), then read backwards from what each
mode's EstimatorSpec returns:

- TRAIN's ``loss`` gives the Keras loss (a loss rule, role ``"loss"``) and the *model
  output* it compares with the labels; the statements that compute that output from the
  features are the forward pass (layers: roles ``"layer"``, ``"layer_function"``).
- TRAIN's ``train_op`` (``optimizer.minimize(loss)``) gives the optimizer (role
  ``"optimizer"``) and its learning-rate schedule (role ``"schedule"``).
- EVAL's ``eval_metric_ops`` give the compiled metrics (role ``"metric"``).
- PREDICT's ``predictions`` give ``predict_step``.

The forward pass becomes a ``tf.keras.Sequential`` when it is a single chain of layers from
``features``, else a ``tf.keras.Model`` subclass whose ``__init__`` creates the layers and
whose ``call(features, training=False)`` runs the forward statements. Anything the
converter cannot place raises ``Unsupported``: a model_fn is converted whole or not at all.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import RewriteContext, iter_calls
from estimator2keras._modes import EVAL, PREDICT, TRAIN, ModeAnalysis, ModePath
from estimator2keras._rule import Unsupported
from estimator2keras._symbols import tf2_respellings

MODEL_FN_PARAMS = ("features", "labels", "mode", "params", "config")
GLOBAL_STEP = frozenset({"train.get_global_step", "train.get_or_create_global_step"})
ESTIMATOR_SPEC = "estimator.EstimatorSpec"
TPU_SPECS = frozenset({"estimator.tpu.TPUEstimatorSpec", "contrib.tpu.TPUEstimatorSpec"})
TPU_SPEC_SIGNATURE = (
    "mode", "predictions", "loss", "train_op", "eval_metrics", "export_outputs", "scaffold_fn", "host_call",
    "training_hooks", "evaluation_hooks", "prediction_hooks",
)
SPEC_SIGNATURE = (
    "mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs",
    "training_chief_hooks", "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks",
)
REGULARIZATION_LOSS = frozenset({"losses.get_regularization_loss"})
#: EstimatorSpec hook arguments, and the mode whose calls run them.
SPEC_HOOKS = {"training_hooks": TRAIN, "training_chief_hooks": TRAIN, "evaluation_hooks": EVAL, "prediction_hooks": PREDICT}
SUMMARIES = ("summary.",)
#: Graph-era constructs that a Keras model cannot hold as they are: the model_fn is left whole.
BEYOND_CATALOGUE = frozenset({
    "get_variable", "Variable", "VariableV1", "get_local_variable", "make_template", "while_loop",
    "py_func", "placeholder", "placeholder_with_default", "assign", "assign_add", "assign_sub",
    "add_to_collection", "get_collection", "get_default_graph", "global_variables",
    "trainable_variables", "local_variables", "train.Scaffold", "Session", "map_fn", "scan",
})
UNSUPPORTED = "E2K901"
MODEL_FN = "E2K001"
#: Public attributes of tf.keras.Model in Keras 2.15 and Keras 3 (dir() of both): a layer
#: attribute must not shadow them (`self.output = Dense(1)` breaks the model).
KERAS_MODEL_ATTRIBUTES = frozenset({
    "activity_regularizer", "add_loss", "add_metric", "add_update", "add_variable",
    "add_weight", "autotune_steps_per_execution", "build", "build_from_config", "call",
    "compile", "compile_from_config", "compiled_loss", "compiled_metrics", "compute_dtype",
    "compute_loss", "compute_mask", "compute_metrics", "compute_output_shape",
    "compute_output_signature", "compute_output_spec", "count_params",
    "distribute_reduction_method", "distribute_strategy", "dtype", "dtype_policy", "dynamic",
    "evaluate", "evaluate_generator", "export", "finalize_state", "fit", "fit_generator",
    "from_config", "get_build_config", "get_compile_config", "get_config", "get_input_at",
    "get_input_mask_at", "get_input_shape_at", "get_layer", "get_metrics_result",
    "get_output_at", "get_output_mask_at", "get_output_shape_at",
    "get_quantization_layer_structure", "get_state_tree", "get_weight_paths", "get_weights",
    "inbound_nodes", "input", "input_dtype", "input_mask", "input_shape", "input_spec",
    "jit_compile", "layers", "load_own_variables", "load_weights", "loss", "losses",
    "make_predict_function", "make_test_function", "make_train_function", "metrics",
    "metrics_names", "metrics_variables", "name", "name_scope", "non_trainable_variables",
    "non_trainable_weights", "outbound_nodes", "output", "output_mask", "output_shape", "path",
    "predict", "predict_generator", "predict_on_batch", "predict_step", "quantization_mode",
    "quantize", "quantized_build", "quantized_call", "rematerialized_call", "reset_metrics",
    "reset_states", "run_eagerly", "save", "save_own_variables", "save_spec", "save_weights",
    "set_state_tree", "set_weights", "state_updates", "stateful", "stateless_call",
    "stateless_compute_loss", "steps_per_execution", "submodules", "summary",
    "supports_masking", "symbolic_call", "test_on_batch", "test_step", "to_json", "to_yaml",
    "train_on_batch", "train_step", "trainable", "trainable_variables", "trainable_weights",
    "updates", "variable_dtype", "variables", "weights", "with_name_scope",
})



# ---------------------------------------------------------------------------------------
# What expression rules return, by role
# ---------------------------------------------------------------------------------------
@dataclass
class LayerCall:
    """A layer applied in the forward pass: ``output = Layer(...)(inputs, **call_kwargs)``.

    ``call_kwargs`` are the original arguments of the application (``training=...``).
    """

    constructor: cst.BaseExpression
    inputs: cst.BaseExpression
    call_kwargs: list[cst.Arg] = field(default_factory=list)


@dataclass
class LossConversion:
    """A TF1 loss call as Keras sees it: a loss object comparing ``labels`` with ``predictions``."""

    keras_loss: cst.BaseExpression
    labels: cst.BaseExpression
    predictions: cst.BaseExpression


@dataclass
class ScheduleConversion:
    """A TF1 learning-rate decay as a Keras schedule; ``global_step`` is the step it read."""

    keras_schedule: cst.BaseExpression
    global_step: cst.BaseExpression | None


@dataclass(frozen=True)
class Derived:
    """How a metric's ``predictions`` relate to the model output: ``"output"`` itself,
    ``"argmax"`` (class ids), ``"sigmoid"`` / ``"softmax"`` (probabilities), ``"positive"``
    (``sigmoid(output) > 0.5``, that is ``output > 0``: the output is logits), ``"rounded"``
    (``round(output)`` or ``output > 0.5``: the output is a probability)."""

    kind: str


@dataclass
class MetricConversion:
    """A Keras metric, and module-level definitions it needs (a small metric class)."""

    metric: cst.BaseExpression
    definitions: list[cst.BaseStatement] = field(default_factory=list)


@dataclass
class ModelConversion:
    builder_name: str
    statements: list[cst.BaseStatement]
    #: The builder's parameters, in order (``params`` and names bound by partial/closures).
    arguments: list[str]
    #: What PREDICT's ``predictions`` are: "dict", "output" (the model output), "tensor", or None.
    predictions_kind: str | None = None


# ---------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------
@dataclass
class _Def:
    """One assignment in the model_fn: ``name = value`` (in body order)."""

    index: int
    name: str
    small: cst.BaseSmallStatement
    value: cst.BaseExpression
    line: cst.BaseStatement


@dataclass
class _LayerApp:
    call: cst.Call
    attr: str
    constructor: cst.BaseExpression
    inputs: cst.BaseExpression
    training: str | None  # None: not passed; "training"; "False"; "True"
    drop: bool = False
    #: The loop that applies this layer once per iteration (a list of layers in Keras).
    loop: cst.For | None = None
    #: Inside the loop in `call`, the name one layer of the list goes by.
    item: str | None = None


class _Converter:
    def __init__(self, fn: cst.FunctionDef, ctx: RewriteContext, tf: str, plan, extra: tuple[str, ...] = ()):
        self.fn = fn
        self.ctx = ctx
        self.tf = tf
        self.plan = plan
        self.params = [p.name.value for p in fn.params.params]
        #: Names the model reads that are neither features nor labels: the Estimator's
        #: `params`, and names bound by functools.partial or by a factory's closure. They
        #: become arguments of the builder and of the model class.
        self.arguments: tuple[str, ...] = ("params", *extra)
        self.modes: ModeAnalysis | None = None
        self.defs: list[_Def] = []
        self.def_of_small: dict[cst.BaseSmallStatement, _Def] = {}
        self.order: dict[cst.BaseSmallStatement, int] = {}
        self.attrs_taken: set[str] = set()
        self.layer_objects: dict[str, _Def] = {}
        self.layer_apps: dict[cst.Call, _LayerApp] = {}
        self.layer_attr_of_object: dict[str, str] = {}
        #: The mode whose statements name lookups see (TRAIN for the model, EVAL for
        #: metrics, PREDICT for predictions).
        self.mode = TRAIN
        self.mode_smalls: dict[str, set] = {}
        #: Module-level definitions the Keras code needs (metric classes), in order.
        self.definitions: list[cst.BaseStatement] = []

    # -- helpers ----------------------------------------------------------------------------
    def refuse(self, node: cst.CSTNode, reason: str):
        raise Unsupported(reason, node, UNSUPPORTED)

    def leftover(self, node: cst.CSTNode, message: str, code: str = MODEL_FN) -> None:
        self.ctx.leftover(node, message, code)

    def translate(self, role: str, call: cst.Call, *args):
        path = self.ctx.call_api_path(call)
        rule = self.ctx.rules.expression_rule(role, path) if path else None
        if rule is None:
            self.refuse(call, f"`{_emit.code(call.func)}` has no enabled {role.replace('_', ' ')} rule")
        try:
            result = rule().convert(call, self.ctx, self.tf, *args)
        except Unsupported as exc:
            exc.code = exc.code or rule.code
            exc.node = exc.node or call
            raise
        if self.plan is not None and not (isinstance(result, cst.CSTNode) and result.deep_equals(call)):
            self.plan.fixed(call, rule.code, f"`{_emit.code(call.func)}` -> Keras ({rule.name})")
        return result

    def role(self, node: cst.CSTNode) -> str | None:
        path = self.ctx.call_api_path(node)
        return self.ctx.rules.expression_role(path) if path else None

    def latest_def(self, name: str, before: int) -> _Def | None:
        """The last assignment of ``name`` before ``before`` that the current mode runs."""
        runs = self.mode_smalls.get(self.mode)
        found = None
        for d in self.defs:
            if d.index >= before:
                break
            if d.name == name and (runs is None or d.small in runs):
                found = d
        return found

    def names_read(self, node: cst.CSTNode) -> list[cst.Name]:
        loop_targets = set()  # names a loop or a comprehension binds for itself
        for loop in (n for n in _walk(node) if isinstance(n, (cst.For, cst.CompFor))):
            loop_targets.update(n.value for n in _walk(loop.target) if isinstance(n, cst.Name))
        reads = []
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, cst.Name) and self._is_read(current) and current.value not in loop_targets:
                reads.append(current)
            if isinstance(current, cst.Lambda):
                continue  # a lambda's own parameters are not the model_fn's names
            stack.extend(current.children)
        return reads

    def _is_read(self, name: cst.Name) -> bool:
        parent = self.ctx.parent(name)
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            return False
        if isinstance(parent, cst.Arg) and parent.keyword is name:
            return False
        if isinstance(parent, cst.AssignTarget):
            return False
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is name:
            return False
        return True

    # -- the model_fn -----------------------------------------------------------------------
    def check_signature(self) -> None:
        fn, params = self.fn, self.fn.params
        if fn.decorators:
            self.refuse(fn, "a decorated model_fn is not converted")
        if (
            isinstance(params.star_arg, (cst.Param, cst.ParamStar))
            or params.kwonly_params
            or params.star_kwarg
            or params.posonly_params
        ):
            self.refuse(fn, "a model_fn with *args, **kwargs or keyword-only parameters is not converted")
        for name in self.params:
            if name not in MODEL_FN_PARAMS and name not in self.arguments:
                self.refuse(fn, f"model_fn parameter `{name}` is not one the Estimator passes")
        if "features" not in self.params:
            self.refuse(fn, "the model_fn has no `features` parameter")

    def read(self) -> None:
        self.check_signature()
        self.modes = ModeAnalysis(self.fn, self.ctx)
        seen: dict[cst.BaseSmallStatement, cst.BaseStatement] = {}
        for path in self.modes.paths.values():
            for small, line in zip(path.statements, path.lines):
                seen.setdefault(small, line)
        self.mode_smalls = {mode: set(path.statements) for mode, path in self.modes.paths.items()}
        ordered = sorted(seen, key=lambda s: self.ctx.position(s))
        for index, small in enumerate(ordered):
            self.order[small] = index
            line = seen[small]
            if isinstance(small, cst.Expr):
                continue
            for name, value in self._assigned(small):
                d = _Def(index, name, small, value, line)
                self.defs.append(d)
                self.def_of_small.setdefault(small, d)

    def _assigned(self, small: cst.BaseSmallStatement) -> list[tuple[str, cst.BaseExpression]]:
        """(name, value) pairs a statement assigns: ``a = x``, ``a = b = None``, ``a, b = None, None``;
        a loop assigns what its body assigns (its value is the loop itself)."""
        if isinstance(small, cst.For):
            names = []
            for line in small.body.body:
                for inner in line.body:
                    if isinstance(inner, cst.Expr):
                        continue
                    for name, _ in self._assigned(inner):
                        if name not in names:
                            names.append(name)
            return [(name, small) for name in names]
        if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
            return [(small.target.value, small.value)]
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
            if all(isinstance(t, cst.Name) for t in targets):
                return [(t.value, small.value) for t in targets]
            if len(targets) == 1 and isinstance(targets[0], (cst.Tuple, cst.List)) and isinstance(small.value, (cst.Tuple, cst.List)):
                names = [e.value for e in targets[0].elements]
                values = [e.value for e in small.value.elements]
                if len(names) == len(values) and all(isinstance(n, cst.Name) for n in names) and all(_is_none(v) for v in values):
                    return [(n.value, v) for n, v in zip(names, values)]
            if len(targets) == 1 and isinstance(targets[0], (cst.Tuple, cst.List)):
                names = [e.value for e in targets[0].elements]
                if all(isinstance(n, cst.Name) for n in names):
                    # `a, b = f(...)`: each name is bound by the whole call; readers of the
                    # gradient idioms look at which position a name takes (see _unpacked).
                    return [(n.value, small.value) for n in names if n.value != "_"]
            self.refuse(small, "an assignment to several names is not converted yet")
        self.refuse(small, f"a `{type(small).__name__}` statement in the model_fn is not converted")

    def spec(self, path: ModePath) -> dict[str, cst.BaseExpression]:
        ret = path.ret
        value = ret.value if ret is not None else None
        kind = self.ctx.call_api_path(value) if isinstance(value, cst.Call) else None
        if kind != ESTIMATOR_SPEC and kind not in TPU_SPECS:
            self.refuse(ret or self.fn, f"in mode {path.mode!r} the model_fn does not return an EstimatorSpec(...)")
        from estimator2keras._units import bind_arguments

        args = {k: a.value for k, a in bind_arguments(value, TPU_SPEC_SIGNATURE if kind in TPU_SPECS else SPEC_SIGNATURE).items()}
        if kind in TPU_SPECS:
            args = self.tpu_spec(args, path)
        # Hooks and export signatures belong to the calls that run the mode: handed to the
        # unit's plan, which turns them into callbacks and the exported signature.
        takes = self.plan is not None and hasattr(self.plan, "spec_hooks")
        for key, phase in SPEC_HOOKS.items():
            if key in args:
                if not takes:
                    self.refuse(args[key], f"EstimatorSpec({key}=...) is not converted here (hooks become callbacks)")
                if phase == path.mode and all(args[key] is not seen for seen, _ in self.plan.spec_hooks[phase]):
                    self.plan.spec_hooks[phase].append((args[key], self.follower(path.mode)))
        if takes and path.mode == TRAIN:
            self.plan.spec_loss = args.get("loss")
        if "export_outputs" in args:
            if not takes:
                self.refuse(args["export_outputs"], "EstimatorSpec(export_outputs=...) is not converted here")
            if path.mode == PREDICT:
                self.plan.spec_export_outputs = (args["export_outputs"], self.follower(PREDICT))
        if takes and path.mode == PREDICT:
            self.plan.spec_predictions = args.get("predictions")
        if "scaffold" in args:
            self.refuse(args["scaffold"], "EstimatorSpec(scaffold=...) is not converted yet")
        mode = args.get("mode")
        if mode is not None and not (isinstance(mode, cst.Name) and mode.value == "mode") and self.modes.mode_value(mode) is None:
            self.refuse(mode, "EstimatorSpec(mode=...) is not the model_fn's mode")
        return args

    def tpu_spec(self, args: dict, path: ModePath) -> dict:
        """A TPUEstimatorSpec is an EstimatorSpec whose metrics come as (metric_fn, tensors)."""
        for key in ("scaffold_fn", "host_call"):
            if key in args:
                self.refuse(args[key], f"TPUEstimatorSpec({key}=...) is not converted")
        metrics = args.pop("eval_metrics", None)
        if metrics is not None and path.mode == EVAL:
            self.leftover(metrics, "TPUEstimatorSpec(eval_metrics=(metric_fn, tensors)) is not converted: "
                                   "pass its metrics to compile(metrics=...) by hand", "E2K604")
        return args

    def follower(self, mode: str):
        """Follows a name to its value in ``mode`` (its last assignment there), consuming it."""

        def follow(node: cst.BaseExpression) -> cst.BaseExpression:
            at, current = len(self.order), self.mode
            self.mode = mode
            try:
                while isinstance(node, cst.Name):
                    d = self.latest_def(node.value, at)
                    if d is None or not isinstance(d.small, cst.Assign):
                        return node
                    self.consumed.add(d.small)
                    node, at = d.value, d.index
                return node
            finally:
                self.mode = current

        return follow

    def index_of(self, node: cst.CSTNode) -> int:
        current = node
        while current is not None and current not in self.order:
            current = self.ctx.parent(current)
        if current is None:
            return len(self.order)  # in a return statement: after everything
        return self.order[current]

    def resolve(self, node: cst.BaseExpression, before: int) -> cst.BaseExpression:
        """Follow a name to the value it was last assigned (if it was a plain assignment)."""
        seen = 0
        while isinstance(node, cst.Name) and seen < 50:
            d = self.latest_def(node.value, before)
            if d is None or not isinstance(d.small, cst.Assign):
                return node
            node, before = d.value, d.index
            seen += 1
        return node

    # -- the loss and the model output -------------------------------------------------------
    def read_loss(self, loss: cst.BaseExpression, at: int):
        """The Keras loss, the model output expression, and the statements that make up the loss."""
        used: list[_Def] = []
        regularized = False
        expr = loss
        while True:
            if isinstance(expr, cst.Name):
                d = self.latest_def(expr.value, at)
                if d is None:
                    self.refuse(expr, f"`{expr.value}` is not computed in the model_fn")
                used.append(d)
                if isinstance(d.small, cst.AugAssign):
                    if not (isinstance(d.small.operator, cst.AddAssign) and self._is_regularization(d.value)):
                        self.refuse(d.small, "this change to the loss is not converted")
                    regularized = True
                    at = d.index
                    continue
                expr, at = d.value, d.index
                continue
            if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
                if self._is_regularization(expr.right):
                    regularized, expr = True, expr.left
                    continue
                if self._is_regularization(expr.left):
                    regularized, expr = True, expr.right
                    continue
            break
        if not isinstance(expr, cst.Call) or self.role(expr) != "loss":
            self.refuse(expr, "the loss is not a call e2k converts (tf.losses.* or a cross-entropy idiom)")
        conversion: LossConversion = self.translate("loss", expr)
        labels = self.resolve(conversion.labels, at)
        if not (isinstance(labels, cst.Name) and labels.value == "labels"):
            self.refuse(conversion.labels, "the loss does not compare the model_fn's `labels` as they come")
        return conversion, at, used, regularized

    def _is_regularization(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Call) and self.ctx.call_api_path(expr) in REGULARIZATION_LOSS

    # -- the forward pass --------------------------------------------------------------------
    def forward_slice(self, output: cst.BaseExpression, at: int) -> list[_Def]:
        """The assignments that compute ``output`` from the features, in order."""
        needed: dict[int, _Def] = {}
        pending = [(name, at) for name in self.names_read(output)]
        while pending:
            name, before = pending.pop()
            if name.value in ("features", "mode", "tf", self.tf) or name.value in self.arguments or name.value in self.modes.flags:
                continue  # a mode flag is not computed by the model: it becomes `training`
            if name.value == "labels":
                self.refuse(name, "the model's output depends on the labels")
            d = self.latest_def(name.value, before)
            if d is None:
                if self._is_module_name(name):
                    continue
                self.refuse(name, f"`{name.value}` is not computed in the model_fn")
            if d.index in needed:
                continue
            needed[d.index] = d
            if isinstance(d.small, cst.AugAssign):
                pending.append((cst.Name(d.name), d.index))
            pending.extend((n, d.index) for n in self.names_read(d.value))
        return [needed[i] for i in sorted(needed)]

    def _is_module_name(self, name: cst.Name) -> bool:
        """A name bound outside the model_fn (an import, a module constant, a builtin)."""
        scope = self.ctx.scope(name)
        if scope is None:
            return False
        for access in scope.accesses[name.value]:
            if access.node is name:
                return all(a.scope is not scope for a in access.referents)
        return True

    def is_update_ops(self, value: cst.BaseExpression) -> bool:
        """``tf.get_collection(tf.GraphKeys.UPDATE_OPS)``: what Keras makes unnecessary."""
        return (
            isinstance(value, cst.Call)
            and self.ctx.call_api_path(value) == "get_collection"
            and len(value.args) == 1
            and self.ctx.api_path(value.args[0].value) == "GraphKeys.UPDATE_OPS"
        )

    def check_beyond_catalogue(self, defs: list[_Def]) -> None:
        for d in defs:
            if self.is_update_ops(d.value):
                continue
            for call in iter_calls(d.value):
                path = self.ctx.call_api_path(call)
                contrib_without_rule = (path or "").startswith("contrib.") and self.ctx.rules.expression_role(path) is None
                if path in BEYOND_CATALOGUE or contrib_without_rule:
                    self.refuse(call, f"`{_emit.code(call.func)}` in the model_fn is beyond what e2k converts")

    def read_layers(self, forward: list[_Def]) -> None:
        """Find every layer applied in the forward statements and give it an attribute."""
        self.check_beyond_catalogue(forward)
        # `conv1 = tf.layers.conv2d(...)`: the layer is called `self.conv1`, as the user named
        # it, when that name holds this layer's output only (not `net = ...` three times).
        assigned = [d.name for d in forward]
        self.preferred_attr = {
            d.value: d.name
            for d in forward
            if isinstance(d.small, cst.Assign) and isinstance(d.value, cst.Call) and assigned.count(d.name) == 1
        }
        for d in forward:
            if isinstance(d.value, cst.Call) and self.role(d.value) in ("layer", "keras_layer") and not self._applied_inline(d.value):
                self.layer_objects[d.name] = d  # `layer = tf.layers.Dense(3)`, applied later
        for d in forward:
            for call in iter_calls(d.value):
                if call in self.layer_apps:
                    continue  # a loop defines several names: its layers are read once
                app = self.layer_app(call)
                if app is not None:
                    if isinstance(d.value, cst.For):
                        self._in_loop(app, d.value)
                    self.layer_apps[call] = app

    def _in_loop(self, app: _LayerApp, loop: cst.For) -> None:
        """A layer applied in a loop: one layer per iteration, kept in a list."""
        targets = {n.value for n in _walk(loop.target) if isinstance(n, cst.Name)}
        for name in self.names_read(app.inputs):
            if name.value in targets:
                self.refuse(name, "the loop variable feeds a layer's input, which e2k does not convert")
        for name in self.names_read(loop.iter):
            if name.value not in self.arguments and not self._is_module_name(name):
                self.refuse(loop.iter, "the loop runs over a value computed in the model_fn; e2k builds its layers in __init__")
        item = app.attr
        self.attrs_taken.discard(app.attr)
        app.attr = self._attr(f"{item}_layers")
        app.item = item
        app.loop = loop

    def _applied_inline(self, call: cst.Call) -> bool:
        parent = self.ctx.parent(call)
        return isinstance(parent, cst.Call) and parent.func is call

    def layer_app(self, call: cst.Call) -> _LayerApp | None:
        role = self.role(call)
        if role == "layer_function":
            layer: LayerCall = self.translate("layer_function", call)
            return self._app(call, layer, self._name_hint(call, layer.constructor))
        inner = call.func
        if isinstance(inner, cst.Call) and self.role(inner) in ("layer", "keras_layer"):
            if len(call.args) < 1 or call.args[0].keyword is not None:
                self.refuse(call, "a layer applied without its input is not converted")
            constructor = self.translate(self.role(inner), inner)
            layer = LayerCall(constructor, call.args[0].value, list(call.args[1:]))
            return self._app(call, layer, self._name_hint(inner, constructor))
        if isinstance(inner, cst.Name) and inner.value in self.layer_objects:
            d = self.layer_objects[inner.value]
            constructor = self.translate(self.role(d.value), d.value)
            attr = self.layer_attr_of_object.get(inner.value)
            if attr is None:
                attr = self._attr(self._name_hint(d.value, constructor, fallback=inner.value))
                self.layer_attr_of_object[inner.value] = attr
            layer = LayerCall(constructor, call.args[0].value if call.args else None, list(call.args[1:]))
            return self._app(call, layer, attr, attr_given=True)
        return None

    def _app(self, call, layer: LayerCall, hint: str, attr_given: bool = False) -> _LayerApp:
        training = None
        for arg in layer.call_kwargs:
            if arg.keyword is None or arg.keyword.value != "training":
                self.refuse(arg, "a layer called with arguments other than `training=` is not converted yet")
            training = self.training_value(arg.value)
        attr = hint if attr_given else self._attr(hint)
        keras_class = _emit.code(layer.constructor.func).rsplit(".", 1)[-1] if isinstance(layer.constructor, cst.Call) else ""
        app = _LayerApp(call, attr, layer.constructor, layer.inputs, training)
        if keras_class == "Dropout" and training in (None, "False"):
            # tf.layers dropout defaults to training=False: it never dropped anything.
            app.drop = True
            self.leftover(
                call,
                "this dropout never ran in the Estimator program (training= was not the mode); "
                "it is left out, as it behaved: pass `training=mode == tf.estimator.ModeKeys.TRAIN` if you meant it",
                "E2K303",
            )
        if training == "training" and self.plan is not None:
            self.plan.fixed(call, "E2K303", "training= of the mode -> the model's training flag")
        if keras_class == "BatchNormalization" and training == "training" and not self.used_update_ops_anywhere():
            self.leftover(
                call,
                "the Estimator program never ran the UPDATE_OPS, so its moving averages stayed at their "
                "initial values; Keras updates them during fit: evaluation results will differ",
                "E2K303",
            )
        return app

    def used_update_ops_anywhere(self) -> bool:
        for call in iter_calls(self.fn.body):
            if self.ctx.call_api_path(call) == "control_dependencies":
                return True
        return False

    def training_value(self, value: cst.BaseExpression) -> str:
        if isinstance(value, cst.Name) and value.value in ("True", "False"):
            return value.value
        if self.modes.is_training_test(value):
            return "training"
        self.refuse(value, "this `training=` is not a test of the mode e2k can translate")

    def _name_hint(self, call: cst.Call, constructor: cst.BaseExpression, fallback: str | None = None) -> str:
        outer = self.ctx.parent(call) if isinstance(call.func, (cst.Name, cst.Attribute)) and self.role(call) in ("layer", "keras_layer") else call
        preferred = getattr(self, "preferred_attr", {}).get(outer if isinstance(outer, cst.Call) else call)
        if preferred and preferred.isidentifier() and preferred not in self.attrs_taken:
            return preferred
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "name" and isinstance(arg.value, cst.SimpleString):
                name = arg.value.evaluated_value
                if isinstance(name, str) and name.isidentifier():
                    return name
        if isinstance(constructor, cst.Call):
            return _snake(_emit.code(constructor.func).rsplit(".", 1)[-1])
        return fallback or "layer"

    def _attr(self, hint: str) -> str:
        if hint in KERAS_MODEL_ATTRIBUTES or hint in self.arguments:
            hint = f"{hint}_layer"  # `self.output` is Keras's own; `self.output_layer` is ours
        name = hint
        n = 1
        while name in self.attrs_taken or name in KERAS_MODEL_ATTRIBUTES or name in self.arguments:
            name = f"{hint}_{n}"
            n += 1
        self.attrs_taken.add(name)
        return name

    # -- the optimizer -----------------------------------------------------------------------
    def read_train_op(self, train_op: cst.BaseExpression, loss_expr: cst.BaseExpression):
        """The optimizer expression for compile, and the assignments the builder keeps."""
        at = len(self.order)
        minimize = train_op
        if isinstance(train_op, cst.Name):
            d = self.latest_def(train_op.value, at)
            if d is None:
                self.refuse(train_op, "the train_op is not computed in the model_fn")
            self.consumed.add(d.small)
            minimize, at = d.value, d.index
        if isinstance(minimize, cst.Call) and isinstance(minimize.func, cst.Attribute) and minimize.func.attr.value == "apply_gradients":
            return self.read_apply_gradients(minimize, loss_expr, at)
        if not (isinstance(minimize, cst.Call) and isinstance(minimize.func, cst.Attribute) and minimize.func.attr.value == "minimize"):
            self.refuse(minimize, "the train_op is not `optimizer.minimize(loss)` nor a clipped `apply_gradients`")
        from estimator2keras._units import bind_arguments

        args = {k: a.value for k, a in bind_arguments(minimize, ("loss", "global_step", "var_list")).items()}
        loss = args.pop("loss", None)
        if loss is None or not (isinstance(loss, cst.Name) and isinstance(loss_expr, cst.Name) and loss.value == loss_expr.value):
            self.refuse(minimize, "`minimize` is not called on the loss the EstimatorSpec returns")
        step = args.pop("global_step", None)
        if step is not None and not self.is_global_step(step, at):
            self.refuse(step, "`minimize(global_step=...)` is not the global step")
        if args:
            self.refuse(minimize, f"`minimize({', '.join(args)}=...)` is not converted")
        receiver = minimize.func.value
        if isinstance(receiver, cst.Name):
            d = self.latest_def(receiver.value, at)
            if d is None or self.role(d.value) != "optimizer":
                self.refuse(receiver, "the optimizer is not a tf.train optimizer e2k converts")
            return cst.Name(receiver.value), self.builder_slice([d], at)
        if self.role(receiver) != "optimizer":
            self.refuse(receiver, "the optimizer is not a tf.train optimizer e2k converts")
        self.check_momentum_schedule(receiver, at)
        return self.translate("optimizer", receiver), self.builder_slice([], at, extra=[receiver])

    # -- gradient clipping ---------------------------------------------------------------------
    def read_apply_gradients(self, apply: cst.Call, loss_expr: cst.BaseExpression, at: int):
        """``optimizer.apply_gradients(<clipped compute_gradients(loss)>, global_step)``: the
        Keras optimizer with ``global_clipnorm`` / ``clipnorm`` / ``clipvalue``."""
        from estimator2keras._units import bind_arguments

        if not self.ctx.enabled("E2K103"):
            self.refuse(apply, "gradient clipping is converted by E2K103, which is disabled")
        args = {k: a.value for k, a in bind_arguments(apply, ("grads_and_vars", "global_step", "name")).items()}
        step = args.get("global_step")
        if step is not None and not self.is_global_step(step, at):
            self.refuse(step, "`apply_gradients(global_step=...)` is not the global step")
        receiver = apply.func.value
        if not isinstance(receiver, cst.Name):
            self.refuse(apply, "apply_gradients is not called on an optimizer variable")
        clip_keyword, clip_value, computed = self.read_clipping(args.get("grads_and_vars"), at)
        compute = computed.value
        if not (isinstance(compute, cst.Call) and isinstance(compute.func, cst.Attribute)
                and compute.func.attr.value == "compute_gradients"
                and isinstance(compute.func.value, cst.Name) and compute.func.value.value == receiver.value):
            self.refuse(compute, "the gradients do not come from this optimizer's compute_gradients")
        loss_args = bind_arguments(compute, ("loss", "var_list"))
        loss = loss_args.get("loss")
        if set(loss_args) != {"loss"} or not (isinstance(loss.value, cst.Name) and isinstance(loss_expr, cst.Name) and loss.value.value == loss_expr.value):
            self.refuse(compute, "compute_gradients is not called on the loss alone")
        d = self.latest_def(receiver.value, computed.index)
        if d is None or self.role(d.value) != "optimizer":
            self.refuse(receiver, "the optimizer is not a tf.train optimizer e2k converts")
        self.clipping = (clip_keyword, clip_value)
        if self.plan is not None and self.plan.unit.config_value("train_distribute") is not None:
            self.leftover(
                apply,
                "TF1 clipped each replica's gradients before summing them; Keras clips the summed gradient: on "
                "several replicas the steps differ whenever clipping triggers; check with e2k parity",
                "E2K103",
            )
        elif self.plan is not None:
            self.plan.fixed(apply, "E2K103", f"gradient clipping -> {clip_keyword}=")
        return cst.Name(receiver.value), self.builder_slice([d], at)

    def read_clipping(self, grads_and_vars, at: int):
        """(Keras keyword, threshold, the compute_gradients assignment) of a clipping idiom."""
        if grads_and_vars is None:
            self.refuse(self.fn, "apply_gradients has no gradients")
        # A: gradients, variables = zip(*opt.compute_gradients(loss))
        #    gradients, _ = tf.clip_by_global_norm(gradients, c)
        #    opt.apply_gradients(zip(gradients, variables))
        if isinstance(grads_and_vars, cst.Call) and _emit.code(grads_and_vars.func) == "zip" and len(grads_and_vars.args) == 2:
            grads, variables = (a.value for a in grads_and_vars.args)
            clipped = self.latest_def(grads.value, at) if isinstance(grads, cst.Name) else None
            if clipped is None or self.ctx.call_api_path(clipped.value) != "clip_by_global_norm" or _unpacked(clipped, grads.value) != 0:
                self.refuse(grads_and_vars, "these gradients are not clipped with tf.clip_by_global_norm")
            raw = clipped.value.args[0].value
            computed = self.latest_def(raw.value, clipped.index) if isinstance(raw, cst.Name) else None
            if computed is None or not _is_zip_star(computed.value) or _unpacked(computed, raw.value) != 0:
                self.refuse(raw, "the clipped gradients do not come from zip(*optimizer.compute_gradients(loss))")
            if not (isinstance(variables, cst.Name) and _unpacked(self.latest_def(variables.value, at), variables.value) == 1):
                self.refuse(variables, "the variables are not those compute_gradients returned")
            self.consumed.update({clipped.small, computed.small})
            inner = computed.value.args[0].value
            return "global_clipnorm", clipped.value.args[1].value, _Def(computed.index, "", computed.small, inner, computed.line)
        # B: capped = [(tf.clip_by_norm(g, c), v) for g, v in opt.compute_gradients(loss)]
        if isinstance(grads_and_vars, cst.Name):
            d = self.latest_def(grads_and_vars.value, at)
            if d is not None and isinstance(d.value, cst.ListComp):
                keyword, value, source = self._clipped_comprehension(d.value)
                self.consumed.add(d.small)
                if isinstance(source, cst.Name):
                    computed = self.latest_def(source.value, d.index)
                    if computed is None:
                        self.refuse(source, "the gradients are not computed in the model_fn")
                    self.consumed.add(computed.small)
                    return keyword, value, computed
                return keyword, value, _Def(d.index, "", d.small, source, d.line)
        self.refuse(grads_and_vars, "these gradients are not a clipping idiom e2k converts")

    def _clipped_comprehension(self, comp: cst.ListComp):
        element, loop = comp.elt, comp.for_in
        if loop.inner_for_in is not None or not isinstance(element, cst.Tuple) or len(element.elements) != 2:
            self.refuse(comp, "this gradient comprehension is not a clipping idiom e2k converts")
        for condition in loop.ifs:
            if not _emit.code(condition.test).endswith("is not None"):
                self.refuse(condition, "this gradient filter is not converted")
        names = [e.value.value for e in loop.target.elements] if isinstance(loop.target, cst.Tuple) else []
        clip, var = (e.value for e in element.elements)
        path = self.ctx.call_api_path(clip) if isinstance(clip, cst.Call) else None
        if len(names) != 2 or not (isinstance(var, cst.Name) and var.value == names[1]) or path is None:
            self.refuse(comp, "this gradient comprehension is not a clipping idiom e2k converts")
        args = [a.value for a in clip.args]
        if not (args and isinstance(args[0], cst.Name) and args[0].value == names[0]):
            self.refuse(clip, "the clip is not applied to the gradient")
        if path == "clip_by_norm" and len(args) == 2:
            return "clipnorm", args[1], loop.iter
        if path == "clip_by_value" and len(args) == 3 and _emit.code(args[1]) == "-" + _emit.code(args[2]).lstrip("+"):
            return "clipvalue", args[2], loop.iter
        self.refuse(clip, "only clip_by_norm(g, c) and clip_by_value(g, -c, c) are converted")

    def is_global_step(self, node: cst.BaseExpression, at: int) -> bool:
        if isinstance(node, cst.Call):
            return self.ctx.call_api_path(node) in GLOBAL_STEP
        if isinstance(node, cst.Name):
            d = self.latest_def(node.value, at)
            if d is not None and isinstance(d.value, cst.Call) and self.ctx.call_api_path(d.value) in GLOBAL_STEP:
                self.consumed.add(d.small)
                return True
        return False

    def builder_slice(self, roots: list[_Def], at: int, extra: list[cst.CSTNode] = ()) -> list[_Def]:
        """The assignments the builder needs (the optimizer, its schedule, their inputs)."""
        needed: dict[int, _Def] = {}
        pending = list(roots)
        for node in extra:
            pending.extend(self._defs_read(node, at))
        while pending:
            d = pending.pop()
            if d.index in needed:
                continue
            needed[d.index] = d
            for name in self.names_read(d.value):
                if name.value in ("features", "labels"):
                    self.refuse(name, "the optimizer depends on the features or labels")
            pending.extend(self._defs_read(d.value, d.index))
        return [needed[i] for i in sorted(needed)]

    def _defs_read(self, node: cst.CSTNode, before: int) -> list[_Def]:
        found = []
        for name in self.names_read(node):
            d = self.latest_def(name.value, before)
            if d is not None:
                if isinstance(d.value, cst.Call) and self.ctx.call_api_path(d.value) in GLOBAL_STEP:
                    self.consumed.add(d.small)
                    continue
                found.append(d)
        return found

    # -- what comes after the model: metrics and predictions ----------------------------------
    def post_slice(self, roots: list[cst.BaseExpression], at: int) -> list[_Def]:
        """Assignments computing ``roots`` from the model output (and features), without layers."""
        needed: dict[int, _Def] = {}
        pending = [(name, at) for root in roots for name in self.names_read(root)]
        while pending:
            name, before = pending.pop()
            if name.value in ("features", "tf", self.tf) or name.value in self.arguments or name.value == self.output_name:
                continue
            if name.value == "labels":
                self.refuse(name, "the predictions depend on the labels")
            d = self.latest_def(name.value, before)
            if d is None:
                if self._is_module_name(name):
                    continue
                self.refuse(name, f"`{name.value}` is not computed in the model_fn")
            if d.small in self.forward_smalls:
                self.refuse(name, f"`{name.value}` is inside the model; e2k predicts from the model's output only")
            if d.index in needed:
                continue
            for call in iter_calls(d.value):
                if self.layer_app(call) is not None:
                    self.refuse(call, "a layer used only for predictions or metrics is not converted")
            needed[d.index] = d
            pending.extend((n, d.index) for n in self.names_read(d.value))
        return [needed[i] for i in sorted(needed)]

    def derive(self, expr: cst.BaseExpression, at: int) -> Derived | None:
        """How ``expr`` (a metric's predictions) is computed from the model output."""
        for _ in range(20):
            if isinstance(expr, cst.Name):
                if expr.value == self.output_name:
                    return Derived("output")
                d = self.latest_def(expr.value, at)
                if d is None or not isinstance(d.small, cst.Assign):
                    return None
                expr, at = d.value, d.index
                continue
            if isinstance(expr, cst.Call):
                path = self.ctx.call_api_path(expr) or ""
                first = expr.args[0].value if expr.args else None
                if path in ("cast", "dtypes.cast", "to_int32", "to_int64", "to_float") and first is not None:
                    expr = first
                    continue
                inner = self.derive(first, at) if first is not None else None
                if path in ("argmax", "math.argmax") and inner == Derived("output") and self._axis_is_last(expr):
                    return Derived("argmax")
                if path in ("sigmoid", "nn.sigmoid", "math.sigmoid") and inner == Derived("output"):
                    return Derived("sigmoid")
                if path in ("nn.softmax", "math.softmax") and inner == Derived("output"):
                    return Derived("softmax")
                if path in ("round", "math.round") and inner == Derived("sigmoid"):
                    return Derived("positive")
                if path in ("round", "math.round") and inner == Derived("output"):
                    return Derived("rounded")
                if path in ("greater", "math.greater") and len(expr.args) == 2:
                    return self._threshold(inner, expr.args[1].value)
                return None
            if isinstance(expr, cst.Subscript):
                element = self._dict_element(expr, at)
                if element is None:
                    return None
                expr, at = element
                continue
            if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1 and isinstance(expr.comparisons[0].operator, cst.GreaterThan):
                return self._threshold(self.derive(expr.left, at), expr.comparisons[0].comparator)
            return None
        return None

    def _dict_element(self, subscript: cst.Subscript, at: int):
        """``predictions["classes"]`` where ``predictions = {"classes": ...}``: that value."""
        if not (isinstance(subscript.value, cst.Name) and len(subscript.slice) == 1):
            return None
        index = subscript.slice[0].slice
        key = index.value if isinstance(index, cst.Index) else None
        if not isinstance(key, cst.SimpleString):
            return None
        d = self.latest_def(subscript.value.value, at)
        if d is None or not isinstance(d.value, cst.Dict):
            return None
        for element in d.value.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
                if element.key.evaluated_value == key.evaluated_value:
                    return element.value, d.index
        return None

    def _threshold(self, inner: Derived | None, value: cst.BaseExpression) -> Derived | None:
        number = float(value.value) if isinstance(value, (cst.Integer, cst.Float)) else None
        if inner == Derived("output") and number == 0.0 or inner == Derived("sigmoid") and number == 0.5:
            return Derived("positive")
        if inner == Derived("output") and number == 0.5:
            return Derived("rounded")  # the model outputs probabilities
        return None

    def _axis_is_last(self, call: cst.Call) -> bool:
        axis = None
        for i, arg in enumerate(call.args):
            if (arg.keyword is None and i == 1) or (arg.keyword is not None and arg.keyword.value in ("axis", "dimension")):
                axis = arg.value
        if axis is None:
            return False
        text = _emit.code(axis)
        return text in ("1", "-1")

    def read_metrics(self, ops: cst.BaseExpression | None) -> list[cst.BaseExpression]:
        if ops is None:
            return []
        at = len(self.order)
        if isinstance(ops, cst.Name):
            d = self.latest_def(ops.value, at)
            if d is None:
                self.refuse(ops, "eval_metric_ops is not a dict built in the model_fn")
            self.consumed.add(d.small)
            ops, at = d.value, d.index
        if not isinstance(ops, cst.Dict):
            self.refuse(ops, "eval_metric_ops is not a dict e2k can read")
        metrics = []
        for element in ops.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                self.refuse(element, "eval_metric_ops keys must be strings")
            key = element.key.evaluated_value
            value, value_at = element.value, at
            if isinstance(value, cst.Name):
                d = self.latest_def(value.value, at)
                if d is not None:
                    self.consumed.add(d.small)
                    value, value_at = d.value, d.index
            if not (isinstance(value, cst.Call) and self.role(value) == "metric"):
                self.leftover(element, f"eval metric {key!r} is not a tf.metrics call e2k converts; add it to compile(metrics=...) by hand", "E2K202")
                continue
            try:
                metric = self.translate("metric", value, key, lambda e, _at=value_at: self.derive(e, _at))
                if isinstance(metric, MetricConversion):
                    for definition in metric.definitions:
                        if not any(definition.deep_equals(known) for known in self.definitions):
                            self.definitions.append(definition)
                    metric = metric.metric
                metrics.append(metric)
            except Unsupported as exc:
                self.leftover(element, f"eval metric {key!r} is not converted: {exc.reason}", exc.code or "E2K202")
        return metrics

    def read_predictions(self, predictions: cst.BaseExpression | None):
        """(post-model assignments, predictions expression) for predict_step, or None."""
        if predictions is None:
            return None
        at = len(self.order)
        if isinstance(predictions, cst.Name) and predictions.value != self.output_name:
            d = self.latest_def(predictions.value, at)
            if d is not None and isinstance(d.value, cst.Dict):
                self.consumed.add(d.small)
                predictions, at = d.value, d.index
        if isinstance(predictions, cst.Name) and predictions.value == self.output_name:
            return None  # Keras predict returns the model output, as the Estimator yielded it
        return self.post_slice([predictions], at), predictions

    # -- everything accounted for ------------------------------------------------------------
    def check_rest(self, paths) -> None:
        """Every statement the Estimator ran must be in the Keras program, or reported."""
        for path in paths:
            for small in path.statements:
                if small in self.consumed or small in self.forward_smalls or small in self.kept:
                    continue
                if isinstance(small, cst.Expr):
                    call = small.value
                    what = self.ctx.call_api_path(call) if isinstance(call, cst.Call) else None
                    if what and what.startswith(SUMMARIES):
                        self.summary_dropped(small)
                    else:
                        self.leftover(small, "this statement ran when the Estimator built its graph; it is not carried over")
                    self.consumed.add(small)
                    continue
                d = self.def_of_small.get(small)
                if d is not None and self.is_update_ops(d.value):
                    self.consumed.add(small)
                    continue
                if d is not None and d.name in self.modes.flags:
                    self.consumed.add(small)
                    continue
                if d is not None:
                    for call in iter_calls(d.value):
                        if self.role(call) in ("layer", "layer_function", "keras_layer"):
                            self.refuse(small, "a layer that does not lead to the loss is not converted")
                    self.consumed.add(small)  # a value nothing converted reads: no longer computed

    def summary_dropped(self, small: cst.BaseSmallStatement) -> None:
        """A summary only reaches a human through the Estimator's model_dir: without one it
        went to a temporary directory, and leaving it out loses nothing one could see."""
        unit = self.plan.unit if self.plan is not None else None
        has_dir = unit is not None and (unit.arg_value("model_dir") is not None or unit.config_value("model_dir") is not None)
        if has_dir:
            self.leftover(small, "summaries in the model_fn are not carried over; Keras logs metrics with the TensorBoard callback", "E2K404")
        elif self.plan is not None:
            self.plan.fixed(small, "E2K404", "summary left out: without a model_dir it went to a temporary directory")

    # -- writing Keras ------------------------------------------------------------------------
    def convert(self, name: str, class_name: str) -> ModelConversion:
        self.consumed: set[cst.BaseSmallStatement] = set()
        self.kept: set[cst.BaseSmallStatement] = set()
        self.read()
        paths = [self.modes.paths[m] for m in (TRAIN, EVAL, PREDICT)]
        train, evaluation, predict = (self.spec(p) for p in paths)
        if "loss" not in train or "train_op" not in train:
            self.refuse(self.fn, "in TRAIN mode the EstimatorSpec has no loss or no train_op")
        loss, loss_at, loss_defs, regularized = self.read_loss(train["loss"], len(self.order))
        for d in loss_defs:
            self.consumed.add(d.small)
        eval_loss = evaluation.get("loss")
        if eval_loss is not None and _emit.code(eval_loss) != _emit.code(train["loss"]):
            self.refuse(eval_loss, "EVAL returns another loss than TRAIN, which compile() cannot express")

        output = loss.predictions
        self.output_name = output.value if isinstance(output, cst.Name) else None
        forward = self.forward_slice(output, loss_at)
        self.forward_smalls = {d.small for d in forward}
        self.check_beyond_catalogue([d for d in self.defs if d.small not in self.forward_smalls])
        self.read_layers(forward)
        optimizer, builder_defs = self.read_train_op(train["train_op"], train["loss"])
        self.kept.update(d.small for d in builder_defs)
        self.mode = EVAL
        metrics = self.read_metrics(evaluation.get("eval_metric_ops"))
        self.mode = PREDICT
        prediction = self.read_predictions(predict.get("predictions"))
        self.mode = TRAIN
        if prediction is not None:
            self.kept.update(d.small for d in prediction[0])
        self.check_rest(paths)
        self.check_regularizers(regularized)

        sequential = self.sequential(forward, output) if prediction is None else None
        statements: list[cst.BaseStatement] = []
        if sequential is not None:
            model = _emit.statement("model = {tf}.keras.Sequential({layers})", tf=self.tf, layers=sequential)
            if self.fit(model, 1) is not model:
                layers = _emit.vertical_list([e.value for e in sequential.elements])
                model = _emit.statement("model = {tf}.keras.Sequential({layers})", tf=self.tf, layers=layers)
        else:
            klass, class_arguments = self.model_class(class_name, forward, output, prediction)
            statements.append(klass)
            model = _emit.statement(f"model = {class_name}({', '.join(class_arguments)})")
        builder, arguments = self.builder(name, model, builder_defs, optimizer, loss, metrics)
        statements.append(builder)
        statements[:0] = self.definitions
        statements = self.carry_comments(statements, forward if sequential is not None else [])
        kind = None
        if predict.get("predictions") is not None:
            kind = "output" if prediction is None else ("dict" if isinstance(prediction[1], cst.Dict) else "tensor")
        return ModelConversion(name, statements, arguments, kind)

    def carry_comments(self, statements: list[cst.BaseStatement], folded: list[_Def]) -> list[cst.BaseStatement]:
        """Comments of the model_fn that no emitted statement carries move along: those of
        forward statements folded into a Sequential above the model, the rest above compile."""
        emitted = {line.comment.value for stmt in statements for line in _walk(stmt) if isinstance(line, cst.EmptyLine) and line.comment}
        folded_lines = {id(d.line) for d in folded}
        to_model, to_compile = [], []
        for node in _walk_in_order(self.fn.body):
            for line in getattr(node, "leading_lines", ()):
                if line.comment is not None and line.comment.value not in emitted:
                    (to_model if id(node) in folded_lines else to_compile).append(line.with_changes(indent=True))
                    emitted.add(line.comment.value)
        if not (to_model or to_compile):
            return statements
        builder = statements[-1]
        body = list(builder.body.body)
        for i, stmt in enumerate(body):
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
            target = _assign_target(small)
            if target == "model" and to_model:
                body[i] = stmt.with_changes(leading_lines=[*stmt.leading_lines, *to_model])
            if _is_compile(small) and to_compile:
                body[i] = stmt.with_changes(leading_lines=[*stmt.leading_lines, *to_compile])
        return [*statements[:-1], builder.with_changes(body=builder.body.with_changes(body=body))]

    def check_regularizers(self, regularized: bool) -> None:
        if regularized:
            return
        for app in self.layer_apps.values():
            if isinstance(app.constructor, cst.Call):
                for arg in app.constructor.args:
                    if arg.keyword and arg.keyword.value.endswith("_regularizer") and _emit.code(arg.value) != "None":
                        self.refuse(arg, "this layer's regularizer was not part of the Estimator's loss; Keras would add it")

    def sequential(self, forward: list[_Def], output: cst.BaseExpression) -> cst.List | None:
        previous = "features"
        layers = []
        for d in forward:
            if not isinstance(d.small, cst.Assign) or d.name in self.layer_objects:
                return None
            app = self.layer_apps.get(d.value) if isinstance(d.value, cst.Call) else None
            if app is None or not (isinstance(app.inputs, cst.Name) and app.inputs.value == previous):
                return None
            if app.training not in (None, "training"):
                return None
            if not app.drop:
                layers.append(cst.Element(self.constructor(app)))
            previous = d.name
        if not (isinstance(output, cst.Name) and output.value == previous) or not layers:
            return None
        if self._call_arguments(forward):
            return None
        return cst.List(_comma_separated(layers))

    def _call_arguments(self, defs: list[_Def], extra: list[cst.CSTNode] = ()) -> list[str]:
        """The argument names (``params``...) the forward pass itself reads (not a layer's
        constructor, nor a layer loop's iterable: both are in __init__)."""
        in_init = {id(n) for app in self.layer_apps.values() if app.loop is not None for n in _walk(app.loop.iter)}
        read = {
            n.value
            for d in defs
            for n in self.names_read(d.value)
            if not self._inside_constructor(n) and id(n) not in in_init
        }
        read |= {n.value for node in extra for n in self.names_read(node)}
        return [name for name in self.arguments if name in read]

    def _inside_constructor(self, node: cst.CSTNode) -> bool:
        current = self.ctx.parent(node)
        while current is not None:
            if isinstance(current, cst.Call):
                for app in self.layer_apps.values():
                    if current is app.call and not self._is_input(node, app):
                        return True
            current = self.ctx.parent(current)
        return False

    def _is_input(self, node: cst.CSTNode, app: _LayerApp) -> bool:
        current = node
        while current is not None and current is not app.call:
            if current is app.inputs:
                return True
            current = self.ctx.parent(current)
        return False

    def constructor(self, app: _LayerApp) -> cst.BaseExpression:
        """The layer's Keras constructor: TF2 names, and TF1 initializers/regularizers in its
        arguments translated by their rules."""
        replacements = dict(tf2_respellings(self.ctx, app.call, self.tf))
        if isinstance(app.constructor, cst.Call):
            for arg in app.constructor.args:
                value = arg.value
                role = self.role(value) if isinstance(value, cst.Call) else None
                if role in ("initializer", "regularizer"):
                    replacements[value] = self.translate(role, value)
                if arg.keyword is not None and arg.keyword.value.endswith("_regularizer") and not _is_none(value):
                    self.regularizer_under_strategy(arg)
        return _emit.replace_in(app.constructor, replacements)

    def regularizer_under_strategy(self, arg: cst.Arg) -> None:
        """TF1 builds a layer's penalty once, in replica 0: under MirroredStrategy only that
        replica's gradient carries it, so on N replicas it acted N times weaker than written
        (verified: the other replicas' gradient of the penalty is None). Keras applies it as
        written; say so where the Estimator trained under a strategy."""
        unit = self.plan.unit if self.plan is not None else None
        if unit is None or unit.config_value("train_distribute") is None or getattr(self, "_told_regularizer", False):
            return
        self._told_regularizer = True
        self.leftover(
            arg.value,  # an original node: the reported position is the user's
            "under MirroredStrategy the Estimator applied layer penalties' gradients on one replica only "
            "(N times weaker on N replicas, while its reported loss held them in full); Keras applies them as "
            "written: compare with e2k parity and divide the penalty by the replica count if you need the old training",
            "E2K305",
        )

    def rewrite(self, node: cst.CSTNode) -> cst.CSTNode:
        """A forward or post-model node, as it reads inside the Keras model's methods."""
        respelled = dict(tf2_respellings(self.ctx, node, self.tf))
        return node.visit(_ForwardRewriter(self, respelled))

    def model_class(self, class_name: str, forward: list[_Def], output, prediction):
        self._output_node = output
        init_defs, forward = self.split_init(forward)
        self._init_defs = init_defs
        body: list[cst.BaseStatement] = []
        emitted_loops = set()
        for d in forward:
            if d.name in self.layer_objects and d.value is self.layer_objects[d.name].value:
                continue  # the layer object itself lives in __init__
            if isinstance(d.small, cst.For):
                if id(d.small) not in emitted_loops:
                    emitted_loops.add(id(d.small))
                    body.append(self.rewrite_loop(d.small))
                continue
            new = self.rewrite(d.small)
            body.append(_line(new, d.line, d.small))
        body.append(_emit.statement("return {o}", o=self.rewrite(output)))
        post = prediction[0] if prediction is not None else []
        call_arguments = self._call_arguments([*forward, *post], [output] + ([prediction[1]] if prediction else []))
        init_reads = self._init_arguments()
        class_arguments = [name for name in self.arguments if name in init_reads or name in call_arguments]
        self.call_arguments = call_arguments
        init = [_emit.statement("super().__init__()")]
        for name in call_arguments:
            init.append(_emit.statement(f"self.{name} = {name}"))
        for d in init_defs:
            init.append(_line(self.rewrite_init(d.small), d.line, d.small))
        created = set()
        for app in self.layer_apps.values():
            if app.drop or app.attr in created:
                continue
            created.add(app.attr)
            constructor = self.constructor(app)
            if app.loop is not None:
                constructor = _emit.expr(
                    "[{ctor} for {target} in {iterable}]",
                    ctor=constructor,
                    target=app.loop.target,
                    iterable=self.rewrite_init(app.loop.iter),
                )
            line = _emit.statement("self.{attr} = {ctor}", attr=app.attr, ctor=constructor)
            init.append(self.fit(line, 2))
        methods = [
            _function("__init__", ", ".join(["self", *class_arguments]), init),
            _function("call", "self, features, training=False", body, blank_before=True),
        ]
        if prediction is not None:
            post, value = prediction
            output_name = self.output_name or "outputs"
            lines = [
                _emit.statement("features, _, _ = {tf}.keras.utils.unpack_x_y_sample_weight(data)", tf=self.tf),
                _emit.statement(f"{output_name} = self(features, training=False)"),
            ]
            lines += [_line(self.rewrite(d.small), d.line, d.small, comments=False) for d in post]
            lines.append(_emit.statement("return {v}", v=self.rewrite(value)))
            methods.append(_function("predict_step", "self, data", lines, blank_before=True))
        klass = _emit.statement(f"class {class_name}({self.tf}.keras.Model):\n    pass")
        return klass.with_changes(body=cst.IndentedBlock(body=methods)), class_arguments

    def rewrite_loop(self, loop: cst.For) -> cst.For:
        """``for units in params[...]: net = dense(net, units)`` -> ``for dense in self.dense_layers: net = dense(net)``."""
        apps = [app for app in self.layer_apps.values() if app.loop is loop and not app.drop]
        if not apps:
            self.refuse(loop, "this loop applies no layer; e2k converts loops that build layers")
        targets = {n.value for n in _walk(loop.target) if isinstance(n, cst.Name)}
        inside = {id(n) for app in apps for n in _walk(app.call)} - {id(n) for app in apps for n in _walk(app.inputs)}
        for node in _walk(loop.body):
            if isinstance(node, cst.Name) and node.value in targets and id(node) not in inside and self._is_read(node):
                self.refuse(node, "the loop variable is used outside the layers' arguments, which e2k does not convert")
        body = self.rewrite(loop.body)
        if len(apps) == 1:
            header = _emit.expr("{item}", item=apps[0].item)
            iterable = _emit.expr(f"self.{apps[0].attr}")
        else:
            header = cst.Tuple([cst.Element(cst.Name(app.item)) for app in apps], lpar=[], rpar=[])
            iterable = _emit.expr("zip({attrs})", attrs=", ".join(f"self.{app.attr}" for app in apps))
        return loop.with_changes(target=header, iter=iterable, body=body)

    def split_init(self, forward: list[_Def]) -> tuple[list[_Def], list[_Def]]:
        """Values the layers' constructors read (``l2 = tf.keras.regularizers.l2(...)`` then
        ``kernel_regularizer=l2``) belong in __init__; the rest of the forward pass in call."""
        ctor_reads = [n for app in self.layer_apps.values() if not app.drop for n in self.names_read(app.constructor)]
        init: dict[int, _Def] = {}
        pending = [(n, len(self.order)) for n in ctor_reads]
        while pending:
            name, before = pending.pop()
            d = self.latest_def(name.value, before)
            if d is None or d.index in init or name.value in self.layer_objects:
                continue
            init[d.index] = d
            pending.extend((n, d.index) for n in self.names_read(d.value))
        for d in init.values():
            if isinstance(d.small, cst.For):
                self.refuse(d.small, "a loop computes a value the layers' constructors read")
            for n in self.names_read(d.value):
                if n.value in ("features", "labels", "mode"):
                    self.refuse(n, "a layer's constructor reads a value computed from the inputs")
        call_reads = {
            n.value for d in forward if d.index not in init for n in self.names_read(d.value) if not self._inside_constructor(n)
        }
        call_reads |= {n.value for n in self.names_read(self._output_node)} if self._output_node is not None else set()
        call = [d for d in forward if d.index not in init or d.name in call_reads]
        return [init[i] for i in sorted(init)], call

    def _init_arguments(self) -> set[str]:
        """The argument names the layers' constructors (and the values they read) need."""
        nodes = [
            part
            for app in self.layer_apps.values()
            if not app.drop
            for part in ((app.constructor, app.loop.iter) if app.loop is not None else (app.constructor,))
        ] + [d.value for d in getattr(self, "_init_defs", [])]
        return {n.value for node in nodes for n in _walk(node) if isinstance(n, cst.Name) and n.value in self.arguments}

    def rewrite_init(self, node: cst.CSTNode) -> cst.CSTNode:
        """Code for __init__ (a loop's iterable): TF2 names; `params` is the argument there."""
        return _emit.replace_in(node, dict(tf2_respellings(self.ctx, node, self.tf)))

    def builder(self, name, model, builder_defs, optimizer, loss: LossConversion, metrics):
        body: list[cst.BaseStatement] = []
        doc = _docstring(self.fn)
        if doc is not None:
            body.append(doc)
        body.append(model)
        for d in builder_defs:
            new = self.translate_builder_def(d)
            body.append(self.fit(_line(new, d.line, d.small), 1))
        compile_args = [_emit.keyword_arg("optimizer", optimizer), _emit.keyword_arg("loss", loss.keras_loss)]
        if metrics:
            listed = cst.List(_comma_separated([cst.Element(m) for m in metrics]))
            if len(metrics) > 1 and len(_emit.code(listed)) > 60:
                listed = _emit.vertical_list(metrics, indent="        ")
            compile_args.append(_emit.keyword_arg("metrics", listed))
        compile_call = cst.Call(cst.Attribute(cst.Name("model"), cst.Name("compile")), args=_emit.call_args(compile_args))
        body.append(self.fit(_emit.statement("{c}", c=compile_call), 1))
        body.append(_emit.statement("return model"))
        read = {n.value for stmt in body for n in _walk(stmt) if isinstance(n, cst.Name)}
        arguments = [a for a in self.arguments if a in read]
        fn = _emit.statement(f"def {name}({', '.join(arguments)}):\n    pass")
        return fn.with_changes(body=cst.IndentedBlock(body=body)), arguments

    def fit(self, statement: cst.SimpleStatementLine, depth: int) -> cst.SimpleStatementLine:
        """Wrap a long emitted line, counting the depth of the model_fn itself."""
        base = 0
        node = self.ctx.parent(self.fn)
        while node is not None:
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                base += 1
            node = self.ctx.parent(node)
        return _emit.fit_line(statement, depth + base, self.ctx.module.default_indent)

    def check_momentum_schedule(self, optimizer: cst.Call, at: int) -> None:
        """TF1 Momentum multiplies the whole accumulator by the current rate, Keras SGD only
        each new gradient: with a rate that changes, the steps after a change differ."""
        if self.ctx.call_api_path(optimizer) != "train.MomentumOptimizer" or not optimizer.args:
            return
        rate = optimizer.args[0].value
        for arg in optimizer.args:
            if arg.keyword is not None and arg.keyword.value == "learning_rate":
                rate = arg.value
        resolved = self.resolve(rate, at)
        if isinstance(resolved, cst.Call) and self.role(resolved) == "schedule":
            self.leftover(
                optimizer,
                "with a decaying learning rate, TF1 Momentum scales the whole accumulated step by the current "
                "rate while Keras SGD scales each new gradient: the steps after each change differ; check with e2k parity",
                "E2K101",
            )

    def translate_builder_def(self, d: _Def) -> cst.BaseSmallStatement:
        value = d.value
        role = self.role(value) if isinstance(value, cst.Call) else None
        if role == "optimizer":
            self.check_momentum_schedule(value, d.index)
            optimizer = self.translate("optimizer", value)
            if getattr(self, "clipping", None) is not None:
                keyword, threshold = self.clipping
                optimizer = optimizer.with_changes(args=_emit.call_args([*optimizer.args, _emit.keyword_arg(keyword, threshold)]))
            return d.small.with_changes(value=optimizer)
        if role == "schedule":
            schedule: ScheduleConversion = self.translate("schedule", value)
            if schedule.global_step is not None and not self.is_global_step(schedule.global_step, d.index):
                self.refuse(schedule.global_step, "the learning-rate decay does not read the global step")
            return d.small.with_changes(value=schedule.keras_schedule)
        respelled = dict(tf2_respellings(self.ctx, d.small, self.tf))
        return _emit.replace_in(d.small, respelled)


class _ForwardRewriter(cst.CSTTransformer):
    """Layer applications -> ``self.<layer>(...)``, ``params`` -> ``self.params``, mode tests
    -> ``training``, TF1 names -> TF2 names."""

    def __init__(self, conv: _Converter, respelled: dict):
        super().__init__()
        self.conv = conv
        self.respelled = respelled
        self.inputs: dict[cst.Call, cst.BaseExpression] = {}

    def on_visit(self, node) -> bool:
        app = self.conv.layer_apps.get(node) if isinstance(node, cst.Call) else None
        if app is None:
            return True
        # Only the layer's input is code of the forward pass; its other arguments were
        # consumed by the layer's conversion (constructor, training flag).
        self.inputs[node] = app.inputs.visit(self)
        return False

    def on_leave(self, original, updated):
        conv = self.conv
        if isinstance(original, cst.Call) and original in self.inputs:
            app = conv.layer_apps[original]
            inputs = self.inputs.pop(original)
            if app.drop:
                return inputs
            args = [cst.Arg(inputs)]
            if app.training is not None:
                args.append(_emit.keyword_arg("training", cst.Name(app.training)))
            layer = app.item if app.loop is not None else f"self.{app.attr}"
            return cst.Call(_emit.expr(layer), args=_emit.call_args(args))
        if isinstance(original, cst.Name) and conv._is_read(original):
            if original.value in getattr(conv, "call_arguments", ()):
                return _emit.expr(f"self.{original.value}")
            if original.value == "mode":
                conv.refuse(original, "the forward pass reads `mode` in a way e2k does not translate")
            if original.value in conv.modes.flags:
                if conv.modes.flags[original.value] != frozenset({TRAIN}):
                    conv.refuse(original, f"`{original.value}` tests the mode in a way Keras's `training` cannot express")
                return cst.Name("training")
        if original in self.respelled:
            return self.respelled[original]
        if isinstance(original, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)) and conv.modes.modes_where_true(original) is not None:
            if not conv.modes.is_training_test(original):
                conv.refuse(original, "this test of the mode has no Keras equivalent inside the model")
            return cst.Name("training")
        return updated


def _walk_in_order(node: cst.CSTNode):
    """Nodes in source order (depth first)."""
    yield node
    for child in node.children:
        yield from _walk_in_order(child)


def _assign_target(small) -> str | None:
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target.value
    return None


def _is_compile(small) -> bool:
    value = getattr(small, "value", None)
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "compile"


def _unpacked(d: "_Def | None", name: str) -> int | None:
    """The position ``name`` takes in ``a, b = ...`` (None: not a tuple assignment)."""
    if d is None or not isinstance(d.small, cst.Assign):
        return None
    target = d.small.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    for i, element in enumerate(target.elements):
        if isinstance(element.value, cst.Name) and element.value.value == name:
            return i
    return None


def _is_zip_star(node: cst.BaseExpression) -> bool:
    """``zip(*x)``."""
    return (
        isinstance(node, cst.Call) and _emit.code(node.func) == "zip" and len(node.args) == 1 and node.args[0].star == "*"
    )


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _line(small: cst.BaseSmallStatement, line: cst.BaseStatement, original_small, comments: bool = True) -> cst.SimpleStatementLine:
    first = isinstance(line, cst.SimpleStatementLine) and line.body and line.body[0] is original_small
    leading = list(line.leading_lines) if (first and comments) else []
    trailing = line.trailing_whitespace if isinstance(line, cst.SimpleStatementLine) else cst.TrailingWhitespace()
    small = small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    return cst.SimpleStatementLine(body=[small], leading_lines=leading, trailing_whitespace=trailing)


def _function(name: str, params: str, body: list[cst.BaseStatement], blank_before: bool = False) -> cst.FunctionDef:
    fn = _emit.statement(f"def {name}({params}):\n    pass")
    fn = fn.with_changes(body=cst.IndentedBlock(body=body))
    return fn.with_changes(leading_lines=[_emit.blank_line()]) if blank_before else fn


def _docstring(fn: cst.FunctionDef) -> cst.BaseStatement | None:
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
    if body and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1:
        small = body[0].body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            return body[0]
    return None


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _comma_separated(elements):
    elements = list(elements)
    return [
        e.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(elements) - 1 else cst.MaybeSentinel.DEFAULT
        )
        for i, e in enumerate(elements)
    ]


def class_name_for(model_fn_name: str) -> str:
    """``_model_fn`` -> ``Model``; ``cnn_model_fn`` -> ``CnnModel``.

    No leading underscore: Keras 3 names a layer after its class in snake case, and
    ``_Model`` would give ``__model``, which TensorFlow rejects as a name scope in ``fit``.
    """
    lead = re.match(r"_*", model_fn_name).group(0)
    core = re.sub(r"_?(fn|func|function)$", "", model_fn_name[len(lead):]) or "model"
    core = re.sub(r"^(make|create|get|build)_", "", core) or "model"  # a factory's name
    if not core.endswith("model"):
        core = f"{core}_model"
    return "".join(part[:1].upper() + part[1:] for part in core.split("_") if part)


def convert_model_fn(
    fn: cst.FunctionDef, ctx: RewriteContext, tf: str, taken: set[str], plan=None, extra: tuple[str, ...] = (), stem: str | None = None
) -> ModelConversion:
    """Convert ``fn`` (a model_fn definition) into Keras definitions, or raise Unsupported.

    ``extra``: names besides ``params`` that the model_fn reads and the caller binds
    (``functools.partial`` keywords, a factory's parameters). ``stem``: the name the
    emitted builder and class are derived from (default: the model_fn's).
    """
    stem = stem or fn.name.value
    taken = taken - {fn.name.value, stem}
    name = _emit.unique_name(_emit.builder_name(stem), taken)
    class_name = _emit.unique_name(class_name_for(stem), taken | {name})
    return _Converter(fn, ctx, tf, plan, extra).convert(name, class_name)


def _snake(name: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower().replace("2_d", "2d").replace("1_d", "1d").replace("3_d", "3d")


__all__ = [
    "Derived", "LayerCall", "LossConversion", "MetricConversion", "ModelConversion", "ScheduleConversion",
    "convert_model_fn",
]
