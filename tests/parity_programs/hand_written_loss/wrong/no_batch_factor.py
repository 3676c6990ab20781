"""WRONG on purpose: the 1/BATCH_SIZE of the hand-written loss is forgotten: the summed
cross-entropies make steps BATCH_SIZE times as large.
"""
import numpy as np
import tensorflow as tf

# From RunConfig(session_config=...): TensorFlow 2 configures devices once, before any op runs.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * 2)

LEARNING_RATE = 0.1
BATCH_SIZE = 8

rng = np.random.RandomState(5)
images = rng.rand(44, 6, 6, 1).astype(np.float32)
classes = rng.randint(0, 4, size=44).astype(np.int64)


def input_fn(mode, input_context=None):
  if mode == "train":
    dataset = tf.data.Dataset.from_tensor_slices((images, classes))
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    return dataset.batch(BATCH_SIZE * strategy.num_replicas_in_sync).repeat(2)
  # Evaluation on whole rounds of batches (see the note in docs/rules/E2K204.md).
  dataset = tf.data.Dataset.from_tensor_slices((images[:32], classes[:32]))
  # Global batch: Keras splits it across replicas (the Estimator batched per replica).
  return dataset.batch(BATCH_SIZE * strategy.num_replicas_in_sync)


class ModelLoss(tf.keras.losses.Loss):
  """The model_fn's loss, as the Estimator computed it on each replica's batch.

  The Estimator's optimizer divided it by the number of replicas and added up their
  gradients; reduction="sum" has Keras add them up as they come."""

  def __init__(self, name="loss"):
    super().__init__(reduction="sum", name=name)

  def call(self, labels, logits):
    loss = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="none")(labels, logits)
    loss = tf.reduce_sum(loss)
    return loss / tf.distribute.get_strategy().num_replicas_in_sync


class Model(tf.keras.Model):
  def __init__(self):
    super().__init__()
    self.model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(4, 3, activation='relu', input_shape=(6, 6, 1)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(4)
    ])

  def call(self, features, training=False):
    logits = self.model(features, training=False)
    return logits

  def predict_step(self, data):
    features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
    logits = self(features, training=False)
    return {'logits': logits}


def build_model():
  model = Model()

  optimizer = tf.keras.optimizers.SGD(learning_rate=LEARNING_RATE)
  model.compile(optimizer=optimizer, loss=ModelLoss())
  return model


# Two virtual CPU devices stand in for two GPUs on this machine.
strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
with strategy.scope():
  model = build_model()
model.fit(input_fn(mode="train"))
model.evaluate(input_fn(mode="eval"))
