"""E2K407: a SessionRunHook class that fetches values with SessionRunArgs becomes a callback
reading them from `logs` and `self.model` when each is the loss, a compiled metric, the
learning rate or the global step; otherwise the class (and its Estimator) stays as it was,
the fetching lines marked, naming the value (tests/test_hooks_class_left.py)."""
from __future__ import annotations

import textwrap

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet
from conftest import flat

PROGRAM = '''\
import tensorflow as tf
import tensorflow.compat.v1 as tf1


class ReportHook(tf1.train.SessionRunHook):
{hook}


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 8, [1] * 8)).repeat().batch(4)


def model_fn(features, labels, mode, params):
    hidden = tf1.layers.dense(features, 3, activation=tf.nn.relu)
    logits = tf1.layers.dense(hidden, 2)
    loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    tf.identity(loss, name="cross_entropy")
    tf.identity(hidden, name="hidden_relu")
    if mode == tf.estimator.ModeKeys.TRAIN:
        learning_rate = tf1.train.exponential_decay(params["learning_rate"], tf1.train.get_global_step(), 10, 0.5)
        tf.identity(learning_rate, name="learning_rate")
        accuracy = tf1.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, axis=1))
        tf.identity(accuracy[1], name="train_accuracy")
        optimizer = tf1.train.GradientDescentOptimizer(learning_rate)
        train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    accuracy = tf1.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, axis=1))
    return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={{"accuracy": accuracy}})


estimator = tf.estimator.Estimator(model_fn, params={{"learning_rate": 0.1}})
estimator.train(input_fn, steps=10, hooks=[{instances}])
'''


def rewrite(hook: str, instances: str = "ReportHook()"):
    source = PROGRAM.format(hook=textwrap.indent(textwrap.dedent(hook).strip("\n"), " " * 4), instances=instances)
    return rewrite_source(source.encode(), "prog.py", RuleSet.load())


def hook_class(result) -> str:
    text = flat(result.new.decode())
    start = text.index("class ReportHook")
    return text[start:text.index("\n\n\ndef input_fn", start)]


def manual(result) -> list[str]:
    return [f.message for f in result.findings if f.kind == "manual"]


def test_a_dict_of_fetches_set_up_in_begin_reads_logs_and_the_optimizer():
    result = rewrite('''
        def begin(self):
            self.step = tf1.train.get_or_create_global_step()
            self.rate = tf1.get_default_graph().get_tensor_by_name("learning_rate:0")
            self.started = True

        def before_run(self, run_context):
            return tf1.train.SessionRunArgs({"step": self.step, "rate": self.rate, "acc": "train_accuracy:0"})

        def after_run(self, run_context, run_values):
            print(run_values.results["step"], run_values.results["rate"], run_values.results["acc"])
    ''')
    assert result.status == "converted", manual(result)
    assert hook_class(result) == (
        "class ReportHook(tf.keras.callbacks.Callback):\n"
        "    def on_train_begin(self, logs=None):\n"
        "        self.started = True\n"
        "\n"
        "    def on_train_batch_end(self, batch, logs=None):\n"
        '        print(self.model.optimizer.iterations.numpy() - 1, self.model.optimizer.learning_rate.numpy(), '
        'logs["accuracy"])')


def test_results_read_whole_become_the_values_fetched():
    result = rewrite('''
        def before_run(self, run_context):
            return tf1.train.SessionRunArgs(("cross_entropy:0", "global_step"))

        def after_run(self, run_context, run_values):
            results = run_values.results
            print(results[0], results)
    ''')
    assert result.status == "converted", manual(result)
    assert '        results = (logs["loss"], self.model.optimizer.iterations.numpy() - 1)' in hook_class(result)


def test_a_name_given_to_the_constructor_is_followed():
    result = rewrite('''
        def __init__(self, tensor_name):
            self.tensor_name = tensor_name

        def begin(self):
            self.value = tf1.get_default_graph().get_tensor_by_name(self.tensor_name + ":0")

        def before_run(self, run_context):
            return tf1.train.SessionRunArgs(self.value)

        def after_run(self, run_context, run_values):
            print(self.tensor_name, run_values.results)
    ''', instances='ReportHook("cross_entropy")')
    assert result.status == "converted", manual(result)
    assert "        print(self.tensor_name, logs[\"loss\"])" in hook_class(result)
    assert "get_tensor_by_name" not in flat(result.new.decode())


