"""Feature columns -> preprocessing: what the converted model computes is what the columns did.

The slow tests run TensorFlow: TF 2.15's own feature columns give each column's ids (and
values) for raw features that feature columns treat specially — "" and -1 are ignored,
out-of-vocabulary values without OOV buckets have no id — and the converted model's
`preprocess` must give the same, on TF 2.15 and (with E2K_TARGET_PYTHON) the newest TF.
"""
from __future__ import annotations

import json
import re
import subprocess
import textwrap

import numpy as np
import pytest

from conftest import REPO
from estimator2keras._engine import rewrite_source
from parity_programs import support

PROGRAMS = REPO / "tests" / "canned_programs"
COLUMNS = PROGRAMS / "columns.py"

RAW_FEATURES = textwrap.dedent("""
    import numpy as np
    FEATURES = {
        "age": np.array([20.0, 39.0, 45.0, 60.0, 31.0, 80.0], np.float32),
        "size": np.array([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 12]], np.float32),
        "city": np.array(["paris", "", "lima", "oslo", "rome", "berlin"]),
        "code": np.array([10, -1, 40, 30, 99, 20]),
        "color": np.array(["red", "blue", "", "pink", "green", "red"]),
        "job": np.array(["a", "", "b", "c", "d", "e"]),
        "zip_code": np.array([7, -1, 12, 7, 100, 3]),
        "floor": np.array([0, 5, 2, -1, 3, 1]),
        "floor_weight": np.array([1.0, 0.5, 2.0, 1.0, 0.0, 3.0], np.float32),
    }
""")

# TF 2.15's feature columns: each named column's ids (-1: no id) or values.
LEGACY_SCRIPT = RAW_FEATURES + textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    from tensorflow.python.feature_column import feature_column_v2 as fc2
    namespace = {}
    exec(open(sys.argv[1]).read(), namespace)
    cache = fc2.FeatureTransformationCache({k: tf.constant(v) for k, v in FEATURES.items()})
    out = {}
    for name, column in namespace.items():
        if isinstance(column, fc2.WeightedCategoricalColumn):
            weights = column.get_sparse_tensors(cache, None).weight_tensor
            out[name] = tf.sparse.to_dense(weights, default_value=0.0).numpy().reshape(-1).tolist()
        elif isinstance(column, fc2.CategoricalColumn):
            ids = column.get_sparse_tensors(cache, None).id_tensor
            dense = tf.sparse.to_dense(ids, default_value=-1).numpy()
            assert dense.shape[1] <= 1, (name, dense)  # one value per example
            out[name] = dense.reshape(len(FEATURES["age"]), -1).max(axis=1, initial=-1).tolist()
        elif isinstance(column, fc2.NumericColumn):
            out[name] = column.get_dense_tensor(cache, None).numpy().tolist()
    print("RESULT " + json.dumps(out))
""")

# The converted model: `preprocess` on the same raw features.
KERAS_SCRIPT = RAW_FEATURES + textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    namespace = {}
    exec(open(sys.argv[1]).read(), namespace)
    model, names = namespace["model"], json.loads(sys.argv[2])
    inputs = model.preprocess({k: tf.constant(v) for k, v in FEATURES.items()})
    print("RESULT " + json.dumps({n: tf.convert_to_tensor(t).numpy().tolist() for n, t in zip(names, inputs)}))
""")


