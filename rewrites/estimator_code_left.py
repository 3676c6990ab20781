from __future__ import annotations

from estimator2keras._rule import Case, Diagnostic


class EstimatorCodeLeft(Diagnostic):
    """Estimator code is left in the file after the conversion: it still needs a human.

    ## What it does
    After every rule has run, e2k reads each file once more, independently of what the
    conversion recognised, and reports every expression that still refers to an Estimator
    API: anything under `tf.estimator`, `tf.compat.v1.estimator`, `tensorflow_estimator`
    or `tensorflow.python.estimator`, `tf.contrib.learn`, `tf.contrib.estimator`, the TPU
    Estimator (`tf.contrib.tpu.TPUEstimator`, `RunConfig`, `TPUConfig`),
    `tf.keras.estimator.model_to_estimator` and `multi_gpu_model`. Names are resolved
    through imports (`import tensorflow.compat.v1 as tf1`, `from tensorflow import
    estimator as est`, `from tensorflow.estimator import *`) and through aliases bound at
    module level (`tf1 = tf.compat.v1`, `Est = tf.estimator.Estimator`). An import of one
    whose names are used nowhere is reported too.

    Each reference is reported once, as `E2K905 Estimator API left: tf.estimator.EstimatorSpec`,
    where the original file has it, unless another finding already leaves that line for a
    human. The file is "partial", so `e2k rewrite --check` exits 1. In a file that other
    findings already make partial, it still speaks for each function, class or statement of
    the module's own code that no finding speaks for, nor any code connected to it by name:
    an unused `SessionRunHook` class left beside an Estimator converted with a warning, a
    `ws = tf.estimator.WarmStartSettings(...)` left at module level once the Estimator that
    read it converted (its `warm_start_from=ws` reported as E2K400). A finding speaks for
    the code at its line, for what that code reads, and for what reads it or the Estimator
    code so connected: the model_fn, the RunConfig, the specs and the `train_and_evaluate`
    of an Estimator that was refused are that Estimator's, and are not repeated line by
    line. Findings are reported where the original file has them.

    When a directory is rewritten, a file that calls a function of another module of the
    same tree (`from . import model`, `import trainer.model as model`, `import model`...)
    whose definition still holds Estimator code is reported at the call:
    `E2K905 calls model.train_and_evaluate (trainer/model.py:120), which still runs
    Estimator code`. That is how a `task.py` that only calls its package's
    `train_and_evaluate` fails the check while `model.py` does. Once `model.py` converts,
    such a file runs no Estimator code and needs no edit: it is reported converted with its
    program, with a note at the call (`calls model.train_and_evaluate (trainer/model.py),
    which e2k converted: this file needs no change of its own`).

    The same release removed Keras 2's DTensor integration, and programs that trained with
    it (TensorFlow's "DTensor with Keras" tutorial) stop there too: every reference to
    `tf.keras.dtensor` (`LayoutMap`, its optimizers) and every `mesh=` or `*_layout=`
    argument of a `tf.keras` class (`Dense(kernel_layout=...)`, `metrics.Mean(mesh=mesh)`)
    is reported as `E2K905 Keras 2 API left (Keras 3 has no tf.keras.dtensor nor layout
    arguments): ...`. TensorFlow's own `tf.experimental.dtensor` (`create_mesh`, `Layout`,
    `pack`) is still there and is not reported. Keras 3's successor is `keras.distribution`
    (`DataParallel`, `ModelParallel` with a `LayoutMap`): [jax-target.md](../jax-target.md)
    says what `e2k rewrite --target jax` writes; e2k does not convert these programs yet.

    ## Why
    `tf.estimator` is gone from TensorFlow 2.16. A model_fn module whose Estimator is built
    elsewhere, a `RunConfig` for an Estimator returned by a factory, a `train_and_evaluate`
    in another module: code the conversion does not reach must never pass as "nothing to
    do", or a pre-commit hook would let it through.

    ## Fix safety
    Nothing is changed: no comment is written either (the other findings of the unit, if
    any, are marked). Convert the code by hand, or make the conversion reach it (build the
    Estimator in the same program as its model_fn), or leave one line alone with
    `# e2k: ignore[E2K905]`.

    ## Limitations
    A name reached only through a call (`getattr(tf, "estimator")`, a function returning
    the module) or an alias bound inside a function is not followed. In a notebook only the
    cells' own code is read; calls between notebooks and modules are not followed.
    """

    code = "E2K905"
    summary = "an Estimator API still referred to after the conversion: reported, so the file is never unchanged"
    keywords = ()

    cases = [
        Case(
            id="model-fn-module",
            before='''\
import tensorflow as tf


def model_fn(features, labels, mode, params):
    logits = tf.layers.dense(features["x"], params["classes"])
    predictions = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.AdamOptimizer().minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
''',
            findings=("E2K905",),
        ),
        Case(
            id="alias-by-assignment",
            before='''\
import tensorflow as tf

tf1 = tf.compat.v1
config = tf1.estimator.RunConfig(model_dir="/tmp/model", save_checkpoints_steps=100)
''',
            findings=("E2K905",),
        ),
        Case(
            id="star-import",
            before='''\
from tensorflow.estimator import *

spec = TrainSpec(input_fn=lambda: None, max_steps=100)
''',
            findings=("E2K905",),
        ),
        Case(
            id="keras-only",
            before='''\
import tensorflow as tf


class Estimator:
    """The user's own class: not TensorFlow's."""


def train_and_evaluate(model: tf.keras.Model, data):
    model.fit(data, epochs=2)
    return Estimator()
''',
        ),
    ]
