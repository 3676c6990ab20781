"""A loss written by hand that a Keras ``Loss`` cannot compute (it reads the features, or the
labels as they come) becomes the model's ``compute_loss`` (rule E2K204): Keras 2.15 and
Keras 3 hand it the features and labels as the dataset gives them. Its loss is divided by
the replicas and reported by the model's own "loss" metric."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from estimator2keras._engine import rewrite_source
from conftest import helpers_beside

HEAD = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(
        ({"x": [[1.0, 2.0, 3.0, 4.0]] * 4, "w": [1.0, 2.0, 0.5, 1.0]}, [1.0, 2.0, 3.0, 4.0])).batch(4)


def model_fn(features, labels, mode, params):
    predictions = tf.layers.dense(features["x"], 1{regularizer})
'''
TAIL = '''
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, params={"scale": 2.0})
estimator.train(input_fn, steps=2)
'''


def convert(rules, loss: str, regularizer: str = ""):
    source = HEAD.replace("{regularizer}", regularizer) + textwrap.indent(textwrap.dedent(loss), "    ") + TAIL
    return rewrite_source(source.encode(), "program.py", rules)


def manual(result) -> list[str]:
    return [f"{f.code} {f.message}" for f in result.findings if f.kind == "manual"]


def build(new: str):
    code = new.split("\nestimator")[0].split("\nmodel = build_model")[0]
    namespace: dict = {}
    exec(compile(code, "converted.py", "exec"), namespace)
    builder = namespace["build_model"]
    return builder({"scale": 2.0}) if builder.__code__.co_argcount else builder()


X = np.array([[1.0, 2.0, 3.0, 4.0], [0.5, 0.0, 1.0, 2.0]], np.float32)
W = np.array([1.0, 3.0], np.float32)
Y = np.array([1.0, 2.0], np.float32)


def test_a_loss_reading_the_features_is_the_models_compute_loss(rules):
    result = convert(rules, '''\
loss = tf.reduce_mean(features["w"] * tf.square(tf.squeeze(predictions, 1) - labels)) * params["scale"]
''')
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert "def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):" in new
    assert "features, labels, predictions = x, y, y_pred" in new, new
    assert "loss=" not in new.split("model.compile(")[1].split("\n")[0], new  # compile takes no loss
    import tensorflow as tf

    model = build(new)
    y_pred = model({"x": X})
    got = float(model.compute_loss(x={"x": X, "w": W}, y=Y, y_pred=y_pred))
    expected = float(np.mean(W * np.square(np.asarray(y_pred)[:, 0] - Y)) * 2.0)
    assert got == pytest.approx(expected, rel=1e-6)  # one replica: nothing divided
    assert float(model.loss_tracker.result()) == pytest.approx(expected, rel=1e-6)
    assert tf.distribute.get_strategy().num_replicas_in_sync == 1


def test_labels_as_they_come_broadcast_as_tf1_broadcast_them(rules):
    # `predictions - labels` of [batch, 1] and [batch]: TF1 made [batch, batch]; a Keras loss
    # would be handed [batch, 1] labels by Keras 2 and compute something else.
    result = convert(rules, "loss = tf.nn.l2_loss(predictions - labels)\n")
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert "def compute_loss(" in new and "features, labels" not in new, new
    model = build(new)
    y_pred = np.asarray(model({"x": X}))
    got = float(model.compute_loss(x={"x": X}, y=Y, y_pred=y_pred))
    assert got == pytest.approx(0.5 * float(np.sum(np.square(y_pred - Y))), rel=1e-6)  # [2, 1] - [2] -> [2, 2]


def test_the_layers_penalties_are_added_to_the_models_own_loss(rules):
    result = convert(rules, '''\
loss = tf.reduce_mean(features["w"] * tf.square(tf.squeeze(predictions, 1) - labels))
loss = loss + tf.losses.get_regularization_loss()
''', regularizer=", kernel_regularizer=tf.contrib.layers.l2_regularizer(0.1)")
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert "loss += tf.add_n(self.losses)" in new, new
    model = build(new)
    y_pred = model({"x": X})
    got = float(model.compute_loss(x={"x": X, "w": W}, y=Y, y_pred=y_pred))
    kernel = model.trainable_weights[0].numpy()
    expected = float(np.mean(W * np.square(np.asarray(y_pred)[:, 0] - Y))) + 0.05 * float(np.sum(np.square(kernel)))
    assert got == pytest.approx(expected, rel=1e-5)


@pytest.mark.slow
def test_parity_catches_the_own_loss_left_undivided_by_the_replicas(tmp_path):
    """fixtures/loss_reads_features passes parity (tests/test_fixture_parity.py); its
    compute_loss returning the per-replica loss undivided trains with twice the gradient on 2
    replicas."""
    from conftest import FIXTURES
    from estimator2keras.parity import run_parity

    case = FIXTURES / "loss_reads_features"
    after = (case / "after.py").read_text()
    divided = "return loss / tf.distribute.get_strategy().num_replicas_in_sync"
    assert after.count(divided) == 1, "the fixture's shape changed: update this test"
    wrong = tmp_path / "after.py"
    wrong.write_text(after.replace(divided, "return loss"))
    helpers_beside(case, tmp_path)
    result = run_parity(case / "before.py", wrong, replicas=2)
    assert not result.passed, result.report()
    assert not result.steps[1].passed, result.report()  # the first update already differs


@pytest.mark.parametrize("loss, by_weights", [
    # a TF1 loss weighted by a feature: TF1's own function (tf.compat.v1.losses: tf.losses is
    # another module in TF2), as it computed: SUM_BY_NONZERO_WEIGHTS divides by the examples
    ('loss = tf.losses.mean_squared_error(tf.reshape(labels, [-1, 1]), predictions, weights=features["w"][:, None])',
     False),
    # a feature read into a name of the model_fn first (it was taken for a second model output)
    ('w = features["w"]\nloss = tf.reduce_sum(w * tf.square(tf.squeeze(predictions, 1) - labels)) / tf.reduce_sum(w)',
     True),
])
def test_features_read_around_the_loss_convert_as_tf1_computed(rules, loss, by_weights):
    result = convert(rules, loss)
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    model = build(new)
    y_pred = np.asarray(model({"x": X}))
    got = float(model.compute_loss(x={"x": X, "w": W}, y=Y, y_pred=y_pred))
    expected = float(np.sum(W * np.square(y_pred[:, 0] - Y)) / (np.sum(W) if by_weights else len(W)))
    assert got == pytest.approx(expected, rel=1e-5)
    assert "tf.losses." not in new.replace("tf.compat.v1.losses.", "").replace("tf.keras.losses.", ""), new