def test_instances_fetching_different_values_are_refused():
    result = rewrite('''
        def __init__(self, tensor_name):
            self.tensor_name = tensor_name

        def before_run(self, run_context):
            return tf1.train.SessionRunArgs(self.tensor_name)

        def after_run(self, run_context, run_values):
            print(run_values.results)
    ''', instances='ReportHook("cross_entropy"), ReportHook("learning_rate")')
    assert result.status == "partial"
    assert all("the instances of `ReportHook` fetch different values (`tensor_name`)" in m for m in manual(result))
    assert manual(result)


def test_an_activation_is_refused_naming_it():
    result = rewrite('''
        def before_run(self, run_context):
            return tf1.train.SessionRunArgs(["cross_entropy:0", "hidden_relu:0"])

        def after_run(self, run_context, run_values):
            print(run_values.results)
    ''')
    assert result.status == "partial"
    messages = manual(result)
    assert messages and all("the tensor 'hidden_relu' (`hidden` in the model_fn) is not the loss" in m
                            for m in messages)
    assert "SessionRunArgs" in flat(result.new.decode()) or "# e2k: E2K407" in flat(result.new.decode())


def test_a_fetched_attribute_used_otherwise_is_refused():
    result = rewrite('''
        def begin(self):
            self.step = tf1.train.get_global_step()

        def before_run(self, run_context):
            return tf1.train.SessionRunArgs(self.step)

        def after_run(self, run_context, run_values):
            print(run_values.results, self.step.name)
    ''')
    assert result.status == "partial"
    assert any("`self.step` is used besides being fetched" in m for m in manual(result))


def test_run_values_read_otherwise_is_refused():
    result = rewrite('''
        def before_run(self, run_context):
            return tf1.train.SessionRunArgs("cross_entropy:0")

        def after_run(self, run_context, run_values):
            print(run_values.run_metadata)
    ''')
    assert result.status == "partial"
    assert any("`run_values` is read otherwise than `run_values.results`" in m for m in manual(result))


def test_fetches_in_evaluation_are_not_converted():
    source = PROGRAM.format(hook=textwrap.indent(textwrap.dedent('''
        def before_run(self, run_context):
            return tf1.train.SessionRunArgs("cross_entropy:0")

        def after_run(self, run_context, run_values):
            print(run_values.results)
    ''').strip("\n"), " " * 4), instances="")
    source = source.replace("estimator.train(input_fn, steps=10, hooks=[])",
                            "estimator.train(input_fn, steps=10)\nestimator.evaluate(input_fn, steps=2, hooks=[ReportHook()])")
    result = rewrite_source(source.encode(), "prog.py", RuleSet.load())
    assert result.status == "partial"
    assert any("a hook that fetches values in eval is not converted" in m for m in manual(result))


def test_an_attribute_set_again_in_begin_holds_what_begin_made():
    # tf-playground's hook: `__init__` keeps the tensor's name, `begin` rebinds the attribute
    # to the tensor looked up by it, `before_run` fetches it (was "cannot tell which value").
    result = rewrite('''
        def __init__(self, loss_tensor):
            self.loss_tensor = loss_tensor

        def begin(self):
            self.loss_tensor = tf1.get_default_graph().get_tensor_by_name(self.loss_tensor + ":0")

        def before_run(self, run_context):
            return tf1.train.SessionRunArgs(self.loss_tensor)

        def after_run(self, run_context, run_values):
            print(run_values.results)
    ''', instances='ReportHook("cross_entropy")')
    assert result.status == "converted", manual(result)
    assert '        print(logs["loss"])' in hook_class(result)


def test_a_graph_lookup_left_with_unconverted_fetches_is_marked_too():
    # A tester's hook fetched on every tenth step only (unconverted, marked), and its begin's
    # get_tensor_by_name, left unmarked, raised a KeyError in the callback.
    result = rewrite('''
        def __init__(self, every_n=10):
            self._every_n = every_n
            self._step = 0

        def begin(self):
            self._loss = tf1.get_default_graph().get_tensor_by_name("cross_entropy:0")

        def before_run(self, run_context):
            self._step += 1
            if self._step % self._every_n == 0:
                return tf1.train.SessionRunArgs(self._loss)
            return None

        def after_run(self, run_context, run_values):
            print(run_values.results)
    ''')
    assert result.status == "partial"
    assert any("looked a tensor up in the TF1 graph here" in m for m in manual(result)), manual(result)
    text = hook_class(result)
    lookup = text.index("get_tensor_by_name")
    assert "# e2k: E2K407 `ReportHook` is not converted (nor the Estimator it is passed to): " \
           "a SessionRunHook looked a tensor up" in text[:lookup]
    assert text.startswith("class ReportHook(tf1.train.SessionRunHook):")  # left as it was
