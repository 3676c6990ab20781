"""``e2k rewrite --target jax``: Keras 3 on the JAX backend, distributed by keras.distribution.

The converters write Keras on TensorFlow (``tf.keras`` under a ``tf.distribute`` strategy's
scope). This pass turns a converted file into the same program for Keras 3 on JAX:

- ``tf.keras.X`` is ``keras.X``; the model's code (the methods of its model, layer, loss and
  metric classes that run in the model: ``call``, ``network``, ``update_state``...) computes
  with ``keras.ops`` where it computed with TensorFlow ops (OPS), and names dtypes as strings;
  an activation given as a TensorFlow function is Keras's (``keras.activations.relu``);
- the input pipeline stays ``tf.data``, and the code that runs in it (input_fns, a canned
  model's ``features`` and ``preprocess``) keeps its TensorFlow ops: Keras 3 fits a
  ``tf.data.Dataset`` on any backend;
- ``strategy = tf.distribute.MirroredStrategy(...)`` becomes a
  ``keras.distribution.DataParallel`` over the same devices, set as the distribution; the
  model is built where the strategy's scope was (``with strategy.scope():`` goes), and the
  batch an Estimator gave each replica is multiplied by the number of devices
  (``strategy.device_mesh.shape[0]`` where it read ``strategy.num_replicas_in_sync``);
- ``KERAS_BACKEND`` (and, for the virtual CPU devices a RunConfig's ``session_config`` asked
  for, ``XLA_FLAGS``) are set before Keras is imported, where the program may set its own;
- JAX runs a model's steps as pure functions: a ``predict_step`` the conversion wrote takes
  the model's state and returns it (``predict_step(self, state, data)``).

What has no backend-neutral form (a TensorFlow op the table does not know in the model's
code, ``tf.GradientTape`` in a ``train_step``, a ``tf.distribute`` strategy other than
MirroredStrategy, a helper with no JAX version) is left as the TensorFlow target wrote it
and marked E2K701, and the file is reported in part: a human finishes it, or converts it
for TensorFlow.
"""
from __future__ import annotations

import sys

import libcst as cst

from estimator2keras import _emit
from estimator2keras._nodes import sole_small, walk

#: The rule code of what the JAX target leaves for a human.
CODE = "E2K701"

#: TensorFlow ops (paths below ``tf.``) -> (the keras.ops function, the op's parameters in
#: order, each one's name in the keras.ops function (None: given positionally, in this order),
#: the parameters it drops). A parameter not listed has no keras.ops counterpart: refused.
_P = None
OPS: dict[str, tuple[str, tuple[tuple[str, str | None], ...], tuple[str, ...]]] = {
    "reshape": ("reshape", (("tensor", _P), ("shape", _P)), ("name",)),
    "concat": ("concatenate", (("values", _P), ("axis", "axis")), ("name",)),
    "cast": ("cast", (("x", _P), ("dtype", _P)), ("name",)),
    "one_hot": ("one_hot", (("indices", _P), ("depth", _P), ("axis", "axis"), ("dtype", "dtype")), ("name",)),
    "argmax": ("argmax", (("input", _P), ("axis", "axis")), ("name",)),
    "argmin": ("argmin", (("input", _P), ("axis", "axis")), ("name",)),
    "nn.softmax": ("softmax", (("logits", _P), ("axis", "axis")), ("name",)),
    "nn.log_softmax": ("log_softmax", (("logits", _P), ("axis", "axis")), ("name",)),
    "matmul": ("matmul", (("a", _P), ("b", _P)), ("name",)),
    "stack": ("stack", (("values", _P), ("axis", "axis")), ("name",)),
    "squeeze": ("squeeze", (("input", _P), ("axis", "axis")), ("name",)),
    "expand_dims": ("expand_dims", (("input", _P), ("axis", _P)), ("name",)),
    "zeros_like": ("zeros_like", (("input", _P), ("dtype", "dtype")), ("name",)),
    "ones_like": ("ones_like", (("input", _P), ("dtype", "dtype")), ("name",)),
    "where": ("where", (("condition", _P), ("x", _P), ("y", _P)), ("name",)),
    "shape": ("shape", (("input", _P),), ("name",)),
    "tile": ("tile", (("input", _P), ("multiples", _P)), ("name",)),
    "range": ("arange", (("start", _P), ("limit", _P), ("delta", _P)), ("name",)),
    "transpose": ("transpose", (("a", _P), ("perm", _P)), ("name",)),
    "gather": ("take", (("params", _P), ("indices", _P), ("axis", "axis")), ("name",)),
    "clip_by_value": ("clip", (("t", _P), ("clip_value_min", _P), ("clip_value_max", _P)), ("name",)),
    "math.divide_no_nan": ("divide_no_nan", (("x", _P), ("y", _P)), ("name",)),
}
for _name, _ops in (("reduce_mean", "mean"), ("reduce_sum", "sum"), ("reduce_max", "max"), ("reduce_min", "min"),
                    ("reduce_prod", "prod")):
    OPS[_name] = OPS[f"math.{_name}"] = (
        _ops, (("input_tensor", _P), ("axis", "axis"), ("keepdims", "keepdims")), ("name",))
