"""One layer-making helper called in each mode's branch, with arguments that only switch its
training behaviour (a dropout's keep_prob that is 1.0 outside TRAIN, an `is_training` flag):
one forward pass, with Keras's `training` flag. Calls that differ otherwise stay refused."""
from __future__ import annotations

import textwrap

import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat, helpers_beside

HEAD = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [1])).batch(1)


'''
TAIL = '''

estimator = tf.estimator.Estimator(model_fn, params={"hidden": 8, "keep": 0.75})
estimator.train(input_fn)
'''


def model_fn(train_args: str, eval_args: str, predict_args: str | None = None) -> str:
    predict_args = predict_args or eval_args
    return f'''\
    def model_fn(features, labels, mode, params):
        x = features["x"]
        if mode == tf.estimator.ModeKeys.PREDICT:
            logits = build_model(x, {predict_args})
            return tf.estimator.EstimatorSpec(mode, predictions={{"class": tf.argmax(logits, axis=1)}})
        if mode == tf.estimator.ModeKeys.TRAIN:
            logits = build_model(x, {train_args})
            loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
            train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
        if mode == tf.estimator.ModeKeys.EVAL:
            logits = build_model(x, {eval_args})
            loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
            accuracy = tf.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, axis=1))
            return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={{"accuracy": accuracy}})
    '''


CONTRIB_HELPER = '''\
import tensorflow.contrib.layers as layers


def build_model(x, hidden_size, keep_prob):
    tf.logging.info("build_model(hidden_size=%d, keep_prob=%f)" % (hidden_size, keep_prob))
    with tf.variable_scope("model"):
        fc1 = layers.fully_connected(x, hidden_size, scope="fc1")
        drop1 = layers.dropout(fc1, keep_prob=keep_prob, scope="drop1")
        return layers.fully_connected(drop1, 3, activation_fn=None, scope="fc2")


'''

FLAG_HELPER = '''\
def build_model(x, hidden_size, is_training, unused=None):
    net = tf.layers.dense(x, hidden_size, activation=tf.nn.relu)
    net = tf.layers.dropout(net, 0.3, training=is_training)
    return tf.layers.dense(net, 3)


'''


def convert(rules, *parts: str):
    source = (HEAD + "".join(textwrap.dedent(part) for part in parts) + TAIL).encode()
    return rewrite_source(source, "program.py", rules)


def manual(result) -> list[str]:
    return [f"{f.code} {f.message}" for f in result.findings if f.kind == "manual"]


def test_a_keep_prob_that_is_one_outside_train_becomes_one_pass_with_the_training_flag(rules):
    result = convert(rules, CONTRIB_HELPER, model_fn('params["hidden"], params["keep"]', 'params["hidden"], 1.0'))
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "self.drop1 = tf.keras.layers.Dropout(rate=1 - params[\"keep\"])" in new
    assert "drop1 = self.drop1(fc1, training=training)" in new
    # The log line reads the switch: the method is given each mode's value, as the Estimator was.
    assert 'self.params["keep"] if training else 1.0' in new
    assert "def build_model(self, x, hidden_size, keep_prob, training=False):" in new
    assert new.count("self.build_model(") == 1  # one forward pass, not one per mode
    assert "layers.dropout(" not in new.replace("keras.layers.Dropout", "")


def test_a_training_flag_per_mode_and_an_argument_the_helper_never_reads(rules):
    result = convert(rules, FLAG_HELPER, model_fn('params["hidden"], True, unused=1', 'params["hidden"], False, unused=2'))
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "return self.build_model(x, training=training)" in new
    assert "net = self.dropout(net, training=training)" in new


def test_a_training_flag_given_as_a_test_of_the_mode(rules):
    result = convert(rules, FLAG_HELPER, model_fn('params["hidden"], mode == tf.estimator.ModeKeys.TRAIN',
                                                  'params["hidden"], False'))
    assert result.status == "converted", manual(result)
    assert "return self.build_model(x, training=training)" in flat(result.new.decode())


def test_calls_that_differ_in_the_layers_they_make_are_refused(rules):
    result = convert(rules, CONTRIB_HELPER, model_fn('params["hidden"], params["keep"]', '16, 1.0'))
    assert result.status != "converted"
    assert any("`build_model(...)` is called in another mode with another `hidden_size` than TRAIN's call" in m
               for m in manual(result)), manual(result)


def test_a_keep_prob_that_still_drops_outside_train_is_refused(rules):
    result = convert(rules, CONTRIB_HELPER, model_fn('params["hidden"], params["keep"]', 'params["hidden"], 0.9'))
    assert result.status != "converted"
    assert any("with another `keep_prob`" in m for m in manual(result)), manual(result)
    # Switched off by 1.0 in EVAL and by 1 in PREDICT: the same identity.
    result = convert(rules, CONTRIB_HELPER, model_fn('params["hidden"], params["keep"]', 'params["hidden"], 1.0',
                                                     'params["hidden"], 1'))
    assert result.status == "converted", manual(result)


def test_a_switch_the_helper_computes_with_is_refused(rules):
    helper = CONTRIB_HELPER.replace('fc1 = layers.fully_connected(x, hidden_size, scope="fc1")',
                                    'fc1 = layers.fully_connected(x * keep_prob, hidden_size, scope="fc1")')
    result = convert(rules, helper, model_fn('params["hidden"], params["keep"]', 'params["hidden"], 1.0'))
    assert result.status != "converted"
    assert any("is called in another mode with another `keep_prob`" in m for m in manual(result)), manual(result)


def test_a_flag_that_is_not_false_outside_train_is_refused(rules):
    result = convert(rules, FLAG_HELPER, model_fn('params["hidden"], False', 'params["hidden"], True'))
    assert result.status != "converted"


SIMPLE_HEAD = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]], [[0.5]])).batch(1)


'''


