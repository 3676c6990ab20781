"""`e2k rewrite --target jax`: a converted program written for Keras 3 on JAX (targets/jax.py),
and `e2k parity` running it on JAX against the Estimator on TF 2.15."""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import textwrap

import libcst as cst
import pytest

from conftest import FIXTURES
from estimator2keras._engine import rewrite_source
from estimator2keras.targets import jax

JAX_CASES = sorted(case.name for case in FIXTURES.iterdir() if (case / "jax" / "after.py").is_file())


def retargeted(code: str) -> jax.Retargeted:
    return jax.retarget(cst.parse_module(textwrap.dedent(code)), limit=99)


def test_model_code_computes_with_keras_ops_and_tf_data_keeps_tensorflow():
    result = retargeted('''\
        import tensorflow as tf


        class Model(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.dense = tf.keras.layers.Dense(4, activation=tf.nn.relu)

            def call(self, features, training=False):
                x = tf.reshape(tf.cast(features["x"], tf.float32), [-1, 4])
                x = tf.concat([x, tf.one_hot(tf.argmax(input=x, axis=1), 4)], axis=1)
                return tf.reduce_mean(self.dense(x), axis=1, keepdims=True, name="mean")

            def features(self, features):
                return tf.strings.to_number(features["s"])


        def input_fn():
            return tf.data.Dataset.range(4).map(lambda x: tf.cast(x, tf.float32)).batch(2)
        ''')
    code = result.module.code
    assert not result.refused
    assert 'self.dense = keras.layers.Dense(4, activation="relu")' in code
    assert 'x = keras.ops.reshape(keras.ops.cast(features["x"], "float32"), [-1, 4])' in code
    assert "x = keras.ops.concatenate([x, keras.ops.one_hot(keras.ops.argmax(x, axis=1), 4)], axis=1)" in code
    assert "return keras.ops.mean(self.dense(x), axis=1, keepdims=True)" in code  # name= has no place
    # What runs in tf.data keeps TensorFlow, and TensorFlow's import stays for it.
    assert 'return tf.strings.to_number(features["s"])' in code
    assert "lambda x: tf.cast(x, tf.float32)" in code and "import tensorflow as tf" in code
    assert code.index('os.environ.setdefault("KERAS_BACKEND", "jax")') < code.index("import keras")


def test_a_mirrored_strategy_is_a_data_parallel_distribution_over_its_devices():
    result = retargeted('''\
        import tensorflow as tf

        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)


        def input_fn():
            return tf.data.Dataset.range(8).batch(4 * strategy.num_replicas_in_sync)


        strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        model.fit(input_fn())
        ''')
    code = result.module.code
    assert 'os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")' in code
    assert "set_logical_device_configuration" not in code
    assert ('strategy = keras.distribution.DataParallel(devices=["cpu:0", "cpu:1"])\n'
            "keras.distribution.set_distribution(strategy)\n"
            "model = keras.Sequential([keras.layers.Dense(1)])\n") in code  # built where the scope was
    assert ".batch(4 * strategy.device_mesh.shape[0])" in code
    assert "tf.distribute" not in code and "scope()" not in code


def test_a_predict_step_takes_and_returns_the_models_state():
    result = retargeted('''\
        import tensorflow as tf


        class Model(tf.keras.Model):
            def predict_step(self, data):
                features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
                logits = self(features, training=False)
                return {"classes": tf.argmax(logits, 1), "probabilities": tf.nn.softmax(logits)}
        ''')
    code = result.module.code
    assert "def predict_step(self, state, data):" in code
    assert "logits, non_trainable_variables = super().predict_step(state, data)" in code
    assert ('return {"classes": keras.ops.argmax(logits, axis=1), "probabilities": keras.ops.softmax(logits)}, '
            "non_trainable_variables") in code


