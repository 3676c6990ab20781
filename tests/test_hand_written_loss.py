"""E2K204: losses written by hand in a model_fn. What converts (into a Loss subclass whose
``call`` runs the same statements) and what is refused, with the construct named."""
from __future__ import annotations

import textwrap

import pytest

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet
from conftest import flat

PROGRAM = '''\
import tensorflow as tf

BATCH_SIZE = 4


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 8, [[1.0]] * 8)).batch(BATCH_SIZE)


def model_fn(features, labels, mode):
    hidden = tf.compat.v1.layers.dense(features, 3, activation=tf.nn.relu)
    predictions = tf.compat.v1.layers.dense(hidden, 1)
{body}
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf.compat.v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
'''


HELPERS = '''

def raw_difference(labels, predictions):
    return tf.reduce_sum(tf.square(predictions - labels))


def tf1_spelling(labels, predictions):
    return tf.reduce_sum(tf.keras.losses.mean_squared_error(labels, predictions)) * tf.log(2.0)


def compat_loss(labels, predictions):
    return 2.0 * tf.compat.v1.losses.mean_squared_error(labels, predictions)


def branching(labels, predictions):
    if tf.reduce_sum(predictions) > 0:  # known only when the loss runs (a static test converts: test_loss_branches)
        return tf.reduce_sum(tf.keras.losses.mean_squared_error(labels, predictions))
    return tf.reduce_sum(tf.square(predictions - tf.reshape(labels, [-1, 1])))
'''


def rewrite(body: str, rules: RuleSet | None = None):
    source = PROGRAM.format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), "    "))
    source = source.replace("\n\ndef model_fn", HELPERS + "\n\ndef model_fn")
    return rewrite_source(source.encode(), "prog.py", rules or RuleSet.load())


def loss_class(result) -> str:
    text = flat(result.new.decode())
    start = text.index("class ModelLoss")
    return text[start:text.index("\n\n\n", start)]


def test_reshaped_labels_in_arithmetic_convert():
    result = rewrite("""
        errors = predictions - tf.reshape(labels, [-1, 1])
        loss = tf.nn.l2_loss(errors) / BATCH_SIZE
    """)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert loss_class(result).endswith(
        "    def call(self, labels, predictions):\n"
        "        errors = predictions - tf.reshape(labels, [-1, 1])\n"
        "        loss = tf.nn.l2_loss(errors) / BATCH_SIZE\n"
        "        return loss / tf.distribute.get_strategy().num_replicas_in_sync")
    assert "loss=ModelLoss()" in flat(result.new.decode())
    assert any(f.code == "E2K204" for f in result.findings)


def test_a_reduction_over_an_axis_no_loss_rule_maps_is_written_by_hand():
    result = rewrite("""
        loss = tf.reduce_mean(tf.reduce_sum(tf.square(predictions - tf.reshape(labels, [-1, 1])), axis=1))
    """)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "        loss = tf.reduce_mean(" in loss_class(result) and "axis=1))" in loss_class(result)


def test_keras_loss_functions_take_reshaped_labels():
    result = rewrite("""
        loss = 0.5 * tf.reduce_sum(tf.keras.losses.mean_squared_error(tf.reshape(labels, [-1, 1]), predictions)) / BATCH_SIZE
    """)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "return loss / tf.distribute" in loss_class(result)


