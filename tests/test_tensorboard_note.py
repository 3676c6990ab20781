"""Every conversion that emits a `tf.keras.callbacks.TensorBoard` says that TensorFlow 2.20+
needs `pip install tensorboard` (tensorflow-cpu 2.21 does not install it, and the callback then
stops fit with TBNotInstalledError), through one mechanism: estimator2keras._tensorboard."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from estimator2keras._engine import rewrite_source
from estimator2keras._tensorboard import NEEDS_TENSORBOARD

REPO = Path(__file__).resolve().parent.parent

HEAD = '''\
import tempfile

import numpy as np
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices((np.zeros((4, 3), np.float32), np.zeros(4, np.float32))).batch(2)


def model_fn(features, labels, mode):
    pred = tf.squeeze(tf.compat.v1.layers.dense(features, 1), 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


'''

PROGRAMS = {
    # RunConfig(save_summary_steps=N) with a model_dir (E2K409), the tester's program
    "save_summary_steps": HEAD + '''\
est = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(model_dir=tempfile.mkdtemp(), save_summary_steps=5))
est.train(input_fn, steps=10)
''',
    # SummarySaverHook(save_steps=N, output_dir=dir) passed to train (the hooks rule)
    "summary_saver_hook": HEAD + '''\
est = tf.estimator.Estimator(model_fn)
est.train(input_fn, steps=10, hooks=[tf.estimator.SummarySaverHook(save_steps=5, output_dir="/tmp/summaries")])
''',
}

TENSORBOARD = re.compile(r"keras\.callbacks\.TensorBoard\(")


def _convert(rules, source: str):
    result = rewrite_source(source.encode(), "program.py", rules)
    return result, result.new.decode()


def _notes(result) -> list[str]:
    return [f.message for f in result.findings if NEEDS_TENSORBOARD in f.message]


@pytest.mark.parametrize("case", sorted(PROGRAMS))
def test_emitted_tensorboard_callback_carries_the_note(rules, case):
    result, new = _convert(rules, PROGRAMS[case])
    assert TENSORBOARD.search(new), new
    notes = _notes(result)
    assert notes, [f.format() for f in result.findings]
    assert all("TensorBoard" in note for note in notes)


def test_the_files_header_names_the_new_requirement(rules):
    """Not only the report (whose "fixed" findings show with -v): the converted file's header
    says the program now needs the tensorboard package (two new users' programs crashed on
    TF 2.21 with TBNotInstalledError without a word in the file)."""
    from estimator2keras._tensorboard import NOTE

    _, new = _convert(rules, PROGRAMS["save_summary_steps"])
    header = new.split("import ", 1)[0]
    assert "# - E2K409 The TensorBoard callback needs the tensorboard package" in header, new
    assert "install tensorboard." in header and new.count(NOTE.split(",")[0]) == 1


def test_default_summaries_note_is_the_same_mechanism(rules):
    source = PROGRAMS["save_summary_steps"].replace(", save_summary_steps=5", "")
    result, new = _convert(rules, source)
    assert not TENSORBOARD.search(new)
    assert len(_notes(result)) == 1


def test_no_summaries_no_note(rules):
    source = PROGRAMS["save_summary_steps"].replace("save_summary_steps=5", "save_summary_steps=None")
    result, new = _convert(rules, source)
    assert not TENSORBOARD.search(new)
    assert _notes(result) == []


def test_every_case_and_fixture_with_a_tensorboard_callback_says_so(rules):
    """Whatever rule emitted it: each whole-program case of a rule, and each fixture, whose
    conversion has the callback gets the note."""
    sources = [(f"{rule.code} {case.id}", case.before) for rule in rules.active()
               for case in getattr(rule, "cases", ()) if case.after and TENSORBOARD.search(case.after)
               and "import " in case.before]
    sources += [(str(after.parent.name), after.with_name("before.py").read_text())
                for after in sorted(REPO.glob("fixtures/*/after.py")) if TENSORBOARD.search(after.read_text())]
    assert sources, "no case emits a TensorBoard callback any more: this test checks nothing"
    for where, source in sources:
        result, new = _convert(rules, source)
        assert TENSORBOARD.search(new), where
        assert _notes(result), f"{where}: a TensorBoard callback without the note"


def test_one_place_writes_the_callback():
    """Rules make the callback with estimator2keras._tensorboard.tensorboard_callback, which
    returns the note with it, rather than writing the template themselves."""
    template = re.compile(r'["\']\{tf\}\.keras\.callbacks\.TensorBoard\(')
    writers = [str(p.relative_to(REPO)) for folder in ("rewrites", "estimator2keras")
               for p in sorted((REPO / folder).rglob("*.py")) if template.search(p.read_text())]
    assert writers == ["estimator2keras/_tensorboard.py"]


def test_a_model_dir_that_may_be_none_logs_where_the_checkpoints_go(rules, tmp_path, monkeypatch):
    """`RunConfig(model_dir=args.model_dir)` with the flag left empty: the Estimator wrote its
    summaries to a temporary directory; `TensorBoard(None)` failed in fit ("expected str ...
    not NoneType"). The callback logs where the checkpoints callback writes in its place."""
    source = PROGRAMS["save_summary_steps"].replace("model_dir=tempfile.mkdtemp()", "model_dir=MODEL_DIR")
    source = source.replace("import tempfile\n", "import tempfile\n\nMODEL_DIR = None if tempfile else ''\n")
    result, new = _convert(rules, source)
    assert "TensorBoard(MODEL_DIR or checkpoints.directory, update_freq=5)" in new, new
    literal = PROGRAMS["save_summary_steps"].replace("model_dir=tempfile.mkdtemp()", 'model_dir="/tmp/m"')
    assert 'TensorBoard("/tmp/m", update_freq=5)' in _convert(rules, literal)[1]


def test_the_run_says_what_the_converted_programs_need(tmp_path, capsys):
    """The header note alone was missed by four new users, whose converted programs crashed on
    TF 2.21 (TBNotInstalledError): the run's output says it once, after the files."""
    from estimator2keras.cli import main

    program = tmp_path / "train.py"
    program.write_text(PROGRAMS["save_summary_steps"])
    assert main(["rewrite", str(program)]) == 1
    out = capsys.readouterr().out
    assert "note: 1 converted file logs to TensorBoard (E2K409)" in out and "pip install tensorboard" in out
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.py").write_text(PROGRAMS["save_summary_steps"].replace(", save_summary_steps=5", ", save_summary_steps=None"))
    main(["rewrite", str(other / "train.py")])
    assert "logs to TensorBoard" not in capsys.readouterr().out