def _run(python: str, script: str, *args: str) -> dict:
    done = subprocess.run([python, "-c", script, *args], capture_output=True, text=True, timeout=300, cwd=PROGRAMS)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def converted(tmp_path_factory, rules):
    result = rewrite_source(COLUMNS.read_bytes(), "columns.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    text = result.new.decode()
    path = tmp_path_factory.mktemp("columns") / "columns_keras.py"
    path.write_text(text)
    inputs = re.search(r"inputs = \((.*?)\)\n", text, re.S).group(1)
    names = [n.strip() for n in inputs.replace("\n", " ").split(",") if n.strip()]
    return path, names


@pytest.fixture(scope="module")
def expected():
    return _run(support.legacy_python(), LEGACY_SCRIPT, str(COLUMNS))


def test_every_column_is_converted_and_named_after_its_variable(converted):
    _, names = converted
    assert names == ["age", "size", "age_buckets", "city", "city_oov", "code", "code_no_oov", "color",
                     "first_colors", "job", "zip_code", "floor", "weighted_floor", "buckets_x_city", "floor_x_city", "city_x_code"]


def _check(actual: dict, expected: dict) -> None:
    assert set(expected) <= set(actual), set(expected) - set(actual)
    for name, values in expected.items():
        got = actual[name]
        if name in ("age", "size"):
            assert np.allclose(got, values, rtol=1e-6), name
        else:
            assert got == values, f"{name}: feature columns {values}, converted {got}"


@pytest.mark.slow
@support.requires_legacy
def test_preprocess_gives_the_feature_columns_ids(converted, expected):
    path, names = converted
    # the raw values were chosen to reach the special cases; make sure they do
    assert expected["city"] == [0, -1, -1, 2, 1, -1]        # "" and out of vocabulary: no id
    assert expected["code"][1] == -1 and expected["zip_code"][1] == -1  # -1 is ignored
    assert -1 in expected["floor_x_city"] and expected["city_oov"][2] >= 2  # no cross; an OOV bucket
    assert expected["first_colors"][1] == -1  # "blue", the file's 3rd line, is beyond vocabulary_size=2
    _check(_run(support.legacy_python(), KERAS_SCRIPT, str(path), json.dumps(names)), expected)


@pytest.mark.slow
@support.requires_legacy
@support.requires_target
def test_preprocess_gives_the_feature_columns_ids_on_newest_tensorflow(converted, expected):
    path, names = converted
    _check(_run(support.target_python(), KERAS_SCRIPT, str(path), json.dumps(names)), expected)


def test_columns_appended_in_a_loop_over_keys_the_source_spells(rules):
    """TensorFlow's premade-Estimator tutorial: `for key in train.keys(): columns.append(...)`,
    `train` returned by a function of the file as a dict literal; constants and slices too."""
    from estimator2keras._engine import rewrite_source

    program = '''\
import numpy as np
import tensorflow as tf

CSV = ["a", "b", "c", "label"]


def make_set(n):
    features = {"b": np.zeros(n), "a": np.ones(n)}
    return features, np.zeros(n)


train, train_y = make_set(8)
columns = []
for key in train.keys():
    columns.append(tf.feature_column.numeric_column(key=key))
columns.extend([tf.feature_column.numeric_column(k) for k in CSV[2:-1]])
columns += [tf.feature_column.numeric_column("d")]
est = tf.estimator.LinearRegressor(feature_columns=columns)
est.train(lambda: tf.data.Dataset.from_tensor_slices((dict(train), train_y)).batch(2), steps=1)
'''
    result = rewrite_source(program.encode(), "premade.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    for key in ("a", "b", "c", "d"):
        assert f'features["{key}"]' in new
    assert "feature_column" not in new and "columns.append" not in new


def test_a_list_changed_in_a_way_e2k_cannot_read_is_refused(rules):
    from estimator2keras._engine import rewrite_source

    program = '''\
import tensorflow as tf

columns = [tf.feature_column.numeric_column(key="a")]
columns.insert(0, tf.feature_column.numeric_column(key="b"))
est = tf.estimator.LinearRegressor(feature_columns=columns)
est.train(lambda: tf.data.Dataset.from_tensor_slices(({"a": [1.0]}, [1.0])).batch(1), steps=1)
'''
    result = rewrite_source(program.encode(), "dynamic.py", rules)
    assert result.status == "partial"
    assert any(f.code == "E2K504" and "changed here" in f.message for f in result.findings)


@pytest.mark.parametrize("columns, use", [
    ('    return [tf.feature_column.numeric_column("a"), tf.feature_column.numeric_column("b")]', "build_columns()"),
    ('    cols = []\n    for name in ["a", "b"]:\n        cols.append(tf.feature_column.numeric_column(name))\n    return cols',
     "columns"),
])
def test_columns_returned_by_a_function_go_with_it(rules, columns, use):
    from estimator2keras._engine import rewrite_source

    program = (
        "import tensorflow as tf\n\n\ndef build_columns():\n" + columns + "\n\n\ncolumns = build_columns()\n"
        f"est = tf.estimator.LinearRegressor(feature_columns={use})\n"
        "est.train(lambda: tf.data.Dataset.from_tensor_slices(({'a': [1.0], 'b': [2.0]}, [1.0])).batch(1), steps=1)\n"
    )
    if use != "columns":
        program = program.replace("columns = build_columns()\n", "")
    result = rewrite_source(program.encode(), "helper.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert "def build_columns" not in new and 'features["a"]' in new and 'features["b"]' in new
