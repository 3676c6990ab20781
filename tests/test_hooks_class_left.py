"""E2K407 fails closed: a SessionRunHook class that a Keras callback could not run as e2k would
write it (a fetch with no Keras counterpart read as `run_values.results`, a `session`, a
graph lookup, any other read of a hook method's parameters) is left as it was, with the
Estimator it is passed to, each such statement reported; never a callback that still reads
`run_values` (a NameError at its first step)."""
from __future__ import annotations

import re
import textwrap

import pytest

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet

PROGRAM = '''\
import tensorflow as tf
import tensorflow.compat.v1 as tf1


{hooks}


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 8, [1] * 8)).repeat().batch(4)


def model_fn(features, labels, mode, params):
    hidden = tf1.layers.dense(features, 3, activation=tf.nn.relu)
    logits = tf1.layers.dense(hidden, 2)
    loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    tf.identity(loss, name="cross_entropy")
    tf.identity(hidden, name="hidden_relu")
    optimizer = tf1.train.GradientDescentOptimizer(0.1)
    train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=10, hooks=[{instances}])
'''

MARK = re.compile(r"^ *# e2k: E2K\d+ .*\n", re.M)


def program(body: str, instances: str = "ReportHook()", name: str = "ReportHook") -> str:
    hook = f"class {name}(tf1.train.SessionRunHook):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 4)
    return PROGRAM.format(hooks=hook, instances=instances)


def rewrite(source: str):
    return rewrite_source(source.encode(), "prog.py", RuleSet.load())


def manual(result) -> list[tuple[int, str, str]]:
    return [(f.line, f.code, f.message) for f in result.findings if f.kind == "manual"]


def assert_left_as_it_was(source: str, result) -> None:
    """The file is the source with `# e2k:` marks added, nothing else (the hook class and the
    Estimator's train() with its hooks are as they were), and reported as partial."""
    new = result.new.decode()
    assert result.status == "partial", manual(result)
    assert MARK.sub("", new) == source, new
    assert "tf.keras.callbacks.Callback" not in new and "model.fit(" not in new, new


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


# A hook that reads what it fetched, whatever the spelling of a fetch with no Keras
# counterpart: each used to become a Keras Callback still reading `run_values.results`.
UNMAPPABLE = {
    "graph-lookup-inline": '''
        def before_run(self, run_context):
            return tf1.train.SessionRunArgs(tf1.get_default_graph().get_tensor_by_name("hidden_relu:0"))

        def after_run(self, run_context, run_values):
            print("hidden", run_values.results)
    ''',
    "graph-lookup-of-an-unnamed-tensor": '''
        def before_run(self, run_context):
            return tf1.train.SessionRunArgs(tf1.get_default_graph().get_tensor_by_name("x:0"))

        def after_run(self, run_context, run_values):
            print("x", run_values.results)
    ''',
    "attribute-from-a-helper-method": '''
        def __init__(self, loss_tensor):
            self.loss_tensor = loss_tensor

        def begin(self):
            self.loss_tensor = self._as_tensor(self.loss_tensor)

        def _as_tensor(self, name):
            return tf1.get_default_graph().get_tensor_by_name(name + ":0")

        def before_run(self, run_context):
            return tf1.train.SessionRunArgs([tf1.train.get_global_step(), self.loss_tensor])

        def after_run(self, run_context, run_values):
            step, loss = run_values.results
            print(step, loss)
    ''',
    "a-collection-tensor": '''
        def begin(self):
            self.weights = tf1.trainable_variables()[0]

        def before_run(self, run_context):
            return tf1.train.SessionRunArgs({"w": self.weights})

        def after_run(self, run_context, run_values):
            print(run_values.results["w"])
    ''',
    "read-in-an-if-test": '''
        def before_run(self, run_context):
            return tf1.train.SessionRunArgs("hidden_relu:0")

        def after_run(self, run_context, run_values):
            if run_values.results.max() > 10.0:
                run_context.request_stop()
    ''',
    "fetched-on-some-steps-only": '''
        def __init__(self):
            self.steps = 0

        def before_run(self, run_context):
            self.steps += 1
            if self.steps % 10 == 0:
                return tf1.train.SessionRunArgs("cross_entropy:0")
            return None

        def after_run(self, run_context, run_values):
            if run_values.results is not None: print(run_values.results)
    ''',
}