for _name in ("abs", "exp", "sqrt", "square", "log", "sigmoid", "tanh", "negative", "floor", "ceil", "round", "sign"):
    OPS[_name] = OPS[f"math.{_name}"] = (_name, (("x", _P),), ("name",))
for _name in ("maximum", "minimum", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
              "logical_and", "logical_or"):
    OPS[_name] = OPS[f"math.{_name}"] = (_name, (("x", _P), ("y", _P)), ("name",))
for _name in ("relu", "relu6", "elu", "selu", "softplus", "sigmoid", "tanh", "gelu", "silu"):
    OPS[f"nn.{_name}"] = (_name, (("features", _P),), ("name",))
OPS["nn.swish"] = OPS["nn.silu"]

#: TensorFlow functions given as a value (``activation=tf.nn.relu``) -> Keras's activation.
ACTIVATIONS = {
    **{f"nn.{n}": n for n in ("relu", "relu6", "elu", "selu", "softplus", "softsign", "sigmoid", "tanh", "gelu",
                               "softmax", "silu")},
    "nn.swish": "silu", "sigmoid": "sigmoid", "tanh": "tanh", "math.sigmoid": "sigmoid", "math.tanh": "tanh",
}
#: TensorFlow dtypes -> their names. JAX computes in 32 bits unless told otherwise: its
#: integers are int32, as the TensorFlow target's int64 ids become on the way in.
DTYPES = {"float16": "float16", "float32": "float32", "float64": "float64", "bfloat16": "bfloat16",
          "int32": "int32", "int64": "int32", "bool": "bool", "uint8": "uint8"}

#: Methods of a model's classes that run in tf.data, not in the model: they keep TensorFlow.
DATA_METHODS = frozenset({"features", "preprocess", "example_weights", "vocabulary_lookup"})
#: Base classes whose subclasses' other methods run in the model (the helpers' included).
MODEL_BASES = frozenset({"keras.Model", "keras.layers.Layer", "keras.losses.Loss", "keras.metrics.Metric",
                         "keras.metrics.Mean", "keras.metrics.Precision", "keras.metrics.Recall",
                         "keras.Sequential"})
#: TensorFlow a converted program may still call outside the model (in Python, or on the
#: input pipeline): anything else there is refused, since its values would not reach JAX.
PYTHON_SIDE = ("data.", "io.", "compat.v1.logging.", "random.set_seed", "feature_column.", "strings.", "sparse.",
               "train.Example", "train.Features", "train.Feature", "train.FloatList", "train.Int64List",
               "train.BytesList", "constant", "TensorSpec", "saved_model.", "summary.")


#: TensorFlow that cannot act on a Keras 3 model outside TensorFlow (its variables are JAX's).
REFUSED_OUTSIDE = ("saved_model.save", "train.Checkpoint", "train.CheckpointManager", "GradientTape",
                   "distribute.")


class Retargeted:
    """A converted module for the JAX target, and what could not be written for it."""

    def __init__(self, module: cst.Module, refused: list[str]):
        self.module = module
        #: Why each construct marked E2K701 in the module was left as the TensorFlow target wrote it.
        self.refused = refused


def _dotted(node: cst.BaseExpression) -> str | None:
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _attribute(dotted: str) -> cst.BaseExpression:
    return cst.parse_expression(dotted)


def tensorflow_aliases(module: cst.Module) -> set[str]:
    aliases = set()
    for statement in module.body:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if _dotted(alias.name) == "tensorflow":
                        aliases.add(alias.asname.name.value if alias.asname else "tensorflow")
    return aliases


