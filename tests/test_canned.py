"""Canned Estimators -> Keras: the defaults each class and API version implies, and what is refused.

No TensorFlow here: these read the emitted code. tests/test_parity_canned.py proves that the
fixtures train like the Estimators; tests/test_feature_columns.py that the columns compute
the same values.
"""
from __future__ import annotations

import textwrap

import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat
from estimator2keras.testing import write_converted

PROGRAM = textwrap.dedent('''\
    import tensorflow as tf
    import tensorflow.compat.v1 as tf1

    age = {fc}.numeric_column("age")
    city = {fc}.categorical_column_with_vocabulary_list("city", ["paris", "rome"])


    def input_fn():
        features = {{"age": [30.0, 40.0], "city": ["paris", "oslo"]}}
        return tf.data.Dataset.from_tensor_slices((features, [0, 1])).batch(2)


    estimator = {estimator}
    estimator.train(input_fn)
''')


def convert(estimator: str, rules, fc: str = "tf.feature_column", program: str = PROGRAM):
    source = program.format(estimator=estimator, fc=fc)
    result = rewrite_source(source.encode(), "program.py", rules)
    return result, flat(result.new.decode())


def converted(estimator: str, rules, **kwargs) -> str:
    result, text = convert(estimator, rules, **kwargs)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "# e2k:" not in text
    return text


def refused(estimator: str, rules, code: str, **kwargs) -> str:
    result, text = convert(estimator, rules, **kwargs)
    assert result.status == "partial"
    manual = [f for f in result.findings if f.kind == "manual"]
    assert [f.code for f in manual] == [code], [f.format() for f in manual]
    assert "estimator.train(input_fn)" in text  # the unit is left as it was
    return manual[0].message


DNN = "tf.feature_column.indicator_column(city)"


@pytest.mark.parametrize("estimator,optimizer,loss", [
    # TF1 classes: Adagrad(0.05) for a DNN (TF1's: no epsilon), Ftrl(0.2) for a linear model, the loss summed
    (f"tf1.estimator.DNNClassifier([4], [age, {DNN}])", "tf.keras.optimizers.Adagrad(0.05, epsilon=0.0)",
     'BinaryCrossentropy(from_logits=True, reduction="sum")'),
    ("tf1.estimator.LinearRegressor([age, city])", "tf.keras.optimizers.Ftrl(0.2)",
     'MeanSquaredError(reduction="sum")'),
    # TF2 classes: Keras's own Adagrad learning rate (0.001), its OptimizerV2 form; Ftrl(0.2), the loss averaged
    (f"tf.estimator.DNNRegressor([4], [age, {DNN}])", "KerasV2Adagrad(learning_rate=0.001)",
     "MeanSquaredError()"),
    ("tf.estimator.LinearClassifier([age, city], n_classes=3)", "tf.keras.optimizers.Ftrl(learning_rate=0.2)",
     "SparseCategoricalCrossentropy(from_logits=True)"),
    # optimizer=None: the linear Estimators' own Ftrl(min(0.2, 1/sqrt(n_columns)))
    ("tf1.estimator.LinearRegressor([age, city], optimizer=None)", "tf.keras.optimizers.Ftrl(0.2)", None),
    # a name: the Estimator's learning rate, TF1 defaults written out
    (f"tf1.estimator.DNNRegressor([4], [age, {DNN}], optimizer='Adam')",
     "TF1Adam(0.05)", None),
    (f"tf.estimator.DNNRegressor([4], [age, {DNN}], optimizer='SGD')", "tf.keras.optimizers.SGD(learning_rate=0.001)",
     None),
    # objects: TF1 optimizers through E2K101, Keras legacy ones as the new ones
    (f"tf1.estimator.DNNRegressor([4], [age, {DNN}], optimizer=tf1.train.MomentumOptimizer(0.1, 0.9))",
     "tf.keras.optimizers.SGD(0.1, momentum=0.9)", None),
    (f"tf.estimator.DNNRegressor([4], [age, {DNN}], optimizer=lambda: tf.keras.optimizers.legacy.Adam(0.01))",
     "TF1Adam(0.01, epsilon=1e-07)", None),
    # an explicit reduction wins over the class's default
    (f"tf1.estimator.DNNRegressor([4], [age, {DNN}], loss_reduction=tf1.losses.Reduction.SUM_OVER_BATCH_SIZE)",
     None, "MeanSquaredError()"),
    (f"tf.estimator.DNNRegressor([4], [age, {DNN}], loss_reduction=tf.losses.Reduction.SUM)",
     None, 'MeanSquaredError(reduction="sum")'),
])
def test_defaults_follow_the_class_and_its_api_version(rules, estimator, optimizer, loss):
    text = converted(estimator, rules)
    if optimizer is not None:
        assert f"optimizer={optimizer}" in text
    if loss is not None:
        assert f"loss=tf.keras.losses.{loss}" in text


