"""Fail closed (E2K905): a file that still refers to an Estimator API after every pass is
never "unchanged" or "converted", whatever the conversion recognised."""
from __future__ import annotations

import ast

import libcst as cst
import pytest

from conftest import FIXTURES
from estimator2keras._engine import ESTIMATOR_CODE_LEFT, keywords_of, rewrite_source
from estimator2keras._leftovers import KEYWORDS, LineMap, find_references, is_estimator_api, mentions_estimator
from estimator2keras._registry import RuleSet

CANONICAL = (FIXTURES / "seed_mirrored_linear" / "before.py").read_bytes()


def left(source: str) -> list[str]:
    """What the detector reports in ``source``, as written."""
    return [r.describe() for r in find_references(ast.parse(source))]


@pytest.mark.parametrize(
    "source,expected",
    [
        pytest.param("import tensorflow as tf\ntf.estimator.RunConfig()\n", ["tf.estimator.RunConfig"], id="tf"),
        pytest.param("import tensorflow.compat.v1 as tf1\ntf1.estimator.EstimatorSpec(m)\n", ["tf1.estimator.EstimatorSpec"], id="compat-v1-as"),
        pytest.param("import tensorflow as tf\ntf.compat.v1.estimator.RunConfig()\n", ["tf.compat.v1.estimator.RunConfig"], id="compat-v1-chain"),
        pytest.param("from tensorflow import estimator as est\nest.RunConfig()\n", ["est.RunConfig (tf.estimator.RunConfig)"], id="from-import-as"),
        pytest.param("from tensorflow.estimator import EstimatorSpec\nEstimatorSpec(m)\n", ["EstimatorSpec (tf.estimator.EstimatorSpec)"], id="from-import-name"),
        pytest.param(
            "from tensorflow.python.estimator import run_config\nrun_config.RunConfig()\n",
            ["run_config.RunConfig (tf.python.estimator.run_config.RunConfig)"],
            id="private-module",
        ),
        pytest.param(
            "import tensorflow_estimator as tf_estimator\ntf_estimator.estimator.Estimator(f)\n",
            ["tf_estimator.estimator.Estimator"],
            id="tensorflow-estimator",
        ),
        pytest.param("import tensorflow as tf\ntf.contrib.tpu.TPUEstimator(f)\n", ["tf.contrib.tpu.TPUEstimator"], id="tpu-estimator"),
        pytest.param("import tensorflow as tf\ntf.contrib.tpu.RunConfig()\n", ["tf.contrib.tpu.RunConfig"], id="tpu-run-config"),
        pytest.param("import tensorflow as tf\ntf.contrib.tpu.TPUConfig(8)\n", ["tf.contrib.tpu.TPUConfig"], id="tpu-config"),
        pytest.param("import tensorflow as tf\ntf.contrib.learn.RunConfig()\n", ["tf.contrib.learn.RunConfig"], id="contrib-learn"),
        pytest.param("import tensorflow as tf\ntf.contrib.estimator.add_metrics(e, f)\n", ["tf.contrib.estimator.add_metrics"], id="contrib-estimator"),
        pytest.param(
            "from tensorflow.contrib.boosted_trees.estimator_batch.estimator import GradientBoostedDecisionTreeClassifier as G\nG()\n",
            ["G (tf.contrib.boosted_trees.estimator_batch.estimator.GradientBoostedDecisionTreeClassifier)"],
            id="contrib-boosted-trees",
        ),
        pytest.param(
            "import tensorflow as tf\ntf.keras.estimator.model_to_estimator(keras_model=m)\n",
            ["tf.keras.estimator.model_to_estimator"],
            id="model-to-estimator",
        ),
        pytest.param("from tensorflow.keras.utils import multi_gpu_model\nmulti_gpu_model(m, 2)\n", ["multi_gpu_model (tf.keras.utils.multi_gpu_model)"], id="multi-gpu-model"),
        pytest.param("import tensorflow as tf\nf(tf.estimator.inputs.numpy_input_fn(x))\n", ["tf.estimator.inputs.numpy_input_fn"], id="numpy-input-fn"),
        pytest.param("import tensorflow as tf\nif mode == tf.estimator.ModeKeys.TRAIN: pass\n", ["tf.estimator.ModeKeys.TRAIN"], id="mode-keys"),
        pytest.param(
            "import tensorflow as tf\ntf1 = tf.compat.v1\ntf1.estimator.Estimator(f)\n",
            ["tf1.estimator.Estimator"],
            id="alias-compat-v1",
        ),
        pytest.param(
            "import tensorflow as tf\nest = tf.estimator\nest.Estimator(f)\n",
            ["tf.estimator", "est.Estimator (tf.estimator.Estimator)"],
            id="alias-module",
        ),
        pytest.param(
            "import tensorflow as tf\nEst = tf.estimator.Estimator\nEst(f)\n",
            ["tf.estimator.Estimator", "Est (tf.estimator.Estimator)"],
            id="alias-class",
        ),
        pytest.param(
            "import tensorflow as tf\ntry:\n    Modes = tf.estimator.ModeKeys\nexcept AttributeError:\n    pass\nx = Modes.EVAL\n",
            ["tf.estimator.ModeKeys", "Modes.EVAL (tf.estimator.ModeKeys.EVAL)"],
            id="alias-in-try",
        ),
        pytest.param(
            "from tensorflow.estimator import *\n\ndef f():\n    pass\n\nspec = TrainSpec(input_fn=f)\n",
            ["TrainSpec (tf.estimator.TrainSpec)"],
            id="star-import",
        ),
        pytest.param(
            "from tensorflow.estimator import *\nfrom numpy import *\narray([1])\nRunConfig()\n",
            ["RunConfig (tf.estimator.RunConfig)"],
            id="star-imports-known-names-only",
        ),
        pytest.param("from tensorflow.estimator import *\n", ["from tensorflow.estimator import *"], id="star-import-unused"),
        pytest.param("import tensorflow_estimator\n", ["import tensorflow_estimator"], id="unused-import"),
        pytest.param(
            "def main():\n    import tensorflow as tf\n    return tf.estimator.LinearClassifier([])\n",
            ["tf.estimator.LinearClassifier"],
            id="import-in-function",
        ),
    ],
)
def test_every_spelling_is_found(source, expected):
    assert mentions_estimator(source.encode())
    assert left(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "import tensorflow as tf\nmodel = tf.keras.Model()\nmodel.fit(x)\n",
        "import tensorflow as tf\ntf.contrib.tpu.CrossShardOptimizer(opt)\n",
        "class Estimator:\n    pass\n\nEstimator()\n",
        "from mylib import estimator\nestimator.Estimator()\n",
        "from . import estimator\nestimator.train()\n",
        "import tensorflow as tf\n\ndef train_and_evaluate(model):\n    model.fit(x)\n\ntrain_and_evaluate(tf.keras.Model())\n",
        "import tensorflow as tf\nestimator = 3\nprint(estimator)\n",
        "import tensorflow as tf\nx = 'tf.estimator.Estimator'  # tf.estimator.RunConfig\n",
        "from tensorflow.estimator import *\nEstimator = object\nclass RunConfig: pass\nEstimator(); RunConfig(); print(len([]))\n",
    ],
)
def test_no_false_positive(source):
    assert left(source) in ([], ["from tensorflow.estimator import *"])
    if "import *" not in source:
        assert left(source) == []


