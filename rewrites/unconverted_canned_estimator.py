from __future__ import annotations

from estimator2keras._rule import Case, Diagnostic, UnitRule, Unsupported


class UnconvertedCannedEstimator(Diagnostic, UnitRule):
    """A canned Estimator e2k does not convert yet: marked and reported, left as it was.

    ## What it does
    Marks the canned Estimators that take a `head` or have no Keras conversion yet
    (`DNNEstimator`, `LinearEstimator`, `DNNLinearCombinedEstimator`, `BaselineClassifier`,
    `BaselineRegressor`, `BaselineEstimator`, `experimental.RNNClassifier`,
    `experimental.RNNEstimator`) with `# e2k: E2K506` and reports them, so that they are not
    silently left behind. Their units are not changed.

    ## Why
    A program that still builds them fails on TensorFlow 2.16 and later. Their heads
    (multi-label, Poisson, custom ones) and sequence inputs need conversions that do not
    exist yet; E2K501-E2K503 convert the classifiers and regressors.

    ## Fix safety
    Nothing is changed apart from the comment line.

    ## References
    - https://www.tensorflow.org/guide/migrate/canned_estimators
    """

    code = "E2K506"
    summary = "a canned Estimator with a head, a baseline or an RNN: not converted yet (marked, reported)"
    order = 10
    constructors = (
        "estimator.DNNEstimator", "estimator.LinearEstimator", "estimator.DNNLinearCombinedEstimator",
        "estimator.BaselineClassifier", "estimator.BaselineRegressor", "estimator.BaselineEstimator",
        "estimator.experimental.RNNClassifier", "estimator.experimental.RNNEstimator",
    )
    # Marked whatever its arguments: positional ones are bound to placeholders.
    signature = tuple(f"arg{i}" for i in range(20))

    cases = [
        Case(
            id='baseline',
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [1.0, 2.0]}, [0, 2])).batch(2)


baseline = tf.estimator.BaselineClassifier(n_classes=3)
baseline.train(input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [1.0, 2.0]}, [0, 2])).batch(2)


# e2k: E2K506 BaselineClassifier is not converted yet (E2K501-E2K503 convert DNN, linear and wide & deep classifiers and regressors)
baseline = tf.estimator.BaselineClassifier(n_classes=3)
baseline.train(input_fn)
''',
            findings=('E2K506',),
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is type(self):
            name = unit.api_path.rsplit(".", 1)[-1]
            raise Unsupported(f"{name} is not converted yet (E2K501-E2K503 convert DNN, linear and wide & deep "
                              "classifiers and regressors)", unit.call, self.code)
