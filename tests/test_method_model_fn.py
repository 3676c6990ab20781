"""A model_fn that is a method of a class of the file (`Estimator(self.model_fn)`,
`Estimator(trainer.model_fn)`): converted as the function of the module given the `self`
values it reads (as a factory's free variables or a partial's keywords), or refused, naming
why, where lifting it out of the class could change what it computes."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source

HEAD = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]]}, [[0.5]])).batch(1)


'''

MODEL_FN = '''\
    def model_fn(self, features, labels, mode):
        net = features["x"]
        for units in self.hidden:
            net = tf.compat.v1.layers.dense(net, units)
        out = tf.compat.v1.layers.dense(net, 1)
        loss = tf.compat.v1.losses.mean_squared_error(labels, out)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(self.lr)
        train_op = optimizer.minimize(loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
'''

INIT = '''\
class Trainer:
    def __init__(self, hidden, lr=0.1):
        self.hidden = hidden
        self.lr = lr

'''

RUN = '''
    def run(self):
        est = tf.estimator.Estimator(self.model_fn)
        est.train(input_fn, steps=2)
'''


def convert(source: str, rules):
    result = rewrite_source(source.encode(), "train.py", rules)
    return result, result.new.decode()


def test_a_method_built_into_an_estimator_in_its_class_becomes_a_model_given_self_s_values(rules):
    result, new = convert(HEAD + INIT + MODEL_FN + RUN + "\n\nTrainer((4, 3)).run()\n", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert result.original.decode().startswith(HEAD)  # the file as it was, not the lifted one
    assert "class Model(tf.keras.Model):\n    def __init__(self, hidden):" in new
    assert "def build_model(hidden, lr):" in new
    assert "model = build_model(hidden=self.hidden, lr=self.lr)" in new
    # The class keeps its __init__ and the method building the model; the model_fn left it.
    assert "class Trainer:\n    def __init__(self, hidden, lr=0.1):\n        self.hidden = hidden" in new
    assert "def model_fn" not in new and "functools" not in new and "estimator" not in new
    assert new.index("def build_model") < new.index("class Trainer")


def test_a_method_of_an_instance_made_at_module_level_converts(rules):
    source = HEAD + INIT + MODEL_FN + "\n\ntrainer = Trainer([4])\nest = tf.estimator.Estimator(trainer.model_fn)\n" \
        "est.train(input_fn, steps=2)\n"
    result, new = convert(source, rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "model = build_model(hidden=trainer.hidden, lr=trainer.lr)" in new


def test_a_self_value_named_as_a_local_of_the_model_fn_gets_the_class_s_name(rules):
    model_fn = MODEL_FN.replace("GradientDescentOptimizer(self.lr)", "GradientDescentOptimizer(lr)").replace(
        "        out =", "        lr = self.lr * 2\n        out =")
    result, new = convert(HEAD + INIT + model_fn + RUN, rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "build_model(hidden=self.hidden, trainer_lr=self.lr)" in new


@pytest.mark.parametrize("change, why", [
    (lambda s: s.replace(RUN, RUN + "\n    def retune(self):\n        self.lr = 0.5\n"),
     "`self.lr` is set other than once at the top of `Trainer.__init__`"),
    (lambda s: s.replace("        self.lr = lr\n", "        if lr:\n            self.lr = lr\n"),
     "`self.lr` is set other than once at the top of `Trainer.__init__`"),
    (lambda s: s.replace("        self.lr = lr\n", "").replace(
        RUN, RUN.replace("    def run(self):\n", "    def run(self):\n        self.lr = 0.1\n")),
     "`self.lr` is set other than once at the top of `Trainer.__init__`"),
    (lambda s: s.replace("GradientDescentOptimizer(self.lr)", "GradientDescentOptimizer(self.rate())").replace(
        RUN, RUN + "\n    def rate(self):\n        return self.lr\n"),
     "`model_fn` calls the method `self.rate` of `Trainer`"),
    (lambda s: s.replace("        net = features", "        self.seen = True\n        net = features"),
     "`model_fn` sets `self.seen`"),
    (lambda s: s.replace("class Trainer:", "class Trainer(Base):"), "`Trainer` derives from `Base`"),
    (lambda s: s + "\n\nclass Tuned(Trainer):\n    pass\n", "`Tuned` derives from `Trainer`"),
    (lambda s: s.replace("        est.train", "        print(self.model_fn)\n        est.train"),
     "`model_fn` is used elsewhere too (`self.model_fn`)"),
    (lambda s: s.replace("for units in self.hidden:", "for units in self.hidden:\n            tf.while_loop(None, None, [])"),
     "(E2K901)"),
])
def test_a_method_whose_lift_could_change_its_meaning_is_refused_naming_why(rules, change, why):
    source = change(HEAD + INIT + MODEL_FN + RUN)
    result, new = convert(source, rules)
    assert result.status == "partial" and "def model_fn(self, features, labels, mode):" in new
    assert "functools" not in new  # the file as it was, marked
    messages = [f.message for f in result.findings]
    assert any(m.startswith("the model_fn is a method (`self.model_fn`) of the class `Trainer`") and why in m
               for m in messages), messages
