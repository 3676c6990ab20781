from __future__ import annotations

from estimator2keras._rule import Case, ExpressionRule, Safety
from estimator2keras._translate import CallSpec, translate

_DTYPE = frozenset({"dtype"})

INITIALIZERS = {
    "truncated_normal_initializer": CallSpec(
        "keras.initializers.TruncatedNormal", ("mean", "stddev", "seed", "dtype"),
        explicit={"stddev": "1.0"}, dropped=_DTYPE),
    "random_normal_initializer": CallSpec(
        "keras.initializers.RandomNormal", ("mean", "stddev", "seed", "dtype"),
        explicit={"stddev": "1.0"}, dropped=_DTYPE),
    "random_uniform_initializer": CallSpec(
        "keras.initializers.RandomUniform", ("minval", "maxval", "seed", "dtype"),
        explicit={"minval": "0.0", "maxval": "1.0"}, dropped=_DTYPE),
    "constant_initializer": CallSpec(
        "keras.initializers.Constant", ("value", "dtype", "verify_shape"), dropped=_DTYPE | {"verify_shape"}),
    "zeros_initializer": CallSpec("keras.initializers.Zeros", ("dtype",), dropped=_DTYPE),
    "ones_initializer": CallSpec("keras.initializers.Ones", ("dtype",), dropped=_DTYPE),
    "glorot_uniform_initializer": CallSpec("keras.initializers.GlorotUniform", ("seed", "dtype"), dropped=_DTYPE),
    "glorot_normal_initializer": CallSpec("keras.initializers.GlorotNormal", ("seed", "dtype"), dropped=_DTYPE),
    "orthogonal_initializer": CallSpec("keras.initializers.Orthogonal", ("gain", "seed", "dtype"), dropped=_DTYPE),
    "variance_scaling_initializer": CallSpec(
        "keras.initializers.VarianceScaling", ("scale", "mode", "distribution", "seed", "dtype"), dropped=_DTYPE),
    "contrib.layers.xavier_initializer": CallSpec(
        "keras.initializers.GlorotUniform", ("uniform", "seed", "dtype"), dropped=_DTYPE,
        refused={"uniform": "xavier_initializer(uniform=...) is converted only with its default (uniform)"}),
}
# tf.initializers.* aliases (TF1) of the same classes.
for _alias, _name in {"initializers.truncated_normal": "truncated_normal_initializer",
                      "initializers.random_normal": "random_normal_initializer",
                      "initializers.random_uniform": "random_uniform_initializer",
                      "initializers.constant": "constant_initializer",
                      "initializers.zeros": "zeros_initializer",
                      "initializers.ones": "ones_initializer",
                      "initializers.glorot_uniform": "glorot_uniform_initializer",
                      "initializers.glorot_normal": "glorot_normal_initializer",
                      "initializers.orthogonal": "orthogonal_initializer",
                      "initializers.variance_scaling": "variance_scaling_initializer"}.items():
    INITIALIZERS[_alias] = INITIALIZERS[_name]


class Tf1InitializerToKeras(ExpressionRule):
    """A TF1 initializer in a layer's arguments becomes the Keras initializer, with TF1's defaults written out.

    ## What it does
    Inside a converted model_fn, `kernel_initializer=tf.truncated_normal_initializer(stddev=0.1)`
    and the other TF1 initializers (`tf.*_initializer`, `tf.initializers.*`,
    `tf.contrib.layers.xavier_initializer`) become their `tf.keras.initializers` classes.
    Where the defaults differ, TF1's are written out: `TruncatedNormal` and `RandomNormal`
    get `stddev=1.0` (Keras: 0.05), `RandomUniform` gets `minval=0.0, maxval=1.0` (Keras:
    -0.05, 0.05). TF1's `distribution="normal"` of `variance_scaling_initializer` meant a
    truncated normal. `dtype=` is dropped: the layer's dtype decides.

    ## Why
    Keras 3 layers only take Keras initializers; a TF1 initializer object breaks the model
    on the newest TensorFlow.

    ## Fix safety
    Safe: the same distributions with the same parameters. The random numbers drawn differ
    between TF1 graphs and Keras anyway (`e2k parity` copies the initial weights across).

    ## References
    - https://www.tensorflow.org/api_docs/python/tf/keras/initializers
    """

    code = "E2K304"
    summary = "TF1 initializers in layer arguments -> tf.keras.initializers.* with TF1's defaults written out"
    safety = Safety.SAFE
    role = "initializer"
    targets = tuple(INITIALIZERS)

    cases = [
        Case(
            "tf1.truncated_normal_initializer(stddev=0.1)",
            "tf.keras.initializers.TruncatedNormal(stddev=0.1)",
            id="truncated-normal",
        ),
        Case("tf.random_normal_initializer()", "tf.keras.initializers.RandomNormal(stddev=1.0)", id="default-written-out"),
        Case("tf.constant_initializer(0.1, dtype=tf.float32)", "tf.keras.initializers.Constant(0.1)", id="dtype-dropped"),
        Case(
            'tf1.variance_scaling_initializer(2.0, distribution="normal")',
            'tf.keras.initializers.VarianceScaling(2.0, distribution="truncated_normal")',
            id="normal-is-truncated",
        ),
    ]

    def convert(self, call, ctx, tf):
        import libcst as cst

        new, _ = translate(call, INITIALIZERS[ctx.call_api_path(call)], tf)
        args = []
        for arg in new.args:
            value = arg.value
            if arg.keyword is not None and arg.keyword.value == "distribution" and isinstance(value, cst.SimpleString):
                if value.evaluated_value == "normal":
                    value = cst.SimpleString(value.prefix + value.quote + "truncated_normal" + value.quote)
            args.append(arg.with_changes(value=value))
        return new.with_changes(args=args)
