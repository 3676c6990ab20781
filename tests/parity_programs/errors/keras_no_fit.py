"""A Keras program that builds and compiles a model but never calls fit."""
import tensorflow as tf

model = tf.keras.Sequential([tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
print(model.predict(tf.ones((1, 2)), verbose=0))
