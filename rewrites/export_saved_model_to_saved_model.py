from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._export import export_path, export_signatures, save_statement, signature_names
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._units import bind_arguments

SIGNATURES = {
    "export_saved_model": ("export_dir_base", "serving_input_receiver_fn", "assets_extra", "as_text",
                           "checkpoint_path", "experimental_mode"),
    "export_savedmodel": ("export_dir_base", "serving_input_receiver_fn", "assets_extra", "as_text",
                          "checkpoint_path", "strip_default_attrs"),
}


def _hoistable(ctx, call: cst.Call, small: cst.BaseSmallStatement) -> bool:
    """Can the export ``call`` run before the rest of ``small`` (its value then read where the
    call was)? Where every other call of the statement encloses it (``print(...)``,
    ``str(...)``) and no lambda, comprehension, conditional or boolean operator decides
    whether it runs."""
    around = []
    node = ctx.parent(call)
    while node is not None and node is not small:
        around.append(node)
        node = ctx.parent(node)
    blocking = (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.IfExp, cst.BooleanOperation,
                cst.Await, cst.Yield)
    if node is None or any(isinstance(n, blocking) for n in around):
        return False
    runs_with = {id(n) for n in around} | {id(c) for c in iter_calls(call)}
    return all(id(c) in runs_with for c in iter_calls(small))


