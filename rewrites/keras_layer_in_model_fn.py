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

    ## Why
    Keras calls the model with `training=True` in `fit` and `False` in `evaluate` and
    `predict`: exactly what `mode == ModeKeys.TRAIN` told the layers in the Estimator.

    ## Fix safety
    Safe, including a faithful treatment of a classic TF1 mistake: a dropout called without
    `training=` never dropped anything in the Estimator (TF1's default was `False`, and
    Keras layers in an Estimator graph ran in inference mode). The converted model leaves
    that dropout out, as it behaved, and reports it (E2K303) so that a human can decide.
    Likewise batch normalisation whose moving averages the Estimator never updated
    (no `UPDATE_OPS` dependency) is reported: Keras updates them.

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


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


def build_model():
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(8, activation=tf.nn.relu),
        tf.keras.layers.BatchNormalization(),
        tf.keras.layers.Dropout(rate=0.2),
        tf.keras.layers.Dense(1),
    ])
    model.compile(
        optimizer=tf.keras.optimizers.Adam(0.01, epsilon=1e-08),
        loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn())
''',
        ),
    ]

    def convert(self, call, ctx, tf):
        return call