class _Translate(cst.CSTTransformer):
    """Renames TensorFlow's Keras to Keras and, in the model's code, its ops to keras.ops."""

    def __init__(self, aliases: set[str], strategies: set[str]):
        super().__init__()
        self.aliases = aliases
        self.strategies = strategies
        self.model_code = 0  # > 0: inside a method that runs in the model
        self.classes: list[bool] = []  # whether each enclosing class is a model's
        self.pending: list[str] = []  # why the statement being read is refused
        self.marks: list[list[str]] = []
        self.refused: list[str] = []

    # -- where the model's code is --------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(any(self._model_base(b.value) for b in node.bases))

    def leave_ClassDef(self, original, updated):
        self.classes.pop()
        return updated

    def _model_base(self, base: cst.BaseExpression) -> bool:
        path = self._tf_path(base)
        if path is not None:  # Keras's model classes, and any class of its layers, losses, metrics, optimizers
            return path in MODEL_BASES or (path.startswith(("keras.layers.", "keras.losses.", "keras.metrics.",
                                                            "keras.optimizers."))
                                           and path.rpartition(".")[2][:1].isupper())
        # A class of the program's own (a layer block) or a helper's: the model's where its name is.
        return isinstance(base, cst.Name) and (base.value.endswith(("Model", "Layer", "Loss", "Metric"))
                                               or base.value in ("LabelMean",))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        inside = bool(self.classes) and self.classes[-1] and node.name.value not in DATA_METHODS
        self.model_code += 1 if inside or self.model_code else 0
        self._entered = getattr(self, "_entered", [])
        self._entered.append(inside or self.model_code > 1)

    def leave_FunctionDef(self, original, updated):
        if self._entered.pop():
            self.model_code -= 1
        return updated

    # -- names ------------------------------------------------------------------------------
    def _tf_path(self, node: cst.BaseExpression) -> str | None:
        """``node``'s path below TensorFlow (``keras.layers.Dense``), or None."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        root, _, rest = dotted.partition(".")
        return rest if root in self.aliases and rest else None

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        path = self._tf_path(original)
        if path is None:
            if isinstance(original.value, cst.Name) and original.value.value in self.strategies \
                    and original.attr.value == "num_replicas_in_sync":
                return cst.parse_expression(f"{original.value.value}.device_mesh.shape[0]")
            return updated
        if path.startswith("keras."):
            return _attribute(path)
        if path in ACTIVATIONS:  # the model's, wherever it is given (a call of it: leave_Call)
            return _attribute(f"keras.activations.{ACTIVATIONS[path]}")
        if self.model_code and path in DTYPES:
            return cst.SimpleString(f'"{DTYPES[path]}"')
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        path = self._tf_path(original.func)
        if path is None or path.startswith("keras."):
            return updated
        if not self.model_code:
            if path in ACTIVATIONS:
                return updated.with_changes(func=original.func)  # computed in tf.data: TensorFlow's
            if path.startswith(REFUSED_OUTSIDE):
                self._refuse(original, f"tf.{path} reads or writes TensorFlow variables, which a Keras model on JAX "
                                       "does not have")
            return updated
        if path == "distribute.get_strategy" or path.startswith("distribute."):
            return updated  # (`replicas` in a hand-written loss: leave_BinaryOperation)
        if path == "add_n" and len(updated.args) == 1:
            return _emit.expr("keras.ops.sum(keras.ops.stack({x}), axis=0)", x=updated.args[0].value)
        if path == "nn.bias_add" and len(updated.args) == 2:
            return _emit.expr("{x} + {b}", x=updated.args[0].value, b=updated.args[1].value)
        if path in ("argmax", "argmin"):
            given = next((a for a in updated.args if a.keyword is not None and a.keyword.value == "output_type"), None)
            if given is not None:  # the ids' dtype: a cast of keras.ops's (int32 on JAX)
                plain = updated.with_changes(args=_emit.call_args(a for a in updated.args if a is not given))
                inner = self.leave_Call(original.with_changes(
                    args=[a for a in original.args if not (a.keyword is not None and a.keyword.value == "output_type")]),
                    plain)
                return _emit.expr("keras.ops.cast({x}, {t})", x=inner, t=given.value)
        spec = OPS.get(path)
        if spec is None:
            self._refuse(original, f"tf.{path} has no keras.ops counterpart e2k writes in the model's code")
            return updated
        name, params, dropped = spec
        bound: dict[str, cst.BaseExpression] = {}
        for index, arg in enumerate(updated.args):
            if arg.star:
                self._refuse(original, f"tf.{path} is given *args or **kwargs")
                return updated
            key = arg.keyword.value if arg.keyword is not None else (params[index][0] if index < len(params) else None)
            if key is None or (key not in dict(params) and key not in dropped):
                self._refuse(original, f"tf.{path}'s argument `{key or index}` has no keras.ops counterpart")
                return updated
            if key not in dropped:
                bound[key] = arg.value
        args, keywords = [], []
        for key, keyword in params:
            if key not in bound:
                continue
            if keyword is None and len(keywords) == 0 and len(args) == [k for k, _ in params].index(key):
                args.append(cst.Arg(bound[key]))
            else:
                keywords.append(_emit.keyword_arg(keyword or key, bound[key]))
        return cst.Call(_attribute(f"keras.ops.{name}"), args=_emit.call_args([*args, *keywords]))

    def leave_Arg(self, original, updated):
        # `activation=tf.nn.relu`: the activation's name, as Keras programs give it.
        if updated.keyword is not None and updated.keyword.value == "activation":
            dotted = _dotted(updated.value) if isinstance(updated.value, cst.Attribute) else None
            if dotted is not None and dotted.startswith("keras.activations.") and dotted.count(".") == 2:
                return updated.with_changes(value=cst.SimpleString(f'"{dotted.rsplit(".", 1)[1]}"'))
        return updated

    def leave_BinaryOperation(self, original, updated):
        # A hand-written loss divided by the replicas (each computed its batch's share under a
        # tf.distribute strategy): JAX computes it once, on the global batch.
        if isinstance(updated.operator, cst.Divide) and self.model_code:
            right = _dotted(original.right) if isinstance(original.right, cst.Attribute) else None
            if isinstance(original.right, cst.Attribute) and original.right.attr.value == "num_replicas_in_sync" \
                    and isinstance(original.right.value, cst.Call) \
                    and self._tf_path(original.right.value.func) == "distribute.get_strategy":
                return updated.left
            del right
        return updated

    def _refuse(self, node: cst.CSTNode, why: str) -> None:
        if why not in self.pending:
            self.pending.append(why)

    # A statement holding a refused construct is marked above (``# e2k: E2K701 why``).
    def visit_SimpleStatementLine(self, node) -> None:
        self.marks.append(self.pending)
        self.pending = []

    def leave_SimpleStatementLine(self, original, updated):
        return self._marked(updated)

    def visit_If(self, node) -> None:
        self.marks.append(self.pending)
        self.pending = []

    def leave_If(self, original, updated):
        return self._marked(updated)

    def _marked(self, updated):
        pending, self.pending = self.pending, self.marks.pop()
        if not pending:
            return updated
        self.refused.extend(pending)
        marks = [cst.EmptyLine(comment=cst.Comment(f"# e2k: {CODE} {why}")) for why in pending]
        return updated.with_changes(leading_lines=[*updated.leading_lines, *marks])


#: The header's note of what this pass changed, and those of the TensorFlow target it changes.
NOTE = ("Keras 3 on JAX: a keras.distribution.DataParallel over the strategy's devices in place of its "
        "scope, keras.ops in the model's code; the input pipeline stays tf.data.")
ONE_DEVICE_NOTE = "Keras 3 on JAX: keras.ops in the model's code; the input pipeline stays tf.data."
DEVICES_NOTE = ("From RunConfig(session_config=...): JAX's virtual CPU devices are XLA_FLAGS's, set before "
                "Keras (and JAX) start.")


def retarget(module: cst.Module, limit: int = 79) -> Retargeted:
    """``module`` (a file the TensorFlow target converted) for Keras 3 on JAX."""
    from estimator2keras import _notes
    from estimator2keras.rewrites.session_config_to_tf_config import COMMENT as TF_DEVICES_NOTE

    aliases = tensorflow_aliases(module)
    if not aliases:
        return Retargeted(module, [])
    strategies = _strategies(module, aliases)
    translate = _Translate(aliases, set(strategies))
    body, devices = _distribution(module, aliases, strategies)
    translated = module.with_changes(body=body).visit(translate).visit(_PredictStep())

    note = (NOTE if strategies else ONE_DEVICE_NOTE, "E2K700")

    def notes(items):
        items = [(DEVICES_NOTE if text == TF_DEVICES_NOTE and devices else text, code) for text, code in items]
        return items + ([note] if note not in items else [])

    translated = _notes.with_header(translated, notes, limit) or translated
    return Retargeted(_imports(translated, aliases, devices), translate.refused)


def translate_helper(code: str) -> tuple[str, list[str]]:
    """A helper's code (reading TensorFlow as ``tf``) for Keras 3 on JAX, and what of it has no
    JAX form."""
    translate = _Translate({"tf"}, set())
    module = cst.parse_module(code).visit(translate).visit(_PredictStep())
    return module.code, translate.refused


def _imports(module: cst.Module, aliases: set[str], devices: int | None) -> cst.Module:
    """The backend (and the devices) chosen before Keras is imported, ``import keras`` with
    them, and TensorFlow's import gone where nothing reads it any more."""
    reads = {n.value for n in _names(module.with_changes(body=[s for s in module.body if not _is_import(s)]))}
    body = []
    for statement in module.body:
        if _is_import(statement):
            small = statement.body[0]
            if isinstance(small, cst.Import) and all(
                    (a.asname.name.value if a.asname else _dotted(a.name)) in aliases - reads
                    or _dotted(a.name) == "os" and a.asname is None for a in small.names):
                continue  # TensorFlow that nothing reads, or `os`, which goes first
        body.append(statement)
    first = next((i for i, s in enumerate(body) if _is_import(s)), None)
    if first is None:
        first = 1 if body and _is_docstring(body[0]) else 0
    # The standard library's imports stay first, `import os` in its place among them; the
    # backend is chosen after them, before Keras and the other third-party imports.
    end = first
    while end < len(body) and _is_import(body[end]) and _standard(body[end]):
        end += 1
    group = body[first:end]
    at = next((i for i, s in enumerate(group) if isinstance(s.body[0], cst.Import)
               and (_dotted(s.body[0].names[0].name) or "") > "os"), len(group))
    os_import = cst.parse_statement("import os\n")
    if group:
        if at == 0:  # it opens the group: the group's leading comment stays above it
            os_import = os_import.with_changes(leading_lines=group[0].leading_lines)
            group[0] = group[0].with_changes(leading_lines=[])
        group.insert(at, os_import)
    else:
        group = [os_import]
        if first < len(body):
            group[0] = os_import.with_changes(leading_lines=body[first].leading_lines)
            body[first] = body[first].with_changes(leading_lines=[])
    lines = ['os.environ.setdefault("KERAS_BACKEND", "jax")']
    if devices:
        lines.append(f'os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count={devices}")')
    header = cst.parse_module("\n".join([*lines, "", "import keras", ""])).body
    header = [s.with_changes(leading_lines=[cst.EmptyLine()] if i in (0, len(header) - 1) else [])
              for i, s in enumerate(header)]
    rest = body[end:]
    if rest and _is_import(rest[0]) and _installed(rest[0]):
        rest[0] = rest[0].with_changes(leading_lines=[])  # `import keras` opens the third-party group
    return module.with_changes(body=[*body[:first], *group, *header, *rest])


