"""Two Estimators, the second warm-started from the first (a tester's fine-tuning program,
made tiny): a pretrained model, then a fine-tuned one with `warm_start_from=PRE_DIR` and its
own learning rate. Each trains and evaluates; parity compares each model in turn.
"""
import numpy as np
import tensorflow.compat.v1 as tf

PRE_DIR = "/tmp/e2k_parity_two_models/pre"
FT_DIR = "/tmp/e2k_parity_two_models/ft"


def input_fn():
    rng = np.random.RandomState(0)
    x = rng.randn(32, 4).astype(np.float32)
    y = (x.sum(axis=1) > 0).astype(np.int64)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(8)


def model_fn(features, labels, mode, params):
    h = tf.layers.dense(features["x"], 8, activation=tf.nn.relu, name="body")
    logits = tf.layers.dense(h, 2, name="head")
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    train_op = tf.train.GradientDescentOptimizer(params["lr"]).minimize(
        loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


if __name__ == "__main__":
    pre = tf.estimator.Estimator(model_fn, model_dir=PRE_DIR, params={"lr": 0.5})
    pre.train(lambda: input_fn().repeat(), steps=6)
    print("pretrained eval loss:", pre.evaluate(input_fn)["loss"])
    ft = tf.estimator.Estimator(model_fn, model_dir=FT_DIR, params={"lr": 0.1}, warm_start_from=PRE_DIR)
    ft.train(lambda: input_fn().repeat(), steps=4)
    print("fine-tuned eval loss:", ft.evaluate(input_fn)["loss"])
