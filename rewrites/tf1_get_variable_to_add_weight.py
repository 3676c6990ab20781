from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._translate import bind

#: tf.compat.v1.get_variable's parameters, in order.
SIGNATURE = (
    "name", "shape", "dtype", "initializer", "regularizer", "trainable", "collections", "caching_device",
    "partitioner", "validate_shape", "use_resource", "custom_getter", "constraint", "synchronization",
    "aggregation",
)
#: Parameters with no Keras counterpart; each is refused unless it says nothing (None, its default).
REFUSED = {
    "collections": "`collections=` puts the variable in graph collections, which Keras does not have",
    "caching_device": "`caching_device=` has no Keras counterpart",
    "partitioner": "a partitioned variable has no Keras counterpart",
    "custom_getter": "`custom_getter=` has no Keras counterpart",
    "regularizer": "`regularizer=` of get_variable is not converted yet (a layer's kernel_regularizer is)",
    "synchronization": "`synchronization=` is not converted",
    "aggregation": "`aggregation=` is not converted",
}
#: Initializer classes TF1's get_variable took uninstantiated (`initializer=tf.initializers.random_normal`):
#: it called them with no argument.
INITIALIZER_CLASSES = {
    "initializers.random_normal": ("RandomNormal", "stddev=1.0"),
    "random_normal_initializer": ("RandomNormal", "stddev=1.0"),
    "initializers.truncated_normal": ("TruncatedNormal", "stddev=1.0"),
    "truncated_normal_initializer": ("TruncatedNormal", "stddev=1.0"),
    "initializers.random_uniform": ("RandomUniform", "minval=0.0, maxval=1.0"),
    "random_uniform_initializer": ("RandomUniform", "minval=0.0, maxval=1.0"),
    "initializers.zeros": ("Zeros", ""),
    "zeros_initializer": ("Zeros", ""),
    "initializers.ones": ("Ones", ""),
    "ones_initializer": ("Ones", ""),
    "initializers.glorot_uniform": ("GlorotUniform", ""),
    "glorot_uniform_initializer": ("GlorotUniform", ""),
    "initializers.glorot_normal": ("GlorotNormal", ""),
    "glorot_normal_initializer": ("GlorotNormal", ""),
    "initializers.orthogonal": ("Orthogonal", ""),
    "orthogonal_initializer": ("Orthogonal", ""),
}
#: tf.Variable's parameters (TF1's VariableV1; TF2's tf.Variable has the same first two).
VARIABLE_SIGNATURE = (
    "initial_value", "trainable", "collections", "validate_shape", "caching_device", "name", "variable_def",
    "dtype", "expected_shape", "import_scope", "constraint", "use_resource", "synchronization", "aggregation",
    "shape",
)
#: Ops making a Variable's initial value -> (Keras initializer, {op parameter: initializer
#: parameter}, {initializer parameter: TF1's default, written out where Keras's differs}).
INITIAL_VALUES = {
    "truncated_normal": ("TruncatedNormal", ("shape", "mean", "stddev", "dtype", "seed", "name"),
                         {"mean": "mean", "stddev": "stddev", "seed": "seed"}, {"stddev": "1.0"}),
    "random.truncated_normal": ("TruncatedNormal", ("shape", "mean", "stddev", "dtype", "seed", "name"),
                                {"mean": "mean", "stddev": "stddev", "seed": "seed"}, {"stddev": "1.0"}),
    "random_normal": ("RandomNormal", ("shape", "mean", "stddev", "dtype", "seed", "name"),
                      {"mean": "mean", "stddev": "stddev", "seed": "seed"}, {"stddev": "1.0"}),
    "random.normal": ("RandomNormal", ("shape", "mean", "stddev", "dtype", "seed", "name"),
                      {"mean": "mean", "stddev": "stddev", "seed": "seed"}, {"stddev": "1.0"}),
    "random_uniform": ("RandomUniform", ("shape", "minval", "maxval", "dtype", "seed", "name"),
                       {"minval": "minval", "maxval": "maxval", "seed": "seed"}, {"minval": "0.0", "maxval": "1.0"}),
    "random.uniform": ("RandomUniform", ("shape", "minval", "maxval", "dtype", "seed", "name"),
                       {"minval": "minval", "maxval": "maxval", "seed": "seed"}, {"minval": "0.0", "maxval": "1.0"}),
    "zeros": ("Zeros", ("shape", "dtype", "name"), {}, {}),
    "ones": ("Ones", ("shape", "dtype", "name"), {}, {}),
    "constant": ("Constant", ("value", "dtype", "shape", "name", "verify_shape"), {"value": "value"}, {}),
    "fill": ("Constant", ("dims", "value", "name"), {"value": "value"}, {}),
}
_INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")


