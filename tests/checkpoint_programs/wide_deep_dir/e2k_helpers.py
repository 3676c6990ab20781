"""What the Estimator did that Keras alone does not: e2k's helpers.

e2k (estimator2keras) wrote this module when it converted the program's
Estimator code; it is yours now. Each helper says which Estimator behaviour
it keeps, and e2k's docs (helpers.md) say why Keras alone differs there. A
later `e2k rewrite` adds the helpers it needs and leaves these as they are.
"""
import tempfile
import time

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


def dense_features(features):
    """The features as a canned Estimator's feature columns read them: a SparseTensor (a
    categorical feature of tf.Examples parsed with the columns' spec) made dense, a missing
    value being the one the columns ignore ("" for strings, -1 for ids)."""
    return {
        key: tf.sparse.to_dense(value, "" if value.dtype == tf.string else -1)
        if isinstance(value, tf.SparseTensor) else value
        for key, value in features.items()
    }


def head_predictions(logits, n_classes, vocabulary=None):
    """A canned classifier's predictions for a batch of logits (one logit for 2 classes, else
    one per class), as its head gave them: the probabilities, the predicted class's id and
    name (its label in `vocabulary`, else its id as a string), every class's ids and names."""
    predictions = {"logits": logits}
    if n_classes == 2:
        predictions["logistic"] = tf.sigmoid(logits)
        logits = tf.concat([tf.zeros_like(logits), logits], axis=1)
    class_ids = tf.argmax(logits, axis=1)[:, None]
    all_class_ids = tf.tile(tf.range(n_classes)[None], [tf.shape(logits)[0], 1])
    if vocabulary is None:
        classes = tf.strings.as_string(class_ids)
        all_classes = tf.strings.as_string(all_class_ids)
    else:
        # The vocabulary as written (StringLookup.get_vocabulary() is Python: not in a graph).
        vocabulary = tf.constant(vocabulary)
        classes = tf.gather(vocabulary, class_ids)
        all_classes = tf.gather(vocabulary, all_class_ids)
    predictions.update(probabilities=tf.nn.softmax(logits), class_ids=class_ids,
                       classes=classes, all_class_ids=all_class_ids,
                       all_classes=all_classes)
    return predictions


class CannedModel(tf.keras.Model):
    """A canned Estimator as a Keras model. A subclass's `features` computes what its feature
    columns did to the raw features (`preprocess`, mapped over the datasets, runs it in
    tf.data); its `network` computes the logits from them. `head` is the Estimator's head
    ("binary", "multi_class" or "regression"), `units` the logits' width."""

    def __init__(self, head, units=1, label_vocabulary=None, weight_column=None):
        super().__init__()
        self.head, self.units, self.weight_column = head, units, weight_column
        self.label_vocabulary = label_vocabulary
        if label_vocabulary is not None:
            self.label_lookup = tf.keras.layers.StringLookup(
                vocabulary=label_vocabulary, num_oov_indices=0)

    def preprocess(self, features, labels=None):
        """Raw features (and labels) -> the model's inputs (and labels, and weights)."""
        features = dense_features(features)
        inputs = self.features(features)
        if labels is None:
            return inputs
        if self.label_vocabulary is not None:
            labels = self.label_lookup(labels)
        if self.head != "multi_class":
            labels = tf.reshape(labels, [-1, self.units])
        if self.weight_column is None:
            return inputs, labels
        return inputs, labels, self.example_weights(features)

    def example_weights(self, features):
        return tf.reshape(tf.cast(features[self.weight_column], tf.float32), [-1])

    def call(self, inputs, training=False):
        if isinstance(inputs, dict):  # raw features, as a served model gets them
            inputs = self.preprocess(inputs)
        return self.network(inputs, training=training)

    def predict_step(self, data):
        """The Estimator's predictions for a batch, as its head made them."""
        if isinstance(data, tuple) and isinstance(data[0], (tuple, dict)):
            data = data[0]  # (inputs, labels): a dataset with labels
        logits = self(data, training=False)
        if self.head == "regression":
            return {"predictions": logits}
        n_classes = 2 if self.head == "binary" else self.units
        return head_predictions(logits, n_classes, self.label_vocabulary)


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


