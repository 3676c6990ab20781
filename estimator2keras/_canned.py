"""Canned Estimators (DNN, linear, wide & deep) as Keras models with the same math.

The conversion reads the Estimator's arguments and its feature columns (``_feature_columns``)
and emits one Keras model class, a subclass of the ``CannedModel`` helper (``WideDeepModel``
where a linear model has its own optimizer), which holds what every canned model does alike
(``preprocess`` mapped over every dataset the program feeds the model, the head's labels,
weights and predictions, a served model's raw features preprocessed first). The class holds
what is its own:

- ``features(features)`` does what the feature columns did to the raw features (lookups,
  hashing, crossing, bucketing, normalizer functions), in ``tf.data``
  (``input_fn().map(model.preprocess)``): Keras 3 cannot distribute a dataset of strings
  under ``MirroredStrategy``, and preprocessing in ``tf.data`` is what TensorFlow's guide
  recommends anyway;
- ``network(inputs, training=False)`` is the network: one-hot and embedded categorical
  columns, the hidden layers (dropout, batch normalization), the logits, and a linear
  model with one weight matrix per column;
- the head becomes ``compile``'s loss and metrics (the ``head_metrics`` helper): TF1
  (``tf.compat.v1.estimator.*``) canned heads *sum* the loss over the batch
  (``reduction="sum"``), TF2 ones average it.

Variables are created in the Estimator's order (DNN inputs sorted by column name, hidden
layers, logits, then the linear model's weights sorted by column name and its bias), so
that ``e2k parity`` pairs them one to one.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import GlobalScope, QualifiedNameProvider

from estimator2keras import _emit
from estimator2keras._column_writer import ColumnsWriter, _packed, _reindent
from estimator2keras._feature_columns import Column, ColumnReader, assign_names, respelled
from estimator2keras._rule import Unsupported
from estimator2keras._units import Binding, bind_arguments, resolve
from estimator2keras._nodes import walk as _walk

CLASSIFIERS = ("DNNClassifier", "LinearClassifier", "DNNLinearCombinedClassifier")
#: Each canned class's parameters, in order, as tensorflow_estimator 2.15 declares them.
SIGNATURES = {
    ("DNNClassifier", True): (
        "hidden_units", "feature_columns", "model_dir", "n_classes", "weight_column", "label_vocabulary",
        "optimizer", "activation_fn", "dropout", "input_layer_partitioner", "config", "warm_start_from",
        "loss_reduction", "batch_norm"),
    ("DNNClassifier", False): (
        "hidden_units", "feature_columns", "model_dir", "n_classes", "weight_column", "label_vocabulary",
        "optimizer", "activation_fn", "dropout", "config", "warm_start_from", "loss_reduction", "batch_norm"),
    ("DNNRegressor", True): (
        "hidden_units", "feature_columns", "model_dir", "label_dimension", "weight_column", "optimizer",
        "activation_fn", "dropout", "input_layer_partitioner", "config", "warm_start_from", "loss_reduction",
        "batch_norm"),
    ("DNNRegressor", False): (
        "hidden_units", "feature_columns", "model_dir", "label_dimension", "weight_column", "optimizer",
        "activation_fn", "dropout", "config", "warm_start_from", "loss_reduction", "batch_norm"),
    ("LinearClassifier", True): (
        "feature_columns", "model_dir", "n_classes", "weight_column", "label_vocabulary", "optimizer", "config",
        "partitioner", "warm_start_from", "loss_reduction", "sparse_combiner"),
    ("LinearClassifier", False): (
        "feature_columns", "model_dir", "n_classes", "weight_column", "label_vocabulary", "optimizer", "config",
        "warm_start_from", "loss_reduction", "sparse_combiner"),
    ("LinearRegressor", True): (
        "feature_columns", "model_dir", "label_dimension", "weight_column", "optimizer", "config", "partitioner",
        "warm_start_from", "loss_reduction", "sparse_combiner"),
    ("LinearRegressor", False): (
        "feature_columns", "model_dir", "label_dimension", "weight_column", "optimizer", "config",
        "warm_start_from", "loss_reduction", "sparse_combiner"),
    ("DNNLinearCombinedClassifier", True): (
        "model_dir", "linear_feature_columns", "linear_optimizer", "dnn_feature_columns", "dnn_optimizer",
        "dnn_hidden_units", "dnn_activation_fn", "dnn_dropout", "n_classes", "weight_column", "label_vocabulary",
        "input_layer_partitioner", "config", "warm_start_from", "loss_reduction", "batch_norm",
        "linear_sparse_combiner"),
    ("DNNLinearCombinedClassifier", False): (
        "model_dir", "linear_feature_columns", "linear_optimizer", "dnn_feature_columns", "dnn_optimizer",
        "dnn_hidden_units", "dnn_activation_fn", "dnn_dropout", "n_classes", "weight_column", "label_vocabulary",
        "config", "warm_start_from", "loss_reduction", "batch_norm", "linear_sparse_combiner"),
    ("DNNLinearCombinedRegressor", True): (
        "model_dir", "linear_feature_columns", "linear_optimizer", "dnn_feature_columns", "dnn_optimizer",
        "dnn_hidden_units", "dnn_activation_fn", "dnn_dropout", "label_dimension", "weight_column",
        "input_layer_partitioner", "config", "warm_start_from", "loss_reduction", "batch_norm",
        "linear_sparse_combiner"),
    ("DNNLinearCombinedRegressor", False): (
        "model_dir", "linear_feature_columns", "linear_optimizer", "dnn_feature_columns", "dnn_optimizer",
        "dnn_hidden_units", "dnn_activation_fn", "dnn_dropout", "label_dimension", "weight_column", "config",
        "warm_start_from", "loss_reduction", "batch_norm", "linear_sparse_combiner"),
}
#: Arguments a Keras program has no use for, reported as E2K400 by the plan (not claimed).
NOT_CARRIED = frozenset({"model_dir", "warm_start_from"})

# Optimizers a canned Estimator accepts by name. TF1 classes take the Estimator's learning
# rate; TF2 (Keras legacy) classes take it too, except where the Estimator passes none.
# (Adam and, for TF1, RMSProp are e2k's helper classes: named_optimizer.)
TF1_BY_NAME = {
    "Adagrad": "Adagrad({lr}, epsilon=0.0)",  # TF1's Adagrad had no epsilon
    "Adam": "Adam({lr}, epsilon=1e-08)",
    "Ftrl": "Ftrl({lr})",
    "RMSProp": "RMSprop({lr}, epsilon=1e-10)",
    "SGD": "SGD({lr})",
}
KERAS_BY_NAME = {"Adagrad": "Adagrad", "Adam": "Adam", "Ftrl": "Ftrl", "RMSProp": "RMSprop", "SGD": "SGD"}
KERAS_DEFAULT_LR = 0.001
#: TF activation functions that Keras names (the same functions): written as the name.
KERAS_ACTIVATIONS = frozenset({"relu", "relu6", "elu", "selu", "tanh", "sigmoid", "softplus", "softsign", "swish",
                               "gelu", "exponential", "hard_sigmoid"})
#: Reductions of tf.losses.Reduction / tf.compat.v1.losses.Reduction, by attribute.
REDUCTIONS = {"SUM": "sum", "SUM_OVER_BATCH_SIZE": "sum_over_batch_size"}


@dataclass
class Tower:
    columns: list[Column]
    hidden_units: list[cst.BaseExpression] = field(default_factory=list)
    #: Hidden units computed by the program (``hidden_units=args['hidden_units']``): given to the
    #: model's constructor where the Estimator was built, the layers made from them.
    hidden_given: cst.BaseExpression | None = None
    activation: str = '"relu"'
    dropout: cst.BaseExpression | None = None
    batch_norm: bool = False
    optimizer: cst.BaseExpression | None = None


@dataclass
class Canned:
    """What a canned Estimator computes, read from its constructor."""

    cls: str  # DNNClassifier, ...
    v1: bool
    head: str  # "binary" | "multi" | "regression"
    units: str  # the logits' width, as code
    dnn: Tower | None
    linear: Tower | None
    reduction: str  # "sum" | "sum_over_batch_size"
    weight_key: str | None = None
    weight_normalizer: cst.BaseExpression | None = None
    label_vocabulary: cst.BaseExpression | None = None
    sparse_combiner: str = "sum"


def is_v1(ctx, call: cst.Call) -> bool:
    """``tf.compat.v1.estimator.DNNClassifier`` (TF1 semantics) rather than ``tf.estimator.DNNClassifier``."""
    names = ctx.get_metadata(QualifiedNameProvider, call.func, set())
    return any(n.name.startswith(("tensorflow.compat.v1.", "tensorflow_estimator.compat.v1.")) for n in names)


# ---------------------------------------------------------------------------------------------
# Reading the constructor
# ---------------------------------------------------------------------------------------------
class CannedReader:
    def __init__(self, unit, plan, ctx, code: str):
        self.unit, self.plan, self.ctx, self.code = unit, plan, ctx, code
        self.tf = plan.tf
        self.cls = unit.api_path.rsplit(".", 1)[-1]
        self.v1 = is_v1(ctx, unit.call)
        self.args = bind_arguments(unit.call, SIGNATURES[(self.cls, self.v1)])
        self.columns = ColumnReader(ctx)
        self.columns.site_scope = ctx.scope(unit.call)

    def value(self, name: str) -> cst.BaseExpression | None:
        arg = self.args.get(name)
        if arg is None or _emit.code(arg.value) == "None":
            return None
        return arg.value

    def refuse(self, node, reason: str):
        raise Unsupported(reason, node, self.code)

    def read(self) -> Canned:
        for name in ("input_layer_partitioner", "partitioner"):
            if self.value(name) is not None:
                self.refuse(self.args[name], f"{name}= shards variables across parameter servers; not converted")
        head, units = self.read_head()
        dnn = linear = None
        if self.cls.startswith("DNNLinearCombined"):
            dnn_columns = self.value("dnn_feature_columns")
            linear_columns = self.value("linear_feature_columns")
            if dnn_columns is not None:
                dnn = self.read_dnn(dnn_columns, "dnn_hidden_units", "dnn_activation_fn", "dnn_dropout", "dnn_optimizer")
            if linear_columns is not None:
                linear = self.read_linear(linear_columns, "linear_optimizer")
            if dnn is None and linear is None:
                self.refuse(self.unit.call, "neither linear_feature_columns nor dnn_feature_columns is given")
        elif self.cls.startswith("DNN"):
            dnn = self.read_dnn(self.value("feature_columns"), "hidden_units", "activation_fn", "dropout", "optimizer")
        else:
            linear = self.read_linear(self.value("feature_columns"), "optimizer")
        canned = Canned(self.cls, self.v1, head, units, dnn, linear, self.read_reduction())
        if dnn is not None:
            dnn.batch_norm = self.read_flag("batch_norm")
        combiner_arg = "linear_sparse_combiner" if dnn is not None or self.cls.startswith("DNNLinear") else "sparse_combiner"
        combiner = self.value(combiner_arg)
        if combiner is not None:
            text = self.columns.string(combiner)
            if text not in ("sum", "mean", "sqrtn"):
                self.refuse(combiner, "the sparse combiner is not a literal 'sum', 'mean' or 'sqrtn'")
            canned.sparse_combiner = text
        self.read_weight(canned)
        canned.label_vocabulary = self.value("label_vocabulary")
        if canned.label_vocabulary is not None and head == "regression":
            self.refuse(canned.label_vocabulary, "label_vocabulary on a regressor")
        if head == "regression" and canned.reduction == "sum" and units != "1":
            self.refuse(self.args.get("label_dimension"), "a summed loss over several label dimensions: Keras's "
                        "MeanSquaredError averages over them first; not converted yet")
        return canned

    def read_head(self) -> tuple[str, str]:
        if self.cls in CLASSIFIERS:
            n = self.value("n_classes")
            count = 2 if n is None else self.columns.integer(n)
            if count is None:
                self.refuse(n, "n_classes is not an int literal, nor a constant of the module")
            if count < 2:
                self.refuse(n, f"n_classes is {count} (`{_emit.code(n)}`); a classifier has 2 classes or more")
            return ("binary", "1") if count == 2 else ("multi", str(count))
        dimension = self.value("label_dimension")
        if dimension is None:
            return "regression", "1"
        count = self.columns.integer(dimension)
        if count is None:
            self.refuse(dimension, "label_dimension is not an int literal")
        return "regression", str(count)

    def read_reduction(self) -> str:
        given = self.value("loss_reduction")
        if given is None:
            return "sum" if self.v1 else "sum_over_batch_size"
        path = self.ctx.api_path(given) or ""
        name = path.rsplit(".", 1)[-1]
        if path.startswith(("losses.Reduction.", "keras.losses.Reduction.")) and name in REDUCTIONS:
            return REDUCTIONS[name]
        text = self.columns.string(given)
        if text in REDUCTIONS.values():
            return text
        self.refuse(given, "this loss_reduction is not converted (SUM and SUM_OVER_BATCH_SIZE are)")

    def read_flag(self, name: str) -> bool:
        value = self.value(name)
        if value is None:
            return False
        if isinstance(value, cst.Name) and value.value in ("True", "False"):
            return value.value == "True"
        self.refuse(value, f"{name}= is not True or False")

    def read_dnn(self, columns_expr, hidden_arg, activation_arg, dropout_arg, optimizer_arg) -> Tower:
        if columns_expr is None:
            self.refuse(self.unit.call, "no feature columns")
        columns = self.columns.read_list(columns_expr)
        if any(c.family is not None for c in columns) and len(columns) > 1:
            family = next(c for c in columns if c.family is not None)
            self.refuse(family.call, "columns whose keys are known only at run time, with other columns: the "
                        "Estimator orders its inputs by name, which e2k cannot tell here; not converted yet")
        for column in columns:
            if column.kind not in ("numeric", "bucketized", "indicator", "embedding"):
                self.refuse(column.call, f"a {column.kind} column cannot feed a DNN (wrap it in indicator_column "
                            "or embedding_column); the Estimator would refuse it too")
        hidden = self.value(hidden_arg)
        units = self.columns.literal_sequence(hidden) if hidden is not None else None
        if hidden is None:
            self.refuse(self.unit.call, "no hidden units")
        if units is not None and not units:
            self.refuse(hidden, "an empty list of hidden units")
        tower = Tower(columns, hidden_units=[respelled(self.ctx, u, self.tf) for u in units or []])
        if units is None:
            # Computed by the program: evaluated where the Estimator was built, as it was.
            tower.hidden_given = respelled(self.ctx, hidden, self.tf)
        activation = self.value(activation_arg)
        if activation is not None:
            path = self.ctx.api_path(activation) or ""
            name = path.rsplit(".", 1)[-1]
            if path in (f"nn.{name}", f"math.{name}", f"keras.activations.{name}") and name in KERAS_ACTIVATIONS:
                tower.activation = f'"{name}"'
            else:
                tower.activation = _emit.code(respelled(self.ctx, activation, self.tf))
        dropout = self.value(dropout_arg)
        tower.dropout = respelled(self.ctx, dropout, self.tf) if dropout is not None else None
        tower.optimizer = self.read_optimizer(optimizer_arg, "Adagrad", self.dnn_learning_rate())
        return tower

    def read_linear(self, columns_expr, optimizer_arg) -> Tower:
        if columns_expr is None:
            self.refuse(self.unit.call, "no feature columns")
        columns = self.columns.read_list(columns_expr)
        for column in columns:
            if column.kind == "embedding":
                self.refuse(column.call, "an embedding column in a linear model is not converted yet")
            if column.family is not None:
                self.refuse(column.call, "a linear model of columns whose keys are known only at run time is not "
                            "converted yet")
        if not columns:
            self.refuse(columns_expr, "the linear model reads no feature columns (TensorFlow refuses that too)")
        tower = Tower(columns)
        tower.optimizer = self.read_optimizer(optimizer_arg, "Ftrl", self.linear_learning_rate(len(columns)))
        return tower

    # -- optimizers ---------------------------------------------------------------------------
    def dnn_learning_rate(self) -> str | None:
        """The learning rate the Estimator gives an optimizer named by a string (None: the
        Keras class's own default)."""
        if self.cls.startswith("DNNLinearCombined"):
            return "0.001"
        return "0.05" if self.v1 else None

    def linear_learning_rate(self, n_columns: int) -> str:
        if self.cls.startswith("DNNLinearCombined"):
            return _float(min(0.005, 1.0 / math.sqrt(n_columns)))
        return "0.2"

    def read_optimizer(self, name: str, default: str, learning_rate: str | None) -> cst.BaseExpression:
        optimizer = self._read_optimizer(name, default, learning_rate)
        self._check_sparse_updates(optimizer)
        return optimizer

    def _check_sparse_updates(self, optimizer: cst.BaseExpression) -> None:
        """Embedding columns give their tables sparse gradients: the Estimator's RMSprop and
        momentum (TF1's or Keras's legacy ones) updated the accumulators of the rows a batch
        looked up only, the new Keras optimizers decay every row's: reported (E2K101)."""
        text = _emit.code(optimizer)
        momentum = re.search(r"momentum=([0-9.e+-]+)", text)
        differs = "RMSprop" in text or (momentum is not None and float(momentum.group(1)) != 0.0)
        embedded = next((c for c in self.columns.columns.values() if c.kind in ("embedding", "shared_embedding")), None)
        if differs and embedded is not None and not getattr(self, "_sparse_reported", False):
            self._sparse_reported = True
            self.plan.leftover(embedded.call, "E2K101", (
                "this embedding column gives its table a sparse gradient: the Estimator's optimizer updated the "
                "accumulators of the rows each batch looked up only, while Keras's RMSprop and SGD with momentum decay "
                "every row's at every step, so rows move differently after their next lookup; keep Adagrad, Adam or "
                "plain SGD, or check with e2k parity on realistic data"))

    def _read_optimizer(self, name: str, default: str, learning_rate: str | None) -> cst.BaseExpression:
        given = self.value(name)
        if given is None and name in self.args:
            # `optimizer=None`: the linear Estimators' own default, Ftrl(min(0.2, 1/sqrt(n)))
            if name == "optimizer" and self.cls.startswith("Linear"):
                n = len(self.columns.read_list(self.value("feature_columns")))
                return self.named_optimizer("Ftrl", _float(min(0.2, 1.0 / math.sqrt(n))))
            self.refuse(self.args[name], f"{name}=None")
        if given is None:
            return self.named_optimizer(default, learning_rate)
        text = self.columns.string(given)
        if text is not None:
            if text not in TF1_BY_NAME:
                self.refuse(given, f"unknown optimizer name {text!r}")
            return self.named_optimizer(text, learning_rate)
        return self.optimizer_instance(given)

    def named_optimizer(self, name: str, learning_rate: str | None) -> cst.BaseExpression:
        if name == "Adam":  # TF1's Adam, and Keras's legacy one, round as TF1Adam does
            if self.v1:
                return _emit.expr(f"{self.tf1_adam()}({learning_rate})")
            return _emit.expr(f"{self.tf1_adam()}(learning_rate={learning_rate or _float(KERAS_DEFAULT_LR)}, "
                              "epsilon=1e-07)")
        if self.v1:
            if name == "RMSProp":  # TF1's RMSProp: accumulators from 1.0, TF1's update (E2K101)
                return _emit.expr(f"{_rewrite('tf1_optimizer_to_keras').tf1_rmsprop(self.plan, self.tf)}"
                                  f"({learning_rate}, epsilon=1e-10)")
            return _emit.expr(f"{self.tf}.keras.optimizers." + TF1_BY_NAME[name].format(lr=learning_rate))
        lr = learning_rate or _float(KERAS_DEFAULT_LR)
        helper = self.keras_v2_optimizer(name)
        if helper is not None:
            return _emit.expr(f"{helper}(learning_rate={lr})")
        return _emit.expr(f"{self.tf}.keras.optimizers.{KERAS_BY_NAME[name]}(learning_rate={lr})")

    def keras_v2_optimizer(self, name: str) -> str | None:
        """The helper class (its name) that updates as the Keras OptimizerV2 optimizer a TF2
        canned Estimator trained with where today's Keras one differs (E2K101): RMSprop and
        Adagrad add epsilon to the root, Keras's under it; None for the others."""
        if name in ("RMSProp", "RMSprop"):  # (the Estimator's name for it, Keras's class)
            template = _rewrite("keras_model_to_estimator_unwrap").KERAS_V2_RMSPROP
            return self.plan.add_helper("KerasV2RMSprop", lambda given: _emit.statements(
                template, name=given, tf=self.tf))
        if name == "Adagrad":
            return _rewrite("tf1_optimizer_to_keras").keras_v2_adagrad(self.plan, self.tf)
        return None

    def tf1_adam(self) -> str:
        """The name of the helper class that is Keras's Adam with TF1's float32 betas (E2K101)."""
        self.plan.imports.append(("numpy", None, "np"))
        return self.plan.add_helper("TF1Adam", lambda given: _emit.statements(
            _rewrite("tf1_optimizer_to_keras").TF1_ADAM, name=given, tf=self.tf))

    def optimizer_instance(self, given: cst.BaseExpression) -> cst.BaseExpression:
        expr = given
        if isinstance(expr, cst.Lambda) and not expr.params.params:
            expr = expr.body
        binding = None
        if isinstance(expr, cst.Name):
            bound = resolve(self.ctx, expr)
            if isinstance(bound, Binding):
                binding, expr = bound, bound.value
        if not isinstance(expr, cst.Call):
            self.refuse(given, "the optimizer is not a call e2k can follow")
        path = self.ctx.call_api_path(expr) or ""
        new = None
        if path.startswith("train.") and path.endswith("Optimizer"):
            rule = self.ctx.rules.expression_rule("optimizer", path)
            if rule is None:
                from estimator2keras.rewrites.tf1_optimizer_to_keras import OPTIMIZERS

                if path in OPTIMIZERS:  # a rule converts it, but the run disabled it
                    self.refuse(expr, f"`{_emit.code(expr.func)}` is converted by E2K101, which this run disables")
                self.refuse(expr, f"`{_emit.code(expr.func)}` has no Keras optimizer that updates as it did (e2k "
                                  "converts GradientDescent, Momentum, Adam, Adagrad, Adadelta, RMSProp and Ftrl); "
                                  "choose one of those, or write a Keras optimizer class for it")
            new = rule().convert(expr, self.ctx, self.tf)
            self.plan.fixed(expr, rule.code, f"`{_emit.code(expr.func)}` -> Keras ({rule.name})")
        elif path.startswith(("keras.optimizers.legacy.", "keras.optimizers.")) and path.count(".") in (2, 3):
            cls = path.rsplit(".", 1)[-1]
            if any(a.keyword and a.keyword.value == "decay" for a in expr.args):
                self.refuse(expr, "the Keras legacy optimizer's decay= has no counterpart in the new optimizers")
            new = _emit.expr(f"{self.tf}.keras.optimizers.{cls}").deep_clone()
            args = [a.with_changes(value=respelled(self.ctx, a.value, self.tf)) for a in expr.args]
            if cls == "Adam" and ".legacy." in path:
                # Keras's legacy Adam rounded as TF1's did: TF1Adam, with the legacy epsilon.
                new = cst.Name(self.tf1_adam())
                if not any(a.keyword is not None and a.keyword.value == "epsilon" for a in args) and \
                        sum(a.keyword is None for a in args) < 4:
                    args = [*(a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args),
                            _emit.keyword_arg("epsilon", cst.Float("1e-07"))]
                new = _emit.one_line_call(expr.with_changes(func=new), args)
            elif cls in ("RMSprop", "Adagrad") and not self.v1:
                # A TF2 canned Estimator trained with Keras's OptimizerV2 one (`legacy` in TF
                # 2.11-2.15, to which it converted a new one): epsilon added to the root.
                new = expr.with_changes(func=cst.Name(self.keras_v2_optimizer(cls)), args=args)
            else:
                new = expr.with_changes(func=new, args=args)
        if new is None:
            self.refuse(expr, "this optimizer is not one e2k converts (tf.compat.v1.train.*Optimizer or "
                              "tf.keras.optimizers.*)")
        for arg in expr.args:
            if any(isinstance(n, cst.Call) for n in _walk(arg.value)):
                self.refuse(arg, "a computed optimizer argument (a learning-rate decay?) is not converted here")
        if binding is not None:
            self.plan.remove_binding_if_only_here(binding, given)
        return new

    def read_weight(self, canned: Canned) -> None:
        weight = self.value("weight_column")
        if weight is None:
            return
        key = self.columns.string(weight)
        if key is not None:
            canned.weight_key = key
            return
        column = self.columns.read_column(weight)
        if column.kind != "numeric" or self.columns.numeric_width(column) != 1:
            self.refuse(weight, "weight_column is not a string or a numeric_column")
        canned.weight_key = column.key
        canned.weight_normalizer = column.value("normalizer_fn")


def _float(value: float) -> str:
    return repr(round(value, 12))


def _rewrite(module: str):
    """A rule's module, whose helper classes (the optimizers E2K101 and E2K008 write) a canned
    Estimator's optimizer is written with."""
    import importlib

    return importlib.import_module(f"estimator2keras.rewrites.{module}")


# ---------------------------------------------------------------------------------------------
# Writing the Keras model
# ---------------------------------------------------------------------------------------------
class ModelWriter(ColumnsWriter):
    """Source text of the Keras model class (and the linear-model layer it may need)."""

    def __init__(self, canned: Canned, reader: CannedReader, class_name: str, linear_class: str):
        towers = [t for t in (canned.dnn, canned.linear) if t is not None]
        super().__init__(reader.ctx, reader.tf, reader.columns, [col for t in towers for col in t.columns])
        self.c = canned
        self.reader = reader
        self.class_name = class_name
        self.linear_class = linear_class
        #: The names of the helpers the class builds on (HELPERS): its base class
        #: (CANNED_MODEL, or WIDE_DEEP_MODEL for a linear model with its own optimizer).
        self.canned_model = "CannedModel"
        self.head_metrics_list = "head_metrics"
        self.wide_deep_model = "WideDeepModel"
        #: ``forward_features(estimator, keys)``: the keys' code (None: every feature); False: none.
        self.forwarded: list[str] | None | bool = False

    # -- the class ------------------------------------------------------------------------------
    def init_lines(self) -> list[str]:
        tf = self.tf
        lines = self.layer_lines()
        dnn, linear = self.c.dnn, self.c.linear
        if dnn is not None:
            lines += self.embedding_lines(dnn.columns)
            if dnn.hidden_given is not None:
                lines.append(f"self.hidden_layers = [{tf}.keras.layers.Dense(units, activation={dnn.activation}) "
                             "for units in hidden_units]")
                if dnn.batch_norm:
                    lines.append(f"self.batch_norms = [{tf}.keras.layers.BatchNormalization(momentum=0.999) "
                                 "for _ in hidden_units]")
            for i, units in enumerate(dnn.hidden_units):
                lines.append(f"self.hiddenlayer_{i} = {tf}.keras.layers.Dense({_emit.code(units)}, "
                             f"activation={dnn.activation})")
                if dnn.batch_norm:
                    lines.append(f"self.batchnorm_{i} = {tf}.keras.layers.BatchNormalization(momentum=0.999)")
            if dnn.dropout is not None:
                lines.append(f"self.dropout = {tf}.keras.layers.Dropout({_emit.code(dnn.dropout)})")
            lines.append(f"self.logits = {tf}.keras.layers.Dense({self.c.units})")
        if linear is not None:
            names = ", ".join(f'"{c.name}"' for c in sorted(linear.columns, key=lambda c: c.name))
            lines.append(f"self.linear = {self.linear_class}({self.c.units}, [{names}])")
        return lines

    def features_lines(self) -> list[str]:
        """``features``: what the feature columns computed from the raw features."""
        return self.preprocess_lines() + _packed("return (", self.inputs, ")")

    def weights_lines(self) -> list[str]:
        """``example_weights``: the weight column as its normalizer_fn made it (the base
        class reads the column as it is)."""
        tf = self.tf
        weight = self.apply(self.c.weight_normalizer, f'features["{self.c.weight_key}"]')
        return [f"return {tf}.reshape({tf}.cast({weight}, {tf}.float32), [-1])"]

    def linear_input(self, column: Column) -> str:
        if column.kind == "numeric":
            return column.var
        if column.kind == "indicator":
            return self.one_hot(column.parent, "sum")
        return self.one_hot(column, self.c.sparse_combiner)

    def network_lines(self) -> list[str]:
        """``network``: the logits, from the inputs ``features`` gave."""
        unpack = f"{', '.join(self.inputs)}{',' if len(self.inputs) == 1 else ''} = inputs"
        lines = [unpack] if len(unpack) + 8 <= _emit.max_line() else _packed("(", self.inputs, ") = inputs")
        lines += self.id_cast_lines()
        dnn, linear = self.c.dnn, self.c.linear
        outputs = []
        if dnn is not None:
            lines += self.concat_lines(dnn.columns)
            if dnn.hidden_given is not None:
                layers = "zip(self.hidden_layers, self.batch_norms)" if dnn.batch_norm else "self.hidden_layers"
                lines.append(f"for {'hidden_layer, batch_norm' if dnn.batch_norm else 'hidden_layer'} in {layers}:")
                lines.append("    net = hidden_layer(net)")
                if dnn.dropout is not None:
                    lines.append("    net = self.dropout(net, training=training)")
                if dnn.batch_norm:
                    lines.append("    net = batch_norm(net, training=training)")
            for i in range(len(dnn.hidden_units)):
                lines.append(f"net = self.hiddenlayer_{i}(net)")
                if dnn.dropout is not None:
                    lines.append("net = self.dropout(net, training=training)")
                if dnn.batch_norm:
                    lines.append(f"net = self.batchnorm_{i}(net, training=training)")
            outputs.append("self.logits(net)")
        if linear is not None:
            parts = [self.linear_input(c) for c in sorted(linear.columns, key=lambda c: c.name)]
            outputs.append(f"self.linear(({', '.join(parts)}{',' if len(parts) == 1 else ''}))")
            if len(outputs[-1]) + 30 > _emit.max_line():
                outputs[-1] = "\n".join(["self.linear((", *[f"    {p}," for p in parts], "))"])
        if len(outputs) == 1:
            lines += f"return {outputs[0]}".split("\n")
        else:
            lines += f"dnn_logits = {outputs[0]}".split("\n")
            lines += f"linear_logits = {outputs[1]}".split("\n")
            lines.append("return dnn_logits + linear_logits")
        return lines

    def predict_lines(self) -> list[str]:
        """``predict_step``: the Estimator's predictions, a dict of arrays per example, so that
        ``model.predict`` gives what ``estimator.predict`` yielded (``pred["probabilities"]``)."""
        if self.forwarded is False:
            return []  # the base class's: the head's predictions
        tf = self.tf
        lines = [
            "def predict_step(self, data):",
            '    """The Estimator\'s predictions for a batch, as its head made them."""',
            "    if isinstance(data, tuple) and isinstance(data[0], (tuple, dict)):",
            "        data = data[0]  # (inputs, labels): a dataset with labels",
            "    logits = self(data, training=False)",
        ]
        if self.c.head == "regression":
            return self._forwarding(lines + ['    return {"predictions": logits}'])
        n = "2" if self.c.head == "binary" else self.c.units
        if self.c.head == "binary":
            lines += [f"    two_class_logits = {tf}.concat([{tf}.zeros_like(logits), logits], axis=1)",
                      f"    class_ids = {tf}.argmax(two_class_logits, axis=1)[:, None]",
                      f"    probabilities = {tf}.nn.softmax(two_class_logits)"]
        else:
            lines += [f"    class_ids = {tf}.argmax(logits, axis=1)[:, None]",
                      f"    probabilities = {tf}.nn.softmax(logits)"]
        lines.append(f"    all_class_ids = {tf}.tile({tf}.range({n})[None], [{tf}.shape(logits)[0], 1])")
        if self.c.label_vocabulary is not None:
            # The vocabulary as written (StringLookup.get_vocabulary() is Python: it fails in predict's graph).
            lines.append(f"    vocabulary = {tf}.constant({self.code(self.c.label_vocabulary)})")
            classes, all_classes = f"{tf}.gather(vocabulary, class_ids)", f"{tf}.gather(vocabulary, all_class_ids)"
        else:
            classes, all_classes = f"{tf}.strings.as_string(class_ids)", f"{tf}.strings.as_string(all_class_ids)"
        lines += ["    return {", '        "logits": logits,']
        if self.c.head == "binary":
            lines.append(f'        "logistic": {tf}.sigmoid(logits),')
        lines += ['        "probabilities": probabilities,',
                  '        "class_ids": class_ids,',
                  f'        "classes": {classes},',
                  '        "all_class_ids": all_class_ids,',
                  f'        "all_classes": {all_classes},',
                  "    }"]
        return self._forwarding(lines)

    def _forwarding(self, lines: list[str]) -> list[str]:
        """``forward_features(estimator, keys)``: the predictions also carry those features, as
        the raw features a served model gets (``data`` is then the features' dict)."""
        if self.forwarded is False:
            return lines
        start = max(i for i, line in enumerate(lines) if line.startswith("    return {"))
        lines[start] = lines[start].replace("    return {", "    predictions = {", 1)
        lines.append("    if isinstance(data, dict):")
        lines.append("        # forward_features(estimator, ...): the Estimator's predictions carried these features.")
        if self.forwarded is None:
            lines.append("        predictions.update(data)")
        else:
            lines += [f"        predictions[{key}] = data[{key}]" for key in self.forwarded]
        return lines + ["    return predictions"]

    # -- compile ------------------------------------------------------------------------------
    def loss(self, reduction: str | None = None) -> str:
        tf = self.tf
        reduction = reduction or self.c.reduction
        suffix = ', reduction="sum"' if reduction == "sum" else ""
        if self.c.head == "binary":
            return f"{tf}.keras.losses.BinaryCrossentropy(from_logits=True{suffix})"
        if self.c.head == "multi":
            return f"{tf}.keras.losses.SparseCategoricalCrossentropy(from_logits=True{suffix})"
        return f"{tf}.keras.losses.MeanSquaredError({suffix[2:]})"

    def head_metrics(self) -> list[tuple[str, str, str]]:
        """The head's evaluation metrics that Keras computes exactly: (key, attribute, metric code),
        then those add_metrics added. TF1's binary heads also gave `auc_precision_recall` by
        trapezoidal summation, which no Keras AUC does: it is left out (a read of it is
        reported, see ``eval_keys``)."""
        return self._head_metrics() + list(self.added)

    def _head_metrics(self) -> list[tuple[str, str, str]]:
        tf = self.tf
        if self.c.head == "binary":
            out = [("accuracy", "accuracy", f'{tf}.keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0)'),
                   ("average_loss", "average_loss",
                    f'{tf}.keras.metrics.BinaryCrossentropy(name="average_loss", from_logits=True)'),
                   ("precision", "precision", 'PrecisionOfClassIds(name="precision")'),
                   ("recall", "recall", 'RecallOfClassIds(name="recall")'),
                   ("auc", "auc", f'{tf}.keras.metrics.AUC(name="auc", from_logits=True)')]
            if not self.c.v1:
                out.append(("auc_precision_recall", "auc_precision_recall",
                            f'{tf}.keras.metrics.AUC(name="auc_precision_recall", curve="PR", from_logits=True)'))
            return out + [("label/mean", "label_mean", 'LabelMean(name="label/mean")'),
                          ("prediction/mean", "prediction_mean", 'PredictionMean(name="prediction/mean", '
                                                                 'activation="sigmoid")'),
                          ("accuracy_baseline", "accuracy_baseline", 'AccuracyBaseline(name="accuracy_baseline")')]
        if self.c.head == "multi":
            return [("accuracy", "accuracy", f'{tf}.keras.metrics.SparseCategoricalAccuracy(name="accuracy")'),
                    ("average_loss", "average_loss",
                     f'{tf}.keras.metrics.SparseCategoricalCrossentropy(name="average_loss", from_logits=True)')]
        return [("average_loss", "average_loss", f'{tf}.keras.metrics.MeanSquaredError(name="average_loss")'),
                ("label/mean", "label_mean", 'LabelMean(name="label/mean")'),
                ("prediction/mean", "prediction_mean", 'PredictionMean(name="prediction/mean")')]

    @property
    def head_name(self) -> str:
        """The head as the helpers name it: "binary", "multi_class" or "regression"."""
        return {"binary": "binary", "multi": "multi_class", "regression": "regression"}[self.c.head]

    def metrics_code(self) -> str:
        """The head's metrics as code: the helper's list (HEAD_METRICS_LIST), then those
        add_metrics added."""
        compat_v1 = ", compat_v1=True" if self.c.v1 and self.c.head == "binary" else ""
        listed = f'{self.head_metrics_list}("{self.head_name}"{compat_v1})'
        if not self.added:
            return listed
        # An added metric of a head metric's name replaced it in the Estimator's evaluate().
        replaced = sorted({key for key, _, _ in self.added} & {key for key, _, _ in self._head_metrics()})
        if len(replaced) == 1:
            listed = f"(m for m in {listed} if m.name != {replaced[0]!r})".replace("'", '"')
        elif replaced:
            listed = f"(m for m in {listed} if m.name not in {tuple(replaced)!r})".replace("'", '"')
        return f"[*{listed}, {', '.join(code for _, _, code in self.added)}]"

    #: The metrics add_metrics added (``_added_metrics.canned_metrics``): (key, attribute, code),
    #: and every key it added (converted or left for a human).
    added: list[tuple[str, str, str]] = []
    added_keys: list[str] = []

    def metric_definitions(self) -> list[str]:
        """The metric classes the head's metrics use (the head_metrics helper reads each)."""
        return [template.format(tf=self.tf) for template in HEAD_METRICS.values()]

    def eval_keys(self) -> tuple[set[str], set[str]]:
        """(the keys the Estimator's evaluate() gave, those the Keras model's evaluate() gives)."""
        keras = {"loss", *(key for key, _, _ in self.head_metrics())}
        estimator = {"loss", "global_step", "average_loss"}
        if self.c.head == "binary":
            estimator |= {"accuracy", "precision", "recall", "auc", "auc_precision_recall", "label/mean",
                          "prediction/mean", "accuracy_baseline"}
        elif self.c.head == "multi":
            estimator |= {"accuracy"}
        else:
            estimator |= {"label/mean", "prediction/mean"}
        return estimator | set(self.added_keys), keras

    # -- wide & deep: a linear model trained by its own optimizer --------------------------------
    def two_optimizers(self) -> bool:
        return self.c.dnn is not None and self.c.linear is not None

    def eager_build_lines(self) -> list[str]:
        """Build the layers in __init__, in the Estimator's order, so that the linear model's
        optimizer can be built before training (Keras 3 builds only compile's optimizer)."""
        dnn, linear = self.c.dnn, self.c.linear
        lines = ["# Built here, in the Estimator's order (the DNN, then the linear model), so that the",
                 "# linear model's own optimizer can be built before training."]
        widths = []
        for column in sorted(dnn.columns, key=lambda c: c.name):
            if column.kind == "numeric" and column.family is not None:
                width = self.width(column)
                widths.append(f"len(self.{column.var}_keys)" + (f" * {width}" if width != "1" else ""))
            elif column.kind == "numeric":
                widths.append(self.width(column))
            elif column.kind == "bucketized":
                widths.append(self.size(column))
            elif column.kind == "indicator":
                widths.append(self.size(column.parent))
            else:
                lines.append(f"self.{column.var}.build((None, {self.size(column.parent)}))")
                widths.append(self.arg(column, "dimension"))
        previous = _sum(widths)
        if dnn.hidden_given is not None:
            lines.append(f"width = {previous}")
            lines.append("for i, units in enumerate(hidden_units):")
            lines.append("    self.hidden_layers[i].build((None, width))")
            if dnn.batch_norm:
                lines.append("    self.batch_norms[i].build((None, units))")
            lines.append("    width = units")
            previous = "width"
        for i, units in enumerate(dnn.hidden_units):
            lines.append(f"self.hiddenlayer_{i}.build((None, {previous}))")
            if dnn.batch_norm:
                lines.append(f"self.batchnorm_{i}.build((None, {_emit.code(units)}))")
            previous = _emit.code(units)
        lines.append(f"self.logits.build((None, {previous}))")
        shapes = []
        for column in sorted(linear.columns, key=lambda c: c.name):
            if column.kind == "numeric":
                shapes.append(f"(None, {self.width(column)})")
            elif column.kind == "indicator":
                shapes.append(f"(None, {self.size(column.parent)})")
            else:
                shapes.append(f"(None, {self.size(column)})")
        lines.append(f"self.linear.build([{', '.join(shapes)}])")
        lines.append("self.linear_optimizer = linear_optimizer")
        lines.append("self.linear_optimizer.build(self.linear.trainable_weights)")
        return lines

    def head_lines(self) -> list[str]:
        """What the wide & deep base class trains and evaluates with: the head's loss, summed
        (the base class divides it by the global batch where the head averaged), and metrics."""
        tf = self.tf
        return [f"self.head_loss = {self.loss('sum')}", f'self.loss_tracker = {tf}.keras.metrics.Mean(name="loss")',
                f"self.head_metrics = {self.metrics_code()}"]

    def base_args(self) -> str:
        """The base class's arguments: the head, the logits' width, the labels' vocabulary, the
        weight column, and (wide & deep) whether the loss is a mean."""
        args = [f'"{self.head_name}"']
        if self.c.units != "1":
            args.append(f"units={self.c.units}")
        if self.c.label_vocabulary is not None:
            args.append(f"label_vocabulary={self.code(self.c.label_vocabulary)}")
        if self.c.weight_key is not None:
            args.append(f'weight_column="{self.c.weight_key}"')
        if self.two_optimizers() and self.c.reduction != "sum":
            args.append("mean_loss=True")
        return ", ".join(args)

    def model_class(self, indent: str = "    ") -> str:
        features = self.features_lines()
        network = self.network_lines()
        init = [f"super().__init__({self.base_args()})", *self.init_lines()]
        init_params = "self"
        if self.c.dnn is not None and self.c.dnn.hidden_given is not None:
            init_params += ", hidden_units"
        if self.two_optimizers():
            init_params += ", linear_optimizer"
            init += self.head_lines()
            init += self.eager_build_lines()
        if self.given:  # values read where the Estimator was built
            init_params = "self" + "".join(f", {param}" for param in self.given) + init_params[4:]
            init[1:1] = [f"self.{param} = {param}" for param in self.given]
        base = self.wide_deep_model if self.two_optimizers() else self.canned_model
        out = [f"class {self.class_name}({base}):",
               f'    """{self.summary()}"""',
               "",
               f"    def __init__({init_params}):"]
        out += [f"        {line}" if line else "" for line in init]
        if any(c.runtime_dtype for c in self.columns):
            tf = self.tf
            out += ["",
                    "    @staticmethod",
                    "    def vocabulary_lookup(vocabulary):",
                    '        """A vocabulary read from the data: its values are strings or integers, as feature',
                    '        columns infer it."""',
                    f"        if {tf}.constant(vocabulary).dtype.is_integer:",
                    f"            return {tf}.keras.layers.IntegerLookup(vocabulary=vocabulary)",
                    f"        return {tf}.keras.layers.StringLookup(vocabulary=vocabulary)"]
        out += ["", "    def features(self, features):"]
        out += [f"        {line}" for line in features]
        if self.c.weight_key is not None and self.c.weight_normalizer is not None:
            out += ["", "    def example_weights(self, features):"]
            out += [f"        {line}" for line in self.weights_lines()]
        out += ["", "    def network(self, inputs, training=False):"]
        out += [f"        {line}" for line in network]
        predict = self.predict_lines()
        if predict:
            out.append("")
            out += [f"    {line}" if line else "" for line in predict]
        return _reindent("\n".join(out) + "\n", indent)

    def summary(self) -> str:
        """The docstring: the Estimator, its hidden units, classes and loss."""
        version = "tf.compat.v1.estimator" if self.c.v1 else "tf.estimator"
        parts = []
        if self.c.dnn is not None:
            if self.c.dnn.hidden_given is not None:
                parts.append("hidden units as the program gives them")
            else:
                parts.append(f"hidden units [{', '.join(_emit.code(u) for u in self.c.dnn.hidden_units)}]")
        if self.c.head == "multi":
            parts.append(f"{self.c.units} classes")
        parts.append("loss summed over the batch" if self.c.reduction == "sum" else "loss averaged over the batch")
        return f"The canned {self.c.cls} ({version}): {', '.join(parts)}."

    def compile_args(self) -> tuple[str, list[str]]:
        """(optimizer code, extra constructor arguments) for building the model."""
        dnn, linear = self.c.dnn, self.c.linear
        optimizer = (dnn or linear).optimizer
        return _emit.code(optimizer), ([_emit.code(linear.optimizer)] if self.two_optimizers() else [])


def _sum(parts: list[str]) -> str:
    if all(p.isdigit() for p in parts):
        return str(sum(int(p) for p in parts))
    return " + ".join(parts)


#: Metric classes of the canned heads' metrics that Keras's own classes do not compute from logits.
HEAD_METRICS = {
    "PrecisionOfClassIds": """
class PrecisionOfClassIds({tf}.keras.metrics.Precision):
    \"\"\"The head's precision, of the predicted class (positive when the logit is above 0).\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, {tf}.cast(y_pred > 0, {tf}.float32), sample_weight)
""",
    "RecallOfClassIds": """
class RecallOfClassIds({tf}.keras.metrics.Recall):
    \"\"\"The head's recall, of the predicted class (positive when the logit is above 0).\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, {tf}.cast(y_pred > 0, {tf}.float32), sample_weight)
""",
    "LabelMean": """
class LabelMean({tf}.keras.metrics.Mean):
    \"\"\"The head's label/mean: the mean of the labels, weighted as the examples.\"\"\"

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state({tf}.cast(y_true, {tf}.float32), sample_weight)
""",
    "PredictionMean": """
class PredictionMean({tf}.keras.metrics.Mean):
    \"\"\"The head's prediction/mean: the mean of the predictions (the logits' sigmoid for a binary head).\"\"\"

    def __init__(self, activation=None, name=None):
        super().__init__(name=name)
        self.activation = activation

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self.activation is not None:
            y_pred = getattr({tf}.nn, self.activation)(y_pred)
        return super().update_state({tf}.cast(y_pred, {tf}.float32), sample_weight)
""",
    "AccuracyBaseline": """
class AccuracyBaseline(LabelMean):
    \"\"\"The head's accuracy_baseline: max(label mean, 1 - label mean), always predicting one class.\"\"\"

    def result(self):
        mean = super().result()
        return {tf}.maximum(mean, 1.0 - mean)
""",
}

DENSE_FEATURES = '''
def {name}(features):
    """The features as a canned Estimator's feature columns read them: a SparseTensor (a
    categorical feature of tf.Examples parsed with the columns' spec) made dense, a missing
    value being the one the columns ignore ("" for strings, -1 for ids)."""
    return {{
        key: {tf}.sparse.to_dense(value, "" if value.dtype == {tf}.string else -1)
        if isinstance(value, {tf}.SparseTensor) else value
        for key, value in features.items()
    }}
'''

HEAD_PREDICTIONS = '''
def {name}(logits, n_classes, vocabulary=None):
    """A canned classifier's predictions for a batch of logits (one logit for 2 classes, else
    one per class), as its head gave them: the probabilities, the predicted class's id and
    name (its label in `vocabulary`, else its id as a string), every class's ids and names."""
    predictions = {{"logits": logits}}
    if n_classes == 2:
        predictions["logistic"] = {tf}.sigmoid(logits)
        logits = {tf}.concat([{tf}.zeros_like(logits), logits], axis=1)
    class_ids = {tf}.argmax(logits, axis=1)[:, None]
    all_class_ids = {tf}.tile({tf}.range(n_classes)[None], [{tf}.shape(logits)[0], 1])
    if vocabulary is None:
        classes = {tf}.strings.as_string(class_ids)
        all_classes = {tf}.strings.as_string(all_class_ids)
    else:
        # The vocabulary as written (StringLookup.get_vocabulary() is Python: not in a graph).
        vocabulary = {tf}.constant(vocabulary)
        classes = {tf}.gather(vocabulary, class_ids)
        all_classes = {tf}.gather(vocabulary, all_class_ids)
    predictions.update(probabilities={tf}.nn.softmax(logits), class_ids=class_ids,
                       classes=classes, all_class_ids=all_class_ids,
                       all_classes=all_classes)
    return predictions
'''

LINEAR_MODEL = '''\
class {name}({tf}.keras.layers.Layer):
    """A canned Estimator's linear model: a weight matrix per feature column, created in the
    columns' name order, then the bias; all start at zero. Categorical columns come as
    one-hot rows, so a column adds the rows of its ids."""

    def __init__(self, units, column_names, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.column_names = column_names

    def build(self, input_shape):
        self.column_weights = [
            self.add_weight(name=f"{{name}}_weights", shape=(shape[-1], self.units), initializer="zeros")
            for name, shape in zip(self.column_names, input_shape)]
        self.bias = self.add_weight(name="bias_weights", shape=(self.units,), initializer="zeros")
        super().build(input_shape)

    def call(self, inputs):
        weighted_sums = [{tf}.matmul(x, w) for x, w in zip(inputs, self.column_weights)]
        return {tf}.nn.bias_add({tf}.add_n(weighted_sums), self.bias)
'''


CANNED_MODEL = '''
class {name}({tf}.keras.Model):
    """A canned Estimator as a Keras model. A subclass's `features` computes what its feature
    columns did to the raw features (`preprocess`, mapped over the datasets, runs it in
    tf.data); its `network` computes the logits from them. `head` is the Estimator's head
    ("binary", "multi_class" or "regression"), `units` the logits' width."""

    def __init__(self, head, units=1, label_vocabulary=None, weight_column=None):
        super().__init__()
        self.head, self.units, self.weight_column = head, units, weight_column
        self.label_vocabulary = label_vocabulary
        if label_vocabulary is not None:
            self.label_lookup = {tf}.keras.layers.StringLookup(
                vocabulary=label_vocabulary, num_oov_indices=0)

    def preprocess(self, features, labels=None):
        """Raw features (and labels) -> the model's inputs (and labels, and weights)."""
        features = dense_features(features)
        inputs = self.features(features)
        if labels is None:
            return inputs
        if self.label_vocabulary is not None:
            labels = self.label_lookup(labels)
        if self.head != "multi_class":
            labels = {tf}.reshape(labels, [-1, self.units])
        if self.weight_column is None:
            return inputs, labels
        return inputs, labels, self.example_weights(features)

    def example_weights(self, features):
        return {tf}.reshape({tf}.cast(features[self.weight_column], {tf}.float32), [-1])

    def call(self, inputs, training=False):
        if isinstance(inputs, dict):  # raw features, as a served model gets them
            inputs = self.preprocess(inputs)
        return self.network(inputs, training=training)

    def predict_step(self, data):
        """The Estimator's predictions for a batch, as its head made them."""
        if isinstance(data, tuple) and isinstance(data[0], (tuple, dict)):
            data = data[0]  # (inputs, labels): a dataset with labels
        logits = self(data, training=False)
        if self.head == "regression":
            return {{"predictions": logits}}
        n_classes = 2 if self.head == "binary" else self.units
        return head_predictions(logits, n_classes, self.label_vocabulary)
'''

#: The evaluate() key a tf.compat.v1 canned binary head gave and the Keras model does not.
AUC_PR_NOTE = ("The Keras model's evaluate() has no auc_precision_recall, which the tf.compat.v1 {estimator}'s "
               "binary head summed in trapezoids: no Keras AUC computes it.")

HEAD_METRICS_LIST = '''
def {name}(head, compat_v1=False):
    """A canned Estimator's head's metrics, as its evaluate() reported them, for a "binary",
    "multi_class" or "regression" head; a tf.compat.v1.estimator binary head's
    auc_precision_recall summed trapezoids, which no Keras AUC does (`compat_v1=True`: none)."""
    if head == "binary":
        metrics = [
            {tf}.keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0),
            {tf}.keras.metrics.BinaryCrossentropy(name="average_loss", from_logits=True),
            PrecisionOfClassIds(name="precision"),
            RecallOfClassIds(name="recall"),
            {tf}.keras.metrics.AUC(name="auc", from_logits=True),
        ]
        if not compat_v1:
            metrics.append({tf}.keras.metrics.AUC(name="auc_precision_recall", curve="PR", from_logits=True))
        return metrics + [
            LabelMean(name="label/mean"),
            PredictionMean(name="prediction/mean", activation="sigmoid"),
            AccuracyBaseline(name="accuracy_baseline"),
        ]
    if head == "multi_class":
        return [
            {tf}.keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            {tf}.keras.metrics.SparseCategoricalCrossentropy(name="average_loss", from_logits=True),
        ]
    return [
        {tf}.keras.metrics.MeanSquaredError(name="average_loss"),
        LabelMean(name="label/mean"),
        PredictionMean(name="prediction/mean"),
    ]
'''

WIDE_DEEP_MODEL = '''
class {name}(CannedModel):
    """A canned DNNLinearCombined Estimator as a Keras model: its linear model (`linear`)
    trained by its own optimizer (`linear_optimizer`), the rest by compile's, on the head's
    loss (`head_loss`); its metrics are the head's (`loss_tracker`, `head_metrics`). The loss
    of a replica's batch is summed (`mean_loss=False`, TF1's heads) or divided by the global
    batch, as the Estimator's optimizers applied it."""

    def __init__(self, head, mean_loss=False, **kwargs):
        super().__init__(head, **kwargs)
        self.mean_loss = mean_loss

    @property
    def metrics(self):
        return [self.loss_tracker, *self.head_metrics]

    def train_step(self, data):
        inputs, labels, weights = {tf}.keras.utils.unpack_x_y_sample_weight(data)
        with {tf}.GradientTape() as tape:
            logits = self(inputs, training=True)
            loss = self.batch_loss(labels, logits, weights)
        linear_vars = self.linear.trainable_variables
        dnn_vars = [v for v in self.trainable_variables if all(v is not w for w in linear_vars)]
        gradients = tape.gradient(loss, dnn_vars + linear_vars)
        self.optimizer.apply_gradients(zip(gradients[:len(dnn_vars)], dnn_vars))
        self.linear_optimizer.apply_gradients(zip(gradients[len(dnn_vars):], linear_vars))
        return self.update_metrics(loss, labels, logits, weights)

    def test_step(self, data):
        inputs, labels, weights = {tf}.keras.utils.unpack_x_y_sample_weight(data)
        logits = self(inputs, training=False)
        return self.update_metrics(self.batch_loss(labels, logits, weights), labels, logits, weights)

    def batch_loss(self, labels, logits, weights):
        loss = self.head_loss(labels, logits, sample_weight=weights)
        if self.mean_loss:
            replicas = {tf}.distribute.get_strategy().num_replicas_in_sync
            loss /= {tf}.cast({tf}.shape(logits)[0] * replicas, loss.dtype)
        return loss

    def update_metrics(self, loss, labels, logits, weights):
        # Like Keras's own: the loss over the global batch (a mean tracker counts each replica).
        replicas = {tf}.distribute.get_strategy().num_replicas_in_sync
        self.loss_tracker.update_state(loss * replicas, sample_weight={tf}.shape(logits)[0])
        for metric in self.head_metrics:
            metric.update_state(labels, logits, sample_weight=weights)
        return {{m.name: m.result() for m in self.metrics}}
'''


# ---------------------------------------------------------------------------------------------
# The conversion of one unit
# ---------------------------------------------------------------------------------------------
CANNED_PREDICT_SIGNATURE = "predict"


def convert(unit, plan, ctx, code: str) -> None:
    """Plan the conversion of a canned Estimator unit (raises Unsupported)."""
    reader = CannedReader(unit, plan, ctx, code)
    canned = reader.read()
    taken = plan.names_taken()
    module_scope = ctx.scope(ctx.module.body[0]) if ctx.module.body else None
    if module_scope is not None:
        taken |= {a.name for a in module_scope.assignments}
    removable = reader.columns.removable(list(plan.group_calls))
    removed_names = {b.name for b in removable}
    taken -= removed_names
    # Estimators converted together (a notebook that builds a second model from more columns)
    # each get their class: the second LinearClassifier's is LinearClassifierModel2.
    same = [call for call in plan.group_calls if ctx.call_api_path(call) == ctx.call_api_path(unit.call)]
    index = next((i for i, call in enumerate(same) if call is unit.call), 0)
    # Nor a class another unit of the file wrote (a second LinearClassifier of other columns):
    # the second definition would replace the first under one name.
    given = ctx.__dict__.setdefault("_e2k_canned_classes", set())
    class_name = _emit.unique_name(f"{canned.cls}Model{index + 1 if index else ''}", taken | given)
    given.add(class_name)
    linear_class = _emit.unique_name("LinearModel", taken | {class_name})
    writer = ModelWriter(canned, reader, class_name, linear_class)
    # A column is named as the source bound it, even where that statement stays (read elsewhere
    # too): the model's own names do not reach the module's.
    columns = reader.columns
    own = {b.name for b in columns.list_bindings + columns.extended_bindings + columns.bindings
           + columns.unpacked_bindings}
    assign_names(writer.columns, (taken | {class_name, linear_class}) - removed_names - own)
    for column in writer.columns:
        plan.fixed(column.call, "E2K504", f"feature column `{column.name}` -> Keras preprocessing")

    if unit.wrappers:
        # `estimator = add_metrics(estimator, metric_fn)`: more metrics of the head's logits (E2K205).
        from estimator2keras._added_metrics import canned_metrics

        added = canned_metrics(ctx, unit, plan, canned.head, canned.weight_key is not None)
        writer.added = [(key, attr, code) for key, attr, code, _ in added]
        writer.added_keys = [key for metric_fn in unit.metric_fns for key, _, _ in metric_fn.entries]
    if unit.forwarded:
        # `estimator = forward_features(estimator, KEY)`: the served model's predictions carry the
        # key (rule E2K205 takes the statement). predict() reads the preprocessed dataset, where
        # the raw features are gone.
        from estimator2keras._added_metrics import forwarded_keys

        if plan.uses("method", "predict"):
            raise Unsupported("forward_features: predict() of the Keras model reads its preprocessed inputs, where "
                              "the forwarded features are gone; only the exported model carries them",
                              unit.forwarded[0].call)
        keys = forwarded_keys(ctx, unit)
        writer.forwarded = None if keys is None else [writer.code(k) for k in keys]
        unit.forwarding_converted = True
    indent = ctx.module.default_indent
    definitions = [cst.parse_statement(_reindent(d.lstrip("\n"), indent)) for d in writer.metric_definitions()]
    if unit.wrappers:
        for _, _, _, needed in added:
            for definition in needed:
                if not any(definition.deep_equals(d) for d in definitions):
                    definitions.insert(0, definition)
    _add_base_classes(plan, writer)
    model_class = writer.model_class(indent)
    definitions.append(_fit_lines(cst.parse_statement(model_class), indent))
    plan.eval_keys = writer.eval_keys()  # read where evaluate()'s result is (E2K003, E2K002)
    if canned.linear is not None:
        definitions.insert(0, cst.parse_statement(_reindent(LINEAR_MODEL.format(name=linear_class, tf=plan.tf), indent)))

    optimizer, extra = writer.compile_args()
    var = plan.model_var
    given = [f"{param}={code}" for param, code in writer.given.items()]
    given += [f"hidden_units={_emit.code(canned.dnn.hidden_given)}"] if canned.dnn is not None and \
        canned.dnn.hidden_given is not None else []
    args = ", ".join(given + [f"linear_optimizer={e}" for e in extra])
    depth = _depth(ctx, unit.statement) + (1 if unit.config_value("train_distribute") is not None else 0)
    made = _emit.fit_line(_emit.statement(f"{var} = {class_name}({args})"), depth, ctx.module.default_indent)
    if canned.head == "binary" and canned.v1:
        # Listed in the file's header (the canned rules' notes).
        made = _emit.with_comment(made, AUC_PR_NOTE.format(estimator=unit.api_path.rsplit(".", 1)[-1]))
    plan.build.append(made)
    compile_args = [f"optimizer={optimizer}"]
    # The Estimator's metrics are weighted by weight_column; Keras weights only `weighted_metrics`.
    keyword = "weighted_metrics" if canned.weight_key is not None else "metrics"
    if not writer.two_optimizers():
        compile_args += [f"loss={writer.loss()}", f"{keyword}={writer.metrics_code()}"]
    compile_statement = _emit.statement(f"{var}.compile({', '.join(compile_args)})")
    depth = _depth(ctx, unit.statement) + (1 if unit.config_value("train_distribute") is not None else 0)
    plan.build.append(_emit.fit_line(compile_statement, depth, indent))

    _place_definitions(plan, ctx, unit, removable, definitions)
    plan.dataset_map = f"{var}.preprocess"
    # The model's predict_step gives the head's predictions dict. A canned Estimator exported
    # them as its "predict" signature; its classification / regression signatures needed one
    # serialized-Example input, and were left out of an export from other receiver tensors
    # (_export.export_signatures writes them where the receiver is one string tensor).
    plan.predictions_kind = "dict"
    plan.export_signatures = [CANNED_PREDICT_SIGNATURE]
    plan.canned_head = canned.head
    plan.claimed_args.update(name for name in reader.args if name not in NOT_CARRIED)


#: The helpers a canned model's class builds on: (the writer's attribute holding its name, the
#: helper, its template). Each template reads the ones before it under their catalogue names.
HELPERS = (
    (None, "dense_features", DENSE_FEATURES),
    (None, "head_predictions", HEAD_PREDICTIONS),
    ("head_metrics_list", "head_metrics", HEAD_METRICS_LIST),
    ("canned_model", "CannedModel", CANNED_MODEL),
    ("wide_deep_model", "WideDeepModel", WIDE_DEEP_MODEL),
)


def _add_base_classes(plan, writer: ModelWriter) -> None:
    """The base classes of the model's class, in the helpers module (under other names where
    the program has those names: what builds on them reads those)."""
    given: dict[str, str] = {}
    for attribute, key, template in HELPERS:
        if key == "WideDeepModel" and not writer.two_optimizers():
            continue
        for earlier, name in given.items():
            if name != earlier:
                template = re.sub(rf"\b{earlier}\b", name, template)
        given[key] = plan.add_helper(key, lambda name, t=template: _emit.statements(t, name=name, tf=plan.tf))
        if attribute is not None:
            setattr(writer, attribute, given[key])


def _fit_lines(klass: cst.ClassDef, indent: str) -> cst.ClassDef:
    """Wrap the long `self.x = Layer(...)` lines of __init__, one argument per line."""
    methods = []
    for method in klass.body.body:
        if isinstance(method, cst.FunctionDef) and method.name.value == "__init__":
            body = [_emit.fit_line(line, 2, indent) if isinstance(line, cst.SimpleStatementLine) else line
                    for line in method.body.body]
            method = method.with_changes(body=method.body.with_changes(body=body))
        methods.append(method)
    return klass.with_changes(body=klass.body.with_changes(body=methods))


def _depth(ctx, statement) -> int:
    depth, node = 0, ctx.parent(statement)
    while node is not None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.With, cst.If, cst.For, cst.While, cst.Try)):
            depth += 1
        node = ctx.parent(node)
    return depth


