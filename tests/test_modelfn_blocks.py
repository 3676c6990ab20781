"""Functions of the program that make layers and are used as building blocks (called
several times, from each other, with loops of their own) become Keras layer classes
(``_modelfn_blocks``). Each call is one layer of the model; what e2k cannot place is refused."""
from __future__ import annotations

import textwrap

import pytest

from estimator2keras import _helpers
from estimator2keras._engine import rewrite_source

HEAD = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"image": [[1.0] * 16]}, [1])).repeat().batch(2)


'''
MODEL_FN = '''

def model_fn(features, labels, mode, params):
    training = mode == tf.estimator.ModeKeys.TRAIN
    logits = network(features["image"], params, training)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, params={"hidden": [8, 4], "norm": True})
estimator.train(input_fn, steps=2)
'''


def convert(rules, helpers: str, model_fn: str = MODEL_FN):
    source = (HEAD + textwrap.dedent(helpers) + model_fn).encode()
    return rewrite_source(source, "program.py", rules)


def manual(result) -> list[str]:
    return [f"{f.code} {f.message}" for f in result.findings if f.kind == "manual"]


def run_model(new: str, params: dict, batch):
    """Build the converted model (its classes and builder) and apply it to ``batch``."""
    import numpy as np
    import tensorflow as tf

    code = new.split("\nestimator")[0].split("\nmodel = build_model")[0]
    namespace: dict = {}
    exec(compile(code, "converted.py", "exec"), namespace)
    model = namespace["build_model"](params)
    out = model(batch, training=True)
    return model, np.asarray(out)


BLOCKS = '''\
def conv_block(inputs, filters, is_training):
    """Convolution, then batch normalization."""
    net = tf.layers.conv2d(inputs, filters, 3, padding="same", activation=tf.nn.relu)
    net = tf.layers.batch_normalization(net, training=is_training)
    return net


def dense_block(inputs, units, norm, training):
    net = tf.layers.dense(inputs, units)
    if norm:
        net = tf.layers.batch_normalization(net, training=training)
    return tf.nn.relu(net)


def network(images, params, training):
    net = tf.reshape(images, [-1, 4, 4, 1])
    net = conv_block(net, 4, training)
    net = conv_block(net, 8, training)
    net = tf.layers.flatten(net)
    for units in params["hidden"]:
        net = dense_block(net, units, params["norm"], training)
    return tf.layers.dense(net, 3)
'''


def test_helpers_called_several_times_and_from_each_other_become_layer_classes(rules):
    result = convert(rules, BLOCKS)
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    # One class per function; the functions go.
    for name in ("ConvBlock", "DenseBlock", "Network"):
        assert f"class {name}(tf.keras.layers.Layer):" in new
    assert "def conv_block(" not in new and "def network(" not in new
    # Settings are the constructor's; each call is one instance; the loop a list of them.
    assert "def __init__(self, filters):" in new and "self.conv_block = ConvBlock(4)" in new
    assert "self.conv_block_1 = ConvBlock(8)" in new
    assert "DenseBlock(units, params[\"norm\"])" in new and "for units in params[\"hidden\"]" in new
    # The training flag, passed positionally as `training`/`is_training`, is Keras's flag.
    assert "net = self.conv_block(net, training=training)" in new
    assert "def call(self, inputs, training=False):" in new
    assert "if self.norm:" in new  # a setting read in `call`
    # Its docstring stays with it.
    assert '"""Convolution, then batch normalization."""' in new
    fixed = [f.message for f in result.findings if f.code == "E2K302"]
    assert any("`conv_block` -> layer class `ConvBlock`" in m for m in fixed), fixed


def test_the_layer_classes_run_and_hold_each_calls_own_weights(rules):
    import numpy as np

    result = convert(rules, BLOCKS)
    model, out = run_model(_helpers.inline(result.new.decode(), result.helpers), {"hidden": [8, 4], "norm": True},
                           {"image": np.ones((2, 16), np.float32)})
    assert out.shape == (2, 3)
    kernels = sorted(tuple(w.shape) for w in model.trainable_weights if len(w.shape) > 1)
    # Two convolutions (1->4, 4->8 filters), two dense blocks (128->8, 8->4) and the output (4->3).
    assert kernels == sorted([(3, 3, 1, 4), (3, 3, 4, 8), (128, 8), (8, 4), (4, 3)])


def test_a_block_used_outside_the_converted_forward_pass_keeps_its_function(rules):
    result = convert(rules, BLOCKS + '''

def describe():
    return conv_block(tf.zeros([1, 4, 4, 1]), 2, False)
