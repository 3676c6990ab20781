from __future__ import annotations

from estimator2keras._rule import Case, Diagnostic, UnitRule, Unsupported

MESSAGE = ("boosted trees have no Keras counterpart: use TensorFlow Decision Forests "
           "(tfdf.keras.GradientBoostedTreesModel); not converted")


class BoostedTreesEstimator(Diagnostic, UnitRule):
    """A BoostedTrees Estimator: pointed to TensorFlow Decision Forests, left as it was.

    ## What it does
    Marks `tf.estimator.BoostedTreesClassifier`, `BoostedTreesRegressor` and
    `BoostedTreesEstimator` (any import style) with `# e2k: E2K505` and reports them. Nothing
    of their unit (config, input_fns, `train` / `evaluate` calls) is changed.

    ## Why
    Gradient-boosted trees are not a neural network: Keras has nothing that grows trees,
    and TensorFlow's migration guide replaces them with
    `tfdf.keras.GradientBoostedTreesModel` from TensorFlow Decision Forests, whose trees,
    defaults and data handling (no feature columns) differ. A half conversion would neither
    run as before nor train the same.

    ## Fix safety
    Nothing is changed apart from the comment line.

    ## References
    - https://www.tensorflow.org/guide/migrate/canned_estimators#example_4_migrating_from_boostedtreesestimator
    - https://www.tensorflow.org/decision_forests
    """

    code = "E2K505"
    summary = "BoostedTrees* Estimator: left as it was, pointed to TensorFlow Decision Forests"
    order = 10
    constructors = (
        "estimator.BoostedTreesClassifier", "estimator.BoostedTreesRegressor", "estimator.BoostedTreesEstimator",
    )
    # Marked whatever its arguments: positional ones are bound to placeholders.
    signature = tuple(f"arg{i}" for i in range(20))

    cases = [
        Case(
            id='boosted-trees',
            before='''\
import tensorflow as tf

columns = [tf.feature_column.numeric_column("x")]


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [1.0, 2.0]}, [0, 1])).batch(2)


trees = tf.estimator.BoostedTreesClassifier(columns, n_batches_per_layer=1)
trees.train(input_fn, max_steps=10)
''',
            after='''\
import tensorflow as tf

columns = [tf.feature_column.numeric_column("x")]


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [1.0, 2.0]}, [0, 1])).batch(2)


# e2k: E2K505 boosted trees have no Keras counterpart: use TensorFlow Decision Forests (tfdf.keras.GradientBoostedTreesModel); not converted
trees = tf.estimator.BoostedTreesClassifier(columns, n_batches_per_layer=1)
trees.train(input_fn, max_steps=10)
''',
            findings=('E2K505',),
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is type(self):
            raise Unsupported(MESSAGE, unit.call, self.code)