def test_a_dropout_that_never_ran_is_left_out_with_a_note_and_a_comment(rules):
    source = SIMPLE_HEAD + textwrap.dedent('''\
    def model_fn(features, labels, mode):
        net = tf.layers.dense(features * 2.0, 8, activation=tf.nn.relu)
        net = tf.layers.dropout(net, rate=0.3)
        output = tf.layers.dense(net, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    estimator = tf.estimator.Estimator(model_fn)
    estimator.train(input_fn)
    ''')
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", manual(result)
    notes = [f for f in result.findings if f.code == "E2K303"]
    assert notes and all(f.kind == "fixed" for f in notes)
    assert any("never ran in the Estimator program" in f.message for f in notes)
    new = result.new.decode()
    assert "net = net" not in new and "Dropout" not in new
    assert ("        # tf.layers.dropout(net, rate=0.3) left out: it never ran in the Estimator (no\n"
            "        # training=)\n"
            "        output = self.output_layer(net)") in new  # e2k's note, wrapped at the file's length


def test_a_dropout_whose_training_flag_e2k_cannot_read_is_still_refused(rules):
    source = SIMPLE_HEAD + textwrap.dedent('''\
    def model_fn(features, labels, mode, params):
        net = tf.layers.dense(features, 8, activation=tf.nn.relu)
        net = tf.layers.dropout(net, rate=0.3, training=params["drop"])
        output = tf.layers.dense(net, 1)
        loss = tf.losses.mean_squared_error(labels, output)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    estimator = tf.estimator.Estimator(model_fn, params={"drop": True})
    estimator.train(input_fn)
    ''')
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status != "converted"
    assert any("training=" in m for m in manual(result))


BLOCK_HELPER = '''\
def block(x, units, batch_normalization=True, training=False, name=None):
    layer = tf.layers.dense(x, units, name=name)
    if batch_normalization:
        bn = tf.layers.BatchNormalization(momentum=0.9)
        layer = bn(layer, training=training)
    return tf.nn.relu(layer)


'''


def loop_program(loop: str) -> str:
    return BLOCK_HELPER + f'''\
def model_fn(features, labels, mode, params):
    net = features
{textwrap.indent(loop, "    ")}
    output = tf.layers.dense(net, 1)
    loss = tf.losses.mean_squared_error(labels, output)
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
'''


