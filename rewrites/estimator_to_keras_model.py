from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._modelfn import convert_model_fn
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._units import accesses_of, resolve


class EstimatorToKerasModel(UnitRule):
    """Estimator(model_fn=...) becomes a Keras model, built and compiled by a function.

    ## What it does
    Finds `tf.estimator.Estimator(model_fn=...)` (any import style: `tf.estimator`,
    `tf.compat.v1.estimator`, `import tensorflow.compat.v1 as tf1`, `from tensorflow import
    estimator`) and replaces the model_fn with a Keras model and a function that builds it,
    creates the optimizer and calls `compile`. The Estimator variable becomes the model
    (named `model`). The model_fn is read mode by mode, back from what each EstimatorSpec
    returns:

    - TRAIN's loss gives `compile(loss=...)` and the *model output*; the statements that
      compute it from `features` are the forward pass.
    - TRAIN's `train_op` (`optimizer.minimize(loss)`) gives `compile(optimizer=...)`, with
      its learning-rate schedule.
    - EVAL's `eval_metric_ops` give `compile(metrics=[...])`, under the same names.
    - PREDICT's `predictions` dict gives the model a `predict_step`.

    A forward pass that is one chain of layers from `features` becomes
    `tf.keras.Sequential([...])`. Anything else becomes a `tf.keras.Model` subclass whose
    `__init__` creates the layers (named after the user's variables: `conv1 = ...` becomes
    `self.conv1`) and whose `call(features, training=False)` runs the forward statements,
    comments included; `mode == ModeKeys.TRAIN` tests become the `training` flag, `params`
    becomes a constructor argument, layers built in a loop become a list of layers. Layers,
    losses, optimizers, schedules and metrics are translated by their own rules (E2K3xx,
    E2K2xx, E2K1xx).

    ## Why
    `tf.estimator` was removed in TensorFlow 2.16. In Keras, the model_fn's parts have
    separate homes: the layers make the model, the loss, optimizer and metrics go to
    `compile`, predictions to `predict_step`, and the train op disappears because `fit`
    applies the gradients.

    ## Fix safety
    Safe: the fixtures (TensorFlow's own MNIST CNN and iris custom-Estimator tutorials among
    them) train to the same losses, weights and metrics under `e2k parity` with 2 replicas,
    on TF 2.15 and on the newest TensorFlow. The model_fn is converted entirely or not at
    all: any statement the converter cannot place leaves the model_fn and its Estimator
    untouched, marked E2K901.

    ## Limitations
    Not converted (E2K901, the model_fn left as it was): `tf.get_variable`, `tf.Variable`,
    `tf.while_loop`, `variable_scope(reuse=...)`, `Scaffold`, gradient code other than
    `minimize`, EstimatorSpec hooks and `export_outputs`, `if` statements that do not test
    the mode, a model output that depends on the labels. `model_dir` and
    `warm_start_from` are reported as E2K400.

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    - https://www.tensorflow.org/guide/migrate/model_mapping
    """

    code = "E2K001"
    summary = "Estimator(model_fn=...) -> a function that builds and compiles a Keras model"
    safety = Safety.SAFE
    order = 10
    constructors = ("estimator.Estimator",)
    signature = ("model_fn", "model_dir", "config", "params", "warm_start_from")

    cases = [
        Case(
            id="sequential",
            before='''\
import tensorflow.compat.v1 as tf1


def input_fn():
    return tf1.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf1.layers.Dense(1)(features)
    loss = tf1.losses.mean_squared_error(labels=labels, predictions=logits)
    train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf1.train.get_global_step())
    return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf1.estimator.Estimator(model_fn=model_fn)
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn())
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is not type(self):
            return
        model_fn = unit.arg_value("model_fn")
        if model_fn is None:
            raise Unsupported("the Estimator has no model_fn", unit.call)
        fn = resolve(ctx, model_fn)
        if not isinstance(fn, cst.FunctionDef):
            raise Unsupported("the model_fn is not a function defined in this file", model_fn)
        reads = accesses_of(ctx, fn.name) or []
        if any(read is not model_fn for read in reads):
            raise Unsupported(f"`{fn.name.value}` is used elsewhere too; e2k replaces it", fn.name)
        scope = ctx.scope(fn)
        taken = {a.name for a in scope.assignments} | {a.node.value for a in scope.accesses}
        conversion = convert_model_fn(fn, ctx, plan.tf, taken, plan)
        statements = list(conversion.statements)
        for i in range(1, len(statements)):
            # Definitions that replace one keep the blank lines between definitions.
            blank = [_emit.blank_line()] * (2 if ctx.parent(fn) is ctx.module else 1)
            statements[i] = statements[i].with_changes(leading_lines=blank)
        plan.replace_statement(fn, statements)
        params = unit.arg_value("params")
        if conversion.takes_params:
            if params is None:
                raise Unsupported("the model_fn reads `params`, but the Estimator passes none", fn)
            build = _emit.statement("{var} = {name}({params})", var=plan.model_var, name=conversion.builder_name, params=params)
        else:
            build = _emit.statement("{var} = {name}()", var=plan.model_var, name=conversion.builder_name)
        plan.build.append(build)
        plan.claimed_args.update({"model_fn", "config", "params"})
        plan.fixed(unit.call, self.code, f"Estimator -> Keras model built by `{conversion.builder_name}()`")
