"""A loss computed by a function of the program with an `if` (E2K204): on the mode (`if mode ==
TRAIN or mode == EVAL:`, a guard for PREDICT, which has no loss) or on the model output's static
shape (`if predictions.shape[1] == 1:`), both known before the loss runs. The function is called
as it is from the Keras Loss (with the mode's string "train" where TRAIN and EVAL take the same
branch); tests of anything else are refused, naming them. `fixtures/loss_helper_with_ifs` proves
the training the same with 2 replicas on TF 2.15 and the newest TF."""
from __future__ import annotations

import textwrap

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet

PROGRAM = '''\
import tensorflow as tf

N_OUTPUTS = 3


{helper}


def model_fn(features, labels, mode, params):
    hidden = tf.compat.v1.layers.dense(features, 8, activation=tf.nn.relu)
    predictions = tf.compat.v1.layers.dense(hidden, N_OUTPUTS)
    loss = {call}
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf.compat.v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 8, [[1.0, 0.0, 1.0]] * 8)).batch(4)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
'''


def rewrite(helper: str, call: str = "compute_errors(labels, predictions, mode)"):
    source = PROGRAM.format(helper=textwrap.dedent(helper).strip("\n"), call=call)
    return rewrite_source(source.encode(), "prog.py", RuleSet.load())


def loss_call(result) -> str:
    text = result.new.decode()
    start = text.index("    def call(self, labels, predictions):")
    return text[start:text.index("\n\n\n", start)]


def refusal(result) -> str:
    assert result.status == "partial", result.new.decode()
    return " | ".join(f.message for f in result.findings if f.code == "E2K901")


GUARDED = '''
def compute_errors(labels, predictions, mode):
    """The loss; PREDICT has none."""
    if mode == tf.estimator.ModeKeys.TRAIN or mode == tf.estimator.ModeKeys.EVAL:
        loss = tf.reduce_mean(tf.square(predictions - tf.reshape(labels, [-1, N_OUTPUTS])))
        return loss
    else:
        return None
'''


def test_a_loss_guarded_by_the_mode_is_called_with_train():
    result = rewrite(GUARDED)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert loss_call(result) == (
        "    def call(self, labels, predictions):\n"
        '        loss = compute_errors(labels, predictions, "train")\n'
        "        return loss / tf.distribute.get_strategy().num_replicas_in_sync")
    text = result.new.decode()
    assert 'if mode == "train" or mode == "eval":' in text  # the function stays, in TF2 names
    for guard in ("mode != tf.estimator.ModeKeys.PREDICT", "mode in (tf.estimator.ModeKeys.TRAIN, tf.estimator.ModeKeys.EVAL)",
                  "not mode == tf.estimator.ModeKeys.PREDICT"):
        result = rewrite(GUARDED.replace(
            "mode == tf.estimator.ModeKeys.TRAIN or mode == tf.estimator.ModeKeys.EVAL", guard))
        assert result.status == "converted", (guard, [f.format() for f in result.findings])


def test_an_early_return_for_predict_and_a_branch_on_a_static_shape():
    result = rewrite('''
        def compute_errors(labels, predictions, mode):
            if mode == tf.estimator.ModeKeys.PREDICT:
                return None
            labels = tf.reshape(labels, [-1, N_OUTPUTS])
            if predictions.shape[1] == 1:
                loss = tf.reduce_mean(tf.square(predictions - labels[:, -1:]))
            elif len(predictions.shape) == 2 and predictions.shape[-1] > 2:
                loss = tf.reduce_mean(tf.square(predictions[:, 1:] - labels[:, 1:]))
            else:
                loss = tf.reduce_mean(tf.square(predictions - labels))
            return loss
    ''')
    assert result.status == "converted", [f.format() for f in result.findings]
    assert 'loss = compute_errors(labels, predictions, "train")' in loss_call(result)
    assert "    if predictions.shape[1] == 1:\n" in result.new.decode()
    # branches that each return
    result = rewrite('''
        def compute_errors(labels, predictions):
            labels = tf.reshape(labels, [-1, N_OUTPUTS])
            if predictions.get_shape().ndims == 2:
                return tf.reduce_mean(tf.square(predictions - labels))
            else:
                return tf.reduce_mean(tf.abs(predictions - labels))
    ''', call="compute_errors(labels, predictions)")
    assert result.status == "converted", [f.format() for f in result.findings]


