"""Hand-written serving_input_receiver_fns (E2K007, E2K002's exporters): the spellings that
convert, and the ones that are refused with a finding naming the construct (fail closed:
the whole unit stays as it was)."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat

PROGRAM = '''\
import tensorflow as tf
from helpers import make_features


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


SERVING


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
estimator.export_saved_model("export", EXPORTED)
'''


def _rewrite(serving: str, rules, exported: str = "serving_input_fn"):
    source = PROGRAM.replace("SERVING", serving.strip()).replace("EXPORTED", exported).encode()
    return rewrite_source(source, "program.py", rules)


def _refused(result, words: str) -> None:
    assert result.status == "partial"
    assert "tf.estimator.Estimator(" in flat(result.new.decode()), "the unit must stay as it was"
    messages = [f.format() for f in result.findings]
    assert any(words in m for m in messages), messages


def test_a_tensor_receiver_feeds_the_model_the_tensor_itself(rules):
    result = _rewrite('''
def serving_input_fn():
    image = tf.placeholder(tf.float32, [None, 2], name="image")
    return tf.estimator.export.TensorServingInputReceiver(image, {"image_bytes": image})
''', rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert '@tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="image_bytes")])' in new
    assert "def serving_input_fn(image):\n    return model.predict_step(image)" in new


def test_a_raw_receiver_built_and_returned_at_once_feeds_the_functions_placeholders(rules):
    # `return build_raw_serving_input_receiver_fn(placeholders)()` (a new user's program):
    # the receiver of those placeholders, fed as they are. E2K007 said it was none of the
    # forms it converts, although it named this one.
    result = _rewrite('''
def serving_input_fn():
    placeholders = {name: tf.placeholder(tf.float32, [None], name=name) for name in ["a", "b"]}
    return tf.estimator.export.build_raw_serving_input_receiver_fn(placeholders)()
''', rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert "for name in [\"a\", \"b\"]}])\ndef serving_input_fn(placeholders):\n" \
           "    return model.predict_step(placeholders)" in new, new
    assert "tf.TensorSpec([None], tf.float32, name=name)" in new
    # A fixed batch size is another signature: refused, the unit left whole.
    _refused(_rewrite('''
def serving_input_fn():
    placeholders = {"x": tf.placeholder(tf.float32, [None, 2])}
    return tf.estimator.export.build_raw_serving_input_receiver_fn(placeholders, default_batch_size=8)()
''', rules), "default_batch_size")


def test_one_tensor_of_a_serving_input_receiver_is_the_feature_named_feature(rules):
    # ServingInputReceiver wraps features that are not a dict as {"feature": tensor}, and a
    # single receiver tensor as {"input": tensor}: the model_fn and the signature saw those.
    result = _rewrite('''
def serving_input_fn():
    x = tf.placeholder(tf.float32, [None, 2])
    return tf.estimator.export.ServingInputReceiver(x, x)
''', rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert 'tf.TensorSpec([None, 2], tf.float32, name="input")' in new
    assert 'return model.predict_step({"feature": x})' in new


def test_features_a_tensorflow_op_makes_are_one_tensor(rules):
    result = _rewrite('''
def serving_input_fn():
    image_bytes_list = tf.placeholder(shape=[None], dtype=tf.string)
    images = tf.map_fn(lambda b: tf.io.decode_raw(b, tf.float32), image_bytes_list, dtype=tf.float32)
    return tf.estimator.export.ServingInputReceiver(images, {"image_bytes": image_bytes_list})
''', rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert 'return model.predict_step({"feature": images})' in flat(result.new.decode())


def test_a_placeholder_with_a_literal_default_takes_the_defaults_dtype(rules):
    result = _rewrite('''
def serving_input_fn():
    feature_placeholders = {
        "x": tf.placeholder(tf.float32, [None, 2]),
        "key": tf.placeholder_with_default(tf.constant(["nokey"]), [None]),
    }
    return tf.estimator.export.ServingInputReceiver(feature_placeholders, feature_placeholders)
''', rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert '"key": tf.TensorSpec([None], tf.string, name="key")' in new
    assert "placeholder" not in new.replace("feature_placeholders", "")


def test_receiver_alternatives_are_refused(rules):
    _refused(_rewrite('''
def serving_input_fn():
    x = tf.placeholder(tf.float32, [None, 2])
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x}, receiver_tensors_alternatives={"y": {"x": x}})
''', rules), "receiver_tensors_alternatives")


def test_receiver_tensors_filled_in_a_loop_become_a_comprehension_of_specs(rules):
    result = _rewrite('''
def serving_input_fn():
    inputs = {}
    for name, dtype in [("x", tf.float32)]:
        inputs[name] = tf.placeholder(shape=[None, 2], dtype=dtype)
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)
''', rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert ("@tf.function(input_signature=[{name: tf.TensorSpec([None, 2], dtype, name=name) "
            "for name, dtype in [(\"x\", tf.float32)]}])\ndef serving_input_fn(inputs):\n"
            "    return model.predict_step(inputs)") in new


def test_receiver_tensors_filled_by_a_loop_that_does_more_are_refused(rules):
    _refused(_rewrite('''
def serving_input_fn():
    inputs = {}
    for name in ["x"]:
        print(name)
        inputs[name] = tf.placeholder(shape=[None, 2], dtype=tf.float32)
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)
''', rules), "receiver tensors e2k cannot follow")


def test_a_placeholder_that_is_not_a_receiver_tensor_is_refused(rules):
    _refused(_rewrite('''
def serving_input_fn():
    x = tf.placeholder(tf.float32, [None, 2])
    scale = tf.placeholder(tf.float32, [])
    return tf.estimator.export.ServingInputReceiver({"x": x * scale}, {"x": x})
''', rules), "not one of the receiver tensors")


def test_features_of_a_kind_e2k_cannot_tell_are_refused(rules):
    _refused(_rewrite('''
def serving_input_fn():
    x = tf.placeholder(tf.float32, [None, 2])
    return tf.estimator.export.ServingInputReceiver(make_features(x), {"x": x})
''', rules), "a dict of tensors or one tensor")


_PARSER_OF_A_DICT = """
def make_parser(with_target=True):
    def parse(row):
        columns = tf.io.decode_csv(row, record_defaults=[[0.0], [0.0]])
        features = dict(zip(["x", "y"], columns))
        target = features.pop("y") if with_target else None
        return features, target
    return parse
