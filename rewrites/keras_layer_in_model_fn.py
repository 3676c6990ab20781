from __future__ import annotations

from estimator2keras._rule import Case, ExpressionRule, Safety

#: Keras layers applied to one input, as used inside model_fns.
KERAS_LAYERS = (
    "Dense", "Flatten", "Dropout", "BatchNormalization", "LayerNormalization", "Embedding",
    "Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "Conv3DTranspose", "SeparableConv1D",
    "SeparableConv2D", "DepthwiseConv2D", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D",
    "AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "GlobalAveragePooling1D",
    "GlobalAveragePooling2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "Activation", "ReLU",
    "LeakyReLU", "Softmax", "Reshape", "ZeroPadding2D", "UpSampling2D", "LSTM", "GRU", "SimpleRNN",
    "GaussianNoise", "SpatialDropout1D", "SpatialDropout2D",
)


class KerasLayerInModelFn(ExpressionRule):
    """A Keras layer already used inside a model_fn moves into the Keras model, and learns when it trains.

    ## What it does
    `tf.keras.layers.Dense(10)(net)` inside a model_fn becomes a layer the model creates
    once and applies in its forward pass, unchanged. For the layers that behave differently
    in training (`Dropout`, `BatchNormalization`, `GaussianNoise`, `SpatialDropout*`) and the
    TF1 ones (`tf.layers.dropout`, `tf.layers.batch_normalization`), the `training=` the
    model_fn passed becomes the model's `training` flag when it tested the mode
    (`training=mode == tf.estimator.ModeKeys.TRAIN`, or a variable such as `is_training`).

    A whole Keras model that the model_fn makes and calls is kept as written: a
    `tf.keras.Sequential(...)`, a `tf.keras.Model` subclass, or a function of the program
    that returns one (`model = create_model(params['data_format'])`, then
    `logits = model(image, training=...)`). When that is the entire forward pass the model
    is compiled directly; otherwise the converted model holds it as an attribute made in
    `__init__` and calls it in `call`. A model_fn that calls the model once per mode,
    `training=True` in TRAIN mode and `training=False` (or nothing) in EVAL and PREDICT mode
    with otherwise the same statement, gets one forward pass with Keras's `training` flag;
    any other difference between the modes is refused (E2K901), as is a model built with
    TF1 layers, or an object the forward pass calls that e2k cannot tell is a Keras model.

    ## Why
    Keras calls the model with `training=True` in `fit` and `False` in `evaluate` and
    `predict`: exactly what `mode == ModeKeys.TRAIN` told the layers in the Estimator.

    ## Fix safety
    Safe, including a faithful treatment of a classic TF1 mistake: a dropout called without
    `training=` never dropped anything in the Estimator (TF1's default was `False`, and
    Keras layers in an Estimator graph ran in inference mode). The converted model leaves
    that dropout out, as it behaved, and says so twice so that a human can decide: a note
    (E2K303, kind "fixed") in the report, and a comment in `call` where the dropout stood
    (`# tf.layers.dropout(net, rate=0.1) left out: it never ran in the Estimator (no
    training=)`; a `tf.keras.Sequential` has no `call`: the note alone). This is a note, not a leftover that keeps the file from
    converting: the converted model computes exactly what the Estimator computed, in every
    mode (the layer was the identity, and has no weights), so nothing is left for a human to
    convert; whether the original program meant to drop units is a question about that
    program, which `e2k parity` cannot see and the Estimator never answered. Making it drop
    would change what the program trains. A dropout whose `training=` e2k cannot read
    (neither the mode nor a literal) is still refused (E2K901).
    Likewise batch normalisation whose moving averages the Estimator never updated: that is
    tf.layers' batch normalisation without an `UPDATE_OPS` dependency of the train_op, and a
    Keras `BatchNormalization` used in the model_fn whatever the train_op depended on: a Keras
    layer in a TF1 graph adds nothing to `UPDATE_OPS` (verified on TF 2.15: after training,
    its moving mean is still zero), only `tf.compat.v1.layers`' do. The Keras layer gets
    `momentum=1.0` (a comment above it says why): each update moves the averages by
    `1 - momentum`, so they stay at their initial values, as the Estimator's did, and
    evaluation normalizes as it did (fixture `keras_batchnorm_never_updated`; parity catches
    the layer left at the program's own momentum). Delete it to have Keras update them, which
    the original program probably meant but never did.

    ## References
    - https://www.tensorflow.org/guide/migrate/model_mapping
    - https://www.tensorflow.org/api_docs/python/tf/keras/layers/Dropout
    """

    code = "E2K303"
    summary = "Keras layers in a model_fn move into the model; training= of dropout/batch norm becomes the model's training flag"
    safety = Safety.SAFE
    role = "keras_layer"
    targets = tuple(f"keras.layers.{name}" for name in KERAS_LAYERS)

    cases = [
        Case("tf.keras.layers.Dense(10, activation='relu')", "tf.keras.layers.Dense(10, activation='relu')", id="kept"),
        Case(
            id="training-flag",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def model_fn(features, labels, mode):
    is_training = mode == tf.estimator.ModeKeys.TRAIN
    net = tf.layers.dense(features, 8, activation=tf.nn.relu)
    net = tf.layers.batch_normalization(net, training=is_training)
    net = tf.layers.dropout(net, rate=0.2, training=is_training)
    output = tf.layers.dense(net, 1)
    loss = tf.losses.mean_squared_error(labels, output)
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf

from e2k_helpers import TF1Adam


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def build_model():
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(8, activation=tf.nn.relu),
        tf.keras.layers.BatchNormalization(),
        tf.keras.layers.Dropout(rate=0.2),
        tf.keras.layers.Dense(1),
    ])
    model.compile(optimizer=TF1Adam(0.01), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn())
''',
        ),
        Case(
            id="keras-model-from-a-factory",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def create_model(units):
    return tf.keras.Sequential([tf.keras.layers.Dense(units, activation="relu"), tf.keras.layers.Dense(1)])


def model_fn(features, labels, mode, params):
    model = create_model(params["units"])
    if mode == tf.estimator.ModeKeys.TRAIN:
        output = model(features, training=True)
    else:
        output = model(features, training=False)
    loss = tf.losses.mean_squared_error(labels, output)
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, params={"units": 8})
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf

from e2k_helpers import TF1Adam


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def create_model(units):
    return tf.keras.Sequential([tf.keras.layers.Dense(units, activation="relu"), tf.keras.layers.Dense(1)])


def build_model(params):
    model = create_model(params["units"])
    model.compile(optimizer=TF1Adam(0.01), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model({"units": 8})
model.fit(input_fn())
''',
        ),
    ]

    def convert(self, call, ctx, tf):
        return call
