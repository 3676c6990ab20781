from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._nodes import nodes_below
from estimator2keras._rule import Case, ModuleRule, Safety

#: The loaders that gave MNIST as DataSets (the tutorials' ``input_data`` re-exported
#: tf.contrib.learn's): each is ``read_data_sets(train_dir, ...)``.
READ_DATA_SETS = frozenset({
    "examples.tutorials.mnist.input_data.read_data_sets",
    "contrib.learn.datasets.mnist.read_data_sets",
    "contrib.learn.python.learn.datasets.mnist.read_data_sets",
})
#: ``load_mnist(train_dir="MNIST-data")``: read_data_sets with that default directory.
LOAD_MNIST = frozenset({"contrib.learn.datasets.mnist.load_mnist",
                        "contrib.learn.python.learn.datasets.mnist.load_mnist"})
#: ``DATASETS["mnist"](train_dir)`` and ``load_dataset("mnist")``.
DATASETS = frozenset({"contrib.learn.datasets.DATASETS", "contrib.learn.python.learn.datasets.DATASETS"})
LOAD_DATASET = frozenset({"contrib.learn.datasets.load_dataset", "contrib.learn.python.learn.datasets.load_dataset"})
SIGNATURE = ("train_dir", "fake_data", "one_hot", "dtype", "reshape", "validation_size", "seed", "source_url")
#: What a DataSet had that the helper's has not: a program using them keeps its loader.
DATASET_ONLY = frozenset({"next_batch", "epochs_completed"})
#: The last part of the loaders' names, as a call spells them (a cheap test before resolving it).
LOADER_NAMES = frozenset({"read_data_sets", "load_mnist", "load_dataset", "DATASETS"})

HELPER = '''
MnistDataSet = collections.namedtuple("MnistDataSet", ["images", "labels", "num_examples"])
MnistDataSets = collections.namedtuple("MnistDataSets", ["train", "validation", "test"])


def {name}(train_dir, one_hot=False, dtype=np.float32, reshape=True, validation_size=5000, seed=None,
{indent}source_url="https://storage.googleapis.com/cvdf-datasets/mnist/"):
    """MNIST as TensorFlow 1's read_data_sets gave it (TensorFlow 2 has no such loader): the
    same four files, downloaded into `train_dir` unless they are there; the first
    `validation_size` training images set aside for validation; images as float32 in [0, 1]
    (or uint8 as stored, with `dtype=uint8`), flattened to 784 values with `reshape`; labels as
    class ids, or one-hot float64 rows with `one_hot`. (`seed` shuffled DataSet.next_batch.)"""
    def read(name, offset, shape):
        path = os.path.join(train_dir, name)
        if not os.path.exists(path):
            os.makedirs(train_dir, exist_ok=True)
            urllib.request.urlretrieve(source_url + name, path)
        with gzip.open(path, "rb") as stream:
            return np.frombuffer(stream.read(), np.uint8, offset=offset).reshape(shape)

    def data_set(images, labels):
        if reshape:
            images = images.reshape(images.shape[0], 28 * 28)
        if np.dtype(getattr(dtype, "as_numpy_dtype", dtype)) == np.float32:
            images = np.multiply(images.astype(np.float32), 1.0 / 255.0)
        if one_hot:
            labels = np.eye(10)[labels]
        return MnistDataSet(images, labels, images.shape[0])

    train_images = read("train-images-idx3-ubyte.gz", 16, (-1, 28, 28, 1))
    train_labels = read("train-labels-idx1-ubyte.gz", 8, (-1,))
    if not 0 <= validation_size <= len(train_images):
        raise ValueError(f"Validation size should be between 0 and {{len(train_images)}}. Received: {{validation_size}}.")
    return MnistDataSets(
        train=data_set(train_images[validation_size:], train_labels[validation_size:]),
        validation=data_set(train_images[:validation_size], train_labels[:validation_size]),
        test=data_set(read("t10k-images-idx3-ubyte.gz", 16, (-1, 28, 28, 1)),
                      read("t10k-labels-idx1-ubyte.gz", 8, (-1,))))
'''


