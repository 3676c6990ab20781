"""Forward passes the model_fn does not write itself: Keras models it makes and calls, and
helper functions that make layers. What e2k cannot place is refused, naming the construct."""
from __future__ import annotations

import textwrap

from estimator2keras._engine import rewrite_source

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
    new = result.new.decode()
    assert "self.model = create_model(params[\"units\"])" in new
    assert "output = self.model(net, training=training)" in new
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
    new = result.new.decode()
    # The helper's parameters that configured layers take the values the call passed.
    assert 'self.dense = tf.keras.layers.Dense(params["units"], activation=tf.nn.relu)' in new
    assert "self.dropout = tf.keras.layers.Dropout(rate=0.5)" in new
    assert "output = self.dense_net(features, training=training)" in new
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
    new = result.new.decode()
    assert new.count("tf.keras.layers.Dense(4") == 1  # one layer, applied twice
    assert "a = self.tower(features)" in new and "b = self.tower(features * 2.0)" in new


def test_a_helper_called_again_without_reuse_is_refused(rules):
    result = convert(rules, '''\
    def tower(x, units):
        return tf.layers.dense(x, units, activation=tf.nn.relu)


    def model_fn(features, labels, mode, params):
        a = tower(features, 4)
        output = tower(a, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "partial"
    assert any("`tower(...)` is called again and makes new layers at each call" in m for m in manual(result)), manual(result)


def test_a_helper_whose_layers_read_its_own_values_is_refused(rules):
    result = convert(rules, '''\
    def tower(x, units):
        wide = units * 2
        return tf.layers.dense(x, wide)


    def model_fn(features, labels, mode, params):
        output = tower(features, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "partial"
    assert any("is configured with `wide`, computed in the helper" in m for m in manual(result)), manual(result)


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
    new = result.new.decode()
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
    new = result.new.decode()
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
    new = result.new.decode()
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
