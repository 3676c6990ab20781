from __future__ import annotations

from estimator2keras import _emit
from estimator2keras._rule import Case, ExpressionRule, Safety
from estimator2keras._translate import bind

#: `tf.layers` classes that are Keras layers with the same constructor arguments.
LAYER_CLASSES = (
    "Dense", "Flatten", "Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "Conv3DTranspose",
    "SeparableConv1D", "SeparableConv2D", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D",
    "AveragePooling1D", "AveragePooling2D", "AveragePooling3D",
)


class Tf1LayerClassToKeras(ExpressionRule):
    """A `tf.layers` class (TF1) becomes the Keras layer of the same name.

    ## What it does
    Inside a converted model_fn, `tf.layers.Dense(...)`, `tf.compat.v1.layers.Conv2D(...)`
    and the other layer classes of TF1's `tf.layers` become `tf.keras.layers.Dense(...)`,
    `tf.keras.layers.Conv2D(...)`... with the same arguments.

    ## Why
    TF1's layer classes were thin subclasses of the Keras layers, with the same constructor
    arguments and the same default initialisers (Glorot uniform kernels, zero biases). They
    do not exist in Keras 3.

    ## Fix safety
    Safe: same arguments, same initialisers, same computation (fixture
    `seed_mirrored_linear`).

    ## Limitations
    `Dropout` and `BatchNormalization` need the model's `training` flag and come with the
    model_fn `mode` conversion (not yet: the model_fn is left as it was, E2K901).

    ## References
    - https://www.tensorflow.org/guide/migrate/model_mapping
    """

    code = "E2K301"
    summary = "tf.layers.Dense(...) and other TF1 layer classes -> tf.keras.layers.*"
    safety = Safety.SAFE
    role = "layer"
    targets = tuple(f"layers.{name}" for name in LAYER_CLASSES)

    cases = [
        Case("tf1.layers.Dense(1)", "tf.keras.layers.Dense(1)", id="dense"),
        Case(
            "tf.compat.v1.layers.Conv2D(32, (3, 3), activation=tf.nn.relu)",
            "tf.keras.layers.Conv2D(32, (3, 3), activation=tf.nn.relu)",
            id="conv-args-kept",
        ),
    ]

    def convert(self, call, ctx, tf):
        name = ctx.call_api_path(call).split(".", 1)[1]
        return call.with_changes(func=_emit.expr("{tf}.keras.layers.{name}", tf=tf, name=name))


#: Functional `tf.layers.x(inputs, ...)` -> (Keras class, TF1 signature after `inputs`).
LAYER_FUNCTIONS = {
    "layers.dense": ("Dense", (
        "inputs", "units", "activation", "use_bias", "kernel_initializer", "bias_initializer",
        "kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
        "bias_constraint", "trainable", "name", "reuse",
    )),
    "layers.flatten": ("Flatten", ("inputs", "name", "data_format")),
}


class Tf1LayerFunctionToKeras(ExpressionRule):
    """A functional TF1 layer call, `tf.layers.dense(inputs, ...)`, becomes a Keras layer applied to `inputs`.

    ## What it does
    Inside a converted model_fn, `net = tf.layers.dense(features, 10, activation=tf.nn.relu)`
    becomes the layer `tf.keras.layers.Dense(10, activation=tf.nn.relu)` in the model,
    applied to what the call was applied to. `flatten` likewise.

    ## Why
    The functional forms created a layer object on every call; Keras models own their layer
    objects, created once, and call them in the forward pass.

    ## Fix safety
    Safe: the functional forms built exactly these layers with these arguments.

    ## Limitations
    `reuse=` (variable sharing through scopes) is not converted: the model_fn is left as
    it was (E2K901). More functional layers (convolutions, pooling, dropout, batch
    normalisation) come with the rest of the layer catalogue.

    ## References
    - https://www.tensorflow.org/guide/migrate/model_mapping
    """

    code = "E2K302"
    summary = "tf.layers.dense(inputs, ...) and other TF1 layer functions -> a Keras layer applied to inputs"
    safety = Safety.SAFE
    role = "layer_function"
    targets = tuple(LAYER_FUNCTIONS)

    cases = [
        Case(
            "tf1.layers.dense(features, 10, activation=tf.nn.relu)",
            "tf.keras.layers.Dense(10, activation=tf.nn.relu)",
            id="dense",
        ),
    ]

    def convert(self, call, ctx, tf):
        from estimator2keras._modelfn import LayerCall
        from estimator2keras._rule import Unsupported

        keras_class, signature = LAYER_FUNCTIONS[ctx.call_api_path(call)]
        bound = bind(call, signature)
        if "reuse" in bound:
            raise Unsupported("`reuse=` shares variables through scopes, which Keras layers do not", bound["reuse"])
        inputs = bound.pop("inputs", None)
        if inputs is None:
            raise Unsupported("the layer call has no inputs", call)
        args = []
        for i, (name, arg) in enumerate(bound.items()):
            positional = arg.keyword is None and i == 0 and name == signature[1]
            args.append(arg.with_changes(comma=arg.comma) if positional else _emit.keyword_arg(name, arg.value))
        layer = call.with_changes(
            func=_emit.expr("{tf}.keras.layers.{name}", tf=tf, name=keras_class), args=_emit.call_args(args)
        )
        return LayerCall(layer, inputs.value)