def _installed(statement: cst.SimpleStatementLine) -> bool:
    """An import of an installed package (``tensorflow``, ``numpy``): the third-party group,
    which ``import keras`` joins; the program's own modules keep their blank line above."""
    import importlib.util

    small = statement.body[0]
    if isinstance(small, cst.ImportFrom) and small.relative:
        return False
    name = (_dotted(small.module) if isinstance(small, cst.ImportFrom) else _dotted(small.names[0].name)) or ""
    try:
        return importlib.util.find_spec(name.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _standard(statement: cst.SimpleStatementLine) -> bool:
    """An import of the standard library's (or ``from __future__``)."""
    small = statement.body[0]
    if isinstance(small, cst.ImportFrom):
        if small.relative:
            return False
        names = [_dotted(small.module) or ""]
    else:
        names = [_dotted(a.name) or "" for a in small.names]
    return all(n.split(".")[0] in sys.stdlib_module_names or n == "__future__" for n in names)


def _is_import(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and \
        isinstance(statement.body[0], (cst.Import, cst.ImportFrom))


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and \
        isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.SimpleString)


def _strategies(module: cst.Module, aliases: set[str]) -> dict[str, cst.Call]:
    """The names bound to a ``tf.distribute.MirroredStrategy(...)``, anywhere in the module."""
    found: dict[str, cst.Call] = {}

    class Find(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                    and isinstance(node.value, cst.Call):
                dotted = _dotted(node.value.func) or ""
                root, _, rest = dotted.partition(".")
                if root in aliases and rest in ("distribute.MirroredStrategy", "distribute.OneDeviceStrategy"):
                    found[node.targets[0].target.value] = node.value

    module.visit(Find())
    return found


def _given_devices(call: cst.Call) -> cst.BaseExpression | None:
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value in ("devices", "device")
                 or a.keyword is None and call.args.index(a) == 0), None)