def test_what_counts_as_an_estimator_api():
    assert is_estimator_api("tensorflow.estimator")
    assert is_estimator_api("tensorflow_estimator.python.estimator.canned.dnn.DNNClassifier")
    assert is_estimator_api("keras.utils.multi_gpu_model")
    assert not is_estimator_api("tensorflow.keras.Model")
    assert not is_estimator_api("tensorflow.contrib.tpu.CrossShardOptimizer")
    assert not is_estimator_api("mylib.estimator.Estimator")


def test_a_model_fn_module_is_partial(rules):
    source = b"""\
import tensorflow as tf


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features["x"], 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=logits)
    loss = tf.losses.mean_squared_error(labels, logits)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.no_op())
"""
    result = rewrite_source(source, "model.py", rules)
    assert result.status == "partial" and result.new is source
    assert [(f.line, f.col, f.code, f.message) for f in result.findings] == [
        (6, 16, "E2K905", "Estimator API left: tf.estimator.ModeKeys.PREDICT"),
        (7, 16, "E2K905", "Estimator API left: tf.estimator.EstimatorSpec"),
        (9, 12, "E2K905", "Estimator API left: tf.estimator.EstimatorSpec"),
    ]
    assert result.definitions == (("model_fn", 4, 9),)


DTENSOR_KERAS = b"""\
import tensorflow as tf
from tensorflow.experimental import dtensor

mesh = dtensor.create_mesh([("batch", 2)], devices=["CPU:0", "CPU:1"])
layout_map = tf.keras.dtensor.experimental.LayoutMap(mesh=mesh)
layout_map["feature.*kernel"] = dtensor.Layout.replicated(mesh, rank=2)
model = tf.keras.Sequential([
    tf.keras.layers.Dense(8, kernel_layout=dtensor.Layout.replicated(mesh, rank=2),
                          bias_layout=dtensor.Layout.replicated(mesh, rank=1)),
])
optimizer = tf.keras.dtensor.experimental.optimizers.Adam(0.01, mesh=mesh)
accuracy = tf.keras.metrics.SparseCategoricalAccuracy(mesh=mesh)
images = dtensor.pack([tf.zeros([1, 4])] * 2, dtensor.Layout.batch_sharded(mesh, "batch", rank=2))
"""


