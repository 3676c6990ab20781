"""TensorFlow 1's MNIST loader (the tutorials' ``input_data.read_data_sets``, tf.contrib.learn's
datasets), gone from TensorFlow 2, becomes a helper of the file that reads the same files the
same way (E2K011); a program needing what only the loader's DataSet had keeps it, reported."""
from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from estimator2keras._engine import rewrite_source

ESTIMATOR = '''

def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["images"], 10)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(
        ({"images": mnist.train.images}, mnist.train.labels.astype("int32"))).repeat().batch(8)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=10)
'''


def program(loader: str, imports: str = "from tensorflow.examples.tutorials.mnist import input_data\n",
            extra: str = "") -> bytes:
    return ("import tensorflow as tf\n" + imports + "\n" + loader + "\n" + extra + ESTIMATOR).encode()


def write_mnist(directory, train: int = 12, test: int = 4, seed: int = 0):
    """Four idx files as MNIST's, with random images and labels; returns the arrays."""
    rng = np.random.RandomState(seed)
    arrays = {}
    for prefix, count in (("train", train), ("t10k", test)):
        images = rng.randint(0, 256, size=(count, 28, 28)).astype(np.uint8)
        labels = rng.randint(0, 10, size=count).astype(np.uint8)
        with gzip.open(directory / f"{prefix}-images-idx3-ubyte.gz", "wb") as f:
            f.write(struct.pack(">IIII", 2051, count, 28, 28) + images.tobytes())
        with gzip.open(directory / f"{prefix}-labels-idx1-ubyte.gz", "wb") as f:
            f.write(struct.pack(">II", 2049, count) + labels.tobytes())
        arrays[prefix] = images, labels
    return arrays


def helper(new: bytes):
    """The converted file's loader, run on its own."""
    text = new.decode()
    start = text.index("MnistDataSet = ")
    end = text.index("\n\n\n", text.index("def read_data_sets("))
    namespace: dict = {}
    exec("import collections, gzip, os, urllib.request\nimport numpy as np\n" + text[start:end], namespace)
    return namespace["read_data_sets"]


def test_the_tutorial_loader_becomes_a_helper_reading_the_same_files_as_tf1(rules, tmp_path):
    result = rewrite_source(program('mnist = input_data.read_data_sets("/tmp/data/", one_hot=False)'),
                            "mnist.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert "input_data" not in new and "examples.tutorials" not in new, new
    assert 'mnist = read_data_sets("/tmp/data/", one_hot=False)' in new, new
    read_data_sets = helper(result.new)
    arrays = write_mnist(tmp_path)
    data = read_data_sets(str(tmp_path), validation_size=5)
    train_images, train_labels = arrays["train"]
    # TensorFlow 1's DataSet: the first validation_size images aside, flattened, times 1/255 in float32.
    expected = np.multiply(train_images.reshape(12, 784).astype(np.float32), 1.0 / 255.0)
    assert data.train.images.dtype == np.float32 and data.train.images.shape == (7, 784)
    np.testing.assert_array_equal(data.train.images, expected[5:])
    np.testing.assert_array_equal(data.validation.images, expected[:5])
    np.testing.assert_array_equal(data.train.labels, train_labels[5:])
    assert data.train.labels.dtype == np.uint8 and data.train.num_examples == 7
    assert data.test.num_examples == 4
    np.testing.assert_array_equal(data.test.labels, arrays["t10k"][1])


def test_one_hot_uint8_and_unflattened_images_as_tf1_gave_them(rules, tmp_path):
    result = rewrite_source(program('mnist = input_data.read_data_sets("/tmp/data/", one_hot=True)'),
                            "mnist.py", rules)
    read_data_sets = helper(result.new)
    arrays = write_mnist(tmp_path)
    data = read_data_sets(str(tmp_path), one_hot=True, reshape=False, dtype=np.uint8, validation_size=2)
    labels = arrays["train"][1][2:]
    assert data.train.labels.dtype == np.float64 and data.train.labels.shape == (10, 10)
    np.testing.assert_array_equal(data.train.labels.argmax(1), labels)
    assert data.train.images.shape == (10, 28, 28, 1) and data.train.images.dtype == np.uint8
    np.testing.assert_array_equal(data.train.images[..., 0], arrays["train"][0][2:])
    with pytest.raises(ValueError, match="Validation size"):
        read_data_sets(str(tmp_path), validation_size=13)


@pytest.mark.parametrize("loader, imports, call", [
    ("mnist = tf.contrib.learn.datasets.DATASETS['mnist'](args_data_dir)", "args_data_dir = 'data'\n",
     "read_data_sets(args_data_dir)"),
    ("mnist = tf.contrib.learn.datasets.mnist.load_mnist()", "", 'read_data_sets("MNIST-data")'),
    ("mnist = tf.contrib.learn.datasets.load_dataset('mnist')", "", 'read_data_sets("MNIST-data")'),
    ("mnist = mnist_data.read_data_sets('d', validation_size=0)",
     "from tensorflow.contrib.learn.python.learn.datasets import mnist as mnist_data\n",
     "read_data_sets('d', validation_size=0)"),
])
def test_the_contrib_learn_spellings_convert_alike(rules, loader, imports, call):
    result = rewrite_source(program(loader, imports), "mnist.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert f"mnist = {call}" in new and "contrib" not in new, new


@pytest.mark.parametrize("extra", [
    "batch_x, batch_y = mnist.train.next_batch(32)\n",
    "print(mnist.train.epochs_completed)\n",
])
def test_a_program_using_what_only_the_dataset_had_keeps_its_loader_and_is_told(rules, extra):
    result = rewrite_source(program('mnist = input_data.read_data_sets("/tmp/data/")', extra=extra),
                            "mnist.py", rules)
    assert result.status == "partial"
    assert "input_data.read_data_sets" in result.new.decode()
    messages = [f.message for f in result.findings if f.kind == "manual"]
    assert any("MNIST loader is kept" in m for m in messages), messages


def test_a_converted_file_still_importing_the_tutorials_is_not_called_converted():
    # The loader's rule off: the import is TensorFlow 1's, which TensorFlow 2 has not.
    from estimator2keras._registry import RuleSet

    result = rewrite_source(program('mnist = input_data.read_data_sets("/tmp/data/")'), "mnist.py",
                            RuleSet.load(ignore=["E2K011"]))
    assert result.status == "partial"
    assert any("TensorFlow 2 has no tensorflow.examples.tutorials" in f.message for f in result.findings), \
        [f.message for f in result.findings]


def test_a_file_without_estimator_code_is_left_alone(rules):
    source = b"from tensorflow.examples.tutorials.mnist import input_data\n\nmnist = input_data.read_data_sets('d')\n"
    result = rewrite_source(source, "data.py", rules)
    assert result.new == source
