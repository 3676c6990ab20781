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

``_Converter`` is composed of three parts: ``_modelfn_read`` (the dataclasses, and reading
the model_fn, its loss and its forward pass), ``_modelfn_read_compile`` (reading the
optimizer, metrics and predictions) and ``_modelfn_emit`` (writing the Keras code). This
module keeps the converter's state and shared helpers, and the names other modules import.
"""
from __future__ import annotations

import re

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import RewriteContext, iter_calls
from estimator2keras._modelfn_emit import _KerasWriter
from estimator2keras._modelfn_read import (
    MODEL_FN_PARAMS, Derived, LayerCall, LossConversion, MetricConversion, ModelConversion, ScheduleConversion,
    _Def, _LayerApp, _ModelReader, _walk,
)
from estimator2keras._label_table import LabelTableReading
from estimator2keras._modelfn_loss import _LossReader, _OwnLossWriter, _WeightPenaltyReader
from estimator2keras._modelfn_read_compile import _CompileReader
from estimator2keras._modelfn_rnn import RNN_CONVERTED, RnnReading
from estimator2keras._modes import TRAIN, ModeAnalysis
from estimator2keras._rule import Unsupported

UNSUPPORTED = "E2K901"
MODEL_FN = "E2K001"


class _Converter(_WeightPenaltyReader, RnnReading, _ModelReader, _LossReader, _OwnLossWriter, _CompileReader,
                 LabelTableReading,
                 _KerasWriter):
    """One model_fn's conversion: its state and the helpers both sides use; the reading comes
    from ``_ModelReader`` and ``_CompileReader``, the writing from ``_KerasWriter``."""

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
        #: ``metrics["auc"] = tf.metrics.auc(...)``: the items set on a dict of the model_fn,
        #: by the dict's name: (statement index, key, value, the statement).
        self.item_sets: dict[str, list[tuple[int, str, cst.BaseExpression, cst.BaseSmallStatement]]] = {}
        self.order: dict[cst.BaseSmallStatement, int] = {}
        self.attrs_taken: set[str] = set()
        self.layer_objects: dict[str, _Def] = {}
        #: ``w = tf.get_variable(...)``, assigned once: the forward pass reads ``self.<attr>``.
        self.weight_names: dict[str, str] = {}
        #: Layer objects that are whole Keras models (``model = create_model(...)``).
        self.model_objects: set[str] = set()
        #: Helpers of the program that make layers, and their calls in the forward pass.
        self.helpers: dict = {}
        self.helper_calls: dict = {}
        self._scope_reuse: dict = {}
        self.layer_apps: dict[cst.Call, _LayerApp] = {}
        self.layer_attr_of_object: dict[str, str] = {}
        #: The mode whose statements name lookups see (TRAIN for the model, EVAL for
        #: metrics, PREDICT for predictions).
        self.mode = TRAIN
        self.mode_smalls: dict[str, set] = {}
        #: Module-level definitions the Keras code needs (metric classes, layer classes of
        #: blocks), in order.
        self.definitions: list[cst.BaseStatement] = []
        #: The builder's assignments computed from the global step: a schedule each (_hand_schedule).
        self.hand_schedule_defs: set[int] = set()
        #: The model_fn's converter holds what its blocks share (``_modelfn_blocks``): the
        #: functions that became layer classes, the calls that apply them, names in use.
        self.root = self
        self.blocks: dict = {}
        self.block_fns: set = set()
        self.block_calls: set[int] = set()
        self.taken_names: set[str] = set()
        #: Calls of a function picked from a dict by a setting (``_modelfn_blocks.dispatch_of``),
        #: by id, and the model_fn's statements that picked it (made in __init__ now).
        self.dispatches: dict = {}
        self.dispatch_smalls: set = set()
        #: ``tf.feature_column.input_layer`` calls -> what writes the call of the code computing
        #: them (the emitted function, the model's method), given the rewritten call.
        self.input_layers: dict = {}
        #: The input_layer of categorical columns, written as the model's preprocessing (a ColumnInput).
        self.column_input = None
        #: RNN functions (``outputs, state = tf.nn.dynamic_rnn(cell, x)``) by their statement,
        #: the calls they consumed (cells, MultiRNNCell), cell objects -> (def, layer attribute),
        #: the names that pass a cell on, and reads of their results -> what ``call`` reads.
        self.rnn_runs: dict = {}
        self.rnn_consumed: set = set()
        self.rnn_cell_objects: dict = {}
        self.rnn_cell_uses: list = []
        self.rnn_reads: dict = {}
        #: The names the forward pass starts from.
        self.input_names: tuple[str, ...] = ("features",)

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
        helper = getattr(self, "tf1_momentum", {}).get(id(call))
        if role == "optimizer" and helper is not None and isinstance(result, cst.Call):
            # (check_momentum_schedule): the helper updating as TF1's Momentum did.
            result = result.with_changes(func=cst.Name(helper))
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
            if d.name == name and (runs is None or d.small in runs) and (d.modes is None or self.mode in d.modes):
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
            if isinstance(current, cst.Attribute):
                stack.append(current.value)  # not `.attr`, which no metadata knows in code e2k wrote
            elif isinstance(current, cst.Arg):
                stack.append(current.value)  # not `keyword=`
            else:
                stack.extend(current.children)
        return reads

    def branch_reads(self, node: cst.If) -> tuple[list[cst.Name], set[str]]:
        """What an `if` kept whole takes from before it, and what it always binds: the names its
        test and branches read before a branch assigns them (``h = dense(x); h = bn(h)`` reads
        `x`, not an earlier `h`), and the names every branch assigns (no value from before
        survives it)."""

        def block_flow(statements, bound: set[str]) -> tuple[list[cst.Name], set[str]]:
            bound = set(bound)
            exposed: list[cst.Name] = []
            for stmt in statements:
                if isinstance(stmt, cst.If):
                    inner, always = if_flow(stmt, bound)
                    exposed += inner
                    bound |= always
                    continue
                if not isinstance(stmt, cst.SimpleStatementLine):
                    exposed += [n for n in self.names_read(stmt) if n.value not in bound]
                    continue
                for small in stmt.body:
                    value = getattr(small, "value", None) if not isinstance(small, cst.Expr) else small.value
                    reads = self.names_read(value) if isinstance(value, cst.CSTNode) else self.names_read(small)
                    if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
                        reads = [small.target, *reads]
                    exposed += [n for n in reads if n.value not in bound]
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else \
                        [small.target] if isinstance(small, (cst.AugAssign, cst.AnnAssign)) else []
                    bound |= {n.value for t in targets for n in _walk(t) if isinstance(n, cst.Name)}
            return exposed, bound

        def if_flow(stmt: cst.If, bound: set[str]) -> tuple[list[cst.Name], set[str]]:
            exposed = [n for n in self.names_read(stmt.test) if n.value not in bound]
            always: set[str] | None = None
            branch: cst.CSTNode | None = stmt
            while branch is not None:
                lines = branch.body.body if isinstance(branch.body, cst.IndentedBlock) else [branch.body]
                inner, after = block_flow(lines, bound)
                exposed += inner
                always = after if always is None else always & after
                orelse = getattr(branch, "orelse", None)
                if isinstance(orelse, cst.If):
                    exposed += [n for n in self.names_read(orelse.test) if n.value not in bound]
                    branch = orelse
                elif isinstance(orelse, cst.Else):
                    lines = orelse.body.body if isinstance(orelse.body, cst.IndentedBlock) else [orelse.body]
                    inner, after = block_flow(lines, bound)
                    exposed += inner
                    always &= after
                    branch = None
                else:
                    always = set(bound)  # no else: a path through assigns nothing
                    branch = None
            return exposed, (always or set()) - bound

        return if_flow(node, set())

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


class _BlockConverter(_Converter):
    """A function of the program that makes layers, read as a forward pass of its own and
    written as a Keras layer class (``_modelfn_blocks``)."""

    def __init__(self, block, ctx: RewriteContext, tf: str, plan, root: _Converter):
        super().__init__(block.fn, ctx, tf, plan, ())
        self.block = block
        self.arguments = tuple(block.config)
        self.input_names = (block.input,)
        self.root = root
        self.block_fns = root.block_fns

    def check_signature(self) -> None:
        pass  # read when the block was made (``block_of``)

    def convert_block(self) -> cst.ClassDef:
        block, fn = self.block, self.fn
        name = fn.name.value
        self.consumed: set[cst.BaseSmallStatement] = set()
        self.kept: set[cst.BaseSmallStatement] = set()
        self.read()
        for node in _walk(fn.body):
            if isinstance(node, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation, cst.Name)) \
                    and self.modes.modes_where_true(node) is not None:
                if block.mode is not None and self.modes.is_training_test(node):
                    continue  # the model_fn's mode, given as `mode`: Keras's `training` in the layer
                self.refuse(node, f"`{name}` tests the mode, which it is given by its callers; e2k converts functions "
                                  "making layers that take a training flag (`training=mode == ModeKeys.TRAIN` where "
                                  "they are called), or the model_fn's `mode` tested for training")
        if block.training is not None:
            self.modes.flags[block.training] = frozenset({TRAIN})  # Keras's `training` in the layer
        path = self.modes.paths[TRAIN]
        if path.ret is None or path.ret.value is None:
            self.refuse(fn, f"`{name}` makes layers but does not return their result")
        for m, other in self.modes.paths.items():
            if other.ret is not path.ret or other.statements != path.statements:
                self.refuse(fn, f"`{name}` tests the mode; e2k converts functions making layers that take a training flag")
        output = path.ret.value
        forward = self.forward_slice(output, len(self.order))
        in_forward = {d.small for d in forward}
        for small in path.statements:
            if small not in in_forward and not isinstance(small, cst.Expr):
                self.refuse(small, f"this statement of `{name}` does not compute its result; e2k converts functions "
                                   "making layers whose statements all do")
            if isinstance(small, cst.Expr) and not isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                self.refuse(small, f"this statement of `{name}` does not compute its result; e2k converts functions "
                                   "making layers whose statements all do")
        self.forward_smalls = in_forward
        self.read_inference_passes(forward)
        self.read_mode_variants(forward)
        # The returned expression may apply layers too (`return tf.layers.dense(net, 10)`).
        returned = _Def(len(self.order), "", path.ret, output, path.lines[-1])
        self.check_beyond_catalogue([*forward, returned])
        self.read_layers([*forward, returned])
        self.check_nested_functions()
        for attr in self.call_reads_of_config(forward, output):
            if attr in _KERAS_LAYER_ATTRIBUTES:
                self.refuse(fn, f"`{name}` reads its parameter `{attr}` beside its layers' settings; as an attribute "
                                f"of a Keras layer `self.{attr}` is Keras's own: rename the parameter")
        klass = self.layer_class(block, forward, output)
        self.absorb_helpers()
        return klass

    def call_reads_of_config(self, forward, output) -> list[str]:
        return self._call_arguments(forward, [output])


#: Attributes of a Keras layer (Keras 2.15 and 3) that a block's parameter read in `call`
#: (stored as ``self.<parameter>``) must not replace.
_KERAS_LAYER_ATTRIBUTES = frozenset({
    "name", "dtype", "trainable", "input", "output", "weights", "variables", "losses", "built", "input_spec",
    "dtype_policy", "compute_dtype", "variable_dtype", "supports_masking", "stateful", "metrics", "path",
    "trainable_weights", "non_trainable_weights", "trainable_variables", "non_trainable_variables", "updates",
    "activity_regularizer", "inbound_nodes", "outbound_nodes", "submodules", "name_scope", "call", "build",
})


#: Graph-era constructs e2k converts nowhere in a model_fn (others of ``BEYOND_CATALOGUE``,
#: such as ``get_collection(UPDATE_OPS)`` or the trainable variables of a weight decay, it
#: converts in some places).
_NEVER_CONVERTED = frozenset({
    "get_variable", "Variable", "VariableV1", "get_local_variable", "make_template", "py_func", "placeholder",
    "placeholder_with_default", "assign", "assign_add", "assign_sub", "add_to_collection", "Session",
})
#: tf.contrib names the conversion reads without an expression rule (TPU specs and optimizer
#: wrappers, the global step).
#: tf.contrib code the model_fn's reading converts itself (not an expression rule's).
_HANDLED_CONTRIB = ("contrib.tpu.", "contrib.framework.get_or_create_global_step", "contrib.framework.get_global_step",
                    "contrib.training.create_train_op")


def other_blockers(fn: cst.FunctionDef, ctx: RewriteContext, first: cst.CSTNode | None) -> list[tuple[cst.CSTNode, str]]:
    """When the model_fn's conversion stopped at its first refusal (``first``): the other
    constructs in it that e2k never converts, so that one run reports every blocker a human
    will meet, not one at a time. The constructs are those with no rule whatever the code
    around them: tf.contrib functions, graph-era ones (``BEYOND_CATALOGUE``), tf.metrics and
    TF1 optimizers without a rule; in the model_fn and in the functions of the program it
    calls. A construct e2k converts in some places and not in others is not listed: this
    survey must never name something that is not a blocker."""
    from estimator2keras._modelfn_read import VARIABLE_MAKERS
    from estimator2keras._units import resolve

    first_line = ctx.position(first)[0] if first is not None else None
    found: list[tuple[cst.CSTNode, str]] = []
    seen: set[tuple[str, int]] = set()
    pending, visited = [fn], set()
    while pending:
        current = pending.pop(0)
        if id(current) in visited or len(visited) > 20:
            continue
        visited.add(id(current))
        for call in iter_calls(current.body):
            if isinstance(call.func, cst.Name):
                target = resolve(ctx, call.func)
                if isinstance(target, cst.FunctionDef):
                    pending.append(target)
            path = ctx.call_api_path(call)
            if not path:
                continue
            bare = path[len("compat.v1."):] if path.startswith("compat.v1.") else path
            role = ctx.rules.expression_role(path)
            what = f"`{_emit.code(call.func)}`"
            if bare in RNN_CONVERTED:
                continue  # read where an RNN function runs its cells (`_modelfn_rnn`)
            if bare.startswith("contrib.") and role is None and not bare.startswith(_HANDLED_CONTRIB):
                reason = f"{what} (tf.contrib) has no rule in e2k: TensorFlow 2 has no tf.contrib"
            elif path.startswith(VARIABLE_MAKERS) and role is None:
                reason = f"{what} makes variables and e2k has no rule for it"
            elif bare in _NEVER_CONVERTED and role is None:
                reason = f"{what} is graph-era code a Keras model cannot hold as it is"
            elif bare.startswith("metrics.") and role is None:
                reason = f"{what} is not a tf.metrics call e2k converts"
            elif bare.startswith("train.") and bare.endswith("Optimizer") and role is None:
                reason = f"{what} is a TF1 optimizer e2k has no Keras rule for"
            else:
                continue
            line = ctx.position(call)[0]
            if line == first_line or (bare, line) in seen:
                continue
            seen.add((bare, line))
            found.append((call, f"also in this model_fn: {reason}"))
    return found


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
    converter = _Converter(fn, ctx, tf, plan, extra)
    converter.taken_names = set(taken) | {name, class_name, stem}
    conversion = converter.convert(name, class_name)
    return _freed_builder_name(conversion, converter, _emit.builder_name(stem), class_name)


def _freed_builder_name(conversion: ModelConversion, converter: _Converter, preferred: str, class_name: str) -> ModelConversion:
    """The builder takes the name it would have had (``build_model``) when only a helper that
    the conversion absorbed held it (``def build_model(x, hidden_size, keep_prob)``, now a
    method of the model): ``build_model_2`` is no name a person would choose."""
    if conversion.builder_name == preferred or preferred == class_name:
        return conversion
    helper = next((fn for fn in getattr(converter, "absorbed", ()) if fn.name.value == preferred), None)
    if helper is None:
        return conversion
    scope = converter.ctx.scope(helper)
    if scope is None or any(getattr(a, "node", None) is not helper for a in scope.assignments[preferred]):
        return conversion  # bound otherwise too
    statements = [
        stmt.with_changes(name=cst.Name(preferred))
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == conversion.builder_name else stmt
        for stmt in conversion.statements
    ]
    return ModelConversion(preferred, statements, conversion.arguments, conversion.predictions_kind)


__all__ = [
    "Derived", "LayerCall", "LossConversion", "MetricConversion", "ModelConversion", "ScheduleConversion",
    "MODEL_FN_PARAMS", "convert_model_fn",
]