def test_linear_default_learning_rate_for_optimizer_none_depends_on_the_column_count(rules):
    program = PROGRAM.replace('city = {fc}', 'a, b, c, d, e = [{fc}.numeric_column(k) for k in "abcde"]\ncity = {fc}')
    # 7 columns: min(0.2, 1/sqrt(7)) = 0.2; the wide & deep linear part: min(0.005, 1/sqrt(n))
    text = converted("tf1.estimator.LinearRegressor([age, city], optimizer=None)", rules)
    assert "Ftrl(0.2)" in text
    text = converted(
        f"tf1.estimator.DNNLinearCombinedClassifier(linear_feature_columns=[age, city], "
        f"dnn_feature_columns=[age], dnn_hidden_units=[2])", rules)
    assert "linear_optimizer=tf.keras.optimizers.Ftrl(0.005)" in text
    assert "optimizer=tf.keras.optimizers.Adagrad(0.001, epsilon=0.0)" in text
    del program


def test_heads_n_classes_vocabulary_and_weights(rules):
    text = converted(f"tf1.estimator.DNNClassifier([4], [age, {DNN}], n_classes=4, "
                     "label_vocabulary=['a', 'b', 'c', 'd'], weight_column='w')", rules)
    assert "self.logits = tf.keras.layers.Dense(4)" in text
    # The base class (CannedModel) looks the labels up and reads the weights.
    assert ("super().__init__(\"multi_class\", units=4, label_vocabulary=['a', 'b', 'c', 'd'], "
            "weight_column=\"w\")") in text, text
    assert 'weighted_metrics=head_metrics("multi_class")' in text


def test_dnn_layers_activation_dropout_and_batch_norm(rules):
    text = converted(f"tf1.estimator.DNNRegressor([8, 4], [age, {DNN}], activation_fn=tf1.nn.elu, "
                     "dropout=0.25, batch_norm=True)", rules)
    assert 'self.hiddenlayer_0 = tf.keras.layers.Dense(8, activation="elu")' in text
    assert "self.batchnorm_1 = tf.keras.layers.BatchNormalization(momentum=0.999)" in text
    assert "self.dropout = tf.keras.layers.Dropout(0.25)" in text
    # as the Estimator: dense, then dropout, then batch normalization
    body = text[text.index("net = self.hiddenlayer_0(net)"):]
    assert body.index("self.dropout(net, training=training)") < body.index("self.batchnorm_0(net, training=training)")


def test_dnn_inputs_are_ordered_by_column_name(rules):
    text = converted("tf1.estimator.DNNRegressor([4], [tf.feature_column.embedding_column(city, 2), age])", rules)
    concat = text[text.index("net = tf.concat(["):text.index("], axis=1)")]
    assert concat.index("age,") < concat.index("self.city_embedding(")  # "age" < "city_embedding"


