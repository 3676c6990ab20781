from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._symbols import tf2_respellings
from estimator2keras._units import accesses_of, bind_arguments, resolve_call

RAW = frozenset({"estimator.export.build_raw_serving_input_receiver_fn"})
PARSING = frozenset({"estimator.export.build_parsing_serving_input_receiver_fn"})
PREDICT_OUTPUT = frozenset({"estimator.export.PredictOutput"})
DEFAULT_KEYS = frozenset({"saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY",
                          "saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY"})
DEFAULT_SIGNATURE = "serving_default"
SIGNATURES = {
    "export_saved_model": ("export_dir_base", "serving_input_receiver_fn", "assets_extra", "as_text",
                           "checkpoint_path", "experimental_mode"),
    "export_savedmodel": ("export_dir_base", "serving_input_receiver_fn", "assets_extra", "as_text",
                          "checkpoint_path", "strip_default_attrs"),
}
SERVING_SIGNATURE = '''
def {name}(features, batch_size=None):
    """The inputs build_raw_serving_input_receiver_fn served: one per feature, any batch size."""
    return {{key: {tf}.TensorSpec([batch_size, *t.shape[1:]], t.dtype, name=key) for key, t in features.items()}}
'''


class ExportSavedModelToSavedModel(UnitRule):
    """estimator.export_saved_model(...) becomes `tf.saved_model.save` with the same serving signature.

    ## What it does
    The `serving_input_receiver_fn` becomes a `tf.function` whose input signature is what the
    receiver fed, and which returns what the Estimator's signature returned (the PREDICT
    `predictions` through the model's `predict_step`):

    - `build_raw_serving_input_receiver_fn(features)`: one input per feature, named as the
      feature, of any batch size (`default_batch_size` kept);
    - `build_parsing_serving_input_receiver_fn(feature_spec)`: one string input `examples`
      (serialized `tf.train.Example`s) parsed with `tf.io.parse_example(examples, feature_spec)`.

    `estimator.export_saved_model(base, serving_input_receiver_fn)` (and the older
    `export_savedmodel`) becomes `tf.saved_model.save(model, <base>/<timestamp>,
    signatures={...})`; an assigned result is the export directory as bytes, as the
    Estimator returned it. `EstimatorSpec(export_outputs={"name": PredictOutput(predictions)})`
    names the signatures (and, as in the Estimator, a single one is also `serving_default`).

    ## Why
    The SavedModel a server loads is the migration's real output: the same signature names,
    input names, output names and values let clients keep calling it unchanged.
    `tf.saved_model.save` writes it from a Keras 2 and a Keras 3 model alike.

    ## Fix safety
    Safe: loading both exports and calling their `serving_default` on the same inputs gives
    the same predictions (fixture `export_reload`). The Keras SavedModel also holds the
    model's other functions; the Estimator's held only the serving graph.

    ## Limitations
    A hand-written `serving_input_receiver_fn` (returning a `ServingInputReceiver`),
    `assets_extra`, `as_text=True`, `ClassificationOutput` / `RegressionOutput` signatures
    and a raw receiver of one tensor rather than a dict are reported (E2K902).

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
import tensorflow as tf
import os
import time


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[2.0]])).batch(1)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        logits = self.logits(features["x"])
        return logits

    def predict_step(self, data):
        features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
        logits = self(features, training=False)
        return {"logits": logits}


def build_model():
    model = Model()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


feature_spec = {"x": tf.io.FixedLenFeature([2], tf.float32)}


# The serving signature the Estimator exported: serialized tf.train.Examples in, predictions out.
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
            names = self._signature_names(plan, ctx, use.call)
            function = self._serving_function(args["serving_input_receiver_fn"].value, plan, ctx, use.call)
            path = _emit.expr("os.fsencode(os.path.join({base}, str(int(time.time()))))",
                              base=args["export_dir_base"].value)
            plan.imports += [("os", None, None), ("time", None, None)]
            statement = ctx.enclosing_statement(use.call)
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
            signatures = cst.Dict([
                cst.DictElement(cst.SimpleString(f'"{name}"'), cst.Name(function),
                                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(names) - 1
                                else cst.MaybeSentinel.DEFAULT)
                for i, name in enumerate(names)
            ])
            if isinstance(small, cst.Expr) and small.value is use.call:
                new = [self._save(plan, ctx, path, signatures)]
            elif isinstance(small, cst.Assign) and small.value is use.call and len(small.targets) == 1 \
                    and isinstance(small.targets[0].target, cst.Name):
                target = small.targets[0].target.value
                new = [_emit.statement("{t} = {p}", t=target, p=path),
                       self._save(plan, ctx, cst.Name(target), signatures)]
            else:
                raise Unsupported(f"{use.method}(...) is used inside an expression e2k does not rewrite", use.call)
            new[0] = new[0].with_changes(leading_lines=statement.leading_lines)
            plan.replace_statement(statement, [*self.inline, *new])
            plan.claim_use(use)
            plan.fixed(use.call, self.code, f"{use.method} -> tf.saved_model.save with the serving signature")

    def _save(self, plan, ctx, path, signatures) -> cst.BaseStatement:
        save = _emit.statement("{tf}.saved_model.save({m}, {p}, signatures={s})",
                               tf=plan.tf, m=plan.model_var, p=path, s=signatures)
        return _emit.fit_line(save, 0, ctx.module.default_indent)

    def _signature_names(self, plan, ctx, call) -> list[str]:
        """The Estimator's export signatures: `serving_default`, or `export_outputs`' names."""
        if plan.predictions_kind is None:
            raise Unsupported("the model_fn returns no predictions in PREDICT mode; there is nothing to export", call)
        if plan.spec_export_outputs is None:
            return [DEFAULT_SIGNATURE]
        outputs, follow = plan.spec_export_outputs
        outputs = follow(outputs)
        if not isinstance(outputs, cst.Dict):
            raise Unsupported("export_outputs is not a dict e2k can read", outputs)
        names = []
        predictions = follow(plan.spec_predictions) if plan.spec_predictions is not None else None
        for element in outputs.elements:
            if not isinstance(element, cst.DictElement):
                raise Unsupported("export_outputs is not a dict e2k can read", outputs)
            if isinstance(element.key, cst.SimpleString):
                name = element.key.evaluated_value
            elif ctx.api_path(element.key) in DEFAULT_KEYS:
                name = DEFAULT_SIGNATURE
            else:
                raise Unsupported("an export_outputs key that is not a string", element.key)
            value = follow(element.value)
            ok = isinstance(value, cst.Call) and ctx.call_api_path(value) in PREDICT_OUTPUT and len(value.args) == 1
            if not ok or follow(value.args[0].value) is not predictions:
                raise Unsupported(
                    "e2k exports PredictOutput(<the PREDICT predictions>) signatures; this export output is another",
                    element)
            names.append(name)
        if len(names) == 1 and names[0] != DEFAULT_SIGNATURE:
            names.append(DEFAULT_SIGNATURE)  # the Estimator made a single export output the default too
        return names

    def _serving_function(self, node, plan, ctx, call) -> str:
        """Define the serving tf.function (in place of a named receiver fn); returns its name."""
        self.inline: list[cst.BaseStatement] = []
        receiver, binding = resolve_call(ctx, node, RAW | PARSING)
        if receiver is None:
            raise Unsupported(
                "the serving_input_receiver_fn is not build_raw_serving_input_receiver_fn(...) or "
                "build_parsing_serving_input_receiver_fn(...); a hand-written one is not converted", node)
        raw = ctx.call_api_path(receiver) in RAW
        args = bind_arguments(receiver, ("features", "default_batch_size") if raw else ("feature_spec", "default_batch_size"))
        batch = args["default_batch_size"].value if "default_batch_size" in args else cst.Name("None")
        outputs = "model.predict_step({x})" if plan.predictions_kind == "dict" else '{{"output": model.predict_step({x})}}'
        outputs = outputs.replace("model.", f"{plan.model_var}.")
        if raw:
            signature = self._raw_signature(args["features"].value, batch, plan, ctx)
            comment = "The serving signature the Estimator exported: one input per feature, predictions out."
            template = "@{tf}.function(input_signature=[{sig}])\ndef {name}(features):\n    return " + outputs.format(x="features")
        else:
            spec = args["feature_spec"].value
            spec = _emit.replace_in(spec, dict(tf2_respellings(ctx, spec, plan.tf)))
            signature = _emit.expr('{tf}.TensorSpec([{b}], {tf}.string, name="examples")', tf=plan.tf, b=batch)
            comment = "The serving signature the Estimator exported: serialized tf.train.Examples in, predictions out."
            parsed = _emit.code(_emit.expr("{tf}.io.parse_example(examples, {s})", tf=plan.tf, s=spec))
            template = "@{tf}.function(input_signature=[{sig}])\ndef {name}(examples):\n    return " + outputs.format(x=parsed)
        if binding is not None:
            reads = accesses_of(ctx, binding.target) or []
            if not all(plan.owns(read) for read in reads):
                raise Unsupported(f"`{binding.name}` is used outside this Estimator's calls", binding.target)
            if ctx.scope(binding.target) is not ctx.scope(plan.unit.target):
                raise Unsupported("the serving_input_receiver_fn is defined where the model is not visible", binding.target)
            name = binding.name
        else:
            name = plan.unique_name("serving_fn")
        function = _emit.statement(template, tf=plan.tf, sig=signature, name=name)
        function = _emit.with_comment(function, comment)
        blank = [_emit.blank_line()] * (2 if ctx.parent(plan.unit.statement) is ctx.module else 1)
        function = function.with_changes(body=function.body.with_changes(footer=blank))
        if binding is not None:
            # Blank lines before a definition (the replaced statement's own blank lines give way).
            plan.replace_statement(binding.statement, [function.with_changes(leading_lines=[*blank, *function.leading_lines])])
        else:
            self.inline.append(function.with_changes(leading_lines=[*blank, *function.leading_lines]))
        return name

    def _raw_signature(self, features, batch, plan, ctx) -> cst.BaseExpression:
        if isinstance(features, cst.Dict) and features.elements and all(
            isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
            and isinstance(e.value, cst.Call) and ctx.call_api_path(e.value) == "placeholder"
            for e in features.elements
        ):
            # Placeholders do not exist in TensorFlow 2: their dtype and shape become a TensorSpec.
            specs = []
            for i, element in enumerate(features.elements):
                found = bind_arguments(element.value, ("dtype", "shape", "name"))
                shape = found.get("shape")
                if shape is None or not isinstance(shape.value, (cst.List, cst.Tuple)) or not shape.value.elements:
                    raise Unsupported("a placeholder without a literal shape", element.value)
                dims = [batch.deep_clone(), *(e.value for e in shape.value.elements[1:])]
                dtype = found["dtype"].value
                dtype = _emit.replace_in(dtype, dict(tf2_respellings(ctx, dtype, plan.tf)))
                spec = _emit.expr("{tf}.TensorSpec([{d}], {t}, name={k})", tf=plan.tf,
                                  d=", ".join(_emit.code(d) for d in dims), t=dtype, k=element.key)
                comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(features.elements) - 1 \
                    else cst.MaybeSentinel.DEFAULT
                specs.append(cst.DictElement(element.key, spec, comma=comma))
            return cst.Dict(specs)
        if not isinstance(features, (cst.Dict, cst.Name)):
            raise Unsupported("a raw serving receiver of one tensor (not a dict of features) is not converted", features)
        helper = plan.add_helper("serving_signature", lambda name: _emit.statements(SERVING_SIGNATURE, name=name, tf=plan.tf))
        respelled = _emit.replace_in(features, dict(tf2_respellings(ctx, features, plan.tf)))
        if _emit.code(batch) == "None":
            return _emit.expr("{h}({f})", h=helper, f=respelled)
        return _emit.expr("{h}({f}, batch_size={b})", h=helper, f=respelled, b=batch)
