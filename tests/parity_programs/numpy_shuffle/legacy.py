"""fixtures/tutorial_input_fn_factory with its training input shuffled: numpy_input_fn(shuffle=True),
a queue of queue_capacity (1000) examples. e2k writes Dataset.shuffle(1000); parity mode reads
the queue in order and records the shuffle as a buffer of 1000, like the Dataset's."""
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
    return tf.compat.v1.estimator.inputs.numpy_input_fn(
        x={name: data_set[name] for name in FEATURES},
        y=data_set[LABEL],
        batch_size=20,
        num_epochs=num_epochs,
        shuffle=shuffle)


feature_cols = [tf.feature_column.numeric_column(k) for k in FEATURES]


def main():
    regressor = tf.estimator.LinearRegressor(
        feature_columns=feature_cols, config=tf.estimator.RunConfig(tf_random_seed=3))
    # Train
    regressor.train(input_fn=get_input_fn(training_set, shuffle=True), steps=40)
    # Evaluate loss over one epoch of test_set.
    ev = regressor.evaluate(input_fn=get_input_fn(test_set, num_epochs=1, shuffle=False))
    print("Loss: {0:f}".format(ev["loss"]))


if __name__ == "__main__":
    main()
