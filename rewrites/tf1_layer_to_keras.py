from __future__ import annotations

import difflib

import libcst as cst

from estimator2keras import _emit
from estimator2keras._modelfn import LayerCall
from estimator2keras._rule import Case, ExpressionRule, Safety, Unsupported
from estimator2keras._translate import bind

#: `tf.layers` classes that are Keras layers with the same constructor arguments.
LAYER_CLASSES = (
    "Dense", "Flatten", "Dropout", "BatchNormalization",
    "Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "Conv3DTranspose",
    "SeparableConv1D", "SeparableConv2D", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D",
    "AveragePooling1D", "AveragePooling2D", "AveragePooling3D",
)
#: Arguments of TF1's BatchNormalization that Keras 3 does not have.
NOT_IN_KERAS_3 = {
    "fused": None,  # an implementation choice; the same result without it
    "renorm": "batch renormalisation has no Keras 3 equivalent",
    "renorm_clipping": "batch renormalisation has no Keras 3 equivalent",
    "renorm_momentum": "batch renormalisation has no Keras 3 equivalent",
    "virtual_batch_size": "virtual batches have no Keras 3 equivalent",
    "adjustment": "`adjustment` has no Keras 3 equivalent",
    "reuse": "`reuse=` shares variables through scopes, which Keras layers do not",
    "outputs_collections": "`outputs_collections=` adds the output to graph collections, which Keras does not have",
    "scope": "`scope=` names variables through scopes, which Keras layers do not",
}


def _keras_args(call_args, bound_names):
    """Keep the arguments, dropping the ones Keras 3 lacks (or refusing them)."""
    out = []
    for name, arg in bound_names:
        if name in NOT_IN_KERAS_3:
            reason = NOT_IN_KERAS_3[name]
            if reason is not None and _emit.code(arg.value) not in ("None", "False"):
                raise Unsupported(reason, arg)
            continue
        out.append(arg)
    return out


