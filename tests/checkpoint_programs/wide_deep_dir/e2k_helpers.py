"""The binary head's eval metrics, as e2k's helpers module writes them (head_metrics and the
metric classes it uses): migrated.py beside it reports what the Estimator's evaluate() did."""
import tensorflow as tf


class LabelMean(tf.keras.metrics.Mean):
    """The head's label/mean: the mean of the labels, weighted as the examples."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(tf.cast(y_true, tf.float32), sample_weight)


class AccuracyBaseline(LabelMean):
    """The head's accuracy_baseline: max(label mean, 1 - label mean), always predicting one class."""

    def result(self):
        mean = super().result()
        return tf.maximum(mean, 1.0 - mean)


class PrecisionOfClassIds(tf.keras.metrics.Precision):
    """The head's precision, of the predicted class (positive when the logit is above 0)."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, tf.cast(y_pred > 0, tf.float32), sample_weight)


class PredictionMean(tf.keras.metrics.Mean):
    """The head's prediction/mean: the mean of the predictions (the logits' sigmoid for a binary head)."""

    def __init__(self, activation=None, name=None):
        super().__init__(name=name)
        self.activation = activation

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self.activation is not None:
            y_pred = getattr(tf.nn, self.activation)(y_pred)
        return super().update_state(tf.cast(y_pred, tf.float32), sample_weight)


class RecallOfClassIds(tf.keras.metrics.Recall):
    """The head's recall, of the predicted class (positive when the logit is above 0)."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, tf.cast(y_pred > 0, tf.float32), sample_weight)


def head_metrics(head, compat_v1=False):
    """A canned Estimator's head's metrics, as its evaluate() reported them, for a "binary",
    "multi_class" or "regression" head; a tf.compat.v1.estimator binary head's
    auc_precision_recall summed trapezoids, which no Keras AUC does (`compat_v1=True`: none)."""
    if head == "binary":
        metrics = [
            tf.keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0),
            tf.keras.metrics.BinaryCrossentropy(name="average_loss", from_logits=True),
            PrecisionOfClassIds(name="precision"),
            RecallOfClassIds(name="recall"),
            tf.keras.metrics.AUC(name="auc", from_logits=True),
        ]
        if not compat_v1:
            metrics.append(tf.keras.metrics.AUC(name="auc_precision_recall", curve="PR", from_logits=True))
        return metrics + [
            LabelMean(name="label/mean"),
            PredictionMean(name="prediction/mean", activation="sigmoid"),
            AccuracyBaseline(name="accuracy_baseline"),
        ]
    if head == "multi_class":
        return [
            tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            tf.keras.metrics.SparseCategoricalCrossentropy(name="average_loss", from_logits=True),
        ]
    return [
        tf.keras.metrics.MeanSquaredError(name="average_loss"),
        LabelMean(name="label/mean"),
        PredictionMean(name="prediction/mean"),
    ]
