"""Forward passes the model_fn does not write itself: Keras models it makes and calls, and
helper functions that make layers. What e2k cannot place is refused, naming the construct."""
from __future__ import annotations

import textwrap

import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat

HEAD = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


'''
TAIL = '''

estimator = tf.estimator.Estimator(model_fn, params={"units": 8})
estimator.train(input_fn)
'''
FACTORY = '''\
def create_model(units):
    return tf.keras.Sequential([tf.keras.layers.Dense(units), tf.keras.layers.Dropout(0.5), tf.keras.layers.Dense(1)])


'''


def convert(rules, *parts: str):
    source = (HEAD + "".join(textwrap.dedent(part) for part in parts) + TAIL).encode()
    return rewrite_source(source, "program.py", rules)


def manual(result) -> list[str]:
    return [f"{f.code} {f.message}" for f in result.findings if f.kind == "manual"]


def test_a_keras_model_called_per_mode_becomes_one_forward_pass_with_the_training_flag(rules):
    result = convert(rules, FACTORY, '''\
    def model_fn(features, labels, mode, params):
        model = create_model(params["units"])
        net = features * 2.0
        if mode == tf.estimator.ModeKeys.TRAIN:
            output = model(net, training=True)
        else:
            output = model(net, training=False)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "self.model = create_model(params[\"units\"])" in new
    assert "return self.model(net, training=training)" in new
    assert "def create_model(units):" in new  # the factory is kept as written


