from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule
from estimator2keras._training import checkpoint_manager, checkpoint_saver

SETTINGS = (
    "model_dir", "save_checkpoints_steps", "save_checkpoints_secs", "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours", "checkpoint_save_graph_def",
)
#: RunConfig's default when neither save_checkpoints_steps nor save_checkpoints_secs is given.
DEFAULT_SECS = "600"
NO_CHECKPOINTS = (
    "the Estimator saved no checkpoints (save_checkpoints_steps and save_checkpoints_secs are None), so its "
    "evaluate() and predict() read an untrained model; Keras uses the trained one"
)


class ModelDirToCheckpointManager(UnitRule):
    """An Estimator's `model_dir` and checkpoint settings become a `tf.train.CheckpointManager`.

    ## What it does
    With `model_dir` (given to the Estimator or its `RunConfig`), the converted program
    keeps the model's checkpoints where the Estimator kept them:

    - right after the model is built, a `tf.train.Checkpoint` of the model and its optimizer
      and a `tf.train.CheckpointManager(checkpoint, model_dir, max_to_keep=keep_checkpoint_max,
      keep_checkpoint_every_n_hours=...)`, and `restore_or_initialize()`: the latest checkpoint
      in `model_dir` is restored, weights, optimizer slots and global step alike;
    - a `CheckpointSaver` callback (a short class added to the file once) saves every
      `save_checkpoints_steps` steps or `save_checkpoints_secs` seconds (600 when neither is
      set, RunConfig's default) and when `fit` ends, as the Estimator's CheckpointSaverHook did.

    `estimator.model_dir` becomes the directory and `estimator.latest_checkpoint()` the
    manager's `latest_checkpoint`. `train(max_steps=N)` then trains only up to global step N
    (E2K003), so that running the program again resumes, or skips training, as before.

    ## Why
    An Estimator restores the newest checkpoint of its `model_dir` at every `train`,
    `evaluate` and `predict`, which makes a second run resume where the first stopped, and a
    preempted job restart where it was. Keras `fit` does neither by itself.
    `tf.keras.callbacks.BackupAndRestore` is not the same thing: it restores only a `fit` that
    was interrupted, deletes its backup when `fit` completes, and never restores for
    `evaluate` or `predict`. `ModelCheckpoint` saves but never restores, and keeps no
    optimizer state or step.

    ## Fix safety
    Safe: the same weights, optimizer state and step are saved and restored (fixture
    `checkpoint_resume`). The checkpoints are TF2 object-based checkpoints (`ckpt-<step>`),
    not the Estimator's `model.ckpt-<step>`: point the converted program at a new `model_dir`,
    or it may try to restore the Estimator's checkpoints by variable name. The Estimator also
    saved a checkpoint at step 0, which counted against `keep_checkpoint_max`.
    `checkpoint_save_graph_def` has no TF2 counterpart (no graph is saved) and is dropped.
    With both `save_checkpoints_steps` and `save_checkpoints_secs` set to None the Estimator
    saved nothing, and its `evaluate()` silently read an untrained model; that is reported.

    ## Limitations
    Without `model_dir` the Estimator saved to a temporary directory; nothing is emitted.

    ## References
    - https://www.tensorflow.org/guide/migrate/checkpoint_saver
    - https://www.tensorflow.org/guide/migrate/fault_tolerance
    - https://www.tensorflow.org/api_docs/python/tf/train/CheckpointManager
    """

    code = "E2K402"
    summary = "model_dir + save_checkpoints_* + keep_checkpoint_max -> CheckpointManager restored at build, saved by a callback"
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
import tensorflow as tf
import time


class CheckpointSaver(tf.keras.callbacks.Callback):
    """Saves like an Estimator: every `save_steps` steps or `save_secs` seconds, and at the end."""

    def __init__(self, manager, save_steps=None, save_secs=None):
        super().__init__()
        self.manager = manager
        self.save_steps = save_steps
        self.save_secs = save_secs

    def on_train_begin(self, logs=None):
        self.step = self.saved_step = int(self.model.optimizer.iterations.numpy())
        self.saved_time = time.time()

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        steps_due = self.save_steps and self.step - self.saved_step >= self.save_steps
        secs_due = self.save_secs and time.time() - self.saved_time >= self.save_secs
        if steps_due or secs_due:
            self.save()

    def on_train_end(self, logs=None):
        if self.step != self.saved_step:
            self.save()

    def save(self):
        self.manager.save(checkpoint_number=self.step)
        self.saved_step, self.saved_time = self.step, time.time()


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
# RunConfig(model_dir=...): restore the latest checkpoint there, as the Estimator did.
checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
checkpoint_manager = tf.train.CheckpointManager(checkpoint, "/tmp/model", max_to_keep=3)
checkpoint_manager.restore_or_initialize()
callbacks = [CheckpointSaver(checkpoint_manager, save_steps=100)]
# max_steps counts from global step 0, as in the Estimator: train only the steps left.
steps_left = 1000 - int(model.optimizer.iterations.numpy())
if steps_left > 0:
    model.fit(input_fn(), steps_per_epoch=steps_left, callbacks=callbacks)
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
        first = len(plan.after_build)
        manager = checkpoint_manager(
            plan, directory, unit.config_value("keep_checkpoint_max"),
            unit.config_value("keep_checkpoint_every_n_hours"), restore=True)
        plan.after_build[first] = _emit.with_comment(
            plan.after_build[first], "RunConfig(model_dir=...): restore the latest checkpoint there, as the Estimator did.")
        if steps is not None or secs is not None:
            plan.add_fit_callback(checkpoint_saver(plan, manager, steps, secs))
        self._estimator_reads(unit, plan, ctx, directory, manager)
        plan.fixed(model_dir, self.code, "model_dir -> CheckpointManager: restored at build, saved during fit")

    def _estimator_reads(self, unit, plan, ctx, directory, manager) -> None:
        """`estimator.model_dir` and `estimator.latest_checkpoint()`."""
        for use in unit.uses:
            parent = ctx.parent(use.name)
            if use.kind == "other" and isinstance(parent, cst.Attribute) and parent.attr.value == "model_dir":
                plan.replace(parent, directory.deep_clone())
                plan.claim_use(use)
            elif use.kind == "method" and use.method == "latest_checkpoint" and not use.call.args:
                plan.replace(use.call, _emit.expr("{m}.latest_checkpoint", m=manager))
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
