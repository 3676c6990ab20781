from __future__ import annotations

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule
from estimator2keras._export import model_dir_base
from estimator2keras._tensorboard import NOTE, needs_tensorboard, tensorboard_callback

DEFAULT_NOT_WRITTEN = needs_tensorboard(
    "RunConfig's default summaries (every 100 steps, to model_dir) are not written: pass "
    "tf.keras.callbacks.TensorBoard(model_dir) to fit to keep them"
)


class SummaryStepsToTensorBoard(UnitRule):
    """The summaries an Estimator wrote to `model_dir` become a `TensorBoard` callback.

    ## What it does
    With a `model_dir` and `save_summary_steps=N`, adds
    `tf.keras.callbacks.TensorBoard(model_dir, update_freq=N)` to the callbacks of every
    training `fit`. `save_summary_steps=None` or `0` writes none, as before. A model_dir
    that may be None when the program runs (a flag without a default) is
    `TensorBoard(args.model_dir or checkpoints.directory, ...)`: the temporary directory the
    checkpoints callback uses in its place, where the Estimator wrote its summaries too.

    ## Why
    The Estimator wrote the loss (and the model_fn's `tf.summary` ops) to `model_dir`
    every `save_summary_steps` steps, for TensorBoard. Keras writes its loss and metrics with
    the TensorBoard callback.

    ## Fix safety
    Review: TensorBoard shows the same training loss, under `model_dir/train` (and the
    evaluation under `model_dir/validation` when `fit` validates) rather than `model_dir` and
    `model_dir/eval`. Keras logs the loss and compiled metrics; `tf.summary` calls in the
    model_fn are not carried over (they are reported as E2K404 where they are).

    TensorFlow 2.20 and later no longer install TensorBoard: there the callback stops `fit`
    after its first batch with `TBNotInstalledError` until `pip install tensorboard`: the
    converted file's header says so (`# - E2K409 The TensorBoard callback needs the tensorboard
    package...`), and so does the report's finding for the callback.

    ## Limitations
    When `save_summary_steps` is not given, RunConfig's default (every 100 steps) is not
    carried over, and the report says so (with the same note about TensorBoard).
    Without `model_dir` the Estimator wrote its summaries to a temporary directory; nothing
    is emitted.

    ## References
    - https://www.tensorflow.org/guide/migrate/tensorboard
    """

    code = "E2K409"
    summary = "RunConfig(save_summary_steps=N) with a model_dir -> tf.keras.callbacks.TensorBoard(model_dir, update_freq=N)"
    safety = Safety.REVIEW
    notes = (NOTE,)
    order = 34

    cases = [
        Case(
            id="summaries",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf.estimator.RunConfig(model_dir="/tmp/model", save_summary_steps=10, save_checkpoints_secs=None)
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn, steps=50)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K402 ModelDirCheckpoints restores and saves checkpoints in model_dir, as the Estimator did.
# - E2K409 The TensorBoard callback needs the tensorboard package, which TensorFlow 2.20 and later no
#   longer install: pip install tensorboard.
import tensorflow as tf

from e2k_helpers import ModelDirCheckpoints


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


# e2k: E2K402 the Estimator saved no checkpoints (save_checkpoints_steps and save_checkpoints_secs are None), so its evaluate() and predict() read an untrained model; Keras uses the trained one
model = build_model()
checkpoints = ModelDirCheckpoints(model, "/tmp/model")
callbacks = [
    checkpoints,
    tf.keras.callbacks.TensorBoard("/tmp/model", update_freq=10),
]
model.fit(input_fn(), steps_per_epoch=50, callbacks=callbacks)
''',
            findings=("E2K402",),
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if "save_summary_steps" not in unit.config_args:
            if plan.model_dir is not None:
                plan.fixed(unit.call, self.code, DEFAULT_NOT_WRITTEN)
            return
        arg = unit.config_args["save_summary_steps"]
        plan.claimed_config.add("save_summary_steps")
        if plan.model_dir is None:
            plan.fixed(arg, self.code, "no model_dir: the Estimator wrote its summaries to a temporary directory")
            return
        if _emit.code(arg.value) in ("None", "0"):
            return
        # A model_dir that may be None when the program runs: the directory the checkpoints
        # callback uses in its place (a temporary one, where the Estimator wrote its summaries).
        log_dir = model_dir_base(plan).deep_clone()
        callback, note = tensorboard_callback(plan.tf, log_dir, arg.value, "summaries to model_dir")
        plan.add_fit_callback(callback)
        plan.fixed(arg.value, self.code, note)
