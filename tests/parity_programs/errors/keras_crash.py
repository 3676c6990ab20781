"""A Keras program that crashes in fit (inputs of the wrong width): the harness must exit 2
with the program's traceback, not report a bug of its own."""
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
  model = tf.keras.Sequential([tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(1)])
  model.compile(optimizer="sgd", loss="mse")

model.fit(np.ones((4, 3), np.float32), np.ones((4, 1), np.float32), verbose=0)
