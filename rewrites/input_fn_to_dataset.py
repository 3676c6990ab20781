from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._modes import MODE_KEYS
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._symbols import tf2_respellings
from estimator2keras._units import _single_return, resolve

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
      `return features, labels` all become `return ds`. So do they in a function the
      input_fn defines and returns the call of (`def input_fn(files, batch_size): def
      _input_fn(): ...; return _input_fn()`, Cloud ML Engine's samples).
    - Statements between `get_next()` and the `return` that change the tensors (a features
      dict made from the tensors, a scaling) are mapped over the dataset: `return
      ds.map(lambda image, label: ({"image": image}, label))`, or, when they do not fold into
      one line, a function of the `get_next()` names defined in place (`prepare_batch`)
      holding those statements as written. They ran once per batch on the iterator's tensors;
      mapped over the batched dataset they run once per batch on the same tensors.
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
    An iterator made otherwise (`make_initializable_iterator`), one `get_next()` result
    bound to a single name and then changed (`batch = it.get_next()`: whether `map` passes
    it one argument or several depends on the dataset), control flow between `get_next()`
    and `return`, and input_fns reading their `config` are reported (E2K902).

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
            id="tensors-changed-after-get-next",
            before='''\
import tensorflow as tf
import tensorflow.compat.v1 as tf1


def make_input_fn(images, labels, batch_size):
    def input_fn():
        dataset = tf1.data.Dataset.from_tensor_slices((images, labels)).batch(batch_size)
        image, label = dataset.make_one_shot_iterator().get_next()
        features = {"image": image}
        return features, label
    return input_fn


def parsed_input_fn():
    dataset = tf1.data.Dataset.from_tensor_slices(([[1.0]] * 4, [[2.0]] * 4)).batch(2)
    iterator = dataset.make_one_shot_iterator()
    x, y = iterator.get_next()
    # scaled as the model expects
    x = x / 255.0
    return {"image": x}, y


def model_fn(features, labels, mode):
    logits = tf1.layers.Dense(1)(features["image"])
    loss = tf1.losses.mean_squared_error(labels, logits)
    train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, tf1.train.get_global_step())
    return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf1.estimator.Estimator(model_fn)
estimator.train(make_input_fn([[1.0]] * 4, [[2.0]] * 4, 2))
estimator.train(parsed_input_fn)
''',
            after='''\
import tensorflow as tf


def make_input_fn(images, labels, batch_size):
    def input_fn():
        dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(batch_size)
        return dataset.map(lambda image, label: ({"image": image}, label))
    return input_fn


def parsed_input_fn():
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 4, [[2.0]] * 4)).batch(2)
    def prepare_batch(x, y):
        # scaled as the model expects
        x = x / 255.0
        return {"image": x}, y
    return dataset.map(prepare_batch)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.logits(features["image"])


def build_model():
    model = Model()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(make_input_fn([[1.0]] * 4, [[2.0]] * 4, 2)())
model.fit(parsed_input_fn())
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
        return self.logits(features["x"])


def build_model():
    model = Model()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(train_input_fn(mode="train", params={"batch_size": 2}))
print(model.evaluate(eval_input_fn(), return_dict=True))
''',
        ),
        Case(
            id="iterator-in-a-nested-function",
            before='''\
import tensorflow as tf


def input_fn(batch_size=2, shuffle=False):
    def _input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 8}, [[2.0]] * 8))
        if shuffle:
            dataset = dataset.shuffle(buffer_size=8)
        dataset = dataset.repeat(1).batch(batch_size)
        iterator = dataset.make_one_shot_iterator()
        features, labels = iterator.get_next()
        return features, labels

    return _input_fn()


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(lambda: input_fn(shuffle=True))
print(estimator.evaluate(lambda: input_fn(batch_size=4)))
''',
            after='''\
import tensorflow as tf


def input_fn(batch_size=2, shuffle=False):
    def _input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 8}, [[2.0]] * 8))
        if shuffle:
            dataset = dataset.shuffle(buffer_size=8)
        dataset = dataset.repeat(1).batch(batch_size)
        return dataset

    return _input_fn()


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.logits(features["x"])


def build_model():
    model = Model()
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
model.fit(input_fn(shuffle=True))
print(model.evaluate(input_fn(batch_size=4), return_dict=True))
''',
        ),
        Case(
            id="crash-course-input-fn",
            before='''\
import numpy as np
import tensorflow as tf


def my_input_fn(features, targets, batch_size=1, shuffle=True, num_epochs=None):
    features = {key: np.array(value) for key, value in dict(features).items()}
    ds = tf.data.Dataset.from_tensor_slices((features, targets))
    ds = ds.batch(batch_size).repeat(num_epochs)
    if shuffle:
        ds = ds.shuffle(buffer_size=1000)
    features, labels = tf.compat.v1.data.make_one_shot_iterator(ds).get_next()
    return features, labels


def model_fn(features, labels, mode):
    predictions = tf.compat.v1.layers.dense(features["rooms"][:, None], 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels[:, None], predictions)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


rooms = {"rooms": np.arange(8, dtype=np.float32)}
values = np.arange(8, dtype=np.float32)
regressor = tf.estimator.Estimator(model_fn)
regressor.train(input_fn=lambda: my_input_fn(rooms, values, batch_size=2), steps=5)
''',
            after='''\
import numpy as np
import tensorflow as tf


def my_input_fn(features, targets, batch_size=1, shuffle=True, num_epochs=None):
    features = {key: np.array(value) for key, value in dict(features).items()}
    ds = tf.data.Dataset.from_tensor_slices((features, targets))
    ds = ds.batch(batch_size).repeat(num_epochs)
    if shuffle:
        ds = ds.shuffle(buffer_size=1000)
    return ds


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.loss_tracker = tf.keras.metrics.Mean(name="loss")
        self.predictions = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.predictions(features["rooms"][:, None])

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The model_fn's loss, as the Estimator computed it on each replica's batch:
        from the labels as the dataset gives them, which a Keras loss is not handed.
        The Estimator's optimizer divided it by the replicas and added up their gradients."""
        labels, predictions = y, y_pred
        loss = tf.compat.v1.losses.mean_squared_error(labels[:, None], predictions)
        self.loss_tracker.update_state(loss, sample_weight=tf.shape(y_pred)[0])
        return loss / tf.distribute.get_strategy().num_replicas_in_sync


def build_model():
    model = Model()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01))
    return model


rooms = {"rooms": np.arange(8, dtype=np.float32)}
values = np.arange(8, dtype=np.float32)
model = build_model()
model.fit(my_input_fn(rooms, values, batch_size=2), steps_per_epoch=5)
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        self.replaced: list[cst.CSTNode] = []
        for definition in plan.input_definitions():
            self._iterator_to_dataset(definition, plan, ctx)
            for inner in _returned_calls_of_inner(definition):
                # `def input_fn(file, ...): def _input_fn(): ...; return _input_fn()` (Cloud ML
                # Engine's samples): the function whose result the input_fn returns.
                self._iterator_to_dataset(inner, plan, ctx)
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
        through a variable) -> ``return ds``; tensors changed between ``get_next()`` and the
        ``return`` -> the same statements mapped over the dataset."""
        body = list(fn.body.body)
        for index, statement in enumerate(body):
            small = _only_small(statement)
            if not isinstance(small, cst.Return) or small.value is None:
                continue
            dataset = self._next_of(small.value, ctx)
            if dataset is not None:
                plan.replace(small.value, dataset)
                self.replaced.append(small.value)
                plan.iterator_calls.update(c for c in iter_calls(small.value))
                plan.fixed(small.value, self.code, "iterator tensors -> the dataset they came from")
                continue
            tail = self._tail(body, index, ctx, fn)
            if tail is None:
                continue
            removed, dataset, calls, target, post = tail
            for old in removed:
                plan.remove_statement(old)
            self.replaced += [small.value, *removed]
            plan.iterator_calls.update(calls)
            if not post and _emit.code(_bare(target)) == _emit.code(_bare(small.value)):
                plan.replace(small.value, dataset)
                plan.fixed(small.value, self.code, "iterator tensors -> the dataset they came from")
                continue
            if not isinstance(target, (cst.Tuple, cst.List)) and not _one_element(dataset, fn, ctx):
                raise Unsupported("`batch = it.get_next()` returned changed: whether `map` would pass the batch as "
                                  "one argument or several depends on the dataset, which e2k cannot tell here; "
                                  "unpack it (`features, labels = it.get_next()`) or return the dataset",
                                  small.value)
            mapped = self._mapped(dataset, target, post, small.value, fn, plan, ctx)
            for old in post:
                plan.remove_statement(old)
            self.replaced += post
            plan.replace_statement(statement, mapped)
            plan.fixed(small.value, self.code,
                       "tensors changed after get_next() -> the same statements mapped over the dataset")

    def _tail(self, body, index, ctx, fn):
        """The statements from an iterator to the ``return`` at ``index``: ``it = <iterator>``
        (optional), ``<names> = it.get_next()`` (or ``<iterator>.get_next()``), then simple
        assignments. (statements removed, dataset, iterator calls, get_next target, the
        assignments after it), or None."""
        post: list[cst.BaseStatement] = []
        at = index - 1
        while at >= 0:
            small = _only_small(body[at])
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and self._is_get_next(small.value):
                break
            if not (isinstance(body[at], cst.SimpleStatementLine)
                    and all(isinstance(s, (cst.Assign, cst.AugAssign, cst.AnnAssign)) for s in body[at].body)):
                return None
            post.insert(0, body[at])
            at -= 1
        if at < 0:
            return None
        next_statement = body[at]
        assign = next_statement.body[0]
        target = assign.targets[0].target
        names = _target_names(target)
        if names is None:
            return None
        receiver = assign.value.func.value
        dataset = self._iterator_of(receiver, ctx)
        removed, calls = [next_statement], list(iter_calls(assign.value))
        if dataset is None:
            if not isinstance(receiver, cst.Name):
                return None
            found = next((
                k for k in range(at - 1, -1, -1)
                if isinstance(_only_small(body[k]), cst.Assign) and len(body[k].body[0].targets) == 1
                and isinstance(body[k].body[0].targets[0].target, cst.Name)
                and body[k].body[0].targets[0].target.value == receiver.value
            ), None)
            if found is None or self._iterator_of(body[found].body[0].value, ctx) is None:
                return None
            dataset = self._iterator_of(body[found].body[0].value, ctx)
            removed.insert(0, body[found])
            calls += iter_calls(body[found].body[0].value)
            names = [receiver.value, *names]
        if post and not isinstance(target, cst.Tuple) and not _one_element(dataset, fn, ctx):
            return None  # `batch = it.get_next()`: whether map gives one argument or several is not known
        # The iterator and its tensors are used nowhere else in the function (after they are
        # bound: `features` read before `features, labels = ...get_next()` is the parameter).
        first = min(i for i, s in enumerate(body) if s in removed)
        kept = [s for i, s in enumerate(body) if s not in removed and s not in post and i != index and i > first]
        if any(n.value in names for s in kept for n in _names_in(s)):
            return None
        return removed, dataset.deep_clone(), calls, target, post

    def _is_get_next(self, node) -> bool:
        return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "get_next" and not node.args)

    def _mapped(self, dataset, target, post, returned, fn, plan, ctx) -> list[cst.BaseStatement]:
        """``return <dataset>.map(...)``: a lambda when the statements after get_next() fold into
        the returned expression, else a function of the get_next() names defined in place."""
        params = [e.value.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) \
            else [target.value]  # one element (a features dict): map passes it as one argument
        post = [self._respelled(s, plan, ctx) for s in post]
        returned = self._respelled(returned, plan, ctx)
        folded = _fold(post, returned, params)
        if folded is not None and "\n" not in _emit.code(folded):
            if isinstance(folded, cst.Tuple) and not folded.lpar:
                folded = folded.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            mapper = _emit.expr(f"lambda {', '.join(params)}: {_emit.code(folded)}")
            # The folded statements' comments, above the return that now does their work.
            comments = [line for s in post for line in s.leading_lines if line.comment is not None]
            return [cst.SimpleStatementLine([cst.Return(_emit.expr("{d}.map({m})", d=dataset, m=mapper))],
                                            leading_lines=comments)]
        taken = {n.value for n in _names_in(fn)}
        name = next(n for n in ("prepare_batch", "prepare_batch_", "_prepare_batch") if n not in taken)
        ret = returned.with_changes(lpar=[], rpar=[]) if isinstance(returned, cst.Tuple) else returned
        # Their comments go with them, into the function (blank lines above them do not).
        post = [s.with_changes(leading_lines=[line for line in s.leading_lines if line.comment is not None])
                for s in post]
        mapper = cst.FunctionDef(
            name=cst.Name(name),
            params=cst.Parameters([cst.Param(cst.Name(p)) for p in params]),
            body=cst.IndentedBlock([*post, cst.SimpleStatementLine([cst.Return(ret)])]),
        )
        return [mapper, cst.SimpleStatementLine([cst.Return(_emit.expr(f"{{d}}.map({name})", d=dataset))])]

    def _respelled(self, node, plan, ctx):
        for old, new in tf2_respellings(ctx, node, plan.tf):
            node = node.deep_replace(old, new)
        return node

    def _iterator_of(self, node, ctx) -> cst.BaseExpression | None:
        """The dataset of ``ds.make_one_shot_iterator()`` / ``tf1.data.make_one_shot_iterator(ds)``."""
        if not isinstance(node, cst.Call):
            return None
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "make_one_shot_iterator" and not node.args:
            return node.func.value
        if (ctx.call_api_path(node) or "").removeprefix("compat.v1.") == "data.make_one_shot_iterator" \
                and len(node.args) == 1 and not node.args[0].keyword:
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

#: Dataset methods whose elements have the structure of their input's.
SAME_ELEMENTS = frozenset({"batch", "repeat", "shuffle", "prefetch", "cache", "take", "skip", "filter", "shard",
                           "with_options", "padded_batch", "unbatch"})
#: Datasets of one tensor per element (a line, a record).
ONE_TENSOR = frozenset({"data.TextLineDataset", "data.TFRecordDataset", "data.FixedLengthRecordDataset"})


def _one_element(dataset: cst.BaseExpression, fn: cst.FunctionDef, ctx, depth: int = 0) -> bool:
    """Is each element of ``dataset`` one value (a features dict, one tensor), which ``map``
    passes as one argument, rather than a tuple it passes as several? Followed through the
    methods that keep the structure, the names the dataset is bound to in ``fn`` (every
    assignment of it must agree) and the function of its last ``map``; False when unknown."""
    if depth > 12:
        return False
    node = dataset
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
            and node.func.attr.value in SAME_ELEMENTS:
        node = node.func.value
    if isinstance(node, cst.Call):
        path = ctx.call_api_path(node) or ""
        if path in ONE_TENSOR or path.removeprefix("compat.v1.") in ONE_TENSOR:
            return True
        if path.endswith("data.Dataset.from_tensor_slices") or path.endswith("data.Dataset.from_tensors"):
            return bool(node.args) and _one_value(node.args[0].value, None, ctx, depth)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "map" and node.args:
            return _mapper_gives_one(node.args[0].value, ctx, depth)
        return False
    if isinstance(node, cst.Name):
        values = _assigned_in(fn, node.value)
        others = [v for v in values if _root_name(v) != node.value]  # `dataset = dataset.shuffle(...)` keeps it
        return bool(others) and all(_one_element(v, fn, ctx, depth + 1) for v in others)
    return False


def _root_name(node: cst.BaseExpression) -> str | None:
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        node = node.func.value
    return node.value if isinstance(node, cst.Name) else None


def _assigned_in(fn: cst.FunctionDef, name: str) -> list[cst.BaseExpression]:
    """The values assigned to ``name`` anywhere in ``fn``'s own body (not nested functions)."""
    found = []

    class Assigns(cst.CSTVisitor):
        def visit_FunctionDef(self, node) -> bool:
            return node is fn

        def visit_Lambda(self, node) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            if any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets):
                found.append(node.value)

    fn.visit(Assigns())
    return found


def _mapper_gives_one(mapper: cst.BaseExpression, ctx, depth: int) -> bool:
    """Does the function ``map`` is given return one value (not a tuple)? A lambda, a function
    of the program, or the function a call of one returns (``_make_parser(with_target=True)``)."""
    if isinstance(mapper, cst.Lambda):
        return _one_value(mapper.body, None, ctx, depth)
    if isinstance(mapper, cst.Call) and isinstance(mapper.func, (cst.Name, cst.Attribute)):
        factory = resolve(ctx, mapper.func)
        returned = _single_return(factory) if isinstance(factory, cst.FunctionDef) else None
        inner = {s.name.value: s for s in factory.body.body if isinstance(s, cst.FunctionDef)} \
            if isinstance(factory, cst.FunctionDef) else {}
        if isinstance(returned, cst.Name) and returned.value in inner:
            function = inner[returned.value]
            value = _single_return(function)
            return value is not None and _one_value(value, function, ctx, depth)
        return False
    function = resolve(ctx, mapper) if isinstance(mapper, (cst.Name, cst.Attribute)) else None
    value = _single_return(function) if isinstance(function, cst.FunctionDef) else None
    return value is not None and _one_value(value, function, ctx, depth)


def _one_value(value: cst.BaseExpression, function: cst.FunctionDef | None, ctx, depth: int) -> bool:
    """Is ``value`` (returned by ``function``, or given to ``from_tensor_slices``) one value
    rather than a tuple: a dict, ``dict(...)``, a dict comprehension, or a name bound in
    ``function`` only to such values?"""
    if isinstance(value, (cst.Dict, cst.DictComp)):
        return True
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        return True
    if isinstance(value, cst.Name) and function is not None and depth < 12:
        values = _assigned_in(function, value.value)
        return bool(values) and all(_one_value(v, function, ctx, depth + 1) for v in values)
    return False


def _returned_calls_of_inner(function: cst.FunctionDef) -> list[cst.FunctionDef]:
    """Functions defined in ``function``'s body (at its top level) whose call it returns:
    ``return _input_fn()``."""
    inner = {s.name.value: s for s in function.body.body if isinstance(s, cst.FunctionDef)}
    found = []
    for statement in function.body.body:
        small = _only_small(statement)
        value = small.value if isinstance(small, cst.Return) else None
        if (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in inner
                and not value.args and inner[value.func.value] not in found):
            found.append(inner[value.func.value])
    return found


def _bare(node: cst.BaseExpression) -> cst.BaseExpression:
    """``(a, b)`` and ``a, b`` print the same."""
    if isinstance(node, cst.Tuple):
        return node.with_changes(lpar=[], rpar=[])
    return node


def _only_small(statement: cst.BaseStatement) -> cst.BaseSmallStatement | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        return statement.body[0]
    return None


def _target_names(target: cst.BaseExpression) -> list[str] | None:
    """``x`` or ``a, b`` (names only): the names; else None."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, cst.Tuple) and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name)
                                             for e in target.elements):
        return [e.value.value for e in target.elements]
    return None


#: Expressions that need no parentheses wherever they are put.
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Dict, cst.List, cst.SimpleString,
          cst.Integer, cst.Float)


def _fold(post, returned, params):
    """``d = {"x": f}`` / ``return d, l`` -> ``{"x": f}, l``: each assigned name read once
    later, its value an atom, no comment lost. None when the statements do not fold."""
    for statement in reversed(post):
        small = _only_small(statement)
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, _ATOMS)):
            return None
        if any(line.comment for line in statement.leading_lines) or statement.trailing_whitespace.comment:
            return None
        name = small.targets[0].target.value
        if name in params:
            return None
        uses = [n for n in _names_in(returned) if n.value == name]
        if len(uses) != 1:
            return None
        returned = returned.deep_replace(uses[0], small.value)
    return returned


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