@pytest.mark.parametrize("body,named", [
    # a value of the model besides its output
    ("loss = tf.reduce_sum(tf.reshape(labels, [-1, 1]) - predictions) + tf.reduce_sum(hidden)",
     "reads several values of the model (`hidden`, `predictions`)"),
    # the model's variables
    # (a penalty added to the loss converts: test_weight_decay; one multiplied into it does not)
    ("penalty = tf.add_n([tf.nn.l2_loss(v) for v in tf.compat.v1.trainable_variables()])\n"
     "loss = tf.reduce_sum(tf.reshape(labels, [-1, 1]) - predictions) * penalty",
     "reads the model's variables or the graph (`tf.compat.v1.trainable_variables(...)`)"),
    # no labels at all: the model's internals (a VAE's -elbo)
    ("elbo = tf.reduce_mean(hidden)\nloss = -elbo", "does not read the labels: it is computed from the model's internals (`elbo`)"),
    # a dict of the model's values, not one output
    ("outputs = {'value': predictions}\nloss = tf.reduce_sum(outputs['value'] - tf.reshape(labels, [-1, 1]))",
     "reads `outputs`, a collection of the model's values"),
    ("elbo = tf.reduce_mean(predictions.log_prob(hidden))\nloss = -elbo",
     "computed from the model's internals (`elbo`, from `predictions.log_prob(hidden)`)"),
    # the graph's loss collection
    # (get_total_loss() of one loss converts: tests/test_total_loss.py)
    ("tf.compat.v1.losses.mean_squared_error(labels, predictions)\nloss = tf.add_n(tf.compat.v1.losses.get_losses())",
     "reads the graph's loss collection (`tf.compat.v1.losses.get_losses(...)`)"),
    # a function of the program
    ("loss = my_loss(labels, predictions)", "calls `my_loss(...)`, which is not a function of the module"),
    # functions of the program the loss calls: read with the same rules
    ("loss = branching(labels, predictions)", "`branching(...)` computes the loss with an `if` on `tf.reduce_sum(predictions) > 0`"),
    # a reduction that decides whether the Estimator divided by the replicas
    ("loss = tf.reduce_sum(tf.keras.losses.MeanSquaredError(reduction='sum')(labels, predictions))",
     "around `reduction='sum'`"),
])
def test_refused_with_the_construct_named(body, named):
    result = rewrite(body)
    found = [f for f in result.findings if f.code == "E2K901"]
    assert found, [f.format() for f in result.findings]
    assert named in found[0].message, found[0].message
    assert "class ModelLoss" not in flat(result.new.decode())
    assert "def model_fn(features, labels, mode):" in flat(result.new.decode())  # left as it was


@pytest.mark.parametrize("body", [
    # the labels as they come, in arithmetic: Keras 2 and Keras 3 would hand a Loss other ranks
    "loss = tf.nn.l2_loss(predictions - labels)",
    "y = tf.cast(labels, tf.float32)\nloss = tf.reduce_sum(tf.abs(predictions - y))",
    # a Keras loss function does not match the ranks itself (a loss object does)
    "loss = tf.reduce_sum(tf.keras.losses.mean_squared_error(labels, predictions))",
    # integer ops on labels Keras 3 would hand a Loss in float32
    "y = tf.reshape(labels, [-1])\nloss = tf.reduce_sum(tf.one_hot(y, 3) * predictions)",
    # the features, which a Loss is not handed
    "loss = tf.reduce_sum(tf.reshape(labels, [-1, 1]) - predictions) + tf.reduce_sum(features)",
    # functions of the program the loss calls
    "loss = raw_difference(labels, predictions)",
    "loss = compat_loss(labels, predictions)",
])
def test_what_a_keras_loss_is_not_handed_is_the_models_own_compute_loss(body):
    """tests/test_own_loss.py runs such models; here: each of these converts to it."""
    result = rewrite(body)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert "def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):" in new, new
    assert "class ModelLoss" not in new and "loss=" not in new.split("model.compile(")[1].split("\n")[0], new
    assert "return loss / tf.distribute.get_strategy().num_replicas_in_sync" in new, new


def test_without_the_rule_the_hand_written_loss_is_refused_as_before():
    result = rewrite("loss = tf.reduce_sum(tf.keras.losses.mean_squared_error(labels, predictions))",
                     RuleSet.load(ignore=("E2K204",)))
    assert any("the loss is not a call e2k converts" in f.message for f in result.findings)