class Tf1LayerClassToKeras(ExpressionRule):
    """A `tf.layers` class (TF1) becomes the Keras layer of the same name.

    ## What it does
    Inside a converted model_fn, `tf.layers.Dense(...)`, `tf.compat.v1.layers.Conv2D(...)`
    and the other layer classes of TF1's `tf.layers` become `tf.keras.layers.Dense(...)`,
    `tf.keras.layers.Conv2D(...)`... with the same arguments. `fused=` (batch
    normalisation) is dropped: Keras 3 chooses the implementation itself.

    ## Why
    TF1's layer classes were thin subclasses of the Keras layers, with the same constructor
    arguments and the same default initialisers (Glorot uniform kernels, zero biases). They
    do not exist in Keras 3.

    ## Fix safety
    Safe: same arguments, same initialisers, same computation (fixture
    `seed_mirrored_linear`). How `Dropout` and `BatchNormalization` learn whether they are
    training is E2K303's business.

    ## Limitations
    Batch renormalisation, virtual batches and `reuse=` have no Keras 3 equivalent: the
    model_fn is left as it was (E2K901).

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
        Case("tf1.layers.BatchNormalization(momentum=0.9, fused=True)", "tf.keras.layers.BatchNormalization(momentum=0.9)", id="fused-dropped"),
        Case("tf1.layers.BatchNormalization(renorm=True)", None, id="renorm-refused"),
    ]

    def convert(self, call, ctx, tf):
        name = ctx.call_api_path(call).split(".", 1)[1]
        named = [(a.keyword.value if a.keyword else f"#{i}", a) for i, a in enumerate(call.args)]
        args = _keras_args(call.args, named)
        return _emit.one_line_call(call.with_changes(func=_emit.expr("{tf}.keras.layers.{name}", tf=tf, name=name)), args)


_CONV = ("filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate", "activation", "use_bias",
         "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer", "activity_regularizer",
         "kernel_constraint", "bias_constraint", "trainable", "name", "reuse")
_POOL = ("pool_size", "strides", "padding", "data_format", "name")

#: Functional `tf.layers.x(inputs, ...)` -> (Keras class, TF1 signature after `inputs`, call-time arguments).
LAYER_FUNCTIONS = {
    "layers.dense": ("Dense", (
        "units", "activation", "use_bias", "kernel_initializer", "bias_initializer",
        "kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
        "bias_constraint", "trainable", "name", "reuse",
    ), ()),
    "layers.flatten": ("Flatten", ("name", "data_format"), ()),
    # contrib's flatten reshaped to [batch, -1], as Flatten does in its default channels_last.
    "contrib.layers.flatten": ("Flatten", ("outputs_collections", "scope"), ()),
    "layers.dropout": ("Dropout", ("rate", "noise_shape", "seed", "training", "name"), ("training",)),
    "layers.batch_normalization": ("BatchNormalization", (
        "axis", "momentum", "epsilon", "center", "scale", "beta_initializer", "gamma_initializer",
        "moving_mean_initializer", "moving_variance_initializer", "beta_regularizer", "gamma_regularizer",
        "beta_constraint", "gamma_constraint", "training", "trainable", "name", "reuse", "renorm",
        "renorm_clipping", "renorm_momentum", "fused", "virtual_batch_size", "adjustment",
    ), ("training",)),
    "layers.conv1d": ("Conv1D", _CONV, ()),
    "layers.conv2d": ("Conv2D", _CONV, ()),
    "layers.conv3d": ("Conv3D", _CONV, ()),
    "layers.conv2d_transpose": ("Conv2DTranspose", tuple(a for a in _CONV if a != "dilation_rate"), ()),
    "layers.separable_conv2d": ("SeparableConv2D", _CONV[:6] + ("depth_multiplier",) + _CONV[6:], ()),
    "layers.max_pooling1d": ("MaxPooling1D", _POOL, ()),
    "layers.max_pooling2d": ("MaxPooling2D", _POOL, ()),
    "layers.max_pooling3d": ("MaxPooling3D", _POOL, ()),
    "layers.average_pooling1d": ("AveragePooling1D", _POOL, ()),
    "layers.average_pooling2d": ("AveragePooling2D", _POOL, ()),
    "layers.average_pooling3d": ("AveragePooling3D", _POOL, ()),
}


_CONTRIB_DENSE = ("num_outputs", "activation_fn", "normalizer_fn", "normalizer_params", "weights_initializer",
                  "weights_regularizer", "biases_initializer", "biases_regularizer", "reuse", "variables_collections",
                  "outputs_collections", "trainable", "scope")
_CONTRIB_CONV = ("num_outputs", "kernel_size", "stride", "padding", "data_format", "rate", "activation_fn",
                 "normalizer_fn", "normalizer_params", "weights_initializer", "weights_regularizer",
                 "biases_initializer", "biases_regularizer", "reuse", "variables_collections", "outputs_collections",
                 "trainable", "scope")
_CONTRIB_POOL = ("kernel_size", "stride", "padding", "data_format", "outputs_collections", "scope")
#: tf.contrib.layers' functions (TF 1.0-1.x), with their own names and defaults: (Keras class,
#: signature after `inputs`). Their defaults are written out where Keras's differ (a ReLU,
#: "SAME" padding, pooling strides of 2).
CONTRIB_LAYERS = {
    "contrib.layers.fully_connected": ("Dense", _CONTRIB_DENSE),
    "contrib.layers.conv2d": ("Conv2D", _CONTRIB_CONV),
    "contrib.layers.convolution2d": ("Conv2D", _CONTRIB_CONV),
    "contrib.layers.max_pool2d": ("MaxPooling2D", _CONTRIB_POOL),
    "contrib.layers.avg_pool2d": ("AveragePooling2D", _CONTRIB_POOL),
    "contrib.layers.dropout": ("Dropout", ("keep_prob", "noise_shape", "is_training", "outputs_collections", "scope",
                                            "seed")),
}
#: Arguments that only named or collected the variables, or said None: nothing in Keras.
_CONTRIB_DROPPED = ("reuse", "variables_collections", "outputs_collections", "scope")


def _contrib_layer(call, ctx, tf, path: str) -> LayerCall:
    keras_class, signature = CONTRIB_LAYERS[path]
    bound = {k: a.value for k, a in bind(call, ("inputs", *signature)).items()}
    inputs = bound.pop("inputs", None)
    if inputs is None:
        raise Unsupported("the layer call has no inputs", call)
    for key in ("normalizer_fn", "normalizer_params", "reuse"):
        if key in bound and _emit.code(bound[key]) != "None":
            raise Unsupported(f"tf.contrib.layers' `{key}=` is not converted", bound[key])
    for key in _CONTRIB_DROPPED:
        bound.pop(key, None)
    args: list = []
    call_kwargs: list = []

    def keyword(name, value):
        args.append(_emit.keyword_arg(name, value if isinstance(value, cst.CSTNode) else _emit.expr(value)))

    if keras_class == "Dropout":
        keep = bound.pop("keep_prob", None)
        if keep is None:
            rate = "0.5"
        elif isinstance(keep, (cst.Float, cst.Integer)):
            rate = repr(round(1 - float(keep.value), 12))
        else:
            rate = f"1 - {_emit.code(keep) if isinstance(keep, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) else '(' + _emit.code(keep) + ')'}"
        keyword("rate", rate)
        for key in ("noise_shape", "seed"):
            if key in bound:
                keyword(key, bound.pop(key))
        # tf.contrib.layers.dropout dropped units unless told otherwise (is_training=True).
        training = bound.pop("is_training", None)
        call_kwargs.append(_emit.keyword_arg("training", training if training is not None else cst.Name("True")))
    elif keras_class == "Dense":
        args.append(cst.Arg(bound.pop("num_outputs")))
        _activation(bound, keyword)
        _weights(bound, keyword)
    elif keras_class == "Conv2D":
        args.append(cst.Arg(bound.pop("num_outputs")))
        args.append(cst.Arg(bound.pop("kernel_size")) if "kernel_size" in bound else None)
        if args[-1] is None:
            raise Unsupported("tf.contrib.layers.conv2d without a kernel_size", call)
        if "stride" in bound:
            keyword("strides", bound.pop("stride"))
        keyword("padding", bound.pop("padding", None) or cst.SimpleString('"SAME"'))
        if "rate" in bound:
            keyword("dilation_rate", bound.pop("rate"))
        _data_format(bound, keyword)
        _activation(bound, keyword)
        _weights(bound, keyword)
    else:  # pooling
        if "kernel_size" not in bound:
            raise Unsupported("a tf.contrib.layers pooling without a kernel_size", call)
        args.append(cst.Arg(bound.pop("kernel_size")))
        keyword("strides", bound.pop("stride", None) or cst.Integer("2"))
        if "padding" in bound:
            keyword("padding", bound.pop("padding"))
        _data_format(bound, keyword)
    if "trainable" in bound:
        keyword("trainable", bound.pop("trainable"))
    if bound:
        raise Unsupported(f"tf.contrib.layers' `{sorted(bound)[0]}=` is not converted", call)
    args = [a for a in args if a is not None]
    args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]
    layer = cst.Call(func=_emit.expr("{tf}.keras.layers.{name}", tf=tf, name=keras_class), args=_emit.call_args(args))
    return LayerCall(layer, inputs, call_kwargs)


def _activation(bound, keyword) -> None:
    """contrib's layers applied a ReLU unless told otherwise; `activation_fn=None`: none."""
    activation = bound.pop("activation_fn", None)
    if activation is None:
        keyword("activation", "tf.nn.relu")
    elif _emit.code(activation) != "None":
        keyword("activation", activation)