def test_a_helper_called_in_a_loop_gets_one_tuple_of_layers_per_iteration(rules):
    result = convert(rules, loop_program(
        "for i, units in enumerate(params['hidden']):\n"
        "    net = block(net, units, training=mode == tf.estimator.ModeKeys.TRAIN, name='hidden_%d' % i)"))
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    # Made iteration by iteration, as TF1 made their variables; the loop's own variables configure them.
    assert ("        self.block_layers = [\n"
            "            (tf.keras.layers.Dense(units, name='hidden_%d' % i),\n"
            "             tf.keras.layers.BatchNormalization(momentum=0.9))\n"
            "            for i, units in enumerate(params['hidden'])\n"
            "        ]\n") in new
    assert ("        for dense, bn in self.block_layers:\n"
            "            net = self.block(net, True, dense, bn, training=training)\n") in new
    assert "    def block(self, x, batch_normalization, dense, bn, training=False):\n" in new
    assert "layer = bn(layer, training=training)" in new and "bn = tf." not in new


def test_a_helper_loop_over_a_value_of_the_model_fn_is_refused(rules):
    result = convert(rules, loop_program(
        "sizes = [8, 4] if mode == tf.estimator.ModeKeys.TRAIN else [8]\n"
        "for units in sizes:\n"
        "    net = block(net, units)"))
    assert result.status != "converted"
    assert any("called in a loop" in m and "computed in the model_fn" in m for m in manual(result)), manual(result)


def test_loops_over_a_setting_the_model_fn_reads_from_params_make_their_layers_in_init(rules):
    # `hidden = params.get("hidden", [8, 4])`: computed from the settings alone, so __init__
    # computes it too and makes the loop's layers over it (directly, or through a helper).
    for body in ("for units in hidden:\n    net = tf.layers.dense(net, units, activation=tf.nn.relu)",
                 "for units in hidden:\n    net = block(net, units)"):
        result = convert(rules, loop_program('hidden = params.get("hidden", [8, 4])\n' + body))
        assert result.status == "converted", (body, manual(result))
        new = flat(result.new.decode())
        init = new.split("def __init__(self, params):")[1].split("def call(")[0]
        call = new.split("def call(")[1]
        assert 'hidden = params.get("hidden", [8, 4])' in init and "for units in hidden" in init, new
        assert "hidden" not in call.split("def ")[0], new  # the loop in call runs over the layers


def test_a_helper_loop_whose_variable_reaches_the_forward_pass_is_refused(rules):
    # `units` is read by the method itself, at each iteration: the loop in `call` has no `units`.
    helper = BLOCK_HELPER.replace("return tf.nn.relu(layer)", "return tf.nn.relu(layer) * units")
    result = rewrite_source((HEAD + helper + loop_program("for units in params['hidden']:\n    net = block(net, units)")
                             .replace(BLOCK_HELPER, "") + TAIL).encode(), "program.py", rules)
    assert result.status != "converted"
    assert any("loop variable" in m for m in manual(result)), manual(result)


def test_a_helper_called_in_a_nested_block_of_the_loop_is_refused(rules):
    result = convert(rules, loop_program(
        "for units in params['hidden']:\n"
        "    if units > 4:\n"
        "        net = block(net, units)"))
    assert result.status != "converted"
    assert any("loop" in m for m in manual(result)), manual(result)