def test_params_the_loss_reads_are_the_loss_objects_own():
    source = PROGRAM.replace("def model_fn(features, labels, mode):", "def model_fn(features, labels, mode, params):")
    source = source.replace("tf.estimator.Estimator(model_fn)", 'tf.estimator.Estimator(model_fn, params={"batch_size": 4})')
    body = '    loss = tf.reduce_sum(tf.keras.losses.mean_squared_error(tf.reshape(labels, [-1, 1]), predictions)) / params["batch_size"]'
    result = rewrite_source(source.replace("{body}", body).encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", [f.format() for f in result.findings]
    text = flat(result.new.decode())
    assert loss_class(result).startswith(
        'class ModelLoss(tf.keras.losses.Loss):\n'
        '    """The model_fn\'s loss') and (
        '    def __init__(self, params, name="loss"):\n'
        '        super().__init__(reduction="sum", name=name)\n'
        '        self.params = params\n') in text
    assert '/ self.params["batch_size"]' in text
    assert "loss=ModelLoss(params)" in text


def test_tf1_losses_and_nn_cross_entropies_inside_become_keras_losses():
    source = PROGRAM.replace("predictions = tf.compat.v1.layers.dense(hidden, 1)", "logits = tf.compat.v1.layers.dense(hidden, 3)")
    body = """\
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    onehot = tf.one_hot(tf.cast(tf.reshape(labels, [-1]), tf.int32), 3)
    smooth = tf.compat.v1.losses.softmax_cross_entropy(onehot, logits, label_smoothing=0.1)
    loss = 0.5 * tf.reduce_mean(xent) + 0.5 * smooth"""
    result = rewrite_source(source.replace("{body}", body).encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", [f.format() for f in result.findings]
    text = loss_class(result)
    assert "xent = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)" in text
    assert ('tf.keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1, reduction="none")'
            "(onehot, logits)") in text
    assert "smooth = tf.reduce_mean(" in text and "compat" not in text


def test_an_idiom_on_labels_reshaped_in_another_way_converts_by_hand():
    source = PROGRAM.replace("predictions = tf.compat.v1.layers.dense(hidden, 1)", "logits = tf.compat.v1.layers.dense(hidden, 3)")
    body = """\
    class_ids = tf.squeeze(tf.cast(labels, tf.int32), axis=(1,))
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=class_ids, logits=logits))"""
    result = rewrite_source(source.replace("{body}", body).encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", [f.format() for f in result.findings]
    text = loss_class(result)
    assert "class_ids = tf.squeeze(tf.cast(labels, tf.int32), axis=(1,))" in text
    assert "loss = tf.reduce_mean(" in text
    assert "tf.keras.losses.sparse_categorical_crossentropy(class_ids, logits, from_logits=True))" in text


def test_labels_squeezed_by_a_list_of_axes_are_the_sparse_loss_labels():
    # `tf.squeeze(labels, axis=[1])` (Google's census custom Estimator): one value per example,
    # which the Keras sparse loss takes in either rank.
    source = PROGRAM.replace("predictions = tf.compat.v1.layers.dense(hidden, 1)", "logits = tf.compat.v1.layers.dense(hidden, 3)")
    body = """\
    class_ids = tf.squeeze(tf.cast(labels, tf.int32), axis=[1])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=class_ids, logits=logits))"""
    result = rewrite_source(source.replace("{body}", body).encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)" in " ".join(result.new.decode().split())


def test_labels_through_stop_gradient_keep_what_is_known_of_them():
    source = PROGRAM.replace("predictions = tf.compat.v1.layers.dense(hidden, 1)", "logits = tf.compat.v1.layers.dense(hidden, 3)")
    body = """\
    per_example = tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.stop_gradient(labels), logits=logits)
    loss = tf.reduce_sum(per_example) / BATCH_SIZE"""
    result = rewrite_source(source.replace("{body}", body).encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "per_example = tf.keras.losses.categorical_crossentropy(tf.stop_gradient(labels)," in loss_class(result)
    # The labels through it, as they come: the model's own loss (a Loss would get other ranks).
    own = rewrite("loss = tf.reduce_sum(tf.square(tf.stop_gradient(labels) - predictions))")
    assert "def compute_loss(" in flat(own.new.decode()) and "class ModelLoss" not in flat(own.new.decode())


def test_values_computed_from_the_output_alone_are_part_of_the_loss():
    result = rewrite("""
        examples = tf.cast(tf.shape(predictions)[0], tf.float32)
        loss = tf.nn.l2_loss(predictions - tf.reshape(labels, [-1, 1])) / examples
    """)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert loss_class(result).endswith(
        "    def call(self, labels, predictions):\n"
        "        examples = tf.cast(tf.shape(predictions)[0], tf.float32)\n"
        "        loss = tf.nn.l2_loss(predictions - tf.reshape(labels, [-1, 1])) / examples\n"
        "        return loss / tf.distribute.get_strategy().num_replicas_in_sync")


def test_tf1_losses_in_a_loss_function_of_the_program_are_respelled_compat_v1():
    # Left as it was, `tf.losses.mean_squared_error` is Keras's per-example loss on TF2 (TF1's
    # was the mean): the Loss summed it, a loss N times too large, in a file reported converted.
    source = PROGRAM.replace("estimator = tf.estimator", '''def my_loss(labels, predictions):
    return tf.losses.mean_squared_error(labels, predictions) * 2.0


estimator = tf.estimator''').replace("{body}", "    loss = my_loss(tf.reshape(labels, [-1, 1]), predictions)")
    result = rewrite_source(source.encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert "    return tf.compat.v1.losses.mean_squared_error(labels, predictions) * 2.0" in new, new
    import numpy as np
    import tensorflow as tf

    namespace: dict = {}
    exec(compile(new.split("\nestimator")[0].split("\nmodel = build_model")[0], "converted.py", "exec"), namespace)
    labels, predictions = np.array([[1.0], [2.0]], np.float32), np.array([[0.0], [0.0]], np.float32)
    assert float(namespace["my_loss"](labels, predictions)) == 5.0  # TF1's mean, doubled
    assert tf.distribute.get_strategy().num_replicas_in_sync == 1


def test_tf1_spellings_in_a_loss_function_of_the_program_are_respelled():
    # They were refused ("e2k leaves functions of the program as they are"): the Keras loss
    # calls the function on TF2, where `tf.log` is `tf.math.log`, the same op.
    result = rewrite("loss = tf1_spelling(labels, predictions)")
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert "tf.log(" not in new and "tf.math.log(" in new, new


def test_a_loss_chosen_by_an_if_on_params_is_the_loss_objects_if():
    # `if params["loss"] == "huber": loss = ... else: loss = ...`: the `if` stays in the Loss's
    # `call`, which returns the name both branches bind (it crashed: E2K903, `return if ...`).
    source = PROGRAM.replace("def model_fn(features, labels, mode):", "def model_fn(features, labels, mode, params):")
    source = source.replace("tf.estimator.Estimator(model_fn)", 'tf.estimator.Estimator(model_fn, params={"loss": "huber"})')
    body = textwrap.indent(textwrap.dedent('''\
        if params["loss"] == "huber":
            loss = tf.compat.v1.losses.huber_loss(labels, predictions)
        else:
            loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)'''), "    ")
    result = rewrite_source(source.replace("{body}", body).encode(), "prog.py", RuleSet.load())
    assert result.status == "converted", [f.format() for f in result.findings]
    assert textwrap.indent(textwrap.dedent('''\
        def call(self, labels, predictions):
            if self.params["loss"] == "huber":
                loss = tf.reduce_mean(tf.keras.losses.Huber(reduction="none")(labels, predictions))
            else:
                loss = tf.reduce_mean(tf.keras.losses.MeanSquaredError(reduction="none")(labels, predictions))
            return loss / tf.distribute.get_strategy().num_replicas_in_sync'''), "    ") in loss_class(result)