def test_keras_2s_dtensor_api_is_never_unchanged(rules):
    """Keras 3 (TensorFlow 2.16, the release without Estimator) removed tf.keras.dtensor and
    the layout and mesh arguments: a program using them that E2K607 cannot convert (here it
    trains nothing) is reported, one finding each besides the rule's, never "unchanged";
    TensorFlow's own dtensor module (create_mesh, Layout, pack) is still there."""
    result = rewrite_source(DTENSOR_KERAS, "train.py", rules)
    assert result.status == "partial"
    assert [line for line in result.new.splitlines() if not line.startswith(b"# e2k: E2K607 ")] \
        == DTENSOR_KERAS.splitlines()
    what = "E2K905 Keras 2 API left (Keras 3 has no tf.keras.dtensor nor layout arguments): "
    findings = [(f.line, f"{f.code} {f.message}") for f in result.findings]
    assert findings[0][0] == 4 and findings[0][1].startswith("E2K607 ")
    assert findings[1:] == [
        (5, what + "tf.keras.dtensor.experimental.LayoutMap"),
        (8, what + "tf.keras.layers.Dense(kernel_layout=...)"),
        (9, what + "tf.keras.layers.Dense(bias_layout=...)"),
        (11, what + "tf.keras.dtensor.experimental.optimizers.Adam"),
        (12, what + "tf.keras.metrics.SparseCategoricalAccuracy(mesh=...)"),
    ]
    # the same mesh= on a function of the program's own, or TF's dtensor alone: nothing to say
    own = b"import tensorflow as tf\nfrom tensorflow.experimental import dtensor\n\n" \
          b"def build(mesh=None):\n    return mesh\n\nbuild(mesh=dtensor.create_mesh([('batch', 1)]))\n"
    assert rewrite_source(own, "own.py", rules).status == "unchanged"


def test_a_file_built_around_an_estimator_from_another_module_is_partial(rules):
    source = b"""\
import tensorflow as tf
import model

config = tf.estimator.RunConfig(model_dir="/tmp/m")
estimator = model.build_estimator(config)
tf.estimator.train_and_evaluate(estimator, tf.estimator.TrainSpec(model.train_input), tf.estimator.EvalSpec(model.eval_input))
"""
    result = rewrite_source(source, "task.py", rules)
    assert result.status == "partial"
    assert [(f.line, f.message.split(": ")[1]) for f in result.findings] == [
        (4, "tf.estimator.RunConfig"),
        (6, "tf.estimator.train_and_evaluate"),
        (6, "tf.estimator.TrainSpec"),
        (6, "tf.estimator.EvalSpec"),
    ]


def test_capitalised_names_reach_the_check_without_a_rule_keyword(rules):
    # `TPUEstimator` does not contain the rules' keyword "estimator"; the check's own keywords
    # ("stimator"...) let the file through the byte pre-filter, in the engine and the runner.
    source = b"from tensorflow.contrib.tpu import TPUEstimator, RunConfig\n\nrun_config = RunConfig()\n"
    assert not any(word in source for word in rules.keywords())
    assert any(word in source for word in keywords_of(rules))
    result = rewrite_source(source, "tpu.py", rules)
    assert result.status == "partial"
    assert [f.message for f in result.findings] == [
        "Estimator API left: from tensorflow.contrib.tpu import TPUEstimator",
        "Estimator API left: RunConfig (tf.contrib.tpu.RunConfig)",
    ]


def test_files_without_keywords_are_not_parsed(rules, monkeypatch):
    import estimator2keras._leftovers as leftovers
    import estimator2keras._prefilter as prefilter

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed a file that mentions no Estimator keyword")

    monkeypatch.setattr(prefilter.ast, "parse", no_parse)
    monkeypatch.setattr(leftovers.ast, "parse", no_parse)
    monkeypatch.setattr(cst, "parse_module", no_parse)
    source = b"import tensorflow as tf\nmodel = tf.keras.Sequential()\n# contributors: see AUTHORS\n"
    assert not mentions_estimator(source)
    result = rewrite_source(source, "keras.py", rules)
    assert result.status == "unchanged" and result.new is source