def _weights(bound, keyword) -> None:
    initializer = bound.pop("weights_initializer", None)
    if initializer is not None:
        keyword("kernel_initializer", initializer)  # xavier_initializer() is Keras's default, glorot_uniform
    if "weights_regularizer" in bound:
        keyword("kernel_regularizer", bound.pop("weights_regularizer"))
    biases = bound.pop("biases_initializer", None)
    if biases is not None and _emit.code(biases) == "None":
        keyword("use_bias", "False")
    elif biases is not None:
        keyword("bias_initializer", biases)
    if "biases_regularizer" in bound:
        keyword("bias_regularizer", bound.pop("biases_regularizer"))


def _data_format(bound, keyword) -> None:
    data_format = bound.pop("data_format", None)
    if data_format is None or _emit.code(data_format) in ("None", '"NHWC"', "'NHWC'"):
        return
    if _emit.code(data_format) in ('"NCHW"', "'NCHW'"):
        keyword("data_format", '"channels_first"')
        return
    raise Unsupported("a tf.contrib.layers data_format e2k cannot read", data_format)


class Tf1LayerFunctionToKeras(ExpressionRule):
    """A functional TF1 layer call, `tf.layers.dense(inputs, ...)`, becomes a Keras layer applied to `inputs`.

    ## What it does
    Inside a converted model_fn, `net = tf.layers.dense(features, 10, activation=tf.nn.relu)`
    becomes the layer `tf.keras.layers.Dense(10, activation=tf.nn.relu)`, created once in the
    model and applied in its forward pass to what the call was applied to. Likewise
    `flatten` (and `tf.contrib.layers.flatten`), `dropout`, `batch_normalization`,
    `conv1d/2d/3d`, `conv2d_transpose`, `separable_conv2d`, `max_pooling1d/2d/3d`,
    `average_pooling1d/2d/3d`. The first argument after `inputs` stays positional; the others
    become keywords.

    `tf.contrib.layers`' functions (2017-era code) convert too, with their own names and
    defaults written out where Keras's differ: `fully_connected(x, n)` -> `Dense(n,
    activation=tf.nn.relu)` (contrib applied a ReLU unless `activation_fn=None`),
    `conv2d` / `convolution2d(x, n, k, stride=s, rate=r)` -> `Conv2D(n, k, strides=s,
    dilation_rate=r, padding="SAME", activation=tf.nn.relu)`, `max_pool2d` / `avg_pool2d(x,
    k)` -> `MaxPooling2D(k, strides=2)` / `AveragePooling2D`, `dropout(x, keep_prob=p)` ->
    `Dropout(rate=1 - p)` applied with `training=` its `is_training` (True by default: contrib
    dropped units unless told otherwise). `weights_initializer` / `biases_initializer` /
    `*_regularizer` become `kernel_*` / `bias_*` (`biases_initializer=None`: `use_bias=False`);
    `scope`, `reuse=None` and the collections go. A `normalizer_fn` is refused.

    A function of the module that the model_fn calls and that makes layers
    (`logits = conv_net(features, num_classes, dropout, is_training=...)`) becomes a method
    of the Keras model: its layers are made once in `__init__`, configured with the values
    the call passed for the helper's parameters, and the method keeps the helper's name,
    statements and comments. A parameter the helper gives layers as `training=` becomes the
    method's `training` flag; `with tf.variable_scope(...)` is unwrapped. A helper called
    again with `reuse=True` (its variable scope's `reuse=`) shares the first call's layers,
    as the method does. An `if` in the helper (`if batch_normalization: layer =
    tf.keras.layers.BatchNormalization(...)(layer, training=training)`) stays in the method as
    written, its test read at each call, the layers of its branches made in `__init__` either
    way (a layer a branch never applies is never built and holds no weights); its branches
    must be assignments. A layer object the helper makes and applies after
    (`bn = tf.keras.layers.BatchNormalization(momentum=0.90)`, then `layer = bn(layer,
    training=training)`) is made in `__init__` as `self.bn`, its application `self.bn(...)`.
    A helper whose layers test the mode (`training=(mode ==
    tf.estimator.ModeKeys.TRAIN)`, its `mode` parameter given the model_fn's `mode`) takes
    Keras's `training` flag the same way.

    A helper of one `return` expression whose calls each made new layers (no `reuse`:
    `def batch_norm(x): return tf.layers.batch_normalization(x, ...)` called three times) is
    written out at each call, `tf.nn.relu(batch_norm(Y1))` becoming
    `tf.nn.relu(self.batch_normalization(Y1, training=training))`, each call with its own layer
    configured with that call's values. Helpers defined inside the model_fn convert the same
    way (one expression: written out at each call; more statements: a method), reading the
    model_fn's `params`, `mode` and the values their layers' arguments need (an initializer,
    made in `__init__`). Layers are made in `__init__` in the order the forward pass first
    applies them, as TF1 made their variables.

    A helper called in a loop of the model_fn (`for i, n_units in
    enumerate(params['hidden_units']): net = build_fully_connected(net, n_units=n_units,
    name='hidden_layer' + str(i), ...)`) made new layers at each iteration: `__init__` makes
    them the same way, one tuple of the helper's layers per iteration
    (`self.build_fully_connected_layers = [(tf.keras.layers.Dense(n_units, ...),
    tf.keras.layers.BatchNormalization(...)) for i, n_units in
    enumerate(params['hidden_units'])]`, in the order TF1 made their variables, configured
    with the loop's own variables), and the loop in `call` gives the method one iteration's
    layers (`for dense, bn in self.build_fully_connected_layers: net =
    self.build_fully_connected(net, ..., dense, bn, training=training)`). The call must be a
    statement of the loop's own body, the loop must run over values `__init__` has (the
    model's arguments, the module's names), the loop's variables may only configure the
    layers, and the helper must be called only there. A helper of one `return` expression
    called in a loop is written out there instead, with one list per layer
    (`for dense, dropout in zip(self.dense_layers, self.dropout_layers): net =
    dropout(dense(net), training=training)`), as a loop of layers in the model_fn itself is.

    A function of the module that makes layers and serves as a building block becomes a
    Keras layer class: one called more than once with new layers at each call (several
    statements, no `reuse`), one called from another function that makes layers, or one whose
    body a method cannot hold (a loop of layers, calls of other such functions).
    `conv_block(inputs, filters, training)` becomes `class ConvBlock(tf.keras.layers.Layer)`:
    its first parameter is the tensor `call` takes, the parameter it gives layers as
    `training=` (or passes on as a training flag) is Keras's `training`, and its other
    parameters are the constructor's, with their defaults; a parameter read besides the layers'
    settings (`if norm:`) is kept as `self.norm`. Its body is converted as a model_fn's forward
    pass is (loops of layers, `if`s, helpers of its own, other layer classes), and its
    docstring stays. Each call is then one layer of the model: `net = conv_block(net, 16,
    training)` makes `self.conv_block_1 = ConvBlock(16)` in `__init__` and applies
    `self.conv_block_1(net, training=training)` in `call`, in a loop a list of them; a chain of
    such layers becomes a `tf.keras.Sequential`. Its weights are made in the order TF1 made its
    variables. Refused, naming the function: one that tests the mode itself (its callers pass a
    training flag instead), calls itself, takes two training flags, has statements that do not
    compute its result (a summary, a print), or whose settings are computed from the inputs.
    When only converted code called it, the TF1 function goes.

    Several such functions of one signature in a dict, one picked by a setting
    (`model_functions = {'linear': linear_model, 'dnn': dnn_model}`, `model_function =
    model_functions[params['model']]`, then `predictions = model_function(features, mode,
    params)`, Google Cloud's ML courses) become their layer classes, the same setting picking
    one in `__init__`: `{'linear': LinearModel, 'dnn': DnnModel}[params['model']](params)`. A
    function's `mode` parameter, given the model_fn's `mode`, is Keras's `training` flag: its
    `training=(mode == tf.estimator.ModeKeys.TRAIN)` becomes `training=training`. Refused: a
    setting computed in the model_fn, functions with different parameters, another `mode` than
    the model_fn's, tests of the mode other than for training
    (`fixtures/model_functions_by_setting`).

    `with tf.variable_scope(..., initializer=...)` around TF1 layers gave their kernels made
    without an initializer (tf.layers' default) the scope's: the Keras layer gets it as
    `kernel_initializer` (Dense and convolutions; the innermost scope that sets one wins;
    Keras and tf.contrib layers, which set their own, and batch normalization are left as
    they are). A scope's `regularizer`, `partitioner`, `custom_getter`, `dtype` or
    `constraint`, and its initializer around another kind of TF1 layer, are refused. A TF1
    layer, RNN cell or RNN function with no rule is refused, never left in `call`, where it
    would make new variables at every step.

    `tf.feature_column.input_layer(features, columns)` in the forward pass (TensorFlow's
    custom Estimator tutorial: `net = tf.feature_column.input_layer(features,
    params['feature_columns'])`) does not exist in TensorFlow 2: left in the model, it failed
    at the first step. Of numeric columns it is written out as a small function of the
    converted file, `numeric_input_layer(features, columns)`, which computes what TF1 did
    (each column's feature through its `normalizer_fn`, cast to float32, one row of the
    column's shape per example, concatenated in the order of the columns' names) from the
    same column objects at run time. With categorical columns too (indicator and embedding
    columns of vocabulary-list and -file, hash-bucket, identity, bucketized and crossed
    columns, as Google's census custom Estimator has them) it is written as a canned
    DNNClassifier's columns are (E2K504): the lookups, hashing and crossing made in the
    model's `__init__` and run in its `preprocess(features, labels=None)`, which every
    dataset fed to the model goes through (`model.fit(input_fn().map(model.preprocess))`:
    no string reaches the replicas, which Keras 3 cannot distribute), giving floats and ids
    in the Estimator's numbering (out-of-vocabulary buckets after the vocabulary, no id for
    `""`); the model's `input_layer` method, called where the model_fn called input_layer,
    concatenates them sorted by the columns' names, ids one-hot, embeddings a
    `Dense(dimension, use_bias=False)` of them initialized as TF1's tables
    (fixture `custom_estimator_census_columns`). What else the model_fn reads of the
    features by key (`features["weight"]`) `preprocess` passes on as it came. The columns are
    read where the program makes them (`params['feature_columns']` in the Estimator's
    `params` dict, a list, a loop over the data's keys, a function of the program returning
    them). A column's argument read from the model_fn's factory or partial (`dimension=
    embedding_size` of `generate_model_fn(embedding_size=...)`, a hash bucket count, bucket
    boundaries) is the model's constructor argument, as the layers' units are: written as it
    is in `__init__`, as `self.<name>` in `preprocess` and `input_layer` (fixture
    `custom_estimator_factory_columns`). Refused, naming them: a categorical column no
    indicator or embedding wraps (TF1 refused it too), columns e2k cannot read (a factory's
    parameter the model_fn binds again, arguments computed where the Estimator is built, a
    vocabulary of a type known only at run time), the features read otherwise besides such an
    input_layer (handed whole to a function), a second one in the model_fn, and the other
    `tf.feature_column` functions in a model_fn (`linear_model`). Exported, the model serves
    through its `serve(features)` method: the raw features a serving function gets (parsed
    tf.Examples' SparseTensors made dense by `dense_features`, as the columns read them) go
    through `preprocess`, then `predict_step` (tests/test_input_layer_export.py: the export
    serves what the model predicts, on TF 2.15 and the newest TF).

    Refused (E2K901), naming the helper: a helper of several statements called again with
    `reuse` in its scope but not `reuse=True` (each call made new layers), one whose layers
    are configured with values it computes itself or with values that differ between calls,
    a `mode` argument other than the model_fn's, a helper called in a loop and elsewhere too,
    helpers with statements other than
    assignments, `if`s of assignments and one final `return`, a function defined in the model_fn that is used
    otherwise than as such a helper, or whose statements read the model_fn's names outside its
    layers' arguments. When only the model_fn called it, the TF1 helper goes.

    A second pass of the same layers for evaluation and predictions
    (`logits_train = conv_net(..., reuse=False, is_training=True)` for the loss, then
    `logits_test = conv_net(..., reuse=True, is_training=False)` for the predictions and
    metrics; likewise a Keras model called with `training=True`, then `training=False`) becomes
    the model's one pass: Keras runs it with `training=True` in `fit` and `False` in `evaluate`
    and `predict`, where `predict_step` names its output `logits_test`. The two calls must
    differ only in the training flag and `reuse=True`. When the training pass had
    `is_training=True` in every mode, the Estimator's EVAL loss came from it, with dropout
    (and batch normalisation) as in training; Keras's `evaluate` computes the loss with
    `training=False`, like the metrics: the report and a comment in `call` say so. Refused:
    a second pass that changes other arguments or makes layers of its own (no `reuse`), and
    metrics or predictions that read the training pass itself beside an inference pass.

    The same helper called in each mode's branch, under one name (`logits =
    build_model(image, params['hidden_size'], params['keep_rate'])` in TRAIN, `logits =
    build_model(image, params['hidden_size'], 1.0)` in EVAL and PREDICT), is one forward pass
    too when the calls differ only in what switches training behaviour: a parameter its layers
    take as `training=` (True, or a test of the mode, in TRAIN; False in the other modes), a
    dropout's rate that makes the dropout the identity outside TRAIN (contrib's `keep_prob`
    1.0, `tf.layers.dropout`'s `rate` 0.0 with `training=True`), or a parameter the helper
    never reads. The layers are made once from TRAIN's call, the dropout with TRAIN's rate and
    Keras's `training` flag: in `evaluate` and `predict` it is the identity, as the Estimator's
    was. Each mode ran in a graph of its own, so the Estimator's modes had the same variables
    by their scope names, which the one model's layers are. A helper that also prints or logs
    such a rate is given `TRAIN's value if training else the other modes'` in `call`, so the
    line reads what it read under the Estimator. TRAIN's call may be shared with EVAL (`if mode
    == PREDICT: logits = build_model(x, False) ... else: logits = build_model(x, mode ==
    TRAIN)`) when what it passes is a test of the mode, off in EVAL as in Keras's `evaluate`.
    Refused, naming the parameter: calls that differ in anything else (another size, another
    rate that still drops, a switch the helper computes with), and a shared call whose dropout
    ran in EVAL too (a literal `True`, a rate).

    **RNN cells.** A TF1 cell run by an RNN function (`cell = tf.nn.rnn_cell.GRUCell(n)`, then
    `outputs, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)`; `BasicLSTMCell`,
    `LSTMCell`, `MultiRNNCell` of them, `tf.nn.static_rnn`, and the `tf.contrib.rnn`
    spellings) becomes a Keras recurrent layer made in `__init__`: `GRUCell(n)` ->
    `tf.keras.layers.GRU(n, reset_after=False)` (TF1's GRU applies the reset gate before the
    recurrent matrix, Keras's default after it), `BasicLSTMCell(n)` / `LSTMCell(n)` ->
    `tf.keras.layers.LSTM(n)` (`forget_bias=1.0` is Keras's `unit_forget_bias=True`, its
    default; `forget_bias=0.0` is `unit_forget_bias=False`), `activation=` and `name=` kept.
    A `MultiRNNCell([cell1, cell2])` is a stack of layers, each but the top returning its
    sequence. `call` asks Keras only for what the program reads afterwards:
    `return_sequences=True` where `outputs` is read, `return_state=True` where a state is read
    beside the layer's last output. So `outputs, state = tf.nn.dynamic_rnn(cell, x)` read only
    through `state` becomes `state = self.cell(x)`; with `state[0]` of a 2-layer stack read too,
    `outputs_0, state_0 = self.cell1(x)` then `state_1 = self.cell2(outputs_0)`; `state[i]`
    is that layer's state, `cells.output_size` is `self.cell2.units`. TF1's LSTMStateTuple is
    `(c, h)` and Keras returns `[outputs, h, c]`: `state.h` / `state[1]` become `state_h`,
    `state.c` / `state[0]` become `state_c` (`_, state_h, state_c = self.cell(x)`).
    `tf.nn.static_rnn` over a list of time steps (`tf.split(series, n, 1)`) runs the layer on
    `tf.stack(steps, axis=1)` ([batch, time, features]), and its `outputs[-1]` is the layer's
    last output. Keras initialises otherwise than TF1 (TF1 drew one Glorot kernel over inputs
    + units and started a GRU's gate biases at 1; Keras's recurrent kernel is orthogonal, its
    biases zero): a one-line comment above the layer says so. `e2k parity` presents TF1's
    cell variables in Keras's layout (gate columns reordered, kernels split into `kernel` and
    `recurrent_kernel`, the LSTM forget bias folded into `bias`), so both programs start
    from the same weights (`fixtures/rnn_gru_dynamic`, `fixtures/rnn_lstm_static`).

    ## Why
    The functional forms created a layer object on every call; Keras models own their layer
    objects, created once, and call them in the forward pass.

    ## Fix safety
    Safe: the functional forms built exactly these layers with these arguments.
    `training=` of `dropout` and `batch_normalization` is handled by E2K303. RNN layers
    compute what TF1's cells computed, from the same weights in Keras's layout (checked
    against the real cells, and by parity on both fixtures); only their initial values differ.

    ## Limitations
    `reuse=` (variable sharing through scopes) and batch renormalisation are not converted:
    the model_fn is left as it was (E2K901). Of RNNs, refused with their reason: peepholes,
    `num_proj`, `cell_clip`, a `forget_bias` other than 1.0 or 0.0, a cell's own
    initializers (one TF1 kernel covers inputs and state), `sequence_length`,
    `initial_state`, `time_major=True`, `bidirectional_dynamic_rnn`, dropout and other cell
    wrappers, a state read as a whole (`tf.concat(state, 1)` of an LSTM), `static_rnn`'s
    outputs read otherwise than `outputs[-1]`, and a cell used otherwise than run by
    `dynamic_rnn` / `static_rnn`. `e2k checkpoint` carries a trained model_dir's cells over in
    the same layout, their optimizer slots too.

    ## References
    - https://www.tensorflow.org/guide/migrate/model_mapping
    """

    code = "E2K302"
    summary = "tf.layers.dense(inputs, ...) and other TF1 layer functions -> a Keras layer applied to inputs"
    safety = Safety.SAFE
    role = "layer_function"
    targets = (*LAYER_FUNCTIONS, *CONTRIB_LAYERS)

    cases = [
        Case(
            "tf1.layers.dense(features, 10, activation=tf.nn.relu)",
            "tf.keras.layers.Dense(10, activation=tf.nn.relu)",
            id="dense",
        ),
        Case(
            "tf.layers.max_pooling2d(inputs=conv1, pool_size=[2, 2], strides=2)",
            "tf.keras.layers.MaxPooling2D(pool_size=[2, 2], strides=2)",
            id="keywords",
        ),
        Case("tf.layers.dropout(net, 0.4, training=is_training)", "tf.keras.layers.Dropout(0.4)", id="training-is-a-call-argument"),
        Case("tf.contrib.layers.flatten(conv2)", "tf.keras.layers.Flatten()", id="contrib-flatten"),
        Case("tf.contrib.layers.flatten(conv2, scope='flat')", None, id="contrib-flatten-scope-refused"),
        Case("tf.contrib.layers.fully_connected(net, 10, scope='fc1')",
             "tf.keras.layers.Dense(10, activation=tf.nn.relu)", id="contrib-fully-connected-relu-by-default"),
        Case("tf.contrib.layers.fully_connected(net, 10, activation_fn=None)",
             "tf.keras.layers.Dense(10)", id="contrib-fully-connected-linear"),
        Case("tf.contrib.layers.convolution2d(x, num_outputs=32, kernel_size=5, stride=1, padding='SAME', "
             "activation_fn=tf.nn.relu, scope='conv1')",
             "tf.keras.layers.Conv2D(32, 5, strides=1, padding='SAME', activation=tf.nn.relu)", id="contrib-conv2d"),
        Case("tf.contrib.layers.conv2d(x, 16, [3, 3])",
             'tf.keras.layers.Conv2D(16, [3, 3], padding="SAME", activation=tf.nn.relu)', id="contrib-conv2d-defaults"),
        Case("tf.contrib.layers.max_pool2d(inputs=conv1, kernel_size=2, stride=2, padding='SAME', scope='pool1')",
             "tf.keras.layers.MaxPooling2D(2, strides=2, padding='SAME')", id="contrib-max-pool"),
        Case("tf.contrib.layers.max_pool2d(conv1, [2, 2])",
             "tf.keras.layers.MaxPooling2D([2, 2], strides=2)", id="contrib-max-pool-default-stride"),
        Case("tf.contrib.layers.dropout(fc1, keep_prob=0.75)", "tf.keras.layers.Dropout(rate=0.25)",
             id="contrib-dropout-keep-prob"),
        Case("tf.contrib.layers.dropout(fc1, keep_prob=keep_prob, scope='drop1')",
             "tf.keras.layers.Dropout(rate=1 - keep_prob)", id="contrib-dropout-keep-prob-name"),
        Case("tf.contrib.layers.fully_connected(net, 10, normalizer_fn=tf.contrib.layers.batch_norm)", None,
             id="contrib-normalizer-refused"),
    ]

    def convert(self, call, ctx, tf):
        path = ctx.call_api_path(call)
        if path in CONTRIB_LAYERS:
            return _contrib_layer(call, ctx, tf, path)
        keras_class, signature, call_time = LAYER_FUNCTIONS[path]
        bound = bind(call, ("inputs", *signature))
        unknown = [name for name in bound if name not in ("inputs", *signature)]
        if unknown:
            # The program's own mistake (mnistmodel's `tf.layers.dense(input=X, ...)`): TF1
            # raised a TypeError when this code ran.
            close = difflib.get_close_matches(unknown[0], ("inputs", *signature), n=1)
            hint = f"; did you mean `{close[0]}=`?" if close else ""
            raise Unsupported(f"`{_emit.code(call.func)}` has no parameter `{unknown[0]}`: TensorFlow raises a "
                              f"TypeError where the program runs this{hint}", bound[unknown[0]])
        inputs = bound.pop("inputs", None)
        if inputs is None:
            raise Unsupported("the layer call has no inputs", call)
        call_kwargs = [_emit.keyword_arg(name, bound.pop(name).value) for name in call_time if name in bound]
        kept = _keras_args(call.args, list(bound.items()))
        args = []
        for name, arg in bound.items():
            if arg not in kept:
                continue
            positional = arg.keyword is None and name == signature[0]
            args.append(arg.with_changes(comma=arg.comma) if positional else _emit.keyword_arg(name, arg.value))
        layer = _emit.one_line_call(call.with_changes(func=_emit.expr("{tf}.keras.layers.{name}", tf=tf, name=keras_class)), args)
        return LayerCall(layer, inputs.value, call_kwargs)
