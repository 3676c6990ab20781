"""``tf.get_variable`` in a model_fn, and in the functions it calls, becomes a weight of the
Keras model or layer (rule E2K306): made once with ``add_weight`` (in ``build`` where its shape
reads the layer's input), read where the TF1 code read it. Parity pairs such weights with
TF1's variables in the order the model's first call reads them."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat, helpers_beside

HEAD = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0, 3.0, 4.0]]}, [[1.0]])).repeat().batch(2)


'''
TAIL = '''

def model_fn(features, labels, mode, params):
    predictions = network(features, params)
    loss = tf.losses.mean_squared_error(labels, predictions)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, params={"hidden": 3})
estimator.train(input_fn, steps=2)
'''


def convert(rules, network: str, tail: str = TAIL):
    source = (HEAD + textwrap.dedent(network) + tail).encode()
    return rewrite_source(source, "program.py", rules)


def manual(result) -> list[str]:
    return [f"{f.code} {f.message}" for f in result.findings if f.kind == "manual"]


def build(new: str, params: dict):
    import tensorflow as tf  # noqa: F401 - the converted code's

    code = new.split("\nestimator")[0].split("\nmodel = build_model")[0]
    namespace: dict = {}
    exec(compile(code, "converted.py", "exec"), namespace)
    return namespace["build_model"](params)


MODEL_WEIGHTS = '''\
def network(features, params):
    x = features["x"]
    w = tf.get_variable("w", [4, params["hidden"]], initializer=tf.truncated_normal_initializer(stddev=0.1))
    b = tf.get_variable("b", [params["hidden"]], initializer=tf.zeros_initializer())
    hidden = tf.nn.relu(tf.matmul(x, w) + b)
    return tf.layers.dense(hidden, 1)
'''


def test_weights_of_the_model_are_made_once_and_read_where_tf1_read_them(rules):
    result = convert(rules, MODEL_WEIGHTS)
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "get_variable" not in new
    assert "self.w = self.add_weight(" in new, new
    assert "initializer=tf.keras.initializers.TruncatedNormal(stddev=0.1))" in new, new
    assert "tf.nn.relu(tf.matmul(x, self.w) + self.b)" in new, new  # no `w = self.w` alias left
    model = build(new, {"hidden": 3})
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    out = np.asarray(model({"x": x}))
    w, b = model.w.numpy(), model.b.numpy()
    names = [v.name.split("/")[-1].split(":")[0] for v in model.trainable_weights]
    assert sorted(names) == sorted(["w", "b", "kernel", "bias"]), names
    dense = next(layer for layer in model.layers if hasattr(layer, "kernel"))
    expected = np.maximum(x @ w + b, 0) @ dense.kernel.numpy() + dense.bias.numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_a_helper_returning_a_variable_is_written_out_at_each_call(rules):
    result = convert(rules, '''\
def get_weights(shape, name):
    return tf.get_variable(name, shape, initializer=tf.glorot_uniform_initializer())
''', tail=TAIL.replace("    predictions = network(features, params)\n", '''\
    w1 = get_weights([4, params["hidden"]], "w1")
    w2 = get_weights([params["hidden"], 1], "w2")
    predictions = tf.matmul(tf.nn.relu(tf.matmul(features["x"], w1)), w2)
'''))
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "self.w1 = self.add_weight(" in new and "self.w2 = self.add_weight(" in new, new
    model = build(new, {"hidden": 3})
    assert [tuple(v.shape) for v in model.trainable_weights] == [(4, 3), (3, 1)]


BLOCK = '''\
def dense(inputs, units, name, activation=tf.nn.relu):
    with tf.variable_scope(name):
        w = tf.get_variable("kernel", [inputs.shape[-1].value, units])
        b = tf.get_variable("bias", [units], initializer=tf.zeros_initializer())
        out = tf.matmul(inputs, w) + b
        return activation(out) if activation is not None else out


def network(features, params):
    net = dense(features["x"], params["hidden"], "hidden")
    return dense(net, 1, "out", activation=None)
'''


def test_a_function_making_weights_from_its_input_shape_is_a_layer_built_from_it(rules):
    result = convert(rules, BLOCK)
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "def build(self, input_shape):" in new, new
    assert "shape=[input_shape[-1], self.units]" in new, new  # TF1's Dimension.value: an int in Keras
    assert "super().__init__(name=name)" in new, new
    model = build(new, {"hidden": 3})
    model({"x": np.ones((2, 4), np.float32)})
    assert [tuple(v.shape) for v in model.trainable_weights] == [(4, 3), (3,), (3, 1), (1,)]
    assert [v.name.split("/")[-1].split(":")[0] for v in model.trainable_weights] == ["kernel", "bias"] * 2


@pytest.mark.parametrize("network, reason", [
    pytest.param('''\
def network(features, params):
    x = features["x"]
    w = tf.get_variable("w", [x.shape[-1], 1])
    return tf.matmul(x, w)
''', "configured with `x`", id="model-shape-from-features"),
    pytest.param(BLOCK.replace("[inputs.shape[-1].value, units]", "[tf.shape(inputs)[-1], units]"),
                 "otherwise than its static shape", id="block-dynamic-shape"),
    pytest.param('''\
def network(features, params):
    w = tf.get_variable("w", [4, 1], partitioner=tf.fixed_size_partitioner(2))
    return tf.matmul(features["x"], w)
''', "partitioned", id="partitioner"),
    pytest.param('''\
def network(features, params):
    w = tf.get_variable("w", initializer=tf.ones([4, 1]))
    return tf.matmul(features["x"], w)
''', "without a shape", id="value-initializer"),
])
def test_what_add_weight_cannot_hold_is_refused(rules, network, reason):
    result = convert(rules, network)
    assert result.status == "partial", flat(result.new.decode())
    assert any(reason in message for message in manual(result)), manual(result)
    assert "add_weight" not in flat(result.new.decode())


def test_parity_pairs_weights_made_in_init_by_the_order_a_call_reads_them():
    import tensorflow as tf

    from estimator2keras.parity._keras_side import _ReadOrder

    class Model(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = tf.keras.layers.Dense(3)
            self.w = self.add_weight(name="w", shape=[3, 2], initializer="ones")

        def call(self, x):
            return tf.matmul(self.dense(x), self.w)

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = Model()
        model(tf.ones([2, 4]))  # built: its layers made their weights
    with strategy.scope(), _ReadOrder(tf) as reads:
        model(tf.ones([2, 4]))
    ordered = reads.ordered(list(model.trainable_weights))
    assert [tuple(v.shape) for v in ordered] == [(4, 3), (3,), (3, 2)]
    # Outside the recorder nothing is recorded any more.
    model(tf.ones([2, 4]))
    assert len(reads._first) == 3


def test_initializers_of_layers_made_in_a_helper_are_translated(rules):
    # Binding the helper's parameters rebuilt the constructor, and its TF1 initializer was
    # left as it was: `tf.truncated_normal_initializer` does not exist in TensorFlow 2.
    result = convert(rules, '''\
def network(features, params):
    return tf.layers.dense(features["x"], params["hidden"],
                           kernel_initializer=tf.truncated_normal_initializer(stddev=0.1),
                           bias_initializer=tf.constant_initializer(0.5))
''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "kernel_initializer=tf.keras.initializers.TruncatedNormal(stddev=0.1)" in new, new
    assert "bias_initializer=tf.keras.initializers.Constant(0.5)" in new, new
    assert "_initializer(" not in new.split("class Model")[1].replace("initializers.", ""), new


@pytest.mark.slow
def test_parity_catches_a_weight_made_otherwise_than_tf1_made_it(tmp_path):
    """The fixture passes parity (tests/test_fixture_parity.py); with its output bias made
    non-trainable (a `trainable=` lost), the migrated model trains one variable fewer."""
    from conftest import FIXTURES
    from estimator2keras.parity import run_parity

    case = FIXTURES / "get_variable_weights"
    after = (case / "after.py").read_text()
    made = 'name="b_out",'
    assert after.count(made) == 1, "the fixture's shape changed: update this test"
    wrong = tmp_path / "after.py"
    wrong.write_text(after.replace(made, made + " trainable=False,"))
    helpers_beside(case, tmp_path)
    result = run_parity(case / "before.py", wrong, replicas=2)
    assert not result.passed, result.report()


def test_variables_of_initial_values_become_weights_of_that_distribution(rules):
    """TensorFlow's first tutorials: `W = tf.Variable(tf.truncated_normal(...))`."""
    result = convert(rules, '''\
def network(features, params):
    W = tf.Variable(tf.truncated_normal([4, params["hidden"]], stddev=0.1), name="W")
    b = tf.Variable(tf.constant(0.1, shape=[params["hidden"]]))
    hidden = tf.nn.relu(tf.matmul(features["x"], W) + b)
    W_out = tf.Variable(tf.zeros([params["hidden"], 1]))
    return tf.matmul(hidden, W_out)
''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "tf.Variable" not in new and "truncated_normal(" not in new, new
    assert "initializer=tf.keras.initializers.TruncatedNormal(stddev=0.1)" in new, new
    assert "initializer=tf.keras.initializers.Constant(0.1)" in new, new
    model = build(new, {"hidden": 3})
    x = np.ones((2, 4), np.float32)
    out = np.asarray(model({"x": x}))
    np.testing.assert_allclose(model.b.numpy(), np.full(3, 0.1, np.float32))
    np.testing.assert_allclose(out, np.zeros((2, 1), np.float32))  # W_out starts at zeros
    assert [tuple(v.shape) for v in model.trainable_weights] == [(4, 3), (3,), (3, 1)]


@pytest.mark.parametrize("width", ["x.get_shape()[-1]", "int(x.shape[-1])", "x.shape[-1].value",
                                   "x.get_shape().as_list()[-1]"])
def test_a_width_read_from_the_input_into_a_name_is_computed_in_build(rules, width):
    # It was copied into __init__, where the input does not exist: a NameError when the model
    # was made, in a file reported converted (found by a tester).
    result = convert(rules, f'''\
def fc(x, n_out, name):
    n_in = {width}
    with tf.variable_scope(name):
        w = tf.get_variable("kernel", [n_in, n_out])
    return tf.matmul(x, w)


def network(features, params):
    return fc(fc(features["x"], params["hidden"], "h"), 1, "out")
''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "    def build(self, input_shape):\n        n_in = " in new, new
    model = build(new, {"hidden": 3})
    model({"x": np.ones((2, 4), np.float32)})
    assert [tuple(v.shape) for v in model.trainable_weights] == [(4, 3), (3, 1)]


def test_a_layer_made_with_a_value_of_the_input_is_refused(rules):
    result = convert(rules, '''\
def block(x, name):
    n_in = int(x.shape[-1])
    w = tf.get_variable(name, [n_in, n_in])
    return tf.layers.dense(tf.matmul(x, w), n_in * 2)


def network(features, params):
    return block(block(features["x"], "a"), "b")
''')
    assert result.status == "partial", flat(result.new.decode())
    assert any("Keras makes before it sees its input" in m for m in manual(result)), manual(result)


def test_weights_named_alike_in_different_scopes_get_names_of_their_own(rules):
    # Keras 2 saves a model's own weights by name: HDF5 refused two `weights` (found by a tester).
    result = convert(rules, '''\
def network(features, params):
    with tf.variable_scope("layer1"):
        w1 = tf.get_variable("weights", [4, params["hidden"]])
    with tf.variable_scope("layer2"):
        w2 = tf.get_variable("weights", [params["hidden"], 1])
    return tf.matmul(tf.matmul(features["x"], w1), w2)
''')
    assert result.status == "converted", manual(result)
    model = build(flat(result.new.decode()), {"hidden": 3})
    names = [v.name.split("/")[-1].split(":")[0] for v in model.trainable_weights]
    assert len(set(names)) == 2, names


def test_weight_decay_over_the_models_own_weights_is_part_of_its_compute_loss(rules):
    result = convert(rules, '''\
def weight_variable(shape, name):
    return tf.get_variable(name, shape, initializer=tf.truncated_normal_initializer(stddev=0.1))
''', tail=TAIL.replace("    predictions = network(features, params)\n    loss = tf.losses.mean_squared_error(labels, predictions)\n", '''\
    w1 = weight_variable([4, params["hidden"]], "w1")
    w2 = weight_variable([params["hidden"], 1], "w2")
    predictions = tf.matmul(tf.nn.relu(tf.matmul(features["x"], w1)), w2)
    loss = tf.nn.l2_loss(predictions - labels) + 0.01 * (tf.nn.l2_loss(w1) + tf.nn.l2_loss(w2))
'''))
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "0.01 * (tf.nn.l2_loss(self.w1) + tf.nn.l2_loss(self.w2))" in new, new
    model = build(new, {"hidden": 3})
    x, y = np.ones((2, 4), np.float32), np.array([[1.0], [2.0]], np.float32)
    y_pred = np.asarray(model({"x": x}))
    got = float(model.compute_loss(x={"x": x}, y=y, y_pred=y_pred))
    w1, w2 = model.w1.numpy(), model.w2.numpy()
    expected = 0.5 * np.sum((y_pred - y) ** 2) + 0.01 * 0.5 * (np.sum(w1 ** 2) + np.sum(w2 ** 2))
    assert got == pytest.approx(float(expected), rel=1e-5)


def test_a_weight_helper_of_several_statements_called_twice_is_refused_saying_why(rules):
    # It was taken for a layer class whose input is `shape`, and refused for reading
    # `shape` "otherwise than its static shape".
    result = convert(rules, '''\
def weight_variable(shape, name):
    w = tf.get_variable(name, shape)
    return w
''', tail=TAIL.replace("    predictions = network(features, params)\n", '''\
    w1 = weight_variable([4, 3], "w1")
    w2 = weight_variable([3, 1], "w2")
    predictions = tf.matmul(tf.matmul(features["x"], w1), w2)
'''))
    assert result.status == "partial"
    assert any("is called again" in m and "one expression" in m for m in manual(result)), manual(result)
