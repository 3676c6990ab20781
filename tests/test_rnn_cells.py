"""TF1 RNN cells in a model_fn (``GRUCell``, ``BasicLSTMCell``, ``LSTMCell``, ``MultiRNNCell``
run by ``tf.nn.dynamic_rnn`` / ``static_rnn``) become Keras ``GRU`` / ``LSTM`` layers made in
``__init__``; ``call`` asks Keras only for what the program reads, and every read of the
results (``state[i]``, ``state.h``, ``outputs[-1]``) is mapped to what Keras returns. What has
no exact counterpart is refused with its reason. The parity harness presents TF1's cell
variables in Keras's layout (``_keras_layout``): checked here against the real cells."""
from __future__ import annotations

import functools
import os
import re
import shutil
import textwrap

import numpy as np
import pytest

from conftest import FIXTURES
from estimator2keras._engine import rewrite_source

HEAD = '''\
import tensorflow as tf

tf1 = tf.compat.v1


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0, 3.0, 4.0]]}, [[1.0]])).repeat().batch(2)


def model_fn(features, labels, mode, params):
    x = tf.expand_dims(features["x"], -1)
'''
TAIL = '''
    loss = tf1.losses.mean_squared_error(labels, predictions)
    train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, tf1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, params={"units": 3})
estimator.train(input_fn, steps=2)
'''


def convert(rules, body: str):
    source = HEAD + textwrap.indent(textwrap.dedent(body), "    ") + TAIL
    return rewrite_source(source.encode(), "program.py", rules)


def manual(result) -> list[str]:
    return [f"{f.code} {f.message}" for f in result.findings if f.kind == "manual"]


def one_line(code: str) -> str:
    """Calls wrapped one argument a line, written on one line."""
    return re.sub(r",\s+", ", ", re.sub(r"\(\s+", "(", " ".join(code.split())))


def converted(rules, body: str) -> str:
    result = convert(rules, body)
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert "rnn_cell" not in new and "dynamic_rnn" not in new and "static_rnn" not in new, new
    return new


def test_gru_state_only_asks_keras_for_the_last_output(rules):
    new = converted(rules, '''
        cell = tf1.nn.rnn_cell.GRUCell(params["units"])
        outputs, state = tf1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        predictions = tf1.layers.dense(state, 1)
    ''')
    assert 'self.cell = tf.keras.layers.GRU(params["units"], reset_after=False)' in new, new
    assert "        state = self.cell(x)\n" in new, new
    assert "return_state" not in new and "return_sequences" not in new
    assert "# TF1's GRUCell drew one Glorot kernel" in new


def test_gru_outputs_and_state(rules):
    new = converted(rules, '''
        cell = tf1.nn.rnn_cell.GRUCell(4, activation=tf.nn.relu)
        outputs, state = tf1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        predictions = tf1.layers.dense(tf.concat([state, tf.reduce_mean(outputs, 1)], 1), 1)
    ''')
    assert "tf.keras.layers.GRU(4, activation=tf.nn.relu, reset_after=False, return_sequences=True, return_state=True)" \
        in one_line(new), new
    assert "outputs, state = self.cell(x)" in new


def test_multi_rnn_cell_state_of_each_layer_and_output_size(rules):
    new = converted(rules, '''
        cell1 = tf1.nn.rnn_cell.GRUCell(params["units"])
        cell2 = tf1.nn.rnn_cell.GRUCell(2)
        cells = tf1.nn.rnn_cell.MultiRNNCell([cell1, cell2])
        outputs, state = tf1.nn.dynamic_rnn(cells, x, dtype=tf.float32)
        h = tf1.layers.dense(state[1], cells.output_size // 2)
        predictions = tf1.layers.dense(tf.concat([h, state[0]], 1), 1)
    ''')
    flat = one_line(new)
    assert 'self.cell1 = tf.keras.layers.GRU(params["units"], reset_after=False, return_sequences=True, ' \
           "return_state=True)" in flat, new
    assert "self.cell2 = tf.keras.layers.GRU(2, reset_after=False)" in flat, new
    assert "outputs_0, state_0 = self.cell1(x)" in new
    assert "state_1 = self.cell2(outputs_0)" in new
    assert "tf.keras.layers.Dense(self.cell2.units // 2)" in new
    assert "h = self.dense(state_1)" in new and "tf.concat([h, state_0], 1)" in new