def _devices(call: cst.Call) -> cst.BaseExpression:
    """The devices of a MirroredStrategy(...) (a OneDeviceStrategy's device) as
    keras.distribution names them."""
    given = _given_devices(call)
    if isinstance(given, cst.SimpleString):
        given = cst.List([cst.Element(given)])
    if isinstance(given, (cst.List, cst.Tuple)) and all(
            isinstance(e.value, cst.SimpleString) for e in given.elements):
        names = [e.value.evaluated_value.lstrip("/").lower().replace("device:", "") for e in given.elements]
        return cst.parse_expression(repr(names).replace("'", '"'))
    return cst.parse_expression("keras.distribution.list_devices()")


def _distribution(module: cst.Module, aliases: set[str], strategies: dict[str, cst.Call]):
    """The module's statements with each strategy a DataParallel distribution, its scope's
    block its body, and the virtual CPU devices the TensorFlow target configured gone (their
    number returned: XLA_FLAGS asks JAX for them)."""
    devices: list[int] = []
    configurers = _device_configurers(module, aliases)
    removed: set[str] = set()

    class Rewrite(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original, updated):
            small = original.body[0] if len(original.body) == 1 else None
            if isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name) \
                    and small.targets[0].target.value in strategies \
                    and any(small.value is call for call in strategies.values()):
                name = small.targets[0].target.value
                made = _emit.statement("{n} = keras.distribution.DataParallel(devices={d})", n=name,
                                       d=_devices(small.value))
                made = made.with_changes(leading_lines=updated.leading_lines)
                return cst.FlattenSentinel([made, _emit.statement("keras.distribution.set_distribution({n})", n=name)])
            small = updated.body[0] if len(updated.body) == 1 else None
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                dotted = _dotted(small.value.func) or ""
                root, _, rest = dotted.partition(".")
                if root in aliases and rest == "config.set_logical_device_configuration":
                    count = _virtual_devices(small.value)
                    if count is not None:
                        devices.append(count)
                        return cst.RemovalSentinel.REMOVE
            return updated

        def leave_With(self, original, updated):
            if len(updated.items) == 1 and isinstance(updated.items[0].item, cst.Call):
                func = updated.items[0].item.func
                if isinstance(func, cst.Attribute) and func.attr.value == "scope" \
                        and isinstance(func.value, cst.Name) and func.value.value in strategies \
                        and updated.items[0].asname is None and isinstance(updated.body, cst.IndentedBlock):
                    body = list(updated.body.body)
                    body[0] = body[0].with_changes(leading_lines=[*updated.leading_lines, *body[0].leading_lines])
                    return cst.FlattenSentinel(body)
            return updated

    rewritten = module.visit(Rewrite())
    body = []
    for statement in rewritten.body:
        small = sole_small(statement)
        call = small.value if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) else None
        if call is not None and _dotted(call.func) in configurers and len(call.args) == 1 \
                and isinstance(call.args[0].value, cst.Integer):
            # `configure_virtual_cpus(2)`, a function of the program that splits the CPU
            devices.append(int(call.args[0].value.value))
            removed.add(_dotted(call.func))
            continue
        body.append(statement)
    # The functions that only split the CPU go with their calls, when nothing else reads them
    # (their own name is the one reference left); the blank lines above what went stay.
    # So does a list of device names the strategy was given (DataParallel takes JAX's own).
    removed |= {_dotted(given) for call in strategies.values()
                if isinstance(given := _given_devices(call), cst.Name)}
    left = {name: sum(1 for s in body for n in _names(s, keywords=False) if n.value == name) for name in removed}
    kept, blank = [], None
    for statement in body:
        small = sole_small(statement)
        assigned = small.targets[0].target if isinstance(small, cst.Assign) and len(small.targets) == 1 else None
        if isinstance(statement, cst.FunctionDef) and left.get(statement.name.value) == 1 \
                or isinstance(assigned, cst.Name) and left.get(assigned.value) == 1 \
                and not any(isinstance(n, cst.Call) and _dotted(n.func) != "range" for n in walk(small.value)):
            blank = blank or [line for line in statement.leading_lines if line.comment is None]
            continue
        if blank is not None and len(blank) > len(statement.leading_lines) and not statement.leading_lines:
            statement = statement.with_changes(leading_lines=blank)
        blank = None
        kept.append(statement)
    return kept, (max(devices) if devices else None)


