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
from estimator2keras.testing import write_helpers
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
    import json, os, sys
    import tensorflow as tf
    sys.path.insert(0, os.path.dirname(sys.argv[1]))  # its helpers module, beside it
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
    write_helpers(result, path.parent)  # the module it imports its helpers from
    inputs = re.search(r"\n        return \((.*?)\)\n\n    def network", text, re.S).group(1)
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


def test_columns_over_values_the_program_computes_from_constants(rules):
    """`CSV_COLUMNS = "...".split(",")`, features filtered from it, `"f%d" % i` names and a loop
    taking a vocabulary dict's items apart: Python's values, spelled out as literals."""
    from estimator2keras._engine import rewrite_source

    program = '''\
import numpy as np
import tensorflow as tf

CSV_COLUMNS = "age,hours,color,size,label".split(",")
LABEL = "label"
VOCABS = {"color": ["red", "blue"], "size": ["S", "M", "L"]}
NUMERIC = [c for c in CSV_COLUMNS if c != LABEL and c not in VOCABS]
EXTRA = ["x%d" % i for i in range(2)]

columns = [tf.feature_column.numeric_column(k) for k in NUMERIC + EXTRA]
for name, vocab in VOCABS.items():
    categorical = tf.feature_column.categorical_column_with_vocabulary_list(name, vocab)
    columns.append(tf.feature_column.indicator_column(categorical))
est = tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=columns)
est.train(lambda: tf.data.Dataset.from_tensor_slices(({"age": [1.0]}, [0])).batch(1), steps=1)
'''
    result = rewrite_source(program.encode(), "constants.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    for key in ("age", "hours", "x0", "x1", "color", "size"):
        assert f'features["{key}"]' in new, new
    assert 'features["label"]' not in new
    assert "vocabulary=['red', 'blue']" in new or 'vocabulary=["red", "blue"]' in new, new


def test_a_constant_list_changed_after_it_is_bound_is_not_read_as_computed(rules):
    from estimator2keras._engine import rewrite_source

    program = '''\
import tensorflow as tf

NUMERIC = ["a%d" % i for i in range(2)]
NUMERIC.append("b")
columns = [tf.feature_column.numeric_column(k) for k in NUMERIC]
est = tf.estimator.LinearRegressor(feature_columns=columns)
est.train(lambda: tf.data.Dataset.from_tensor_slices(({"a0": [1.0]}, [0.0])).batch(1), steps=1)
'''
    result = rewrite_source(program.encode(), "changed.py", rules)
    assert result.status == "partial"
    assert any("does not loop over values the source spells or computes" in f.message for f in result.findings), \
        [f.format() for f in result.findings]


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


# ---------------------------------------------------------------------------------------------
# Columns that functions of the program return (issue 12): a call is the function's returned
# expression, its parameters bound to the call's arguments (or their defaults), recursively.
# ---------------------------------------------------------------------------------------------
def _rewrite(rules, program: str, path: str = "program.py"):
    result = rewrite_source(textwrap.dedent(program).encode(), path, rules)
    return result, result.new.decode()


ONE_HOT = '''\
    import tensorflow as tf

    VOCABULARIES = {{"sex": ["male", "female"], "class": ["First", "Second", "Third"]}}


    def one_hot_cat_column(name, vocab):
        return tf.feature_column.indicator_column(
            tf.feature_column.categorical_column_with_vocabulary_list(name, vocab))


    feature_columns = {columns}


    def input_fn():
        features = {{"sex": ["male", "female"], "class": ["First", "Third"], "age": [1.0, 2.0]}}
        return tf.data.Dataset.from_tensor_slices((features, [0, 1])).batch(2)


    est = tf.estimator.LinearClassifier(feature_columns)
    est.train(input_fn, steps=1)
'''


@pytest.mark.parametrize("columns", [
    # TensorFlow's boosted-trees tutorial: the helper called in the list, its arguments literals
    "[one_hot_cat_column('sex', ['male', 'female']), one_hot_cat_column('class', ['First', 'Second', 'Third']),\n"
    "                   tf.feature_column.numeric_column('age')]",
    # ... and in a comprehension over the names, the vocabulary read from a module-level dict
    "[one_hot_cat_column(name, VOCABULARIES[name]) for name in ['sex', 'class']] + "
    "[tf.feature_column.numeric_column('age')]",
])
def test_a_column_a_function_returns_is_read_with_the_calls_arguments(rules, columns):
    result, text = _rewrite(rules, ONE_HOT.format(columns=columns))
    assert result.status == "converted", [f.format() for f in result.findings]
    # Each call is its own column, with its own arguments: the function and its calls go.
    assert "def one_hot_cat_column" not in text and "feature_column" not in text
    assert 'features["sex"]' in text and 'features["class"]' in text and 'features["age"]' in text
    assert "tf.one_hot(sex, 2)" in text and "tf.one_hot(f_class, 3)" in text
    assert 'StringLookup(vocabulary=["male", "female"])' in text.replace("'", '"')


def test_a_function_of_columns_called_elsewhere_too_stays(rules):
    program = ONE_HOT.format(columns="[one_hot_cat_column('sex', ['male', 'female'])]") + \
        "    other = one_hot_cat_column('class', ['First'])\n"
    result, text = _rewrite(rules, program)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "def one_hot_cat_column" in text and "other = one_hot_cat_column('class', ['First'])" in text
    assert "feature_columns = [" not in text and "tf.one_hot(sex, 2)" in text


def test_functions_calling_functions_bind_each_call(rules):
    # A parameter passed on to another function, a default, a name of the caller's loop.
    program = '''\
        import tensorflow as tf

        VOCABULARIES = {"sex": ["male", "female"], "class": ["First", "Second", "Third"]}


        def categorical(key, buckets=0):
            return tf.feature_column.categorical_column_with_vocabulary_list(
                key, VOCABULARIES[key], num_oov_buckets=buckets)


        def embedded(key, dimension, buckets=1):
            return tf.feature_column.embedding_column(categorical(key, buckets), dimension=dimension)


        def build_columns(dimension):
            return [embedded(name, dimension) for name in VOCABULARIES] + [
                tf.feature_column.indicator_column(categorical("sex"))]


        def input_fn():
            features = {"sex": ["male", "female"], "class": ["First", "Third"]}
            return tf.data.Dataset.from_tensor_slices((features, [0.0, 1.0])).batch(2)


        est = tf.estimator.DNNRegressor(hidden_units=[2], feature_columns=build_columns(3))
        est.train(input_fn, steps=1)
    '''
    result, text = _rewrite(rules, program)
    assert result.status == "converted", [f.format() for f in result.findings]
    for name in ("categorical", "embedded", "build_columns"):
        assert f"def {name}" not in text
    # sex with 1 OOV bucket (embedded) and without (the indicator): two columns, 3 and 2 ids.
    assert "tf.one_hot(sex, 3)" in text and "tf.one_hot(sex_2, 2)" in text or \
        "tf.one_hot(sex_2, 3)" in text and "tf.one_hot(sex, 2)" in text
    assert "self.f_class_embedding = tf.keras.layers.Dense(\n            3," in text
    assert "tf.one_hot(f_class, 4)" in text


def test_columns_unpacked_from_a_comprehension_or_a_module_constant(rules):
    program = '''\
        import tensorflow as tf

        INPUT_COLUMNS = [
            tf.feature_column.categorical_column_with_vocabulary_list("gender", ["F", "M"]),
            tf.feature_column.numeric_column("age"),
        ]


        def get_columns():
            age, hours = [tf.feature_column.numeric_column(k) for k in ("age", "hours")]
            (gender, _) = INPUT_COLUMNS
            age_buckets = tf.feature_column.bucketized_column(age, boundaries=[18, 65])
            return [age, hours, age_buckets, tf.feature_column.crossed_column([age_buckets, gender], 10)]


        def input_fn():
            features = {"age": [20.0, 70.0], "hours": [1.0, 2.0], "gender": ["F", "M"]}
            return tf.data.Dataset.from_tensor_slices((features, [0, 1])).batch(2)


        est = tf.estimator.LinearClassifier(feature_columns=get_columns())
        est.train(input_fn, steps=1)
    '''
    result, text = _rewrite(rules, program)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "def get_columns" not in text and "INPUT_COLUMNS" not in text
    # Each unpacked name is one column, read once: one Discretization, crossed and used alone.
    assert text.count("Discretization(") == 1 and "age_buckets_2" not in text and "age_2" not in text
    assert 'features["hours"]' in text and "HashedCrossing(num_bins=10)" in text


def test_unpacking_more_names_than_columns_is_refused(rules):
    program = '''\
        import tensorflow as tf


        def get_columns():
            age, hours, extra = [tf.feature_column.numeric_column(k) for k in ("age", "hours")]
            return [age, hours]


        est = tf.estimator.LinearClassifier(feature_columns=get_columns())
        est.train(lambda: tf.data.Dataset.from_tensor_slices(({"age": [1.0], "hours": [1.0]}, [0])).batch(1))
    '''
    result, _ = _rewrite(rules, program)
    assert result.status == "partial"
    assert any(f.code == "E2K504" and "3 names are bound to 2 feature columns" in f.message for f in result.findings)


def test_a_run_time_argument_of_the_factory_is_a_constructor_argument(rules):
    # census's trainer: `featurizer.get_deep_and_wide_columns(embedding_size)` in
    # `build_estimator(config, embedding_size=8)`, called with `embedding_size=args.embedding_size`.
    program = '''\
        import argparse

        import tensorflow as tf

        INPUT_COLUMNS = [
            tf.feature_column.categorical_column_with_hash_bucket("occupation", hash_bucket_size=100),
            tf.feature_column.numeric_column("age"),
        ]


        def get_deep_and_wide_columns(embedding_size=8):
            (occupation, age) = INPUT_COLUMNS
            deep_columns = [tf.feature_column.embedding_column(occupation, dimension=embedding_size), age]
            wide_columns = [occupation, age]
            return deep_columns, wide_columns


        def build_estimator(config, embedding_size=8):
            (deep_columns, wide_columns) = get_deep_and_wide_columns(embedding_size)
            return tf.estimator.DNNLinearCombinedClassifier(
                config=config, linear_feature_columns=wide_columns, dnn_feature_columns=deep_columns,
                dnn_hidden_units=[4])


        def input_fn():
            features = {"occupation": ["a", "b"], "age": [1.0, 2.0]}
            return tf.data.Dataset.from_tensor_slices((features, [0, 1])).batch(2)


        parser = argparse.ArgumentParser()
        parser.add_argument("--embedding-size", type=int, default=8)
        args = parser.parse_args()
        estimator = build_estimator(tf.estimator.RunConfig(), embedding_size=args.embedding_size)
        estimator.train(input_fn, steps=1)
    '''
    result, text = _rewrite(rules, program)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "def get_deep_and_wide_columns" not in text and "INPUT_COLUMNS" not in text
    # The dimension, known when the program runs, is the model's constructor argument.
    assert "occupation_embedding_dimension=embedding_size" in text
    assert "self.occupation_embedding_dimension = occupation_embedding_dimension" in text
    assert text.count("tf.keras.layers.Hashing(num_bins=100)") == 1  # one column, read by both models


def test_what_a_function_cannot_be_read_for_is_refused_precisely(rules):
    base = ONE_HOT.format(columns="[one_hot_cat_column('sex')]")
    result, _ = _rewrite(rules, base)
    assert any(f.code == "E2K504" and "`one_hot_cat_column` is called without `vocab`" in f.message
               for f in result.findings)
    changed = base.replace("    def one_hot_cat_column(name, vocab):\n",
                           "    def one_hot_cat_column(name, vocab):\n        vocab.append('x')\n")
    changed = changed.replace("[one_hot_cat_column('sex')]", "[one_hot_cat_column('sex', ['male'])]")
    result, _ = _rewrite(rules, changed)
    assert any(f.code == "E2K504" and "`one_hot_cat_column` changes its parameters" in f.message
               for f in result.findings)


CROSS_MODULE = {
    "cols.py": '''\
        import numpy as np
        import tensorflow as tf

        COLUMNS = ["a", "b"]
        VOCABULARY = {vocabulary}


        def get_columns():
            return [tf.feature_column.numeric_column(c) for c in COLUMNS] + [
                tf.feature_column.indicator_column(
                    tf.feature_column.categorical_column_with_vocabulary_list("c", VOCABULARY))]
    ''',
    "train.py": '''\
        import tensorflow as tf

        import cols


        def input_fn():
            features = {"a": [1.0, 2.0], "b": [2.0, 3.0], "c": ["x", "y"]}
            return tf.data.Dataset.from_tensor_slices((features, [0, 1])).batch(2)


        est = tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=cols.get_columns())
        est.train(input_fn, steps=3)
    ''',
}


def _program_pass(tmp_path, rules, files: dict[str, str]):
    from estimator2keras.analysis.federation import rewrite_group

    paths = []
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
        paths.append(str(tmp_path / name))
    results = rewrite_group(paths, lambda p: open(p, "rb").read(), lambda p: rules)
    assert results is not None
    return {r.path.rsplit("/", 1)[-1]: r for r in results}


@pytest.mark.parametrize("vocabulary", ['["x", "y"]', "names.VOCABULARY"])
def test_a_function_of_another_module_returns_the_columns(tmp_path, rules, vocabulary):
    # The vocabulary is a constant of cols.py, or of a third module (`names.VOCABULARY`).
    files = dict(CROSS_MODULE, **{"cols.py": "        import names\n" + CROSS_MODULE["cols.py"].format(vocabulary=vocabulary),
                                  "names.py": 'VOCABULARY = ["x", "y"]\n'})
    results = _program_pass(tmp_path, rules, files)
    assert results["train.py"].status == "converted", [f.format() for f in results["train.py"].findings]
    train, columns = results["train.py"].new.decode(), results["cols.py"].new.decode()
    assert 'features["a"]' in train and 'features["b"]' in train
    assert 'StringLookup(vocabulary=["x", "y"])' in train  # the other module's constant, as its value
    assert "def get_columns" not in columns and "tf." not in columns


def test_a_run_time_value_of_another_module_is_refused(tmp_path, rules):
    files = dict(CROSS_MODULE, **{"cols.py": CROSS_MODULE["cols.py"].format(vocabulary='np.unique(["y", "x"])')})
    results = _program_pass(tmp_path, rules, files)
    assert results["train.py"].status == "partial"
    message = " ".join(f.message for r in results.values() for f in r.findings if f.code == "E2K504")
    assert "`VOCABULARY` is a value of cols.py, a module other than the one building the model, and not a literal" \
        in message


def test_a_parameter_given_to_a_function_that_changes_it_is_refused(rules):
    program = ONE_HOT.format(columns="[outer('sex', ['male', 'female'])]").replace(
        "    feature_columns =",
        "    def inner(name, vocab):\n        vocab.append('other')\n        return one_hot_cat_column(name, vocab)\n\n\n"
        "    def outer(name, vocab):\n        return inner(name, vocab)\n\n\n    feature_columns =")
    result, _ = _rewrite(rules, program)
    assert result.status == "partial"
    assert any(f.code == "E2K504" and "`inner` changes its parameters" in f.message for f in result.findings)


def test_a_list_built_once_in_a_loop_of_calls_holds_the_same_columns_for_both_parts(rules):
    # Read by a wide & deep model's linear and DNN parts: one lookup per feature, not two.
    program = ONE_HOT.format(columns="[]").replace(
        "    feature_columns = []\n",
        "    feature_columns = []\n    for name in ['sex', 'class']:\n"
        "        feature_columns.append(one_hot_cat_column(name, VOCABULARIES[name]))\n",
    ).replace("tf.estimator.LinearClassifier(feature_columns)",
              "tf.estimator.DNNLinearCombinedClassifier(\n"
              "        linear_feature_columns=feature_columns, dnn_feature_columns=feature_columns, dnn_hidden_units=[2])")
    result, text = _rewrite(rules, program)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert text.count("StringLookup(") == 2 and "sex_2" not in text


def test_columns_a_function_makes_per_call_are_named_where_it_is_called(rules):
    # `col`, bound in a function two calls read, names neither column: `town` (the call's
    # name) and `sex` (the column's own) do.
    program = '''\
        import tensorflow as tf


        def categorical(name, vocab):
            col = tf.feature_column.categorical_column_with_vocabulary_list(name, vocab)
            return col


        def one_hot(name, vocab):
            return tf.feature_column.indicator_column(categorical(name, vocab))


        gender = one_hot("sex", ["male", "female"])
        town = categorical("town", ["a", "b"])
        town_embedded = tf.feature_column.embedding_column(town, dimension=2)


        def input_fn():
            return tf.data.Dataset.from_tensor_slices(({"sex": ["male", "x"], "town": ["a", "b"]}, [0, 1])).batch(2)


        est = tf.estimator.DNNClassifier(
            hidden_units=[2], feature_columns=[gender, town_embedded, tf.feature_column.indicator_column(town)])
        est.train(input_fn, steps=1)
    '''
    result, text = _rewrite(rules, program)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "return (sex, town)" in text and "col" not in re.findall(r"self\.(\w+)_lookup", text)
    assert "def categorical" not in text and "def one_hot" not in text and "gender =" not in text


def test_a_function_calling_itself_is_refused(rules):
    program = '''\
        import tensorflow as tf


        def wide():
            return deep()


        def deep():
            return wide()


        est = tf.estimator.LinearClassifier(wide())
        est.train(lambda: tf.data.Dataset.from_tensor_slices(({"a": [1.0]}, [0])).batch(1), steps=1)
    '''
    result, _ = _rewrite(rules, program)
    assert result.status == "partial"
    assert any(f.code == "E2K504" and "`wide` calls itself" in f.message for f in result.findings)


def test_column_keys_and_sizes_computed_from_a_loops_values(rules):
    """`numeric_column("x%d" % i) for i in range(N)`, `embedding_column(..., 2 * DIM)`: the
    keys and sizes Python computes, for each pass."""
    from estimator2keras._engine import rewrite_source

    program = '''\\
import tensorflow as tf

N = 3
DIM = 2
columns = [tf.feature_column.numeric_column("x%d" % i) for i in range(N)]
city = tf.feature_column.categorical_column_with_vocabulary_list("city", ["a", "b"])
columns.append(tf.feature_column.embedding_column(city, 2 * DIM))
est = tf.estimator.DNNRegressor(hidden_units=[4], feature_columns=columns)
est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x0": [1.0]}, [0.0])).batch(1), steps=1)
'''
    result = rewrite_source(program.encode(), "keys.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    for key in ("x0", "x1", "x2"):
        assert f'features["{key}"]' in new, new
    assert "self.city_embedding = tf.keras.layers.Dense(\n            2 * DIM," in new, new