class ExportSavedModelToSavedModel(UnitRule):
    """estimator.export_saved_model(...) becomes `tf.saved_model.save` with the same serving signature.

    ## What it does
    The `serving_input_receiver_fn` becomes a `tf.function` whose input signature is what the
    receiver fed, and which returns what the Estimator's signature returned (the PREDICT
    `predictions` through the model's `predict_step`):

    - `build_raw_serving_input_receiver_fn(features)`: one input per feature, named as the
      feature, of any batch size (`default_batch_size` kept);
    - `build_parsing_serving_input_receiver_fn(feature_spec)`: one string input `examples`
      (serialized `tf.train.Example`s) parsed with `tf.io.parse_example(examples, feature_spec)`;
    - a hand-written function of the file that returns
      `ServingInputReceiver(features, receiver_tensors)` (or `TensorServingInputReceiver`):
      its placeholders become the function's parameters and their `TensorSpec`s its input
      signature, named by their receiver keys (`{"x": tf.placeholder(...)}` bound to a name,
      a dict comprehension of placeholders, a dict filled by a loop of one placeholder
      assignment, placeholders bound to names and gathered in the receiver dict, a single
      placeholder named `input`; `placeholder_with_default` of a literal default too). The function keeps its name, comments and feature code (TF1
      names put in TF2 spelling) and returns the model's `predict_step` on its features.
      Where the model is not visible from the function (it is built inside another function),
      the function takes the model's method that gives what is served, `def
      serving_input_fn(predict)`, and returns the `tf.function`; the export calls
      `serving_input_fn(model.predict_step)` (two models sharing the function, a canned one
      and a model_fn's, each pass their own). A dict of such functions picked by a key
      known only when the program runs (`SERVING_FUNCTIONS[args.export_format]`) converts
      each of them and keeps the pick: `SERVING_FUNCTIONS[args.export_format](model.predict_step)`.
      A serving function of the module that nothing exports with (an alternative the program
      kept) is converted the same way, beside the one exported. A function that returns
      `build_raw_serving_input_receiver_fn(placeholders)()`, the receiver built and called
      at once, feeds its placeholders as they are, as a ServingInputReceiver of them would.

    `estimator.export_saved_model(base, serving_input_receiver_fn)` (and the older
    `export_savedmodel`) becomes `tf.saved_model.save(model, <base>/<timestamp>,
    signatures={...})`; an assigned result is the export directory as bytes, as the
    Estimator returned it. An export inside an expression (`print("exported to",
    estimator.export_saved_model(...))`) is written first, and its directory read where the
    call was, when nothing else in the statement ran before it (only calls around it, such
    as `print(...)`, and no conditional, boolean operator, lambda or comprehension around it). `EstimatorSpec(export_outputs={"name": PredictOutput(predictions)})`
    names the signatures (and, as in the Estimator, a single one is also `serving_default`).

    A canned Estimator (E2K501-E2K503) exported its head's predictions dict as the signature
    `predict`; its `classification` / `regression` signatures (and `serving_default`, one of
    them) needed a single string input, serialized `tf.train.Example`s, and were left out of
    an export whose receiver fed anything else. The converted model's `predict_step` gives
    that dict, exported as `predict`. On a receiver of a single string tensor
    (`build_parsing_serving_input_receiver_fn`, one string placeholder, a CSV row) the
    Estimator also exported its head's classify signature (`classification`, and
    `serving_default`: `classes`, every class name per example, and `scores`, their
    probabilities) and, for a regressor or a binary classifier, its regress signature
    (`regression`: `outputs`), each taking that tensor as `inputs`: each becomes a
    `tf.function` over the predict one, and a small helper of the file,
    `set_signature_methods`, marks them `tensorflow/serving/classify` / `regress` in the
    saved `saved_model.pb` (tf.saved_model.save marks every signature a predict one, and
    TensorFlow Serving's Classify and Regress APIs refuse those). A dict of serving functions
    picked by a flag (`SERVING_FUNCTIONS[args.export_format]`, in this module or another of
    the program) converts each function, and each one of a single string is reported there
    (only one of them had those signatures). A BestExporter's is reported too.

    A `PredictOutput` of something else than the PREDICT predictions (kubeflow's mnist:
    `predictions={"class": ..., "prob": ...}` but `PredictOutput({"probabilities": ...,
    "classes": tf.cast(..., tf.uint8)})`, or `PredictOutput(tensor)`, whose one output TF1
    named `output`) is what the Estimator served: the model gets a `serving_outputs(features)`
    method computing it from the model's output, as the model_fn did, and the serving function
    calls it instead of `predict_step` (`model.predict` still gives the predictions). Export
    outputs of different dicts in one export are refused (one serving method per model).

    A model_fn's `export_outputs` holding `RegressionOutput` / `ClassificationOutput`
    entries are treated the same way: the Estimator made their signatures on a single
    string input only and left them out of an export whose receiver fed anything else
    (warning "Export includes no default signature!" when one was the default), so the
    Keras export leaves them out too and exports the `PredictOutput` ones under their
    names (no `serving_default` where the Estimator had none). A receiver of a single
    string tensor, on which the Estimator did export them, is reported (the predict
    signatures exported all the same), and so is an
    export that would be left with no signature at all (`tests/test_export_outputs.py` runs
    the Estimator's export to check this).

    ## Why
    The SavedModel a server loads is the migration's real output: the same signature names,
    input names, output names and values let clients keep calling it unchanged.
    `tf.saved_model.save` writes it from a Keras 2 and a Keras 3 model alike.

    ## Fix safety
    Safe: loading both exports and calling their `serving_default` on the same inputs gives
    the same predictions (fixtures `export_reload`, `serving_example_proto`,
    `serving_input_fn_exporter`, `serving_functions_table`). The Keras SavedModel also holds the
    model's other functions; the Estimator's held only the serving graph.

    ## Limitations
    `assets_extra`, `as_text=True`, `ClassificationOutput` / `RegressionOutput` signatures
    on serialized Examples and a raw receiver of one tensor rather than a dict are reported (E2K902). A hand-written
    serving function converts only when every use of it is an export e2k converts (one used
    elsewhere, or defined in another module, stays as it was, with a finding), when its
    receiver tensors are placeholders in one of the forms above, and
    when e2k can tell whether its features are a dict or one tensor (a dict literal, `dict(...)`,
    a TensorFlow op, or followed through names, functions of the program and the tuple they
    return: `features, _ = make_parser(with_target=False)(row)`);
    `receiver_tensors_alternatives` are reported.

    ## References
    - https://www.tensorflow.org/guide/migrate/saved_model
    - https://www.tensorflow.org/api_docs/python/tf/saved_model/save
    """

    code = "E2K007"
    summary = "estimator.export_saved_model(base, serving_input_receiver_fn) -> tf.saved_model.save with the same serving signature"
    safety = Safety.SAFE
    order = 52

    cases = [
        Case(
            id="parsing-receiver",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


feature_spec = {"x": tf.io.FixedLenFeature([2], tf.float32)}
serving_input_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(feature_spec)
estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
estimator.export_saved_model("export", serving_input_fn)
''',
            after='''\
import os
import time

import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[2.0]])).batch(1)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.logits(features["x"])

    def predict_step(self, data):
        features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
        logits = self(features, training=False)
        return {"logits": logits}