def test_a_one_expression_helper_of_the_model_fn_called_in_a_loop_is_written_out_there(rules):
    result = convert(rules, '''\
    def model_fn(features, labels, mode, params):
        def dense_block(x, units):
            return tf.layers.dropout(tf.layers.dense(x, units, activation=tf.nn.relu), 0.2,
                                     training=mode == tf.estimator.ModeKeys.TRAIN)

        net = features["x"]
        for units in params["hidden"]:
            net = dense_block(net, units)
        logits = tf.layers.dense(net, 3)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert ("        self.dense_layers = [\n            tf.keras.layers.Dense(units, activation=tf.nn.relu)\n"
            "            for units in params[\"hidden\"]\n        ]\n") in new
    # Wrapped by black, its bracket closed where the line ends, as the program closes its own.
    assert ("        self.dropout_layers = [\n"
            "            tf.keras.layers.Dropout(0.2) for units in params[\"hidden\"]]\n") in new
    assert ("        for dense, dropout in zip(self.dense_layers, self.dropout_layers):\n"
            "            net = dropout(dense(net), training=training)\n") in new
    assert "def dense_block" not in new


def test_the_builder_takes_the_name_of_a_helper_that_became_a_method(rules):
    result = convert(rules, CONTRIB_HELPER, model_fn('params["hidden"], params["keep"]', 'params["hidden"], 1.0'))
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    # `build_model` was the TF1 helper's name; it is now a method, and the module's name is free.
    assert "\ndef build_model(params):\n" in new and "model = build_model({" in new and "build_model_2" not in new
    # Still used outside the model_fn: the helper stays, and the builder takes another name.
    kept = convert(rules, CONTRIB_HELPER, model_fn('params["hidden"], params["keep"]', 'params["hidden"], 1.0'),
                   "\nprobe = build_model(tf.zeros([1, 2]), 4, 1.0)\n")
    assert "def build_model(x, hidden_size, keep_prob):" in flat(kept.new.decode())
    assert "def build_model_2(params):" in flat(kept.new.decode())


def test_a_keras_batch_normalization_the_estimator_never_updated_keeps_its_moving_averages(rules):
    # Keras layers in a TF1 graph add nothing to UPDATE_OPS: the control dependency ran no
    # update, and the Estimator evaluated with the initial moving averages. momentum=1.0 keeps
    # them there in Keras too (parity: fixture keras_batchnorm_never_updated).
    keras_bn = BLOCK_HELPER.replace("tf.layers.BatchNormalization(momentum=0.9)", "tf.keras.layers.BatchNormalization(momentum=0.9)")
    result = rewrite_source((HEAD + keras_bn + loop_program("for units in params['hidden']:\n"
                                                            "    net = block(net, units, training=mode == tf.estimator.ModeKeys.TRAIN)")
                             .replace(BLOCK_HELPER, "") + TAIL).encode(), "program.py", rules)
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "BatchNormalization(momentum=1.0)" in new and "momentum=0.9" not in new, new
    assert "# momentum=1.0: the Estimator never updated these moving averages" in new
    assert any(f.code == "E2K303" and "momentum=1.0 keeps them" in f.message for f in result.findings)
    # tf.layers' batch normalization was updated through UPDATE_OPS: it converts.
    result = convert(rules, loop_program("for units in params['hidden']:\n"
                                         "    net = block(net, units, training=mode == tf.estimator.ModeKeys.TRAIN)"))
    assert result.status == "converted", manual(result)


def test_a_call_for_predict_beside_one_shared_by_train_and_eval(rules):
    shared = '''\
    def model_fn(features, labels, mode, params):
        x = features["x"]
        if mode == tf.estimator.ModeKeys.PREDICT:
            logits = build_model(x, params["hidden"], {predict})
            return tf.estimator.EstimatorSpec(mode, predictions={{"class": tf.argmax(logits, axis=1)}})
        logits = build_model(x, params["hidden"], {train})
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    '''
    # The flag tests the mode: off in EVAL as in PREDICT, as Keras's evaluate and predict run.
    result = convert(rules, FLAG_HELPER, shared.format(predict="False", train="mode == tf.estimator.ModeKeys.TRAIN"))
    assert result.status == "converted", manual(result)
    assert "return self.build_model(x, training=training)" in flat(result.new.decode())
    # On in EVAL too (a literal True, or a keep_prob that drops there): Keras's evaluate would not drop.
    for train, predict, helper in (("True", "False", FLAG_HELPER),
                                   ('params["keep"]', "1.0", CONTRIB_HELPER)):
        result = convert(rules, helper, shared.format(predict=predict, train=train))
        assert result.status != "converted"
        assert any("is called in another mode with another" in m for m in manual(result)), manual(result)


@pytest.mark.slow
def test_parity_catches_the_moving_averages_updated_where_the_estimator_never_did(tmp_path):
    """fixtures/keras_batchnorm_never_updated passes parity (tests/test_fixture_parity.py);
    with Keras's momentum=0.9 the migrated model updates the moving averages the Estimator
    left at 0 and 1: its final weights differ."""
    from conftest import FIXTURES
    from estimator2keras.parity import run_parity

    case = FIXTURES / "keras_batchnorm_never_updated"
    after = (case / "after.py").read_text()
    assert after.count("BatchNormalization(momentum=1.0)") == 1, "the fixture's shape changed: update this test"
    wrong = tmp_path / "after.py"
    wrong.write_text(after.replace("BatchNormalization(momentum=1.0)", "BatchNormalization(momentum=0.9)"))
    helpers_beside(case, tmp_path)
    result = run_parity(case / "before.py", wrong, replicas=2)
    assert not result.passed, result.report()
    assert "moving_variance" in result.report()
