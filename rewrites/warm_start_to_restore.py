from __future__ import annotations

import json
import re

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._units import Binding, accesses_of, bind_arguments, resolve

WARM_START = '''
class {name}({tf}.keras.callbacks.Callback):
    """An Estimator's warm_start_from: when the model first trains, and only if
    its own model_dir (`checkpoints`) holds no checkpoint yet, its trainable
    weights (of the layers named in `layers`, if given) are read from the
    latest checkpoint ModelDirCheckpoints wrote in `directory`; the optimizer
    and the step start fresh."""

    def __init__(self, directory, layers=None, checkpoints=None):
        super().__init__()
        self.directory, self.layers = directory, layers
        self.checkpoints, self.done = checkpoints, False

    def on_train_begin(self, logs=None):
        own = self.checkpoints is not None and self.checkpoints.latest()
        if self.done or own:  # the model_dir's checkpoint is restored instead
            self.done = True
        elif self.model.built:
            self.warm_start()
        else:  # built by its first step: warm-started before that step runs
            step = self.model.train_function

            def zeros(spec):  # a replica's part (Keras 2: a PerReplicaSpec)
                spec = getattr(spec, "_value_specs", [spec])[0]
                return {tf}.zeros([n or 1 for n in spec.shape], spec.dtype)

            def first_step(data):
                self.model.train_function = step
                unpack = {tf}.keras.utils.unpack_x_y_sample_weight
                features = unpack(data.element_spec)[0]
                with self.model.distribute_strategy.scope():
                    features = {tf}.nest.map_structure(zeros, features)
                    self.model(features, training=False)
                self.warm_start()
                return step(data)

            self.model.train_function = first_step

    def warm_start(self):
        self.done, model = True, self.model
        if hasattr({tf}.keras, "version"):  # Keras 3: the weights listed beside
            checkpoint = {tf}.train.Checkpoint(weights=model.weights)
        else:  # Keras 2: the model without its optimizer
            view = {tf}.train.TrackableView(model).children(model).items()
            kept = {{k: v for k, v in view if v is not model.optimizer}}
            checkpoint = {tf}.train.Checkpoint(model={tf}.train.Checkpoint(**kept))
        manager = {tf}.train.CheckpointManager(checkpoint, self.directory, 1)
        latest = manager.latest_checkpoint
        names = [] if latest is None else {tf}.train.list_variables(latest)
        if "_CHECKPOINTABLE_OBJECT_GRAPH" not in {{k for k, _ in names}}:
            raise ValueError(
                f"warm_start_from: no Keras checkpoint in {{self.directory}} "
                "(an Estimator's converts with `e2k checkpoint`)")
        chosen = model.trainable_weights
        if self.layers is not None:
            missing = set(self.layers) - {{layer.name for layer in model.layers}}
            if missing:
                raise ValueError(f"warm_start_from: no layer {{missing}}")
            chosen = [w for layer in model.layers if layer.name in self.layers
                      for w in layer.trainable_weights]
        kept = [(w, w.numpy()) for w in model.weights
                if all(w is not c for c in chosen)]
        status = checkpoint.restore(latest).expect_partial()
        status.assert_existing_objects_matched()
        for weight, value in kept:
            weight.assign(value)
'''

#: Where a warm start reads a directory no model of this program saved in.
FOREIGN = (
    "warm_start_from reads {dir}, which no Estimator converted before it in this file saves in: "
    "if it holds an Estimator's checkpoint, convert it first with `e2k checkpoint` "
    "(docs/checkpoints.md) and warm-start from the converted directory"
)


