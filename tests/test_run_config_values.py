"""RunConfig values as programs spell them: `run_config.replace(...)` adds settings to the
RunConfig it copies, and a setting read back is its value."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet


class _Text:
    def __init__(self, result):
        self.status, self.findings = result.status, result.findings
        self.new_text = result.new.decode()


def rewrite_source_text(text: str) -> _Text:
    return _Text(rewrite_source(text.encode(), "program.py", RuleSet.load((), (), ())))

PROGRAM = '''\
import numpy as np
import tensorflow.compat.v1 as tf


def input_fn():
    x = np.zeros((8, 2), np.float32)
    return tf.data.Dataset.from_tensor_slices(({"a": x[:, 0], "b": x[:, 1]}, np.zeros(8, np.int64))).batch(4)


def main(job_dir):
    run_config = tf.estimator.RunConfig(tf_random_seed=7, save_checkpoints_steps=50)
    run_config = run_config.replace(model_dir=job_dir){more}
    print('Model dir %s' % run_config.model_dir)
    columns = [tf.feature_column.numeric_column("a"), tf.feature_column.numeric_column("b")]
    estimator = tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=columns, config=run_config)
    estimator.train(input_fn, steps=10)
'''


def test_replace_adds_its_settings_and_the_setting_read_back_is_its_value():
    result = rewrite_source_text(PROGRAM.replace("{more}", ""))
    assert result.status == "converted", result.findings
    new = result.new_text
    assert "run_config" not in new
    assert "print('Model dir %s' % job_dir)" in new
    assert "ModelDirCheckpoints(model, job_dir, save_steps=50)" in new  # both RunConfigs' settings
    assert "tf.keras.utils.set_random_seed(7)" in new


def test_a_later_replace_wins():
    more = "\n    run_config = run_config.replace(save_checkpoints_steps=20)"
    result = rewrite_source_text(PROGRAM.replace("{more}", more))
    assert result.status == "converted", result.findings
    assert "save_steps=20" in result.new_text and "save_steps=50" not in result.new_text


def test_a_runconfig_read_elsewhere_before_its_replace_stays():
    program = PROGRAM.replace("{more}", "").replace(
        "    run_config = run_config.replace(model_dir=job_dir)",
        "    kept = run_config\n    run_config = run_config.replace(model_dir=job_dir)")
    result = rewrite_source_text(program)
    assert result.status == "partial"
    assert "tf.estimator.DNNClassifier(" in result.new_text
    assert any("used for more than its replace" in f.message for f in result.findings)