''')
    new = result.new.decode()
    assert "class ConvBlock(tf.keras.layers.Layer):" in new
    assert "def conv_block(inputs, filters, is_training):" in new  # still called by describe()


@pytest.mark.parametrize("helpers, reason", [
    # Each call of itself would be a layer holding itself.
    ('''\
    def network(images, params, training, depth=2):
        net = tf.layers.dense(images, 4)
        if depth:
            net = network(net, params, training, depth - 1)
        return net
    ''', "through itself"),
    # A block cannot see the model_fn's mode: only a training flag.
    ('''\
    def block(x, mode):
        return tf.layers.dropout(tf.layers.dense(x, 4), 0.5, training=mode == tf.estimator.ModeKeys.TRAIN)


    def network(images, params, training):
        net = block(images, tf.estimator.ModeKeys.TRAIN)
        net = block(net, tf.estimator.ModeKeys.TRAIN)
        return tf.layers.dense(net, 3)
    ''', "mode"),
    # A statement that does not compute the result (it would run once per call in Keras).
    ('''\
    def block(x, units):
        tf.summary.histogram("x", x)
        net = tf.layers.dense(x, units)
        return net


    def network(images, params, training):
        return tf.layers.dense(block(block(images, 4), 8), 3)
    ''', "does not compute its result"),
    # A setting computed from the inputs cannot configure a layer made in __init__.
    ('''\
    def block(x, units):
        net = tf.layers.dense(x, units)
        return net


    def network(images, params, training):
        width = tf.shape(images)[1]
        net = block(images, 4)
        return block(net, width)
    ''', "value computed from `images`"),
])
def test_what_a_layer_class_cannot_hold_is_refused(rules, helpers, reason):
    result = convert(rules, helpers)
    assert result.status == "partial", result.new.decode()
    assert any(reason in m for m in manual(result)), manual(result)
    assert "tf.estimator.Estimator(model_fn" in result.new.decode()  # the unit is left as it was


DISPATCH = '''\
def linear(features, mode, params):
    return tf.layers.dense(tf.reshape(features["image"], [-1, 16]), 3)


def deep(features, mode, params):
    net = tf.layers.dense(tf.reshape(features["image"], [-1, 16]), params["hidden"][0], activation=tf.nn.relu)
    net = tf.layers.dropout(net, 0.5, training=mode == tf.estimator.ModeKeys.TRAIN)
    return tf.layers.dense(net, 3)
'''
DISPATCH_MODEL_FN = MODEL_FN.replace(
    '    training = mode == tf.estimator.ModeKeys.TRAIN\n    logits = network(features["image"], params, training)\n',
    '    model_functions = {"linear": linear, "deep": deep}\n    model_function = model_functions[params["model"]]\n'
    '    logits = model_function(features, mode, params)\n').replace('"norm": True', '"norm": True, "model": "deep"')


def test_model_functions_picked_by_a_setting_become_layer_classes_picked_alike(rules):
    result = convert(rules, DISPATCH, DISPATCH_MODEL_FN)
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert "class Linear(tf.keras.layers.Layer):" in new and "class Deep(tf.keras.layers.Layer):" in new
    assert "def linear(" not in new and "def deep(" not in new and "model_functions = " not in new
    # One layer, of the class the same setting picks (here the whole model: a Sequential).
    assert '{"linear": Linear, "deep": Deep}[params["model"]](params)' in new
    # The model_fn's mode, given to the function, is Keras's training flag there.
    assert "self.dropout(net, training=training)" in new
    model, out = run_model(_helpers.inline(new, result.helpers), {"hidden": [8], "norm": True, "model": "deep"},
                           {"image": __import__("numpy").ones((2, 16), "float32")})
    assert out.shape == (2, 3) and len(model.trainable_weights) == 4


@pytest.mark.parametrize("change, reason", [
    # The setting must be one __init__ has.
    (('    model_function = model_functions[params["model"]]',
      '    name = "deep" if params["hidden"] else "linear"\n    model_function = model_functions[name]'),
     "computed in the model_fn"),
    # One function takes its arguments otherwise.
    (("def linear(features, mode, params):", "def linear(features, params, mode):"), "different parameters"),
])
def test_model_functions_e2k_cannot_pick_in_init_are_refused(rules, change, reason):
    result = convert(rules, DISPATCH.replace(*change), DISPATCH_MODEL_FN.replace(*change))
    assert result.status == "partial", result.new.decode()
    assert any(reason in m for m in manual(result)), manual(result)


def test_a_block_that_rebinds_its_input_and_reads_a_setting_it_computes(rules):
    # `x = dense(x)` in a loop: the input rebound is the block's result (the forward pass was
    # read as empty, "does not compute its result"); `reg = l2(...) if l2 else None`, computed
    # from its settings, is computed in __init__.
    result = convert(rules, '''\
    def network(x, params, training):
        reg = tf.keras.regularizers.l2(params["l2"]) if params["l2"] else None
        for units in params["hidden"]:
            x = tf.layers.dense(x, units, activation=tf.nn.relu, kernel_regularizer=reg)
        x = tf.layers.dropout(x, 0.1, training=training)
        return tf.layers.dense(x, 3)
    ''', MODEL_FN.replace("loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)",
                          "loss = tf.losses.sparse_softmax_cross_entropy(labels, logits) + "
                          "tf.losses.get_regularization_loss()").replace('"norm": True', '"l2": 0.01'))
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert 'reg = tf.keras.regularizers.l2(params["l2"]) if params["l2"] else None' in new.split("def call(")[0], new
    assert "kernel_regularizer=reg" in new


def test_a_training_parameter_no_layer_reads_is_still_the_training_flag(rules):
    # It became a constructor argument given `mode == TRAIN`, refused as "computed from the inputs".
    result = convert(rules, '''\
    def network(x, params, training):
        for units in params["hidden"]:
            x = tf.layers.dense(x, units, activation=tf.nn.relu)
        return tf.layers.dense(x, 3)
    ''')
    assert result.status == "converted", manual(result)
    assert "Network(params)" in result.new.decode()
