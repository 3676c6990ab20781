"""Canned Estimators -> Keras: the defaults each class and API version implies, and what is refused.

No TensorFlow here: these read the emitted code. tests/test_parity_canned.py proves that the
fixtures train like the Estimators; tests/test_feature_columns.py that the columns compute
the same values.
"""
from __future__ import annotations

import textwrap

import pytest

from estimator2keras._engine import rewrite_source

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
    return result, result.new.decode()


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
    # TF1 classes: Adagrad(0.05) for a DNN, Ftrl(0.2) for a linear model, the loss summed
    (f"tf1.estimator.DNNClassifier([4], [age, {DNN}])", "tf.keras.optimizers.Adagrad(0.05)",
     'BinaryCrossentropy(from_logits=True, reduction="sum")'),
    ("tf1.estimator.LinearRegressor([age, city])", "tf.keras.optimizers.Ftrl(0.2)",
     'MeanSquaredError(reduction="sum")'),
    # TF2 classes: Keras's own Adagrad learning rate (0.001), Ftrl(0.2), the loss averaged
    (f"tf.estimator.DNNRegressor([4], [age, {DNN}])", "tf.keras.optimizers.Adagrad(learning_rate=0.001)",
     "MeanSquaredError()"),
    ("tf.estimator.LinearClassifier([age, city], n_classes=3)", "tf.keras.optimizers.Ftrl(learning_rate=0.2)",
     "SparseCategoricalCrossentropy(from_logits=True)"),
    # optimizer=None: the linear Estimators' own Ftrl(min(0.2, 1/sqrt(n_columns)))
    ("tf1.estimator.LinearRegressor([age, city], optimizer=None)", "tf.keras.optimizers.Ftrl(0.2)", None),
    # a name: the Estimator's learning rate, TF1 defaults written out
    (f"tf1.estimator.DNNRegressor([4], [age, {DNN}], optimizer='Adam')",
     "tf.keras.optimizers.Adam(0.05, epsilon=1e-08)", None),
    (f"tf.estimator.DNNRegressor([4], [age, {DNN}], optimizer='SGD')", "tf.keras.optimizers.SGD(learning_rate=0.001)",
     None),
    # objects: TF1 optimizers through E2K101, Keras legacy ones as the new ones
    (f"tf1.estimator.DNNRegressor([4], [age, {DNN}], optimizer=tf1.train.MomentumOptimizer(0.1, 0.9))",
     "tf.keras.optimizers.SGD(0.1, momentum=0.9)", None),
    (f"tf.estimator.DNNRegressor([4], [age, {DNN}], optimizer=lambda: tf.keras.optimizers.legacy.Adam(0.01))",
     "tf.keras.optimizers.Adam(0.01)", None),
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
    assert "optimizer=tf.keras.optimizers.Adagrad(0.001)" in text
    del program


def test_heads_n_classes_vocabulary_and_weights(rules):
    text = converted(f"tf1.estimator.DNNClassifier([4], [age, {DNN}], n_classes=4, "
                     "label_vocabulary=['a', 'b', 'c', 'd'], weight_column='w')", rules)
    assert "self.logits = tf.keras.layers.Dense(4)" in text
    assert "vocabulary=['a', 'b', 'c', 'd']," in text and "num_oov_indices=0)" in text
    assert 'weights = tf.reshape(tf.cast(features["w"], tf.float32), [-1])' in text
    assert "return inputs, labels, weights" in text
    assert "weighted_metrics=[" in text and "SparseCategoricalAccuracy" in text


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
    (f"tf1.estimator.DNNRegressor(HIDDEN, [age])", "E2K501", "hidden units are not a literal list"),
    (f"tf1.estimator.DNNRegressor([4], [age], optimizer=make_optimizer())", "E2K501", "not one e2k converts"),
    ("tf1.estimator.LinearRegressor([tf.feature_column.crossed_column(['age', 'city'], 10, hash_key=7)])",
     "E2K504", "hash_key"),
    ("tf1.estimator.LinearRegressor([tf.feature_column.categorical_column_with_identity('n', 4, "
     "default_value=0)])", "E2K504", "default_value"),
    ("tf1.estimator.LinearRegressor(columns_from_somewhere())", "E2K504", "not a list e2k can read"),
])
def test_what_cannot_be_converted_faithfully_is_left_and_marked(rules, estimator, code, reason):
    assert reason in refused(estimator, rules, code)


def test_a_column_used_elsewhere_keeps_the_unit_unconverted(rules):
    program = PROGRAM.replace("estimator.train(input_fn)", "estimator.train(input_fn)\nprint(age)")
    message = refused("tf1.estimator.LinearRegressor([age, city])", rules, "E2K504", program=program)
    assert "`age` is used elsewhere too" in message


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
    assert "class DNNClassifierModel_2(tf.keras.Model):" in text
    assert text.index("class DNNClassifierModel_2") < text.index("def input_fn")


def test_datasets_are_mapped_through_preprocess(rules):
    program = PROGRAM.replace("estimator.train(input_fn)",
                              "estimator.train(lambda: input_fn().take(1))\nestimator.evaluate(input_fn, steps=1)")
    text = converted("tf1.estimator.LinearRegressor([age, city])", rules, program=program)
    assert "model.fit(input_fn().take(1).map(model.preprocess))" in text
    assert "model.evaluate(input_fn().map(model.preprocess), steps=1)" in text
