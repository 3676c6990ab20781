from __future__ import annotations

from estimator2keras import _canned
from estimator2keras._canned import AUC_PR_NOTE
from estimator2keras._rule import Case, Safety, UnitRule


class CannedWideDeepToKerasModel(UnitRule):
    """DNNLinearCombinedClassifier / Regressor become a two-tower Keras model with an optimizer per tower.

    ## What it does
    Replaces `tf.estimator.DNNLinearCombinedClassifier`, `DNNLinearCombinedRegressor` (and
    their `tf.compat.v1` versions) with a `tf.keras.Model` subclass holding both towers of
    the Estimator: the DNN (as E2K501 builds it) and the linear model (as E2K502 builds
    it), whose logits are added. Like the Estimator, each tower has its own optimizer:
    `compile` gets the DNN's (Adagrad at 0.001 by default, written as E2K501 writes it) and
    the model is built with the linear one (`Ftrl(min(0.005, 1/sqrt(n_linear_columns)))` by
    default); a `train_step` computes the loss once and applies each optimizer to its tower's
    variables, and `test_step` evaluates. The loss is summed over the batch for TF1 classes, averaged over
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
    notes = (AUC_PR_NOTE.format(estimator="DNNLinearCombinedClassifier"),)
    summary = "DNNLinearCombinedClassifier/Regressor -> a wide & deep Keras model with an optimizer per tower"
    safety = Safety.SAFE
    order = 10
    constructors = ("estimator.DNNLinearCombinedClassifier", "estimator.DNNLinearCombinedRegressor")
    signature = ("model_dir", "linear_feature_columns", "linear_optimizer", "dnn_feature_columns", "dnn_optimizer",
                 "dnn_hidden_units", "dnn_activation_fn", "dnn_dropout")

    cases = [
        Case(
            id='tf1-regressor',
            before='''\
import tensorflow.compat.v1 as tf1

age = tf1.feature_column.numeric_column("age")
city = tf1.feature_column.categorical_column_with_vocabulary_list("city", ["paris", "rome"])


def input_fn():
    features = {"age": [30.0, 40.0], "city": ["paris", "rome"]}
    return tf1.data.Dataset.from_tensor_slices((features, [1.0, 2.0])).batch(2)


regressor = tf1.estimator.DNNLinearCombinedRegressor(
    linear_feature_columns=[city],
    dnn_feature_columns=[age, tf1.feature_column.embedding_column(city, 2)],
    dnn_hidden_units=[3])
regressor.train(input_fn)
''',
            after='''\
import tensorflow as tf

from e2k_helpers import head_metrics, LinearModel, WideDeepModel


class DNNLinearCombinedRegressorModel(WideDeepModel):
    """The canned DNNLinearCombinedRegressor (tf.compat.v1.estimator): hidden units [3],
    loss summed over the batch."""

    def __init__(self, linear_optimizer):
        super().__init__("regression")
        self.city_lookup = tf.keras.layers.StringLookup(vocabulary=["paris", "rome"])
        self.city_embedding = tf.keras.layers.Dense(
            2,
            use_bias=False,
            kernel_initializer=tf.keras.initializers.TruncatedNormal(stddev=2 ** -0.5))
        self.hiddenlayer_0 = tf.keras.layers.Dense(3, activation="relu")
        self.logits = tf.keras.layers.Dense(1)
        self.linear = LinearModel(1, ["city"])
        self.head_loss = tf.keras.losses.MeanSquaredError(reduction="sum")
        self.loss_tracker = tf.keras.metrics.Mean(name="loss")
        self.head_metrics = head_metrics("regression")
        # Built here, in the Estimator's order (the DNN, then the linear model), so that the
        # linear model's own optimizer can be built before training.
        self.city_embedding.build((None, 2))
        self.hiddenlayer_0.build((None, 3))
        self.logits.build((None, 3))
        self.linear.build([(None, 2)])
        self.linear_optimizer = linear_optimizer
        self.linear_optimizer.build(self.linear.trainable_weights)

    def features(self, features):
        age = tf.reshape(tf.cast(features["age"], tf.float32), [-1, 1])
        city_values = tf.reshape(features["city"], [-1])
        # The Estimator's ids: the vocabulary's; anything else has no id (-1).
        city = self.city_lookup(city_values) - 1
        return (age, city)

    def network(self, inputs, training=False):
        age, city = inputs
        # Ids come as floats when Keras 3 first traces the model (on the replicas' mean
        # batch).
        city = tf.cast(city, tf.int64)
        net = tf.concat([age, self.city_embedding(tf.one_hot(city, 2))], axis=1)
        net = self.hiddenlayer_0(net)
        dnn_logits = self.logits(net)
        linear_logits = self.linear((tf.one_hot(city, 2),))
        return dnn_logits + linear_logits


def input_fn():
    features = {"age": [30.0, 40.0], "city": ["paris", "rome"]}
    return tf.data.Dataset.from_tensor_slices((features, [1.0, 2.0])).batch(2)


model = DNNLinearCombinedRegressorModel(linear_optimizer=tf.keras.optimizers.Ftrl(0.005))
model.compile(optimizer=tf.keras.optimizers.Adagrad(0.001, epsilon=0.0))
model.fit(input_fn().map(model.preprocess))
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is not type(self):
            return
        _canned.convert(unit, plan, ctx, self.code)
        plan.fixed(unit.call, self.code, "canned wide & deep Estimator -> Keras model")