class MnistInputDataToHelper(ModuleRule):
    """`input_data.read_data_sets(...)` (MNIST, TensorFlow 1's tutorials) becomes a helper of the file.

    ## What it does
    In a file with Estimator code, a call of TensorFlow 1's MNIST loader —
    `read_data_sets(train_dir, one_hot=..., dtype=..., reshape=..., validation_size=...)` of
    `tensorflow.examples.tutorials.mnist.input_data` or of `tf.contrib.learn.datasets.mnist`,
    `load_mnist(train_dir)`, `tf.contrib.learn.datasets.DATASETS["mnist"](train_dir)`,
    `load_dataset("mnist")` — becomes a call of `read_data_sets`, a function written once in
    the file, with the same arguments; the import that is no longer read goes. The helper
    returns the same structure (`mnist.train.images`, `.labels`, `.num_examples`; `validation`
    and `test` alike) with the same values.

    ## Why
    TensorFlow 2 has neither `tensorflow.examples.tutorials` nor `tf.contrib`: a converted
    program that still imports the loader stops at its first line. `tf.keras.datasets.mnist`
    holds MNIST too, but as a different file (its own download, no validation split, uint8
    images): the helper reads the very files TensorFlow 1 downloaded into `train_dir` (or
    downloads them from the same place), as TensorFlow 1 read them.

    ## Fix safety
    Safe: the same files give the same arrays — the first `validation_size` training images
    for validation, images scaled by 1/255 in float32 and flattened unless `reshape=False`,
    one-hot labels as float64 rows. (TensorFlow 1's DataSet also reseeded NumPy's global
    random generator, from the OS unless `seed` was given; the helper leaves it as the
    program set it.) A program that calls `next_batch` or reads
    `epochs_completed` of a DataSet, or passes `fake_data`, keeps its loader and is reported
    (E2K905), as are other `tf.contrib.learn.datasets` (iris, boston, dbpedia).

    ## References
    - https://github.com/tensorflow/tensorflow/blob/r1.15/tensorflow/contrib/learn/python/learn/datasets/mnist.py
    - https://www.tensorflow.org/api_docs/python/tf/keras/datasets/mnist/load_data
    """

    code = "E2K011"
    summary = "TensorFlow 1's MNIST loader (input_data.read_data_sets) -> a read_data_sets helper of the file"
    safety = Safety.SAFE
    order = 60
    with_units = True
    keywords = ("read_data_sets", "learn.datasets", "load_mnist", "load_dataset")

    cases = [
        Case(
            id="tutorial-loader",
            before='''\
import tensorflow as tf
from tensorflow.examples.tutorials.mnist import input_data

mnist = input_data.read_data_sets("/tmp/data/", one_hot=False)


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["images"], 10)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(
        ({"images": mnist.train.images}, mnist.train.labels.astype("int32"))).repeat().batch(128)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=100)
''',
            after='''\
import collections
import gzip
import os
import urllib.request

import numpy as np
import tensorflow as tf

MnistDataSet = collections.namedtuple("MnistDataSet", ["images", "labels", "num_examples"])
MnistDataSets = collections.namedtuple("MnistDataSets", ["train", "validation", "test"])


def read_data_sets(
    train_dir,
    one_hot=False,
    dtype=np.float32,
    reshape=True,
    validation_size=5000,
    seed=None,
    source_url="https://storage.googleapis.com/cvdf-datasets/mnist/"):
    """MNIST as TensorFlow 1's read_data_sets gave it (TensorFlow 2 has no such loader): the
    same four files, downloaded into `train_dir` unless they are there; the first
    `validation_size` training images set aside for validation; images as float32 in [0, 1]
    (or uint8 as stored, with `dtype=uint8`), flattened to 784 values with `reshape`; labels as
    class ids, or one-hot float64 rows with `one_hot`. (`seed` shuffled DataSet.next_batch.)"""
    def read(name, offset, shape):
        path = os.path.join(train_dir, name)
        if not os.path.exists(path):
            os.makedirs(train_dir, exist_ok=True)
            urllib.request.urlretrieve(source_url + name, path)
        with gzip.open(path, "rb") as stream:
            return np.frombuffer(stream.read(), np.uint8, offset=offset).reshape(shape)

    def data_set(images, labels):
        if reshape:
            images = images.reshape(images.shape[0], 28 * 28)
        if np.dtype(getattr(dtype, "as_numpy_dtype", dtype)) == np.float32:
            images = np.multiply(images.astype(np.float32), 1.0 / 255.0)
        if one_hot:
            labels = np.eye(10)[labels]
        return MnistDataSet(images, labels, images.shape[0])

    train_images = read("train-images-idx3-ubyte.gz", 16, (-1, 28, 28, 1))
    train_labels = read("train-labels-idx1-ubyte.gz", 8, (-1,))
    if not 0 <= validation_size <= len(train_images):
        raise ValueError(
            f"Validation size should be between 0 and {len(train_images)}. Received: {validation_size}."
        )
    return MnistDataSets(
        train=data_set(train_images[validation_size:], train_labels[validation_size:]),
        validation=data_set(train_images[:validation_size], train_labels[:validation_size]),
        test=data_set(read("t10k-images-idx3-ubyte.gz", 16, (-1, 28, 28, 1)),
                      read("t10k-labels-idx1-ubyte.gz", 8, (-1,))))


mnist = read_data_sets("/tmp/data/", one_hot=False)


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.logits = tf.keras.layers.Dense(10)

    def call(self, features, training=False):
        return self.logits(features["images"])


def build_model():
    model = Model()
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def input_fn():
    return tf.data.Dataset.from_tensor_slices(
        ({"images": mnist.train.images}, mnist.train.labels.astype("int32"))).repeat().batch(128)


model = build_model()
model.fit(input_fn(), steps_per_epoch=100)
''',
        ),
    ]

    def transform(self, module: cst.Module, ctx) -> cst.Module:
        calls: list[tuple[cst.Call, list[cst.Arg]]] = []
        dataset_only = False
        taken: set[str] = set()
        for node in nodes_below(module):
            if isinstance(node, cst.Name):
                taken.add(node.value)
            elif isinstance(node, cst.Attribute) and node.attr.value in DATASET_ONLY:
                dataset_only = True
            elif isinstance(node, cst.Call) and isinstance(node.func, (cst.Attribute, cst.Subscript, cst.Name)) \
                    and _emit.code(node.func).rpartition(".")[2].split("[")[0] in LOADER_NAMES:
                args = _loader_arguments(node, ctx)
                if args is not None:
                    calls.append((node, args))
        if not calls or "stimator" not in module.code:
            return module  # (only in files with Estimator code: the migration's own)
        calls.sort(key=lambda c: ctx.position(c[0]))
        refused = "fake_data" in {a.keyword.value for _, args in calls for a in args if a.keyword is not None}
        if dataset_only or refused:
            for call, _ in calls:
                ctx.mark(call, "TensorFlow 1's MNIST loader is kept: the program uses what only its DataSet had "
                               "(next_batch, epochs_completed, fake_data); TensorFlow 2 has no such loader",
                         self.code)
            return module
        name = _emit.unique_name("read_data_sets", taken - {"read_data_sets"} if not _defined(module, "read_data_sets")
                                 else taken)
        for call, args in calls:
            ctx.edits.replace(call, call.with_changes(func=cst.Name(name), args=args))
            ctx.report(call, f"TensorFlow 1's MNIST loader -> `{name}(...)`, a helper of this file reading the same "
                             "files", kind="fixed")
        indent = " " * (len(f"def {name}("))
        ctx.insert_after_imports(_emit.statements(HELPER, name=name, indent=indent), near=calls[0][0])
        for module_name in ("collections", "gzip", "os", "urllib.request"):
            ctx.add_import(module_name)
        ctx.add_import("numpy", asname="np")
        for module_name, obj in (("tensorflow.examples.tutorials.mnist", "input_data"),
                                 ("tensorflow.contrib.learn.python.learn.datasets", "mnist"),
                                 ("tensorflow.contrib.learn.datasets", "mnist")):
            ctx.remove_import_if_unused(module_name, obj)
        return module


