"""TensorFlow 2 has no tf.contrib: in a file e2k converts, the contrib names TensorFlow moved
into TF2 get their new names wherever they are, and any other contrib reference left is
reported (E2K905): the file is never "converted" with code that fails on TensorFlow 2."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow.compat.v1 as tf
from tensorflow.contrib import cluster_resolver as contrib_cluster_resolver

AUTOTUNE = tf.contrib.data.AUTOTUNE


def input_fn():
    dataset = tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 8}, [[2.0]] * 8)).batch(2)
    return dataset.prefetch(AUTOTUNE)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features["x"], 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def resolver(name):
    return contrib_cluster_resolver.TPUClusterResolver(name)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=1)
'''


def test_contrib_names_with_a_tf2_home_are_respelled_everywhere(rules):
    result = rewrite_source(PROGRAM.encode(), "program.py", rules)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "dataset.prefetch(tf.data.AUTOTUNE)" in new  # the module's alias of it is inlined, as for any TF name
    assert "return tf.distribute.cluster_resolver.TPUClusterResolver(name)" in new
    assert "contrib" not in new, new  # the import went with its last use


def test_a_contrib_name_without_one_is_reported_not_converted(rules):
    source = PROGRAM.replace("return contrib_cluster_resolver.TPUClusterResolver(name)",
                             "return tf.contrib.layers.sparse_column_with_keys(name, ['a'])")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "partial"
    left = [f for f in result.findings if f.code == "E2K905"]
    assert len(left) == 1 and "TensorFlow 2 has no tf.contrib" in left[0].message, left
    assert "contrib.layers.sparse_column_with_keys" in left[0].message
    assert left[0].line == source.splitlines().index("    return tf.contrib.layers.sparse_column_with_keys(name, ['a'])") + 1


def test_a_file_without_estimator_code_keeps_its_contrib_unreported(rules):
    source = "import tensorflow as tf\n\ntable = tf.contrib.lookup.index_table_from_tensor(['a'])\n"
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "unchanged" and not result.findings


def test_a_tpu_config_bound_to_a_name_goes_with_its_run_config(rules):
    source = '''\
import tensorflow as tf


def input_fn(params):
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 64}, [[2.0]] * 64)).repeat().batch(
        params["batch_size"], drop_remainder=True)


def model_fn(features, labels, mode, params):
    logits = tf.layers.dense(features["x"], 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.contrib.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


resolver = tf.contrib.cluster_resolver.TPUClusterResolver("my-tpu")
tpu_config = tf.contrib.tpu.TPUConfig(iterations_per_loop=100, num_shards=8)
config = tf.contrib.tpu.RunConfig(cluster=resolver, model_dir="/tmp/tpu", tpu_config=tpu_config)
estimator = tf.contrib.tpu.TPUEstimator(model_fn, config=config, use_tpu=True, train_batch_size=64)
estimator.train(input_fn, max_steps=10)
'''
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "TPUConfig" not in new and "tpu_config" not in new and "contrib" not in new, new
    assert 'resolver = tf.distribute.cluster_resolver.TPUClusterResolver("my-tpu")' in new


def test_a_contrib_name_with_a_tf2_home_in_the_model_fn_converts(rules):
    """tester4: `contrib_framework.nest.flatten(features)` in a model_fn refused the model_fn
    as tf.contrib without a rule, while the same call elsewhere became tf.nest.flatten."""
    source = PROGRAM.replace(
        'logits = tf.layers.dense(features["x"], 1)',
        'logits = tf.layers.dense(contrib_framework.nest.flatten(features)[0], 1)').replace(
        "from tensorflow.contrib import cluster_resolver as contrib_cluster_resolver\n",
        "from tensorflow.contrib import cluster_resolver as contrib_cluster_resolver\n"
        "from tensorflow.contrib import framework as contrib_framework\n")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings if f.kind == "manual"]
    assert "self.logits(tf.nest.flatten(features)[0])" in result.new.decode()


def test_contrib_left_is_reported_in_a_file_left_partial_for_another_reason(rules):
    """tester4: a partial file named only its other blocker; its tf.contrib call stayed unmentioned."""
    source = PROGRAM.replace("return contrib_cluster_resolver.TPUClusterResolver(name)",
                             "return tf.contrib.layers.sparse_column_with_keys(name, ['a'])").replace(
        "estimator.train(input_fn, steps=1)", "estimator.train(input_fn, steps=1)\nprint(estimator.get_variable_names())")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "partial"
    assert any(f.code == "E2K905" and "contrib.layers.sparse_column_with_keys" in f.message for f in result.findings), \
        [f.format() for f in result.findings]


LOOKUP = PROGRAM.replace("def resolver(name):\n    return contrib_cluster_resolver.TPUClusterResolver(name)", """\
LABELS = ["no", "yes"]