def test_every_branch_the_loss_may_take_is_read_for_the_labels():
    # Keras 2 hands a Loss labels of rank 1 as [batch, 1]: `labels[:, -1]` as they come is
    # found even in the branch this model does not take (its output has 3 values), and the
    # loss is the model's own compute_loss, which is handed the labels as they come.
    result = rewrite('''
        def compute_errors(labels, predictions):
            if predictions.shape[1] == 1:
                loss = tf.reduce_mean(tf.square(predictions - labels[:, -1]))
            else:
                loss = tf.reduce_mean(tf.square(predictions - tf.reshape(labels, [-1, N_OUTPUTS])))
            return loss
    ''', call="compute_errors(labels, predictions)")
    new = result.new.decode()
    assert "def compute_loss(" in new and "class ModelLoss" not in new, new
    same_branches = rewrite('''
        def compute_errors(labels, predictions):
            if predictions.shape[1] == 1:
                loss = tf.reduce_mean(tf.square(predictions - tf.reshape(labels, [-1, 1])))
            else:
                loss = tf.reduce_mean(tf.square(predictions - tf.reshape(labels, [-1, N_OUTPUTS])))
            return loss
    ''', call="compute_errors(labels, predictions)")
    assert "class ModelLoss" in same_branches.new.decode()  # both branches reshape: a Keras Loss


def test_tests_not_known_before_the_loss_runs_are_refused_by_name():
    body = "        loss = tf.reduce_mean(tf.square(predictions - tf.reshape(labels, [-1, N_OUTPUTS])))\n"
    cases = {
        "labels.shape[1] == 3": "an `if` on `labels.shape[1] == 3`",  # Keras changes the labels' rank
        "predictions.shape[0] == 4": "an `if` on `predictions.shape[0] == 4`",  # the batch
        "tf.reduce_max(predictions) > 1.0": "an `if` on `tf.reduce_max(predictions) > 1.0`",
    }
    for test, reason in cases.items():
        result = rewrite(f'''
def compute_errors(labels, predictions):
    if {test}:
{body}    else:
{body.replace("tf.square", "tf.abs")}    return loss
''', call="compute_errors(labels, predictions)")
        assert reason in refusal(result), (test, refusal(result))


def test_a_mode_test_that_differs_between_train_and_eval_is_refused():
    result = rewrite('''
        def compute_errors(labels, predictions, mode):
            loss = tf.reduce_mean(tf.square(predictions - tf.reshape(labels, [-1, N_OUTPUTS])))
            if mode == tf.estimator.ModeKeys.TRAIN:
                loss = loss * 2.0
            return loss
    ''')
    assert "computes another loss in TRAIN than in EVAL" in refusal(result)
    result = rewrite('''
        def compute_errors(labels, predictions, mode):
            scale = 2.0 if mode == tf.estimator.ModeKeys.TRAIN else 1.0
            return scale * tf.reduce_mean(tf.square(predictions - tf.reshape(labels, [-1, N_OUTPUTS])))
    ''')
    assert "reads `mode` (the mode) otherwise than in a test of the mode" in refusal(result)


def test_a_loss_unpacked_with_other_values_of_a_function_is_refused():
    # sinemodel: `loss, rmse = compute_errors(...)` was carried into compute_loss as
    # `loss = compute_errors(...)`, the pair, and the TF1 metric with it: it crashed.
    helper = '''
    def compute_errors(labels, predictions):
        loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
        rmse = tf.compat.v1.metrics.root_mean_squared_error(labels, predictions)
        return loss, rmse
    '''
    source = PROGRAM.replace("    loss = {call}", "    loss, rmse = {call}").format(
        helper=textwrap.dedent(helper).strip("\n"), call="compute_errors(labels, predictions)")
    result = rewrite_source(source.encode(), "prog.py", RuleSet.load())
    assert "the loss `loss` is one of the values `compute_errors(...)` returns, with `rmse`" in refusal(result)
    # A tuple written out is read element by element.
    source = PROGRAM.replace("    loss = {call}", "    loss, scale = {call}, 2.0").format(
        helper="", call="tf.compat.v1.losses.mean_squared_error(labels, predictions)")
    result = rewrite_source(source.encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "loss=tf.keras.losses.MeanSquaredError()" in result.new.decode()
