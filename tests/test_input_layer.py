"""`tf.feature_column.input_layer` in a model_fn: TensorFlow 2 has no such function, so left in
the Keras model it failed at the first step of a "converted" program. Of numeric columns it
is written by an emitted function; anything else is refused, naming the column."""
from __future__ import annotations

import textwrap

import pytest

from estimator2keras import _helpers
from estimator2keras._engine import rewrite_source
from conftest import flat

PROGRAM = '''\
import numpy as np
import tensorflow.compat.v1 as tf

x = {{"b": np.arange(4, dtype=np.float32), "a": np.arange(8, dtype=np.float32).reshape(4, 2)}}
y = np.array([0, 1, 0, 1], np.int32)


def input_fn():
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(2)


def model_fn(features, labels, mode, params):
    net = tf.feature_column.input_layer(features, {columns})
    logits = tf.layers.dense(net, 2)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


{definitions}
est = tf.estimator.Estimator(model_fn, params={{"feature_columns": cols, "other": 1}})
est.train(input_fn, steps=1)
'''
NUMERIC = '''\
cols = [tf.feature_column.numeric_column("b", normalizer_fn=lambda v: v * 2.0),
        tf.feature_column.numeric_column("a", shape=(2,))]'''


def convert(rules, columns="params['feature_columns']", definitions=NUMERIC):
    source = PROGRAM.format(columns=columns, definitions=textwrap.dedent(definitions))
    return rewrite_source(source.encode(), "program.py", rules)


def manual(result) -> list[str]:
    return [f"{f.code} {f.message}" for f in result.findings if f.kind == "manual"]


def test_input_layer_of_numeric_columns_is_written_out(rules):
    result = convert(rules)
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "feature_column.input_layer(" not in new
    assert "net = numeric_input_layer(features, self.params['feature_columns'])" in new
    assert "from e2k_helpers import numeric_input_layer" in new and "numeric_input_layer" in result.helpers


def test_the_written_function_computes_what_tf1_input_layer_did(rules):
    import numpy as np
    import tensorflow as tf

    result = convert(rules)
    new = _helpers.inline(result.new.decode(), result.helpers)  # the function, beside the model
    namespace: dict = {}
    exec(compile(new.split("\nx = ")[0], "converted.py", "exec"), namespace)
    features = {"b": np.array([1.0, 2.0], np.float32), "a": np.array([[3.0, 4.0], [5.0, 6.0]], np.float32)}
    columns = [tf.feature_column.numeric_column("b", normalizer_fn=lambda v: v * 2.0),
               tf.feature_column.numeric_column("a", shape=(2,))]
    ours = namespace["numeric_input_layer"](features, columns).numpy()
    with tf.Graph().as_default():
        theirs = tf.compat.v1.feature_column.input_layer(features, columns)
        with tf.compat.v1.Session() as session:
            expected = session.run(theirs)
    np.testing.assert_array_equal(ours, expected)  # sorted by name: a's two values, then b doubled
    np.testing.assert_array_equal(ours, [[3.0, 4.0, 2.0], [5.0, 6.0, 4.0]])


def test_columns_given_directly_are_read_too(rules):
    result = convert(rules, columns="cols")
    assert result.status == "converted", manual(result)
    assert "numeric_input_layer(features, cols)" in flat(result.new.decode())


@pytest.mark.parametrize("columns, definitions, reason", [
    # An embedding's variables would be made by the TF1 function, inside a Keras model that
    # does not track them.
    ("params['feature_columns']", '''\
cols = [tf.feature_column.embedding_column(
    tf.feature_column.categorical_column_with_identity("b", 4), 2)]''', "embedding_column"),
    ("params['missing']", NUMERIC, "params['missing']"),
    ("params['feature_columns'] + extra()", NUMERIC, "columns of this input_layer"),
])
def test_input_layer_e2k_cannot_write_is_refused(rules, columns, definitions, reason):
    result = convert(rules, columns, definitions)
    assert result.status == "partial", flat(result.new.decode())
    assert any(reason in m for m in manual(result)), manual(result)
    assert "tf.estimator.Estimator(model_fn" in flat(result.new.decode())


def test_other_feature_column_functions_in_a_model_fn_are_refused(rules):
    source = PROGRAM.format(columns="params['feature_columns']", definitions=NUMERIC).replace(
        "net = tf.feature_column.input_layer(features, params['feature_columns'])",
        "net = tf.feature_column.linear_model(features, params['feature_columns'])")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "partial"
    assert any("linear_model" in m for m in manual(result)), manual(result)