@pytest.mark.parametrize("estimator,code,reason", [
    (f"tf1.estimator.DNNRegressor([4], [age, city])", "E2K501", "cannot feed a DNN"),
    ("tf1.estimator.LinearRegressor([age, tf.feature_column.embedding_column(city, 2)])", "E2K502",
     "embedding column in a linear model"),
    (f"tf1.estimator.DNNRegressor([4], [age], label_dimension=2)", "E2K501", "several label dimensions"),
    (f"tf1.estimator.DNNRegressor([4], [age], loss_reduction=tf1.losses.Reduction.MEAN)", "E2K501",
     "loss_reduction is not converted"),
    (f"tf1.estimator.DNNRegressor([4], [age], input_layer_partitioner=p)", "E2K501", "input_layer_partitioner"),
    (f"tf1.estimator.DNNRegressor([], [age])", "E2K501", "an empty list of hidden units"),
    (f"tf1.estimator.DNNRegressor([4], [age], optimizer=make_optimizer())", "E2K501", "not one e2k converts"),
    ("tf1.estimator.LinearRegressor([tf.feature_column.crossed_column(['age', 'city'], 10, hash_key=7)])",
     "E2K504", "hash_key"),
    ("tf1.estimator.LinearRegressor([tf.feature_column.categorical_column_with_identity('n', 4, "
     "default_value=0)])", "E2K504", "default_value"),
    ("tf1.estimator.LinearRegressor(columns_from_somewhere())", "E2K504", "not a list e2k can read"),
])
def test_what_cannot_be_converted_faithfully_is_left_and_marked(rules, estimator, code, reason):
    assert reason in refused(estimator, rules, code)


def test_a_column_used_elsewhere_stays_for_that_code(rules):
    program = PROGRAM.replace("estimator.train(input_fn)", "estimator.train(input_fn)\nprint(age)")
    text = converted("tf1.estimator.LinearRegressor([age, city])", rules, program=program)
    # The columns stay (other code reads them); the model does not read them.
    assert 'age = tf.feature_column.numeric_column("age")' in text and "print(age)" in text
    assert 'LinearModel(1, ["age", "city"])' in text
    assert "self.age" not in text.split("class LinearRegressorModel")[1].split("def network")[1]


def test_a_column_rebound_after_the_estimator_is_refused(rules):
    program = PROGRAM.replace("estimator.train(input_fn)", "estimator.train(input_fn)\nif input_fn:\n    age = 1\nprint(age)")
    message = refused("tf1.estimator.LinearRegressor([age, city])", rules, "E2K504", program=program)
    assert "`age` may be rebound where it is read" in message


RUNTIME = textwrap.dedent('''\
    import numpy as np
    import tensorflow as tf

    data = {{"age": np.array([30.0, 40.0]), "city": np.array(["paris", "oslo"], dtype=object), "n": np.array([1, 2])}}
    columns = []
    for name in ["city", "n"]:
        vocabulary = np.unique(data[name])
        columns.append(tf.feature_column.categorical_column_with_vocabulary_list(name, vocabulary))
    ages = tf.feature_column.bucketized_column(
        tf.feature_column.numeric_column("age"), boundaries=np.arange(20, 60, 10).tolist())


    def input_fn():
        return tf.data.Dataset.from_tensor_slices((data, [0, 1])).batch(2)


    estimator = {estimator}
    estimator.train(input_fn)
''')


def test_values_read_from_the_data_are_evaluated_when_the_model_is_built(rules):
    text = converted("tf.estimator.LinearClassifier(columns + [ages])", rules, program=RUNTIME)
    # The loop's variable and temporary are replaced by their values, per column.
    assert "self.city_lookup = self.vocabulary_lookup(np.unique(data[\"city\"]))" in text
    assert "self.n_lookup = self.vocabulary_lookup(np.unique(data[\"n\"]))" in text
    assert "self.n_size = self.n_lookup.vocabulary_size() - 1" in text
    assert "bin_boundaries=np.arange(20, 60, 10).tolist())" in text
    assert "self.ages_size = len(self.ages.bin_boundaries) + 1" in text
    assert "tf.one_hot(ages, self.ages_size)" in text and "tf.one_hot(city, self.city_size)" in text
    assert "def vocabulary_lookup(vocabulary):" in text
    assert "for name in" not in text and "feature_column" not in text


