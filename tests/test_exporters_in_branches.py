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


def test_a_single_string_serving_function_named_through_a_branch_alias_is_reported(rules):
    """The alias is followed before the export's checks: a CSV-row receiver reached through
    `serving_fn = csv_serving_input_fn` in each branch had its classify signatures left out
    with no finding (the check saw the alias, not the function)."""
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
    assert result.status == "partial", [f.format() for f in result.findings]
    assert any(f.code == "E2K007" and "single string input" in f.message for f in result.findings), \
        [f.format() for f in result.findings]
