"""Hooks a function of the program returns (``hooks_helper.get_train_hooks(names)``): refused,
naming the helper and the hooks that decide."""
from __future__ import annotations

import textwrap

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet

TASK = '''\
import tensorflow as tf

{imports}


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.Dense(1)(features)
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(hook_names):
    estimator = tf.estimator.Estimator(model_fn)
    train_hooks = {helper}(hook_names, every_n_iter=10)
    estimator.train(input_fn, steps=20, hooks=train_hooks)
'''

HELPER = '''\
import tensorflow as tf

from utils import timing


def get_logging_hook(every_n_iter=100, **kwargs):
    return tf.compat.v1.train.LoggingTensorHook(tensors=["global_step"], every_n_iter=every_n_iter)


def get_timing_hook(every_n_iter=100, **kwargs):
    return {timing_hook}


HOOKS = {{"logging": get_logging_hook, "timing": get_timing_hook}}


def get_train_hooks(names, **kwargs):
    return [HOOKS[name](**kwargs) for name in names]
'''


def rewrite(tmp_path, helper: str, imports: str, timing_hook: str):
    (tmp_path / "hooks_helper.py").write_text(HELPER.format(timing_hook=timing_hook))
    source = TASK.format(helper=helper, imports=imports)
    result = rewrite_source(source.encode(), str(tmp_path / "task.py"), RuleSet.load())
    return result, [f.message for f in result.findings if f.kind == "manual"]


def test_a_helper_that_can_return_a_hook_without_a_rule_is_refused_naming_both(tmp_path):
    result, messages = rewrite(tmp_path, "hooks_helper.get_train_hooks", "import hooks_helper",
                               "timing.ExamplesPerSecondHook(every_n_steps=every_n_iter)")
    assert result.status == "partial"
    assert messages == [
        "the hooks come from `hooks_helper.get_train_hooks(...)` (hooks_helper.py), which can return "
        "`timing.ExamplesPerSecondHook(...)` (line 11), which e2k has no rule for: the hooks it returns are not "
        "converted"]
    assert "estimator.train(" in result.new.decode()  # the unit is left as it was


def test_a_helper_of_hooks_e2k_converts_is_refused_saying_so(tmp_path):
    result, messages = rewrite(tmp_path, "hooks_helper.get_train_hooks", "import hooks_helper",
                               "tf.compat.v1.train.StepCounterHook(every_n_steps=every_n_iter)")
    [message] = messages
    assert message == ("the hooks come from `hooks_helper.get_train_hooks(...)` (hooks_helper.py), which "
                       "returns tf.compat.v1.train.LoggingTensorHook, tf.compat.v1.train.StepCounterHook: e2k converts "
                       "these hooks where they are passed or in a function of the same module, not in another module")


def test_a_helper_whose_source_is_not_in_the_program(tmp_path):
    result, messages = rewrite(tmp_path, "logs_helper.get_train_hooks", "from official.logs import logs_helper",
                               "None")
    assert messages == ["the hooks come from `logs_helper.get_train_hooks(...)`, a function whose source is not "
                        "in this program: e2k cannot tell which hooks it returns"]



def test_the_official_models_hooks_helper_only_logs_and_its_hooks_go(tmp_path):
    """TensorFlow's official models: whatever names `get_train_hooks` is given, its hooks only
    log or profile; they go with a finding that says what Keras does instead."""
    for module in ("official.utils.logs", "official.r1.utils.logs"):
        result, messages = rewrite(tmp_path, "hooks_helper.get_train_hooks", f"from {module} import hooks_helper", "None")
        assert messages == [], messages
        new = result.new.decode()
        assert "get_train_hooks" not in new and "hooks=" not in new and "callbacks=" not in new, new
        assert any(f.code == "E2K406" and "only log and profile" in f.message for f in result.findings)
    # The same name in another package is not known to only log.
    result, messages = rewrite(tmp_path, "hooks_helper.get_train_hooks", "from mylib.logs import hooks_helper", "None")
    assert messages and "whose source is not in this program" in messages[0]
LOCAL = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.Dense(1)(features)
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    tf.identity(loss, name="mse")
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def get_train_hooks(every_n_iter, use_nan_hook=True):
{body}


def main():
    estimator = tf.estimator.Estimator(model_fn{model_dir})
    hooks = get_train_hooks(10)
    estimator.train(input_fn, steps=20, hooks=hooks){more}
'''


def local(body: str, model_dir: str = "", more: str = ""):
    source = LOCAL.format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), "    "), model_dir=model_dir,
                          more=more)
    result = rewrite_source(source.encode(), "task.py", RuleSet.load())
    return result, [f.message for f in result.findings if f.kind == "manual"]


def test_a_function_of_the_module_returning_lists_of_hooks_returns_the_callbacks():
    result, messages = local('''
        if use_nan_hook:
            return (tf.compat.v1.train.NanTensorHook(None), tf.compat.v1.train.StepCounterHook(every_n_iter))
        return [tf.compat.v1.train.LoggingTensorHook({"loss": "mse"}, every_n_iter=every_n_iter)]
    ''')
    assert result.status == "converted", messages
    text = result.new.decode()
    assert "        return [tf.keras.callbacks.TerminateOnNaN()]\n" in text  # the step counter goes: fit logs it
    assert ("    return [LoggingTensorCallback({\n"
            '        "loss": lambda model, logs: logs["loss"],\n'
            "    }, every_n_iter=every_n_iter)]\n") in text
    assert "    model.fit(input_fn(), steps_per_epoch=20, callbacks=get_train_hooks(10))" in text


def test_the_function_s_callbacks_are_added_to_the_call_s_own():
    result, messages = local("return [tf.compat.v1.train.NanTensorHook(None)]", model_dir=', model_dir="/tmp/m"')
    assert result.status == "converted", messages
    assert "callbacks=[checkpoints, *get_train_hooks(10)])" in result.new.decode()


def test_a_function_called_elsewhere_too_is_refused():
    result, messages = local("return [tf.compat.v1.train.NanTensorHook(None)]", more="\n    print(get_train_hooks(1))")
    assert messages == ["the hooks come from `get_train_hooks(...)` (this module): `get_train_hooks` is also called "
                        "elsewhere, and e2k would change what it returns"]


def test_a_hook_whose_callback_needs_the_model_is_refused():
    result, messages = local('return [tf.compat.v1.train.CheckpointSaverHook("/tmp/m", save_steps=5)]')
    assert messages == ["the hooks come from `get_train_hooks(...)` (this module): it returns "
                        "`tf.compat.v1.train.CheckpointSaverHook(...)`, whose callback needs the model or the call it "
                        "was passed to, which the function does not see"]


def test_a_hook_that_does_not_convert_refuses_the_function_naming_it():
    result, messages = local('return [tf.compat.v1.train.LoggingTensorHook({"out": "logits"}, every_n_iter=1)]')
    [message] = messages
    assert message.startswith("the hooks come from `get_train_hooks(...)` (this module): "
                              "`tf.compat.v1.train.LoggingTensorHook(...)`: LoggingTensorHook: the tensor 'logits'")
    assert "def get_train_hooks" in result.new.decode() and "LoggingTensorCallback" not in result.new.decode()


def test_hooks_chosen_at_run_time_are_refused():
    result, messages = local('''
        hooks = []
        hooks.append(tf.compat.v1.train.NanTensorHook(None))
        return hooks
    ''')
    assert messages == ["the hooks come from `get_train_hooks(...)` (this module): it returns `hooks`, not a list of "
                        "hooks e2k can follow"]