class WarmStartToRestore(UnitRule):
    """`Estimator(warm_start_from=...)` becomes a callback restoring the pretrained weights.

    ## What it does
    An Estimator warm-started from the model_dir of an Estimator the same file converted
    before it, built from the same model_fn (or the same canned Estimator class):
    `warm_start_from=PRETRAIN_DIR` or
    `warm_start_from=tf.estimator.WarmStartSettings(ckpt_to_initialize_from=PRETRAIN_DIR,
    vars_to_warm_start=...)`. Right after the model is built the converted program creates
    `warm_start = WarmStart(PRETRAIN_DIR, layers=[...], checkpoints=checkpoints)`, a short
    callback class added to the helpers once, given to every `fit`: when the model first
    trains, and only when its own model_dir holds no checkpoint yet (as the Estimator, whose
    model_dir's checkpoint took precedence), its trainable weights are read from the latest
    checkpoint the earlier model's `ModelDirCheckpoints` (E2K402) wrote there. The optimizer
    (its slots, its step) starts fresh and the non-trainable weights (batch normalization's
    moving statistics) keep their initial values, as TF1 warm-started only TRAINABLE
    variables. `vars_to_warm_start=".*"` or None (the default) selects every trainable
    weight; another regular expression becomes the list of layers it selects: TF1 matched
    it against variable names (`re.match`, `body_1/kernel:0`), which the converted model
    keeps as layer names for each layer the model_fn made with `tf.layers.dense` or
    `tf.layers.conv1d/2d/3d` and a literal `name=`.

    ## Why
    Keras has no warm start: `fit` trains the model from its initializers. Restoring the
    whole earlier checkpoint (`model.load_weights`, `tf.train.Checkpoint(model=model)`)
    would also restore the earlier optimizer's slots and step, and every weight rather than
    the selected ones. The Estimator's `WarmStartSettings` itself is gone with `tf.estimator`
    in TensorFlow 2.16.

    ## Fix safety
    Safe: the same weights start from the same values (fixture `warm_start_fine_tune`: a
    model warm-started from the layers `body_1` and `body_2` of a pretrained one trains like
    the Estimator on TF 2.15 and the newest TensorFlow). The checkpoint must be one a
    converted program wrote (TF2 object-based): an Estimator's `model.ckpt-N` stops the
    program with a message naming `e2k checkpoint`.

    ## Limitations
    Refused, naming why, so that a warm start is never dropped: a directory no earlier
    Estimator of the file saves in (an Estimator's checkpoint on disk: convert it with `e2k
    checkpoint`, docs/checkpoints.md); another model_fn or canned class than the model
    saved there; `vars_to_warm_start` as a list (TF1 read those from every global variable,
    optimizer slots included), or a regular expression on a canned Estimator or on a
    model_fn whose variables are not all `tf.layers` layers with literal names, or that
    selects part of a layer's variables; `var_name_to_vocab_info` and
    `var_name_to_prev_var_name` (renamed or remapped variables).

    ## References
    - https://www.tensorflow.org/api_docs/python/tf/estimator/WarmStartSettings
    - https://www.tensorflow.org/guide/migrate/checkpoint_saver
    - https://www.tensorflow.org/api_docs/python/tf/train/Checkpoint
    """

    code = "E2K410"
    summary = "warm_start_from -> a callback restoring the earlier model's trainable weights before the first fit"
    safety = Safety.SAFE
    order = 36

    cases = [
        Case(
            id="warm-start-layers",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    hidden = tf.layers.dense(features["x"], 4, name="body")
    logits = tf.layers.dense(hidden, 1, name="head")
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


pretrained = tf.estimator.Estimator(model_fn, model_dir="/tmp/pretrain")
pretrained.train(input_fn, steps=10)
settings = tf.estimator.WarmStartSettings("/tmp/pretrain", vars_to_warm_start="body.*")
estimator = tf.estimator.Estimator(model_fn, model_dir="/tmp/finetune", warm_start_from=settings)
estimator.train(input_fn, steps=10)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K402 ModelDirCheckpoints restores and saves checkpoints in model_dir, as the Estimator did.
import tensorflow as tf

from e2k_helpers import ModelDirCheckpoints, WarmStart


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [[2.0]])).repeat().batch(1)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = tf.keras.layers.Dense(4, name="body")
        self.logits = tf.keras.layers.Dense(1, name="head")

    def call(self, features, training=False):
        hidden = self.hidden(features["x"])
        return self.logits(hidden)


