from __future__ import annotations

from estimator2keras._rule import Case, Diagnostic


class UnconvertedModelFn(Diagnostic):
    """A model_fn that e2k does not convert, left exactly as it was.

    ## What it does
    When a model_fn contains something the converter cannot place in a Keras model (a
    `tf.while_loop`, `tf.get_variable` with scope reuse, a `Scaffold`, a layer or loss
    without a rule...), the model_fn, its Estimator and everything that uses them are left
    untouched. A `# e2k: E2K901 <reason>` line is put above the statement at fault, and the
    finding is reported with its line and column.

    ## Why
    Half a model is worse than none: a conversion that dropped a statement would train
    something else without a word. The mark says precisely what to convert by hand.

    ## Fix safety
    Nothing is changed apart from the comment line.

    ## References
    - https://www.tensorflow.org/guide/migrate/model_mapping
    """

    code = "E2K901"
    summary = "a model_fn construct e2k does not convert: the whole unit is left as it was (marked, reported)"

    cases = [
        Case(
            id="while-loop",
            before='''\
import tensorflow as tf


def model_fn(features, labels, mode):
    logits = tf.while_loop(lambda i: i < 3, lambda i: i + 1, [features])
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.AdamOptimizer().minimize(loss)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
''',
            after='''\
import tensorflow as tf


def model_fn(features, labels, mode):
    # e2k: E2K901 `tf.while_loop` in the model_fn is beyond what e2k converts
    logits = tf.while_loop(lambda i: i < 3, lambda i: i + 1, [features])
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.AdamOptimizer().minimize(loss)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
''',
            findings=("E2K901",),
        ),
    ]
