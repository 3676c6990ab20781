from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule
from estimator2keras._training import model_dir_checkpoints

SETTINGS = (
    "model_dir", "save_checkpoints_steps", "save_checkpoints_secs", "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours", "checkpoint_save_graph_def",
)
#: RunConfig's default when neither save_checkpoints_steps nor save_checkpoints_secs is given.
DEFAULT_SECS = "600"
COMMENT = "ModelDirCheckpoints restores and saves checkpoints in model_dir, as the Estimator did."
NO_CHECKPOINTS = (
    "the Estimator saved no checkpoints (save_checkpoints_steps and save_checkpoints_secs are None), so its "
    "evaluate() and predict() read an untrained model; Keras uses the trained one"
)


class ModelDirToCheckpointManager(UnitRule):
    """An Estimator's `model_dir` and checkpoint settings become a checkpointing callback.

    ## What it does
    With `model_dir` (given to the Estimator or its `RunConfig`), right after the model is
    built the converted program creates `checkpoints = ModelDirCheckpoints(model, model_dir,
    max_to_keep=keep_checkpoint_max, keep_checkpoint_every_n_hours=..., save_steps=...,
    save_secs=...)`, a short callback class added to the file once, that wraps a
    `tf.train.Checkpoint` of the model and its optimizer and a `tf.train.CheckpointManager`:

    - the latest checkpoint in `model_dir` (weights, optimizer slots, global step) is
      restored when the model first trains, evaluates or predicts: it is given to every
      `fit`, `evaluate` and `predict` of the model;
    - `fit` saves every `save_checkpoints_steps` steps or `save_checkpoints_secs` seconds (600
      when neither is set, RunConfig's default) and when it ends, as the Estimator's
      CheckpointSaverHook did, numbering checkpoints by global step;
    - `train(max_steps=N)` trains only up to global step N from `checkpoints.global_step()`
      (E2K003), so that a second run of the program resumes, or skips training, as before.

    `estimator.model_dir` becomes the directory, `estimator.latest_checkpoint()`
    `checkpoints.latest()`, and `estimator.eval_dir()` the path it named,
    `os.path.join(<model_dir>, "eval")` (Keras's TensorBoard callback writes its evaluation
    summaries elsewhere: code reading event files there finds none).

    ## Why
    An Estimator restores the newest checkpoint of its `model_dir` at every `train`,
    `evaluate` and `predict`, which makes a second run resume where the first stopped and a
    preempted job restart where it was. Keras `fit` does neither by itself.
    `tf.keras.callbacks.BackupAndRestore` is not the same: it restores only a `fit` that was
    interrupted, deletes its backup when `fit` completes, and never restores for `evaluate`
    or `predict`; `ModelCheckpoint` saves but never restores, and keeps no optimizer state
    or step. The restore waits for the first call because Keras 3 cannot restore into a
    model that is not built yet under a distribution strategy.

    ## Fix safety
    Safe: the same weights, optimizer state and step are saved and restored (fixture
    `checkpoint_resume`: both programs, run twice on one `MODEL_DIR`, train 6 steps and then
    none, keep the checkpoints of steps 4 and 6). The checkpoints are TF2 object-based
    checkpoints (`ckpt-<step>`), not the Estimator's `model.ckpt-<step>`: point the converted
    program at a new `model_dir`. The Estimator also saved a checkpoint at step 0, which
    counted against `keep_checkpoint_max`. `checkpoint_save_graph_def` has no TF2 counterpart
    (no graph is saved). With `save_checkpoints_steps` and `save_checkpoints_secs` both None
    the Estimator saved nothing, and its `evaluate()` silently read an untrained model; that
    is reported.

    ## Limitations
    Without `model_dir` the Estimator saved to a temporary directory; nothing is emitted.

    ## References
    - https://www.tensorflow.org/guide/migrate/checkpoint_saver
    - https://www.tensorflow.org/guide/migrate/fault_tolerance
    - https://www.tensorflow.org/api_docs/python/tf/train/CheckpointManager
    """

    code = "E2K402"
    notes = (COMMENT,)
    summary = "model_dir + save_checkpoints_* + keep_checkpoint_max -> a callback restoring and saving TF2 checkpoints there"
    safety = Safety.SAFE
    order = 32

    cases = [
        Case(
            id="save-every-n-steps",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf.estimator.RunConfig(
    model_dir="/tmp/model", save_checkpoints_steps=100, keep_checkpoint_max=3, save_summary_steps=None)
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn, max_steps=1000)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K402 ModelDirCheckpoints restores and saves checkpoints in model_dir, as the Estimator did.
import tensorflow as tf

from e2k_helpers import ModelDirCheckpoints


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
checkpoints = ModelDirCheckpoints(model, "/tmp/model", max_to_keep=3, save_steps=100)
# max_steps counts from global step 0, as in the Estimator: train only the steps left.
steps_left = 1000 - checkpoints.global_step()
if steps_left > 0:
    model.fit(input_fn(), steps_per_epoch=steps_left, callbacks=[checkpoints])
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        given = {name: unit.config_args[name] for name in SETTINGS if name in unit.config_args}
        if "model_dir" in unit.args:
            plan.claimed_args.add("model_dir")
        plan.claimed_config.update(given)
        model_dir = unit.arg_value("model_dir") or unit.config_value("model_dir")
        steps, secs = _schedule(unit)
        if steps is None and secs is None:
            node = unit.config_args.get("save_checkpoints_steps") or unit.config_args.get("save_checkpoints_secs")
            plan.leftover(node, self.code, NO_CHECKPOINTS)
        if model_dir is None or _is_none(model_dir):
            if given:
                plan.fixed(next(iter(given.values())), self.code,
                           "no model_dir: the Estimator saved its checkpoints to a temporary directory")
            return
        directory = plan.stable_expression(model_dir, "model_dir")
        plan.model_dir = directory
        callback = model_dir_checkpoints(
            plan, directory, max_to_keep=unit.config_value("keep_checkpoint_max"),
            keep_hours=unit.config_value("keep_checkpoint_every_n_hours"), steps=steps, secs=secs, restore=True)
        name = plan.unique_name("checkpoints")
        statement = _emit.fit_line(_emit.statement("{n} = {c}", n=name, c=callback), 0, ctx.module.default_indent)
        plan.after_build.append(_emit.with_comment(statement, COMMENT))
        plan.checkpoints = name
        plan.may_restore = True
        plan.add_fit_callback(cst.Name(name))
        self._estimator_reads(unit, plan, ctx, directory, name)
        plan.fixed(model_dir, self.code, "model_dir -> a ModelDirCheckpoints callback: restored, then saved during fit")

    def _estimator_reads(self, unit, plan, ctx, directory, manager) -> None:
        """`estimator.model_dir` and `estimator.latest_checkpoint()`."""
        for use in unit.uses:
            parent = ctx.parent(use.name)
            if use.kind == "other" and isinstance(parent, cst.Attribute) and parent.attr.value == "model_dir":
                plan.replace(parent, directory.deep_clone())
                plan.claim_use(use)
            elif use.kind == "method" and use.method == "latest_checkpoint" and not use.call.args:
                plan.replace(use.call, _emit.expr("{m}.latest()", m=manager))
                plan.claim_use(use)
            elif use.kind == "method" and use.method == "eval_dir" and len(use.call.args) <= 1 \
                    and all(not a.star and (a.keyword is None or a.keyword.value == "name") for a in use.call.args):
                # Estimator.eval_dir(name=None): the model_dir's "eval" (or "eval_<name>") folder.
                name = use.call.args[0].value if use.call.args else None
                folder = _emit.expr('"eval"') if name is None or _is_none(name) else _emit.expr('"eval_" + {n}', n=name)
                plan.replace(use.call, _emit.expr("os.path.join({d}, {f})", d=directory.deep_clone(), f=folder))
                ctx.add_import("os")
                plan.claim_use(use)


def _schedule(unit) -> tuple[cst.BaseExpression | None, cst.BaseExpression | None]:
    """(save_checkpoints_steps, save_checkpoints_secs) as RunConfig resolves its defaults."""
    steps, secs = unit.config_value("save_checkpoints_steps"), unit.config_value("save_checkpoints_secs")
    if steps is None and secs is None:
        return None, cst.Integer(DEFAULT_SECS)
    steps = None if steps is None or _is_none(steps) else steps
    secs = None if secs is None or _is_none(secs) else secs
    return steps, secs


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"
