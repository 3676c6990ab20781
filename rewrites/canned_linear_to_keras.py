from __future__ import annotations

from estimator2keras import _canned
from estimator2keras._rule import Case, Safety, UnitRule


class CannedLinearToKerasModel(UnitRule):
    """LinearClassifier / LinearRegressor become a Keras model with the same linear model and head.

    ## What it does
    Replaces `tf.estimator.LinearClassifier`, `LinearRegressor` (and their `tf.compat.v1`
    versions) with a `tf.keras.Model` subclass whose `preprocess` computes the feature
    columns (E2K504) and whose `call` is a linear model as the Estimator builds it: one
    weight matrix per column, in the order of the columns' names, then a bias, all starting
    at zero (a small `LinearModel` layer written into the file). A categorical column adds
    the weight rows of its ids (its one-hot times its weights). `compile` gets:

    - the optimizer the Estimator would have built: `Ftrl(0.2)` by default (`'Ftrl'` with
      the linear Estimators' learning rate), `Ftrl(min(0.2, 1/sqrt(n_columns)))` for
      `optimizer=None`; an optimizer object is translated (E2K101);
    - the head's loss from the logits, summed over the batch for TF1 classes
      (`reduction="sum"`), averaged for TF2 ones; the `accuracy` and `average_loss` metrics.

    ## Why
    `tf.estimator` is gone from TensorFlow 2.16, and Keras 3 has no linear model
    (`tf.compat.v1.keras.experimental.LinearModel`, which TensorFlow's migration guide uses,
    is Keras 2 only). The weights of categorical columns are rows looked up by id, which a
    plain `Dense` on the raw features cannot express.

    ## Fix safety
    Safe: the fixtures `canned_linear_classifier` and `canned_linear_regressor` train like
    the Estimator on 2 replicas (`e2k parity`). Gradients of the categorical weights are
    dense (a one-hot times the weights), so each step touches every row: the same update as
    the Estimator's sparse one for Ftrl and Adagrad (a row with a zero gradient does not
    move), slower for very large vocabularies or hash buckets.

    ## Limitations
    One value per example for categorical features; an embedding column inside a linear
    model, `partitioner=` and learning-rate decays inside the optimizer are reported and
    left unconverted.

    ## References
    - https://www.tensorflow.org/guide/migrate/canned_estimators
    - docs/canned-estimators.md
    """

    code = "E2K502"
    summary = "LinearClassifier/LinearRegressor -> a Keras model with a per-column linear model and the same head"
    safety = Safety.SAFE
    order = 10
    constructors = ("estimator.LinearClassifier", "estimator.LinearRegressor")
    signature = ("feature_columns", "model_dir")

    cases = []

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is not type(self):
            return
        _canned.convert(unit, plan, ctx, self.code)
        plan.fixed(unit.call, self.code, "canned linear Estimator -> Keras model")