def _device_configurers(module: cst.Module, aliases: set[str]) -> set[str]:
    """The module's functions ``f(n)`` whose body only splits the first CPU into ``n`` logical
    devices (``tf.config.set_logical_device_configuration(cpus[0], [...] * n)``, the physical
    devices listed first)."""
    found = set()
    for statement in module.body:
        if not isinstance(statement, cst.FunctionDef) or len(statement.params.params) != 1:
            continue
        param = statement.params.params[0].name.value
        body = [s for s in statement.body.body if not _is_docstring(s)]
        configures = False
        for line in body:
            small = line.body[0] if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
            value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
            if not isinstance(value, cst.Call):
                break
            root, _, rest = (_dotted(value.func) or "").partition(".")
            if root not in aliases:
                break
            if rest == "config.list_physical_devices" and isinstance(small, cst.Assign):
                continue
            if rest == "config.set_logical_device_configuration" and isinstance(small, cst.Expr) \
                    and len(value.args) == 2 and isinstance(value.args[1].value, cst.BinaryOperation) \
                    and isinstance(value.args[1].value.operator, cst.Multiply) \
                    and isinstance(value.args[1].value.right, cst.Name) and value.args[1].value.right.value == param:
                configures = True
                continue
            break
        else:
            if configures:
                found.add(statement.name.value)
    return found


def _virtual_devices(call: cst.Call) -> int | None:
    """N of ``tf.config.set_logical_device_configuration(cpu, [LogicalDeviceConfiguration()] * N)``."""
    if len(call.args) != 2:
        return None
    value = call.args[1].value
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply) \
            and isinstance(value.right, cst.Integer):
        return int(value.right.value)
    return None