def build_model():
    model = Model()
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


feature_spec = {"x": tf.io.FixedLenFeature([2], tf.float32)}


# The serving signature the Estimator exported: serialized tf.train.Examples in, predictions
# out.
@tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
def serving_input_fn(examples):
    return model.predict_step(tf.io.parse_example(examples, feature_spec))


model = build_model()
model.fit(input_fn())
tf.saved_model.save(
    model,
    os.fsencode(os.path.join("export", str(int(time.time())))),
    signatures={"serving_default": serving_input_fn})
''',
        ),
        Case(
            id="hand-written-receiver",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def serving_input_fn():
    inputs = {"x": tf.placeholder(tf.float32, [None, 2])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
estimator.export_saved_model("export", serving_input_fn)
''',
            after='''\
import os
import time

import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[2.0]])).batch(1)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.logits(features["x"])

    def predict_step(self, data):
        features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
        logits = self(features, training=False)
        return {"logits": logits}


def build_model():
    model = Model()
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


# The serving signature the Estimator exported: the receiver tensors in, the PREDICT predictions
# out.
@tf.function(input_signature=[{"x": tf.TensorSpec([None, 2], tf.float32, name="x")}])
def serving_input_fn(inputs):
    return model.predict_step(inputs)


model = build_model()
model.fit(input_fn())
tf.saved_model.save(
    model,
    os.fsencode(os.path.join("export", str(int(time.time())))),
    signatures={"serving_default": serving_input_fn})
''',
        ),
        Case(
            id="raw-receiver-built-in-a-function",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    hidden = tf.layers.dense(features["x"], 4, activation=tf.nn.relu)
    logits = tf.layers.dense(hidden, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits, "hidden": hidden})
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def serving_input_fn():
    placeholders = {"x": tf.placeholder(tf.float32, [None, 2], name="x")}
    return tf.estimator.export.build_raw_serving_input_receiver_fn(placeholders)()


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
estimator.export_saved_model("export", serving_input_fn)
''',
            after='''\
import os
import time

import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[2.0]])).batch(1)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = tf.keras.layers.Dense(4, activation=tf.nn.relu)
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        hidden = self.hidden(features["x"])
        return self.logits(hidden)

    def predict_step(self, data):
        features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
        hidden = self.hidden(features["x"])
        logits = self.logits(hidden)
        return {"logits": logits, "hidden": hidden}


def build_model():
    model = Model()
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


# The serving signature the Estimator exported: the receiver tensors in, the PREDICT predictions
# out.
@tf.function(input_signature=[{"x": tf.TensorSpec([None, 2], tf.float32, name="x")}])
def serving_input_fn(placeholders):
    return model.predict_step(placeholders)


model = build_model()
model.fit(input_fn())
tf.saved_model.save(
    model,
    os.fsencode(os.path.join("export", str(int(time.time())))),
    signatures={"serving_default": serving_input_fn})
