from __future__ import annotations

from estimator2keras import _canned
from estimator2keras._rule import Case, Safety, UnitRule

class CannedDnnToKerasModel(UnitRule):
    """DNNClassifier / DNNRegressor become a Keras model with the same layers, head and optimizer.

    ## What it does
    Replaces `tf.estimator.DNNClassifier`, `DNNRegressor` (and their `tf.compat.v1` versions)
    with a `tf.keras.Model` subclass: the feature columns become preprocessing layers
    (E2K504) in a `preprocess` method that every dataset is mapped through
    (`input_fn().map(model.preprocess)`), and `call` holds the network: the columns' dense
    inputs in the Estimator's order (sorted by column name), one `Dense(units,
    activation=...)` per hidden layer (with `Dropout` and `BatchNormalization(momentum=0.999)`
    where the Estimator had them) and the logits. `compile` gets:

    - the optimizer the Estimator would have built: `Adagrad(0.05)` for TF1
      (`tf.compat.v1.estimator`) classes, Keras's `Adagrad(learning_rate=0.001)` for TF2 ones;
      an optimizer given by name gets the learning rate the Estimator would have given it;
      an optimizer object is translated (E2K101);
    - the head's loss: sigmoid cross-entropy for 2 classes, softmax cross-entropy for more,
      squared error for a regressor, all from the logits, **summed over the batch**
      (`reduction="sum"`) for TF1 classes, averaged for TF2 ones (`loss_reduction=` is
      honoured);
    - the head's evaluation metrics under the Estimator's names: `accuracy` and
      `average_loss` (the mean per-example loss).

    `weight_column` becomes the dataset's sample weights and `label_vocabulary` a
    `StringLookup` of the labels, both in `preprocess`.

    ## Why
    Canned Estimators were removed with `tf.estimator` in TensorFlow 2.16, and Keras has no
    pre-made equivalent that trains the same: TensorFlow's migration guide rebuilds them by
    hand. A faithful rebuild must also keep what the guide does not mention: TF1 heads sum
    their loss, TF1 and TF2 classes have different default learning rates, and the inputs
    are concatenated in the order of the columns' names.

    ## Fix safety
    Safe: the fixtures `canned_dnn_classifier` and `canned_dnn_regressor` train step by step
    like the Estimator on 2 replicas (`e2k parity`, on TensorFlow 2.15 and the newest
    TensorFlow). The Estimator's `predict` output (a dict of classes and probabilities per
    example) is not reproduced: `model.predict` gives the logits.

    ## Limitations
    Features must hold one value per example (shape `[batch]` or `[batch, 1]`): sparse or
    multi-valued categorical features are not converted (a multi-valued feature fails
    loudly in `preprocess`). `input_layer_partitioner`, a summed loss over several label
    dimensions, learning-rate decays inside the optimizer and shared embeddings are reported
    and left unconverted.

    ## References
    - https://www.tensorflow.org/guide/migrate/canned_estimators
    - https://www.tensorflow.org/guide/migrate/migrating_feature_columns
    - docs/canned-estimators.md
    """

    code = "E2K501"
    summary = "DNNClassifier/DNNRegressor -> a Keras model (preprocessing, hidden layers, head) with the same defaults"
    safety = Safety.SAFE
    order = 10
    constructors = ("estimator.DNNClassifier", "estimator.DNNRegressor")
    signature = ("hidden_units", "feature_columns", "model_dir")

    cases = []

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is not type(self):
            return
        _canned.convert(unit, plan, ctx, self.code)
        plan.fixed(unit.call, self.code, "canned DNN Estimator -> Keras model")
