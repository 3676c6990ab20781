from __future__ import annotations

import libcst as cst

from estimator2keras._context import iter_calls
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._symbols import tf2_respellings

#: Dataset methods that turn a dataset into graph tensors: the Keras program needs the dataset.
ITERATOR_METHODS = frozenset({"make_one_shot_iterator", "make_initializable_iterator", "get_next"})


class InputFnToDataset(UnitRule):
    """An input_fn becomes a function that gives `fit` its `tf.data.Dataset`, in TF2 names.

    ## What it does
    Each input_fn the converted program calls (directly, or through a lambda) keeps its body;
    `tf.compat.v1` names in it that mean the same in TensorFlow 2 are respelled
    (`tf1.data.Dataset` -> `tf.data.Dataset`), so that the function runs without `compat.v1`.
    The call sites pass it what the Estimator passed (`params`).

    ## Why
    Keras reads a `tf.data.Dataset` of `(features, labels)` directly; only the `compat.v1`
    spellings stand between an Estimator input_fn that returns a dataset and TF2.

    ## Fix safety
    Safe: the dataset is unchanged. Batch sizes under a distribution strategy are rule
    E2K602's business.

    ## Limitations
    input_fns that return iterator tensors (`make_one_shot_iterator().get_next()`) or take
    `mode` / `config` are reported (E2K902), not converted yet.

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    """

    code = "E2K004"
    summary = "input_fn returning a Dataset -> a dataset function in TF2 names"
    safety = Safety.SAFE
    order = 60

    cases = [
        Case(
            id="compat-v1-data",
            before='''\
import tensorflow as tf
import tensorflow.compat.v1 as tf1


def input_fn():
    dataset = tf1.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]]))
    return dataset.map(lambda x, y: (tf.cast(x, tf1.float32), y)).batch(1)


def model_fn(features, labels, mode):
    logits = tf1.layers.Dense(1)(features)
    loss = tf1.losses.mean_squared_error(labels, logits)
    train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, tf1.train.get_global_step())
    return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf1.estimator.Estimator(model_fn)
estimator.train(lambda: input_fn())
''',
            after='''\
import tensorflow as tf


def input_fn():
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]]))
    return dataset.map(lambda x, y: (tf.cast(x, tf.float32), y)).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn())
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        for code in plan.input_code():
            for call in iter_calls(code):
                if isinstance(call.func, cst.Attribute) and call.func.attr.value in ITERATOR_METHODS:
                    raise Unsupported(
                        "this input_fn returns iterator tensors; e2k converts input_fns that return a Dataset", call
                    )
            respelled = list(tf2_respellings(ctx, code, plan.tf))
            for node, new in respelled:
                plan.replace(node, new)
            if respelled:
                plan.fixed(code, self.code, "compat.v1 names in the input_fn -> TF2 names")
