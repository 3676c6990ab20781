from __future__ import annotations

import libcst as cst

from estimator2keras._rule import Case, Safety, Unsupported, UnitRule


class AddMetricsToCompile(UnitRule):
    """`estimator = tf.estimator.add_metrics(estimator, metric_fn)` becomes more metrics in the Keras model's `compile()` (and `forward_features`, features in the served predictions).

    ## What it does
    `add_metrics` (`tf.estimator`, `tf.contrib.estimator`) wrapped an Estimator so that its
    evaluation also reported the metrics `metric_fn(labels, predictions[, features, config])`
    returns. The Keras model compiles them with its own, under the same names, so
    `model.evaluate(..., return_dict=True)` reports every key the Estimator's `evaluate()` did:

    - the `add_metrics` statement goes, and the uses of the name it bound are the model's
      (`estimator.train(...)`, `train_and_evaluate(estimator, ...)` after it convert as usual);
    - each `tf.metrics` call of the metric_fn is translated by E2K202, its `predictions` read as
      what the Estimator gave the metric_fn: for a custom Estimator, the EVAL EstimatorSpec's
      `predictions` (`predictions["y"]` is the tensor the model_fn predicted under `"y"`, read
      back to the model output: the output itself, its sigmoid or softmax, its argmax...); for
      a canned one, the head's predictions (`predictions` of a regressor; `logits`,
      `logistic`, `class_ids` of a binary classifier; `logits`, `probabilities`, `class_ids`
      of a multi-class one); a metric named as one of the head's (`"precision"`) replaces it,
      as it did in the Estimator's `evaluate()`: the head's list leaves that one out
      (`*(m for m in head_metrics("binary") if m.name != "precision")`);
    - the metric_fn's local names stand for their values; the metric_fn (a function, or a
      lambda returning the dict) goes when nothing else reads it.

    `estimator = tf.contrib.estimator.forward_features(estimator, keys)`, the other wrapper
    (a key column passed through batch prediction, the babyweight course), is followed the same
    way. In PREDICT mode it set `predictions[key] = features[key]` for each key (every feature
    without `keys`), and the same outputs in the `predict` / `serving_default` signatures. The
    canned Keras model's `predict_step` does that where it gets the raw features, which is
    where it is served: the exported `predict` signature gives the keys back.

    ## Why
    `tf.estimator.add_metrics` is gone with the Estimator; dashboards and hyperparameter
    tuning (Cloud ML's `rmse` metric of the babyweight course) read the names it added.

    ## Fix safety
    Safe: each metric is the Keras metric E2K202 checks against TF1's own on the same batches.
    A metric of something else than the labels and the model's predictions (the `features`,
    the RunConfig), a metric_fn e2k cannot read, or `add_metrics` applied on some paths only
    (or before an evaluation that reported without its metrics) is refused with the reason;
    a metric E2K202 does not convert is marked in the metric_fn, which then stays.

    forward_features existed in tf.contrib only: no parity run can execute the original, so
    its conversion is checked against TensorFlow 1.15's source by serving the converted model
    on TF 2.15 and the newest TF (tests/test_forward_features.py).

    ## Limitations
    Canned Estimators with a `weight_column` (their head's metrics were weighted, the added
    ones were not), TPUEstimators and Keras models wrapped by `model_to_estimator` keep
    `add_metrics` for a human. `forward_features` converts for canned Estimators whose
    `predict()` the program does not call (`model.predict` reads the preprocessed dataset,
    where the raw features are gone); a model_fn's Estimator keeps it for a human, and so do
    keys that are not strings e2k can read.

    ## References
    - https://github.com/tensorflow/estimator/blob/master/tensorflow_estimator/python/estimator/extenders.py
    - https://www.tensorflow.org/api_docs/python/tf/keras/Model#compile
    """

    code = "E2K205"
    summary = "estimator = add_metrics(estimator, metric_fn) -> the metric_fn's tf.metrics in compile(metrics=...)"
    safety = Safety.SAFE
    order = 12

    cases = [
        Case(
            id="custom-estimator",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[2.0], [4.0]])).batch(2)


def model_fn(features, labels, mode):
    output = tf.compat.v1.layers.dense(features["x"], 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, output)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, predictions={"y": output})


def my_metrics(labels, predictions):
    return {"rmse": tf.compat.v1.metrics.root_mean_squared_error(labels, predictions["y"])}


estimator = tf.estimator.Estimator(model_fn)
estimator = tf.estimator.add_metrics(estimator, my_metrics)
estimator.train(input_fn, steps=2)
print(estimator.evaluate(input_fn)["rmse"])
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[2.0], [4.0]])).batch(2)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.output_layer = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.output_layer(features["x"])

    def predict_step(self, data):
        features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
        output = self(features, training=False)
        return {"y": output}


def build_model():
    model = Model()
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1),
        loss=tf.keras.losses.MeanSquaredError(),
        metrics=[tf.keras.metrics.RootMeanSquaredError(name="rmse")])
    return model


model = build_model()
model.fit(input_fn(), steps_per_epoch=2)
print(model.evaluate(input_fn(), return_dict=True)["rmse"])
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if unit.forwarded:
            if not unit.forwarding_converted:
                raise Unsupported("forward_features on an Estimator of a model_fn is not converted yet (e2k converts "
                                  "it for canned Estimators): add the features to the model_fn's predictions",
                                  unit.forwarded[0].call)
            for wrapper in unit.forwarded:
                plan.remove_statement(wrapper.statement)
                plan.fixed(wrapper.call, self.code, "forward_features -> the features in the served predictions")
        if not unit.wrappers:
            return
        if getattr(unit, "metric_fns", None) is None:
            raise Unsupported("add_metrics on this kind of Estimator is not converted yet; add its metrics to the "
                              "model's compile(metrics=...) by hand", unit.wrappers[0].call)
        for wrapper in unit.wrappers:
            plan.remove_statement(wrapper.statement)
            plan.fixed(wrapper.call, self.code, "add_metrics -> the metric_fn's metrics in compile()")
        from estimator2keras._units import accesses_of

        calls = [w.call for w in unit.wrappers]
        for metric_fn in unit.metric_fns:
            fn = metric_fn.fn
            if not isinstance(fn, cst.FunctionDef):
                continue  # a lambda: written in the add_metrics call, it goes with it
            if metric_fn.left or ctx.path_of(fn) != ctx.path_of(unit.call) or any(fn is other for other in plan.owned):
                continue
            reads = accesses_of(ctx, fn.name)
            if reads and all(ctx.within(read, calls) for read in reads):
                plan.remove_statement(fn)  # only add_metrics read it
                plan.owned.append(fn)