def test_a_value_read_from_a_name_bound_twice_is_refused(rules):
    # `bounds` is bound twice: its value when the model is built may not be the columns'.
    program = RUNTIME.replace("ages = ", "bounds = [1.0]\nbounds = np.arange(20, 60, 10).tolist()\nages = ")
    program = program.replace("boundaries=np.arange(20, 60, 10).tolist())", "boundaries=bounds)")
    result, _ = convert("tf.estimator.LinearClassifier(columns + [ages])", rules, program=program)
    assert any("`bounds`" in f.message for f in result.findings if f.code == "E2K504"), [
        f.format() for f in result.findings]


def test_a_vocabulary_read_at_run_time_with_oov_buckets_needs_a_dtype(rules):
    program = RUNTIME.replace("(name, vocabulary)", "(name, vocabulary, num_oov_buckets=2)")
    result, _ = convert("tf.estimator.LinearClassifier(columns)", rules, program=program)
    assert any(f.code == "E2K504" and "pass dtype=" in f.message for f in result.findings)


FAMILY = textwrap.dedent('''\
    import numpy as np
    import tensorflow as tf

    train = {{"b": np.array([1.0, 2.0]), "a": np.array([3.0, 4.0])}}
    feature_columns = []
    for key in train.keys():
        feature_columns.append(tf.feature_column.numeric_column(key=key))


    def input_fn():
        return tf.data.Dataset.from_tensor_slices((train, [0, 1])).batch(2)


    estimator = {estimator}
    estimator.train(input_fn)
''')


def test_numeric_columns_over_keys_known_at_run_time(rules):
    program = FAMILY.replace("train = {{", "train = dict({{").replace("[3.0, 4.0])}}", "[3.0, 4.0])}})")
    text = converted("tf.estimator.DNNClassifier([4], feature_columns)", rules, program=program)
    assert "self.numeric_features_keys = sorted(train.keys())" in text
    assert "for key in self.numeric_features_keys], axis=1)" in text
    assert "net = numeric_features" in text


@pytest.mark.parametrize("estimator, reason", [
    ("tf.estimator.LinearClassifier(feature_columns)", "a linear model of columns whose keys are known only at run time"),
    ("tf.estimator.DNNClassifier([4], feature_columns + [tf.feature_column.numeric_column('c')])", "with other columns"),
])
def test_numeric_columns_over_run_time_keys_refused_where_the_order_is_unknown(rules, estimator, reason):
    program = FAMILY.replace("train = {{", "train = dict({{").replace("[3.0, 4.0])}}", "[3.0, 4.0])}})")
    result, _ = convert(estimator, rules, program=program)
    assert any(f.code in ("E2K501", "E2K502") and reason in f.message for f in result.findings), [
        f.format() for f in result.findings]


def test_a_crossed_numeric_feature_is_crossed_as_integers(rules):
    program = PROGRAM.replace("estimator = {estimator}", "cross = {fc}.crossed_column(['age', 'city'], 10)\nestimator = {estimator}")
    text = converted("tf1.estimator.LinearRegressor([age, city, cross])", rules, program=program)
    assert "self.cross((tf.cast(age_values, tf.int64), city_values))" in text


def test_column_lists_built_in_steps_and_through_an_alias(rules):
    program = PROGRAM.replace("estimator = {estimator}", textwrap.dedent('''\
        fc = tf1.feature_column
        columns = [fc.numeric_column(key) for key in ["x", "y"]]
        columns += [age]
        estimator = {estimator}'''))
    text = converted("tf1.estimator.LinearRegressor(columns + [city])", rules, program=program)
    assert 'LinearModel(1, ["age", "city", "x", "y"])' in text
    assert "feature_column" not in text and "tf1" not in text  # columns, their lists and the alias went