def _place_definitions(plan, ctx, unit, removable: list[Binding], definitions: list[cst.BaseStatement]) -> None:
    """The classes go where the feature columns were defined (at module level), else just
    before the Estimator was built; the columns' statements go."""
    module_level = [b for b in removable if isinstance(ctx.scope(b.statement), GlobalScope)
                    and ctx.parent(b.statement) is ctx.module]
    statements = sorted({id(b.statement): b.statement for b in removable}.values(),
                        key=lambda s: ctx.position(s))
    if len(plan.group_calls) > 1:
        # Estimators converted together share the columns' statements: each model's classes
        # go after the imports (the same class once), the statements go.
        for statement in statements:
            plan.remove_statement(statement)
        for definition in definitions:
            plan.add_helper(definition.name.value, lambda _, d=definition: [d])
        return
    first = None
    if module_level:
        first = min((b.statement for b in module_level), key=lambda s: ctx.position(s))
    for statement in statements:
        if statement is first:
            # Two blank lines above each class (the removed statement's own blank lines give way).
            spaced = [d.with_changes(leading_lines=[_emit.blank_line()] * 2) for d in definitions]
            plan.replace_statement(statement, spaced)
        else:
            plan.remove_statement(statement)
    if first is None:
        if not isinstance(ctx.scope(unit.statement), GlobalScope):
            # Built in a function: the classes that read none of its names (nor a class that
            # does) are module-level classes, in the module whose code builds the model.
            local = _local_classes(ctx, unit.statement, definitions)
            for definition in definitions:
                if definition not in local:
                    plan.add_helper(definition.name.value, lambda _, d=definition: [d])
            definitions = [d for d in definitions if d in local]
            if not definitions:
                return
        # Before the build; in a factory given its RunConfig by its caller, in the factory
        # still (what the caller makes, its strategy, goes to the caller).
        (plan.local_definitions if unit.factory is not None else plan.before_build).extend(definitions)