class LinearModel(tf.keras.layers.Layer):
    """A canned Estimator's linear model: a weight matrix per feature column, created in the
    columns' name order, then the bias; all start at zero. Categorical columns come as
    one-hot rows, so a column adds the rows of its ids."""

    def __init__(self, units, column_names, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.column_names = column_names

    def build(self, input_shape):
        self.column_weights = [
            self.add_weight(name=f"{name}_weights", shape=(shape[-1], self.units), initializer="zeros")
            for name, shape in zip(self.column_names, input_shape)]
        self.bias = self.add_weight(name="bias_weights", shape=(self.units,), initializer="zeros")
        super().build(input_shape)

    def call(self, inputs):
        weighted_sums = [tf.matmul(x, w) for x, w in zip(inputs, self.column_weights)]
        return tf.nn.bias_add(tf.add_n(weighted_sums), self.bias)


class ModelDirCheckpoints(tf.keras.callbacks.Callback):
    """An Estimator's model_dir for a Keras model and its optimizer: the latest checkpoint is
    restored when the model first trains, evaluates or predicts, and training saves one every
    `save_steps` steps or `save_secs` seconds and when it ends, numbered by global step."""

    def __init__(self, model, directory, max_to_keep=5, keep_checkpoint_every_n_hours=None,
                 save_steps=None, save_secs=None, restore=True):
        super().__init__()
        # No model_dir (None, or a flag left empty): the Estimator used a temporary directory.
        directory = directory or tempfile.mkdtemp()
        self.optimizer = model.optimizer
        self.keep = (max_to_keep, keep_checkpoint_every_n_hours)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
        # The directory as a CheckpointManager takes it (e2k parity gives each run its own).
        self.directory = self.aside = tf.train.CheckpointManager(checkpoint, directory, *self.keep).directory
        if not model.distribute_strategy.extended.should_checkpoint:
            # Another worker than the chief of a multi-worker strategy: it saves too (the
            # variables are read collectively), but aside, as under an Estimator.
            self.aside = tempfile.mkdtemp()
        self.save_steps = save_steps
        self.save_secs = save_secs
        self.restored = not restore
        self.writer = None

    def latest(self):
        """The latest checkpoint in the directory as it is now: like the Estimator, which read
        its model_dir when it ran, not when it was made (a program may empty it in between)."""
        latest = tf.train.latest_checkpoint(self.directory)
        if latest and "_CHECKPOINTABLE_OBJECT_GRAPH" not in dict(tf.train.list_variables(latest)):
            # A TF1 checkpoint by variable names: the Keras model's variables have none of them.
            raise ValueError(
                f"{latest} is an Estimator's checkpoint, which this "
                "Keras model cannot restore: convert the model_dir with "
                "`e2k checkpoint` (its docs: checkpoints.md)")
        return latest

    def global_step(self):
        """The step training goes on from: the latest checkpoint's until it is restored."""
        latest = None if self.restored else self.latest()
        if latest is None:
            return int(self.optimizer.iterations.numpy())
        return int(latest.rsplit("-", 1)[-1])

    def restore(self, kind):
        # Not before: Keras 3 restores into a model only once it is built, which it is when
        # a callback starts under a distribution strategy, and else in the first step.
        if self.writer is not None:
            return
        latest = None if self.restored else self.latest()
        if not self.model.built and hasattr(tf.keras, "version"):
            step = getattr(self.model, f"{kind}_function")

            def first_step(iterator):
                setattr(self.model, f"{kind}_function", step)
                self.build(iterator.element_spec)
                self.restore(kind)
                return step(iterator)

            setattr(self.model, f"{kind}_function", first_step)
            return
        # Keras 3 keeps a layer's list of layers where tf.train.Checkpoint does not look
        # (keras-team/keras#19425): its weights are listed too.
        weights = {"weights": self.model.weights} if hasattr(tf.keras, "version") else {}
        checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, **weights)
        self.writer = tf.train.CheckpointManager(checkpoint, self.aside, *self.keep)
        if latest is not None:
            try:
                checkpoint.restore(latest).assert_existing_objects_matched()
            except AssertionError as error:
                raise ValueError(
                    f"{latest} does not hold every weight of this model, "
                    "which would start from its initial values: another "
                    "program wrote it, or another Keras (Keras 2 and 3 "
                    f"name the weights otherwise). {error}") from None
        self.restored = True

    def build(self, spec):
        """Builds the model on a batch of zeros shaped like the data's (its first step would)."""
        def zeros(spec):
            shape = [1 if size is None else size for size in spec.shape]
            if isinstance(spec, tf.SparseTensorSpec):
                return tf.sparse.from_dense(tf.zeros(shape, spec.dtype))
            if isinstance(spec, tf.RaggedTensorSpec):
                return tf.RaggedTensor.from_tensor(tf.zeros(shape, spec.dtype), ragged_rank=spec.ragged_rank)
            return tf.zeros(shape, spec.dtype)
        features = tf.keras.utils.unpack_x_y_sample_weight(spec)[0]
        self.model(tf.nest.map_structure(zeros, features), training=False)

    def on_train_begin(self, logs=None):
        self.step = self.saved_step = self.global_step()
        self.restore("train")
        self.saved_time = time.time()

    def on_test_begin(self, logs=None):
        self.restore("test")

    def on_predict_begin(self, logs=None):
        self.restore("predict")

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        steps_due = self.save_steps and self.step - self.saved_step >= self.save_steps
        secs_due = self.save_secs and time.time() - self.saved_time >= self.save_secs
        if steps_due or secs_due:
            self.save()

    def on_train_end(self, logs=None):
        if self.step != self.saved_step and (self.save_steps or self.save_secs):
            self.save()

    def save(self):
        self.writer.save(checkpoint_number=self.step)
        self.saved_step, self.saved_time = self.step, time.time()


