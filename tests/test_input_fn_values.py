"""input_fns as programs hold them (issue 12): a factory returning a lambda or a
functools.partial, a functools.partial written where the Estimator reads it or bound to a
name, and input_fns returned together by a data-loading function (``train_input_fn,
eval_input_fn = get_input_fns(...)``: nested defs, lambdas, partials). The Keras program calls
what held the input_fn, passing what the Estimator passed (``mode``, ``params``) to the
parameters a partial leaves; what e2k still cannot follow says why."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, helpers_beside
from estimator2keras._engine import rewrite_source

HEAD = '''\
import functools

import numpy as np
import tensorflow as tf

X = np.zeros((64, 2), np.float32)
Y = np.zeros((64, 1), np.float32)


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(features["x"], 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def dataset_fn(x, y, batch_size, mode=None):
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
    if mode == tf.estimator.ModeKeys.TRAIN:
        dataset = dataset.repeat()
    return dataset.batch(batch_size)

'''


def convert(rules, tail: str):
    result = rewrite_source((HEAD + tail).encode(), "train.py", rules)
    return result, result.new.decode()


@pytest.mark.parametrize("tail, fit, evaluate", [
    pytest.param('''
est = tf.estimator.Estimator(model_fn, params={"n": 1})
est.train(functools.partial(dataset_fn, X, Y, 8), steps=3)
est.evaluate(functools.partial(dataset_fn, X, batch_size=8, y=Y))
''', 'model.fit(dataset_fn(X, Y, 8, mode="train"), steps_per_epoch=3)',
        'model.evaluate(dataset_fn(X, batch_size=8, y=Y, mode="eval"))', id="partial-in-place"),
    pytest.param('''
train_input_fn = functools.partial(dataset_fn, X, Y, 8, mode=tf.estimator.ModeKeys.TRAIN)
est = tf.estimator.Estimator(model_fn, params={"n": 1})
est.train(input_fn=train_input_fn, steps=3)
''', 'model.fit(train_input_fn(), steps_per_epoch=3)', None, id="partial-named-binds-mode"),
    pytest.param('''
def make_input_fn(x, y, batch_size=8):
    return lambda mode: dataset_fn(x, y, batch_size, mode)

est = tf.estimator.Estimator(model_fn, params={"n": 1})
est.train(make_input_fn(X, Y), steps=3)
est.evaluate(make_input_fn(X, Y, 16))
''', 'model.fit(make_input_fn(X, Y)(mode="train"), steps_per_epoch=3)',
        'model.evaluate(make_input_fn(X, Y, 16)(mode="eval"))', id="factory-returns-lambda"),
    pytest.param('''
def make_input_fn(x, y, batch_size=8):
    input_fn = functools.partial(dataset_fn, x, y, batch_size)
    return input_fn

est = tf.estimator.Estimator(model_fn, params={"n": 1})
est.train(make_input_fn(X, Y), steps=3)
''', 'model.fit(make_input_fn(X, Y)(mode="train"), steps_per_epoch=3)', None, id="factory-returns-named-partial"),
    pytest.param('''
def get_input_fns(batch_size=8):
    def train_input_fn(params):
        return dataset_fn(X, Y, params["batch"], tf.estimator.ModeKeys.TRAIN)
    eval_input_fn = lambda: dataset_fn(X, Y, batch_size)
    return train_input_fn, eval_input_fn

train_input_fn, eval_input_fn = get_input_fns()
est = tf.estimator.Estimator(model_fn, params={"batch": 4})
est.train(train_input_fn, steps=3)
est.evaluate(eval_input_fn)
''', 'model.fit(train_input_fn(params={"batch": 4}), steps_per_epoch=3)', 'model.evaluate(eval_input_fn())',
        id="tuple-of-def-and-lambda"),
])
def test_input_fn_values_convert(rules, tail, fit, evaluate):
    result, new = convert(rules, tail)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert fit in new
    if evaluate is not None:
        assert evaluate in new
    assert "tf.estimator" not in new and "ModeKeys" not in new


def test_partial_written_in_place_drops_functools_import(rules):
    _, new = convert(rules, '''
est = tf.estimator.Estimator(model_fn, params={"n": 1})
est.train(functools.partial(dataset_fn, X, Y, 8), steps=3)
''')
    assert "import functools" not in new


def test_partial_kept_elsewhere_keeps_its_import(rules):
    _, new = convert(rules, '''
other = functools.partial(print, "x")
est = tf.estimator.Estimator(model_fn, params={"n": 1})
est.train(functools.partial(dataset_fn, X, Y, 8), steps=3)
''')
    assert "import functools" in new


def test_factory_lambda_repeat_count_reads_the_factory_argument(rules):
    """``repeat(num_epochs)`` in the lambda a factory returns, given 2: a finite dataset, so
    train() without steps converts; given None it repeats forever and is refused."""
    tail = '''
def make_input_fn(x, y, num_epochs=None):
    return lambda: tf.data.Dataset.from_tensor_slices(({{"x": x}}, y)).repeat(num_epochs).batch(8)

est = tf.estimator.Estimator(model_fn, params={{"n": 1}})
est.train(make_input_fn(X, Y, num_epochs={epochs}))
'''
    result, new = convert(rules, tail.format(epochs=2))
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "model.fit(make_input_fn(X, Y, num_epochs=2)())" in new
    result, _ = convert(rules, tail.format(epochs=None))
    assert result.status == "partial"
    assert any("repeats forever" in f.message for f in result.findings)


def test_helper_of_a_factory_lambda_reads_the_factory_argument(rules):
    tail = '''
def read(x, y, epochs):
    return tf.data.Dataset.from_tensor_slices(({{"x": x}}, y)).repeat(epochs).batch(8)

def make_input_fn(x, y, num_epochs=None):
    return lambda: read(x, y, num_epochs)

est = tf.estimator.Estimator(model_fn, params={{"n": 1}})
est.train(make_input_fn(X, Y, num_epochs={epochs}))
'''
    result, _ = convert(rules, tail.format(epochs=3))
    assert result.status == "converted", [f.format() for f in result.findings]
    result, _ = convert(rules, tail.format(epochs=None))
    assert result.status == "partial"


def test_partial_leaving_an_unknown_parameter_is_refused(rules):
    result, new = convert(rules, '''
est = tf.estimator.Estimator(model_fn, params={"n": 1})
est.train(functools.partial(dataset_fn, X, Y), steps=3)
''')
    assert result.status == "partial"
    assert any("`batch_size` is not one e2k can pass" in f.message for f in result.findings)
    assert "est.train(functools.partial(dataset_fn, X, Y), steps=3)" in new


@pytest.mark.parametrize("tail, why", [
    pytest.param('''
def make_dataset(x, y):
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(8)

est = tf.estimator.Estimator(model_fn, params={"n": 1})
train_input_fn = make_dataset(X, Y)
est.train(input_fn=train_input_fn, steps=3)
''', "`make_dataset` returns `tf.data.Dataset.from_tensor_slices", id="returns-a-dataset"),
    pytest.param('''
def make_input_fn(x, y):
    return lambda: dataset_fn(x, y, 8)

est = tf.estimator.Estimator(model_fn, params={"n": 1})
train_input_fn = make_input_fn(8, X, Y)
est.train(input_fn=train_input_fn, steps=3)
''', "`make_input_fn` is called with more positional arguments than it takes", id="wrong-arity"),
    pytest.param('''
est = tf.estimator.Estimator(model_fn, params={"n": 1})
est.train(input_fn=data.input_fn, steps=3)
''', "`data` (of `data.input_fn`) is defined nowhere the program can see: Python raises a NameError", id="undefined-module"),
])
def test_what_is_not_followed_says_why(rules, tail, why):
    result, _ = convert(rules, tail)
    assert result.status == "partial"
    assert any(why in f.message for f in result.findings), [f.format() for f in result.findings]


def test_fixture_reads_each_kind():
    after = (FIXTURES / "input_fns_from_data_loaders" / "after.py").read_text()
    assert "train_input_fn(mode=\"train\", params={\"batch_size\": 8 * strategy.num_replicas_in_sync})" in after
    assert "eval_input_fn(params={\"batch_size\": 8})" in after
    assert "dataset_fn(train_x, train_y, 8)" in after
    assert "make_predict_input_fn(sample)()" in after


@pytest.mark.slow
def test_wrong_mode_passed_to_an_unpacked_input_fn_is_caught(tmp_path):
    """The fixture's train input_fn, one of the pair get_input_fns returns, repeats only when
    the Estimator passes it ModeKeys.TRAIN: called with the evaluation's mode, the Keras
    program runs out of data before the 12 steps the Estimator trained."""
    from estimator2keras.parity import run_parity

    case = FIXTURES / "input_fns_from_data_loaders"
    after = (case / "after.py").read_text()
    right = 'train_input_fn(mode="train", params={"batch_size": 8 * strategy.num_replicas_in_sync})'
    assert after.count(right) == 1, "the fixture's shape changed: update this test"
    path = tmp_path / "after_wrong_mode.py"
    path.write_text(after.replace(right, right.replace('"train"', '"eval"')))
    helpers_beside(case, tmp_path)
    result = run_parity(case / "before.py", path, replicas=2)
    assert not result.passed, result.report()
