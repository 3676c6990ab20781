"""Estimators not bound to one name (issue 12): several canned Estimators in a dict or list
literal, trained and evaluated through a loop's variable and read by their keys, and an
Estimator whose method is called on it directly. Each becomes its Keras model, built above
the literal and held in its place; the uses keep their receivers. What e2k cannot follow is
refused, naming the construct."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source
from conftest import helpers_beside

HEAD = '''\
import tensorflow as tf

columns = [tf.feature_column.numeric_column("x")]


def make_input_fn(n_epochs=None):
    def input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[0], [1]]))
        return dataset.repeat(n_epochs).batch(2)
    return input_fn


train_input_fn = make_input_fn()
eval_input_fn = make_input_fn(1)
'''

DICT = HEAD + '''
estimators = {
    'linear': tf.estimator.LinearClassifier(columns),
    'dnn': tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=columns),
}
results = {}
for name, est in estimators.items():
    est.train(train_input_fn, steps=5)
    results[name] = est.evaluate(eval_input_fn)
predictions = list(estimators['dnn'].predict(eval_input_fn))
'''


def convert(rules, source: str):
    result = rewrite_source(source.encode(), "premade.py", rules)
    return result, result.new.decode() if result.new is not None else source


def test_a_dict_of_estimators_trained_in_a_loop_converts(rules):
    result, new = convert(rules, DICT)
    assert result.status == "converted", [f.format() for f in result.findings]
    # Each model is built above the dict and held under its key.
    assert "linear_model = LinearClassifierModel()\nlinear_model.compile(" in new
    assert "dnn_model = DNNClassifierModel()\ndnn_model.compile(" in new
    assert "estimators = {\n    'linear': linear_model,\n    'dnn': dnn_model,\n}" in new
    # The loop's variable and the subscript hold the models now: the calls keep them.
    assert "    est.fit(train_input_fn().map(est.preprocess), steps_per_epoch=5)\n" in new
    assert "    results[name] = est.evaluate(eval_input_fn().map(est.preprocess), return_dict=True)\n" in new
    assert "estimators['dnn'].predict(eval_input_fn().map(estimators['dnn'].preprocess))" in new
    assert "tf.estimator." not in new


def test_a_list_iterated_and_indexed_converts(rules):
    source = HEAD + '''
models = [tf.estimator.LinearRegressor(columns), tf.estimator.DNNRegressor([3], columns)]
for i, m in enumerate(models):
    m.train(train_input_fn, steps=2)
print(models[1].evaluate(eval_input_fn))
'''
    result, new = convert(rules, source)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "models = [model_0, model_1]" in new
    assert "    m.fit(train_input_fn().map(m.preprocess), steps_per_epoch=2)\n" in new
    assert "print(models[1].evaluate(eval_input_fn().map(models[1].preprocess), return_dict=True))" in new


def test_a_subscript_by_the_loop_key_is_any_of_them(rules):
    source = HEAD + '''
estimators = {'a': tf.estimator.LinearClassifier(columns), 'b': tf.estimator.LinearClassifier(columns)}
for name in estimators:
    estimators[name].train(train_input_fn, steps=2)
'''
    result, new = convert(rules, source)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "    estimators[name].fit(train_input_fn().map(estimators[name].preprocess), steps_per_epoch=2)\n" in new


def test_an_estimator_whose_method_is_called_on_it_converts(rules):
    source = HEAD + '''
tf.estimator.LinearClassifier(columns).train(train_input_fn, steps=3)
'''
    result, new = convert(rules, source)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert new.endswith("model.fit(train_input_fn().map(model.preprocess), steps_per_epoch=3)\n")
    assert "\nmodel = LinearClassifierModel()\nmodel.compile(" in new


@pytest.mark.parametrize("change, message", [
    ("run_all(estimators)\n",
     "`estimators` is passed to `run_all(...)`, which e2k does not follow its Estimators into"),
    ("print(estimators['missing'].evaluate(eval_input_fn))\n", "`estimators` has no Estimator under 'missing'"),
    ("estimators['c'] = tf.estimator.LinearClassifier(columns)\n",
     "`estimators` is changed or sliced here, which e2k does not follow"),
    ("print(estimators)\n", "`estimators` is passed to `print(...)`, which e2k does not follow its Estimators into"),
    ("est = None\nfor name, est in estimators.items():\n    pass\nest.evaluate(eval_input_fn)\n",
     "`est` here may also hold another value than an Estimator of `estimators`"),
])
def test_a_container_used_other_ways_is_refused_by_construct(rules, change, message):
    source = DICT + "\n\ndef run_all(x):\n    pass\n\n\n" + change
    result, new = convert(rules, source)
    assert result.status == "partial"
    messages = [f.message for f in result.findings if f.code == "E2K902"]
    assert message in messages, messages
    assert "tf.estimator.DNNClassifier" in new  # nothing of the container converted


@pytest.mark.parametrize("statement, message", [
    ("for est in [tf.estimator.LinearClassifier(columns)]:\n    est.train(train_input_fn, steps=1)\n",
     "the Estimators are built in the list the loop goes over: bind them to one name first (`estimators = "
     "{\"linear\": ..., \"dnn\": ...}`, then `for name, est in estimators.items():`), which e2k follows"),
    ("fit_all(tf.estimator.LinearClassifier(columns))\n",
     "the Estimator is passed straight to `fit_all(...)`: e2k follows an Estimator bound to a name (`estimator = "
     "...`) or returned, one held in a dict or list bound to a name (`estimators = {...}`), or one whose method "
     "is called on it"),
    ("pairs = {'a': tf.estimator.LinearClassifier(columns), 'b': 3}\n",
     "`pairs` holds other values than Estimators built in it, which e2k cannot convert together"),
    ("tf.estimator.LinearClassifier(columns).train(train_input_fn, steps=2).evaluate(eval_input_fn)\n",
     "the value of `.train(...)` (the Estimator itself) is used; Keras fit returns a History: call train as a "
     "statement, then use the Estimator"),
])
def test_estimators_in_expressions_e2k_cannot_follow_are_refused(rules, statement, message):
    result, new = convert(rules, HEAD + "\n\ndef fit_all(x):\n    pass\n\n\n" + statement)
    assert result.status == "partial"
    assert message in [f.message for f in result.findings], [f.format() for f in result.findings]


def test_estimators_of_a_container_needing_callbacks_each_are_refused(rules):
    source = DICT.replace("tf.estimator.LinearClassifier(columns)",
                          "tf.estimator.LinearClassifier(columns, model_dir='/tmp/linear')")
    result, _ = convert(rules, source)
    assert result.status == "partial"
    assert any("would each need their own callbacks or checkpoints" in f.message for f in result.findings), \
        [f.format() for f in result.findings]


@pytest.mark.slow
def test_parity_compares_the_first_model_and_counts_them(tmp_path):
    """The fixture trains three models (the dict's two through the loop, a baseline): parity
    compares the first each side trains, and a migration that trains fewer is broken."""
    from pathlib import Path

    from estimator2keras.parity import run_parity

    fixture = Path(__file__).parent.parent / "fixtures" / "estimators_in_a_dict_loop"
    after = (fixture / "after.py").read_text()
    result = run_parity(fixture / "before.py", fixture / "after.py", replicas=1)
    assert result.verdict == "parity", result.report()
    assert any("train 3 models each" in note for note in result.notes), result.notes
    dropped = after.replace("    'linear': linear_model,\n", "")
    assert dropped != after
    (tmp_path / "after.py").write_text(dropped)
    helpers_beside(fixture, tmp_path)
    result = run_parity(fixture / "before.py", tmp_path / "after.py", replicas=1)
    assert result.verdict == "broken", result.report()
    assert result.reason == "the legacy program trains 3 Estimators, the migrated one 2 Keras models"
