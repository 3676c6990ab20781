"""WRONG MIGRATION (deliberate, for the parity tests): the e2k rewrite of legacy.py with its
Dataset.shuffle(1000) removed: trains identically in parity mode; caught by the shuffles."""
import numpy as np
import tensorflow as tf

FEATURES = ["crim", "zn", "indus", "nox", "rm"]
LABEL = "medv"

rng = np.random.RandomState(4)
training_set = {name: rng.uniform(size=200).astype(np.float32) for name in FEATURES}
training_set[LABEL] = sum(training_set[name] * (i + 1) for i, name in enumerate(FEATURES)).astype(np.float32)
test_set = {name: rng.uniform(size=40).astype(np.float32) for name in FEATURES}
test_set[LABEL] = sum(test_set[name] * (i + 1) for i, name in enumerate(FEATURES)).astype(np.float32)


def get_input_fn(data_set, num_epochs=None, shuffle=True):
    dataset = tf.data.Dataset.from_tensor_slices(({name: data_set[name] for name in FEATURES}, data_set[LABEL]))
    if shuffle:
        dataset = dataset
    return dataset.repeat(num_epochs).batch(20)


class LinearModel(tf.keras.layers.Layer):
    """A canned Estimator's linear model: a weight matrix per feature column, created in the
    columns' name order, then the bias; all start at zero. Categorical columns come as
    one-hot rows, so a column adds the rows of its ids."""

    def __init__(self, units, column_names, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.column_names = column_names

    def build(self, input_shape):
        self.column_weights = [
            self.add_weight(name=f"{name}_weights", shape=(shape[-1], self.units), initializer="zeros")
            for name, shape in zip(self.column_names, input_shape)]
        self.bias = self.add_weight(name="bias_weights", shape=(self.units,), initializer="zeros")
        super().build(input_shape)

    def call(self, inputs):
        weighted_sums = [tf.matmul(x, w) for x, w in zip(inputs, self.column_weights)]
        return tf.nn.bias_add(tf.add_n(weighted_sums), self.bias)


class LinearRegressorModel(tf.keras.Model):
    """The canned LinearRegressor (tf.estimator) as a Keras model.

    Loss averaged over the batch. `preprocess` computes
    what the feature columns did, in tf.data; `call` is the network.
    """

    def __init__(self):
        super().__init__()
        self.linear = LinearModel(1, ["crim", "indus", "nox", "rm", "zn"])

    def preprocess(self, features, labels=None):
        """Raw features -> the model's inputs, as the Estimator's feature columns computed them."""
        crim = tf.reshape(tf.cast(features["crim"], tf.float32), [-1, 1])
        zn = tf.reshape(tf.cast(features["zn"], tf.float32), [-1, 1])
        indus = tf.reshape(tf.cast(features["indus"], tf.float32), [-1, 1])
        nox = tf.reshape(tf.cast(features["nox"], tf.float32), [-1, 1])
        rm = tf.reshape(tf.cast(features["rm"], tf.float32), [-1, 1])
        inputs = (crim, zn, indus, nox, rm)
        if labels is None:
            return inputs
        labels = tf.reshape(labels, [-1, 1])
        return inputs, labels

    def call(self, inputs, training=False):
        if isinstance(inputs, dict):  # raw features, as a served model gets them
            inputs = self.preprocess(inputs)
        crim, zn, indus, nox, rm = inputs
        return self.linear((crim, indus, nox, rm, zn))

    def predict_step(self, data):
        """The Estimator's predictions for a batch, as its head made them."""
        if isinstance(data, tuple) and isinstance(data[0], (tuple, dict)):
            data = data[0]  # (inputs, labels): a dataset with labels
        logits = self(data, training=False)
        return {"predictions": logits}


def main():
    tf.keras.utils.set_random_seed(3)
    model = LinearRegressorModel()
    model.compile(
        optimizer=tf.keras.optimizers.Ftrl(learning_rate=0.2),
        loss=tf.keras.losses.MeanSquaredError(),
        metrics=[tf.keras.metrics.MeanSquaredError(name="average_loss"),
                 tf.keras.metrics.MeanMetricWrapper(lambda y, p: y, name="label/mean"),
                 tf.keras.metrics.MeanMetricWrapper(lambda y, p: p, name="prediction/mean")])
    # Train
    model.fit(get_input_fn(training_set, shuffle=True).map(model.preprocess), steps_per_epoch=40)
    # Evaluate loss over one epoch of test_set.
    ev = model.evaluate(get_input_fn(test_set, num_epochs=1, shuffle=False).map(model.preprocess), return_dict=True)
    print("Loss: {0:f}".format(ev["loss"]))


if __name__ == "__main__":
    main()