def test_classes_are_placed_where_the_columns_were_and_names_do_not_clash(rules):
    program = PROGRAM.replace("import tensorflow.compat.v1 as tf1\n",
                              "import tensorflow.compat.v1 as tf1\n\nDNNClassifierModel = 'taken'\n")
    text = converted(f"tf1.estimator.DNNClassifier([4], [age, {DNN}])", rules, program=program)
    assert "class DNNClassifierModel_2(CannedModel):" in text
    assert text.index("class DNNClassifierModel_2") < text.index("def input_fn")


def test_datasets_are_mapped_through_preprocess(rules):
    program = PROGRAM.replace("estimator.train(input_fn)",
                              "estimator.train(lambda: input_fn().take(1))\nestimator.evaluate(input_fn, steps=1)")
    text = converted("tf1.estimator.LinearRegressor([age, city])", rules, program=program)
    assert "model.fit(input_fn().take(1).map(model.preprocess))" in text
    assert "model.evaluate(input_fn().map(model.preprocess), steps=1)" in text


def test_a_wide_list_crossed_and_returned_by_a_function(rules):
    # The babyweight trainer's style: columns unpacked from a list, bucketized with computed
    # boundaries, the wide list crossed as a whole and embedded, both lists returned.
    program = textwrap.dedent('''\
        import numpy as np
        import tensorflow as tf


        def get_wide_deep():
            is_male, mother_age = [
                tf.feature_column.categorical_column_with_vocabulary_list("is_male", ["True", "False"]),
                tf.feature_column.numeric_column("mother_age"),
            ]
            age_buckets = tf.feature_column.bucketized_column(mother_age, boundaries=np.arange(15, 45, 5).tolist())
            wide = [is_male, age_buckets]
            crossed = tf.feature_column.crossed_column(wide, hash_bucket_size=20)
            deep = [mother_age, tf.feature_column.embedding_column(crossed, 3)]
            return wide, deep


        def input_fn():
            features = {{"is_male": ["True", "False"], "mother_age": [20.0, 31.0]}}
            return tf.data.Dataset.from_tensor_slices((features, [3.0, 4.0])).batch(2)


        wide, deep = get_wide_deep()
        estimator = {estimator}
        estimator.train(input_fn)
    ''')
    text = converted("tf.estimator.DNNLinearCombinedRegressor(linear_feature_columns=wide, dnn_feature_columns=deep, "
                     "dnn_hidden_units=[4])", rules, program=program)
    assert "bin_boundaries=np.arange(15, 45, 5).tolist())" in text
    assert "self.crossed((age_buckets, is_male))" in text or "self.crossed((is_male, age_buckets))" in text
    assert "def get_wide_deep" not in text


def test_a_list_passed_to_other_code_before_the_estimator_is_refused(rules):
    program = PROGRAM.replace("estimator = {estimator}", "columns = [age, city]\nshow(columns)\nestimator = {estimator}")
    message = refused("tf1.estimator.LinearRegressor(columns)", rules, "E2K504", program=program)
    assert "`columns` is changed here in a way e2k cannot read" in message


@pytest.mark.parametrize("shape, width", [
    ("images.shape[1:]", "self.pixels_width"),  # read from the data, as kubeflow's mnist example does
    ("(4, 2)", "8"),  # a literal shape of several dimensions is flattened, as the input layer does
])
def test_a_numeric_shape_read_from_the_data_or_of_several_dimensions(rules, shape, width):
    program = textwrap.dedent(f'''\
        import numpy as np
        import tensorflow as tf

        images = np.zeros((4, 4, 2), np.float32)
        pixels = tf.feature_column.numeric_column("x", shape={shape})


        def input_fn():
            return tf.data.Dataset.from_tensor_slices(({{{{"x": images}}}}, [0, 1, 0, 1])).batch(2)


        estimator = {{estimator}}
        estimator.train(input_fn)
    ''')
    text = converted("tf.estimator.LinearClassifier([pixels], n_classes=3)", rules, program=program)
    assert f'pixels = tf.reshape(tf.cast(features["x"], tf.float32), [-1, {width}])' in text
    if width.startswith("self."):
        assert "self.pixels_width = tf.TensorShape(images.shape[1:]).num_elements()" in text