def build_model():
    model = Model()
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
checkpoints = ModelDirCheckpoints(model, "/tmp/pretrain", save_secs=600)
model.fit(input_fn(), steps_per_epoch=10, callbacks=[checkpoints])
model = build_model()
checkpoints = ModelDirCheckpoints(model, "/tmp/finetune", save_secs=600)
warm_start = WarmStart("/tmp/pretrain", layers=["body"], checkpoints=checkpoints)
model.fit(input_fn(), steps_per_epoch=10, callbacks=[checkpoints, warm_start])
''',
        ),
        Case(
            id="foreign-directory",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, warm_start_from="/tmp/previous")
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


# e2k: E2K410 warm_start_from reads "/tmp/previous", which no Estimator converted before it in this file saves in: if it holds an Estimator's checkpoint, convert it first with `e2k checkpoint` (docs/checkpoints.md) and warm-start from the converted directory
estimator = tf.estimator.Estimator(model_fn, warm_start_from="/tmp/previous")
estimator.train(input_fn)
''',
            findings=("E2K410",),
        ),
    ]

    def required(self, unit, plan, ctx) -> str | None:
        if "warm_start_from" in unit.args and _emit.code(unit.arg_value("warm_start_from")) != "None":
            return "the Keras program would run without the Estimator's warm_start_from"
        return None

    def plan(self, unit, plan, ctx) -> None:
        value = unit.arg_value("warm_start_from")
        if value is None:
            return
        plan.claimed_args.add("warm_start_from")
        if _emit.code(value) == "None":
            return
        settings, binding = value, None
        if isinstance(value, cst.Name):
            bound = resolve(ctx, value)
            if isinstance(bound, Binding) and isinstance(bound.value, cst.Call) \
                    and ctx.api_path(bound.value.func) == "estimator.WarmStartSettings":
                settings, binding = bound.value, bound
        if isinstance(settings, cst.Call) and ctx.api_path(settings.func) == "estimator.WarmStartSettings":
            args = bind_arguments(settings, ("ckpt_to_initialize_from", "vars_to_warm_start",
                                             "var_name_to_vocab_info", "var_name_to_prev_var_name"))
            for name in ("var_name_to_vocab_info", "var_name_to_prev_var_name"):
                if name in args and _emit.code(args[name].value) not in ("None", "{}"):
                    raise Unsupported(f"WarmStartSettings({name}=...) renames or remaps variables: not converted",
                                      args[name].value, self.code)
            if "ckpt_to_initialize_from" not in args:
                raise Unsupported("WarmStartSettings without ckpt_to_initialize_from", settings, self.code)
            directory = args["ckpt_to_initialize_from"].value
            selection = args["vars_to_warm_start"].value if "vars_to_warm_start" in args else None
        else:
            directory, selection = value, None
        self._check_source(unit, ctx, directory)
        layers = self._layers(unit, ctx, selection)
        if binding is not None:
            plan.remove_binding_if_only_here(binding, value)
        helper = plan.add_helper("WarmStart", lambda name: _emit.statements(WARM_START, name=name, tf=plan.tf))
        args = [cst.Arg(plan.stable_expression(directory, "warm_start_dir"))]
        if layers is not None:
            args.append(_emit.keyword_arg("layers", _emit.expr(json.dumps(layers))))
        if plan.checkpoints is not None:
            args.append(_emit.keyword_arg("checkpoints", cst.Name(plan.checkpoints)))
        name = plan.unique_name("warm_start")
        call = cst.Call(cst.Name(helper), args=_emit.call_args(args))
        plan.after_build.append(_emit.fit_line(_emit.statement("{n} = {c}", n=name, c=call), 0,
                                               ctx.module.default_indent))
        plan.add_fit_callback(cst.Name(name))
        what = "every trainable weight" if layers is None else f"the layers {', '.join(layers) or '(none)'}"
        plan.fixed(value, self.code, f"warm_start_from -> a WarmStart callback restoring {what} before the first fit")

    def _check_source(self, unit, ctx, directory: cst.BaseExpression) -> None:
        """The directory is the model_dir of an Estimator of the same model built before this one."""
        wanted = _emit.code(directory)
        earlier = [other for other in getattr(ctx, "estimator_units", [])
                   if other is not unit and ctx.position(other.call) < ctx.position(unit.call)
                   and _emit.code(other.arg_value("model_dir") or other.config_value("model_dir") or cst.Name("None"))
                   == wanted]
        if not earlier:
            raise Unsupported(FOREIGN.format(dir=wanted), directory, self.code)
        other = earlier[-1]
        same = other.api_path == unit.api_path and all(
            _emit.code(other.arg_value(a) or cst.Name("None")) == _emit.code(unit.arg_value(a) or cst.Name("None"))
            for a in ("model_fn", "hidden_units", "feature_columns", "n_classes", "label_dimension",
                      "linear_feature_columns", "dnn_feature_columns", "dnn_hidden_units"))
        if not same:
            raise Unsupported(f"warm_start_from reads {wanted}, where another model than this one saves "
                              "(another model_fn, class or columns): which weights map is not known", directory,
                              self.code)

    def _layers(self, unit, ctx, selection: cst.BaseExpression | None) -> list[str] | None:
        """None: every trainable weight; else the layers the regular expression selects."""
        if selection is None or _emit.code(selection) == "None":
            return None
        if not isinstance(selection, cst.SimpleString):
            raise Unsupported("vars_to_warm_start other than a literal regular expression (a list read "
                              "every global variable, optimizer slots included): not converted", selection, self.code)
        pattern = selection.evaluated_value
        if pattern in (".*", ""):
            return None
        model_fn = unit.arg_value("model_fn")
        function = resolve(ctx, model_fn) if isinstance(model_fn, cst.Name) else None
        if not isinstance(function, cst.FunctionDef):
            raise Unsupported(f"vars_to_warm_start={pattern!r}: the variables it selects are not known "
                              "here (only a model_fn's named tf.layers are)", selection, self.code)
        chosen = []
        for call in _emit.walk(function):
            if not isinstance(call, cst.Call):
                continue
            path = ctx.api_path(call.func) or ""
            made = resolve(ctx, call.func) if isinstance(call.func, cst.Name) else None
            if isinstance(made, cst.FunctionDef) or any(k in path for k in VARIABLE_MAKERS):
                raise Unsupported(f"vars_to_warm_start={pattern!r}: `{_emit.code(call.func)}` in the model_fn may "
                                  "make variables whose names are not known here", call, self.code)
            if not path.startswith("layers."):
                continue
            name = next((a for a in call.args if a.keyword is not None and a.keyword.value == "name"), None)
            if path not in NAMED_LAYERS or name is None or not isinstance(name.value, cst.SimpleString):
                raise Unsupported(f"vars_to_warm_start={pattern!r}: `{_emit.code(call.func)}` without a literal "
                                  "name= (its variables' names are not known here)", call, self.code)
            layer = name.value.evaluated_value
            matches = {bool(re.match(pattern, f"{layer}/{v}:0")) for v in ("kernel", "bias")}
            if len(matches) > 1:
                raise Unsupported(f"vars_to_warm_start={pattern!r} selects part of the layer {layer}'s variables",
                                  call, self.code)
            if matches.pop():
                chosen.append((ctx.position(call), layer))
        return [layer for _, layer in sorted(chosen)]


#: tf.layers functions whose TF1 variables are `<name>/kernel` and `<name>/bias`.
NAMED_LAYERS = frozenset({"layers.dense", "layers.conv1d", "layers.conv2d", "layers.conv3d"})
#: API paths (parts) of what makes variables in a model_fn besides those layers.
VARIABLE_MAKERS = ("get_variable", "Variable", "keras.", "contrib.", "layers.Dense", "layers.Conv",
                   "batch_norm", "embedding", "feature_column", "layers.BatchNormalization")

