"""A converted canned model predicts what the Estimator's head predicted from the same logits.

The model's `predict_step` turns logits into the Estimator's dict (probabilities, class ids,
classes...). These slow tests give both the same logits: TF 2.15's own heads
(`tensorflow_estimator`'s BinaryClassHead, MultiClassHead, RegressionHead) on one side, the
emitted class with its `call` fixed to those logits on the other, and compare every key.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from estimator2keras import _helpers
from estimator2keras._engine import rewrite_source

PROGRAM = textwrap.dedent('''\
    import tensorflow as tf

    age = tf.feature_column.numeric_column("age")


    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({{"age": [30.0, 40.0]}}, {labels})).batch(2)


    estimator = {estimator}
    estimator.train(input_fn)
''')

LOGITS = {
    1: [[-1.5], [0.0], [2.25], [0.3]],
    3: [[0.1, -2.0, 3.0], [1.0, 1.0, 0.5], [-0.5, 0.25, 0.2], [2.0, -1.0, 0.0]],
}

COMPARE = textwrap.dedent('''
    import json, sys
    import numpy as np
    import tensorflow as tf
    from tensorflow_estimator.python.estimator.head import binary_class_head, multi_class_head, regression_head

    spec = json.loads(sys.argv[1])
    logits = tf.constant(spec["logits"], tf.float32)
    vocabulary = spec["vocabulary"]
    if spec["head"] == "binary":
        head = binary_class_head.BinaryClassHead(label_vocabulary=vocabulary)
    elif spec["head"] == "multi":
        head = multi_class_head.MultiClassHead(len(spec["logits"][0]), label_vocabulary=vocabulary)
    else:
        head = regression_head.RegressionHead()
    expected = {k: v.numpy() for k, v in head.predictions(logits).items()}

    namespace = {"tf": tf}
    exec(spec["classes"], namespace)
    model_class = namespace[spec["name"]]

    class Fixed(model_class):
        def call(self, inputs, training=False):
            return logits

    got = {k: v.numpy() for k, v in Fixed().predict_step((tf.zeros([4, 1]),)).items()}
    assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
    for key, value in expected.items():
        if value.dtype.kind in "fc":
            np.testing.assert_allclose(got[key], value, rtol=1e-6, atol=1e-7, err_msg=key)
        else:
            assert got[key].dtype == value.dtype and got[key].shape == value.shape, (key, got[key], value)
            assert (got[key] == value).all(), (key, got[key], value)
    print("OK", sorted(got))
''')


def _classes(source: str) -> tuple[str, str]:
    """The emitted definitions (the model, the linear layer, the head's predictions), and the
    model's name."""
    tree = ast.parse(source)
    classes = [node for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))]
    model = next(c.name for c in classes if c.name.endswith("Model") and c.name not in _helpers.catalogue())
    return "\n\n".join(ast.get_source_segment(source, c) for c in classes), model


@pytest.mark.slow
@pytest.mark.parametrize("estimator, head, width, labels, vocabulary", [
    ("tf.estimator.DNNClassifier([2], [age])", "binary", 1, "[0, 1]", None),
    ("tf.estimator.LinearClassifier([age], label_vocabulary=['no', 'yes'])", "binary", 1, "['no', 'yes']",
     ["no", "yes"]),
    ("tf.estimator.DNNClassifier([2], [age], n_classes=3)", "multi", 3, "[0, 2]", None),
    ("tf.estimator.LinearClassifier([age], n_classes=3, label_vocabulary=['a', 'b', 'c'])", "multi", 3,
     "['a', 'c']", ["a", "b", "c"]),
    ("tf.estimator.DNNRegressor([2], [age])", "regression", 1, "[1.0, 2.0]", None),
])
def test_predictions_are_the_estimator_heads(rules, estimator, head, width, labels, vocabulary):
    source = PROGRAM.format(estimator=estimator, labels=labels)
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    classes, name = _classes(_helpers.inline(result.new.decode(), result.helpers))  # with the helpers they use
    spec = {"logits": LOGITS[width], "head": head, "vocabulary": vocabulary, "classes": classes, "name": name}
    run = subprocess.run([sys.executable, "-c", COMPARE, json.dumps(spec)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and "OK" in run.stdout, run.stderr[-3000:]
    assert np.asarray(LOGITS[width]).shape[1] == width
