from __future__ import annotations

from estimator2keras import _canned
from estimator2keras._canned import AUC_PR_NOTE
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

    - the optimizer the Estimator would have built: `Adagrad(0.05, epsilon=0.0)` (TF1's
      Adagrad had no epsilon) for TF1 (`tf.compat.v1.estimator`) classes,
      `KerasV2Adagrad(learning_rate=0.001)` for TF2 ones (Keras's OptimizerV2 Adagrad, which
      they trained with: a helper class, E2K101); an optimizer given by name gets the
      learning rate the Estimator would have given it (`"RMSProp"`: `TF1RMSprop` for TF1
      classes, `KerasV2RMSprop` for TF2 ones); an optimizer object is translated (E2K101);
    - the head's loss: sigmoid cross-entropy for 2 classes, softmax cross-entropy for more,
      squared error for a regressor, all from the logits, **summed over the batch**
      (`reduction="sum"`) for TF1 classes, averaged for TF2 ones (`loss_reduction=` is
      honoured);
    - the head's evaluation metrics under the Estimator's names: `accuracy` and
      `average_loss` (the mean per-example loss).

    `weight_column` becomes the dataset's sample weights and `label_vocabulary` a
    `StringLookup` of the labels, both in `preprocess`.

    Hidden units the program computes (`hidden_units=args['hidden_units']`, as trainer
    packages read them from their command line) are given to the model's constructor where
    the Estimator was built (`DNNRegressorModel(hidden_units=args['hidden_units'])`), which
    makes one `Dense` layer per entry (`self.hidden_layers`); the same holds for
    `dnn_hidden_units` of the wide & deep Estimators (E2K503).

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
    example) is the model's `predict_step`: `model.predict` gives it, one array per key.

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
    notes = (AUC_PR_NOTE.format(estimator="DNNClassifier"),)
    summary = "DNNClassifier/DNNRegressor -> a Keras model (preprocessing, hidden layers, head) with the same defaults"
    safety = Safety.SAFE
    order = 10
    constructors = ("estimator.DNNClassifier", "estimator.DNNRegressor")
    signature = ("hidden_units", "feature_columns", "model_dir")

    cases = [
        Case(
            id='tf1-regressor',
            before='''\
import tensorflow.compat.v1 as tf1

rooms = tf1.feature_column.numeric_column("rooms")
district = tf1.feature_column.categorical_column_with_vocabulary_list("district", ["north", "south"])


def input_fn():
    features = {"rooms": [[3.0], [4.0]], "district": [["north"], ["south"]]}
    return tf1.data.Dataset.from_tensor_slices((features, [[1.0], [2.0]])).batch(1)


regressor = tf1.estimator.DNNRegressor(
    hidden_units=[4], feature_columns=[rooms, tf1.feature_column.indicator_column(district)])
regressor.train(input_fn)
''',
            after='''\
import tensorflow as tf

from e2k_helpers import CannedModel, head_metrics


class DNNRegressorModel(CannedModel):
    """The canned DNNRegressor (tf.compat.v1.estimator): hidden units [4], loss summed over the
    batch."""

    def __init__(self):
        super().__init__("regression")
        self.district_lookup = tf.keras.layers.StringLookup(vocabulary=["north", "south"])
        self.hiddenlayer_0 = tf.keras.layers.Dense(4, activation="relu")
        self.logits = tf.keras.layers.Dense(1)

    def features(self, features):
        rooms = tf.reshape(tf.cast(features["rooms"], tf.float32), [-1, 1])
        district_values = tf.reshape(features["district"], [-1])
        # The Estimator's ids: the vocabulary's; anything else has no id (-1).
        district = self.district_lookup(district_values) - 1
        return (rooms, district)

    def network(self, inputs, training=False):
        rooms, district = inputs
        # Ids come as floats when Keras 3 first traces the model (on the replicas' mean batch).
        district = tf.cast(district, tf.int64)
        net = tf.concat([tf.one_hot(district, 2), rooms], axis=1)
        net = self.hiddenlayer_0(net)
        return self.logits(net)


def input_fn():
    features = {"rooms": [[3.0], [4.0]], "district": [["north"], ["south"]]}
    return tf.data.Dataset.from_tensor_slices((features, [[1.0], [2.0]])).batch(1)


model = DNNRegressorModel()
model.compile(
    optimizer=tf.keras.optimizers.Adagrad(0.05, epsilon=0.0),
    loss=tf.keras.losses.MeanSquaredError(reduction="sum"),
    metrics=head_metrics("regression"))
model.fit(input_fn().map(model.preprocess))
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is not type(self):
            return
        _canned.convert(unit, plan, ctx, self.code)
        plan.fixed(unit.call, self.code, "canned DNN Estimator -> Keras model")