def label_ids(label):
    return tf.contrib.lookup.index_table_from_tensor(tf.constant(LABELS)).lookup(label)


def hashed_ids(words):
    return tf.contrib.lookup.index_table_from_tensor(["a", "b"], num_oov_buckets=3).lookup(words)


def label_names(ids):
    return tf.contrib.lookup.index_to_string_table_from_tensor(LABELS).lookup(ids)""")


def _tf2_functions(new: str) -> dict:
    import tensorflow as tf

    names = {}
    exec(compile(new.split("\nestimator =")[0].split("\nmodel =")[0], "converted", "exec"), names)
    assert names["tf"] is tf
    return names


def test_contrib_lookup_tables_become_the_tf2_tables_they_built(rules):
    """TF1's index_table_from_tensor (TensorFlow 2.15 keeps its implementation in lookup_ops,
    which tf.contrib.lookup exported) and the TF2 table e2k writes give the same ids, with
    hashed out-of-vocabulary buckets too, and the reverse table the same strings."""
    from tensorflow.python.ops import lookup_ops

    result = rewrite_source(LOOKUP.encode(), "program.py", rules)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "contrib" not in new, new
    assert "tf.lookup.StaticHashTable(" in new and "tf.lookup.StaticVocabularyTable(" in new
    converted = _tf2_functions(new)
    import tensorflow as tf

    words = tf.constant(["no", "yes", "maybe", "", "a", "b", "c", "zebra"])
    assert converted["label_ids"](words).numpy().tolist() == \
        lookup_ops.index_table_from_tensor(["no", "yes"]).lookup(words).numpy().tolist() == [0, 1, -1, -1, -1, -1, -1, -1]
    assert converted["hashed_ids"](words).numpy().tolist() == \
        lookup_ops.index_table_from_tensor(["a", "b"], num_oov_buckets=3).lookup(words).numpy().tolist()
    ids = tf.constant([0, 1, 2, -1], tf.int64)
    assert converted["label_names"](ids).numpy().tolist() == \
        lookup_ops.index_to_string_table_from_tensor(["no", "yes"]).lookup(ids).numpy().tolist()


def test_a_contrib_lookup_table_with_its_own_hasher_is_left_and_reported(rules):
    source = LOOKUP.replace("num_oov_buckets=3)", "num_oov_buckets=3, hasher_spec=HASHER)")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "partial"
    left = [f for f in result.findings if f.code == "E2K905"]
    assert len(left) == 1 and "index_table_from_tensor" in left[0].message, left


def test_the_global_step_from_tf_contrib_framework_is_the_global_step(rules):
    """Google's census custom Estimator makes `global_step = tf.contrib.framework.get_or_create_global_step()`
    (the same function as tf.train's) before its loss: the model_fn converts as with tf.train's."""
    source = PROGRAM.replace(
        "    loss = tf.losses.mean_squared_error(labels, logits)\n"
        "    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())",
        "    global_step = tf.contrib.framework.get_or_create_global_step()\n"
        "    loss = tf.losses.mean_squared_error(labels, logits)\n"
        "    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)")
    assert "tf.contrib.framework" in source
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "global_step" not in new and "contrib" not in new, new