class _PredictStep(cst.CSTTransformer):
    """``predict_step(self, data)`` as JAX's trainer calls it: with the model's state, which it
    returns with the predictions (``super().predict_step`` runs the model)."""

    def leave_FunctionDef(self, original, updated):
        if updated.name.value != "predict_step" or len(updated.params.params) != 2:
            return updated
        body = list(updated.body.body)
        if len(body) < 3 or not all(isinstance(s, cst.SimpleStatementLine) for s in (body[0], body[1], body[-1])):
            return updated
        first, second, last = body[0].body[0], body[1].body[0], body[-1].body[0]
        if not (isinstance(first, cst.Assign) and "unpack_x_y_sample_weight" in _emit.code(first.value)
                and isinstance(second, cst.Assign) and isinstance(second.targets[0].target, cst.Name)
                and _emit.code(second.value).startswith("self(") and isinstance(last, cst.Return)
                and last.value is not None):
            return updated
        output = second.targets[0].target.value
        rest = body[2:-1]
        if any(isinstance(n, cst.Name) and n.value in ("features", "data", "state")
               for s in [*rest, body[-1]] for n in _names(s)):
            return updated  # reads the input (forwarded features): left as written, refused below
        run = _emit.statement(f"{output}, non_trainable_variables = super().predict_step(state, data)")
        run = run.with_changes(leading_lines=body[0].leading_lines)
        returned = _emit.statement("return {v}, non_trainable_variables", v=last.value)
        returned = returned.with_changes(leading_lines=body[-1].leading_lines)
        params = updated.params.with_changes(params=[updated.params.params[0], _param("state"),
                                                     updated.params.params[1]])
        return updated.with_changes(params=params,
                                    body=updated.body.with_changes(body=[run, *rest, returned]))


def _param(name: str) -> cst.Param:
    return cst.Param(cst.Name(name), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))


def _names(node: cst.CSTNode, keywords: bool = True):
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        if not keywords and isinstance(current, cst.Arg):
            stack.extend(c for c in current.children if c is not current.keyword)
            continue
        stack.extend(current.children)


#: Helpers written otherwise for JAX than by translating their TensorFlow form: the methods
#: (or functions) that replace the translated ones, by helper (None: the method goes).
#: A canned model takes its preprocessed inputs only (strings cannot reach a JAX model: a
#: served model's raw features are preprocessed in tf.data, as for training), and predicts
#: its head's numbers (the class names it also gave are strings). An Estimator's model_dir
#: is kept in Keras 3's weights files, which hold the optimizer's state too.
OVERRIDES: dict[str, dict[str, str | None]] = {
    # JAX's gradients are dense: the sparse gradient these make dense is TensorFlow's only.
    "TF1Adam": {"update_step": None},
    "TF1Adagrad": {"update_step": None},
    "CannedModel": {
        "call": '''
def call(self, inputs, training=False):
    return self.network(inputs, training=training)
''',
        "predict_step": '''
def predict_step(self, state, data):
    """The Estimator's predictions for a batch, as its head made them (the numbers)."""
    logits, non_trainable_variables = super().predict_step(state, data)
    if self.head == "regression":
        return {"predictions": logits}, non_trainable_variables
    n_classes = 2 if self.head == "binary" else self.units
    return head_predictions(logits, n_classes), non_trainable_variables
''',
    },
    "head_predictions": {
        "head_predictions": '''
def head_predictions(logits, n_classes):
    """A canned classifier's predictions for a batch of logits (one logit for 2 classes, else
    one per class), as its head gave them: the probabilities, the predicted class's id, every
    class's ids (its class names, strings, are the vocabulary's at those ids)."""
    predictions = {"logits": logits}
    if n_classes == 2:
        predictions["logistic"] = keras.ops.sigmoid(logits)
        logits = keras.ops.concatenate([keras.ops.zeros_like(logits), logits], axis=1)
    class_ids = keras.ops.argmax(logits, axis=1)[:, None]
    all_class_ids = keras.ops.tile(keras.ops.arange(n_classes)[None], [keras.ops.shape(logits)[0], 1])
    predictions.update(probabilities=keras.ops.softmax(logits), class_ids=class_ids,
                       all_class_ids=all_class_ids)
    return predictions
''',
    },
    "ModelDirCheckpoints": {
        "__doc__": '''An Estimator's model_dir for a Keras model and its optimizer: the latest checkpoint is
    restored when the model first trains, evaluates or predicts, and training saves one every
    `save_steps` steps or `save_secs` seconds and when it ends, numbered by global step
    (Keras 3's weights files, which hold the optimizer's state: ckpt-<step>.weights.h5).''',
        "__init__": '''
def __init__(self, model, directory, max_to_keep=5, keep_checkpoint_every_n_hours=None,
             save_steps=None, save_secs=None, restore=True):
    super().__init__()
    # No model_dir (None, or a flag left empty): the Estimator used a temporary directory.
    self.directory = directory or tempfile.mkdtemp()
    os.makedirs(self.directory, exist_ok=True)
    self.watched = model
    self.max_to_keep, self.keep_hours = max_to_keep, keep_checkpoint_every_n_hours
    self.save_steps = save_steps
    self.save_secs = save_secs
    self.restored = not restore
    self.kept_time = time.time()
''',
        "latest": '''
def latest(self):
    """The path of the directory's latest checkpoint, None where it has none."""
    found = self.checkpoints()
    return found[-1][1] if found else None
''',
        "checkpoints": '''
def checkpoints(self):
    """The directory's checkpoints as it is now, by step: (step, path), oldest first."""
    found = []
    for name in os.listdir(self.directory):
        match = re.fullmatch(r"ckpt-(\\d+)\\.weights\\.h5", name)
        if match:
            found.append((int(match.group(1)), os.path.join(self.directory, name)))
        elif name.startswith("model.ckpt-") and name.endswith(".index"):
            # A TF1 checkpoint: the Keras model's variables have none of its names.
            raise ValueError(
                f"{self.directory} holds an Estimator's checkpoint, which this "
                "Keras model cannot restore: convert the model_dir with "
                "`e2k checkpoint` (its docs: checkpoints.md)")
    return sorted(found)
''',
        "global_step": '''
def global_step(self):
    """The step training goes on from: the latest checkpoint's until it is restored."""
    found = [] if self.restored else self.checkpoints()
    if not found:
        return int(self.watched.optimizer.iterations.numpy())
    return found[-1][0]
''',
        "restore": '''
def restore(self, kind):
    # Read when the model first trains, evaluates or predicts, as the Estimator read it.
    if not self.restored:
        found = self.checkpoints()
        if found:
            self.model.optimizer.build(self.model.trainable_variables)
            self.model.load_weights(found[-1][1])
        self.restored = True
''',
        "build": None,
        "save": '''
def save(self):
    path = os.path.join(self.directory, f"ckpt-{self.step}.weights.h5")
    self.model.save_weights(path)
    self.saved_step, self.saved_time = self.step, time.time()
    if self.keep_hours and time.time() - self.kept_time >= self.keep_hours * 3600:
        self.kept_time = time.time()  # kept for good, as keep_checkpoint_every_n_hours kept it
        shutil.copyfile(path, os.path.join(self.directory, f"kept-{self.step}.weights.h5"))
    if self.max_to_keep:
        for _, old in self.checkpoints()[:-self.max_to_keep]:
            os.remove(old)
''',
    },
}