def test_multi_rnn_cell_top_state_only_nests_the_layers(rules):
    new = converted(rules, '''
        cells = tf1.nn.rnn_cell.MultiRNNCell([tf1.nn.rnn_cell.GRUCell(4) for _ in range(2)])
        _, state = tf1.nn.dynamic_rnn(cells, x, dtype=tf.float32)
        predictions = tf1.layers.dense(state[-1], 1)
    ''')
    assert "state_1 = self.gru_1(self.gru(x))" in new, new
    assert "self.gru = tf.keras.layers.GRU(4, reset_after=False, return_sequences=True)" in new


def test_lstm_state_h_and_c(rules):
    new = converted(rules, '''
        cell = tf1.nn.rnn_cell.LSTMCell(5)
        outputs, state = tf1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        predictions = tf1.layers.dense(tf.concat([state.h, state[0]], 1), 1)
    ''')
    assert "self.cell = tf.keras.layers.LSTM(5, return_state=True)" in new, new
    # TF1's LSTMStateTuple is (c, h); Keras returns [outputs, h, c]
    assert "_, state_h, state_c = self.cell(x)" in new
    assert "tf.concat([state_h, state_c], 1)" in new


def test_lstm_h_only_is_the_last_output(rules):
    new = converted(rules, '''
        cell = tf1.nn.rnn_cell.BasicLSTMCell(5, forget_bias=0.0)
        outputs, state = tf1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        predictions = tf1.layers.dense(state.h, 1)
    ''')
    assert "self.cell = tf.keras.layers.LSTM(5, unit_forget_bias=False)" in new, new
    assert "state_h = self.cell(x)" in new


def test_static_rnn_last_output_over_split_time_steps(rules):
    new = converted(rules, '''
        steps = tf.split(features["x"], 4, 1)
        lstm_cell = tf1.nn.rnn_cell.BasicLSTMCell(3, forget_bias=1.0)
        outputs, _ = tf1.nn.static_rnn(lstm_cell, steps, dtype=tf.float32)
        predictions = tf1.layers.dense(outputs[-1], 1)
    ''')
    assert "self.lstm_cell = tf.keras.layers.LSTM(3)" in new, new
    assert "outputs = self.lstm_cell(tf.stack(steps, axis=1))" in new
    assert "return self.predictions(outputs)" in new


def test_static_rnn_outputs_rebound_to_the_last_one(rules):
    """simplernn's `outputs, _ = rnn.static_rnn(...)` then `outputs = outputs[-1]`: the later
    reads of `outputs` are of the rebound name, not of the RNN's list."""
    new = converted(rules, '''
        steps = tf.split(features["x"], 4, 1)
        lstm_cell = tf1.nn.rnn_cell.BasicLSTMCell(3, forget_bias=1.0)
        outputs, _ = tf1.nn.static_rnn(lstm_cell, steps, dtype=tf.float32)
        outputs = outputs[-1]
        predictions = tf1.layers.dense(outputs, 1)
    ''')
    assert "outputs = self.lstm_cell(tf.stack(steps, axis=1))" in new, new
    assert "outputs = outputs" not in new and "outputs[-1]" not in new
    assert "return self.predictions(outputs)" in new


@pytest.mark.parametrize(("body", "reason"), [
    ('cell = tf1.nn.rnn_cell.LSTMCell(5, use_peepholes=True)', "peephole"),
    ('cell = tf1.nn.rnn_cell.LSTMCell(5, num_proj=2)', "num_proj"),
    ('cell = tf1.nn.rnn_cell.LSTMCell(5, cell_clip=3.0)', "clipping the cell state"),
    ('cell = tf1.nn.rnn_cell.BasicLSTMCell(5, forget_bias=0.5)', "forget_bias other than 1.0 or 0.0"),
    ('cell = tf1.nn.rnn_cell.GRUCell(5, kernel_initializer=tf1.glorot_normal_initializer())', "one kernel"),
], ids=["peepholes", "projection", "cell-clip", "forget-bias", "initializer"])
def test_cell_settings_without_keras_counterpart_are_refused(rules, body, reason):
    result = convert(rules, body + '''
outputs, state = tf1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
predictions = tf1.layers.dense(outputs[:, -1], 1)
''')
    assert result.status != "converted"
    assert any(reason in message for message in manual(result)), manual(result)


@pytest.mark.parametrize(("run", "reason"), [
    ("tf1.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)", "sequence_length"),
    ("tf1.nn.dynamic_rnn(cell, x, initial_state=cell.zero_state(2, tf.float32))", "initial_state"),
    ("tf1.nn.dynamic_rnn(cell, tf.transpose(x, [1, 0, 2]), time_major=True, dtype=tf.float32)", "time_major"),
], ids=["sequence-length", "initial-state", "time-major"])
def test_rnn_arguments_without_keras_counterpart_are_refused(rules, run, reason):
    result = convert(rules, f'''
        lengths = tf.fill([2], 4)
        cell = tf1.nn.rnn_cell.GRUCell(3)
        outputs, state = {run}
        predictions = tf1.layers.dense(state, 1)
    ''')
    assert result.status != "converted"
    assert any(reason in message for message in manual(result)), manual(result)


