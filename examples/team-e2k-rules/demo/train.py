"""Trains the click model with the team's Estimator factory."""
import tensorflow as tf

from team_ml.estimators import make_estimator

features = [[1.0, 0.5], [2.0, 1.5], [3.0, 2.5], [4.0, 3.5]]
labels = [[0.2], [0.4], [0.6], [0.8]]


def input_fn():
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(2)


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.Dense(params["units"])(features)
    loss = tf.compat.v1.losses.mean_squared_error(labels=labels, predictions=logits)
    optimizer = tf.compat.v1.train.AdagradOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = make_estimator(model_fn, params={"units": 1, "learning_rate": 0.05}, num_gpus=2)
estimator.train(input_fn, steps=100)
