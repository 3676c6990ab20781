"""The two-model program migrated by hand, the warm start kept: the fine-tuned model starts
from the pretrained model's weights."""
import numpy as np
import tensorflow as tf


def dataset():
    rng = np.random.RandomState(0)
    x = rng.randn(32, 4).astype(np.float32)
    y = (x.sum(axis=1) > 0).astype(np.int64)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(8)


def make_model(lr):
    inputs = {"x": tf.keras.Input(shape=(4,), name="x")}
    h = tf.keras.layers.Dense(8, activation="relu", name="body")(inputs["x"])
    logits = tf.keras.layers.Dense(2, name="head")(h)
    model = tf.keras.Model(inputs, logits)
    model.compile(optimizer=tf.keras.optimizers.SGD(lr),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


if __name__ == "__main__":
    pre = make_model(0.5)
    pre.fit(dataset().repeat(), steps_per_epoch=6, epochs=1, verbose=0)
    print("pretrained eval loss:", pre.evaluate(dataset(), verbose=0, return_dict=True)["loss"])
    ft = make_model(0.1)
    ft.set_weights(pre.get_weights())  # warm_start_from=PRE_DIR
    ft.fit(dataset().repeat(), steps_per_epoch=4, epochs=1, verbose=0)
    print("fine-tuned eval loss:", ft.evaluate(dataset(), verbose=0, return_dict=True)["loss"])
