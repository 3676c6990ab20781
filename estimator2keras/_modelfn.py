"""Converting a model_fn into a function that builds and compiles a Keras model.

The model_fn is read statement by statement. Each statement is classified — part of the
forward pass (layers and TF ops on the features), the loss, the optimizer, the train op, the
returned EstimatorSpec — and translated through the expression rules registered for that
role (layers, losses, optimizers...). Anything the converter cannot place raises
``Unsupported``: a model_fn is converted whole or left exactly as it was.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import RewriteContext, iter_calls
from estimator2keras._rule import Unsupported

MODEL_FN_PARAMS = ("features", "labels", "mode", "params", "config")
GLOBAL_STEP = frozenset({"train.get_global_step", "train.get_or_create_global_step"})
ESTIMATOR_SPEC = "estimator.EstimatorSpec"
SPEC_SIGNATURE = (
    "mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs",
    "training_chief_hooks", "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks",
)
UNSUPPORTED = "E2K901"


@dataclass
class LayerCall:
    """A layer applied in the forward pass: ``output = Layer(...)(inputs, **call_kwargs)``."""

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
class ModelConversion:
    builder_name: str
    builder: cst.FunctionDef
    takes_params: bool


class _Converter:
    def __init__(self, fn: cst.FunctionDef, ctx: RewriteContext, tf: str):
        self.fn = fn
        self.ctx = ctx
        self.tf = tf
        self.params = [p.name.value for p in fn.params.params]
        self.forward: dict[str, LayerCall] = {}
        self.forward_order: list[str] = []
        self.optimizer_vars: dict[str, cst.BaseExpression] = {}
        self.inline_optimizer: cst.BaseExpression | None = None
        self.loss_vars: dict[str, LossConversion] = {}
        self.train_op_vars: set[str] = set()
        self.global_step_vars: set[str] = set()
        self.spec_loss: LossConversion | None = None

    # -- helpers --------------------------------------------------------------------------
    def refuse(self, node: cst.CSTNode, reason: str):
        raise Unsupported(reason, node, UNSUPPORTED)

    def role_of(self, call: cst.CSTNode) -> tuple[str | None, str | None]:
        path = self.ctx.call_api_path(call)
        if path is None:
            return None, None
        return self.ctx.rules.expression_role(path), path

    def translate(self, role: str, call: cst.Call):
        path = self.ctx.call_api_path(call)
        rule = self.ctx.rules.expression_rule(role, path) if path else None
        if rule is None:
            self.refuse(call, f"`{_emit.code(call.func)}` has no enabled conversion rule")
        try:
            return rule().convert(call, self.ctx, self.tf)
        except Unsupported as exc:
            exc.code = exc.code or rule.code
            exc.node = exc.node or call
            raise

    # -- reading the model_fn -------------------------------------------------------------
    def check_signature(self) -> None:
        fn = self.fn
        if fn.decorators:
            self.refuse(fn, "a decorated model_fn is not converted")
        params = fn.params
        if isinstance(params.star_arg, (cst.Param, cst.ParamStar)) or params.kwonly_params or params.star_kwarg or params.posonly_params:
            self.refuse(fn, "a model_fn with *args, **kwargs or keyword-only parameters is not converted")
        for name in self.params:
            if name not in MODEL_FN_PARAMS:
                self.refuse(fn, f"model_fn parameter `{name}` is not one the Estimator passes")
        if "features" not in self.params:
            self.refuse(fn, "the model_fn has no `features` parameter")
        for name in ("config",):
            if name in self.params and self._reads(name):
                self.refuse(fn, f"the model_fn reads `{name}`, which e2k does not convert yet")

    def _reads(self, name: str) -> list[cst.Name]:
        return [
            node
            for node in _walk(self.fn.body)
            if isinstance(node, cst.Name) and node.value == name and self._is_read(node)
        ]

    def _is_read(self, name: cst.Name) -> bool:
        parent = self.ctx.parent(name)
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            return False
        if isinstance(parent, cst.Arg) and parent.keyword is name:
            return False
        return True

    def convert(self) -> tuple[list[cst.BaseStatement], bool]:
        """The builder's body statements, and whether it needs ``params``."""
        self.check_signature()
        body = self.fn.body
        if not isinstance(body, cst.IndentedBlock):
            self.refuse(self.fn, "a one-line model_fn is not converted")
        statements = list(body.body)
        plans = []
        model_placed = False
        for index, stmt in enumerate(statements):
            emitted = self.read_statement(stmt, index == 0, last=index == len(statements) - 1)
            if emitted == "forward":
                emitted = [] if model_placed else ["model"]
                model_placed = True
            plans.append((stmt, emitted))

        # Everything is read: now the model, the loss and the optimizer are known.
        out: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for stmt, emitted in plans:
            new_statements: list[cst.BaseStatement] = []
            for item in emitted:
                if item == "model":
                    new_statements.append(self.model_statement())
                elif item == "compile":
                    new_statements.extend(self.compile_statements())
                else:
                    new_statements.append(item)
            if not new_statements:
                carried.extend(stmt.leading_lines)
                continue
            first = new_statements[0]
            new_statements[0] = first.with_changes(leading_lines=[*carried, *stmt.leading_lines])
            carried = []
            out.extend(new_statements)
        return out, "params" in self.params and bool(self._reads("params"))

    def read_statement(self, stmt: cst.BaseStatement, first: bool, last: bool):
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            self.refuse(stmt, "this statement in the model_fn is not converted (e2k reads one simple statement per line)")
        small = stmt.body[0]
        if first and isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            return [stmt]
        if isinstance(small, cst.Return):
            if not last:
                self.refuse(stmt, "the model_fn returns before its end")
            self.read_return(small)
            return ["compile"]
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            self.refuse(stmt, "this statement in the model_fn is not converted")
        name = small.targets[0].target.value
        value = small.value
        role, path = self.role_of(value)
        if path in GLOBAL_STEP:
            self.global_step_vars.add(name)
            return []
        if role == "optimizer":
            self.optimizer_vars[name] = value
            return [stmt.with_changes(body=[small.with_changes(value=self.translate("optimizer", value))])]
        if role == "loss":
            self.loss_vars[name] = self.read_loss(value)
            return []
        if self.is_minimize(value):
            self.train_op_vars.add(name)
            return []
        self.read_forward(name, value, stmt)
        return "forward"

    def is_minimize(self, value: cst.BaseExpression) -> bool:
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
            return False
        if value.func.attr.value != "minimize":
            return False
        receiver = value.func.value
        if isinstance(receiver, cst.Name) and receiver.value in self.optimizer_vars:
            optimizer = None
        elif self.role_of(receiver)[0] == "optimizer":
            optimizer = receiver
        else:
            return False
        args = {}
        for i, arg in enumerate(value.args):
            key = arg.keyword.value if arg.keyword else ("loss", "global_step", "var_list")[i] if i < 3 else "?"
            args[key] = arg.value
        loss = args.pop("loss", None)
        if not (isinstance(loss, cst.Name) and loss.value in self.loss_vars):
            self.refuse(value, "`minimize` is not called on the loss e2k converted")
        step = args.pop("global_step", None)
        if step is not None and not (
            (isinstance(step, cst.Name) and step.value in self.global_step_vars)
            or self.ctx.call_api_path(step) in GLOBAL_STEP
        ):
            self.refuse(value, "`minimize(global_step=...)` is not the global step")
        if args:
            self.refuse(value, f"`minimize({', '.join(args)}=...)` is not converted")
        if optimizer is not None:
            self.inline_optimizer = self.translate("optimizer", optimizer)
        return True

    def read_loss(self, value: cst.Call) -> LossConversion:
        loss: LossConversion = self.translate("loss", value)
        if not (isinstance(loss.labels, cst.Name) and loss.labels.value == "labels"):
            self.refuse(value, "the loss does not compare the model_fn's `labels` directly")
        if not (isinstance(loss.predictions, cst.Name) and loss.predictions.value in self.forward):
            self.refuse(value, "the loss is not computed on the output of the model's layers")
        return loss

    def read_forward(self, name: str, value: cst.BaseExpression, stmt: cst.BaseStatement) -> None:
        if name in self.forward or name in ("features", "labels"):
            self.refuse(stmt, f"`{name}` is assigned twice in the forward pass")
        layer = self.layer_call(value)
        if layer is None:
            self.refuse(stmt, "this statement is not a layer e2k can convert")
        self.forward[name] = layer
        self.forward_order.append(name)

    def layer_call(self, value: cst.BaseExpression) -> LayerCall | None:
        if not isinstance(value, cst.Call):
            return None
        role, _ = self.role_of(value)
        if role == "layer_function":
            return self.translate("layer_function", value)
        if isinstance(value.func, cst.Call) and self.role_of(value.func)[0] == "layer":
            if len(value.args) != 1 or value.args[0].keyword is not None:
                self.refuse(value, "a layer called with more than its input is not converted yet")
            return LayerCall(self.translate("layer", value.func), value.args[0].value)
        return None

    def read_return(self, ret: cst.Return) -> None:
        value = ret.value
        if not (isinstance(value, cst.Call) and self.ctx.call_api_path(value) == ESTIMATOR_SPEC):
            self.refuse(ret, "the model_fn does not return an EstimatorSpec(...)")
        from estimator2keras._units import bind_arguments

        args = bind_arguments(value, SPEC_SIGNATURE)
        for key in args:
            if key not in ("mode", "loss", "train_op"):
                self.refuse(args[key], f"EstimatorSpec({key}=...) is not converted yet")
        loss = args.get("loss")
        if loss is None or not (isinstance(loss.value, cst.Name) and loss.value.value in self.loss_vars):
            self.refuse(ret, "the EstimatorSpec's loss is not a loss e2k converted")
        train_op = args.get("train_op")
        if train_op is None or not (isinstance(train_op.value, cst.Name) and train_op.value.value in self.train_op_vars):
            self.refuse(ret, "the EstimatorSpec's train_op is not `optimizer.minimize(loss)`")
        self.spec_loss = self.loss_vars[loss.value.value]
        mode = args.get("mode")
        if mode is not None and not (isinstance(mode.value, cst.Name) and mode.value.value == "mode"):
            self.refuse(ret, "EstimatorSpec(mode=...) is not the model_fn's `mode`")
        for name in ("mode", "labels"):
            if name in self.params:
                self._check_only_used_by_spec_and_loss(name)

    def _check_only_used_by_spec_and_loss(self, name: str) -> None:
        for read in self._reads(name):
            stmt = self.ctx.enclosing_statement(read)
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
            if isinstance(small, cst.Return):
                continue
            if isinstance(small, cst.Assign) and small.targets[0].target.value in self.loss_vars:
                continue
            self.refuse(read, f"the model_fn uses `{name}` in a way e2k does not convert yet")

    # -- writing the Keras model ----------------------------------------------------------
    def model_statement(self) -> cst.BaseStatement:
        chain = self.sequential_chain()
        layers = cst.List([cst.Element(layer.constructor) for layer in chain])
        layers = layers.with_changes(elements=_comma_separated(layers.elements))
        return _emit.statement("model = {tf}.keras.Sequential({layers})", tf=self.tf, layers=layers)

    def sequential_chain(self) -> list[LayerCall]:
        previous = "features"
        chain = []
        for name in self.forward_order:
            layer = self.forward[name]
            if not (isinstance(layer.inputs, cst.Name) and layer.inputs.value == previous) or layer.call_kwargs:
                self.refuse(
                    layer.inputs,
                    "the forward pass is not a single chain of layers from `features`, which e2k does not convert yet",
                )
            chain.append(layer)
            previous = name
        if self.spec_loss is None or not (
            isinstance(self.spec_loss.predictions, cst.Name) and self.spec_loss.predictions.value == previous
        ):
            self.refuse(self.fn, "the loss is not computed on the last layer's output")
        return chain

    def compile_statements(self) -> list[cst.BaseStatement]:
        if self.inline_optimizer is not None:
            optimizer = self.inline_optimizer
        elif len(self.optimizer_vars) == 1:
            optimizer = cst.Name(next(iter(self.optimizer_vars)))
        else:
            self.refuse(self.fn, "e2k found no single optimizer in the model_fn")
        assert self.spec_loss is not None
        compile_stmt = _emit.statement(
            "model.compile(optimizer={optimizer}, loss={loss})", optimizer=optimizer, loss=self.spec_loss.keras_loss
        )
        return [compile_stmt, _emit.statement("return model")]


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _comma_separated(elements):
    elements = list(elements)
    return [
        e.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(elements) - 1 else cst.MaybeSentinel.DEFAULT)
        for i, e in enumerate(elements)
    ]


def convert_model_fn(fn: cst.FunctionDef, ctx: RewriteContext, tf: str, taken: set[str]) -> ModelConversion:
    """Convert ``fn`` (a model_fn definition) into a Keras model builder, or raise Unsupported."""
    converter = _Converter(fn, ctx, tf)
    body, takes_params = converter.convert()
    name = _emit.unique_name(_emit.builder_name(fn.name.value), taken - {fn.name.value})
    params = [cst.Param(cst.Name("params"))] if takes_params else []
    builder = fn.with_changes(
        leading_lines=(),
        name=cst.Name(name),
        params=cst.Parameters(params=params),
        body=fn.body.with_changes(body=body),
    )
    return ModelConversion(name, builder, takes_params)


__all__ = ["LayerCall", "LossConversion", "ModelConversion", "convert_model_fn", "iter_calls"]
