"""Trains the click model with the team's Estimator factory."""
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per
#   replica.
import tensorflow as tf

features = [[1.0, 0.5], [2.0, 1.5], [3.0, 2.5], [4.0, 3.5]]
labels = [[0.2], [0.4], [0.6], [0.8]]


def input_fn():
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(
        2 * strategy.num_replicas_in_sync
    )


def build_model(params):
    model = tf.keras.Sequential([tf.keras.layers.Dense(params["units"])])
    optimizer = tf.keras.optimizers.Adagrad(params["learning_rate"], epsilon=0.0)
    model.compile(optimizer=optimizer, loss=tf.keras.losses.MeanSquaredError())
    return model


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model({"units": 1, "learning_rate": 0.05})
model.fit(input_fn(), steps_per_epoch=100)
