"""`tf.feature_column.input_layer` in a model_fn: TensorFlow 2 has no such function, so left in
the Keras model it failed at the first step of a "converted" program. Of numeric columns it
is written by an emitted function; of categorical ones (indicator and embedding columns) it
is the model's `preprocess`, mapped over the datasets, and its `input_layer` method, as a
canned DNN's columns are written; anything else is refused, naming the column."""
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
    # TF1's input_layer refused a categorical column that no indicator or embedding wraps.
    ("params['feature_columns']", '''\
cols = [tf.feature_column.categorical_column_with_identity("b", 4)]''', "identity column cannot feed"),
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


CATEGORICAL = '''\
CITIES = ["paris", "rome"]
city = tf.feature_column.categorical_column_with_vocabulary_list("c", CITIES, num_oov_buckets=1)
cols = [tf.feature_column.numeric_column("b"),
        tf.feature_column.indicator_column(city),
        tf.feature_column.embedding_column(tf.feature_column.categorical_column_with_identity("i", 4), 3)]'''
NUMERIC_DATA = 'x = {"b": np.arange(4, dtype=np.float32), "a": np.arange(8, dtype=np.float32).reshape(4, 2)}'
CATEGORICAL_DATA = 'x = {"b": np.arange(4, dtype=np.float32), "c": np.array(["rome", "", "oslo", "paris"]), ' \
                   '"i": np.array([0, 3, 1, 2])}'


def convert_categorical(rules, change=None):
    source = PROGRAM.format(columns="params['feature_columns']", definitions=CATEGORICAL)
    source = source.replace(NUMERIC_DATA, CATEGORICAL_DATA)
    if change is not None:
        source = change(source)
    return rewrite_source(source.encode(), "program.py", rules)


def test_input_layer_of_categorical_columns_is_the_models_preprocessing(rules):
    result = convert_categorical(rules)
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "feature_column.input_layer(" not in new and "numeric_input_layer" not in new
    # The lookups: made in __init__, run in preprocess, which every dataset fed to the model goes through.
    assert "self.city_lookup = tf.keras.layers.StringLookup(vocabulary=CITIES)" in new
    assert "self.city_oov = tf.keras.layers.Hashing(num_bins=1)" in new
    assert "def preprocess(self, features, labels=None):" in new
    assert "return inputs if labels is None else (inputs, labels)" in new
    assert "est.fit(input_fn().map(est.preprocess)" in new or "model.fit(input_fn().map(model.preprocess)" in new
    # The embedding as the canned conversion writes it: a Dense of one-hot ids, TF1's initializer.
    assert "tf.keras.layers.Dense(3, use_bias=False, kernel_initializer=tf.keras.initializers.TruncatedNormal(" \
           "stddev=3 ** -0.5))" in new
    # The dense input, sorted by the columns' names (b, c_indicator, i_embedding), ids cast back.
    assert "net = self.input_layer(features)" in new
    assert 'city = tf.cast(features["city"], tf.int64)' in new
    assert "return tf.concat([b, tf.one_hot(city, len(CITIES) + 1), self.i_embedding(tf.one_hot(i, 4))], " \
           "axis=1)" in new


def test_the_preprocessing_and_input_layer_compute_what_tf1_input_layer_did(rules):
    import numpy as np
    import tensorflow as tf

    new = convert_categorical(rules).new.decode()
    namespace: dict = {}
    model_class = "class Model" + new.split("class Model", 1)[1].split("\ndef build_model")[0]
    exec(compile("import tensorflow as tf\nCITIES = ['paris', 'rome']\n" + model_class, "converted.py", "exec"),
         namespace)
    model = namespace["Model"]({"feature_columns": None})
    features = {"b": np.array([1.0, 2.0, 3.0, 4.0], np.float32), "c": np.array(["rome", "", "oslo", "paris"]),
                "i": np.array([0, 3, 1, 2])}
    ours = model.input_layer(model.preprocess(features)).numpy()
    table = model.i_embedding.kernel.numpy()  # the same table on both sides
    fc = tf.compat.v1.feature_column
    columns = [fc.numeric_column("b"),
               fc.indicator_column(fc.categorical_column_with_vocabulary_list("c", ["paris", "rome"], num_oov_buckets=1)),
               fc.embedding_column(fc.categorical_column_with_identity("i", 4), 3,
                                   initializer=tf.compat.v1.constant_initializer(table))]
    with tf.Graph().as_default():
        theirs = fc.input_layer(features, columns)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.tables_initializer())
            expected = session.run(theirs)
    np.testing.assert_allclose(ours, expected, rtol=1e-6)
    # "" has no id (a zero row); "oslo" is in the out-of-vocabulary bucket (id 2).
    np.testing.assert_array_equal(ours[:, 1:4], [[0, 1, 0], [0, 0, 0], [0, 0, 1], [1, 0, 0]])


def test_features_read_by_key_besides_input_layer_are_passed_on(rules):
    result = convert_categorical(rules, lambda source: source.replace(
        "    logits = tf.layers.dense(net, 2)", '    logits = tf.layers.dense(net, 2) + features["b"][:, None]'))
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    # The raw feature under its key; the column's input (also "b" in TF1) under another name.
    assert '"b": features["b"]' in new and '"b_2": b_2' in new
    assert 'return self.dense(net) + features["b"][:, None]' in new


