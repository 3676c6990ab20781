"""An input_fn a factory returns repeats as many times as the factory call says (TensorFlow's
linear-model tutorial: ``make_input_fn(df, y, num_epochs=10)`` then ``est.train(train_input_fn)``
without steps): a literal count there, or the parameter's literal default, is a finite dataset."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf


def make_input_fn(x, y, num_epochs=10, batch_size=2):
    def input_function():
        ds = tf.data.Dataset.from_tensor_slices(({"a": x}, y))
        return ds.batch(batch_size).repeat(num_epochs)
    return input_function


train_input_fn = make_input_fn([1.0, 2.0], [0.0, 1.0]{epochs})
est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("a")])
est.train(train_input_fn)
'''


@pytest.mark.parametrize("epochs, finite", [
    ("", True),  # the default, 10
    (", num_epochs=3", True),
    (", 3", True),
    (", num_epochs=None", False),  # repeats forever: the Estimator needed steps
])
def test_a_factory_count_makes_the_dataset_finite(rules, epochs, finite):
    result = rewrite_source(PROGRAM.replace("{epochs}", epochs).encode(), "tutorial.py", rules)
    if finite:
        assert result.status == "converted", [f.format() for f in result.findings]
        assert "model.fit(train_input_fn().map(model.preprocess))" in result.new.decode()
    else:
        assert any(f.code == "E2K003" and "repeats forever" in f.message for f in result.findings)