"""
_PARSER_OF_A_TENSOR = """
def make_parser(with_target=True):
    def parse(row):
        columns = tf.io.decode_csv(row, record_defaults=[[0.0], [0.0]])
        return tf.stack(columns, axis=1), None
    return parse
"""
_SERVING_THROUGH_A_PARSER = """
def serving_input_fn():
    row = tf.placeholder(shape=[None], dtype=tf.string)
    features, _ = make_parser(with_target=False)(row)
    return tf.estimator.export.ServingInputReceiver(features, {"row": row})
"""


@pytest.mark.parametrize("parse, wrapped", [
    pytest.param(_PARSER_OF_A_DICT, False, id="a-factory-returning-a-parser-of-a-dict"),
    pytest.param(_PARSER_OF_A_TENSOR, True, id="a-factory-returning-a-parser-of-one-tensor"),
])
def test_features_unpacked_from_what_a_parser_returns_are_told_through_it(rules, parse, wrapped):
    """`features, _ = make_parser(with_target=False)(row)` (Google's iris sample): the kind
    of the features is the kind of the first value the parser a factory returns returns."""
    result = _rewrite(parse + "\n" + _SERVING_THROUGH_A_PARSER, rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert ('return model.predict_step({"feature": features})' in new) is wrapped, new
    assert ("return model.predict_step(features)" in new) is not wrapped, new


def test_features_unpacked_from_what_e2k_cannot_follow_are_refused(rules):
    _refused(_rewrite(_SERVING_THROUGH_A_PARSER.replace("make_parser(with_target=False)(row)", "make_features(row)"),
                      rules), "a dict of tensors or one tensor")


def test_a_serving_fn_imported_from_another_module_is_refused(rules):
    result = _rewrite("from helpers import serving_input_fn", rules)
    _refused(result, "a function of this file that returns a ServingInputReceiver")


SERVING_TABLE = '''
def json_serving_input_fn():
    inputs = {"x": tf.placeholder(tf.float32, [None, 2])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


def csv_serving_input_fn():
    csv_row = tf.placeholder(tf.string, [None])
    features = {"x": tf.stack(tf.decode_csv(csv_row, [[0.0], [0.0]]), axis=1)}
    return tf.estimator.export.ServingInputReceiver(features, {"csv_row": csv_row})


SERVING_FUNCTIONS = {"JSON": json_serving_input_fn, "CSV": csv_serving_input_fn}
FORMAT = "CSV"
'''


def test_a_dict_of_serving_fns_converts_each_and_keeps_the_choice(rules):
    result = _rewrite(SERVING_TABLE, rules, "SERVING_FUNCTIONS[FORMAT]")
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert "def json_serving_input_fn(inputs):" in new and "def csv_serving_input_fn(csv_row):" in new
    assert 'signatures={"serving_default": SERVING_FUNCTIONS[FORMAT]})' in new
    assert "ServingInputReceiver" not in new


def test_a_dict_of_serving_fns_read_elsewhere_too_is_refused(rules):
    _refused(_rewrite(SERVING_TABLE + "\nprint(sorted(SERVING_FUNCTIONS))", rules, "SERVING_FUNCTIONS[FORMAT]"),
             "`SERVING_FUNCTIONS` is used outside this Estimator's exports")


def test_a_receiver_dict_that_is_also_the_features_is_rebuilt_from_the_parameters(rules):
    # `ServingInputReceiver(receiver_tensors, receiver_tensors)`: the dict that gathers the
    # placeholders is the features too; it stays, built from the function's parameters.
    result = _rewrite('''
def serving_input_fn():
    features = tf.placeholder(dtype=tf.float32, shape=[None, 2], name="features")
    receiver_tensors = {"x": features}
    return tf.estimator.export.ServingInputReceiver(receiver_tensors, receiver_tensors)
''', rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert ("def serving_input_fn(features):\n"
            "    receiver_tensors = {\"x\": features}\n"
            "    return model.predict_step(receiver_tensors)") in new


@pytest.mark.parametrize("use, converts", [
    ('print("exported to", estimator.export_saved_model("export", serving_input_fn))', True),
    ('paths = [str(estimator.export_saved_model("export", serving_input_fn))]', True),
    # something else runs first, or decides whether the export runs: left whole, reported
    ('print(time_it(), estimator.export_saved_model("export", serving_input_fn))', False),
    ('path = keep and estimator.export_saved_model("export", serving_input_fn)', False),
])
def test_an_export_inside_an_expression_runs_first_and_its_directory_is_used_there(rules, use, converts):
    source = PROGRAM.replace("SERVING", '''
def serving_input_fn():
    inputs = {"x": tf.placeholder(tf.float32, [None, 2])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)
''').replace('estimator.export_saved_model("export", EXPORTED)', use)
    result = rewrite_source(source.encode(), "program.py", rules)
    if not converts:
        _refused(result, "is used inside an expression")
        return
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert 'export_dir = os.fsencode(os.path.join("export", str(int(time.time()))))\n' \
           'tf.saved_model.save(model, export_dir, signatures={"serving_default": serving_input_fn})\n' in new
    assert use.replace('estimator.export_saved_model("export", serving_input_fn)', "export_dir") in new