@pytest.mark.parametrize("change, reason", [
    # The features handed whole to something else, which would read the preprocessed dict.
    (lambda s: s.replace("    logits = tf.layers.dense(net, 2)", "    logits = tf.layers.dense(net, 2) + helper(features)"),
     "`features` is read here besides `input_layer`"),
    # A second input_layer (of the same columns here).
    (lambda s: s.replace(
        "    logits = tf.layers.dense(net, 2)",
        "    net = tf.concat([net, tf.feature_column.input_layer(features, params['feature_columns'])], 1)\n"
        "    logits = tf.layers.dense(net, 2)"), "second"),
])
def test_input_layer_of_categorical_columns_e2k_cannot_write_is_refused(rules, change, reason):
    result = convert_categorical(rules, change)
    assert result.status == "partial", flat(result.new.decode())
    assert any(reason in m for m in manual(result)), manual(result)


FACTORY = '''\
import numpy as np
import tensorflow.compat.v1 as tf

x = {"age": np.array([20.0, 35.0, 50.0, 70.0], np.float32), "job": np.array(["a", "b", "c", ""]),
     "city": np.array(["paris", "rome", "oslo", "rome"])}
y = np.array([0, 1, 0, 1], np.int32)
CITIES = ["paris", "rome"]
INPUT_COLUMNS = [
    tf.feature_column.categorical_column_with_vocabulary_list("city", CITIES),
    tf.feature_column.categorical_column_with_hash_bucket("job", hash_bucket_size=20),
    tf.feature_column.numeric_column("age"),
]


def input_fn():
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(2)


def hashed(size):
    return tf.feature_column.categorical_column_with_hash_bucket("job", hash_bucket_size=size)


def make_model_fn(buckets, boundaries, embedding_size=8, hidden_units=(4,)):
    def _model_fn(mode, features, labels):
        (city, job, age) = INPUT_COLUMNS
        columns = [
            tf.feature_column.indicator_column(city),
            tf.feature_column.embedding_column(job, dimension=embedding_size),
            tf.feature_column.indicator_column(hashed(buckets)),
            tf.feature_column.bucketized_column(age, boundaries=boundaries),
        ]
        net = tf.feature_column.input_layer(features, columns)
        for units in hidden_units:
            net = tf.layers.dense(net, units)
        logits = tf.layers.dense(net, 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    return _model_fn


def main(argv):
    est = tf.estimator.Estimator(make_model_fn(int(argv[1]), [30.0, 60.0], embedding_size=int(argv[2])))
    est.train(input_fn, steps=1)
'''


def convert_factory(rules, change=None):
    source = FACTORY if change is None else change(FACTORY)
    return rewrite_source(source.encode(), "program.py", rules)


def test_columns_arguments_from_a_model_fn_factory_are_the_models_arguments(rules):
    # The factory's parameters (an embedding's dimension, a hash bucket count through a helper,
    # bucket boundaries) were refused, or written as names the model never defined: the model
    # takes them as the layers' units are taken, in __init__ as they are, elsewhere `self.<name>`.
    result = convert_factory(rules)
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "def __init__(self, buckets, boundaries, embedding_size, hidden_units):" in new
    assert "self.buckets = buckets" in new and "self.embedding_size" not in new
    assert "tf.keras.layers.Dense(embedding_size, use_bias=False, kernel_initializer=" \
           "tf.keras.initializers.TruncatedNormal(stddev=embedding_size ** -0.5))" in new
    assert "tf.keras.layers.Hashing(num_bins=buckets)" in new
    assert "tf.keras.layers.Discretization(bin_boundaries=boundaries)" in new
    assert "tf.one_hot(job_2, self.buckets)" in new
    assert "tf.one_hot(age_bucketized, self.age_bucketized_size)" in new
    # The model_fn's parameters are bound by name, as the Estimator did: `(mode, features, labels)`.
    assert "net = self.input_layer(features)" in new
    assert "(buckets=int(argv[1]), boundaries=[30.0, 60.0], embedding_size=int(argv[2]), hidden_units=(4,))" in new


def test_a_factorys_arguments_size_the_converted_columns(rules):
    import numpy as np

    new = convert_factory(rules).new.decode()
    model_class = "class Model" + new.split("class Model", 1)[1].split("\ndef build_")[0]
    namespace: dict = {}
    exec(compile("import tensorflow as tf\nCITIES = ['paris', 'rome']\n" + model_class, "converted.py", "exec"),
         namespace)
    features = {"age": np.array([20.0, 35.0, 70.0], np.float32), "job": np.array(["a", "b", ""]),
                "city": np.array(["paris", "oslo", "rome"])}
    for buckets, boundaries, dimension in ((5, [30.0], 3), (7, [30.0, 60.0], 2)):
        model = namespace["Model"](buckets, boundaries, dimension, (4,))
        dense = model.input_layer(model.preprocess(features)).numpy()
        # age buckets, city one-hot, job embedded, job one-hot of `buckets` ids.
        assert dense.shape == (3, len(boundaries) + 1 + 2 + dimension + buckets)
        assert model.job_embedding.kernel.shape == (20, dimension)


@pytest.mark.parametrize("change, reason", [
    # The parameter rebound in the model_fn: the columns would read another value than the model's.
    (lambda s: s.replace("        (city, job, age) = INPUT_COLUMNS\n",
                         "        (city, job, age) = INPUT_COLUMNS\n        embedding_size = 2 * embedding_size\n"),
     "embedding_size"),
])
def test_a_factorys_parameter_rebound_for_the_columns_is_refused(rules, change, reason):
    result = convert_factory(rules, change)
    assert result.status == "partial", flat(result.new.decode())
    assert any(reason in m for m in manual(result)), manual(result)