def test_modes_that_compute_the_output_otherwise_are_refused(rules):
    result = convert(rules, FACTORY, '''\
    def model_fn(features, labels, mode, params):
        model = create_model(params["units"])
        if mode == tf.estimator.ModeKeys.TRAIN:
            output = model(features, training=True)
        else:
            output = model(features * 0.5, training=False)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "partial"
    assert any("E2K901" in m and "is computed otherwise than in TRAIN mode" in m for m in manual(result)), manual(result)


def test_a_model_made_with_tf1_layers_is_refused(rules):
    result = convert(rules, '''\
    def create_model(units):
        return tf.keras.Sequential([tf.layers.Dense(units), tf.layers.Dense(1)])


    def model_fn(features, labels, mode, params):
        model = create_model(params["units"])
        output = model(features, training=mode == tf.estimator.ModeKeys.TRAIN)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "partial"
    assert any("`create_model(...)` makes the Keras model with `tf.layers.Dense`" in m for m in manual(result)), manual(result)


def test_a_called_object_of_unknown_origin_is_refused(rules):
    result = convert(rules, '''\
    from somewhere import make_network


    def model_fn(features, labels, mode, params):
        network = make_network(params["units"])
        output = network(features)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "partial"
    assert any("`network` is made by `make_network`" in m for m in manual(result)), manual(result)


def test_a_helper_that_makes_layers_becomes_a_method_with_its_layers_made_once(rules):
    result = convert(rules, '''\
    def dense_net(x_dict, units, rate, is_training):
        with tf.variable_scope("DenseNet"):
            x = x_dict["x"]
            hidden = tf.layers.dense(x, units, activation=tf.nn.relu)
            hidden = tf.layers.dropout(hidden, rate=rate, training=is_training)
            out = tf.layers.dense(hidden, 1)
        return out


    def model_fn(features, labels, mode, params):
        output = dense_net(features, params["units"], 0.5, is_training=mode == tf.estimator.ModeKeys.TRAIN)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    # The helper's parameters that configured layers take the values the call passed.
    assert 'self.dense = tf.keras.layers.Dense(params["units"], activation=tf.nn.relu)' in new
    assert "self.dropout = tf.keras.layers.Dropout(rate=0.5)" in new
    assert "return self.dense_net(features, training=training)" in new
    assert "def dense_net(self, x_dict, training=False):" in new
    assert "hidden = self.dropout(hidden, training=training)" in new
    assert "variable_scope" not in new and "def dense_net(x_dict" not in new  # the TF1 helper is gone


def test_a_helper_called_again_with_reuse_shares_its_layers(rules):
    result = convert(rules, '''\
    def tower(x, reuse):
        with tf.variable_scope("tower", reuse=reuse):
            return tf.layers.dense(x, 4, activation=tf.nn.relu)


    def model_fn(features, labels, mode, params):
        a = tower(features, reuse=False)
        b = tower(features * 2.0, reuse=True)
        output = tf.layers.dense(tf.abs(a - b), 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert new.count("tf.keras.layers.Dense(4") == 1  # one layer, applied twice
    assert "a = self.tower(features)" in new and "b = self.tower(features * 2.0)" in new


def test_a_helper_called_again_without_reuse_becomes_a_layer_class(rules):
    # Each call made new layers: each is one instance of the layer class (test_modelfn_blocks).
    result = convert(rules, '''\
    def tower(x, units):
        hidden = tf.layers.dense(x, units, activation=tf.nn.relu)
        return hidden


    def model_fn(features, labels, mode, params):
        a = tower(features, 4)
        output = tower(a, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "class Tower(tf.keras.layers.Layer):" in new and "def tower(" not in new
    assert "tf.keras.Sequential([Tower(4), Tower(1)])" in new  # one layer per call


def test_a_helpers_settings_computed_from_its_parameters_configure_its_layers(rules):
    # `wide = units * 2`, `ksize = hparams.get("ksize", 3)`: values of the settings the calls
    # pass, assigned once before the layers: the layers made in __init__ take them written out.
    result = convert(rules, '''\
    def tower(x, units, hparams):
        wide = units * 2
        act = hparams.get("activation", None)
        return tf.layers.dense(x, wide, activation=act)


    def model_fn(features, labels, mode, params):
        output = tower(features, 1, params)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert 'tf.keras.layers.Dense(1 * 2, activation=params.get("activation", None))' in new, new


@pytest.mark.parametrize("helper, local", [
    pytest.param('''\
    def tower(x, units):
        wide = units
        if units > 1:
            wide = units * 2
        return tf.layers.dense(x, wide)
    ''', "wide", id="assigned-in-an-if"),
    pytest.param('''\
    def tower(x, units):
        wide = x.shape[-1] * units
        return tf.layers.dense(x, wide)
    ''', "wide", id="from-the-input"),
    pytest.param('''\
    def tower(x, units):
        hidden = tf.layers.dense(x, units)
        return tf.layers.dense(hidden, hidden)
    ''', "hidden", id="a-layer-output"),
])
def test_a_helper_whose_layers_read_its_own_tensors_is_refused(rules, helper, local):
    result = convert(rules, helper + '''\


    def model_fn(features, labels, mode, params):
        output = tower(features, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "partial"
    assert any(f"is configured with `{local}`, computed in the helper" in m for m in manual(result)), manual(result)


TWO_PASSES = '''\
def dense_net(x_dict, rate, reuse, is_training):
    with tf.variable_scope("DenseNet", reuse=reuse):
        hidden = tf.layers.dense(x_dict, 8, activation=tf.nn.relu)
        hidden = tf.layers.dropout(hidden, rate=rate, training=is_training)
        return tf.layers.dense(hidden, 1)


'''


def test_a_second_pass_for_inference_becomes_the_models_output_with_training_off(rules):
    result = convert(rules, TWO_PASSES, '''\
    def model_fn(features, labels, mode, params):
        output_train = dense_net(features, 0.5, reuse=False, is_training=True)
        output_test = dense_net(features, 0.5, reuse=True, is_training=False)
        doubled = output_test * 2.0
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=doubled)
        loss = tf.losses.mean_squared_error(labels, output_train)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert new.count("tf.keras.layers.Dense(8") == 1  # one set of layers for both passes
    assert "output_train = self.dense_net(features, training=training)" in new  # fit: True, evaluate/predict: False
    assert "output_test = self(features, training=False)\n        doubled = output_test * 2.0" in new  # predict_step
    assert "def dense_net(x_dict" not in new and "output_test = dense_net" not in new
    fixed = [f.message for f in result.findings if f.kind == "fixed"]
    # The Estimator's EVAL loss came from the training pass (dropout on): named, in the report and the code.
    assert any("EVAL loss came from `output_train`, computed with training=True" in m for m in fixed), fixed
    assert "# The Estimator's evaluation loss used `output_train` (training=True)" in new


def test_a_training_pass_that_tests_the_mode_has_no_evaluation_loss_difference(rules):
    result = convert(rules, TWO_PASSES, '''\
    def model_fn(features, labels, mode, params):
        output_train = dense_net(features, 0.5, False, mode == tf.estimator.ModeKeys.TRAIN)
        output_test = dense_net(features, 0.5, True, False)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=output_test)
        loss = tf.losses.mean_squared_error(labels, output_train)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "output_train = self.dense_net(features, training=training)" in new
    assert "predict_step" not in new  # predictions are the model's output, as Keras predicts it
    assert not any("EVAL loss" in f.message for f in result.findings)


def test_a_keras_model_called_again_with_training_off_is_its_inference_pass(rules):
    result = convert(rules, FACTORY, '''\
    def model_fn(features, labels, mode, params):
        model = create_model(params["units"])
        net = features * 2.0
        output = model(net, training=True)
        inference = model(net, training=False)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={"value": inference})
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "output = self.model(net, training=training)" in new
    assert "inference = self(features, training=False)" in new


def test_a_second_pass_that_differs_otherwise_or_shares_no_layers_is_refused(rules):
    differs = convert(rules, TWO_PASSES, '''\
    def model_fn(features, labels, mode, params):
        output_train = dense_net(features, 0.5, reuse=False, is_training=True)
        output_test = dense_net(features * 0.5, 0.5, reuse=True, is_training=False)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=output_test)
        loss = tf.losses.mean_squared_error(labels, output_train)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert differs.status == "partial"
    assert any("a second forward pass" in m for m in manual(differs)), manual(differs)
    unshared = convert(rules, '''\
    def dense_net(x, is_training):
        hidden = tf.layers.dense(x, 8, activation=tf.nn.relu)
        hidden = tf.layers.dropout(hidden, rate=0.5, training=is_training)
        return tf.layers.dense(hidden, 1)


    def model_fn(features, labels, mode, params):
        output_train = dense_net(features, is_training=True)
        output_test = dense_net(features, is_training=False)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=output_test)
        loss = tf.losses.mean_squared_error(labels, output_train)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert unshared.status == "partial"  # the second call made layers of its own, never trained
    assert any("a second forward pass" in m for m in manual(unshared)), manual(unshared)


def test_predictions_of_the_training_pass_beside_an_inference_pass_are_refused(rules):
    result = convert(rules, TWO_PASSES, '''\
    def model_fn(features, labels, mode, params):
        output_train = dense_net(features, 0.5, reuse=False, is_training=True)
        output_test = dense_net(features, 0.5, reuse=True, is_training=False)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={"a": output_train, "b": output_test})
        loss = tf.losses.mean_squared_error(labels, output_train)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "partial"  # the Estimator predicted `a` with dropout on; Keras predicts with it off
    assert any("read `output_train`, computed with training=True in every mode" in m for m in manual(result)), manual(result)


def test_a_helper_that_tests_its_mode_parameter_takes_the_training_flag(rules):
    helper = '''\
    def dnn_model(img, mode, hparams):
        hidden = tf.layers.dense(inputs=img, units=hparams["units"], activation=tf.nn.relu)
        hidden = tf.layers.dropout(inputs=hidden, rate=0.1, training=(mode == tf.estimator.ModeKeys.TRAIN))
        return tf.layers.dense(inputs=hidden, units=1)


    '''
    result = convert(rules, helper, '''\
    def model_fn(features, labels, mode, params):
        output = dnn_model(features, mode, params)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    # (This once emitted a method without `training` that read it: a NameError at the first step.)
    assert "def dnn_model(self, img, training=False):" in new
    assert "return self.dnn_model(features, training=training)" in new
    assert "hidden = self.dropout(hidden, training=training)" in new
    other = convert(rules, helper, '''\
    def model_fn(features, labels, mode, params):
        output = dnn_model(features, tf.estimator.ModeKeys.TRAIN, params)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert other.status == "partial"
    assert any("is given a `mode` other than the model_fn's" in m for m in manual(other)), manual(other)


def test_a_helper_defined_in_the_model_fn_and_called_several_times_is_written_out_at_each_call(rules):
    result = convert(rules, '''\
    def model_fn(features, labels, mode, params):
        init = tf.truncated_normal_initializer(stddev=0.1)

        def batch_norm(inputs):
            return tf.layers.batch_normalization(inputs, momentum=params["decay"], scale=False,
                                                 training=(mode == tf.estimator.ModeKeys.TRAIN))

        h1 = tf.nn.relu(batch_norm(tf.layers.dense(features, 8, kernel_initializer=init)))
        h2 = tf.nn.relu(batch_norm(tf.layers.dense(h1, 4, kernel_initializer=init)))
        output = tf.layers.dense(h2, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(update_ops):
            train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    # Each call made its own batch normalization, configured with the model_fn's params.
    assert new.count("tf.keras.layers.BatchNormalization(") == 2 and new.count('momentum=params["decay"]') == 2
    assert "h1 = tf.nn.relu(self.batch_normalization(self.dense(features), training=training))" in new
    assert "h2 = tf.nn.relu(self.batch_normalization_1(self.dense_1(h1), training=training))" in new
    assert "def batch_norm" not in new
    # The layers are made in the order the forward pass applies them, as TF1 made their variables.
    order = [new.index(f"self.{name} = ") for name in ("dense", "batch_normalization", "dense_1", "batch_normalization_1")]
    assert order == sorted(order), new
    assert "init = tf.keras.initializers.TruncatedNormal(stddev=0.1)" in new  # in __init__, translated


def test_a_module_helper_of_one_expression_called_with_other_values_makes_layers_per_call(rules):
    result = convert(rules, '''\
    def dense(x, units):
        return tf.layers.dense(x, units, activation=tf.nn.relu)


    def model_fn(features, labels, mode, params):
        output = dense(dense(features, 8), 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "tf.keras.layers.Dense(8, activation=tf.nn.relu)" in new and "tf.keras.layers.Dense(1, activation=tf.nn.relu)" in new
    assert "def dense(x, units)" not in new  # only the model_fn called it


def test_functions_defined_in_the_model_fn_that_e2k_cannot_place_are_refused(rules):
    used_elsewhere = convert(rules, '''\
    def model_fn(features, labels, mode, params):
        def head(x):
            return tf.layers.dense(x, 1)

        def post(x):
            return x * 2.0

        output = head(features)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=post(output))
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert used_elsewhere.status == "partial"
    assert any("`post`" in m for m in manual(used_elsewhere)), manual(used_elsewhere)
    closure = convert(rules, '''\
    def model_fn(features, labels, mode, params):
        scale = params["scale"]

        def block(x):
            hidden = tf.layers.dense(x, 4)
            return hidden * scale

        output = tf.layers.dense(block(features), 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert closure.status == "partial"  # the method would read `scale`, a name of the model_fn
    assert any("reads `scale` of the model_fn" in m for m in manual(closure)), manual(closure)


def test_a_helper_calling_tf_contrib_without_a_rule_is_refused_not_kept_in_call(rules):
    # tf.contrib is gone from TF2: kept as a function `call` calls, it could not run (this was
    # once reported converted, the helper's contrib layers left inside the Keras model).
    result = convert(rules, '''\
    def build_model(x, hidden_size):
        with tf.variable_scope("model"):
            fc1 = tf.contrib.layers.fully_connected(x, hidden_size, activation_fn=tf.nn.relu, scope="fc1")
            fc1 = tf.contrib.layers.layer_norm(fc1)
            return tf.contrib.layers.fully_connected(fc1, 1, activation_fn=None, scope="fc2")


    def model_fn(features, labels, mode, params):
        output = build_model(features, params["units"])
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "partial"
    # (fully_connected has a rule, E2K302; layer_norm has none.)
    assert any("`tf.contrib.layers.layer_norm` in `build_model`" in m for m in manual(result)), manual(result)


def test_an_if_in_a_helper_stays_in_its_method_with_its_layers_made_in_init(rules):
    helper = '''\
    def build_fully_connected(X, n_units, batch_normalization=False, training=False):
        layer = tf.keras.layers.Dense(n_units, activation=None)(X)
        if batch_normalization:
            layer = tf.layers.BatchNormalization(momentum=0.90)(layer, training=training)
        else:
            layer = layer * 1.0
        return tf.nn.relu(layer)


    '''
    result = convert(rules, helper, '''\
    def model_fn(features, labels, mode, params):
        in_training = mode == tf.estimator.ModeKeys.TRAIN
        net = build_fully_connected(features, 8, batch_normalization=params["batch_norm"], training=in_training)
        output = tf.layers.dense(net, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(update_ops):
            train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "self.batch_normalization = tf.keras.layers.BatchNormalization(momentum=0.90)" in new
    assert 'net = self.build_fully_connected(features, self.params["batch_norm"], training=training)' in new
    assert "        if batch_normalization:\n            layer = self.batch_normalization(layer, training=training)\n" in new
    returns = convert(rules, helper.replace("layer = layer * 1.0", "return layer"), '''\
    def model_fn(features, labels, mode, params):
        output = tf.layers.dense(build_fully_connected(features, 8), 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert returns.status == "partial"  # a return inside a branch: not a method e2k writes
    assert any("in an `if` of `build_fully_connected`" in m for m in manual(returns)), manual(returns)


def test_a_layer_object_made_in_a_helper_and_applied_later_is_made_in_init(rules):
    helper = '''\
    def block(x, batch_normalization, training):
        layer = tf.keras.layers.Dense(8)(x)
        if batch_normalization:
            bn = tf.layers.BatchNormalization(momentum=0.90)
            layer = bn(layer, training=training)
        return tf.nn.relu(layer)


    '''
    model_fn = '''\
    def model_fn(features, labels, mode, params):
        bn = features * 2.0
        output = tf.layers.dense(block(bn, params["batch_norm"], mode == tf.estimator.ModeKeys.TRAIN), 1)
        loss = tf.losses.mean_squared_error(labels, output)
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    '''
    result = convert(rules, helper, model_fn)
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "self.bn = tf.keras.layers.BatchNormalization(momentum=0.90)" in new
    assert "        if batch_normalization:\n            layer = self.bn(layer, training=training)\n" in new
    assert "bn = tf." not in new.replace("self.bn = tf.keras", "")  # not made again in the method
    # The helper's `bn` is its own: the model_fn's `bn` stays a value of the forward pass.
    assert "bn = features * 2.0" in new
    twice = convert(rules, helper.replace("            layer = bn(layer, training=training)",
                                          "            layer = bn(layer, training=training)\n"
                                          "            bn = tf.keras.layers.BatchNormalization()"), model_fn)
    assert twice.status == "partial"
    assert any("assigned to more than one name or more than once" in m for m in manual(twice)), manual(twice)


def test_a_helper_called_in_a_loop_makes_its_layers_per_iteration(rules):
    # TF1 made new layers at each iteration: a list of them in __init__, one per iteration,
    # each given to the method in the loop (one shared layer would share its weights).
    result = convert(rules, '''\
    def dense(x, units):
        return tf.layers.dense(x, units, activation=tf.nn.relu)


    def model_fn(features, labels, mode, params):
        net = features
        for _ in range(3):
            net = dense(net, 8)
        output = tf.layers.dense(net, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "self.dense_layers = [tf.keras.layers.Dense(8, activation=tf.nn.relu) for _ in range(3)]" in new
    # One expression: written out in the loop, with one layer of the list at each iteration.
    assert "        for dense in self.dense_layers:\n            net = dense(net)\n" in new
    assert "def dense" not in new
    # Called in the loop and once more: the method could not hold both.
    twice = convert(rules, '''\
    def dense(x, units):
        return tf.layers.dense(x, units, activation=tf.nn.relu)


    def model_fn(features, labels, mode, params):
        net = features
        for _ in range(3):
            net = dense(net, 8)
        output = dense(net, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert twice.status == "partial"
    assert any("`dense(...)` makes layers and is called in a loop" in m for m in manual(twice)), manual(twice)


def test_a_clipping_threshold_the_model_fn_reads_from_params_is_the_builders_too(rules):
    # `clip_norm = params.get("clip_norm", 5.0)`: global_clipnorm=clip_norm was written in the
    # builder without it (a NameError where the model is built).
    result = convert(rules, '''\
    def model_fn(features, labels, mode, params):
        clip_norm = params.get("clip_norm", 5.0)
        output = tf.layers.dense(features, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        optimizer = tf.train.AdamOptimizer(0.01)
        grads, variables = zip(*optimizer.compute_gradients(loss))
        grads, _ = tf.clip_by_global_norm(grads, clip_norm)
        train_op = optimizer.apply_gradients(zip(grads, variables), global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    builder = flat(result.new.decode()).split("def build_model(params):")[1]
    assert builder.index('clip_norm = params.get("clip_norm", 5.0)') < builder.index("global_clipnorm=clip_norm"), builder