''',
        ),
        Case(
            id="hand-written-receiver-used-elsewhere",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def serving_input_fn():
    inputs = {"x": tf.placeholder(tf.float32, [None, 2])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
estimator.export_saved_model("export", serving_input_fn)
print(serving_input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def serving_input_fn():
    inputs = {"x": tf.placeholder(tf.float32, [None, 2])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
estimator.export_saved_model("export", serving_input_fn)
# e2k: E2K007 `serving_input_fn` is used outside this Estimator's exports, which still need it as it is
print(serving_input_fn)
''',
            findings=("E2K007",),
        ),
        Case(
            id="canned-estimator-predict-signature",
            before='''\
import tensorflow as tf

COLUMNS = [tf.feature_column.numeric_column("x")]


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [1.0, 2.0]}, [2.0, 4.0])).repeat().batch(2)


def serving_input_fn():
    inputs = {"x": tf.compat.v1.placeholder(tf.float32, [None])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


regressor = tf.estimator.LinearRegressor(feature_columns=COLUMNS)
regressor.train(input_fn, steps=10)
regressor.export_saved_model("/tmp/export", serving_input_fn)
''',
            after='''\
import os
import time

import tensorflow as tf

from e2k_helpers import CannedModel, head_metrics, LinearModel


class LinearRegressorModel(CannedModel):
    """The canned LinearRegressor (tf.estimator): loss averaged over the batch."""

    def __init__(self):
        super().__init__("regression")
        self.linear = LinearModel(1, ["x"])

    def features(self, features):
        x = tf.reshape(tf.cast(features["x"], tf.float32), [-1, 1])
        return (x,)

    def network(self, inputs, training=False):
        x, = inputs
        return self.linear((x,))


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [1.0, 2.0]}, [2.0, 4.0])).repeat().batch(2)


# The serving signature the Estimator exported: the receiver tensors in, the PREDICT predictions
# out.
@tf.function(input_signature=[{"x": tf.TensorSpec([None], tf.float32, name="x")}])
def serving_input_fn(inputs):
    return model.predict_step(inputs)


model = LinearRegressorModel()
model.compile(
    optimizer=tf.keras.optimizers.Ftrl(learning_rate=0.2),
    loss=tf.keras.losses.MeanSquaredError(),
    metrics=head_metrics("regression"))
model.fit(input_fn().map(model.preprocess), steps_per_epoch=10)
tf.saved_model.save(
    model,
    os.fsencode(os.path.join("/tmp/export", str(int(time.time())))),
    signatures={"predict": serving_input_fn})
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        for use in plan.uses("method", *SIGNATURES):
            args = bind_arguments(use.call, SIGNATURES[use.method])
            for name in ("assets_extra", "checkpoint_path"):
                if name in args and _emit.code(args[name].value) != "None":
                    raise Unsupported(f"{use.method}({name}=...) is not converted", args[name])
            if "as_text" in args and _emit.code(args["as_text"].value) != "False":
                raise Unsupported("a SavedModel written as text is not converted", args["as_text"])
            mode = args.get("experimental_mode")
            if mode is not None and not _emit.code(mode.value).endswith(("PREDICT", '"infer"')):
                raise Unsupported("only the PREDICT graph is exported by e2k", mode)
            names = signature_names(plan, ctx, use.call)
            signatures, inline, after = export_signatures(
                args["serving_input_receiver_fn"].value, plan, ctx, self.code, names)
            path = export_path(plan, args["export_dir_base"].value)
            statement = ctx.enclosing_statement(use.call)
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
            if isinstance(small, cst.Expr) and small.value is use.call and not after:
                new = [save_statement(plan, ctx, path, signatures)]
            elif isinstance(small, (cst.Expr, cst.Assign)) and small.value is use.call and (
                    isinstance(small, cst.Expr) or len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
                # Bound to a name: the signatures' methods are set in the directory written.
                target = small.targets[0].target.value if isinstance(small, cst.Assign) else plan.unique_name("export_path")
                new = [_emit.statement("{t} = {p}", t=target, p=path),
                       save_statement(plan, ctx, cst.Name(target), signatures)]
                if after:
                    new.append(_emit.statement(after.format(path=target)))
            elif small is not None and _hoistable(ctx, use.call, small):
                # `print("exported to", estimator.export_saved_model(...))`: the export first, its
                # directory where the call was (nothing else in the statement ran before it).
                target = plan.unique_name("export_dir")
                new = [_emit.statement("{t} = {p}", t=target, p=path),
                       save_statement(plan, ctx, cst.Name(target), signatures)]
                if after:
                    new.append(_emit.statement(after.format(path=target)))
                new.append(statement.deep_replace(use.call, cst.Name(target)).with_changes(leading_lines=[]))
            else:
                raise Unsupported(f"{use.method}(...) is used inside an expression e2k does not rewrite", use.call)
            new[0] = new[0].with_changes(leading_lines=statement.leading_lines)
            plan.replace_statement(statement, [*inline, *new])
            plan.claim_use(use)
            plan.fixed(use.call, self.code, f"{use.method} -> tf.saved_model.save with the serving signature")