def _local_classes(ctx, statement, definitions: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """The classes that read a name bound in the function that holds ``statement`` (the
    model's ``embedding_size``), or a class that does. A name a method binds itself (its
    ``hidden_units`` parameter, an assignment) is the method's."""
    scope = ctx.scope(statement)
    if scope is None or isinstance(scope, GlobalScope):
        return []
    names = {a.name for a in scope.assignments}
    local: list[cst.BaseStatement] = []
    changed = True
    while changed:
        changed = False
        for definition in definitions:
            if definition not in local and _free_names(definition) & (names | {d.name.value for d in local}):
                local.append(definition)
                changed = True
    return [d for d in definitions if d in local]


def _free_names(node: cst.CSTNode, bound: frozenset[str] = frozenset()) -> set[str]:
    """The names ``node`` reads that it does not bind itself, function by function."""
    if isinstance(node, (cst.FunctionDef, cst.Lambda)):
        params = node.params
        own = {p.name.value for p in (*params.params, *params.kwonly_params, *params.posonly_params)}
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                own.add(star.name.value)
        for inner in _walk_nodes(node.body):
            if isinstance(inner, (cst.AssignTarget, cst.For, cst.CompFor, cst.AugAssign, cst.AnnAssign)):
                own.update(n.value for n in _names_in(inner.target))
        free = _free_names(node.body, bound | own)
        for decorator in getattr(node, "decorators", ()):
            free |= _free_names(decorator.decorator, bound)
        return free
    if isinstance(node, cst.Name):
        return set() if node.value in bound else {node.value}
    if isinstance(node, cst.Attribute):
        return _free_names(node.value, bound)  # `self.linear`: the attribute is no name
    if isinstance(node, cst.Arg):
        return _free_names(node.value, bound)  # a keyword is no name
    free: set[str] = set()
    for child in node.children:
        free |= _free_names(child, bound)
    return free


def _walk_nodes(node: cst.CSTNode):
    """``node``'s nodes, not entering the functions and classes it defines."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is node or not isinstance(current, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            stack.extend(current.children)


def _names_in(target: cst.BaseExpression) -> list[cst.Name]:
    """The names an assignment target binds: ``a``, ``a, (b, *c)``; not ``self.x`` or ``d[k]``,
    which bind no name."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for element in target.elements for n in _names_in(element.value)]
    return []
