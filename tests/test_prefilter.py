"""The syntactic pre-filter: a file in which no call can build a unit skips libcst entirely,
and the result is the same as running every pass on it."""
from __future__ import annotations

import subprocess
import sys

import libcst as cst
import pytest

from conftest import FIXTURES
from estimator2keras import _engine
from estimator2keras._engine import rewrite_source
from estimator2keras._prefilter import MAX_PARSE_BYTES, Screening, may_build_unit
from estimator2keras._registry import RuleSet
from estimator2keras._rule import ModuleRule, UnitRule

CANONICAL = (FIXTURES / "seed_mirrored_linear" / "before.py").read_bytes()
# Everything of the canonical program but the Estimator itself.
HEADER = "import tensorflow as tf\nimport tensorflow.compat.v1 as tf1\n\n"


def rewrite_without_prefilter(source: bytes, rules: RuleSet, monkeypatch) -> _engine.FileResult:
    """What the engine did before the pre-filter: libcst and every pass on every file."""
    with monkeypatch.context() as patch:
        patch.setattr(_engine, "screen", lambda *args: Screening(parse=True, units=True))
        return rewrite_source(source, "a.py", rules)


SPELLINGS = [
    pytest.param("est = tf.estimator.Estimator(model_fn=f)", True, id="tf.estimator"),
    pytest.param("est = tf1.estimator.Estimator(f)", True, id="compat.v1"),
    pytest.param("from tensorflow.estimator import Estimator\nest = Estimator(f)", True, id="from-import"),
    pytest.param("from tensorflow.estimator import Estimator as E\nest = E(model_fn=f)", True, id="import-alias"),
    pytest.param("def g():\n    import tensorflow_estimator as te\n    return te.estimator.Estimator(f)", True, id="in-function"),
    pytest.param("est = tf.estimator.Estimator\n", False, id="named-not-called"),
    pytest.param('"""est = tf.estimator.Estimator(model_fn=f)"""', False, id="in-docstring"),
    pytest.param("# est = tf.estimator.Estimator(model_fn=f)\nx = 1", False, id="in-comment"),
    pytest.param("cls = tf.estimator.Estimator\nest = cls(f)", True, id="through-assignment"),
    pytest.param("tf1 = tf.compat.v1\nest = tf1.estimator.Estimator(f)", True, id="module-alias-by-assignment"),
    pytest.param("tf1 = tf.compat.v1\nlayers = tf1.layers\nlayers.dense(x, 1)", False, id="alias-of-no-estimator"),
    pytest.param("import functools\nmake = functools.partial(tf.estimator.Estimator, model_fn=f)", False, id="partial"),
    pytest.param("class Mine(tf.estimator.Estimator):\n    pass", False, id="subclass"),
    pytest.param("config = tf.estimator.RunConfig()\ntf.estimator.train_and_evaluate(e, t, v)", False, id="other-estimator-apis"),
    pytest.param("from tensorflow.estimator import Estimator as E\nE.mro()", False, id="alias-attribute"),
    # A bare name resolves to TensorFlow only through an import (tensorflow_estimator's own
    # tpu_estimator.py calls its TPUEstimator class so: 4 s of libcst metadata for nothing).
    pytest.param("class Estimator:\n    pass\nest = Estimator(f)", False, id="own-class"),
    pytest.param("def Estimator(fn):\n    return fn\nest = Estimator(f)", False, id="own-function"),
    pytest.param("from tensorflow.estimator import *\nest = Estimator(f)", False, id="star-import"),
    pytest.param("def g():\n    from tensorflow.estimator import Estimator\n    return Estimator(f)", True, id="import-in-function"),
    # The callee's whole path counts, not only its last name.
    pytest.param("import tensorflow.compat.v1\nest = tensorflow.compat.v1.estimator.Estimator(f)", True, id="unaliased-import"),
    pytest.param("from tensorflow import estimator as tfe\nest = tfe.Estimator(f)", True, id="module-alias"),
    pytest.param("from tensorflow.compat import v1\nest = v1.estimator.Estimator(model_fn=f)", True, id="from-compat-import-v1"),
    pytest.param("import mylib\nest = mylib.Estimator(f)", False, id="other-library"),
    pytest.param("est = tf.keras.Estimator(f)", False, id="not-an-estimator-path"),
    # Code copied from TensorFlow's sources (the library's own files are left by the engine).
    pytest.param("from tensorflow_estimator.python.estimator import estimator as est_lib\nest = est_lib.Estimator(f)",
                 True, id="library-module-path"),
    pytest.param("from tensorflow.python.estimator import estimator as est_lib\nest = est_lib.Estimator(f)",
                 True, id="tf1-module-path"),
    pytest.param("from .estimator import Estimator\nest = Estimator(f)", False, id="relative-import"),
    pytest.param("est = tf.estimator.Estimator.__new__(tf.estimator.Estimator)", False, id="method-of-the-class"),
]