class WideDeepModel(CannedModel):
    """A canned DNNLinearCombined Estimator as a Keras model: its linear model (`linear`)
    trained by its own optimizer (`linear_optimizer`), the rest by compile's, on the head's
    loss (`head_loss`); its metrics are the head's (`loss_tracker`, `head_metrics`). The loss
    of a replica's batch is summed (`mean_loss=False`, TF1's heads) or divided by the global
    batch, as the Estimator's optimizers applied it."""

    def __init__(self, head, mean_loss=False, **kwargs):
        super().__init__(head, **kwargs)
        self.mean_loss = mean_loss

    @property
    def metrics(self):
        return [self.loss_tracker, *self.head_metrics]

    def train_step(self, data):
        inputs, labels, weights = tf.keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            logits = self(inputs, training=True)
            loss = self.batch_loss(labels, logits, weights)
        linear_vars = self.linear.trainable_variables
        dnn_vars = [v for v in self.trainable_variables if all(v is not w for w in linear_vars)]
        gradients = tape.gradient(loss, dnn_vars + linear_vars)
        self.optimizer.apply_gradients(zip(gradients[:len(dnn_vars)], dnn_vars))
        self.linear_optimizer.apply_gradients(zip(gradients[len(dnn_vars):], linear_vars))
        return self.update_metrics(loss, labels, logits, weights)

    def test_step(self, data):
        inputs, labels, weights = tf.keras.utils.unpack_x_y_sample_weight(data)
        logits = self(inputs, training=False)
        return self.update_metrics(self.batch_loss(labels, logits, weights), labels, logits, weights)

    def batch_loss(self, labels, logits, weights):
        loss = self.head_loss(labels, logits, sample_weight=weights)
        if self.mean_loss:
            replicas = tf.distribute.get_strategy().num_replicas_in_sync
            loss /= tf.cast(tf.shape(logits)[0] * replicas, loss.dtype)
        return loss

    def update_metrics(self, loss, labels, logits, weights):
        # Like Keras's own: the loss over the global batch (a mean tracker counts each replica).
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        self.loss_tracker.update_state(loss * replicas, sample_weight=tf.shape(logits)[0])
        for metric in self.head_metrics:
            metric.update_state(labels, logits, sample_weight=weights)
        return {m.name: m.result() for m in self.metrics}