HELPER = textwrap.dedent('''\
    import tensorflow as tf

    INPUT_COLUMNS = [
        tf.feature_column.numeric_column("pickuplon"),
        tf.feature_column.numeric_column("pickuplat"),
    ]


    def add_more_features(feats, extra=()):
        """Nothing to add (yet!)"""
        {body}


    feature_cols = add_more_features(INPUT_COLUMNS{extra})
    names = [column.name for column in INPUT_COLUMNS]


    def input_fn():
        features = {{"pickuplon": [1.0, 2.0], "pickuplat": [3.0, 4.0], "passengers": [1, 2]}}
        return tf.data.Dataset.from_tensor_slices((features, [5.0, 6.0])).batch(2)


    estimator = {estimator}
    estimator.train(input_fn)
''')


@pytest.mark.parametrize("body, extra, keys", [
    ("return feats", "", ["pickuplat", "pickuplon"]),
    ("return feats + list(extra)", ", extra=[tf.feature_column.numeric_column('passengers')]",
     ["passengers", "pickuplat", "pickuplon"]),
])
def test_columns_a_helper_returns_from_its_arguments(rules, body, extra, keys):
    program = HELPER.replace("{body}", body).replace("{extra}", extra)
    text = converted("tf.estimator.LinearRegressor(feature_cols)", rules, program=program)
    assert f"LinearModel(1, [{', '.join(repr(k).replace(chr(39), chr(34)) for k in keys)}])" in text
    # Other code reads INPUT_COLUMNS: the columns stay; the helper and its result go.
    assert "def add_more_features" not in text and "feature_cols" not in text
    assert "INPUT_COLUMNS = [" in text and "for column in INPUT_COLUMNS" in text
    # Read only for the Estimator, the helper and the columns go with it.
    text = converted("tf.estimator.LinearRegressor(feature_cols)", rules,
                     program=program.replace("names = [column.name for column in INPUT_COLUMNS]\n", ""))
    assert "def add_more_features" not in text and "INPUT_COLUMNS" not in text


def test_a_helper_that_does_more_than_return_is_refused(rules):
    program = HELPER.replace("{body}", "feats.append(tf.feature_column.numeric_column('x'))\n    return feats")
    message = refused("tf.estimator.LinearRegressor(feature_cols)", rules, "E2K504",
                      program=program.replace("{extra}", "").replace("estimator.train(input_fn)", "estimator.train(input_fn)"))
    assert "`add_more_features` changes its parameters" in message


@pytest.mark.parametrize("estimator", [
    "tf1.estimator.DNNClassifier(feature_columns=[age, {DNN}], hidden_units=sizes(), dropout=0.1, batch_norm=True)",
    "tf1.estimator.DNNLinearCombinedClassifier(linear_feature_columns=[age], dnn_feature_columns=[age, {DNN}], "
    "dnn_hidden_units=sizes(), batch_norm=True)",
])
def test_hidden_units_the_program_computes_are_given_to_the_model(rules, estimator):
    # `hidden_units=args['hidden_units']` (the taxifare trainer): evaluated where the Estimator was built.
    program = PROGRAM.replace("estimator = {estimator}", "def sizes():\n    return [4, 2]\n\n\nestimator = {estimator}")
    text = converted(estimator.replace("{DNN}", DNN), rules, program=program)
    assert "model = DNN" in text and "hidden_units=sizes()" in text
    assert "def __init__(self, hidden_units" in text
    assert "self.hidden_layers = [" in text and 'tf.keras.layers.Dense(units, activation="relu")' in text
    assert "for units in hidden_units" in text
    assert "for hidden_layer, batch_norm in zip(self.hidden_layers, self.batch_norms):" in text
    if "Combined" in estimator:
        assert "self.hidden_layers[i].build((None, width))" in text and "self.logits.build((None, width))" in text