@pytest.mark.parametrize(("body", "reason"), [
    ('''
     cell = tf1.nn.rnn_cell.LSTMCell(5)
     outputs, state = tf1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
     predictions = tf1.layers.dense(tf.concat(state, 1), 1)
     ''', "read as a whole"),
    ('''
     cell = tf1.nn.rnn_cell.GRUCell(5)
     outputs, state = tf1.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float32)
     predictions = tf1.layers.dense(outputs[0], 1)
     ''', "only its last one"),
    ('''
     cell = tf1.nn.rnn_cell.GRUCell(5)
     result = tf1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
     predictions = tf1.layers.dense(result[1], 1)
     ''', "unpacked at once"),
    ('''
     cell = tf1.nn.rnn_cell.GRUCell(5)
     outputs, state = tf1.nn.bidirectional_dynamic_rnn(cell, cell, x, dtype=tf.float32)
     predictions = tf1.layers.dense(outputs[0][:, -1], 1)
     ''', "bidirectional_dynamic_rnn"),
    ('''
     cell = tf1.nn.rnn_cell.DropoutWrapper(tf1.nn.rnn_cell.GRUCell(5), output_keep_prob=0.5)
     outputs, state = tf1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
     predictions = tf1.layers.dense(state, 1)
     ''', "draws a new mask at each"),
], ids=["lstm-state-whole", "static-outputs-list", "result-not-unpacked", "bidirectional", "dropout-wrapper"])
def test_reads_e2k_cannot_map_are_refused(rules, body, reason):
    result = convert(rules, body)
    assert result.status != "converted"
    assert any(reason in message for message in manual(result)), manual(result)