@pytest.mark.parametrize("statement, reason", [
    ("return tf.one_hot(x, 4, on_value=2.0)", "tf.one_hot's argument `on_value` has no keras.ops counterpart"),
    ("return tf.linalg.qr(x)", "tf.linalg.qr has no keras.ops counterpart"),
])
def test_a_tensorflow_op_with_no_keras_form_is_marked_where_it_is(statement, reason):
    result = retargeted(f'''\
        import tensorflow as tf


        class Model(tf.keras.Model):
            def call(self, x):
                {statement}
        ''')
    assert result.refused == [next(r for r in result.refused if reason in r)]
    assert f"    # e2k: {jax.CODE} {result.refused[0]}\n        {statement.split('(')[0]}" in result.module.code


def test_tensorflow_state_outside_the_model_is_marked():
    result = retargeted('''\
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        checkpoint = tf.train.Checkpoint(model=model)
        ''')
    assert result.refused and "tf.train.Checkpoint" in result.refused[0]


def test_helpers_have_their_jax_form_or_are_marked(rules):
    jax_rules = dataclasses.replace(rules, target="jax")
    canned = rewrite_source((FIXTURES / "canned_dnn_classifier" / "before.py").read_bytes(), "canned.py", jax_rules)
    assert canned.status == "converted", [f.format() for f in canned.findings]
    assert "def predict_step(self, state, data):" in canned.helpers["CannedModel"]
    assert "tf.keras" not in "".join(canned.helpers.values())
    # A model_dir's checkpoints: Keras 3's weights files, which hold the optimizer's state too.
    program = (FIXTURES / "checkpoint_resume" / "before.py").read_bytes()
    resumed = rewrite_source(program, "resume.py", jax_rules)
    assert resumed.status == "converted", [f.format() for f in resumed.findings]
    assert "self.model.save_weights(" in resumed.helpers["ModelDirCheckpoints"]
    # A SavedModel export holds TensorFlow's variables: marked, the file converted in part.
    program = (FIXTURES / "export_reload" / "before.py").read_bytes()
    exported = rewrite_source(program, "export.py", jax_rules)
    assert exported.status == "partial"
    assert any(f.code == jax.CODE and "tf.saved_model.save" in f.message for f in exported.findings)


def test_every_helper_metric_loss_and_layer_computes_with_keras_ops_on_jax():
    """A helper class deriving from any Keras metric, loss, layer or optimizer
    (MeanAbsoluteErrorOfElements derives from MeanAbsoluteError) runs in JAX's traced step: no
    TensorFlow op in its methods, or it is marked E2K701 where it is used."""
    import ast

    from estimator2keras import _helpers

    catalogue = {key: helper.code for key, helper in _helpers.catalogue().items()}
    written, refused = jax.helpers(catalogue)
    marked = {key for key, _ in refused}  # E2K701 where a converted file uses them
    checked = 0
    for key, code in written.items():
        for node in ast.parse(code).body:
            bases = [ast.unparse(b) for b in getattr(node, "bases", [])]
            if isinstance(node, ast.ClassDef) and key not in marked and any(
                    b.startswith(("keras.metrics.", "keras.losses.", "keras.layers.", "keras.optimizers."))
                    for b in bases):
                checked += 1
                calls = [ast.unparse(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)]
                assert not [c for c in calls if c.startswith("tf.")], (key, code)
    assert checked >= 10


def test_the_backend_is_chosen_after_the_standard_library_imports_before_keras():
    """`import os` takes its place among the standard library's imports, which stay first; the
    backend is set after them; `import keras` opens the third-party group; the program's own
    modules keep their group."""
    import libcst as cst

    source = ('"""Doc."""\nimport argparse\nimport sys\n\nimport numpy as np\nimport tensorflow as tf\n\n'
              'from trainer import model\n\nx = np.zeros(1) + tf.zeros(1) + model.X + sys.maxsize\n')
    new = jax._imports(cst.parse_module(source), {"tf"}, 2).code
    assert new.startswith('"""Doc."""\nimport argparse\nimport os\nimport sys\n\n'
                          'os.environ.setdefault("KERAS_BACKEND", "jax")\n'
                          'os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")\n\n'
                          'import keras\nimport numpy as np\nimport tensorflow as tf\n\nfrom trainer import model\n'), new