def test_a_converted_program_is_still_converted(rules):
    result = rewrite_source(CANONICAL, "train.py", rules)
    assert result.status == "converted"
    assert not any(f.code == ESTIMATOR_CODE_LEFT for f in result.findings)


def test_converted_code_left_behind_is_reported_at_its_original_line(rules):
    # The Estimator converts; a helper the unit does not reach keeps its RunConfig.
    source = CANONICAL + b"\n\ndef default_config():\n  return tf1.estimator.RunConfig(save_summary_steps=None)\n"
    result = rewrite_source(source, "train.py", rules)
    assert result.status == "partial" and result.changed
    (finding,) = [f for f in result.findings if f.kind == "manual"]
    line = source.splitlines().index(b"  return tf1.estimator.RunConfig(save_summary_steps=None)") + 1
    assert (finding.code, finding.line, finding.col) == ("E2K905", line, 10)


def test_a_partial_file_is_not_reported_twice(rules):
    partial = CANONICAL.replace(b"tf1.layers.Dense(1)(features)", b"tf1.while_loop(lambda i: i < 3, lambda i: i + 1, [features])")
    result = rewrite_source(partial, "train.py", rules)
    assert result.status == "partial"
    assert {f.code for f in result.manual} == {"E2K901"}
    # ... but its definitions that hold Estimator code are known to the program pass.
    assert "_model_fn" in {name for name, _, _ in result.definitions}


def test_suppressed_on_the_line_and_ignored_by_configuration(rules):
    source = b"import tensorflow as tf\nconfig = tf.estimator.RunConfig()  # e2k: ignore[E2K905]\n"
    result = rewrite_source(source, "a.py", rules)
    assert result.status == "unchanged" and result.findings == []
    source = b"import tensorflow as tf\nconfig = tf.estimator.RunConfig()\n"
    assert rewrite_source(source, "a.py", RuleSet.load(ignore=["E2K905"])).status == "unchanged"
    assert rewrite_source(source, "a.py", rules).status == "partial"


def test_line_map():
    lines = LineMap([b"a", b"b", b"c"], [b"a", b"# mark", b"b", b"new", b"new2"])
    assert [lines(n) for n in range(1, 6)] == [(1, True), (2, False), (2, True), (3, False), (3, False)]


def test_keywords_are_bytes_every_reference_spells():
    for word in KEYWORDS:
        assert isinstance(word, bytes)
    for source in ("tf.estimator", "TPUEstimator", "tensorflow_estimator", "from tensorflow.contrib import learn", "multi_gpu_model"):
        assert mentions_estimator(source.encode()), source


def test_a_broken_file_that_only_mentions_contributors_is_left_alone(rules):
    # "contrib" lets a file through the coarse byte filter of a tree; the exact check then
    # leaves it alone: no parse, no E2K900 for a Python 2 file with a licence header.
    source = b"# Copyright: the contributors\nprint 'hello'\n"
    result = rewrite_source(source, "py2.py", rules)
    assert result.status == "unchanged" and result.findings == []


def test_an_estimator_subclass_is_named_as_the_construct_left():
    """A program's own Estimator class: the finding on its base says why nothing converts."""
    from estimator2keras._registry import RuleSet

    source = b'''import tensorflow as tf


class RegressionEstimator(tf.estimator.Estimator):
    def __init__(self, model_dir=None):
        def _model_fn(features, labels, mode):
            pred = tf.compat.v1.layers.dense(features, 1)
            loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
            train_op = tf.compat.v1.train.AdamOptimizer().minimize(loss, tf.compat.v1.train.get_global_step())
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
        super().__init__(model_fn=_model_fn, model_dir=model_dir)
'''
    result = rewrite_source(source, "subclass.py", RuleSet.load())
    assert result.status == "partial"
    base = [f for f in result.findings if f.line == 4]
    assert base and "class `RegressionEstimator` derives from it" in base[0].message, [f.message for f in result.findings]