# -- the harness's layout transform, against the real cells (TF 2.15) ---------------------------
@functools.lru_cache(maxsize=None)
def _legacy_side():
    """The bootstrap, loaded once: it patches the cell classes once per process, as in a run."""
    import importlib.util

    from estimator2keras.parity import _legacy_side as path_holder

    spec = importlib.util.spec_from_file_location("_e2k_legacy_side_test", path_holder.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("cell_class", ["GRUCell", "BasicLSTMCell", "LSTMCell"])
def test_keras_layout_of_tf1_cell_variables_computes_what_the_cell_computed(cell_class):
    """TF1's cell and the Keras layer given its variables in Keras's layout give the same
    outputs; with TF1's gate order kept, they do not (the transform is what pairs them)."""
    tf = pytest.importorskip("tensorflow")
    legacy = _legacy_side()
    rng = np.random.RandomState(0)
    inputs = rng.normal(size=(3, 5, 2)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        legacy._patch_rnn_cells(tf)
        cell = getattr(tf.compat.v1.nn.rnn_cell, cell_class)(4)
        outputs, _ = tf.compat.v1.nn.dynamic_rnn(cell, tf.constant(inputs), dtype=tf.float32)
        variables = tf.compat.v1.trainable_variables()
        # a non-zero bias, so that the gate order of the bias counts too
        init = [v.assign(rng.normal(scale=0.5, size=v.shape).astype(np.float32)) for v in variables]
        layout = legacy._keras_layout(tf, graph, variables, len(variables))
        table, reads, count = layout.table, layout.reads, layout.trainable
        with tf.compat.v1.Session() as session:
            session.run(init)
            expected, views = session.run([outputs, reads])
    assert [entry["name"].rsplit("/", 1)[1] for entry in table] == ["kernel", "recurrent_kernel", "bias"]
    assert count == 3
    kind = "GRU" if cell_class == "GRUCell" else "LSTM"
    layer = getattr(tf.keras.layers, kind)(4, return_sequences=True, **({"reset_after": False} if kind == "GRU" else {}))
    layer(inputs)
    layer.set_weights(views)
    np.testing.assert_allclose(layer(inputs).numpy(), expected, atol=1e-5)
    # TF1's own column order in Keras's places: different outputs
    units = 4
    kernel, recurrent, bias = views
    swapped = [np.roll(kernel, units, axis=1), np.roll(recurrent, units, axis=1), np.roll(bias, units)]
    layer.set_weights(swapped)
    assert np.abs(layer(inputs).numpy() - expected).max() > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("wrong", ["reset_after=True", "activation=tf.nn.relu"])
def test_wrong_rnn_migration_fails_parity(tmp_path, wrong):
    """A GRU migrated as Keras's default (reset_after=True: another recurrence, other weights)
    or with another activation does not pass parity."""
    from estimator2keras.parity import run_parity

    case = FIXTURES / "rnn_gru_dynamic"
    before = tmp_path / "before.py"
    shutil.copy(case / "before.py", before)
    after = (case / "after.py").read_text()
    assert after.count("reset_after=False") == 2
    after = after.replace("reset_after=False", wrong, 1)
    (tmp_path / "after.py").write_text(after)
    result = run_parity(before, tmp_path / "after.py", replicas=2, steps=10, workdir=tmp_path / "work",
                        legacy_python=os.environ.get("E2K_LEGACY_PYTHON"))
    assert not result.passed, result.report()


@pytest.mark.parametrize("run", [
    "tf1.nn.dynamic_rnn(tf1.nn.rnn_cell.GRUCell(units), x, dtype=tf.float32)",
    "tf1.nn.bidirectional_dynamic_rnn(tf.keras.layers.GRUCell(units), tf.keras.layers.GRUCell(units), x, "
    "dtype=tf.float32)",
], ids=["gru", "bidirectional"])
def test_rnn_in_a_function_the_model_fn_calls_is_refused_not_kept_in_a_method(rules, run):
    """A method of the Keras model would have kept the TF1 RNN, made again at every step."""
    source = HEAD.replace("def model_fn", f'''def encoder(x, units):
    outputs, state = {run}
    return tf1.layers.dense(state[0], 2)


def model_fn''') + "    predictions = tf1.layers.dense(encoder(x, 3), 1)\n" + TAIL
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status != "converted"
    assert any("dynamic_rnn` " in m and "encoder" in m or "bidirectional_dynamic_rnn` makes variables" in m
               for m in manual(result)), manual(result)


def test_contrib_spelling_and_a_cell_made_in_the_call(rules):
    source = HEAD.replace("import tensorflow as tf\n", "import tensorflow as tf\nfrom tensorflow.contrib import rnn\n") + \
        textwrap.indent(textwrap.dedent('''
        outputs, state = rnn.static_rnn(rnn.GRUCell(params["units"]), tf.unstack(x, axis=1), dtype=tf.float32)
        predictions = tf1.layers.dense(outputs[-1], 1)
    '''), "    ") + TAIL
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert 'self.gru = tf.keras.layers.GRU(params["units"], reset_after=False)' in new, new
    assert "outputs = self.gru(x)" in new  # the tensor tf.unstack(x, axis=1) took apart
    assert "contrib" not in new


def test_another_dtype_is_refused(rules):
    result = convert(rules, '''
        cell = tf1.nn.rnn_cell.GRUCell(3)
        outputs, state = tf1.nn.dynamic_rnn(cell, tf.cast(x, tf.float64), dtype="float64")
        predictions = tf1.layers.dense(tf.cast(state, tf.float32), 1)
    ''')
    assert any("another dtype than float32" in m for m in manual(result)), manual(result)


@pytest.mark.slow
@pytest.mark.parametrize(("case", "slots"), [("rnn_lstm_static", 7), ("rnn_gru_dynamic", 0)])
def test_checkpoint_of_rnn_cells_is_carried_over_in_keras_layout(tmp_path, case, slots):
    """`e2k checkpoint` writes a trained model_dir's RNN cells as Keras's GRU / LSTM weights
    (and Adagrad's accumulators in the same layout): the restored models predict alike."""
    import subprocess
    import sys

    from estimator2keras.checkpoint import convert_checkpoint

    legacy_python = os.environ.get("E2K_LEGACY_PYTHON") or sys.executable
    before, after = FIXTURES / case / "before.py", FIXTURES / case / "after.py"
    model_dir = tmp_path / "model_dir"
    train_into = FIXTURES.parent / "tests" / "checkpoint_programs" / "train_into.py"
    subprocess.run([legacy_python, str(train_into), str(before), str(model_dir)], check=True, capture_output=True,
                   timeout=600)
    result = convert_checkpoint(before, after, model_dir=model_dir, out=tmp_path / "out", legacy_python=legacy_python,
                                workdir=tmp_path / "work")
    report = result.report()
    assert result.verdict == "written", report
    legacy_names = [m["legacy"] for m in result.mapping]
    assert any(name.endswith("cell/recurrent_kernel") for name in legacy_names), report
    assert sum(m["what"] == "AdagradOptimizer slot accumulator" for m in result.mapping) == slots, report
    assert result.predictions and all(row.ok for row in result.predictions), report
