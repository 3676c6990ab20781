"""legacy.py migrated to Keras: the same evaluation batches (32, 28). Keras's eval loss is the
mean over the 60 examples, the Estimator's the mean of the two batches' means: the harness
must say why they differ and pass."""
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
  return tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(EVAL_BATCH)


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
