"""The TF1 -> TF2 symbol table: respelling behaviour, and every target checked against the
real TensorFlow 2.15 and the newest TensorFlow (like tf_upgrade_v2's tests of its tables)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from estimator2keras._engine import rewrite_source
from estimator2keras._symbols import table

PROGRAM = textwrap.dedent(
    """\
    import tensorflow as tf
    import tensorflow.compat.v1 as tf1


    def input_fn():
        x = tf1.log(tf1.to_float(features))
        y = tf1.reduce_mean(x, 1, keep_dims=True)
        z = tf1.argmax(y, dimension=1)
        s = tf1.squeeze(z, [1], "name", [1])
        w = tf1.where(cond, a, b)
        v = tf.where(cond, a, b)
        return tf1.data.Dataset.from_tensor_slices((x, y)).batch(2)


    def model_fn(features, labels, mode):
        logits = tf1.layers.Dense(1)(features)
        loss = tf1.losses.mean_squared_error(labels, logits)
        train_op = tf1.train.AdamOptimizer().minimize(loss, tf1.train.get_global_step())
        return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    est = tf1.estimator.Estimator(model_fn)
    est.train(input_fn)
    """
)


def test_respelling_in_converted_input_fn(rules):
    new = rewrite_source(PROGRAM.encode(), "p.py", rules).new.decode()
    body = new[new.index("def input_fn") : new.index("def build_model")]
    assert body == textwrap.dedent(
        """\
        def input_fn():
            x = tf.math.log(tf.compat.v1.to_float(features))
            y = tf.reduce_mean(x, 1, keepdims=True)
            z = tf.argmax(y, axis=1)
            s = tf1.squeeze(z, [1], "name", [1])
            w = tf.compat.v1.where(cond, a, b)
            v = tf.where(cond, a, b)
            return tf.data.Dataset.from_tensor_slices((x, y)).batch(2)


        """
    )
    # The one call that does not fit TF2's signature keeps its compat.v1 alias, and its import.
    assert "import tensorflow.compat.v1 as tf1" in new


def test_tf1_code_through_the_tf_root(rules):
    source = PROGRAM.replace("import tensorflow.compat.v1 as tf1\n", "").replace("tf1.", "tf.")
    new = rewrite_source(source.encode(), "p.py", rules).new.decode()
    # `tf.to_float` only exists in TF1, so this file is TF1 code: its `tf.where` is v1's.
    assert "tf.compat.v1.to_float(features)" in new and new.count("tf.compat.v1.where(") == 2


CHECK = """
import sys, tensorflow as tf
missing = []
for line in sys.stdin:
    path = line.strip()
    obj = tf
    try:
        for part in path.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        missing.append(path)
print("\\n".join(missing))
"""


def _missing(python: str) -> list[str]:
    targets = sorted({s.target for s in table().values()})
    proc = subprocess.run(
        [python, "-c", CHECK], input="\n".join(targets), capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [m for m in proc.stdout.split("\n") if m]


@pytest.mark.slow
def test_every_target_exists_in_tf_2_15():
    assert _missing(os.environ.get("E2K_LEGACY_PYTHON", sys.executable)) == []


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("E2K_TARGET_PYTHON"), reason="E2K_TARGET_PYTHON (newest TF) not set")
def test_every_target_exists_in_the_newest_tf():
    assert _missing(os.environ["E2K_TARGET_PYTHON"]) == []
