"""Exporters as kubeflow's mnist trainer writes them: the same FinalExporter bound in each
branch of an if/elif on the model type, the serving function through an alias bound in each
branch too, and the exporter named by a flag (an export directory)."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf

FLAGS_export_dir = "/tmp/exported"


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]] * 8}, [0, 1] * 4)).repeat().batch(4)


def serving_input_receiver_fn():
    inputs = {"x": tf.compat.v1.placeholder(tf.float32, [None, 2])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


def main(model_type):
    columns = [tf.feature_column.numeric_column("x", shape=(2,))]
    if model_type == "LINEAR":
        classifier = tf.estimator.LinearClassifier(feature_columns=columns, model_dir="/tmp/mnist")
        serving_fn = serving_input_receiver_fn
        export_final = tf.estimator.FinalExporter(FLAGS_export_dir, serving_input_receiver_fn=serving_input_receiver_fn)
    else:
        classifier = tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=columns, model_dir="/tmp/mnist")
        serving_fn = serving_input_receiver_fn
        export_final = tf.estimator.FinalExporter(FLAGS_export_dir, serving_input_receiver_fn=serving_input_receiver_fn)
    train_spec = tf.estimator.TrainSpec(input_fn=input_fn, max_steps=10)
    eval_spec = tf.estimator.EvalSpec(input_fn=input_fn, steps=1, exporters=export_final)
    tf.estimator.train_and_evaluate(classifier, train_spec, eval_spec)
    classifier.export_savedmodel(FLAGS_export_dir, serving_input_receiver_fn=serving_fn)
'''


def test_the_same_exporter_in_every_branch_is_one_exporter(rules):
    result = rewrite_source(PROGRAM.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "export_final" not in new and "serving_fn =" not in new, new
    # <model_dir>/export/<name>, the name as the program computes it (an absolute path wins).
    assert 'os.path.join("/tmp/mnist", "export", FLAGS_export_dir, str(int(time.time())))' in new, new


def test_different_exporters_in_the_branches_are_refused(rules):
    source = PROGRAM.replace(
        "        export_final = tf.estimator.FinalExporter(FLAGS_export_dir, serving_input_receiver_fn=serving_input_receiver_fn)\n"
        "    train_spec",
        "        export_final = tf.estimator.LatestExporter('dnn', serving_input_receiver_fn=serving_input_receiver_fn)\n"
        "    train_spec")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "partial"
    assert "export_final = " in result.new.decode() or result.new == source.encode()


def test_a_single_string_serving_function_named_through_a_branch_alias_gets_its_classify_signatures(rules):
    """The alias is followed before the export's checks: a CSV-row receiver reached through
    `serving_fn = csv_serving_input_fn` in each branch had its classify signatures left out
    with no finding (the check saw the alias, not the function). They are exported now, on
    that single string input as the Estimator made them."""
    source = PROGRAM.replace('''def serving_input_receiver_fn():
    inputs = {"x": tf.compat.v1.placeholder(tf.float32, [None, 2])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)''', '''def serving_input_receiver_fn():
    csv_row = tf.compat.v1.placeholder(tf.string, [None])
    values = tf.io.decode_csv(csv_row, record_defaults=[[0.0], [0.0]])
    return tf.estimator.export.ServingInputReceiver({"x": tf.stack(values, axis=1)}, {"csv_row": csv_row})''')
    # Only export_savedmodel names it, through the alias.
    source = source.replace(", exporters=export_final)", ")").replace(
        "        export_final = tf.estimator.FinalExporter(FLAGS_export_dir, "
        "serving_input_receiver_fn=serving_input_receiver_fn)\n", "")
    assert "FinalExporter" not in source
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert "serving_fn_2 = serving_input_receiver_fn(model.predict_step)" in new, new
    assert '"serving_default": serving_fn_2_classify,' in new and '"predict": serving_fn_2,' in new, new
    assert '"serving_default": "tensorflow/serving/classify",' in new, new


def test_a_serving_function_shared_by_a_canned_model_and_a_model_fn_exporting_other_outputs(rules):
    # kubeflow's mnist: the CNN's model_fn exports PredictOutput({...}) that is not its
    # predictions (its model's serving_outputs), the LinearClassifier its predictions
    # (predict_step). The shared function takes the method: each export passes its own.
    model_fn = '''

def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    probabilities = tf.nn.softmax(logits)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"class": tf.argmax(logits, 1)}, export_outputs={
            "classes": tf.estimator.export.PredictOutput({"probabilities": probabilities})})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

'''
    source = PROGRAM.replace("\n\ndef main(model_type):", model_fn + "\ndef main(model_type):").replace(
        'classifier = tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=columns, model_dir="/tmp/mnist")',
        'classifier = tf.estimator.Estimator(model_fn, model_dir="/tmp/mnist")')
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "def serving_input_receiver_fn(predict):" in new and "return predict(inputs)" in new, new
    assert "serving_input_receiver_fn(model.predict_step)" in new, new  # the LinearClassifier's
    assert "serving_input_receiver_fn(model.serving_outputs)" in new, new  # the model_fn's export outputs
    assert "def serving_outputs(self, features):" in new, new


def test_a_serving_function_nothing_exports_with_is_converted_beside_the_one_exported(rules):
    # kubeflow's mnist keeps `linear_serving_input_receiver_fn` unused: it is converted too
    # (taking the served method), not left holding a ServingInputReceiver.
    unused = '''

def unused_serving_input_receiver_fn():
    inputs = {"x": tf.compat.v1.placeholder(tf.float32, [None, 2])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)
'''
    source = PROGRAM.replace("\n\ndef main(model_type):", unused + "\n\ndef main(model_type):")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "def unused_serving_input_receiver_fn(predict):" in new and "ServingInputReceiver" not in new, new