def test_a_width_read_from_a_parameter_default_or_a_local_name(rules):
    # census's featurizer: `embedding_column(occupation, dimension=embedding_size)`, a parameter
    # of the function building the columns, called without it: its default.
    program = PROGRAM.replace("estimator = {estimator}", textwrap.dedent('''\
        def deep_columns(embedding_size=3):
            return [{fc}.embedding_column(city, dimension=embedding_size)]


        estimator = {estimator}'''))
    text = converted("tf1.estimator.DNNRegressor([4], deep_columns())", rules, program=program)
    assert "TruncatedNormal(stddev=3 ** -0.5)" in text and "embedding_size" not in text
    # A local name computed in the function: the model cannot read it.
    program = program.replace("    return [", "    size = embedding_size + 1\n    return [").replace(
        "dimension=embedding_size)", "dimension=size)")
    message = refused("tf1.estimator.DNNRegressor([4], deep_columns())", rules, "E2K504", program=program)
    assert "the embedding's dimension reads `size`" in message


def test_values_read_from_the_function_building_the_estimator_are_constructor_arguments(rules):
    # kubeflow's mnist (`shape=mnist.train.images.shape[1:]`, `mnist` local to main()) and
    # census (`dimension=embedding_size`, a parameter): read where the Estimator is built.
    program = textwrap.dedent('''\
        import numpy as np
        import tensorflow as tf


        def main(embedding_size=3):
            images = np.zeros((4, 2, 3), np.float32)
            cities = np.array(["paris", "rome", "oslo", "lima"], dtype=object)
            pixels = tf.feature_column.numeric_column("x", shape=images.shape[1:])
            city = tf.feature_column.categorical_column_with_vocabulary_list("city", np.unique(cities))
            city_embedding = tf.feature_column.embedding_column(city, dimension=embedding_size)

            def input_fn():
                return tf.data.Dataset.from_tensor_slices(({{"x": images, "city": cities}}, [0, 1, 0, 1])).batch(2)

            estimator = {estimator}
            estimator.train(input_fn)
        ''')
    text = converted("tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=[pixels, city_embedding])", rules,
                     program=program)
    assert "def __init__(self, pixels_shape, city_vocabulary, city_embedding_dimension):" in text
    assert "self.pixels_width = tf.TensorShape(self.pixels_shape).num_elements()" in text
    assert "stddev=self.city_embedding_dimension**-0.5" in text  # as black writes a power
    assert ("pixels_shape=images.shape[1:], city_vocabulary=np.unique(cities), "
            "city_embedding_dimension=embedding_size)") in text


def test_a_local_name_rebound_is_refused(rules):
    program = textwrap.dedent('''\
        import numpy as np
        import tensorflow as tf


        def main():
            shape = (2,)
            pixels = tf.feature_column.numeric_column("x", shape=tuple(shape))
            shape = (3,)

            def input_fn():
                return tf.data.Dataset.from_tensor_slices(({{"x": np.zeros((4, 2))}}, [0, 1, 0, 1])).batch(2)

            estimator = {estimator}
            estimator.train(input_fn)
        ''')
    message = refused("tf.estimator.LinearClassifier([pixels])", rules, "E2K504", program=program)
    assert "the column's shape reads `shape`" in message


def test_lists_unpacked_from_a_tuple_then_appended_to_are_built_not_read_empty(rules):
    # `wide, deep = [], []` then appends in a loop: read as the empty lists unpacked, the
    # wide part had no columns and e2k crashed (ZeroDivisionError in Ftrl's default rate);
    # then refused; now built, each list as one bound alone.
    program = textwrap.dedent('''\
        import tensorflow as tf


        def build_columns():
            wide, deep = [], []
            for name in ["a", "b"]:
                wide.append(tf.feature_column.categorical_column_with_identity(name, 4))
                deep.append(tf.feature_column.numeric_column(name))
            return wide, deep


        def input_fn():
            return tf.data.Dataset.from_tensor_slices(({{"a": [1, 2], "b": [0, 3]}}, [0, 1])).batch(2)


        wide, deep = build_columns()
        estimator = {estimator}
        estimator.train(input_fn)
    ''')
    result, _ = convert("tf.estimator.DNNLinearCombinedClassifier(linear_feature_columns=wide, "
                        "dnn_feature_columns=deep, dnn_hidden_units=[4])", rules, program=program)
    # Now read as built: `wide, deep = [], []` is each list bound alone, the loop filling both.
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert 'self.linear = LinearModel(1, ["a", "b"])' in new, new
    assert "self.hiddenlayer_0.build((None, 2))" in new, new  # the deep part: the two numeric columns
    assert "def build_columns" not in new, new  # read only by the Estimator, it goes with it


