"""WRONG: migrated.py evaluating with drop_remainder=True: the last 28 examples are never evaluated, so
its eval loss is neither the Estimator's (the mean of the two batches' means) nor the mean over the
60 examples; the training losses and weights agree, the eval loss must fail."""
import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 16
EVAL_BATCH = 32

rng = np.random.RandomState(11)
x = rng.normal(size=(256, 4)).astype(np.float32)
y = (np.argmax(x[:, :3], axis=1)).astype(np.int32)
x_test = rng.normal(size=(60, 4)).astype(np.float32)
y_test = (np.argmax(x_test[:, :3], axis=1)).astype(np.int32)

strategy = tf.distribute.MirroredStrategy()


def train_input_fn():
  return tf.data.Dataset.from_tensor_slices((x, y)).batch(PER_REPLICA_BATCH * strategy.num_replicas_in_sync)


def eval_input_fn():
  return tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(EVAL_BATCH, drop_remainder=True)


with strategy.scope():
  model = tf.keras.Sequential([
      tf.keras.Input(shape=(4,)),
      tf.keras.layers.Dense(10, activation="relu"),
      tf.keras.layers.Dense(3),
  ])
  model.compile(optimizer=tf.keras.optimizers.Adagrad(0.1, initial_accumulator_value=0.1, epsilon=0.0),
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))

model.fit(train_input_fn(), verbose=2)
print(model.evaluate(eval_input_fn(), return_dict=True, verbose=2))