def test_the_target_comes_from_the_command_line_or_the_configuration(tmp_path):
    from estimator2keras.cli import main

    shutil.copy(FIXTURES / "seed_mirrored_linear" / "before.py", tmp_path / "train.py")
    (tmp_path / "pyproject.toml").write_text('[tool.e2k]\ntarget = "jax"\n')
    assert main(["rewrite", str(tmp_path)]) == 1
    assert 'os.environ.setdefault("KERAS_BACKEND", "jax")' in (tmp_path / "train.py").read_text()
    (tmp_path / "pyproject.toml").write_text('[tool.e2k]\ntarget = "pytorch"\n')
    assert main(["rewrite", "--check", str(tmp_path)]) == 2  # a clear error, not a traceback


def _jax_python():
    python = os.environ.get("E2K_TARGET_PYTHON")
    if not python:
        return None
    probe = subprocess.run([python, "-c", "import jax, keras"], capture_output=True)
    return python if probe.returncode == 0 else None


def test_every_jax_fixture_has_its_parity_test():
    """Each fixture's jax/after.py is compared with its Estimator (DataParallel on 2 devices)
    where the fixture's TensorFlow conversions are, sharing their legacy run:
    tests/test_fixture_parity*.py, tests/test_parity_canned.py, tests/test_parity_fixture.py."""
    from test_fixture_parity import ALL_CASES
    from test_parity_canned import CASES as CANNED

    assert JAX_CASES and set(JAX_CASES) <= {*ALL_CASES, *CANNED, "seed_mirrored_linear"}


@pytest.mark.slow
def test_the_model_dir_resumes_on_jax(tmp_path):
    """The checkpoint_resume fixture for JAX run twice on one model_dir: the second run finds
    max_steps reached, trains nothing and evaluates what the first saved."""
    python = _jax_python()
    if python is None:
        pytest.skip("E2K_TARGET_PYTHON (newest TF with JAX) not set")
    program = FIXTURES / "checkpoint_resume" / "jax" / "after.py"
    env = {**os.environ, "MODEL_DIR": str(tmp_path / "model_dir"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    outputs = []
    for _ in range(2):
        run = subprocess.run([python, str(program)], cwd=program.parent, env=env, capture_output=True, text=True,
                             timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        outputs.append([line for line in run.stdout.splitlines() if line.startswith("eval loss")])
        saved = sorted(p.name for p in (tmp_path / "model_dir").iterdir())
        assert saved == ["ckpt-4.weights.h5", "ckpt-6.weights.h5"], saved
    assert outputs[0] == outputs[1] and outputs[0], outputs


@pytest.mark.slow
def test_parity_catches_a_wrong_jax_migration(tmp_path):
    """The CNN converted for JAX, its learning rate 10% higher: parity finds it BROKEN (the
    right one passes, above)."""
    from estimator2keras.parity import run_parity

    python = _jax_python()
    if python is None:
        pytest.skip("E2K_TARGET_PYTHON (newest TF with JAX) not set")
    case = FIXTURES / "mnist_cnn"
    shutil.copytree(case / "jax", tmp_path / "jax")
    after = tmp_path / "jax" / "after.py"
    text = after.read_text()
    assert text.count("keras.optimizers.SGD(learning_rate=0.001)") == 1, "the fixture changed: update this test"
    after.write_text(text.replace("keras.optimizers.SGD(learning_rate=0.001)", "keras.optimizers.SGD(learning_rate=0.0011)"))
    result = run_parity(case / "before.py", after, replicas=2, target_python=python)
    assert not result.passed and "BROKEN" in result.report(), result.report()
