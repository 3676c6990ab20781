"""In a converted file of a TF 1.x program (`import tensorflow as tf`), the TF1 names left
outside the converted code keep their meaning on TensorFlow 2 (E2K005), as tf_upgrade_v2
would spell them; TF2's own names, and files that do not convert, stay as written."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet


SOURCE = '''\
import tensorflow as tf

tf.logging.set_verbosity(tf.logging.INFO)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [[2.0]])).batch(1)


def main(_):
    tf.reset_default_graph()
    with tf.gfile.Open("/dev/null") as handle:
        handle.read()
    columns = [tf.feature_column.numeric_column("x")]
    regressor = tf.estimator.LinearRegressor(feature_columns=columns)
    regressor.train(input_fn, steps=1)


if __name__ == "__main__":
    tf.app.run(main)
'''


def rewrite(source: str):
    return rewrite_source(source.encode(), "program.py", RuleSet.load((), (), ()))


def test_tf1_names_of_a_converted_file_keep_their_meaning():
    result = rewrite(SOURCE)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert "tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)" in new
    assert "tf.compat.v1.reset_default_graph()" in new
    assert "tf.io.gfile.GFile(\"/dev/null\")" in new  # its TF2 name: the same object
    assert "tf.compat.v1.app.run(main)" in new
    assert "tf.data.Dataset.from_tensor_slices" in new  # TF2's own name, as written
    assert any(f.code == "E2K005" and "keep their meaning" in f.message for f in result.findings)


def test_a_file_that_does_not_convert_keeps_its_tf1_names():
    source = SOURCE.replace("    regressor.train(input_fn, steps=1)\n",
                            "    regressor.train(input_fn, steps=1)\n    regressor.get_variable_names()\n")
    result = rewrite(source)
    assert result.status == "partial"
    assert "tf.logging.set_verbosity(tf.logging.INFO)" in result.new.decode()