def _overridden(code: str, overrides: dict[str, str | None]) -> str:
    """``code`` (one class or function) with the definitions of ``overrides`` in place of its
    own of those names (a name it has not: a method added after the one before it in
    ``overrides``), and its docstring ``overrides["__doc__"]`` where given."""
    import textwrap

    module = cst.parse_module(code)
    definition = module.body[0]
    written = {name: cst.parse_statement(textwrap.dedent(text).strip() + "\n")
               for name, text in overrides.items() if name != "__doc__" and text is not None}
    if isinstance(definition, cst.FunctionDef):
        return module.with_changes(body=[written.get(definition.name.value, definition)]).code
    body = []
    own = {s.name.value for s in definition.body.body if isinstance(s, cst.FunctionDef)}
    for index, statement in enumerate(definition.body.body):
        if index == 0 and "__doc__" in overrides and isinstance(statement, cst.SimpleStatementLine):
            statement = statement.with_changes(body=[cst.Expr(cst.SimpleString(f'"""{overrides["__doc__"]}"""'))])
        name = statement.name.value if isinstance(statement, cst.FunctionDef) else None
        if name in overrides:
            if overrides[name] is None:
                continue
            statement = written[name].with_changes(leading_lines=statement.leading_lines)
        body.append(statement)
        if name in overrides:  # the methods the TensorFlow form has not: after the one they follow
            for added in [n for n in overrides if n not in own and n != "__doc__" and overrides[n] is not None]:
                if list(overrides).index(added) == list(overrides).index(name) + 1:
                    body.append(written[added].with_changes(leading_lines=statement.leading_lines))
    return module.with_changes(body=[definition.with_changes(body=definition.body.with_changes(body=body))]).code


def helpers(catalogued: dict[str, str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The helpers a converted file uses (key -> their TensorFlow code), for JAX; and (key,
    why) for each that has no JAX form."""
    written, refused = {}, []
    for key, code in catalogued.items():
        if key in OVERRIDES:
            code = _overridden(code, OVERRIDES[key])
        translated, why = translate_helper(code)
        if why:
            refused.append((key, why[0]))
        written[key] = translated
    return written, refused
