"""input_fns made by functions of the program (issue 12): a name bound to a call of a function
whose one ``return`` is ``numpy_input_fn(...)`` / ``pandas_input_fn(...)``, a function that
returns such a call (a wrapper), and a wrapper of a factory returning its nested ``def
input_fn``. The calls bind the functions' parameters, so the conversion reads the values the
Estimator's input_fn was made with (``num_epochs=1`` for the evaluation: a finite dataset)."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat

MNIST = '''\
import tensorflow as tf

train_x, train_y, test_x, test_y = [[1.0]], [0], [[1.0]], [0]


def read_mnist(X, y, num_epochs=None, batch_size=550, shuffle=False):
    return tf.estimator.inputs.numpy_input_fn(x={'image_data': X}, y=y, num_epochs=num_epochs,
                                              batch_size=batch_size, shuffle=shuffle)


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features['image_data'], 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


train_input_fn = read_mnist(train_x, train_y, num_epochs=None, batch_size=32, shuffle=True)
eval_input_fn = read_mnist(test_x, test_y, num_epochs={eval_epochs}, batch_size=32)
{extra}

def train_and_evaluate(output_dir):
    estimator = tf.estimator.Estimator(model_fn, model_dir=output_dir)
    train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn, max_steps=100)
    eval_spec = tf.estimator.EvalSpec(input_fn=eval_input_fn, steps=None)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
'''


def mnist(eval_epochs: str, extra: str = "") -> str:
    return MNIST.replace("{eval_epochs}", eval_epochs).replace("{extra}", extra)


def convert(rules, source: str):
    return rewrite_source(source.encode(), "task.py", rules)


def test_a_named_call_of_a_numpy_input_fn_helper_converts(rules):
    result = convert(rules, mnist("1"))
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    # The helper returns the dataset, with the caller's shuffle, epochs and batch size.
    assert ("def read_mnist(X, y, num_epochs=None, batch_size=550, shuffle=False):\n"
            "    dataset = tf.data.Dataset.from_tensor_slices(({'image_data': X}, y))\n"
            "    if shuffle:\n"
            "        dataset = dataset.shuffle(1000)\n"
            "    return dataset.repeat(num_epochs).batch(batch_size)\n") in new
    # The names keep what the calls give (now the datasets), read by fit and evaluate.
    assert "train_input_fn = read_mnist(train_x, train_y, num_epochs=None, batch_size=32, shuffle=True)" in new
    assert "model.fit(train_input_fn, steps_per_epoch=steps_left" in new
    assert "model.evaluate(eval_input_fn" in new
    assert "estimator" not in new.replace("tf.estimator.inputs", "")


@pytest.mark.parametrize("epochs, steps", [("1", ""), ("None", ", steps=100")])
def test_the_evaluation_epochs_are_read_through_the_call(rules, epochs, steps):
    """``num_epochs=num_epochs`` in the helper is what the call gives: one epoch is a finite
    dataset; ``None`` repeats forever, and an EvalSpec without ``steps`` evaluated 100 steps."""
    source = mnist(epochs).replace("eval_spec = tf.estimator.EvalSpec(input_fn=eval_input_fn, steps=None)",
                                   "eval_spec = tf.estimator.EvalSpec(input_fn=eval_input_fn)")
    result = convert(rules, source)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert f"model.evaluate(eval_input_fn{steps}, callbacks=" in flat(result.new.decode())


def test_a_helper_also_called_elsewhere_is_refused_by_name(rules):
    extra = "raw_batches = read_mnist(train_x, train_y, batch_size=4)\n"
    result = convert(rules, mnist("1", extra))
    assert result.status == "partial"
    messages = [f.message for f in result.findings if f.code == "E2K006"]
    assert messages == ["`read_mnist` is called outside this Estimator's calls, which still need the input_fn it returns"]


def test_a_named_input_fn_read_elsewhere_is_refused_by_name(rules):
    extra = "print(train_input_fn)\n"
    result = convert(rules, mnist("1", extra))
    assert result.status == "partial"
    messages = [f.message for f in result.findings if f.code == "E2K006"]
    assert messages == ["`train_input_fn` is read outside this Estimator's calls, which still need the input_fn it holds"]


WRAPPED = '''\
import tensorflow as tf
import pandas as pd

train_df = pd.DataFrame({"age": [1.0, 2.0]})
train_label = pd.Series([0, 1])


def df_input_fn(df, labels, epochs=None, shuffle=True, batch_size=10):
    return tf.compat.v1.estimator.inputs.pandas_input_fn(
        x=df, y=labels, batch_size=batch_size, num_epochs=epochs, shuffle=shuffle)


def training_input(batch_size):
    return df_input_fn(train_df, train_label, shuffle=False, batch_size=batch_size)


def make_predict_input_fn(df, batch_size=5):
    def input_fn():
        return tf.data.Dataset.from_tensor_slices(dict(df)).batch(batch_size)
    return input_fn


def predict_input(df):
    return make_predict_input_fn(df, batch_size=4)


classifier = tf.estimator.LinearClassifier([tf.feature_column.numeric_column("age")])
classifier.train(input_fn=training_input(10), steps=6)
print(classifier.evaluate(input_fn=df_input_fn(train_df, train_label, epochs=1, shuffle=False)))
for prediction in classifier.predict(input_fn=predict_input(train_df)):
    print(prediction["class_ids"])
'''


def test_pandas_input_fn_and_a_factory_through_wrappers(rules):
    result = convert(rules, WRAPPED)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert ("    dataset = tf.data.Dataset.from_tensor_slices((dict(df), labels))\n"
            "    if shuffle:\n"
            "        dataset = dataset.shuffle(1000)\n"
            "    return dataset.repeat(epochs).batch(batch_size)\n") in new
    # The wrapper is unchanged: it returns what df_input_fn returns, the dataset now.
    assert "def training_input(batch_size):\n    return df_input_fn(train_df, train_label, shuffle=False" in new
    assert "model.fit(training_input(10).map(model.preprocess), steps_per_epoch=6)" in new
    # The nested input_fn is called through both functions, as the Estimator called it.
    assert "model.predict(predict_input(train_df)().map(model.preprocess))" in new


@pytest.mark.parametrize("repeat, finite", [("1", True), ("None", False)])
def test_a_factory_through_a_wrapper_binds_its_repeat_count(rules, repeat, finite):
    source = '''\
import tensorflow as tf


def make_input_fn(x, y, num_epochs=10):
    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"a": x}, y)).batch(2).repeat(num_epochs)
    return input_fn


def eval_input(epochs):
    return make_input_fn([1.0, 2.0], [0.0, 1.0], num_epochs=epochs)


est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("a")])
est.train(make_input_fn([1.0], [1.0]))
for p in est.predict(eval_input(%s)):
    print(p)
''' % repeat
    result = convert(rules, source)
    if finite:
        assert result.status == "converted", [f.format() for f in result.findings]
        assert "model.predict(eval_input(1)().map(model.preprocess))" in flat(result.new.decode())
    else:
        assert any(f.code == "E2K003" and "may repeat forever" in f.message for f in result.findings), \
            [f.format() for f in result.findings]


def test_a_decorated_helper_returning_numpy_input_fn_is_not_followed(rules):
    source = mnist("1").replace(
        "def read_mnist(", "@functools.lru_cache()\ndef read_mnist(").replace("import tensorflow", "import functools\nimport tensorflow")
    result = convert(rules, source)
    assert result.status == "partial"
    assert any(f.code == "E2K002" for f in result.findings)
