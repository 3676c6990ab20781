from __future__ import annotations

from estimator2keras._imports import compat_alias
from estimator2keras._rule import Case, Safety, UnitRule


class TfCompatV1FileToTf2(UnitRule):
    """In a converted file, `import tensorflow.compat.v1 as tf` becomes `import tensorflow as tf`, and `disable_v2_behavior()` goes.

    ## What it does
    Once a file's Estimator units are converted:

    - if `tf` is `tensorflow.compat.v1` (`import tensorflow.compat.v1 as tf`, or
      `from tensorflow.compat import v1 as tf`), the import becomes `import tensorflow as tf`
      and every other reference through `tf` keeps its meaning: its TensorFlow 2 spelling
      where TF2 has the same API (`tf.log` -> `tf.math.log`, `tf.data.Dataset` stays),
      `tf.compat.v1.<name>` otherwise (`tf.logging` -> `tf.compat.v1.logging`);
    - if `tf` is TensorFlow's root (`import tensorflow as tf` in a program written for
      TensorFlow 1.x), the TF1 names left outside the converted code keep their meaning the
      same way: `tf.reset_default_graph()` -> `tf.compat.v1.reset_default_graph()`,
      `tf.gfile.Open` -> `tf.io.gfile.GFile`, `tf.logging` / `tf.app` / `tf.flags` /
      `tf.gfile` -> `tf.compat.v1.<module>` (modules TensorFlow 2 no longer has at its root);
      TF2's own names stay as written;
    - `tf.contrib` names that TensorFlow moved into TF2 (tf_upgrade_v2's renames to TF2
      names: `tf.contrib.data.AUTOTUNE` -> `tf.data.AUTOTUNE`,
      `tf.contrib.cluster_resolver.TPUClusterResolver` ->
      `tf.distribute.cluster_resolver.TPUClusterResolver`, `tf.contrib.framework.nest` ->
      `tf.nest`, ...) get their TF2 names, through whatever alias the file reads them
      (`from tensorflow.contrib import cluster_resolver as contrib_cluster_resolver`);
      `tf.contrib.lookup.index_table_from_tensor(LABELS)` becomes the table it built, a
      `tf.lookup.StaticHashTable` of the ids 0..n-1 (a `tf.lookup.StaticVocabularyTable`
      with `num_oov_buckets`, which hashes out-of-vocabulary keys as TF1 did), and
      `index_to_string_table_from_tensor` the reverse table; a
      `tf.contrib` name without one that is left in the converted file is reported (E2K905):
      TensorFlow 2 has no `tf.contrib`, so that code fails where it runs;
    - `tf.disable_v2_behavior()` and `tf.compat.v1.disable_eager_execution()` are removed,
      unless the file still runs TF1 graph code (sessions, placeholders), in which case the
      call stays and is reported.

    ## Why
    The converted code is TensorFlow 2 Keras: it needs `tf` to be TensorFlow 2, and eager
    execution (Keras 3 has no graph mode).

    ## Fix safety
    Safe: each reference is respelled to a name of the same object, or to its `compat.v1`
    name (the TF2 spellings come from a table generated from TensorFlow itself; see
    `tools/gen_tf2_symbols.py`).

    ## References
    - https://www.tensorflow.org/guide/migrate/upgrade
    """

    code = "E2K005"
    summary = "converted file: `tensorflow.compat.v1 as tf` -> `tensorflow as tf` (other names keep their meaning), disable_v2_behavior() removed"
    safety = Safety.SAFE
    order = 95

    cases = [
        Case(
            id="compat-v1-as-tf",
            before='''\
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
tf.logging.set_verbosity(tf.logging.INFO)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
print(tf.log(2.0))
''',
            after='''\
import tensorflow as tf

tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
model.fit(input_fn())
print(tf.math.log(2.0))
''',
        ),
    ]

    def required(self, unit, plan, ctx):
        if compat_alias(ctx) is not None:
            return "`tf` is tensorflow.compat.v1 here, and the Keras code needs TensorFlow 2's `tf`"
        return None

    def plan(self, unit, plan, ctx) -> None:
        """Nothing per unit: the file-level step runs once the file's units are converted."""