@pytest.mark.parametrize("snippet,builds", SPELLINGS)
def test_which_calls_may_build_a_unit(snippet, builds):
    assert may_build_unit((HEADER + snippet + "\n").encode(), {"estimator.Estimator"}) is builds


@pytest.mark.parametrize("snippet,builds", SPELLINGS)
def test_same_result_as_without_the_prefilter(snippet, builds, rules, monkeypatch):
    source = (HEADER + "def f(features, labels, mode):\n    pass\n\n" + snippet + "\n").encode()
    fast = rewrite_source(source, "a.py", rules)
    full = rewrite_without_prefilter(source, rules, monkeypatch)
    assert (fast.status, fast.new, fast.findings) == (full.status, full.new, full.findings)


def test_files_ruled_out_are_never_parsed_by_libcst(rules, monkeypatch):
    def no_parse(*args, **kwargs):
        raise AssertionError("the syntactic pre-filter should have ruled this file out")

    monkeypatch.setattr(cst, "parse_module", no_parse)
    source = b"import tensorflow as tf\nSPEC = tf.estimator.EstimatorSpec  # estimator\n"
    result = rewrite_source(source, "specs.py", rules)
    # No unit can start here; the Estimator API left is still reported (E2K905), from
    # CPython's tree alone.
    assert result.new is source and [f.code for f in result.findings] == ["E2K905"]


def test_syntax_errors_are_still_reported_where_cpython_cannot_decide(rules):
    # CPython rejects it, so the file goes to libcst, which reports where and why.
    result = rewrite_source(b"# estimator\ndef f(:\n", "bad.py", rules)
    assert result.status == "error" and result.findings[0].code == "E2K900"


def test_constructor_paths_follow_the_enabled_unit_rules():
    assert RuleSet.load(select=["E2K001"]).constructor_paths() == {"estimator.Estimator"}
    # the canned Estimators' rules (E2K5xx) own their constructors, those they only mark too
    canned = RuleSet.load(select=["E2K5"]).constructor_paths()
    assert {"estimator.DNNClassifier", "estimator.LinearRegressor", "estimator.DNNLinearCombinedClassifier",
            "estimator.BoostedTreesClassifier", "estimator.BaselineClassifier"} <= canned
    assert "estimator.Estimator" not in canned
    everything = RuleSet.load().constructor_paths()
    assert {"estimator.Estimator"} | canned < everything
    assert {path.rpartition(".")[2] for path in everything - canned} == {"Estimator", "TPUEstimator", "model_to_estimator"}
    assert RuleSet.load(ignore=["E2K001", "E2K008", "E2K5", "E2K604"]).constructor_paths() == frozenset()

    class MyEstimatorRule(UnitRule):
        code = "E2K998"
        summary = "test"
        constructors = ("estimator.MyEstimator",)

    rules = RuleSet({**RuleSet.load().rules, "E2K998": MyEstimatorRule})
    assert rules.constructor_paths() == everything | {"estimator.MyEstimator"}


