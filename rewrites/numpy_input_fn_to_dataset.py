from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._units import _names_in, accesses_of, bind_arguments, chain_used_elsewhere
from estimator2keras.rewrites.per_replica_batch_to_global import _Reads

SIGNATURE = ("x", "y", "batch_size", "num_epochs", "shuffle", "queue_capacity", "num_threads", "target_column")
#: numpy_input_fn's and pandas_input_fn's defaults.
DEFAULT_BATCH_SIZE = "128"
DEFAULT_QUEUE_CAPACITY = "1000"


class NumpyInputFnToDataset(UnitRule):
    """`numpy_input_fn` / `pandas_input_fn` become a `tf.data.Dataset` with the same batching, shuffling and epochs.

    ## What it does
    `tf.compat.v1.estimator.inputs.numpy_input_fn(x, y, batch_size=B, num_epochs=E, shuffle=S,
    queue_capacity=Q)` becomes

    `tf.data.Dataset.from_tensor_slices((x, y)).shuffle(Q).repeat(E).batch(B)`

    (`.shuffle` only when `S` is True, `.repeat()` for `num_epochs=None`, no `.repeat` for one
    epoch; the defaults are numpy_input_fn's: B = 128, E = 1, Q = 1000). `pandas_input_fn(x, y)`
    reads the DataFrame's columns as features: `from_tensor_slices((dict(x), y))`. Without
    `y` the dataset holds the features only. An input_fn bound to a name becomes a function
    of that name returning the dataset, so every call site stays as it was.

    A function of the file that returns one (`def get_input_fn(data, num_epochs=None,
    shuffle=True): return numpy_input_fn(...)`, TensorFlow's input_fn tutorials; `input_fn=
    get_input_fn(test_set, num_epochs=1, shuffle=False)`) returns the dataset instead, and
    each call of it gives `fit` or `evaluate` its dataset. When `shuffle=` is the caller's
    (a name), the dataset is shuffled under `if shuffle:`; `num_epochs` goes to `repeat`,
    which repeats forever for `None` as numpy_input_fn did. The call may be named first
    (`train_input_fn = read_mnist(x, y, num_epochs=None, shuffle=True)` at module level, then
    `TrainSpec(input_fn=train_input_fn)`: the name then holds the dataset) and may be made
    through other functions of the program that return it (`def eval_inputs(batch_size):
    return read_mnist(test_x, test_y, num_epochs=1, batch_size=batch_size)`). Each call binds
    its function's parameters, so e2k reads the values the input_fn was made with: the
    evaluation's `num_epochs=1` is one pass. Every call of these functions, and every read of
    such a name, must be one the converted program makes: one also used elsewhere (called
    for something else, printed) is refused, by name. A decorated function is not followed.

    ## Why
    These input_fns fed the Estimator from queues and threads (`tf.train.QueueRunner`), which
    TensorFlow 2 does not have; `tf.data` reads the same arrays in the same order, repeats
    the epochs before batching (a batch may span two epochs, the last one may be smaller),
    as the queues did.

    ## Fix safety
    Safe without shuffling: the same examples in the same batches (fixture `numpy_input`).
    With `shuffle=True` both shuffle, but not in the same order: the queue kept
    `queue_capacity` examples and drew from them across epoch boundaries; `Dataset.shuffle`
    reshuffles within each epoch.

    ## Limitations
    A non-literal `shuffle` converts only as a parameter of a function returning the input_fn
    (above); elsewhere it is reported. The Estimator refused these input_fns where it called
    them under its distribution strategy: for training under `train_distribute`, for an
    evaluation (`evaluate`, an `EvalSpec`) under `eval_distribute`; so does e2k. Elsewhere the
    Estimator ran them without the strategy (an evaluation with `train_distribute` alone, any
    prediction), and e2k converts them as above (case `evaluation-under-train-distribute`:
    Keras evaluates the dataset under the model's strategy, the same examples in the same
    batches split across the replicas).

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    - https://www.tensorflow.org/guide/data#consuming_numpy_arrays
    """

    code = "E2K006"
    summary = "numpy_input_fn / pandas_input_fn -> tf.data.Dataset.from_tensor_slices(...) with the same batching and epochs"
    safety = Safety.SAFE
    order = 55

    cases = [
        Case(
            id="named-numpy-input",
            before='''\
import numpy as np
import tensorflow as tf

x_train = np.zeros((100, 3), dtype=np.float32)
y_train = np.ones((100, 1), dtype=np.float32)


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.Dense(1)(features["x"])
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    train_op = optimizer.minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


train_input_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(
    x={"x": x_train}, y=y_train, batch_size=16, num_epochs=None, shuffle=True)
estimator = tf.estimator.Estimator(model_fn)
estimator.train(train_input_fn, steps=200)
estimator.evaluate(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x_train}, y_train, shuffle=False))
''',
            after='''\
import numpy as np
import tensorflow as tf

x_train = np.zeros((100, 3), dtype=np.float32)
y_train = np.ones((100, 1), dtype=np.float32)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.logits(features["x"])


def build_model():
    model = Model()
    optimizer = tf.keras.optimizers.SGD(0.1)
    model.compile(optimizer=optimizer, loss=tf.keras.losses.MeanSquaredError())
    return model


def train_input_fn():
    return (
        tf.data.Dataset.from_tensor_slices(({"x": x_train}, y_train)).shuffle(1000).repeat().batch(16))


model = build_model()
model.fit(train_input_fn(), steps_per_epoch=200)
model.evaluate(tf.data.Dataset.from_tensor_slices(({"x": x_train}, y_train)).batch(128))
''',
        ),
        Case(
            id="consecutive-bindings",
            before='''\
import numpy as np
import tensorflow as tf

x = np.ones((8, 1), np.float32)
y = np.ones((8, 1), np.float32)
train_input_fn = tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=4, num_epochs=2, shuffle=False)
eval_input_fn = tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=8, shuffle=False)

regressor = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")])
regressor.train(train_input_fn)
print(regressor.evaluate(eval_input_fn))
''',
            after='''\
import numpy as np
import tensorflow as tf

from e2k_helpers import CannedModel, head_metrics, LinearModel

x = np.ones((8, 1), np.float32)
y = np.ones((8, 1), np.float32)


def train_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat(2).batch(4)


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(8)


class LinearRegressorModel(CannedModel):
    """The canned LinearRegressor (tf.estimator): loss averaged over the batch."""

    def __init__(self):
        super().__init__("regression")
        self.linear = LinearModel(1, ["x"])

    def features(self, features):
        x_2 = tf.reshape(tf.cast(features["x"], tf.float32), [-1, 1])
        return (x_2,)

    def network(self, inputs, training=False):
        x_2, = inputs
        return self.linear((x_2,))


model = LinearRegressorModel()
model.compile(
    optimizer=tf.keras.optimizers.Ftrl(learning_rate=0.2),
    loss=tf.keras.losses.MeanSquaredError(),
    metrics=head_metrics("regression"))
model.fit(train_input_fn().map(model.preprocess))
print(model.evaluate(eval_input_fn().map(model.preprocess), return_dict=True))
''',
        ),
        Case(
            id="evaluation-under-train-distribute",
            before='''\
import numpy as np
import tensorflow as tf

x = np.ones((8, 1), np.float32)
y = np.ones((8, 1), np.float32)


def train_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(4)


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.Dense(1)(features["x"])
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    train_op = optimizer.minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf.distribute.MirroredStrategy()
config = tf.estimator.RunConfig(train_distribute=strategy)
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(train_input_fn, steps=10)
eval_input_fn = tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=8, shuffle=False)
print(estimator.evaluate(eval_input_fn))
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per replica.
import numpy as np
import tensorflow as tf

x = np.ones((8, 1), np.float32)
y = np.ones((8, 1), np.float32)


def train_input_fn():
    return (
        tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        .repeat()
        .batch(4 * strategy.num_replicas_in_sync)
    )


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(1)

    def call(self, features, training=False):
        return self.logits(features["x"])


def build_model():
    model = Model()
    optimizer = tf.keras.optimizers.SGD(0.1)
    model.compile(optimizer=optimizer, loss=tf.keras.losses.MeanSquaredError())
    return model


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model()
model.fit(train_input_fn(), steps_per_epoch=10)


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(8)


print(model.evaluate(eval_input_fn(), return_dict=True))
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        seen: list[cst.Call] = []
        strategy_reads = _Reads(unit, plan, ctx) if plan.has_strategy else None
        for input_fn in plan.input_fns:
            factory = input_fn.array_call
            if factory is None or any(factory is other for other in seen):
                continue
            seen.append(factory)
            if strategy_reads is not None and _distributed(strategy_reads, plan, factory):
                raise Unsupported(
                    "the Estimator refused this input_fn under a distribution strategy (it needs a Dataset)", factory)
            runtime = input_fn.array_factory is not None and self._runtime_shuffle(factory)
            dataset = None if runtime else self._dataset(factory, ctx, plan.tf)
            binding = input_fn.array_binding
            if input_fn.array_factory is not None:
                # `def get_input_fn(...): return pandas_input_fn(...)`: it returns the dataset,
                # and every call of it is one the Keras program makes for this model.
                function = input_fn.array_factory
                outside = chain_used_elsewhere(ctx, plan, input_fn.chain)
                if isinstance(outside, cst.FunctionDef):
                    raise Unsupported(f"`{outside.name.value}` is called outside this Estimator's calls, which still "
                                      "need the input_fn it returns", outside)
                if outside is not None:
                    raise Unsupported(f"`{outside.name}` is read outside this Estimator's calls, which still need the "
                                      "input_fn it holds", outside.target)
                if dataset is None:  # shuffled or not as the caller says: statements
                    statement = ctx.enclosing_statement(factory)
                    plan.replace_statement(statement, self._statements(factory, function, ctx, plan.tf, statement))
                else:
                    plan.replace(factory, dataset)
            elif binding is None:
                plan.replace(factory, dataset)
            else:
                reads = accesses_of(ctx, binding.target) or []
                if not all(plan.owns(read) for read in reads):
                    raise Unsupported(f"`{binding.name}` is used outside this Estimator's calls", binding.target)
                function = _emit.statement("def {name}():\n    return {d}", name=binding.name, d=dataset)
                # Blank lines around the new function, as around any definition (PEP 8).
                block = ctx.parent(binding.statement)
                if block is ctx.module:
                    blank = [_emit.blank_line()] * 2
                    # Two blank lines after it too, unless the next statement is a binding that
                    # becomes a function as well (it brings its own).
                    following = _next_statement(ctx.module, binding.statement)
                    footer = [] if following is not None and any(
                        following is getattr(i.array_binding, "statement", None) for i in plan.input_fns) else blank
                    if footer and following is not None:  # with the blank lines it has already
                        footer = footer[:max(0, 2 - _blank_lines(following))]
                    function = function.with_changes(leading_lines=blank, body=function.body.with_changes(footer=footer))
                else:
                    # In a function or a branch: one blank line between definitions, none
                    # under the line that opens the block.
                    first = block.body[0] is binding.statement if hasattr(block, "body") else False
                    function = function.with_changes(leading_lines=[] if first else [_emit.blank_line()])
                plan.replace_statement(binding.statement, [function])
            kind = "pandas_input_fn" if (ctx.call_api_path(factory) or "").endswith("pandas_input_fn") else "numpy_input_fn"
            plan.fixed(factory, self.code, f"{kind} -> tf.data.Dataset.from_tensor_slices")

    def _runtime_shuffle(self, call: cst.Call) -> bool:
        """``shuffle=shuffle``: a name (the factory's parameter), not a literal."""
        shuffle = bind_arguments(call, SIGNATURE).get("shuffle")
        return shuffle is not None and isinstance(shuffle.value, cst.Name) and shuffle.value.value not in ("True", "False")

    def _statements(self, call: cst.Call, function: cst.FunctionDef, ctx, tf: str, statement) -> list[cst.BaseStatement]:
        """``return pandas_input_fn(..., shuffle=shuffle)`` -> the dataset, shuffled when the
        caller says so, then repeated and batched as the input_fn did."""
        args = {k: a.value for k, a in bind_arguments(call, SIGNATURE).items()}
        taken = {n.value for n in _names_in(function)}
        name = _emit.unique_name("dataset", taken)
        base = self._dataset(call, ctx, tf, shuffled=False, stop="base")
        capacity = args.get("queue_capacity") or cst.Integer(DEFAULT_QUEUE_CAPACITY)
        tail = self._dataset(call, ctx, tf, shuffled=False, stop="tail", base=cst.Name(name))
        return [
            _emit.statement("{n} = {b}", n=name, b=base).with_changes(leading_lines=statement.leading_lines),
            _emit.statement("if {s}:\n    {n} = {n}.shuffle({c})", s=args["shuffle"], n=name, c=capacity),
            _emit.statement("return {t}", t=tail),
        ]

    def _dataset(self, call: cst.Call, ctx, tf: str, shuffled: bool | None = None, stop: str | None = None,
                 base: cst.BaseExpression | None = None) -> cst.BaseExpression:
        args = {k: a.value for k, a in bind_arguments(call, SIGNATURE).items()}
        pandas = (ctx.call_api_path(call) or "").endswith("pandas_input_fn")
        if "shuffle" not in args:
            raise Unsupported("this input_fn does not say whether to shuffle; the Estimator refused it", call)
        shuffle = _emit.code(args["shuffle"]) if shuffled is None else str(shuffled)
        if shuffle not in ("True", "False"):
            raise Unsupported("shuffle= is not True or False", args["shuffle"])
        features = _emit.expr("dict({x})", x=args["x"]) if pandas else args["x"]
        labels = args.get("y")
        if labels is not None and _emit.code(labels) != "None":
            elements = cst.Tuple([cst.Element(features, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                  cst.Element(labels)])
        else:
            elements = features
        dataset = _emit.expr("{tf}.data.Dataset.from_tensor_slices({e})", tf=tf, e=elements)
        if stop == "base":
            return dataset
        if base is not None:
            dataset = base
        if shuffle == "True":
            capacity = args.get("queue_capacity") or cst.Integer(DEFAULT_QUEUE_CAPACITY)
            dataset = _emit.expr("{d}.shuffle({c})", d=dataset, c=capacity)
        epochs = args.get("num_epochs")
        if epochs is not None and _emit.code(epochs) == "None":
            dataset = _emit.expr("{d}.repeat()", d=dataset)
        elif epochs is not None and _emit.code(epochs) != "1":
            dataset = _emit.expr("{d}.repeat({n})", d=dataset, n=epochs)
        batch = args.get("batch_size") or cst.Integer(DEFAULT_BATCH_SIZE)
        return _emit.expr("{d}.batch({b})", d=dataset, b=batch)


def _distributed(reads: _Reads, plan, factory: cst.Call) -> bool:
    """Does the Estimator call an input_fn made by ``factory`` under its strategy? Training
    under ``train_distribute``, evaluation under ``eval_distribute``, prediction never
    (``_Reads``); a reader not known counts as one under the strategy."""
    for input_fn in plan.input_fns:
        if input_fn.array_call is factory:
            read = reads.passed.get(id(input_fn.expr))
            if read is None or read[0]:
                return True
    return False


def _next_statement(module: cst.Module, statement: cst.BaseStatement) -> cst.BaseStatement | None:
    body = list(module.body)
    index = next((i for i, s in enumerate(body) if s is statement), None)
    return body[index + 1] if index is not None and index + 1 < len(body) else None


def _blank_lines(statement: cst.BaseStatement) -> int:
    """How many blank lines the statement's leading lines end with (above it, below comments)."""
    count = 0
    for line in reversed(statement.leading_lines):
        if line.comment is not None:
            break
        count += 1
    return count