@pytest.mark.parametrize("hook", list(UNMAPPABLE), ids=list(UNMAPPABLE))
def test_a_hook_reading_a_fetch_with_no_keras_counterpart_is_left_as_it_was(hook):
    instances = 'ReportHook("hidden_relu")' if "loss_tensor" in UNMAPPABLE[hook] else "ReportHook()"
    source = program(UNMAPPABLE[hook], instances)
    result = rewrite(source)
    assert_left_as_it_was(source, result)
    found = manual(result)
    assert found and all(code == "E2K407" and "`ReportHook` is not converted (nor the Estimator it is passed to)"
                         in message for _, code, message in found), found
    lines = {line for line, _, _ in found}
    # The statement that fetched and the one that reads what it fetched are each reported.
    assert line_of(source, "SessionRunArgs(") in lines, found
    assert line_of(source, "run_values.results") in lines, found


def test_the_fetch_left_is_named_where_it_was_made():
    source = program(UNMAPPABLE["attribute-from-a-helper-method"], 'ReportHook("hidden_relu")')
    messages = [message for _, _, message in manual(rewrite(source))]
    assert any("the hook fetches `self.loss_tensor` (`self._as_tensor(self.loss_tensor)`), which is not the loss"
               in m for m in messages), messages


def test_a_fetch_read_in_an_if_test_converts_when_it_is_the_loss():
    # The same `if` as above, reading a fetch Keras has: converted, nothing of run_values left.
    source = program('''
        def before_run(self, run_context):
            return tf1.train.SessionRunArgs("cross_entropy:0")

        def after_run(self, run_context, run_values):
            if run_values.results > 10.0:
                run_context.request_stop()
    ''')
    result = rewrite(source)
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert "run_values" not in new and "run_context" not in new, new
    assert 'if logs["loss"] > 10.0:' in new and "self.model.stop_training = True" in new, new


@pytest.mark.parametrize("body, read", [
    ('''
        def end(self, session):
            print(session.run(tf1.train.get_global_step()))
    ''', "session.run("),
    ('''
        def after_run(self, run_context, run_values):
            if self.done(): run_context.request_stop()

        def done(self):
            return True
    ''', "run_context.request_stop()"),
    ('''
        def after_run(self, run_context, run_values):
            print(run_context.original_args)
    ''', "run_context.original_args"),
    ('''
        def after_run(self, *args):
            print(args[1])
    ''', "args[1]"),
], ids=["session", "request-stop-on-the-if-line", "run-context-read", "star-args"])
def test_a_hook_method_reading_its_parameters_otherwise_is_left_as_it_was(body, read):
    source = program(body)
    result = rewrite(source)
    assert_left_as_it_was(source, result)
    assert line_of(source, read) in {line for line, code, _ in manual(result) if code == "E2K407"}, manual(result)


def test_every_hook_class_of_the_estimator_is_reported_and_left():
    good = '''
        def after_run(self, run_context, run_values):
            run_context.request_stop()
    '''
    bad = UNMAPPABLE["graph-lookup-inline"]
    hooks = (program(good, name="StopHook").split("\n\n\n")[1] + "\n\n\n"
             + program(bad, name="FirstHook").split("\n\n\n")[1] + "\n\n\n"
             + program(bad, name="SecondHook").split("\n\n\n")[1])
    source = PROGRAM.format(hooks=hooks, instances="StopHook(), FirstHook(), SecondHook()")
    result = rewrite(source)
    assert_left_as_it_was(source, result)
    messages = [message for _, _, message in manual(result)]
    assert any(m.startswith("`FirstHook` is not converted") for m in messages), messages
    assert any(m.startswith("`SecondHook` is not converted") for m in messages), messages
    assert not any("StopHook" in m for m in messages), messages


def test_a_second_rewrite_changes_nothing():
    source = program(UNMAPPABLE["graph-lookup-inline"])
    first = rewrite(source)
    again = rewrite_source(first.new, "prog.py", RuleSet.load())
    assert again.new == first.new
    assert [m[1:] for m in manual(again)] == [m[1:] for m in manual(first)]  # the marks moved the lines


def test_a_hook_stopping_evaluation_only_is_left_as_it_was():
    source = program('''
        def after_run(self, run_context, run_values):
            run_context.request_stop()
    ''', instances="").replace(
        "estimator.train(input_fn, steps=10, hooks=[])",
        "estimator.train(input_fn, steps=10)\nestimator.evaluate(input_fn, steps=2, hooks=[ReportHook()])")
    result = rewrite(source)
    assert_left_as_it_was(source, result)
    assert any(line == line_of(source, "run_context.request_stop()") and "a Keras callback cannot stop" in message
               for line, _, message in manual(result)), manual(result)