def test_a_label_vocabulary_classifier_predicts_its_classes(rules, tmp_path, monkeypatch):
    # predict_step read StringLookup.get_vocabulary(), Python that fails in predict's graph:
    # every converted classifier with label_vocabulary crashed in predict().
    import runpy

    source = textwrap.dedent('''\
        import numpy as np
        import tensorflow as tf

        LABELS = ["low", "mid", "high"]
        size = tf.feature_column.numeric_column("size")
        classifier = tf.estimator.LinearClassifier(feature_columns=[size], n_classes=3, label_vocabulary=LABELS)


        def input_fn(repeat=True):
            features = {"size": np.array([0.1, 0.5, 0.9, 0.3], np.float32)}
            dataset = tf.data.Dataset.from_tensor_slices((features, ["low", "mid", "high", "low"]))
            if repeat:
                dataset = dataset.repeat()
            return dataset.batch(2)


        classifier.train(input_fn, steps=2)
        PREDICTIONS = list(classifier.predict(lambda: input_fn(repeat=False)))
    ''')
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    path = write_converted(result, tmp_path / "converted.py")
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python converted.py` reads the module beside it
    predictions = runpy.run_path(str(path))["PREDICTIONS"]
    assert len(predictions) == 4
    assert all(p["classes"][0] in (b"low", b"mid", b"high") for p in predictions), predictions


def test_one_loop_filling_two_lists_through_a_temporary_column(rules):
    # The wide & deep idiom of census notebooks: `cat = ...; wide.append(cat);
    # deep.append(embedding_column(cat, 3))` in one loop (refused: "changed in a way e2k cannot read").
    program = textwrap.dedent('''\
        import tensorflow as tf

        wide_columns = []
        deep_columns = []
        for name in ["a", "b"]:
            cat = tf.feature_column.categorical_column_with_vocabulary_list(name, ["x", "y"])
            wide_columns.append(cat)
            deep_columns.append(tf.feature_column.embedding_column(cat, dimension=3))


        def input_fn():
            return tf.data.Dataset.from_tensor_slices(({{"a": ["x", "y"], "b": ["y", "x"]}}, [0, 1])).batch(2)


        estimator = {estimator}
        estimator.train(input_fn)
    ''')
    result, _ = convert("tf.estimator.DNNLinearCombinedClassifier(linear_feature_columns=wide_columns, "
                        "dnn_feature_columns=deep_columns, dnn_hidden_units=[4])", rules, program=program)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert "self.a_embedding = " in new and "self.b_embedding = " in new, new
    assert 'self.linear = LinearModel(1, ["a", "b"])' in new, new


def test_an_optimizer_keras_has_no_counterpart_of_says_so(rules):
    """`DNNClassifier(optimizer=tf.train.ProximalAdagradOptimizer(...))` (TF 1.x's getting-started
    recipe) said "has no enabled optimizer rule", as if a rule could be enabled (a tester)."""
    from estimator2keras._engine import rewrite_source

    source = b'''\
import tensorflow as tf

columns = [tf.feature_column.numeric_column("x")]
classifier = tf.estimator.DNNClassifier(
    [4], columns, optimizer=tf.compat.v1.train.ProximalAdagradOptimizer(0.1, l1_regularization_strength=0.001))
classifier.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": [1.0]}, [1])).batch(1), steps=1)
'''
    result = rewrite_source(source, "train.py", rules)
    assert result.status == "partial"
    assert any("has no Keras optimizer that updates as it did" in f.message for f in result.findings), \
        [f.format() for f in result.findings]