class Tf1GetVariableToAddWeight(ExpressionRule):
    """A `tf.get_variable` or `tf.Variable` in a model_fn becomes a weight of the Keras model, made with `add_weight`.

    ## What it does
    Inside a converted model_fn (or a function of the program it calls that becomes a Keras
    layer), `w = tf.compat.v1.get_variable("w", [4, 8], initializer=...)` becomes
    `self.w = self.add_weight(name="w", shape=[4, 8], initializer=...)` in the model's
    `__init__`, and the forward pass reads `self.w` where it read `w`. The initializer is
    translated like a layer's (`tf.glorot_uniform_initializer()` ->
    `tf.keras.initializers.GlorotUniform()`, TF1's defaults written out); an initializer
    class given uninstantiated (`initializer=tf.initializers.random_normal`) is instantiated
    as TF1 did; none given is TF1's default, Glorot uniform (zeros for integer and boolean
    dtypes), written out. `dtype=`, `trainable=` and `constraint=` are kept.

    `W = tf.Variable(tf.truncated_normal([784, 10], stddev=0.1))`, the style of TensorFlow's
    first tutorials, becomes `self.W = self.add_weight(shape=[784, 10],
    initializer=tf.keras.initializers.TruncatedNormal(stddev=0.1))`: the op that made the
    initial value (`tf.zeros`, `tf.ones`, `tf.constant`, `tf.fill`, `tf.random_normal`,
    `tf.truncated_normal`, `tf.random_uniform`, or a number) is the initializer of the same
    distribution, its shape the weight's. An initial value computed otherwise (a NumPy
    array, another tensor) is refused.

    ## Why
    In TensorFlow 2, `tf.compat.v1.get_variable` inside a Keras model's `call` makes a new
    variable at every call (or fails under `tf.function`): the weights would never train.
    `add_weight` in `__init__` makes them once, tracked by the model (saved, restored,
    distributed by the strategy, listed in `trainable_weights`).

    ## Fix safety
    Safe: the same shape, dtype and initial distribution. The shape must be known when the
    model is made (constants, settings): a shape read from a tensor of the forward pass
    (`inputs.shape[-1]`) is refused, as are `collections=`, `partitioner=`,
    `custom_getter=`, `caching_device=`, `regularizer=` and non-default
    `synchronization=`/`aggregation=`. TF1 made each variable where the model_fn first ran
    `get_variable`; `e2k parity` pairs the Keras weights with them in the order the model's
    first call reads them, so weights made in `__init__` pair with the variables TF1 made
    between its layers.

    ## References
    - https://www.tensorflow.org/guide/migrate/model_mapping
    - https://keras.io/api/layers/base_layer/#addweight-method
    """

    code = "E2K306"
    summary = "tf.get_variable / tf.Variable in a model_fn -> self.add_weight(...) in the Keras model's __init__"
    safety = Safety.SAFE
    role = "variable"
    targets = ("get_variable", "Variable", "VariableV1")

    cases = [
        Case('tf1.get_variable("w", [4, 8], initializer=tf1.zeros_initializer())',
             'self.add_weight(name="w", shape=[4, 8], initializer=tf1.zeros_initializer())', id="named-shape"),
        Case('tf1.get_variable("w", shape=[4, 8])',
             'self.add_weight(name="w", shape=[4, 8], initializer=tf.keras.initializers.GlorotUniform())',
             id="default-initializer-written-out"),
        Case('tf1.get_variable("step", [], dtype=tf.int64, trainable=False)',
             'self.add_weight(name="step", shape=[], dtype=tf.int64, initializer=tf.keras.initializers.Zeros(), '
             'trainable=False)',
             id="integer-dtype-zeros"),
        Case('tf1.get_variable("b", [3], initializer=tf1.initializers.random_normal)',
             'self.add_weight(name="b", shape=[3], initializer=tf.keras.initializers.RandomNormal(stddev=1.0))',
             id="initializer-class-instantiated"),
        Case('tf1.get_variable("w", [4, 8], partitioner=tf1.fixed_size_partitioner(2))', None, id="partitioner-refused"),
        Case('tf1.get_variable("w", [4, 8], regularizer=reg)', None, id="regularizer-refused"),
        Case('tf1.get_variable("w")', None, id="no-shape-refused"),
        Case('tf.Variable(tf1.truncated_normal([784, 10], stddev=0.1), name="W")',
             'self.add_weight(name="W", shape=[784, 10], initializer=tf.keras.initializers.TruncatedNormal(stddev=0.1))',
             id="variable-of-an-initial-op"),
        Case("tf.Variable(tf.zeros([10]))", "self.add_weight(shape=[10], initializer=tf.keras.initializers.Zeros())",
             id="variable-of-zeros"),
        Case("tf.Variable(tf.constant(0.1, shape=[10]))",
             "self.add_weight(shape=[10], initializer=tf.keras.initializers.Constant(0.1))", id="variable-of-a-constant"),
        Case("tf.Variable(tf1.random_uniform([5, 3], -1.0, 1.0))",
             "self.add_weight(shape=[5, 3], initializer=tf.keras.initializers.RandomUniform(minval=-1.0, maxval=1.0))",
             id="variable-of-uniform"),
        Case("tf.Variable(0.5, trainable=False)",
             "self.add_weight(shape=[], initializer=tf.keras.initializers.Constant(0.5), trainable=False)",
             id="variable-of-a-number"),
        Case("tf.Variable(weights_from_numpy)", None, id="variable-of-a-value-refused"),
    ]

    def convert(self, call, ctx, tf):
        if (ctx.call_api_path(call) or "").rsplit(".", 1)[-1] != "get_variable":
            return _variable(call, ctx, tf)
        bound = bind(call, SIGNATURE)
        for key, reason in REFUSED.items():
            arg = bound.get(key)
            if arg is not None and not _says_nothing(arg.value, ctx):
                raise Unsupported(reason, arg)
        validate = bound.get("validate_shape")
        if validate is not None and _emit.code(validate.value) != "True":
            raise Unsupported("`validate_shape=False` has no Keras counterpart", validate)
        if "name" not in bound:
            raise Unsupported("get_variable without a name", call)
        shape = bound.get("shape")
        if shape is None or _emit.code(shape.value) == "None":
            raise Unsupported("get_variable without a shape (its shape taken from the initializer's value) "
                              "is not converted", call)
        args = [_emit.keyword_arg("name", bound["name"].value), _emit.keyword_arg("shape", shape.value)]
        dtype = bound.get("dtype")
        if dtype is not None and _emit.code(dtype.value) != "None":
            args.append(_emit.keyword_arg("dtype", dtype.value))
        args.append(_emit.keyword_arg("initializer", _initializer(bound.get("initializer"), dtype, ctx, tf)))
        for key in ("trainable", "constraint"):
            arg = bound.get(key)
            if arg is not None and _emit.code(arg.value) != "None":
                args.append(_emit.keyword_arg(key, arg.value))
        return cst.Call(func=_emit.expr("self.add_weight"), args=_emit.call_args(args))


