"""Labels a model_fn turns into class ids with a lookup table (Google's census custom
Estimator: `table = tf.contrib.lookup.index_table_from_tensor(label_values)`, then
`table.lookup(labels)`): the model's `preprocess` numbers them in tf.data as the table did,
so that the loss and the metrics compare the labels as they come and no string label reaches
the replicas; a table whose ids e2k cannot write exactly is refused, naming why."""
from __future__ import annotations

import numpy as np
import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat

PROGRAM = '''\
import numpy as np
import tensorflow as tf

LABELS = [" <=50K", " >50K"]
x = {{"a": np.arange(8, dtype=np.float32).reshape(4, 2)}}
y = np.array([[" <=50K"], [" >50K"], [" >50K"], [" <=50K"]])


def input_fn():
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(2)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features["a"], len(LABELS))
    label_values = tf.constant(LABELS)
    predicted_indices = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {{"classes": tf.gather(label_values, predicted_indices)}}
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    table = {table}
    label_indices = table.lookup(labels)
    label_indices_vector = tf.squeeze(label_indices, axis=[1])
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label_indices_vector))
    if mode == tf.estimator.ModeKeys.EVAL:
        metrics = {{"accuracy": tf.metrics.accuracy(label_indices, predicted_indices)}}
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn)
est.train(input_fn, steps=1)
print(est.evaluate(input_fn, steps=1)["accuracy"])
'''
CONTRIB = "tf.contrib.lookup.index_table_from_tensor(label_values)"


def convert(rules, table=CONTRIB):
    return rewrite_source(PROGRAM.format(table=table).encode(), "program.py", rules)


def manual(result):
    return [f.message for f in result.findings if f.code.startswith("E2K9")]


def test_contrib_label_table_is_the_models_label_preprocessing(rules):
    result = convert(rules)
    assert result.status == "converted", manual(result)
    new = flat(result.new.decode())
    assert "contrib" not in new and "table.lookup" not in new
    assert "self.label_lookup = tf.keras.layers.StringLookup(vocabulary=LABELS)" in new
    # preprocess numbers the labels (and passes the features on), mapped over every dataset.
    assert "def preprocess(self, features, labels=None):" in new
    assert "return features, self.label_lookup(labels) - 1" in new
    assert "model.fit(input_fn().map(model.preprocess)" in new
    assert "model.evaluate(input_fn().map(model.preprocess)" in new
    # The loss and the metric of the ids compare the labels as they come.
    assert "loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)" in new
    assert 'tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")' in new
    # The predictions map ids back to the strings, as the model_fn did.
    assert '"classes": tf.gather(label_values, predicted_indices)' in new


@pytest.mark.parametrize("table, expected", [
    ("tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(label_values, "
     "tf.range(len(LABELS), dtype=tf.int64)), default_value=-1)", "return features, self.label_lookup(labels) - 1"),
    ("tf.compat.v1.lookup.StaticHashTable(tf.compat.v1.lookup.KeyValueTensorInitializer(LABELS, [0, 1]), -1)",
     "return features, self.label_lookup(labels) - 1"),
    ("tf.lookup.StaticVocabularyTable(tf.lookup.KeyValueTensorInitializer(LABELS, "
     "tf.range(tf.size(label_values, out_type=tf.int64))), num_oov_buckets=1)",
     "ids = tf.where(ids < 0, len(LABELS) + self.label_oov(labels), ids)"),
    ("tf.contrib.lookup.index_table_from_tensor(tf.constant(LABELS), num_oov_buckets=1)",
     "self.label_oov = tf.keras.layers.Hashing(num_bins=1)"),
    ("tf.contrib.lookup.index_table_from_tensor(label_values, default_value=0)",
     "return features, tf.where(ids < 0, tf.constant(0, ids.dtype), ids)"),
])
def test_tf2_and_compat_spellings_of_the_table(rules, table, expected):
    result = convert(rules, table)
    assert result.status == "converted", manual(result)
    assert expected in flat(result.new.decode())


@pytest.mark.parametrize("table, reason", [
    # Ids other than the keys' positions.
    ("tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(LABELS, [1, 0]), -1)",
     "ids other than their positions"),
    ("tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(LABELS, tf.range(3)), -1)",
     "ids other than their positions"),
    # A hasher e2k does not know the buckets of.
    ("tf.contrib.lookup.index_table_from_tensor(label_values, num_oov_buckets=2, hasher_spec=spec)",
     "with a hasher"),
    # Keys the model's __init__ could not read.
    ("tf.contrib.lookup.index_table_from_tensor(tf.constant([str(v) for v in range(2)]))",
     "not a list of strings or a module constant"),
    ("tf.contrib.lookup.index_table_from_tensor(label_values, default_value=mode_default)",
     "default_value is not an integer literal"),
])
def test_a_table_whose_ids_e2k_cannot_write_is_refused(rules, table, reason):
    result = convert(rules, table)
    assert result.status != "converted", flat(result.new.decode())
    assert any(reason in m for m in manual(result)), manual(result)


def _model(new: str):
    namespace: dict = {}
    model_class = "class Model" + new.split("class Model", 1)[1].split("\ndef build_model")[0]
    exec(compile('import tensorflow as tf\nLABELS = [" <=50K", " >50K"]\n' + model_class, "converted.py", "exec"),
         namespace)
    return namespace["Model"]()


@pytest.mark.parametrize("buckets", [0, 3])
def test_the_preprocessed_labels_are_the_ids_tf1s_table_gave(rules, buckets):
    import tensorflow as tf
    from tensorflow.python.ops import lookup_ops  # TF1's index_table_from_tensor (tf.contrib.lookup's)

    table = f"tf.contrib.lookup.index_table_from_tensor(label_values, num_oov_buckets={buckets})"
    result = convert(rules, table)
    assert result.status == "converted", manual(result)
    model = _model(result.new.decode())
    labels = np.array([[" >50K"], [" <=50K"], ["<=50K"], [""], [" >50K."], ["unknown"]])
    _, ours = model.preprocess({"a": np.zeros((6, 2), np.float32)}, tf.constant(labels))
    with tf.Graph().as_default():
        theirs = lookup_ops.index_table_from_tensor(tf.constant([" <=50K", " >50K"]), num_oov_buckets=buckets)
        ids = theirs.lookup(tf.constant(labels))
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.tables_initializer())
            expected = session.run(ids)
    np.testing.assert_array_equal(ours.numpy(), expected)
    assert ours.shape == (6, 1)
    if buckets == 0:  # known labels their positions, any other -1
        np.testing.assert_array_equal(expected[:, 0], [1, 0, -1, -1, -1, -1])


def test_the_auc_of_the_ids_one_hot_code_is_the_auc_of_the_numbered_labels(rules):
    """The census custom Estimator's `auroc`: tf.metrics.auc of `tf.one_hot(label_indices_vector,
    depth, True, False, tf.bool)` and the classes' probabilities, the one-hot code of the ids the
    table gave, which preprocess gives as the labels."""
    source = PROGRAM.format(table=CONTRIB).replace(
        '        metrics = {"accuracy": tf.metrics.accuracy(label_indices, predicted_indices)}',
        "        labels_one_hot = tf.one_hot(\n"
        "            label_indices_vector, depth=label_values.shape[0], on_value=True, off_value=False, dtype=tf.bool)\n"
        '        metrics = {"auroc": tf.metrics.auc(labels_one_hot, tf.nn.softmax(logits))}')
    assert "labels_one_hot" in source
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings if f.kind == "manual"]
    assert 'AUCOfOneHotSoftmax(name="auroc")' in flat(result.new.decode())