def _defined(module: cst.Module, name: str) -> bool:
    return any(isinstance(s, (cst.FunctionDef, cst.ClassDef)) and s.name.value == name for s in module.body)


def _loader_arguments(call: cst.Call, ctx) -> list[cst.Arg] | None:
    """The arguments ``read_data_sets`` takes for a call of an MNIST loader, or None when the
    call is none (``DATASETS["mnist"](dir)`` is ``read_data_sets(dir)``; ``load_mnist()`` and
    ``load_dataset("mnist")`` read "MNIST-data")."""
    func = call.func
    if isinstance(func, cst.Subscript):
        key = func.slice[0].slice if len(func.slice) == 1 else None
        if isinstance(getattr(key, "value", None), cst.SimpleString) and key.value.evaluated_value == "mnist" \
                and isinstance(func.value, (cst.Name, cst.Attribute)) and ctx.api_path(func.value) in DATASETS:
            return list(call.args) or [cst.Arg(cst.SimpleString('"MNIST-data"'))]
        return None
    path = ctx.call_api_path(call)
    if path in READ_DATA_SETS:
        return list(call.args)
    if path in LOAD_MNIST:
        return list(call.args) or [cst.Arg(cst.SimpleString('"MNIST-data"'))]
    if path in LOAD_DATASET and call.args and len(call.args) == 1 and isinstance(call.args[0].value, cst.SimpleString) \
            and call.args[0].value.evaluated_value == "mnist":
        return [cst.Arg(cst.SimpleString('"MNIST-data"'))]
    return None