def test_code_a_warning_does_not_speak_for_is_still_reported(rules):
    # A tester's program: the Estimator converted with a warning (E2K101, RMSProp on an
    # embedding), which made the file "partial"; an unused SessionRunHook class beside it got
    # no finding, and the file crashed on import on the newest TF.
    source = b"""\
import tensorflow as tf


class LossLoggerHook(tf.estimator.SessionRunHook):
    def after_run(self, run_context, run_values):
        print(run_values.results)


def model_fn(features, labels, mode):
    table = tf.compat.v1.get_variable("table", [10, 4])
    embedded = tf.reduce_mean(tf.nn.embedding_lookup(table, features["ids"]), axis=1)
    logits = tf.compat.v1.layers.dense(embedded, 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.RMSPropOptimizer(0.01).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main():
    est = tf.estimator.Estimator(model_fn)
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"ids": [[1, 2]]}, [1])).repeat().batch(1), steps=2)
"""
    result = rewrite_source(source, "prog.py", rules)
    assert result.status == "partial"
    codes = {(f.line, f.code) for f in result.findings if f.kind == "manual"}
    assert any(code == "E2K101" for _, code in codes), codes  # the warning
    assert (4, "E2K905") in codes, codes  # and the class left
    # A refused unit's model_fn is its unit's: not repeated line by line.
    refused = rewrite_source(source.replace(b"est.train(", b"est.train_twice("), "prog.py", rules)
    assert refused.status == "partial"
    assert not any(f.code == "E2K905" and 9 <= f.line <= 15 for f in refused.findings), \
        [f.format() for f in refused.findings]


WARM_START = b"""\
import tempfile

import tensorflow as tf

X = [[1.0], [2.0], [3.0], [4.0]]
Y = [[2.0], [4.0], [6.0], [8.0]]


def input_fn():
    return tf.data.Dataset.from_tensor_slices((X, Y)).repeat(5).batch(2)


def model_fn(features, labels, mode):
    out = tf.compat.v1.layers.dense(features, 1, name="dense")
    loss = tf.compat.v1.losses.mean_squared_error(labels, out)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


first_dir = tempfile.mkdtemp()
first = tf.estimator.Estimator(model_fn=model_fn, model_dir=first_dir)
first.train(input_fn)
ws = tf.estimator.WarmStartSettings(ckpt_to_initialize_from=first_dir, vars_to_warm_start="dense.*")
second = tf.estimator.Estimator(model_fn=model_fn, model_dir=tempfile.mkdtemp(),
                                warm_start_from=ws)
second.train(input_fn)
print("done")
"""


def test_a_warm_start_from_a_model_dir_the_file_converted_leaves_no_estimator_code(rules):
    # testerE bug 02: `warm_start_from=ws` was reported (E2K400) and the statement building
    # `ws` stayed, referring to tf.estimator (gone from TensorFlow 2.16). The warm start now
    # converts (E2K410): `ws` goes with the Estimator, and no Estimator API is left.
    result = rewrite_source(WARM_START, "prog.py", rules)
    assert result.status == "converted", [f.format() for f in result.manual]
    assert b"WarmStart(first_dir, layers=[\"dense\"], checkpoints=checkpoints)" in result.new
    assert b"WarmStartSettings" not in result.new and b"tf.estimator" not in result.new


def test_the_code_of_a_refused_estimator_is_not_repeated_line_by_line(rules):
    # Refused at its last use: its RunConfig, the function that builds it, its specs and its
    # train_and_evaluate are connected to that use by name, and said there once.
    source = b"""\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    out = tf.compat.v1.layers.dense(features, 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, out)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def build_estimator(config):
    return tf.estimator.Estimator(model_fn, config=config)


config = tf.estimator.RunConfig(save_summary_steps=10)
est = build_estimator(config)
train_spec = tf.estimator.TrainSpec(input_fn, max_steps=10)
eval_spec = tf.estimator.EvalSpec(input_fn, steps=1)
tf.estimator.train_and_evaluate(est, train_spec, eval_spec)
est.train_twice(input_fn)
"""
    result = rewrite_source(source, "prog.py", rules)
    assert result.status == "partial"
    assert [f.code for f in result.manual] == ["E2K902"], [f.format() for f in result.manual]
    # The same program with a RunConfig nothing reads: that one is its own.
    unread = source.replace(b"est.train_twice(input_fn)\n", b"est.train_twice(input_fn)\n"
                                                            b"other = tf.estimator.RunConfig(tf_random_seed=1)\n")
    result = rewrite_source(unread, "prog.py", rules)
    assert sorted((f.code, f.line) for f in result.manual) == [("E2K902", 25), ("E2K905", 26)], \
        [f.format() for f in result.manual]


def test_line_map_forward():
    lines = LineMap([b"a", b"b", b"c", b"d"], [b"a", b"x", b"y", b"c"])
    assert [list(lines.forward(n)) for n in range(1, 5)] == [[1], [2, 3], [4], []]
