"""Containers a model_fn builds a step at a time. `layers.append(...)` (`extend`, `insert`,
`update`, `add`, `setdefault`) is a new value of the list the model reads: carried where the
list goes (a Sequential's layers into __init__). `eval_metric_ops["auc"] = ...` items are read
with their dict. Any other change in place of a model_fn value leaves the unit as it was
(a tester's converted model silently lost its Dropout and output layer). Fixture
containers_built_in_steps passes parity on both TensorFlows."""
from __future__ import annotations

import textwrap

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow.compat.v1 as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({{"x": [[1.0, 2.0]]}}, [1])).repeat().batch(2)


def model_fn(features, labels, mode, params):
{body}


estimator = tf.estimator.Estimator(model_fn, params={{"hidden": [4, 4]}})
estimator.train(input_fn, steps=2)
print(estimator.evaluate(input_fn, steps=1))
'''
TRAIN = '''\
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())
'''


def convert(rules, *parts: str):
    body = "".join(textwrap.dedent(part).strip("\n") + "\n" for part in parts)
    source = PROGRAM.format(body=textwrap.indent(body, "    "))
    result = rewrite_source(source.encode(), "program.py", rules)
    return result, result.new.decode()


def manual(result) -> list[str]:
    return [f"{f.code} {f.message}" for f in result.findings if f.kind == "manual"]


def test_layers_appended_to_a_list_are_made_in_init_and_only_there(rules):
    result, new = convert(rules, '''\
        layers = [tf.keras.layers.Dense(units, activation="relu") for units in params["hidden"]]
        layers.append(tf.keras.layers.Dropout(0.5))
        layers.extend([tf.keras.layers.Dense(3)])
        net = tf.keras.Sequential(layers)
        logits = net(features["x"], training=mode == tf.estimator.ModeKeys.TRAIN)
    ''', TRAIN, '''\
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "converted", manual(result)
    init, call = new.split("def __init__", 1)[1].split("def call", 1)
    assert "layers.append(tf.keras.layers.Dropout(0.5))" in init
    assert "layers.extend([tf.keras.layers.Dense(3)])" in init
    assert init.index("layers.extend") < init.index("tf.keras.Sequential(layers)")
    assert "layers" not in call.split("def build_model")[0].replace("self.net", ""), call


def test_a_change_in_place_e2k_does_not_carry_leaves_the_unit(rules):
    result, new = convert(rules, '''\
        layers = [tf.keras.layers.Dense(units, activation="relu") for units in params["hidden"]]
        layers.reverse()
        logits = tf.keras.Sequential(layers + [tf.keras.layers.Dense(3)])(features["x"])
    ''', TRAIN, '''\
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "partial"
    assert any("`layers.reverse(...)` changes `layers` in place" in m for m in manual(result)), manual(result)
    assert "tf.estimator.Estimator(model_fn" in new and "class Model" not in new


def test_eval_metric_ops_set_key_by_key(rules):
    result, new = convert(rules, '''\
        logits = tf.layers.dense(features["x"], 3)
    ''', TRAIN, '''\
        metrics = {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}
        metrics["mean_logit"] = tf.metrics.mean(logits)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)
    ''')
    assert result.status == "converted", manual(result)
    assert 'SparseCategoricalAccuracy(name="accuracy")' in new
    assert 'MeanOfPredictions(name="mean_logit")' in new
    assert "metrics[" not in new


def test_an_item_set_on_another_dict_is_refused(rules):
    result, new = convert(rules, '''\
        hidden = {}
        hidden["a"] = tf.layers.dense(features["x"], 8)
        logits = tf.layers.dense(hidden["a"], 3)
    ''', TRAIN, '''\
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    ''')
    assert result.status == "partial"
    assert any('`hidden["a"]` (an item of an object)' in m for m in manual(result)), manual(result)
    assert "class Model" not in new
