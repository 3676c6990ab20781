"""Reading a model_fn, first part: what the reading produces, and the model itself.

Holds the constants the reading checks against, the dataclasses that expression rules
return by role (``LayerCall``, ``LossConversion``, ...) and that the converter produces
(``ModelConversion``, ``_Def``, ``_LayerApp``), and ``_ModelReader``: the methods of
``_modelfn._Converter`` that read the model_fn's assignments and EstimatorSpecs, its loss
and model output, and the forward pass with its layers. What the model_fn gives compile()
and predict_step is read in ``_modelfn_read_compile``; the Keras code is written in
``_modelfn_emit``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._hook_values import GLOBAL_STEP_CALLS
from estimator2keras._modelfn_blocks import MAKERS, BlockReading
from estimator2keras._modes import EVAL, MODES, PREDICT, TRAIN, ModeAnalysis, ModePath
from estimator2keras._rule import Unsupported
from estimator2keras._nodes import walk as _walk

MODEL_FN_PARAMS = ("features", "labels", "mode", "params", "config")
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
#: Graph-era constructs that a Keras model cannot hold as they are: the model_fn is left whole.
BEYOND_CATALOGUE = frozenset({
    "get_variable", "Variable", "VariableV1", "get_local_variable", "make_template", "while_loop",
    "py_func", "placeholder", "placeholder_with_default", "assign", "assign_add", "assign_sub",
    "add_to_collection", "get_collection", "get_default_graph", "global_variables",
    "trainable_variables", "local_variables", "train.Scaffold", "Session", "map_fn", "scan",
})
#: Dropouts a helper's argument may switch off: path -> (the rate's keyword, its position, the
#: keyword of the training flag). contrib's dropout ran unless `is_training=False`; tf.layers'
#: only with `training=True`.
DROPOUTS = {
    "contrib.layers.dropout": ("keep_prob", 1, "is_training"),
    "layers.dropout": ("rate", 1, "training"),
    "compat.v1.layers.dropout": ("rate", 1, "training"),
}
#: TF1 APIs whose calls make variables (layers, RNN cells and the RNN functions that run
#: them): one without a rule is refused, never left in the Keras model's `call`.
VARIABLE_MAKERS = (
    "layers.", "compat.v1.layers.", "nn.rnn_cell.", "compat.v1.nn.rnn_cell.", "nn.dynamic_rnn",
    "compat.v1.nn.dynamic_rnn", "nn.static_rnn", "compat.v1.nn.static_rnn", "nn.bidirectional_dynamic_rnn",
    "compat.v1.nn.bidirectional_dynamic_rnn", "nn.raw_rnn", "compat.v1.nn.raw_rnn",
)
#: The dense input of feature columns, which TensorFlow 2 no longer has (``read_input_layer``).
INPUT_LAYERS = frozenset({"feature_column.input_layer", "compat.v1.feature_column.input_layer"})
INPUT_LAYER_SIGNATURE = ("features", "feature_columns", "weight_collections", "trainable", "cols_to_vars",
                         "cols_to_output_tensors")
#: ``tf.feature_column.input_layer`` of numeric columns, as TF1 computed it (feature_column.py:
#: each column's feature through its normalizer_fn, cast to float32, reshaped to one row of
#: its shape's size per example, concatenated sorted by the columns' names).
NUMERIC_INPUT_LAYER = '''
def {name}(features, feature_columns):
    """tf.feature_column.input_layer of numeric columns (TensorFlow 2 has none): each
    column's feature, through its normalizer_fn, as float32 rows of the column's shape,
    concatenated in the order of the columns' names, as TF1 did."""
    values = []
    for column in sorted(feature_columns, key=lambda column: column.name):
        value = features[column.key]
        if column.normalizer_fn is not None:
            value = column.normalizer_fn(value)
        size = 1
        for dim in column.shape:
            size *= dim
        values.append({tf}.reshape({tf}.cast(value, {tf}.float32), [-1, size]))
    return {tf}.concat(values, axis=1)
