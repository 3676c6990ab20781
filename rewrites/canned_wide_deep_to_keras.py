from __future__ import annotations

from estimator2keras import _canned
from estimator2keras._rule import Case, Safety, UnitRule


class CannedWideDeepToKerasModel(UnitRule):
    """DNNLinearCombinedClassifier / Regressor become a two-tower Keras model with an optimizer per tower.

    ## What it does
    Replaces `tf.estimator.DNNLinearCombinedClassifier`, `DNNLinearCombinedRegressor` (and
    their `tf.compat.v1` versions) with a `tf.keras.Model` subclass holding both towers of
    the Estimator: the DNN (as E2K501 builds it) and the linear model (as E2K502 builds
    it), whose logits are added. Like the Estimator, each tower has its own optimizer:
    `compile` gets the DNN's (`Adagrad(0.001)` by default) and the model is built with the
    linear one (`Ftrl(min(0.005, 1/sqrt(n_linear_columns)))` by default); a `train_step`
    computes the loss once and applies each optimizer to its tower's variables, and
    `test_step` evaluates. The loss is summed over the batch for TF1 classes, averaged over
    the global batch for TF2 ones, and reported like Keras reports its own.

    ## Why
    Keras's `compile` takes one optimizer; TensorFlow's `WideDeepModel` (which takes two) is
    Keras 2 only. The Estimator's defaults (Ftrl for the linear part, Adagrad for the DNN,
    with different learning rates) matter for how the model trains.

    ## Fix safety
    Safe: the fixture `canned_wide_deep` trains like the Estimator on 2 replicas, on
    TensorFlow 2.15 and the newest TensorFlow (`e2k parity`). The layers are built in the
    model's `__init__` (in the Estimator's order) so that the linear optimizer can be built
    before training, which Keras 3 requires of an optimizer it does not own.

    ## Limitations
    As E2K501 and E2K502. A model with only one of the two towers is converted with the
    Estimator's learning rates for that tower.

    ## References
    - https://www.tensorflow.org/guide/migrate/canned_estimators
    - https://keras.io/guides/custom_train_step_in_tensorflow/
    - docs/canned-estimators.md
    """

    code = "E2K503"
    summary = "DNNLinearCombinedClassifier/Regressor -> a wide & deep Keras model with an optimizer per tower"
    safety = Safety.SAFE
    order = 10
    constructors = ("estimator.DNNLinearCombinedClassifier", "estimator.DNNLinearCombinedRegressor")
    signature = ("model_dir", "linear_feature_columns", "linear_optimizer", "dnn_feature_columns", "dnn_optimizer",
                 "dnn_hidden_units", "dnn_activation_fn", "dnn_dropout")

    cases = []

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is not type(self):
            return
        _canned.convert(unit, plan, ctx, self.code)
        plan.fixed(unit.call, self.code, "canned wide & deep Estimator -> Keras model")
