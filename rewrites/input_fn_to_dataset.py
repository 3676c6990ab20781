from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._modes import MODE_KEYS
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

    - An input_fn returning iterator tensors returns the dataset they came from:
      `return ds.make_one_shot_iterator().get_next()`,
      `return tf1.data.make_one_shot_iterator(ds).get_next()`, and
      `it = ds.make_one_shot_iterator()` / `features, labels = it.get_next()` /
      `return features, labels` all become `return ds`.
    - `tf.estimator.ModeKeys.TRAIN` / `EVAL` / `PREDICT` inside an input_fn become the strings
      they stand for (`"train"`, `"eval"`, `"infer"`); the call sites pass `mode` (E2K003).

    ## Why
    Keras reads a `tf.data.Dataset` of `(features, labels)` directly; the Estimator accepted
    either a dataset or the tensors of its iterator, and called the input_fn with its mode.
    `tf.estimator.ModeKeys` is gone with the Estimator in TensorFlow 2.16.

    ## Fix safety
    Safe: the dataset is unchanged, and each input_fn sees the mode it saw before. Batch
    sizes under a distribution strategy are rule E2K602's business.

    ## Limitations
    An iterator made otherwise (`make_initializable_iterator`, tensors changed between
    `get_next()` and `return`) and input_fns reading their `config` are reported (E2K902).

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
        Case(
            id="iterator-mode-params",
            before='''\
import tensorflow as tf
import tensorflow.compat.v1 as tf1


def train_input_fn(mode, params):
    dataset = tf1.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 8}, [[2.0]] * 8))
    if mode == tf1.estimator.ModeKeys.TRAIN:
        dataset = dataset.repeat(2)
    dataset = dataset.batch(params["batch_size"])
    iterator = dataset.make_one_shot_iterator()
    features, labels = iterator.get_next()
    return features, labels


def eval_input_fn():
    dataset = tf1.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 8}, [[2.0]] * 8)).batch(4)
    return tf1.data.make_one_shot_iterator(dataset).get_next()


def model_fn(features, labels, mode, params):
    logits = tf1.layers.Dense(1)(features["x"])
    loss = tf1.losses.mean_squared_error(labels, logits)
    train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, tf1.train.get_global_step())
    return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf1.estimator.Estimator(model_fn, params={"batch_size": 2})
estimator.train(train_input_fn)
print(estimator.evaluate(eval_input_fn))
''',
            after='''\
import tensorflow as tf


def train_input_fn(mode, params):
    dataset = tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 8}, [[2.0]] * 8))
    if mode == "train":
        dataset = dataset.repeat(2)
    dataset = dataset.batch(params["batch_size"])
    return dataset


def eval_input_fn():
    dataset = tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 8}, [[2.0]] * 8)).batch(4)
    return dataset


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        logits = self.logits(features["x"])
        return logits


def build_model():
    model = Model()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(train_input_fn(mode="train", params={"batch_size": 2}))
print(model.evaluate(eval_input_fn(), return_dict=True))
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        self.replaced: list[cst.CSTNode] = []
        for definition in plan.input_definitions():
            self._iterator_to_dataset(definition, plan, ctx)
            # `def input_fn(..., mode=tf.estimator.ModeKeys.TRAIN)`: the default too.
            for node, mode in _mode_keys(ctx, definition.params):
                plan.replace(node, cst.SimpleString(f'"{mode}"'))
        for code in plan.input_code():
            for call in iter_calls(code):
                if isinstance(call.func, cst.Attribute) and call.func.attr.value in ITERATOR_METHODS:
                    if call not in plan.iterator_calls:
                        raise Unsupported(
                            "this input_fn makes an iterator e2k cannot take apart; e2k converts input_fns that "
                            "return a Dataset or `<dataset>.make_one_shot_iterator().get_next()`", call)
            modes = list(_mode_keys(ctx, code))
            for node, mode in modes:
                plan.replace(node, cst.SimpleString(f'"{mode}"'))
            taken_apart = [(node, None) for node in self.replaced]
            respelled = [
                (n, new) for n, new in tf2_respellings(ctx, code, plan.tf)
                if not _inside_any(ctx, n, modes) and not _inside_any(ctx, n, taken_apart)
            ]
            for node, new in respelled:
                plan.replace(node, new)
            if respelled or modes:
                plan.fixed(code, self.code, "compat.v1 names in the input_fn -> TF2 names")

    def _iterator_to_dataset(self, fn: cst.FunctionDef, plan, ctx) -> None:
        """``return ds.make_one_shot_iterator().get_next()`` (or the same in three statements,
        through a variable) -> ``return ds``."""
        body = list(fn.body.body)
        for index, statement in enumerate(body):
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
            if not isinstance(small, cst.Return) or small.value is None:
                continue
            dataset = self._next_of(small.value, ctx)
            if dataset is not None:
                plan.replace(small.value, dataset)
                self.replaced.append(small.value)
                plan.iterator_calls.update(c for c in iter_calls(small.value))
                plan.fixed(small.value, self.code, "iterator tensors -> the dataset they came from")
                continue
            found = self._unpacked(body, index, ctx)
            if found is not None:
                iterator_statement, next_statement, dataset, calls = found
                plan.remove_statement(iterator_statement)
                plan.remove_statement(next_statement)
                plan.replace(small.value, dataset)
                self.replaced += [small.value, iterator_statement, next_statement]
                plan.iterator_calls.update(calls)
                plan.fixed(small.value, self.code, "iterator tensors -> the dataset they came from")

    def _iterator_of(self, node, ctx) -> cst.BaseExpression | None:
        """The dataset of ``ds.make_one_shot_iterator()`` / ``tf1.data.make_one_shot_iterator(ds)``."""
        if not isinstance(node, cst.Call):
            return None
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "make_one_shot_iterator" and not node.args:
            return node.func.value
        if ctx.call_api_path(node) == "data.make_one_shot_iterator" and len(node.args) == 1 and not node.args[0].keyword:
            return node.args[0].value
        return None

    def _next_of(self, node, ctx) -> cst.BaseExpression | None:
        if (
            isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "get_next" and not node.args
        ):
            dataset = self._iterator_of(node.func.value, ctx)
            return dataset.deep_clone() if dataset is not None else None
        return None

    def _unpacked(self, body, index, ctx):
        """``it = <iterator>``; ``features, labels = it.get_next()``; ``return features, labels``."""
        if index < 2:
            return None
        returned = body[index].body[0].value
        first, second = body[index - 2], body[index - 1]
        assigns = []
        for statement in (first, second):
            if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
                    and isinstance(statement.body[0], cst.Assign) and len(statement.body[0].targets) == 1):
                return None
            assigns.append(statement.body[0])
        iterator_target, next_target = assigns[0].targets[0].target, assigns[1].targets[0].target
        dataset = self._iterator_of(assigns[0].value, ctx)
        get_next = assigns[1].value
        if dataset is None or not isinstance(iterator_target, cst.Name):
            return None
        if not (isinstance(get_next, cst.Call) and isinstance(get_next.func, cst.Attribute)
                and get_next.func.attr.value == "get_next" and _emit.code(get_next.func.value) == iterator_target.value):
            return None
        if _emit.code(_bare(next_target)) != _emit.code(_bare(returned)):
            return None  # the tensors are changed before they are returned
        names = [iterator_target.value] + [n.value for n in _names_in(next_target)]
        for later in body[index + 1:]:
            if any(n.value in names for n in _names_in(later)):
                return None
        return first, second, dataset.deep_clone(), [assigns[0].value, get_next]


def _bare(node: cst.BaseExpression) -> cst.BaseExpression:
    """``(a, b)`` and ``a, b`` print the same."""
    if isinstance(node, cst.Tuple):
        return node.with_changes(lpar=[], rpar=[])
    return node


def _names_in(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        stack.extend(current.children)


def _mode_keys(ctx, code: cst.CSTNode):
    """``tf.estimator.ModeKeys.TRAIN`` and the like inside ``code``: (node, mode string)."""
    stack = [code]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute):
            mode = MODE_KEYS.get(ctx.api_path(node) or "")
            if mode is not None:
                yield node, mode
                continue
        stack.extend(node.children)


def _inside_any(ctx, node, pairs) -> bool:
    current = node
    while current is not None:
        if any(current is other for other, _ in pairs):
            return True
        current = ctx.parent(current)
    return False