'''
@dataclass
class ColumnInput:
    """A model_fn's input_layer of categorical columns (``read_column_input``): the call, its
    columns and their reader, and the keys the model_fn reads the features by besides."""

    call: cst.Call
    columns: list
    reader: object
    keys: list[str]


#: Names programs give whatever tensor flows through (``net = tf.layers.conv2d(net, ...)``):
#: a layer is named after its kind rather than after such an output (``self.conv2d``, not
#: ``self.net``).
TENSOR_NAMES = frozenset({"net", "x", "y", "h", "inputs", "outputs", "tensor", "layer", "result"})
#: Scopes a helper wraps its layers in: names only, which Keras layers do not need.
SCOPES = frozenset({"variable_scope", "name_scope", "compat.v1.variable_scope", "compat.v1.name_scope"})
#: Calls that make a whole Keras model, which a model_fn may then call on its inputs.
KERAS_MODELS = frozenset({"keras.Sequential", "keras.models.Sequential", "keras.Model", "keras.models.Model"})
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
    #: The modes that assign this value (None: all the modes that run the statement): a
    #: conditional on the mode (``loss = ... if mode != PREDICT else None``) is a def per branch.
    modes: frozenset | None = None


def _string_item(target: cst.BaseExpression) -> tuple[str, str] | None:
    """``metrics["auc"]`` -> ("metrics", "auc")."""
    if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and len(target.slice) == 1 \
            and isinstance(target.slice[0].slice, cst.Index) and isinstance(target.slice[0].slice.value, cst.SimpleString):
        return target.value.value, target.slice[0].slice.value.evaluated_value
    return None


#: Methods that change a list, dict or set in place.
MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault"})


def _mutated_name(small: cst.Expr) -> str | None:
    """The local ``small`` changes in place (``layers.append(...)``, ``columns.extend(...)``)."""
    call = small.value
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name) \
            and call.func.attr.value in MUTATORS:
        return call.func.value.value
    return None


def _unpacked(d: _Def | None, name: str) -> int | None:
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


#: Calls that run the UPDATE_OPS: under control dependencies, and the contrib train_op makers,
#: which run the collection unless given `update_ops=` (an explicit list is refused there).
RUN_UPDATE_OPS = frozenset({"control_dependencies", "contrib.training.create_train_op", "contrib.layers.optimize_loss"})


def _has_tf2_home(path: str) -> bool:
    """Is the contrib API path one the symbol table spells with a TF2 name (the same object)?"""
    from estimator2keras._symbols import table

    spelling = table().get(path)
    return spelling is not None and not spelling.target.startswith("compat.")


def _with_keyword(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``keyword=value``: the argument's value replaced, or the argument added."""
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            args[i] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    return call.with_changes(args=_emit.call_args([*args, _emit.keyword_arg(keyword, value)]))


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
    #: Made by a helper called in a loop: one tuple of the helper's layers per iteration.
    helper_loop: bool = False
    #: A weight (``tf.get_variable``): ``constructor`` is its ``self.add_weight(...)``, made in
    #: ``__init__``; the forward pass reads it (no input, no application).
    weight: bool = False
    #: A line of comment above its line in ``__init__`` (what Keras initialises otherwise).
    note: str | None = None


@dataclass
class _Helper:
    """A function of the program that the forward pass calls and that makes layers
    (``logits = conv_net(features, num_classes, dropout, reuse=False, is_training=True)``): it
    becomes a method of the Keras model, its layers made once in ``__init__``."""

    fn: cst.FunctionDef
    method: str
    #: Its statements, `with tf.variable_scope(...)` blocks unwrapped.
    body: list[cst.BaseStatement]
    #: Parameters that layers take as `training=` (the method's `training` flag).
    training: set[str] = field(default_factory=set)
    #: The parameter given to `tf.variable_scope(..., reuse=...)`, if any.
    reuse: str | None = None
    #: Parameters the forward statements read: the method's parameters.
    forward: list[str] = field(default_factory=list)
    #: (call, {parameter: value}) for each call of the helper in the forward pass.
    calls: list = field(default_factory=list)
    #: Its layers test the mode (`training=mode == ModeKeys.TRAIN`, its `mode` parameter or the
    #: model_fn's): the method takes Keras's `training` flag.
    tests_mode: bool = False
    #: Defined inside the model_fn (it reads the model_fn's names as a closure).
    nested: bool = False
    #: Each call made layers of its own (no `reuse`): its one `return` expression is written at
    #: each call, with that call's layers (``LayerApp``s keyed by (call, layer call)).
    inline: bool = False
    #: Layer objects it makes and applies later (``bn = BatchNormalization(...)`` then
    #: ``bn(layer, training=training)``): name -> the assignment, which goes to __init__.
    objects: dict = field(default_factory=dict)
    #: Parameters that only switch its dropout off outside TRAIN (``keep_prob``: the rate's
    #: value in TRAIN's call, ``1.0`` in EVAL's and PREDICT's): parameter -> the value that
    #: switched it off. Its dropout layers take Keras's `training` flag instead.
    switches: dict = field(default_factory=dict)
    #: The model_fn's loop that calls it (``for units in params['hidden']: net = block(net,
    #: units)``): its layers are made per iteration, a list of tuples in ``__init__``
    #: (``loop_attr``), and the method takes one iteration's layers as arguments.
    loop: cst.For | None = None
    loop_attr: str | None = None


class _ModelReader(BlockReading):
    """Reading the model_fn: its assignments and specs, the loss, the forward pass."""

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
                mutated = _mutated_name(small)
                if mutated is not None:
                    # `layers.append(tf.keras.layers.Dense(3))`: a new value of `layers`, which
                    # reads the one before (names_read sees the receiver).
                    d = _Def(index, mutated, small, small.value, line)
                    self.defs.append(d)
                    self.def_of_small.setdefault(small, d)
                continue
            for name, value in self._assigned(small):
                for modes, chosen in self.by_mode(value):
                    d = _Def(index, name, small, chosen, line, modes)
                    self.defs.append(d)
                    self.def_of_small.setdefault(small, d)

    def by_mode(self, value: cst.BaseExpression, modes: frozenset = frozenset(MODES)) -> list:
        """``value`` as each mode computes it: [(modes, the value)] where ``value`` is a
        conditional on the mode (``A if mode == ModeKeys.TRAIN else B``), TRAIN's first; else
        [(None, value)]."""
        if not isinstance(value, cst.IfExp):
            return [(None, value)] if modes == frozenset(MODES) else [(modes, value)]
        true = self.modes.modes_where_true(value.test)
        if true is None:
            return [(None, value)] if modes == frozenset(MODES) else [(modes, value)]
        found = []
        for part, where in ((value.body, modes & true), (value.orelse, modes - true)):
            if where:
                found.extend((m, v) for m, v in self.by_mode(part, where) if m is None or m)
        order = {mode: i for i, mode in enumerate(MODES)}
        return sorted(found, key=lambda item: min(order[m] for m in (item[0] or MODES)))

    def _assigned(self, small: cst.BaseSmallStatement) -> list[tuple[str, cst.BaseExpression]]:
        """(name, value) pairs a statement assigns: ``a = x``, ``a = b = None``, ``a, b = None, None``;
        a loop assigns what its body assigns (its value is the loop itself)."""
        if isinstance(small, cst.For):
            names = []
            for inner in (n for n in _walk(small.body) if isinstance(n, (cst.Assign, cst.AugAssign))):
                for name, _ in self._assigned(inner):
                    if name not in names:
                        names.append(name)
            return [(name, small) for name in names]
        if isinstance(small, cst.If):
            # An `if` kept whole assigns what its branches assign; its value is the `if` itself.
            names = []
            for node in _walk(small):
                if isinstance(node, (cst.Assign, cst.AugAssign, cst.For)) and node is not small:
                    if isinstance(node, cst.For):
                        continue  # its body's assignments are walked too
                    for name, _ in self._assigned(node):
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
            item = _string_item(targets[0]) if len(targets) == 1 else None
            if item is not None and item[0] not in ("features", "labels", "params"):
                # `eval_metric_ops["auc"] = ...`: an item of a dict the EstimatorSpec may be given
                # (read with the dict); any other use of it is refused in check_rest.
                self.item_sets.setdefault(item[0], []).append((self.order[small], item[1], small.value, small))
                return []
            if len(targets) == 1 and isinstance(targets[0], (cst.Attribute, cst.Subscript)):
                # `optimizer.iterations = global_step`, `features["x"] = ...`: a change to an
                # object, which the Keras model would not make where the model_fn did.
                self.refuse(small, f"an assignment to `{_emit.code(targets[0])}` (an attribute or an item of an "
                                   "object) in the model_fn is not converted")
            self.refuse(small, "an assignment to several names is not converted yet")
        self.refuse(small, f"a `{type(small).__name__}` statement in the model_fn is not converted")

    def spec(self, path: ModePath) -> dict[str, cst.BaseExpression]:
        ret = path.ret
        value = ret.value if ret is not None else None
        if isinstance(value, cst.Name):  # `spec = tf.estimator.EstimatorSpec(...)`, `return spec`
            mode, self.mode = self.mode, path.mode
            try:
                d = self.latest_def(value.value, len(self.order))
            finally:
                self.mode = mode
            if d is not None and isinstance(d.small, cst.Assign) and isinstance(d.value, cst.Call):
                self.consumed.add(d.small)
                value = d.value
        kind = self.ctx.call_api_path(value) if isinstance(value, cst.Call) else None
        if kind != ESTIMATOR_SPEC and kind not in TPU_SPECS:
            self.refuse(ret or self.fn, f"in mode {path.mode!r} the model_fn does not return an EstimatorSpec(...)")
        from estimator2keras._units import bind_arguments

        args = {k: a.value for k, a in bind_arguments(value, TPU_SPEC_SIGNATURE if kind in TPU_SPECS else SPEC_SIGNATURE).items()}
        # `loss=loss if mode != ModeKeys.PREDICT else None`: what this mode gives
        args = {k: next((v for modes, v in self.by_mode(arg) if modes is None or path.mode in modes), arg)
                for k, arg in args.items()}
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
            # `evalmetrics = (metric_fn, [class_int, labels])` in the branch EVAL runs.
            ops = self.metric_fn_ops(self.follower(EVAL)(metrics))
            if ops is None:
                self.leftover(metrics, "TPUEstimatorSpec(eval_metrics=(metric_fn, tensors)) is not converted: "
                                       "pass its metrics to compile(metrics=...) by hand", "E2K604")
            else:
                args["eval_metric_ops"] = ops
        return args

    def metric_fn_ops(self, metrics: cst.BaseExpression) -> cst.Dict | None:
        """``eval_metrics=(metric_fn, [labels, logits])``: the dict ``metric_fn`` returns, read
        as eval_metric_ops with its parameters standing for the tensors given (``metric_env``:
        parameter -> the model_fn's name, local name -> its value). None when e2k cannot."""
        from estimator2keras._units import _single_return, resolve

        if not (isinstance(metrics, (cst.Tuple, cst.List)) and len(metrics.elements) == 2):
            return None
        fn_node, tensors = (e.value for e in metrics.elements)
        fn = resolve(self.ctx, fn_node) if isinstance(fn_node, cst.Name) else None
        if not isinstance(fn, cst.FunctionDef) or fn.decorators:
            return None
        params = fn.params
        if params.star_arg != cst.MaybeSentinel.DEFAULT or params.kwonly_params or params.star_kwarg or params.posonly_params:
            return None
        names = [p.name.value for p in params.params]
        env: dict[str, cst.BaseExpression] = {}
        if isinstance(tensors, (cst.List, cst.Tuple)):
            if len(tensors.elements) != len(names):
                return None
            given = [(name, e.value) for name, e in zip(names, tensors.elements)]
        elif isinstance(tensors, cst.Dict):
            given = []
            for element in tensors.elements:
                if not (isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)):
                    return None
                given.append((element.key.evaluated_value, element.value))
            if sorted(n for n, _ in given) != sorted(names):
                return None
        else:
            return None
        for name, tensor in given:
            if not isinstance(tensor, cst.Name):
                return None  # the model_fn's own names, as its metrics would read them
            if (name == "labels") != (tensor.value == "labels"):
                return None  # labels stand for labels, and only they
            env[name] = tensor
        body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
        for statement in body[:-1]:
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                continue  # a docstring
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)):
                return None
            target = small.targets[0].target.value
            if target in env:
                return None  # a name rebound: e2k reads each once
            env[target] = small.value
        returned = _single_return(fn)
        if not isinstance(returned, cst.Dict):
            return None
        self.metric_env = env
        if self.plan is not None and not self.ctx.within(fn, (self.fn,)):
            from estimator2keras._units import accesses_of

            reads = accesses_of(self.ctx, fn.name)
            if reads and all(self.ctx.within(r, (self.fn,)) for r in reads):
                self.plan.remove_statement(fn)  # only the converted spec used it: it goes with it
        return returned

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

    # -- the forward pass --------------------------------------------------------------------
    def forward_slice(self, output: cst.BaseExpression, at: int) -> list[_Def]:
        """The assignments that compute ``output`` from the features, in order."""
        needed: dict[int, _Def] = {}
        pending = [(name, at) for name in self.names_read(output)]
        while pending:
            name, before = pending.pop()
            if name.value in self.input_names and self.latest_def(name.value, before) is not None:
                pass  # the input rebound (`x = dense(x)` in a function making layers): followed
            elif name.value in ("mode", "tf", self.tf, *self.input_names) or name.value in self.arguments \
                    or name.value in self.modes.flags:
                continue  # a mode flag is not computed by the model: it becomes `training`
            if self._calls_nested_function(name):
                continue  # a helper defined in the model_fn: read with its calls (read_helpers)
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
            if isinstance(d.small, cst.If):
                # What its branches read before they assign it, and the value before it where a
                # path through it may leave that as it was.
                exposed, always = self.branch_reads(d.small)
                pending.extend((n, d.index) for n in exposed)
                pending.extend((cst.Name(other.name), d.index) for other in self.defs
                               if other.small is d.small and other.name not in always)
                continue
            if isinstance(d.small, cst.AugAssign):
                pending.append((cst.Name(d.name), d.index))  # it reads the value before it
            pending.extend((n, d.index) for n in self.names_read(d.value))
        return [needed[i] for i in sorted(needed)]

    def _calls_nested_function(self, name: cst.Name) -> bool:
        """``name`` is called, and names a function defined in the model_fn."""
        parent = self.ctx.parent(name)
        if not (isinstance(parent, cst.Call) and parent.func is name):
            return False
        return any(isinstance(stmt, cst.FunctionDef) and stmt.name.value == name.value for stmt in self.fn.body.body)

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
        if not getattr(self, "_outside_forward", False):
            self.read_rnns(defs)  # what they consume is converted
        for d in defs:
            if self.is_update_ops(d.value):
                continue
            for call in iter_calls(d.value):
                if call in self.helper_calls or call in self.rnn_consumed:
                    continue  # read with its helper, or with the RNN function that runs it
                if self.label_table is not None and call is self.label_table.call:
                    continue  # numbers the labels: the model's preprocess does (`_label_table`)
                path = self.ctx.call_api_path(call) or ""
                if self.is_rnn_path(call):
                    self.refuse(call, f"`{_emit.code(call.func)}` is converted where tf.nn.dynamic_rnn or static_rnn "
                                      "runs it (`outputs, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)`)")
                if path in INPUT_LAYERS:
                    self.read_input_layer(call)
                    continue
                if path.startswith(VARIABLE_MAKERS) and self.role(call) is None:
                    # A TF1 layer (or RNN cell) e2k has no rule for: left in `call` it would make
                    # new variables at every step, or not run at all in TensorFlow 2.
                    self.refuse(call, f"`{_emit.code(call.func)}` makes variables and e2k has no rule for it")
                if path.startswith(("feature_column.", "compat.v1.feature_column.")) and self.role(call) is None \
                        and not path.rsplit(".", 1)[-1].endswith("_column"):
                    self.refuse(call, f"`{_emit.code(call.func)}` in the model_fn is not converted (TensorFlow 2 has no "
                                      "such function; e2k converts its `input_layer`)")
                if self.makes_keras_model(call):
                    self.check_model_factory(call)
                    continue
                self.check_helper(call)
                path = self.ctx.call_api_path(call)
                # A contrib name TensorFlow moved into TF2 (contrib.framework.nest -> nest) is respelled.
                contrib_without_rule = (path or "").startswith("contrib.") and self.ctx.rules.expression_role(path) is None \
                    and not _has_tf2_home(path) and path not in GLOBAL_STEP_CALLS  # the step: read as TF1's
                if (path in BEYOND_CATALOGUE and self.role(call) is None) or contrib_without_rule:
                    self.refuse(call, f"`{_emit.code(call.func)}` in the model_fn is beyond what e2k converts")

    # -- feature columns' dense input -------------------------------------------------------
    def read_input_layer(self, call: cst.Call) -> None:
        """``net = tf.feature_column.input_layer(features, params['feature_columns'])``: TF2 has
        no input_layer (left in the Keras model, it fails at the first step). Of numeric columns
        it is a concatenation of the features, written by an emitted function; of categorical
        ones too, it is the model's preprocessing and its ``input_layer`` method
        (``read_column_input``). The columns must be ones e2k reads (``_feature_columns``)."""
        from estimator2keras._units import bind_arguments

        what = f"`{_emit.code(call.func)}(...)`"
        if getattr(self, "_outside_forward", False):
            self.refuse(call, f"{what} computes a value the TRAIN loss does not read (a second forward pass), which e2k "
                              "does not convert")
        if self.root is not self or self.plan is None:
            self.refuse(call, f"{what} in a function making layers is not converted")
        bound = bind_arguments(call, INPUT_LAYER_SIGNATURE)
        if set(bound) - {"features", "feature_columns"} or "feature_columns" not in bound:
            self.refuse(call, f"{what} with arguments other than the features and the columns is not converted")
        features = bound.get("features")
        if features is None or not (isinstance(features.value, cst.Name) and features.value.value in self.input_names):
            self.refuse(call, f"{what} of other features than the model_fn's `features` is not converted")
        ctx, expr = self.input_columns(bound["feature_columns"].value)
        reader = columns = None
        kinds = _column_kinds(ctx, expr)
        if kinds is None:
            # Built by a function of the program, in a loop or a comprehension over constants:
            # the feature columns' own reader, as the canned Estimators read theirs.
            from estimator2keras._feature_columns import ColumnReader

            reader = self.column_reader(ctx)
            try:
                columns = reader.read_list(expr)
            except Unsupported as exc:
                self.refuse(exc.node or expr, "e2k cannot read the columns of this input_layer (a list of feature "
                                              f"columns, names bound once, appends and extends of such a list): {exc.reason}")
            kinds = {"numeric_column" if c.kind == "numeric" else f"{c.kind} column" for c in columns}
        if kinds != {"numeric_column"}:
            self.read_column_input(call, ctx, expr, features.value.value, reader, columns)
            return
        tf = self.tf
        name = self.plan.add_helper("numeric_input_layer",
                                    lambda given: _emit.statements(NUMERIC_INPUT_LAYER, name=given, tf=tf))
        self.input_layers[call] = lambda updated: updated.with_changes(func=cst.Name(name))
        self.plan.fixed(call, "E2K302", f"{what} of numeric columns -> `{name}(...)`, which computes the same "
                                        "(TensorFlow 2 has no input_layer)")

    def input_columns(self, expr: cst.BaseExpression):
        """The expression of the columns an input_layer reads, and the context it is read in:
        ``params['feature_columns']`` read where the Estimator is given its params (a dict),
        or an expression of the program."""
        from estimator2keras._units import params_entry

        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name) and expr.value.value == "params" \
                and "params" in self.params and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) \
                and isinstance(expr.slice[0].slice.value, cst.SimpleString):
            entry = params_entry(self.plan.ctx, self.plan.unit, expr)
            if entry is None:
                key = expr.slice[0].slice.value.evaluated_value
                self.refuse(expr, f"e2k cannot read the Estimator's params[{key!r}], the columns of this input_layer")
            return self.plan.ctx, entry
        return self.ctx, expr

    def read_column_input(self, call: cst.Call, ctx, expr: cst.BaseExpression, features: str, reader=None,
                          columns: list | None = None) -> None:
        """An input_layer of categorical columns (indicator and embedding columns of vocabulary,
        hash-bucket, identity, bucketized and crossed columns) and numeric ones, as a canned DNN
        reads them (``_column_writer``): the lookups in the model's ``preprocess``, mapped over
        the datasets so that no string reaches the replicas, and the one-hot and embedded ids
        concatenated in its ``input_layer`` method. The model_fn's other reads of the features
        take them by key, passed on by ``preprocess`` as they came."""
        from estimator2keras._feature_columns import ColumnReader, all_columns

        what = f"`{_emit.code(call.func)}(...)`"
        if self.column_input is not None and self.column_input.call is not call:
            self.refuse(call, f"a second {what} in the model_fn is not converted (e2k converts one of categorical "
                              "columns)")
        if ctx is not self.ctx:
            self.refuse(call, f"{what} of categorical columns made in another module is not converted")
        if columns is None:
            reader = self.column_reader(ctx)
            try:
                columns = reader.read_list(expr)
            except Unsupported as exc:
                self.refuse(exc.node or expr, f"the columns of this input_layer: {exc.reason}")
        for column in columns:
            if column.kind not in ("numeric", "bucketized", "indicator", "embedding"):
                self.refuse(column.call, f"a {column.kind} column cannot feed {what} (wrap it in indicator_column or "
                                         "embedding_column); TensorFlow 1 refused it too")
            if column.family is not None and len(columns) > 1:
                self.refuse(column.call, f"{what} of columns whose keys are known only at run time, with other "
                                         "columns: TF1 orders its inputs by name, which e2k cannot tell here")
        for column in all_columns(columns):
            if column.given or column.runtime_dtype:
                self.refuse(column.call, f"{what}: this column's arguments are computed where the Estimator is built "
                                         "(or its vocabulary's type is known at run time), which e2k does not pass to "
                                         "a model_fn's Keras model")
        keys = self.features_by_key(call, features)
        self.column_input = ColumnInput(call, columns, reader, keys)
        self.input_layers[call] = lambda updated: _emit.expr("self.input_layer({f})", f=cst.Name(features))
        self.plan.dataset_map = f"{self.plan.model_var}.preprocess"
        self.plan.fixed(call, "E2K302", f"{what} of categorical columns -> the model's `preprocess` (in tf.data) and "
                                        "`input_layer` (TensorFlow 2 has no input_layer)")

    def column_reader(self, ctx):
        """The reader of an input_layer's columns: names of the Estimator's site are evaluated
        there; the model_fn's parameters and its factory's (``embedding_size``) the model takes."""
        from estimator2keras._feature_columns import ColumnReader

        reader = ColumnReader(ctx)
        reader.site_scope = ctx.scope(self.plan.unit.call)
        node = self.fn
        while node is not None:
            if isinstance(node, cst.FunctionDef):
                reader.arguments.update({p.name.value: p for p in node.params.params if p.name.value in self.arguments
                                         and p.name.value not in reader.arguments})
            node = self.ctx.parent(node)
        return reader

    def without_column_building(self, forward: list[_Def], output: cst.BaseExpression) -> list[_Def]:
        """The forward pass less what only built the columns of the input_layer of categorical
        columns (``transformed_columns = [indicator_column(...), ...]``): ``preprocess`` and
        ``input_layer`` compute them now."""
        if self.column_input is None:
            return forward
        skipped = {id(n) for arg in self.column_input.call.args[1:] for n in _walk(arg)}
        by_small = {}
        for d in forward:
            by_small.setdefault(id(d.small), []).append(d)
        needed: set[int] = set()
        pending = [(n, len(self.order)) for n in self.names_read(output)]
        while pending:
            name, before = pending.pop()
            d = self.latest_def(name.value, before)
            if d is None or id(d.small) not in by_small or id(d.small) in needed:
                continue
            needed.add(id(d.small))
            for other in by_small[id(d.small)]:
                pending.extend((n, other.index) for n in self.names_read(other.small) if id(n) not in skipped)
        return [d for d in forward if id(d.small) in needed]

    def features_by_key(self, call: cst.Call, features: str) -> list[str]:
        """The keys the model_fn reads ``features`` by besides the input_layer
        (``features["weight"]``): ``preprocess`` passes them on. Any other read of them (a
        helper handed the dict, a key computed) is refused: the model gets the features
        preprocessed."""
        keys: list[str] = []
        # The features of every input_layer (a second one is refused as such, where it is read).
        arguments = {id(c.args[0].value) for c in iter_calls(self.fn.body)
                     if c.args and self.ctx.call_api_path(c) in INPUT_LAYERS}
        for name in _walk(self.fn.body):
            if not (isinstance(name, cst.Name) and name.value == features) or id(name) in arguments:
                continue
            parent = self.ctx.parent(name)
            if isinstance(parent, (cst.Attribute, cst.Arg)) and name is not getattr(parent, "value", None):
                continue  # `x.features`, `f(features=...)`: no read of the dict
            key = None
            if isinstance(parent, cst.Subscript) and parent.value is name and len(parent.slice) == 1 \
                    and isinstance(parent.slice[0].slice, cst.Index) \
                    and isinstance(parent.slice[0].slice.value, cst.SimpleString):
                key = parent.slice[0].slice.value.evaluated_value
            if key is None:
                self.refuse(name, f"`{features}` is read here besides `input_layer` of categorical columns; e2k "
                                  f"converts reads of it by a key (`{features}[\"weight\"]`), which the model's "
                                  "preprocessing passes on")
            if key not in keys:
                keys.append(key)
        return keys

    def exported(self) -> bool:
        """Is the model exported (``export_saved_model``, or an exporter made in the file)?"""
        return bool(self.plan.uses("method", "export_saved_model", "export_savedmodel")) or self.exports_in_file()

    def exports_in_file(self) -> bool:
        """An exporter (``FinalExporter``, ``LatestExporter``, ``BestExporter``) made in the file."""
        return any(isinstance(node, cst.Call) and (self.plan.ctx.call_api_path(node) or "").endswith(
            ("estimator.FinalExporter", "estimator.LatestExporter", "estimator.BestExporter"))
            for node in _walk(self.plan.ctx.module))

    # -- Keras models the model_fn makes and calls -------------------------------------------
    def makes_keras_model(self, call: cst.Call, depth: int = 0) -> bool:
        """``tf.keras.Sequential([...])``, a ``tf.keras.Model`` subclass, or a function of the
        program that returns one (``create_model(params["data_format"])``): a whole Keras model,
        made once, that the converted model holds as it is."""
        if depth > 4:
            return False
        if self.ctx.call_api_path(call) in KERAS_MODELS:
            return True
        target = self._definition(call.func)
        if isinstance(target, cst.ClassDef):
            return any(self.ctx.api_path(base.value) in KERAS_MODELS for base in target.bases)
        if isinstance(target, cst.FunctionDef):
            returns = [n for n in _walk_own(target.body) if isinstance(n, cst.Return)]
            return bool(returns) and all(self._returns_keras_model(r.value, target, depth) for r in returns)
        return False

    def _returns_keras_model(self, value, fn: cst.FunctionDef, depth: int) -> bool:
        if isinstance(value, cst.Name):  # `model = tf.keras.Sequential(...)` ... `return model`
            values = [
                small.value
                for small in _walk_own(fn.body)
                if isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == value.value for t in small.targets)
            ]
            if len(values) != 1:
                return False
            value = values[0]
        return isinstance(value, cst.Call) and self.makes_keras_model(value, depth + 1)

    def _definition(self, func: cst.BaseExpression) -> cst.FunctionDef | cst.ClassDef | None:
        """The function or class of the program that ``func`` names, if one definition reaches it."""
        from estimator2keras._units import _single_assignment

        if not isinstance(func, cst.Name):
            return None
        assignment = _single_assignment(self.ctx, func)
        node = getattr(assignment, "node", None)
        return node if isinstance(node, (cst.FunctionDef, cst.ClassDef)) else None

    def check_model_factory(self, call: cst.Call) -> None:
        """The Keras model is made with Keras layers only: it is kept as the program wrote it."""
        target = self._definition(call.func)
        within = target if target is not None else call
        for inner in iter_calls(within):
            path = self.ctx.call_api_path(inner)
            if path is None:
                continue
            if self.role(inner) in ("layer", "layer_function") or path in BEYOND_CATALOGUE:
                name = f"`{target.name.value}(...)`" if target is not None else "the Keras model"
                self.refuse(call, f"{name} makes the Keras model with `{_emit.code(inner.func)}`, which e2k does not convert "
                                  "inside a model kept as written")

    def check_called_objects(self, forward: list[_Def]) -> None:
        """A value the forward pass calls (``model(image)``) but that is no layer or Keras model
        e2k knows was made by code e2k cannot read: left in ``call`` it would be made again at
        every step, with new weights."""
        called = {
            node.func.value for d in forward for node in _walk(d.value) if isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
        }
        for d in forward:
            if d.name in called and d.name not in self.layer_objects and isinstance(d.value, cst.Call):
                self.refuse(d.value, f"`{d.name}` is made by `{_emit.code(d.value.func)}` and then called on the inputs; "
                                     "e2k cannot tell that this is a Keras model it can hold")

    def model_object_constructor(self, d: _Def) -> cst.BaseExpression:
        from estimator2keras._symbols import tf2_respellings

        return _emit.replace_in(d.value, dict(tf2_respellings(self.ctx, d.value, self.tf)))

    def mode_variant(self, call: cst.Call, training: str) -> str:
        """``logits = model(image, training=True)`` in TRAIN mode and ``logits = model(image,
        training=False)`` in EVAL and PREDICT mode: one forward pass, with Keras's ``training``
        flag. Any other difference between the modes is refused: Keras runs one ``call``."""
        small = call
        while small is not None and small not in self.order:
            small = self.ctx.parent(small)
        d = self.def_of_small.get(small)
        if small in getattr(self, "twinned", {}) and training in ("True", "training"):
            return "training"  # its inference pass (`logits_test`) is what evaluate and predict see
        if any(small is t.small for t in getattr(self, "mode_variants", {}).values()) and training in ("True", "training"):
            return "training"  # its inference pass (`logits_test`) is what evaluate and predict see
        if training != "True" or d is None or not isinstance(small, cst.Assign):
            return training
        if any(small in self.mode_smalls.get(m, ()) for m in (EVAL, PREDICT)):
            return training  # the same statement runs in inference too: training=True there as well
        expected = {_normalized(small.deep_replace(call, _with_training(call, value))) for value in ("False", None)}
        others = []
        current = self.mode
        try:
            for m in (EVAL, PREDICT):
                self.mode = m
                other = self.latest_def(d.name, len(self.order))
                if other is not None:
                    others.append((m, other))
        finally:
            self.mode = current
        if not others:
            return training
        for m, other in others:
            if _normalized(other.small) not in expected:
                self.refuse(other.small, f"in {m.upper()} mode `{d.name}` is computed otherwise than in TRAIN mode with "
                                         "training=False; e2k converts one forward pass for all modes")
        return "training"

    # -- a second forward pass, for evaluation and predictions ------------------------------
    def read_inference_passes(self, forward: list[_Def]) -> None:
        """``logits_test = conv_net(x, n, dropout, reuse=True, is_training=False)`` beside the
        forward pass's ``logits_train = conv_net(x, n, dropout, reuse=False, is_training=True)``
        (or a Keras model called with ``training=True``, then ``training=False``): the same
        layers run again for inference. Keras runs one pass, with ``training=True`` in fit and
        ``False`` in evaluate and predict: there the inference value is the model's output, and
        the training pass takes Keras's flag. Calls that differ otherwise, or whose layers are not
        shared, are not such a pair (and are refused as a second model)."""
        self.inference_passes: dict[str, _Def] = {}
        self.twinned: dict[cst.BaseSmallStatement, _Def] = {}
        self.eval_loss_in_training = False
        candidates = [d for d in forward if _single_call_assign(d)]
        for d in self.defs:
            if d.small in self.forward_smalls or not _single_call_assign(d):
                continue
            for train in candidates:
                if _emit.code(train.value.func) != _emit.code(d.value.func) or d.name == train.name:
                    continue
                if not any(d.small in runs and train.small in runs for runs in self.mode_smalls.values()):
                    continue  # one per mode (TRAIN's, and EVAL's or PREDICT's): see mode_variant
                literal = self._pass_pair(train, d)
                if literal is None:
                    continue
                self.inference_passes[d.name] = d
                self.twinned[train.small] = train
                self.consumed.add(d.small)
                self.eval_loss_in_training |= literal
                if self.plan is not None:
                    self.plan.fixed(d.value, "E2K302", f"`{d.name} = {_emit.code(d.value.func)}(...)` for inference -> the "
                                                      "model's output with training=False (evaluate, predict)")
                break

    def _pass_pair(self, train: _Def, test: _Def) -> bool | None:
        """Whether ``test`` runs ``train``'s layers with training off, and nothing else differs.
        Returns whether the training pass's flag was a literal ``True`` (rather than a test of
        the mode), or None when the two are not such a pair."""
        fn = self._definition(train.value.func)
        if isinstance(fn, cst.FunctionDef) and not self.makes_keras_model(train.value) and self.makes_layers(fn):
            names = tuple(p.name.value for p in fn.params.params)
            training, reuse, auto = _helper_flags(self.ctx, fn)
            if not training or not (reuse or auto):
                return None  # nothing differs, or the second call makes layers of its own
            from estimator2keras._units import bind_arguments

            try:
                bound = [{k: a.value for k, a in bind_arguments(c, names).items()} for c in (train.value, test.value)]
            except Exception:
                return None
            for values in bound:
                for p in fn.params.params:
                    if p.name.value not in values and p.default is not None:
                        values[p.name.value] = p.default
            first, second = bound
            literal = False
            for name in names:
                a, b = first.get(name), second.get(name)
                if name in training:
                    if not (_is_literal(b, "False") and a is not None):
                        return None
                    if _is_literal(a, "True"):
                        literal = True
                    elif not self.modes.is_training_test(a):
                        return None
                elif name == reuse:
                    if not _is_literal(b, "True"):
                        return None
                elif (a is None) != (b is None) or (a is not None and _normalized(a) != _normalized(b)):
                    return None
            return literal
        # A Keras model the model_fn made: `model(x, training=True)`, then `model(x, training=False)`.
        func = train.value.func
        made = self.latest_def(func.value, train.index) if isinstance(func, cst.Name) else None
        if made is None or not isinstance(made.value, cst.Call) or not self.makes_keras_model(made.value):
            return None
        if self.latest_def(func.value, test.index) is not made:
            return None
        a, b = (_split_training(c) for c in (train.value, test.value))
        if a is None or b is None or a[0] != b[0] or not (b[1] is None or _is_literal(b[1], "False")):
            return None
        if _is_literal(a[1], "True"):
            return True
        return False if a[1] is not None and self.modes.is_training_test(a[1]) else None

    # -- the same helper called in each mode, its dropout switched off outside TRAIN -------
    def read_mode_variants(self, forward: list[_Def]) -> None:
        """``logits = build_model(image, params['hidden'], params['keep_rate'])`` in TRAIN mode and
        ``logits = build_model(image, params['hidden'], 1.0)`` in EVAL and PREDICT mode: one
        forward pass whose dropout runs only in training. The calls may differ only in
        arguments that switch the helper's training behaviour: a flag its layers take as
        ``training=`` (True or a test of the mode in TRAIN, False elsewhere) or a dropout's rate
        (``keep_prob``) that makes it the identity outside TRAIN (``keep_prob=1.0``,
        ``rate=0.0``). The helper's layers are made once, from TRAIN's call, and its dropout
        takes Keras's ``training`` flag; calls that differ otherwise stay refused (a second
        model)."""
        self.mode_variants: dict[cst.BaseSmallStatement, _Def] = {}
        #: Calls of another mode that differ from TRAIN's otherwise: call -> the parameter that differs.
        self.variant_differences: dict[cst.Call, str | None] = {}
        self.variant_switches: dict[cst.FunctionDef, dict[str, cst.BaseExpression]] = {}
        inference = {d.small for d in self.inference_passes.values()}
        candidates = [d for d in forward if _single_call_assign(d)]
        for d in self.defs:
            if d.small in self.forward_smalls or d.small in inference or not _single_call_assign(d):
                continue
            if d.small in self.mode_smalls.get(TRAIN, ()):
                continue
            train = next((t for t in candidates if t.name == d.name and _normalized(t.value.func) == _normalized(d.value.func)), None)
            if train is None:
                continue
            # TRAIN's call may run in EVAL too (`if PREDICT: ... else: ...`) when what it passes
            # tests the mode: there it was off, as in Keras's evaluate.
            shared = any(train.small in self.mode_smalls.get(m, ()) for m in (EVAL, PREDICT))
            switches = self._variant_switches(train, d, shared)
            if switches is None:
                self.variant_differences[d.value] = self._variant_difference
                continue
            fn = self._definition(train.value.func)
            known = self.variant_switches.setdefault(fn, {})
            for param, value in switches.items():
                if param in known and _normalized(known[param]) != _normalized(value) and not (
                        _constant(known[param]) is not None and _constant(known[param]) == _constant(value)):
                    self.refuse(d.value, f"`{fn.name.value}(...)` switches `{param}` off with two different values")
                known[param] = value
            self.mode_variants[d.small] = train
            self.consumed.add(d.small)
            if self.plan is not None:
                self.plan.fixed(d.value, "E2K302", f"`{d.name} = {_emit.code(d.value.func)}(...)` of the other modes -> the "
                                                  "model's one forward pass, with training=False in evaluate and predict")

    def _variant_switches(self, train: _Def, test: _Def, shared: bool = False) -> dict[str, cst.BaseExpression] | None:
        """The dropout switches (parameter -> the value ``test`` passes) by which ``test``'s call
        differs from ``train``'s, or None when they differ otherwise (or are not a helper's).
        ``shared``: TRAIN's call runs in another mode too, so only tests of the mode may differ."""
        self._variant_difference = None
        fn = self._definition(train.value.func)
        if not isinstance(fn, cst.FunctionDef) or self.makes_keras_model(train.value) or not self.makes_layers(fn):
            return None
        names = tuple(p.name.value for p in fn.params.params)
        training, reuse, _auto = _helper_flags(self.ctx, fn)
        from estimator2keras._units import bind_arguments

        try:
            bound = [{k: a.value for k, a in bind_arguments(c, names).items()} for c in (train.value, test.value)]
        except Exception:
            return None
        for values in bound:
            for p in fn.params.params:
                if p.name.value not in values and p.default is not None:
                    values[p.name.value] = p.default
        first, second = bound
        switches = {}
        for name in names:
            self._variant_difference = name
            a, b = first.get(name), second.get(name)
            if (a is None) != (b is None):
                return None
            if a is None or _normalized(a) == _normalized(b):
                continue
            if name == reuse:
                continue  # separate graphs per mode: the layers are the same either way
            if not any(isinstance(n, cst.Name) and n.value == name and self._is_read(n) for n in _walk(fn.body)):
                continue  # a parameter the helper never reads: the calls do the same
            if name in training:
                if not _is_literal(b, "False") or not (_is_literal(a, "True") and not shared or self.modes.is_training_test(a)):
                    return None
                continue
            if shared or not self._only_dropout_switch(fn, name, b):
                return None
            switches[name] = b
        return switches

    def _only_dropout_switch(self, fn: cst.FunctionDef, param: str, off: cst.BaseExpression) -> bool:
        """Whether ``param`` of ``fn`` configures only dropouts that run in training (contrib's
        ``keep_prob=``, tf.layers' ``rate=`` with ``training=True``), each of which ``off`` turns
        into the identity; other reads may only be printed or logged."""
        dropped = 0
        in_dropouts: set[int] = set()
        for call in iter_calls(fn.body):
            path = self.ctx.call_api_path(call)
            if path not in DROPOUTS:
                continue
            keyword, position, training_keyword = DROPOUTS[path]
            value, training = None, None
            for i, arg in enumerate(call.args):
                if arg.keyword is None and i == position or arg.keyword is not None and arg.keyword.value == keyword:
                    value = arg.value
                if arg.keyword is not None and arg.keyword.value == training_keyword:
                    training = arg.value
            if value is None or not any(isinstance(n, cst.Name) and n.value == param for n in _walk(value)):
                continue
            if path.startswith("contrib.") and training is None:
                training = cst.Name("True")  # contrib's dropout dropped units unless told otherwise
            if not _is_literal(training, "True"):
                return False
            neutral = 1.0 if keyword == "keep_prob" else 0.0
            if _constant(_emit.replace_in(value, {n: off for n in _walk(value) if isinstance(n, cst.Name) and n.value == param})) != neutral:
                return False
            dropped += 1
            in_dropouts.update(id(n) for n in _walk(value))
        if not dropped:
            return False
        for node in _walk(fn.body):
            if isinstance(node, cst.Name) and node.value == param and id(node) not in in_dropouts:
                parent = self.ctx.parent(node)
                if isinstance(parent, cst.Param) or isinstance(parent, cst.Arg) and parent.keyword is node:
                    continue
                if not self._only_logged(node, fn):
                    return False
        return True

    def _only_logged(self, node: cst.CSTNode, fn: cst.FunctionDef) -> bool:
        """``node`` is read only by a statement that prints or logs (``print(...)``,
        ``tf.logging.info(...)``)."""
        current = node
        while current is not None and current is not fn:
            parent = self.ctx.parent(current)
            if isinstance(current, cst.Expr) and isinstance(current.value, cst.Call):
                func = current.value.func
                path = self.ctx.call_api_path(current.value) or ""
                return _emit.code(func) == "print" or path.startswith(("logging.", "compat.v1.logging.")) or \
                    _emit.code(func).startswith("logging.")
            current = parent
        return False

    def is_model_output(self, name: str) -> bool:
        """``name`` holds the model's output as evaluate and predict see it: the forward pass's
        output, or a pass of the same layers for inference (``logits_test``)."""
        if name in getattr(self, "inference_passes", {}):
            return True
        if name != self.output_name:
            return False
        if getattr(self, "eval_loss_in_training", False):
            twin = next(iter(self.inference_passes))
            self.refuse(self.fn, f"metrics or predictions read `{name}`, computed with training=True in every mode, besides "
                                 f"`{twin}`: Keras evaluates and predicts with training=False")
        return True

    # -- helpers of the program that make layers ---------------------------------------------
    def makes_layers(self, fn: cst.FunctionDef) -> bool:
        return any(self.role(inner) in MAKERS for inner in iter_calls(fn.body))

    def read_helpers(self, forward: list[_Def]) -> None:
        """Find the helpers that make layers among the forward pass's calls, and read them."""
        calls = list({id(call): call for d in forward for call in iter_calls(d.value)}.values())
        self.mark_blocks(calls)
        for d in forward:
            for call in iter_calls(d.value):
                fn = self._definition(call.func)
                if not isinstance(fn, cst.FunctionDef) or self.makes_keras_model(call) or not self.makes_layers(fn):
                    continue
                if fn in self.block_fns:
                    continue  # a layer class: its calls are layers (read_layers)
                if call in self.helper_calls:
                    continue  # a loop defines several names: its calls are read once
                helper = self.helpers.get(fn)
                if isinstance(d.value, cst.For):
                    self.check_helper_loop(call, fn, d.value, helper)
                if helper is None:
                    nested = self.ctx.parent(self.ctx.parent(fn)) is self.fn
                    if self.ctx.parent(fn) is not self.ctx.module_of(fn) and not nested:
                        self.refuse(call, f"`{fn.name.value}` makes layers but is defined inside a function; e2k converts "
                                          "helpers defined at the top of the module or of the model_fn")
                    helper = self.helpers[fn] = _Helper(fn, self._attr(fn.name.value), self._helper_body(fn), nested=nested)
                    helper.switches = dict(getattr(self, "variant_switches", {}).get(fn, {}))
                from estimator2keras._units import bind_arguments

                signature = tuple(p.name.value for p in fn.params.params)
                try:
                    bound = {k: a.value for k, a in bind_arguments(call, signature).items()}
                except Exception:
                    self.refuse(call, f"the arguments of `{fn.name.value}(...)` cannot be matched to its parameters")
                for p in fn.params.params:
                    if p.name.value not in bound:
                        if p.default is None:
                            self.refuse(call, f"`{fn.name.value}(...)` is called without `{p.name.value}`")
                        bound[p.name.value] = p.default
                helper.calls.append((call, bound))
                self.helper_calls[call] = helper
                if isinstance(d.value, cst.For):
                    helper.loop = d.value
        for helper in self.helpers.values():
            self.read_helper(helper)

    def check_helper_loop(self, call: cst.Call, fn: cst.FunctionDef, loop: cst.For, helper: _Helper | None) -> None:
        """A helper called in a loop of the model_fn made new layers at each iteration: e2k makes
        them per iteration in __init__ when the helper is called only there, by a statement of
        the loop's own body, and the loop runs over values __init__ has (the model's arguments,
        the module's names)."""
        what = f"`{fn.name.value}(...)` makes layers and is called in a loop (new layers at each iteration)"
        if helper is not None:
            self.refuse(call, f"{what} and elsewhere; e2k converts a helper that only the loop calls")
        line = call
        while line is not None and not isinstance(line, cst.SimpleStatementLine):
            line = self.ctx.parent(line)
        if line is None or self.ctx.parent(self.ctx.parent(line)) is not loop or loop.orelse is not None:
            self.refuse(call, f"{what}, in a block of the loop; e2k converts a call in the loop's own statements")
        for name in self.names_read(loop.iter):
            if name.value not in self.arguments and not self._is_module_name(name) \
                    and not self._setting(name, self.order.get(loop, len(self.order))):
                self.refuse(loop.iter, f"{what}, over a value computed in the model_fn; e2k makes its layers in __init__")

    def read_helper_loop(self, helper: _Helper, apps: list[_LayerApp], params: list[str], local: set[str]) -> None:
        """The helper's layers, one tuple per iteration of its loop: inside the method each goes
        by the name it had as an attribute, a parameter the loop in `call` gives it."""
        taken = (set(params) | local | {n.value for stmt in helper.body for n in self.names_read(stmt)}) - set(helper.objects)
        helper.loop_attr = self._attr(f"{helper.fn.name.value}_layers")
        for app in apps:
            item = app.attr if app.attr not in taken else f"{app.attr}_layer"
            n = 1
            while item in taken:
                item = f"{app.attr}_layer_{n}"
                n += 1
            taken.add(item)
            app.loop, app.item, app.helper_loop = helper.loop, item, True

    def _helper_body(self, fn: cst.FunctionDef) -> list[cst.BaseStatement]:
        """The helper's statements; `with tf.variable_scope(...)` (sharing by name, which Keras
        layers do by being one object) is unwrapped."""
        fn_params = params = fn.params
        if isinstance(params.star_arg, (cst.Param, cst.ParamStar)) or params.kwonly_params or params.star_kwarg or params.posonly_params:
            self.refuse(fn, f"`{fn.name.value}` has *args, **kwargs or keyword-only parameters, which e2k does not convert")
        del fn_params
        body = []
        pending = list(fn.body.body)
        while pending:
            stmt = pending.pop(0)
            if isinstance(stmt, cst.With) and all(
                isinstance(item.item, cst.Call) and self.ctx.call_api_path(item.item) in SCOPES for item in stmt.items
            ):
                for item in stmt.items:
                    for arg in item.item.args:
                        if arg.keyword is not None and arg.keyword.value == "reuse" and isinstance(arg.value, cst.Name):
                            self._scope_reuse[fn] = arg.value.value
                inner = list(stmt.body.body)
                if inner:
                    inner[0] = inner[0].with_changes(leading_lines=[*stmt.leading_lines, *inner[0].leading_lines])
                pending[:0] = inner
                continue
            if isinstance(stmt, cst.If):
                self._check_helper_if(fn, stmt)  # `if batch_normalization:` kept in the method
                body.append(stmt)
                continue
            if not isinstance(stmt, cst.SimpleStatementLine):
                self.refuse(stmt, f"a `{type(stmt).__name__.lower()}` statement in `{fn.name.value}`, a helper that makes layers, "
                                  "is not converted")
            for small in stmt.body:
                if not isinstance(small, (cst.Assign, cst.AugAssign, cst.Expr, cst.Return)):
                    self.refuse(small, f"a `{type(small).__name__}` statement in `{fn.name.value}` is not converted")
            body.append(stmt)
        last = body[-1].body[-1] if body and isinstance(body[-1], cst.SimpleStatementLine) else None
        if not isinstance(last, cst.Return) or last.value is None or any(
            isinstance(n, cst.Return) for stmt in body for n in _walk(stmt) if n is not last
        ):
            self.refuse(fn, f"`{fn.name.value}` makes layers but does not end with the one `return` of its result")
        return body

    def _check_helper_if(self, fn: cst.FunctionDef, stmt: cst.If) -> None:
        """An `if` in a helper (``if batch_normalization: layer = bn(layer)``) stays in the method
        as written, its layers made in __init__ either way; its branches must be assignments
        (and `elif`/`else` branches of the same kind), not returns, loops or other blocks."""
        branch = stmt
        while branch is not None:
            block = branch.body
            for line in block.body if isinstance(block, cst.IndentedBlock) else [block]:
                if not isinstance(line, cst.SimpleStatementLine) or not all(
                        isinstance(small, (cst.Assign, cst.AugAssign, cst.Expr, cst.Pass)) for small in line.body):
                    self.refuse(line, f"this statement in an `if` of `{fn.name.value}`, a helper that makes layers, is not "
                                      "converted (e2k keeps branches of assignments)")
            orelse = getattr(branch, "orelse", None)
            branch = orelse if isinstance(orelse, (cst.If, cst.Else)) else None

    def read_helper(self, helper: _Helper) -> None:
        fn, name = helper.fn, helper.fn.name.value
        params = [p.name.value for p in fn.params.params]
        helper.reuse = self._scope_reuse.get(fn)
        local = {t.value for stmt in helper.body for n in _walk(stmt) if isinstance(n, cst.AssignTarget) for t in _walk(n.target)
                 if isinstance(t, cst.Name)}
        for inner in iter_calls(cst.Module(body=helper.body)):
            # A method would keep the TF1 cell (or layer), made again at every step.
            if self.is_rnn_path(inner):
                self.refuse(inner, f"`{_emit.code(inner.func)}` in `{name}(...)`, a function the model_fn calls: e2k "
                                   "converts RNN cells in the model_fn itself or in a function that becomes a layer class")
            if (self.ctx.call_api_path(inner) or "").startswith(VARIABLE_MAKERS) and self.role(inner) is None:
                self.refuse(inner, f"`{_emit.code(inner.func)}` makes variables and e2k has no rule for it")
        # Which parameters layers take as `training=`.
        for inner in iter_calls(cst.Module(body=helper.body)):
            for arg in inner.args:
                if arg.keyword is not None and arg.keyword.value == "training" and isinstance(arg.value, cst.Name) and arg.value.value in params:
                    helper.training.add(arg.value.value)
        self.read_mode_tests(helper, params)
        # Calls after the first share the first one's layers only through `reuse=True`.
        for call, bound in helper.calls[1:]:
            reuse = bound.get(helper.reuse) if helper.reuse else None
            if not (isinstance(reuse, cst.Name) and reuse.value == "True"):
                if self._one_expression(helper) is not None and helper.reuse is None:
                    helper.inline = True  # each call makes its layers: written out at each call
                    break
                self.refuse(call, f"`{name}(...)` is called again and makes new layers at each call; e2k converts a helper "
                                  "called once, again with `reuse=True` (its layers shared), or one that returns one "
                                  "expression (written out at each call, with its own layers)")
        if helper.nested and helper.reuse is None and self._one_expression(helper) is not None:
            helper.inline = True  # a shorthand of the model_fn: written out where it is used
        if helper.loop is not None and len(helper.calls) > 1:
            self.refuse(helper.calls[1][0], f"`{name}(...)` makes layers and is called in a loop (new layers at each "
                                            "iteration) and elsewhere; e2k converts a helper that only the loop calls")
        if helper.loop is not None and helper.reuse is None and self._one_expression(helper) is not None:
            helper.inline = True  # one expression: written out in the loop, with one layer of each list
        if helper.inline:
            self.attrs_taken.discard(helper.method)  # no method: its name may name a layer
            return self.read_inline_helper(helper, params, local)
        # The layers, their attribute names as the helper named their outputs.
        assigned = [t.value for stmt in helper.body for n in _walk(stmt) if isinstance(n, cst.AssignTarget) for t in [n.target]
                    if isinstance(t, cst.Name)]
        for stmt in helper.body:
            for small in (n for n in _walk(stmt) if isinstance(n, cst.Assign)):
                if isinstance(small.value, cst.Call) and len(small.targets) == 1:
                    target = small.targets[0].target
                    if isinstance(target, cst.Name) and assigned.count(target.value) == 1:
                        self.preferred_attr[small.value] = target.value
        self.read_helper_objects(helper, assigned)
        self._helper_training = helper.training
        apps = []
        try:
            for stmt in helper.body:
                for inner in iter_calls(stmt):
                    path = self.ctx.call_api_path(inner)
                    role = self.role(inner) if path else None
                    contrib_without_rule = (path or "").startswith("contrib.") and role is None and not _has_tf2_home(path)
                    if (path in BEYOND_CATALOGUE and role is None) or contrib_without_rule:
                        self.refuse(inner, f"`{_emit.code(inner.func)}` in `{name}` is beyond what e2k converts")
                    if role in ("layer", "keras_layer") and not self._applied_inline(inner):
                        if any(inner is small.value for small in helper.objects.values()):
                            continue  # made in __init__, applied where the helper calls it
                        self.refuse(inner, f"a layer object made in `{name}` and applied later is not converted yet")
                    self.check_helper(inner)
                    app = self.layer_app(inner)
                    if app is None:
                        continue
                    app.constructor = self._bound_constructor(helper, app.constructor, params, local, inner)
                    if helper.switches and self.ctx.call_api_path(inner) in DROPOUTS and not app.drop and any(
                            isinstance(n, cst.Name) and n.value in helper.switches for arg in inner.args for n in _walk(arg.value)):
                        app.training = "training"  # off outside TRAIN, by its rate: Keras's flag
                    self.layer_apps[inner] = app
                    apps.append(app)
            if helper.loop is not None:
                self.read_helper_loop(helper, apps, params, local)
        finally:
            self._helper_training = set()
            for object_name in helper.objects:  # the helper's own names: not the model_fn's
                self.layer_objects.pop(object_name, None)
                self.layer_attr_of_object.pop(object_name, None)
        # The method's parameters: those the forward statements read outside layers' constructors.
        reads = self._helper_reads(helper, helper.body, params, local)
        helper.forward = [p for p in params if p in reads and p not in helper.training and p != helper.reuse]

    def read_helper_objects(self, helper: _Helper, assigned: list[str]) -> None:
        """``bn = tf.keras.layers.BatchNormalization(momentum=0.9)`` in a helper, applied after
        (``layer = bn(layer, training=training)``): the object is a layer the model makes in
        __init__, and its applications in the method apply that layer."""
        name = helper.fn.name.value
        for stmt in helper.body:
            for line in (n for n in _walk(stmt) if isinstance(n, cst.SimpleStatementLine)):
                for small in line.body:
                    if not (isinstance(small, cst.Assign) and isinstance(small.value, cst.Call)
                            and self.role(small.value) in ("layer", "keras_layer") and not self._applied_inline(small.value)):
                        continue
                    target = small.targets[0].target if len(small.targets) == 1 else None
                    if not isinstance(target, cst.Name) or assigned.count(target.value) != 1 or len(line.body) != 1:
                        self.refuse(small, f"a layer object made in `{name}` is assigned to more than one name or more than "
                                           "once, which e2k does not convert")
                    block = self.ctx.parent(line)
                    if len(getattr(block, "body", ())) < 2:
                        self.refuse(small, f"a layer object made alone in a block of `{name}` is not converted")
                    if target.value in self.layer_objects:
                        self.refuse(small, f"`{target.value}` names a layer object in `{name}` and in the model_fn")
                    helper.objects[target.value] = small
                    self.layer_objects[target.value] = _Def(-1, target.value, small, small.value, line)

    def _helper_reads(self, helper: _Helper, nodes, params: list[str], local: set[str]) -> set[str]:
        """Names the helper's code reads outside its layers' constructors and its tests of the
        mode. `mode` itself, and (defined in the model_fn) the model_fn's own names, are refused:
        the method and the code written at each call have neither."""
        tests = {id(n) for node in nodes for t in _walk(node) if self._is_mode_test(t) for n in _walk(t)}
        tests |= {id(n) for small in helper.objects.values() for n in _walk(small)}  # made in __init__
        reads = {n.value for node in nodes for n in self.names_read(node) if not self._inside_constructor(n) and id(n) not in tests}
        name = helper.fn.name.value
        if "mode" in reads:
            self.refuse(helper.fn, f"`{name}` reads `mode` otherwise than in a test of the mode, which e2k does not translate")
        if helper.nested:
            for node in nodes:
                for n in self.names_read(node):
                    if n.value in params or n.value in local or id(n) in tests or self._inside_constructor(n):
                        continue
                    if not self._is_global(n):
                        self.refuse(n, f"`{name}`, defined in the model_fn, reads `{n.value}` of the model_fn outside its "
                                       "layers' arguments, which e2k does not convert")
        return reads

    def _is_mode_test(self, node: cst.CSTNode) -> bool:
        return isinstance(node, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)) and \
            self.modes.modes_where_true(node) is not None

    def _is_global(self, name: cst.Name) -> bool:
        """A name bound at the top of the module (or a builtin), not by an enclosing function."""
        from libcst.metadata import BuiltinScope, GlobalScope

        scope = self.ctx.scope(name)
        if scope is None:
            return False
        for access in scope.accesses[name.value]:
            if access.node is name:
                return bool(access.referents) and all(isinstance(a.scope, (GlobalScope, BuiltinScope)) for a in access.referents) \
                    or not access.referents
        return True

    def read_mode_tests(self, helper: _Helper, params: list[str]) -> None:
        """`training=(mode == tf.estimator.ModeKeys.TRAIN)` in a helper: its `mode` parameter
        (given the model_fn's `mode` at every call) or, defined in the model_fn, the model_fn's
        `mode`: the method takes Keras's `training` flag instead."""
        tests = [n for stmt in helper.body for n in _walk(stmt) if self._is_mode_test(n)]
        if not tests:
            return
        name = helper.fn.name.value
        if "mode" in params:
            for call, bound in helper.calls:
                if not _is_literal(bound.get("mode"), "mode"):
                    self.refuse(call, f"`{name}(...)` is given a `mode` other than the model_fn's")
        elif not helper.nested:
            self.refuse(helper.fn, f"`{name}` tests a `mode` that is not its parameter")
        helper.tests_mode = True

    def _one_expression(self, helper: _Helper) -> cst.BaseExpression | None:
        """The expression of a helper that is one `return` statement, if it is."""
        body = [stmt for stmt in helper.body if not _docstring_stmt(stmt)]
        if len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1 \
                and isinstance(body[0].body[0], cst.Return):
            return body[0].body[0].value
        return None

    def read_inline_helper(self, helper: _Helper, params: list[str], local: set[str]) -> None:
        """A helper whose calls each make their own layers (``def batch_norm(x): return
        tf.layers.batch_normalization(x, ...)`` called three times): its expression is written at
        each call, with that call's layers, configured with that call's values."""
        expr = self._one_expression(helper)
        name = helper.fn.name.value
        for call, bound in helper.calls:
            self._helper_training = helper.training
            try:
                for inner in iter_calls(expr):
                    path = self.ctx.call_api_path(inner)
                    role = self.role(inner) if path else None
                    if (path in BEYOND_CATALOGUE or (path or "").startswith("contrib.")) and role is None:
                        self.refuse(inner, f"`{_emit.code(inner.func)}` in `{name}` is beyond what e2k converts")
                    if role in ("layer", "keras_layer") and not self._applied_inline(inner):
                        self.refuse(inner, f"a layer object made in `{name}` and applied later is not converted yet")
                    self.check_helper(inner)
                    app = self.layer_app(inner)
                    if app is None:
                        continue
                    app.constructor = self._bound_at_call(helper, app.constructor, bound, params, local)
                    if app.weight and inner is expr:  # `w1 = get_weights([4, 8], "w1")`: `self.w1`
                        self.attrs_taken.discard(app.attr)
                        app.attr = self._attr(self._weight_hint(inner, site=call, bound=bound))
                    if app.training == "training" and helper.training:
                        app.training = self.helper_training(call, helper)  # what this call passed
                    if helper.loop is not None:
                        self._in_loop(app, helper.loop, in_helper=True)  # a list of layers, one per iteration
                    self.layer_apps[(call, inner)] = app
            finally:
                self._helper_training = set()
        reads = self._helper_reads(helper, [expr], params, local)
        helper.forward = [p for p in params if p in reads and p not in helper.training]

    def _translated_arguments(self, constructor) -> dict:
        """The TF1 initializers and regularizers among a layer's (or weight's) arguments, by
        their Keras ones: translated here, while they are the program's own nodes, since
        binding the helper's parameters makes new ones that no rule can look up."""
        replacements = {}
        for arg in constructor.args if isinstance(constructor, cst.Call) else ():
            role = self.role(arg.value) if isinstance(arg.value, cst.Call) else None
            if role in ("initializer", "regularizer"):
                replacements[arg.value] = self.translate(role, arg.value)
            if arg.keyword is not None and arg.keyword.value.endswith("_regularizer") and not _is_none(arg.value):
                self.regularizer_under_strategy(arg)
        return replacements

    def _bound_at_call(self, helper: _Helper, constructor, bound: dict, params: list[str], local: set[str]):
        """A layer's constructor with the helper's parameters replaced by what one call passed."""
        replacements = self._translated_arguments(constructor)
        targets = {t.value for t in _walk(helper.loop.target) if isinstance(t, cst.Name)} if helper.loop is not None else set()
        skipped = {id(n) for n in _walk(constructor) for n in (
            [n.keyword] if isinstance(n, cst.Arg) and n.keyword is not None else [n.attr] if isinstance(n, cst.Attribute) else [])}
        for n in _walk(constructor):
            if not isinstance(n, cst.Name) or id(n) in skipped or n.value not in params or n.value in helper.training:
                continue
            value = bound[n.value]
            for read in self.names_read(value) if isinstance(value, cst.CSTNode) else ():
                if read.value in targets:
                    continue  # the loop's variable: the list in __init__ runs the same loop
                if read.value not in self.arguments and read.value not in ("tf", self.tf) and not self._is_module_name(read) \
                        and not self._is_global(read):
                    self.refuse(value, f"`{helper.fn.name.value}(...)` configures its layers with `{read.value}`, computed in "
                                       "the model_fn; e2k makes layers in __init__")
            replacements[n] = value
        return _emit.replace_in(constructor, replacements)

    def _settings_in(self, helper: _Helper, constructor, local: set[str], at: cst.CSTNode):
        """A layer's constructor with the helper's settings written out: ``ksize =
        hparams.get("ksize", 5)`` assigned once at the top of the helper, before its layers,
        is a value of the helper's parameters (bound next), so the layer made in __init__
        takes ``params.get("ksize", 5)``. A name the helper assigns more than once, in an
        `if`, or from its tensors is refused (the layer would need the forward pass)."""
        assigned: dict[str, list] = {}
        for stmt in helper.body:
            for small in (n for n in _walk(stmt) if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign))):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                for target in targets:
                    for name in (t for t in _walk(target) if isinstance(t, cst.Name)):
                        assigned.setdefault(name.value, []).append((stmt, small, target))
        for _ in range(20):
            replacements = {}
            for n in _walk(constructor):
                if not isinstance(n, cst.Name) or n.value not in local or not self._is_read(n):
                    continue
                defs = assigned.get(n.value, [])
                if len(defs) != 1 or not isinstance(defs[0][1], cst.Assign) or defs[0][2] is not defs[0][1].targets[0].target \
                        or not isinstance(defs[0][2], cst.Name) or len(defs[0][1].targets) != 1 \
                        or not isinstance(defs[0][0], cst.SimpleStatementLine) or any(
                            self.role(c) in MAKERS for c in _walk(defs[0][1].value) if isinstance(c, cst.Call)):
                    self.refuse(at, f"a layer in `{helper.fn.name.value}` is configured with `{n.value}`, computed in the "
                                    "helper from more than its settings; e2k makes layers in __init__")
                value = defs[0][1].value
                for read in self.names_read(value):
                    for _, bound in helper.calls if read.value in [p.name.value for p in helper.fn.params.params] else ():
                        given = bound.get(read.value)
                        if isinstance(given, cst.CSTNode) and any(
                                r.value not in self.arguments and not self._is_global(r) and not self._is_module_name(r)
                                for r in self.names_read(given)):
                            self.refuse(at, f"a layer in `{helper.fn.name.value}` is configured with `{n.value}`, computed in "
                                            "the helper from its inputs; e2k makes layers in __init__")
                replacements[n] = value
            if not replacements:
                return constructor
            constructor = _emit.replace_in(constructor, replacements)
        self.refuse(at, f"the settings of a layer in `{helper.fn.name.value}` are computed from each other too deeply")

    def _bound_constructor(self, helper: _Helper, constructor, params: list[str], local: set[str], at: cst.CSTNode):
        """A layer's constructor with the helper's parameters replaced by the values the calls
        pass (the same in every call: the layers are made once)."""
        constructor = self._settings_in(helper, constructor, local, at)
        try:
            replacements = self._translated_arguments(constructor)
        except Unsupported as exc:
            if exc.node is None or self.ctx.position(exc.node) == (0, 0):
                exc.node = at  # the code written with the settings has no place in the file: the layer's
            raise
        skipped = {id(n) for n in _walk(constructor) for n in (
            [n.keyword] if isinstance(n, cst.Arg) and n.keyword is not None else [n.attr] if isinstance(n, cst.Attribute) else [])}
        for n in _walk(constructor):
            if not isinstance(n, cst.Name) or id(n) in skipped:
                continue
            if n.value not in params or n.value in helper.training:
                continue
            values = {_emit.code(bound[n.value]) for _, bound in helper.calls}
            if len(values) != 1:
                self.refuse(helper.calls[-1][0], f"`{helper.fn.name.value}(...)` configures its layers with `{n.value}`, which "
                                                 "differs between calls; e2k makes its layers once")
            value = helper.calls[0][1][n.value]
            targets = {t.value for t in _walk(helper.loop.target) if isinstance(t, cst.Name)} if helper.loop is not None else set()
            for read in self.names_read(value) if isinstance(value, cst.CSTNode) else ():
                if read.value in targets:
                    continue  # the loop's variable: the list in __init__ runs the same loop
                if read.value not in self.arguments and read.value not in ("tf", self.tf) and not self._is_module_name(read) \
                        and not self._is_global(read):
                    self.refuse(value, f"`{helper.fn.name.value}(...)` configures its layers with `{read.value}`, computed in "
                                       "the model_fn; e2k makes layers in __init__")
            replacements[n] = value
        return _emit.replace_in(constructor, replacements)

    def helper_training(self, call: cst.Call, helper: _Helper) -> str | None:
        """What the forward pass passes as the helper's `training`: the model's flag, or a literal."""
        if not helper.training:
            return "training" if helper.tests_mode or helper.switches else None
        bound = dict(next(b for c, b in helper.calls if c is call))
        values = {_emit.code(bound[p]) for p in helper.training}
        if len(values) != 1:
            self.refuse(call, f"`{helper.fn.name.value}(...)` is given two different training flags")
        value = self.training_value(bound[next(iter(helper.training))])
        if self.mode == TRAIN:
            value = self.mode_variant(call, value)
        return value

    def check_helper(self, call: cst.Call, depth: int = 0) -> None:
        """A function of the file the model_fn calls (``dense_block(net, 64)``) must not make
        layers or TF1 state of its own: in a Keras model they belong in ``__init__``, and
        left in ``call`` they would be made again at every step (or not trained at all)."""
        from estimator2keras._units import resolve

        if depth > 4 or not isinstance(call.func, cst.Name):
            return
        if depth == 0 and not getattr(self, "_outside_forward", False) and self.block_candidate(call) is not None:
            self.block_fns.add(self._definition(call.func))  # called where layers are made: a layer class
            return
        helper = resolve(self.ctx, call.func)
        if not isinstance(helper, cst.FunctionDef):
            return
        for inner in iter_calls(helper.body):
            path = self.ctx.call_api_path(inner)
            role = self.role(inner) if path else None
            if (path or "").startswith("contrib.") and self.ctx.rules.expression_role(path) is None \
                    and path != "contrib.training.create_train_op":  # read as the train_op (as_minimize)
                # tf.contrib is gone from TF2: left in the Keras model, the helper would not even run.
                self.refuse(call, f"`{helper.name.value}(...)` calls `{_emit.code(inner.func)}` (tf.contrib), which e2k does "
                                  "not convert")
            if depth == 0 and getattr(self, "_outside_forward", False) and role in MAKERS:
                differing = getattr(self, "variant_differences", {}).get(call)
                if differing is not None:
                    self.refuse(call, f"`{helper.name.value}(...)` is called in another mode with another `{differing}` than "
                                      "TRAIN's call, which Keras's one forward pass (training=True in fit, False in evaluate "
                                      "and predict) cannot reproduce")
                self.refuse(call, f"`{helper.name.value}(...)` makes layers for a value the TRAIN loss does not read (a second "
                                  "forward pass, for evaluation or predictions), which e2k does not convert yet")
            if role in MAKERS or (path in BEYOND_CATALOGUE and role is None and not self.is_update_ops(inner)):
                self.refuse(call, f"`{helper.name.value}(...)` makes layers or variables of its own "
                                  f"(`{_emit.code(inner.func)}`); e2k converts layers written in the model_fn itself")
            self.check_helper(inner, depth + 1)

    def read_layers(self, forward: list[_Def]) -> None:
        """Find every layer applied in the forward statements and give it an attribute."""
        # `conv1 = tf.layers.conv2d(...)`: the layer is called `self.conv1`, as the user named
        # it, when that name holds this layer's output only (not `net = ...` three times).
        assigned = [d.name for d in forward]
        self.preferred_attr = {
            d.value: d.name
            for d in forward
            if isinstance(d.small, cst.Assign) and isinstance(d.value, cst.Call) and assigned.count(d.name) == 1
        }
        self.read_helpers(forward)
        self.check_beyond_catalogue(forward)
        for d in forward:
            if not isinstance(d.value, cst.Call) or self._applied_inline(d.value):
                continue
            if self.role(d.value) in ("layer", "keras_layer"):
                self.layer_objects[d.name] = d  # `layer = tf.layers.Dense(3)`, applied later
            elif isinstance(d.small, cst.Assign) and self.makes_keras_model(d.value):
                self.layer_objects[d.name] = d  # `model = create_model(...)`, called later
                self.model_objects.add(d.name)
        self.check_called_objects(forward)
        for d in forward:
            for call in iter_calls(d.value):
                if call in self.layer_apps:
                    continue  # a loop defines several names: its layers are read once
                app = self.layer_app(call)
                if app is not None:
                    if isinstance(d.value, cst.For):
                        self._in_loop(app, d.value)
                    self.layer_apps[call] = app
        self._unique_weight_names()
        for d in forward:  # `w = tf.get_variable(...)`: the model's `self.w` is read where `w` was
            app = self.layer_apps.get(d.value) if isinstance(d.value, cst.Call) else None
            helper = self.helper_calls.get(d.value) if isinstance(d.value, cst.Call) else None
            if app is None and helper is not None and helper.inline:  # `w1 = get_weights(...)`
                expr = self._one_expression(helper)
                app = self.layer_apps.get((d.value, expr))
            if app is not None and app.weight and app.loop is None and isinstance(d.small, cst.Assign) \
                    and len(d.small.targets) == 1 and isinstance(d.small.targets[0].target, cst.Name) \
                    and assigned.count(d.name) == 1:
                self.weight_names[d.name] = app.attr

    def _in_loop(self, app: _LayerApp, loop: cst.For, in_helper: bool = False) -> None:
        """A layer applied in a loop: one layer per iteration, kept in a list. (A helper's layer:
        its input is the helper's code; what the loop gives the helper is checked in `call`.)"""
        targets = {n.value for n in _walk(loop.target) if isinstance(n, cst.Name)}
        for name in [] if in_helper or app.weight else self.names_read(app.inputs):
            if name.value in targets:
                self.refuse(name, "the loop variable feeds a layer's input, which e2k does not convert")
        for name in self.names_read(loop.iter):
            if name.value not in self.arguments and not self._is_module_name(name) \
                    and not self._setting(name, self.order.get(loop, len(self.order))):
                self.refuse(loop.iter, "the loop runs over a value computed in the model_fn; e2k builds its layers in __init__")
        item = app.attr
        self.attrs_taken.discard(app.attr)
        app.attr = self._attr(f"{item}_layers")
        # The loop's variable for this layer: not a name the model_fn reads (`if dropout > 0:`
        # around a Dropout layer named `dropout` would test the layer).
        taken = {d.name for d in self.defs} | set(self.params) | {
            n.value for n in _walk(loop.target) if isinstance(n, cst.Name)}
        while item in taken:
            item = f"{item}_layer"
        app.item = item
        app.loop = loop

    def _setting(self, name: cst.Name, before: int, depth: int = 0) -> bool:
        """``hidden = params.get("hidden_units", [16, 8])``: a value of the model_fn computed
        from its settings alone (params, module names), assigned once, not in an `if` or a
        loop: __init__ computes it too."""
        if depth > 10:
            return False
        d = self.latest_def(name.value, before)
        if d is None or not isinstance(d.small, cst.Assign) or len(d.small.targets) != 1 \
                or not isinstance(d.small.targets[0].target, cst.Name) \
                or sum(1 for other in self.defs if other.name == name.value) != 1:
            return False
        if any(self.role(call) is not None for call in iter_calls(d.value)):
            return False
        for read in self.names_read(d.value):
            if read.value in ("features", "labels", "mode", *self.input_names):
                return False
            if read.value in self.arguments or self._is_module_name(read) or self._is_global(read):
                continue
            if not self._setting(read, d.index, depth + 1):
                return False
        return True

    def _applied_inline(self, call: cst.Call) -> bool:
        parent = self.ctx.parent(call)
        return isinstance(parent, cst.Call) and parent.func is call

    def layer_app(self, call: cst.Call) -> _LayerApp | None:
        if self.is_block_call(call):
            return self.block_app(call)
        dispatch = self.dispatch_of(call)
        if dispatch is not None:
            return self.dispatch_app(call, dispatch)
        role = self.role(call)
        if role == "layer_function":
            layer: LayerCall = self.translate("layer_function", call)
            return self._app(call, layer, self._name_hint(call, layer.constructor))
        if role == "variable":
            weight = self.translate("variable", call)
            return _LayerApp(call, self._attr(self._weight_hint(call)), weight, None, None, weight=True)
        inner = call.func
        if isinstance(inner, cst.Call) and self.role(inner) in ("layer", "keras_layer"):
            if len(call.args) < 1 or call.args[0].keyword is not None:
                self.refuse(call, "a layer applied without its input is not converted")
            constructor = self.translate(self.role(inner), inner)
            layer = LayerCall(constructor, call.args[0].value, list(call.args[1:]))
            return self._app(call, layer, self._name_hint(inner, constructor))
        if isinstance(inner, cst.Name) and inner.value in self.layer_objects:
            d = self.layer_objects[inner.value]
            if inner.value in self.model_objects:
                constructor = self.model_object_constructor(d)
            else:
                constructor = self.translate(self.role(d.value), d.value)
            attr = self.layer_attr_of_object.get(inner.value)
            if attr is None:
                attr = self._attr(self._name_hint(d.value, constructor, fallback=inner.value))
                self.layer_attr_of_object[inner.value] = attr
            layer = LayerCall(constructor, call.args[0].value if call.args else None, list(call.args[1:]))
            return self._app(call, layer, attr, attr_given=True)
        return None

    def _unique_weight_names(self) -> None:
        """Weights named alike in different variable scopes (``"weights"`` in ``hidden`` and in
        ``output``) are one layer's weights in Keras, where Keras 2 saves them by name (HDF5
        refuses two of one name): each after the first takes its attribute's name."""
        seen: set[str] = set()
        for app in self.layer_apps.values():
            if not app.weight or not isinstance(app.constructor, cst.Call):
                continue
            arg = next((a for a in app.constructor.args if a.keyword is not None and a.keyword.value == "name"), None)
            name = arg.value.evaluated_value if arg is not None and isinstance(arg.value, cst.SimpleString) else None
            if name is None:
                continue
            if name in seen:
                quote = arg.value.quote
                app.constructor = app.constructor.with_changes(args=[
                    a.with_changes(value=cst.SimpleString(f"{quote}{app.attr}{quote}")) if a is arg else a
                    for a in app.constructor.args])
                name = app.attr
            seen.add(name)

    def _weight_hint(self, call: cst.Call, site: cst.Call | None = None, bound: dict | None = None) -> str:
        """``w1 = tf.get_variable("w1", ...)``: ``self.w1``, as the user named the tensor (or
        the variable, when the tensor's name holds something else too). A helper's weight
        written out at a call (``site``, its parameters ``bound``) is named at that call."""
        preferred = getattr(self, "preferred_attr", {}).get(site if site is not None else call)
        if preferred and preferred.isidentifier() and preferred not in self.attrs_taken and preferred not in TENSOR_NAMES \
                and preferred not in KERAS_MODEL_ATTRIBUTES:
            return preferred
        named = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "name"), None)
        positional = call.args[0].value if call.args and call.args[0].keyword is None else None
        # get_variable("w", ...) names it first; tf.Variable(initial, name="w") by keyword
        name = named if named is not None else positional if (self.ctx.call_api_path(call) or "").endswith(
            "get_variable") else None
        if isinstance(name, cst.Name) and bound and isinstance(bound.get(name.value), cst.CSTNode):
            name = bound[name.value]  # the helper's `name` parameter: what the call passed
        hint = "weight"
        if isinstance(name, cst.SimpleString) and isinstance(name.evaluated_value, str) and name.evaluated_value.isidentifier():
            hint = name.evaluated_value
        # `weights` inside `variable_scope("hidden")` (or `name_scope`, as TensorFlow's mnist.py
        # names its tf.Variables): `self.hidden_weights`, when the tensor's own name is not free.
        scope = self._scope_name(call)
        if scope is not None:
            return f"{scope}_{preferred if preferred in KERAS_MODEL_ATTRIBUTES else hint}"
        return hint

    def enclosing_scopes(self, node: cst.CSTNode, kinds: tuple[str, ...] = ("variable_scope",)):
        """The ``with tf.variable_scope(...)`` calls (or of other ``kinds``) around ``node`` in its
        function, innermost first."""
        node = self.ctx.parent(node)
        while node is not None and not isinstance(node, (cst.FunctionDef, cst.Module)):
            if isinstance(node, cst.With):
                for item in node.items:
                    if isinstance(item.item, cst.Call) and (self.ctx.call_api_path(item.item) or "").endswith(kinds):
                        yield item.item
            node = self.ctx.parent(node)

    def _scope_name(self, node: cst.CSTNode) -> str | None:
        """The name of the innermost ``variable_scope("name")`` or ``name_scope`` around ``node``,
        if literal."""
        for call in self.enclosing_scopes(node, ("variable_scope", "name_scope")):
            if call.args and isinstance(call.args[0].value, cst.SimpleString):
                name = call.args[0].value.evaluated_value
                if isinstance(name, str) and name.isidentifier():
                    return name
        return None

    def _app(self, call, layer: LayerCall, hint: str, attr_given: bool = False) -> _LayerApp:
        training = None
        for arg in layer.call_kwargs:
            if arg.keyword is None or arg.keyword.value != "training":
                self.refuse(arg, "a layer called with arguments other than `training=` is not converted yet")
            training = self.training_value(arg.value)
            if self.mode == TRAIN:
                training = self.mode_variant(call, training)
        attr = hint if attr_given else self._attr(hint)
        keras_class = _emit.code(layer.constructor.func).rsplit(".", 1)[-1] if isinstance(layer.constructor, cst.Call) else ""
        app = _LayerApp(call, attr, layer.constructor, layer.inputs, training)
        if keras_class == "Dropout" and training in (None, "False"):
            # tf.layers dropout defaults to training=False: it never dropped anything.
            # Leaving it out is exact (it was the identity); the note and a comment in `call`
            # tell the user, who may have meant it to drop (see E2K303's docs).
            app.drop = True
            if self.plan is not None:
                self.plan.fixed(
                    call,
                    "E2K303",
                    "this dropout never ran in the Estimator program (training= was not the mode); it is left out, "
                    "as it behaved: pass `training=mode == tf.estimator.ModeKeys.TRAIN` if you meant it",
                )
        if training == "training" and self.plan is not None:
            self.plan.fixed(call, "E2K303", "training= of the mode -> the model's training flag")
        never_updated = keras_class == "BatchNormalization" and training == "training" and (
            self._keras_made(call) or not self.used_update_ops_anywhere())
        if never_updated and not isinstance(app.constructor, cst.Call):
            self.leftover(call, "the Estimator never updated this batch normalization's moving averages (they stayed "
                                "at their initial values); Keras updates them during fit: evaluation results will "
                                "differ (give the layer momentum=1.0 to keep them)", "E2K303")
        elif never_updated:
            # A Keras layer in a TF1 graph puts no update in UPDATE_OPS (tf.layers' do), and a
            # program may never run them: either way the Estimator never updated the moving
            # averages, which stayed at their initial values. momentum=1.0 keeps them there in
            # Keras too (each update moves them by (1 - momentum) = 0), as the program ran.
            why = ("a Keras layer in a model_fn adds nothing to UPDATE_OPS" if self._keras_made(call)
                   else "the program never ran the UPDATE_OPS")
            app.constructor = _with_keyword(app.constructor, "momentum", cst.Float("1.0"))
            app.note = "momentum=1.0: the Estimator never updated these moving averages; neither does this layer"
            if self.plan is not None:
                self.plan.fixed(call, "E2K303", f"the Estimator never updated this batch normalization's moving "
                                                f"averages ({why}): momentum=1.0 keeps them at their initial values")
        return app

    def _keras_made(self, call: cst.Call) -> bool:
        """Was the layer that ``call`` applies a Keras layer in the Estimator program (rather
        than one of tf.layers / tf.compat.v1.layers)?"""
        made = call.func if isinstance(call.func, cst.Call) else None
        if isinstance(call.func, cst.Name) and call.func.value in self.layer_objects:
            made = self.layer_objects[call.func.value].value
        path = self.ctx.call_api_path(made) if isinstance(made, cst.Call) else self.ctx.call_api_path(call)
        return (path or "").startswith("keras.")

    def used_update_ops_anywhere(self) -> bool:
        """The model_fn (for a block's layers too) runs its train_op under control
        dependencies, itself or in a function of the program it calls (``train_op =
        make_train_op(loss, mode)``, whose `with tf.control_dependencies(update_ops):` ran them)."""
        return any(self.ctx.call_api_path(call) in RUN_UPDATE_OPS for call in self.model_fn_calls())

    def model_fn_calls(self):
        """The calls of the model_fn (the root's, for a block) and of the functions of the
        program it calls, transitively (at most 20 functions)."""
        pending, seen = [self.root.fn], set()
        while pending:
            fn = pending.pop()
            if id(fn) in seen or len(seen) > 20:
                continue
            seen.add(id(fn))
            for call in iter_calls(fn.body):
                yield call
                target = self._definition(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
                if isinstance(target, cst.FunctionDef):
                    pending.append(target)

    def training_value(self, value: cst.BaseExpression) -> str:
        if isinstance(value, cst.Name) and value.value in getattr(self, "_helper_training", ()):
            return "training"  # a helper's training parameter: the method's flag
        if isinstance(value, cst.Name) and value.value in ("True", "False"):
            return value.value
        if self.modes.is_training_test(value):
            return "training"
        self.refuse(value, "this `training=` is not a test of the mode e2k can translate")

    def _name_hint(self, call: cst.Call, constructor: cst.BaseExpression, fallback: str | None = None) -> str:
        outer = self.ctx.parent(call) if isinstance(call.func, (cst.Name, cst.Attribute)) and self.role(call) in ("layer", "keras_layer") else call
        preferred = getattr(self, "preferred_attr", {}).get(outer if isinstance(outer, cst.Call) else call)
        if preferred and preferred.isidentifier() and preferred not in self.attrs_taken and preferred not in TENSOR_NAMES:
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


def _column_kinds(ctx, expr: cst.BaseExpression, depth: int = 0) -> set[str] | None:
    """The feature-column functions that make the columns of ``expr`` (``{"numeric_column"}``),
    or None when some column is made otherwise than e2k can see."""
    from estimator2keras._units import Binding, accesses_of, resolve

    if depth > 12:
        return None
    if isinstance(expr, (cst.List, cst.Tuple)):
        kinds: set[str] = set()
        for element in expr.elements:
            found = _column_kinds(ctx, element.value, depth + 1)
            if found is None:
                return None
            kinds |= found
        return kinds
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        left, right = _column_kinds(ctx, expr.left, depth + 1), _column_kinds(ctx, expr.right, depth + 1)
        return None if left is None or right is None else left | right
    if isinstance(expr, cst.Call):
        path = ctx.call_api_path(expr) or ""
        if path.startswith(("feature_column.", "compat.v1.feature_column.")) and path.endswith("_column"):
            return {path.rsplit(".", 1)[-1]}
        if isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") and len(expr.args) == 1:
            return _column_kinds(ctx, expr.args[0].value, depth + 1)
        return None
    if isinstance(expr, cst.Name):
        bound = resolve(ctx, expr)
        if not isinstance(bound, Binding):
            return None
        kinds = _column_kinds(ctx, bound.value, depth + 1)
        reads = accesses_of(ctx, bound.target)
        if kinds is None or reads is None:
            return None
        for read in reads:
            parent = ctx.parent(read)
            if not (isinstance(parent, cst.Attribute) and parent.value is read):
                continue
            method = parent.attr.value
            call = ctx.parent(parent)
            if method in ("append", "extend", "insert") and isinstance(call, cst.Call) and call.func is parent and call.args:
                value = call.args[-1].value
                found = _column_kinds(ctx, value, depth + 1) if method == "extend" else \
                    _column_kinds(ctx, cst.List([cst.Element(value)]), depth + 1)
                if found is None:
                    return None
                kinds |= found
        for read in reads:  # `cols[0] = ...`, `cols += [...]`: changed otherwise
            parent = ctx.parent(read)
            if isinstance(parent, cst.Subscript) and isinstance(ctx.parent(parent), cst.AssignTarget):
                return None
        return kinds
    return None


def _docstring_stmt(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) \
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _single_call_assign(d: _Def) -> bool:
    """``name = f(...)``: one name, assigned a call."""
    return isinstance(d.small, cst.Assign) and len(d.small.targets) == 1 and isinstance(d.small.targets[0].target, cst.Name) \
        and isinstance(d.value, cst.Call)


def _is_literal(node, value: str) -> bool:
    return isinstance(node, cst.Name) and node.value == value


def _split_training(call: cst.Call):
    """(the call's other arguments as normalized code, its ``training=`` value or None)."""
    training, others = None, []
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "training":
            training = arg.value
        else:
            others.append(_normalized(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)))
    return tuple(others), training


def _helper_flags(ctx, fn: cst.FunctionDef) -> tuple[set[str], str | None, bool]:
    """A helper's parameters that its layers take as ``training=``, the parameter it passes to
    ``tf.variable_scope(..., reuse=...)``, and whether that scope reuses by itself
    (``reuse=tf.AUTO_REUSE``)."""
    params = {p.name.value for p in fn.params.params}
    training, reuse, auto = set(), None, False
    for call in iter_calls(fn.body):
        for arg in call.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value == "training" and isinstance(arg.value, cst.Name) and arg.value.value in params:
                training.add(arg.value.value)
            if arg.keyword.value == "reuse" and ctx.call_api_path(call) in SCOPES:
                if isinstance(arg.value, cst.Name) and arg.value.value in params:
                    reuse = arg.value.value
                elif (ctx.api_path(arg.value) or "").endswith("AUTO_REUSE"):
                    auto = True
    return training, reuse, auto


def _constant(node: cst.BaseExpression) -> float | None:
    """The value of a numeric expression of literals (``1 - 1.0``), or None."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return float(node.evaluated_value)
    if isinstance(node, cst.BinaryOperation):
        left, right = _constant(node.left), _constant(node.right)
        if left is None or right is None:
            return None
        op = type(node.operator)
        if op is cst.Add:
            return left + right
        if op is cst.Subtract:
            return left - right
        if op is cst.Multiply:
            return left * right
        return None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _constant(node.expression)
        return None if inner is None else -inner
    return None


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _snake(name: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower().replace("2_d", "2d").replace("1_d", "1d").replace("3_d", "3d")


def _walk_own(node: cst.CSTNode):
    """Nodes of a function's own body: not those of functions, classes or lambdas inside it."""
    from estimator2keras._nodes import fields_children

    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(c for c in fields_children(current) if not isinstance(c, (cst.FunctionDef, cst.ClassDef, cst.Lambda)))


def _with_training(call: cst.Call, value: str | None) -> cst.Call:
    """``call`` with ``training=value`` (``None``: without ``training=``)."""
    args = []
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "training":
            if value is None:
                continue
            arg = arg.with_changes(value=cst.Name(value))
        args.append(arg)
    return call.with_changes(args=args)


def _normalized(node: cst.CSTNode) -> str:
    """Code without whitespace or comments, to compare two statements' meaning."""
    code = re.sub(r"#[^\n]*", "", _emit.code(node))
    return re.sub(r",\)", ")", re.sub(r"\s+", "", code))
