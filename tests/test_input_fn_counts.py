"""A repeat count read through the call that gives it: `lambda: input_fn(data, num_epochs=2)`
makes `repeat(num_epochs)` finite, so train() without steps converts (fit reads the epochs)."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet

PROGRAM = '''\
import numpy as np
import tensorflow.compat.v1 as tf


def input_fn(data, batch_size, num_epochs=None):
    x, y = data
    return tf.data.Dataset.from_tensor_slices(({"a": x}, y)).repeat(num_epochs).batch(batch_size)


def main():
    data = (np.zeros(16, np.float32), np.zeros(16, np.int64))
    columns = [tf.feature_column.numeric_column("a")]
    estimator = tf.estimator.LinearClassifier(feature_columns=columns)
    estimator.train(lambda: input_fn(data, 4, {count}))
'''


def rewrite(count: str):
    return rewrite_source(PROGRAM.replace("{count}", count).encode(), "program.py", RuleSet.load((), (), ()))


def test_a_count_the_call_gives_is_finite():
    result = rewrite("num_epochs=2")
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "model.fit(input_fn(data, 4, num_epochs=2).map(model.preprocess))" in result.new.decode()


def test_the_default_count_repeats_forever():
    result = rewrite("num_epochs=None")
    assert result.status == "partial"
    assert any("repeats forever" in f.message for f in result.findings)