def _says_nothing(value: cst.BaseExpression, ctx) -> bool:
    text = _emit.code(value)
    if text in ("None", "False"):
        return True
    path = ctx.api_path(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
    return (path or "").endswith(("VariableSynchronization.AUTO", "VariableAggregation.NONE"))


def _initializer(arg, dtype, ctx, tf) -> cst.BaseExpression:
    if arg is None or _emit.code(arg.value) == "None":
        integer = dtype is not None and _emit.code(dtype.value).rsplit(".", 1)[-1].strip("'\"") in _INTEGER_DTYPES
        return _emit.expr(f"{tf}.keras.initializers.{'Zeros' if integer else 'GlorotUniform'}()")
    value = arg.value
    if isinstance(value, cst.Call):
        return value  # a TF1 initializer call: the layer's constructor translation applies its rule
    path = (ctx.api_path(value) if isinstance(value, (cst.Name, cst.Attribute)) else None) or ""
    bare = path[len("compat.v1."):] if path.startswith("compat.v1.") else path
    if bare in INITIALIZER_CLASSES:
        name, defaults = INITIALIZER_CLASSES[bare]
        return _emit.expr(f"{tf}.keras.initializers.{name}({defaults})")
    if isinstance(value, cst.SimpleString) or bare.startswith("keras.initializers."):
        return value
    raise Unsupported("get_variable's initializer is a value, not an initializer: e2k does not convert it", arg)


def _variable(call, ctx, tf) -> cst.Call:
    """``tf.Variable(tf.truncated_normal([784, 10], stddev=0.1), name="W")``: the op that made
    the initial value is the weight's initializer, its shape the weight's."""
    bound = bind(call, VARIABLE_SIGNATURE)
    for key in ("collections", "caching_device", "variable_def", "import_scope", "expected_shape"):
        arg = bound.get(key)
        if arg is not None and _emit.code(arg.value) != "None":
            raise Unsupported(f"`{key}=` of tf.Variable has no Keras counterpart", arg)
    for key in ("synchronization", "aggregation"):
        arg = bound.get(key)
        if arg is not None and not _says_nothing(arg.value, ctx):
            raise Unsupported(f"`{key}=` is not converted", arg)
    validate = bound.get("validate_shape")
    if validate is not None and _emit.code(validate.value) != "True":
        raise Unsupported("`validate_shape=False` has no Keras counterpart", validate)
    if "initial_value" not in bound:
        raise Unsupported("tf.Variable without an initial value", call)
    shape, initializer, dtype = _initial_value(bound["initial_value"].value, ctx, tf)
    given = bound.get("shape")
    if given is not None and _emit.code(given.value) != "None":
        shape = given.value
    args = []
    if "name" in bound and _emit.code(bound["name"].value) != "None":
        args.append(_emit.keyword_arg("name", bound["name"].value))
    args.append(_emit.keyword_arg("shape", shape))
    dtype = bound["dtype"].value if "dtype" in bound and _emit.code(bound["dtype"].value) != "None" else dtype
    if dtype is not None:
        args.append(_emit.keyword_arg("dtype", dtype))
    args.append(_emit.keyword_arg("initializer", initializer))
    for key in ("trainable", "constraint"):
        arg = bound.get(key)
        if arg is not None and _emit.code(arg.value) != "None":
            args.append(_emit.keyword_arg(key, arg.value))
    return cst.Call(func=_emit.expr("self.add_weight"), args=_emit.call_args(args))


def _initial_value(value, ctx, tf):
    """(shape, Keras initializer, dtype or None) of a Variable's initial value."""
    if isinstance(value, (cst.Integer, cst.Float)) or (
            isinstance(value, cst.UnaryOperation) and isinstance(value.expression, (cst.Integer, cst.Float))):
        number = _emit.code(value)
        dtype = None if isinstance(value, cst.Float) or "." in number else cst.SimpleString('"int32"')
        return _emit.expr("[]"), _emit.expr(f"{tf}.keras.initializers.Constant({number})"), dtype
    path = ctx.call_api_path(value) if isinstance(value, cst.Call) else None
    bare = (path or "")[len("compat.v1."):] if (path or "").startswith("compat.v1.") else (path or "")
    if bare not in INITIAL_VALUES:
        raise Unsupported("tf.Variable's initial value is not an op e2k turns into an initializer "
                          "(tf.zeros, tf.ones, tf.constant, tf.fill, tf.random_normal, tf.truncated_normal, "
                          "tf.random_uniform)", value)
    name, signature, params, defaults = INITIAL_VALUES[bare]
    op = {k: a.value for k, a in bind(value, signature).items()}
    if bare == "constant":
        if "shape" not in op or _emit.code(op["shape"]) == "None":
            if not isinstance(op.get("value"), (cst.Integer, cst.Float, cst.UnaryOperation)):
                raise Unsupported("tf.Variable(tf.constant(...)) of a value without a shape is not converted", value)
            op["shape"] = _emit.expr("[]")
        if op.get("verify_shape") is not None and _emit.code(op["verify_shape"]) != "False":
            raise Unsupported("`verify_shape=` is not converted", value)
    shape = op.get("dims" if bare == "fill" else "shape")
    if shape is None:
        raise Unsupported("the initial value's shape is not given", value)
    if bare in ("random_uniform", "random.uniform") and "maxval" in op and _emit.code(op["maxval"]) == "None":
        op.pop("maxval")
    args = [_emit.keyword_arg(params[key], op[key]) for key in params if key in op]
    given = {params[key] for key in params if key in op}
    args += [_emit.keyword_arg(key, _emit.expr(default)) for key, default in defaults.items() if key not in given]
    order = list(params.values())
    args.sort(key=lambda a: order.index(a.keyword.value))
    if name == "Constant":
        args = [cst.Arg(op["value"])]  # `Constant(0.1)`, as people write it
    dtype = op.get("dtype")
    initializer = cst.Call(func=_emit.expr(f"{tf}.keras.initializers.{name}"), args=_emit.call_args(args))
    return shape, initializer, dtype