class _Marker(ModuleRule):
    """Adds a comment to every file it sees.

    ## What it does
    Appends a comment.

    ## Why
    To show that module rules run on files without any Estimator.

    ## Fix safety
    Safe.
    """

    code = "E2K997"
    summary = "test rule"

    def transform(self, module, ctx):
        return module.with_changes(footer=[*module.footer, cst.EmptyLine(comment=cst.Comment("# seen"))])


def test_module_rules_still_run_on_files_without_a_unit():
    rules = RuleSet({**RuleSet.load().rules, "E2K997": _Marker})
    result = rewrite_source(b"# estimator\nx = 1\n", "a.py", rules)
    assert result.new == b"# estimator\nx = 1\n# seen\n"


@pytest.mark.parametrize(
    "nesting",
    [
        pytest.param("(" * 300 + "1" + ")" * 300, id="parentheses"),
        pytest.param("[" * 10000 + "1" + "]" * 10000, id="brackets"),
        pytest.param("-" * 10000 + "1", id="unary-minus"),
        pytest.param("a" + ".b" * 10000, id="attributes"),
    ],
)
def test_code_nested_too_deeply_is_reported_not_crashed_on(nesting, tmp_path):
    # libcst's parser segfaults or runs for minutes on such files: run e2k in a subprocess so
    # that a regression fails this test instead of killing the test run.
    (tmp_path / "deep.py").write_bytes(CANONICAL + f"y = {nesting}\n".encode())
    (tmp_path / "other.py").write_bytes(b"import tensorflow as tf  # estimator\n")
    proc = subprocess.run(
        [sys.executable, "-m", "estimator2keras", "rewrite", "--check", "-j", "1", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"{tmp_path / 'deep.py'}:" in proc.stdout and "E2K900 cannot parse:" in proc.stdout
    assert "1 unchanged, 1 error" in proc.stderr and "Traceback" not in proc.stderr


def _ten_megabytes(with_unit: bool) -> bytes:
    line = b"TABLE_%07d = [1.0, 2.0, 3.0, 4.0]  # estimator weights, generated\n"
    body = b"".join(line % i for i in range(10 * 2**20 // len(line % 0)))
    return (CANONICAL if with_unit else b"import tensorflow as tf\n") + body


def test_a_ten_megabyte_file_without_a_unit_is_left_alone_unparsed(rules, monkeypatch):
    monkeypatch.setattr(cst, "parse_module", lambda *a, **k: pytest.fail("a 10 MB file reached libcst"))
    source = _ten_megabytes(with_unit=False)
    assert len(source) >= 10 * 2**20 - 100
    result = rewrite_source(source, "tables.py", rules)
    assert result.status == "unchanged" and result.new is source


def test_a_ten_megabyte_file_with_a_unit_is_reported_not_parsed(rules, monkeypatch):
    monkeypatch.setattr(cst, "parse_module", lambda *a, **k: pytest.fail("a 10 MB file reached libcst"))
    source = _ten_megabytes(with_unit=True)
    result = rewrite_source(source, "tables.py", rules)
    assert result.status == "error" and result.new is source
    (finding,) = result.findings
    assert finding.code == "E2K900" and f"more than e2k parses ({MAX_PARSE_BYTES >> 20} MB)" in finding.message


def test_a_module_rule_makes_libcst_parse_only_the_files_that_mention_its_keywords(rules, monkeypatch):
    # E2K603 (multi_gpu_model) is a module rule: it must not send every "estimator" file to libcst.
    assert any(rule.code == "E2K603" for rule in rules.module_rules())
    parsed = []
    real_parse = cst.parse_module
    monkeypatch.setattr(cst, "parse_module", lambda source, *a, **k: parsed.append(source) or real_parse(source, *a, **k))
    plain = b"import tensorflow as tf\nSPEC = tf.estimator.EstimatorSpec  # estimator\n"
    assert rewrite_source(plain, "specs.py", rules).new is plain and parsed == []
    legacy = b"from tensorflow.keras.utils import multi_gpu_model  # estimator\nx = 1\n"
    rewrite_source(legacy, "legacy.py", rules)
    assert parsed and parsed[0] == legacy
