"""The noise envelope without TensorFlow: how the nudged legacy run's drift judges the migrated
run (strict first steps, k x envelope after), the verdicts, the report, the plot, the CLI
options, and the runner starting the envelope run alongside the legacy one (fake interpreters);
and the hyper-parameters compared statically (dropout rates, optimizer settings)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from estimator2keras.parity import Tolerance, run_parity
from estimator2keras.parity._compare import (
    compare,
    compare_hyperparameters,
    compare_metrics,
    compare_steps,
    noise_envelope,
    side_info,
)
from estimator2keras.parity._report import render_text, write_plot
from parity_programs import support

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "seed_mirrored_linear"
TOL = Tolerance()
K = TOL.envelope_k
S = TOL.strict_steps


# --- the envelope ---------------------------------------------------------------------------

def test_envelope_is_the_running_maximum_of_the_nudged_runs_drift():
    raw, running = noise_envelope([1.0, 1.0, 1.0, 1.0], [1.0, 1.5, 1.1, 0.0])
    assert raw == pytest.approx([0.0, 0.5, 0.1, 1.0])
    assert running == pytest.approx([0.0, 0.5, 0.5, 1.0])  # a chance coincidence at step 3 does not shrink it
    assert noise_envelope([1.0], [math.nan])[1] == [math.inf]


def _rows(legacy, migrated, nudged, tolerance=TOL):
    return compare_steps(legacy, migrated, tolerance, noise_envelope(legacy, nudged))


def test_strict_steps_allow_the_envelope_once_later_steps_k_times_it():
    n = S + 3
    legacy = [2.0] * n
    nudged = [2.0 + 1e-3] * n          # a noisy program: envelope 1e-3 from step 1
    migrated = [2.0 + 2e-3] * n        # 2 x envelope: noise, once the strict steps are over
    rows = _rows(legacy, migrated, nudged)
    assert [row.passed for row in rows] == [False] * S + [True] * 3
    assert rows[S].within_noise_only and rows[S].allowed == pytest.approx(K * 1e-3)
    assert rows[0].allowed == pytest.approx(1e-3)
    # within the program's own noise (a summed loss through Adam's first update): passes
    within = _rows(legacy, [2.0 + 0.9e-3] * n, nudged)
    assert all(row.passed for row in within) and within[0].within_noise_only
    quiet = _rows(legacy, legacy, [2.0 + 1e-9] * n)
    assert quiet[0].allowed == pytest.approx(1e-5 + 1e-6 * 2.0)
    beyond = _rows(legacy, [2.0] * S + [2.0 + 1.01 * K * 1e-3] * 3, nudged)
    assert [row.passed for row in beyond] == [True] * S + [False] * 3


def test_below_the_envelope_the_tight_tolerance_holds_at_every_step():
    # a quiet program (envelope 1e-9): past step 10 the fixed schedule allowed 5 %, the envelope does not
    legacy = [1.0] * 30
    nudged = [1.0 + 1e-9] * 30
    migrated = list(legacy)
    migrated[24] = 1.0 + 1e-3
    rows = _rows(legacy, migrated, nudged)
    assert [row.step for row in rows if not row.passed] == [25]
    assert all(row.passed for row in compare_steps(legacy, migrated, TOL))  # the fixed schedule misses it


def test_nan_fails_and_missing_steps_fail_with_an_envelope_too():
    rows = _rows([1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, math.nan], [1.0, 1.0, 1.0, 3.0, 1.0])
    assert [row.passed for row in rows] == [True, True, True, False, False]
    assert rows[4].migrated_loss is None and rows[4].envelope == pytest.approx(2.0)


def test_metric_and_weight_envelopes_widen_their_tolerance():
    rows = compare_metrics({"loss": 1.0, "acc": 0.5}, {"loss": 1.1, "acc": 0.6}, 1e-6, 1e-5,
                           {"loss": 1.05, "acc": 0.5}, K)
    assert [(row.name, row.passed) for row in rows] == [("loss", True), ("acc", False)]
    assert rows[0].envelope == pytest.approx(0.05) and rows[0].allowed == pytest.approx(K * 0.05)


# --- verdicts ---------------------------------------------------------------------------------

def _side(losses, **extra):
    return {"status": "ok", "losses": list(losses), "replicas": 2, "strategy": "MirroredStrategy",
            "loss_reduction": "mean", "training_calls": 1,
            "variables": [{"name": "dense/kernel", "shape": [2], "trainable": True}],
            "evaluations": [{"loss": 0.5}], **extra}


def _weights(final):
    return {"initial_0": np.zeros(2, np.float32), "final_0": np.array(final, np.float32)}


def _judge(legacy, migrated, nudged, *, final=(1.0, 1.0), nudged_final=(1.0, 1.0), **kwargs):
    legacy_side = _side(legacy)
    migrated_side = _side(migrated)
    nudged_side = _side(nudged, perturbation={"seed": 0, "ulps": 16, "elements": 2}) if nudged is not None else None
    return compare(legacy_side, migrated_side, _weights((1.0, 1.0)), _weights(final), TOL,
                   legacy_info=side_info(legacy_side, "legacy.py", "python", 1.0),
                   migrated_info=side_info(migrated_side, "migrated.py", "python", 1.0),
                   settings={"replicas": 2}, nudged=nudged_side,
                   nudged_weights=_weights(nudged_final) if nudged is not None else None, **kwargs)


def test_verdict_within_the_programs_own_noise():
    legacy = [2.0, 1.9, 1.8, 1.7, 1.6, 1.5]
    nudged = [2.0, 1.9, 1.8, 1.7 + 1e-3, 1.6 - 2e-3, 1.5 + 1e-3]
    migrated = [2.0, 1.9, 1.8, 1.7 - 3e-3, 1.6 + 1e-3, 1.5]
    result = _judge(legacy, migrated, nudged, final=(1.0, 1.02), nudged_final=(1.01, 1.0))
    assert result.passed, result.report()
    assert result.reason.startswith("agrees within the program's own numerical noise: 6 steps")
    assert "2 steps beyond the fixed tolerance, from step 4" in result.reason
    assert result.envelope["measured"] and result.envelope["k"] == K
    assert result.weights[0].envelope == pytest.approx(0.01) and result.weights[0].passed
    assert _judge(legacy, migrated, None).verdict == "broken"  # without the envelope: step 4 fails


def test_verdict_beyond_the_noise_names_the_step_the_envelope_and_the_difference():
    legacy = [2.0, 1.9, 1.8, 1.7, 1.6]
    nudged = [2.0, 1.9, 1.8, 1.7 + 1e-4, 1.6]
    migrated = [2.0, 1.9, 1.8, 1.7 + 1e-2, 1.6]
    result = _judge(legacy, migrated, nudged)
    assert result.verdict == "broken" and result.first_divergent_step == 4
    assert result.reason.startswith(
        "diverges beyond the program's own numerical noise at step 4 (envelope 0.0001, difference 0.01)")
    assert f"max(1e-05 + 1e-06*|legacy|, {K:g} x envelope) = 0.0004" in result.reason


def test_verdict_in_the_strict_steps_says_so():
    result = _judge([2.0, 1.9, 1.8], [2.0, 1.9 + 2e-4, 1.8], [2.0, 1.9 + 1e-4, 1.8])
    assert result.first_divergent_step == 2
    assert f"steps 1-{S} may differ by no more than the program's own noise" in result.reason
    assert "= 0.0001 (" in result.reason


def test_final_weights_beyond_their_envelope_break_parity():
    result = _judge([1.0] * 4, [1.0] * 4, [1.0] * 4, final=(1.0, 1.5), nudged_final=(1.0, 1.01))
    assert result.verdict == "broken" and "envelope 0.01" in result.reason


def test_an_envelope_run_of_another_length_is_not_used_and_said_so():
    result = _judge([1.0] * 12, [1.0] * 11 + [1.02], [1.0] * 11)
    assert result.passed  # judged by the fixed schedule: 2 % at step 12 is within 5 %
    assert result.envelope == {"measured": False, "reason": result.envelope["reason"]}
    assert "took 11 steps" in result.envelope["reason"]
    assert any(note.startswith("no noise envelope") for note in result.notes)
    assert all(row.envelope is None for row in result.steps)


def test_a_program_whose_stopping_step_is_within_its_own_noise_is_judged_by_the_run_that_stopped_there():
    """Early stopping on a near tie: the legacy program ran 7 steps, nudged at rounding level 6.
    A migration that stops at 6 agrees with the nudged run; it is judged against it, the first
    run giving the envelope over the 6 common steps."""
    legacy = [2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.45]
    nudged = [2.0, 1.9, 1.8, 1.7 + 1e-4, 1.6, 1.5 - 1e-4]
    migrated = [2.0, 1.9, 1.8, 1.7, 1.6 + 1e-4, 1.5]
    result = _judge(legacy, migrated, nudged, final=(1.0, 1.0), nudged_final=(1.0, 1.0))
    assert result.passed, result.report()
    assert len(result.steps) == 6 and result.envelope["measured"]
    assert not result.hints  # the step counts differ within the program's noise, not a hint
    assert any("stops where its own rounding decides: 7 steps as run, 6 with its weights nudged" in note
               for note in result.notes)
    # the same stopping step does not excuse a wrong migration: the losses still judge it
    wrong = _judge(legacy, [2.0, 1.9, 1.8, 1.75, 1.7, 1.65], nudged)
    assert wrong.verdict == "broken" and wrong.first_divergent_step == 4
    # nor a weight that moved elsewhere
    assert _judge(legacy, migrated, nudged, final=(1.0, 1.5)).verdict == "broken"
    # a migration that stops elsewhere than either legacy run keeps the step-count verdict
    other = _judge(legacy, legacy[:5], nudged)
    assert other.verdict == "broken" and other.reason.startswith("step counts differ")


def test_report_and_plot_show_the_envelope(tmp_path):
    legacy = [2.0, 1.9, 1.8, 1.7, 1.6]
    nudged = [2.0, 1.9, 1.8, 1.7 + 1e-3, 1.6 - 2e-3]
    result = _judge(legacy, [2.0, 1.9, 1.8, 1.7 - 2e-3, 1.6], nudged)
    text = render_text(result)
    assert "envelope" in text and "allowed" in text and "ok (within noise)" in text
    assert "noise envelope: the legacy program run again" in text
    assert json.loads(json.dumps(result.to_dict()))["steps"][3]["envelope"] == pytest.approx(1e-3)
    path = tmp_path / "plot.png"
    write_plot(result, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- hyper-parameters read at run time ---------------------------------------------------------

ADAM_TF1 = {"kind": "Adam", "class": "AdamOptimizer",
            "params": {"learning_rate": 0.003, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-8, "amsgrad": False}}
ADAM_KERAS = {"kind": "Adam", "class": "Adam",
              "params": {"learning_rate": 0.003000000026077032, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-8,
                         "amsgrad": False}}


def _hyper(legacy, migrated):
    rows, notes = compare_hyperparameters(legacy, migrated)
    return {row.name: (row.legacy, row.migrated, row.passed) for row in rows}, notes


def test_the_same_optimizer_and_dropout_agree_float32_rounding_included():
    rows, notes = _hyper({"optimizers": [ADAM_TF1], "dropout": [{"kind": "Dropout", "value": 0.5}]},
                         {"optimizers": [ADAM_KERAS], "dropout": [{"kind": "Dropout", "value": 0.5}]})
    assert rows["optimizer"] == ("AdamOptimizer", "Adam", True)
    assert rows["Adam learning_rate"] == (0.003, 0.003, True)  # shown to 7 digits, compared to 1e-6
    assert rows["dropout #1 (Dropout) rate"] == (0.5, 0.5, True) and not notes


def test_a_different_hyper_parameter_or_optimizer_fails_with_both_values():
    keras = {**ADAM_KERAS, "params": {**ADAM_KERAS["params"], "epsilon": 1e-7}}
    rows, _ = _hyper({"optimizers": [ADAM_TF1]}, {"optimizers": [keras]})
    assert rows["Adam epsilon"] == (1e-8, 1e-7, False)
    sgd = {"kind": "SGD", "class": "SGD", "params": {"learning_rate": 0.003, "momentum": 0.0}}
    rows, _ = _hyper({"optimizers": [ADAM_TF1]}, {"optimizers": [sgd]})
    assert rows == {"optimizer": ("AdamOptimizer (Keras: Adam)", "SGD", False)}


def test_schedules_and_unpaired_optimizers_are_not_compared():
    schedule = {**ADAM_TF1, "params": {**ADAM_TF1["params"], "learning_rate": None}}
    rows, _ = _hyper({"optimizers": [schedule]}, {"optimizers": [ADAM_KERAS]})
    assert rows["Adam learning_rate"] == ("not static", 0.003, None)
    rows, notes = _hyper({"optimizers": [ADAM_TF1, ADAM_TF1]}, {"optimizers": [ADAM_KERAS]})
    assert rows == {} and notes == ["optimizers not compared: the legacy program applied 2, the migrated program 1"]
    assert _hyper({"optimizers": [ADAM_TF1]}, {}) == ({}, [])  # a side that recorded nothing (older bootstrap)


def test_dropout_compared_in_order_or_as_rates_when_counts_differ():
    def drops(*values):
        return {"dropout": [{"kind": "Dropout", "value": v} for v in values]}

    rows, _ = _hyper(drops(0.5, 0.1), drops(0.5, 0.2))
    assert rows["dropout #2 (Dropout) rate"] == (0.1, 0.2, False)
    rows, _ = _hyper(drops(0.5, 0.5), drops(0.5))  # a loop of tf.nn.dropout calls on one line, say
    assert rows["dropout (in order of use)"][2] is True
    rows, _ = _hyper(drops(0.5), drops())
    assert rows["dropout (in order of use)"] == ("Dropout 0.5", "none", False)  # a forgotten dropout layer


def test_a_hyper_parameter_mismatch_breaks_parity_even_when_the_losses_agree():
    legacy = _side([2.0, 1.9], optimizers=[ADAM_TF1], dropout=[{"kind": "Dropout", "value": 0.5}])
    migrated = _side([2.0, 1.9], optimizers=[ADAM_KERAS], dropout=[{"kind": "Dropout", "value": 0.4}])
    result = compare(legacy, migrated, _weights((1.0, 1.0)), _weights((1.0, 1.0)), TOL,
                     legacy_info=side_info(legacy, "l.py", "python", 1.0),
                     migrated_info=side_info(migrated, "m.py", "python", 1.0), settings={"replicas": 2})
    assert result.verdict == "broken" and result.first_divergent_step is None
    assert result.reason.endswith("dropout #1 (Dropout) rate: legacy 0.5, migrated 0.4")
    assert "Hyper-parameters" in render_text(result)
    migrated["losses"] = [2.0, 2.5]  # with a loss difference too, the mismatch is a hint
    result = compare(legacy, migrated, _weights((1.0, 1.0)), _weights((1.0, 1.0)), TOL,
                     legacy_info=side_info(legacy, "l.py", "python", 1.0),
                     migrated_info=side_info(migrated, "m.py", "python", 1.0), settings={"replicas": 2})
    assert result.first_divergent_step == 2
    assert any("dropout #1 (Dropout) rate: legacy 0.5, migrated 0.4" in hint for hint in result.hints)


# --- the runner: the envelope run goes alongside the legacy one -----------------------------

FAKE_SIDE = """#!{python}
import json, os, sys, time
import numpy as np
request = json.load(open(sys.argv[2]))
legacy = sys.argv[1].endswith("_legacy_side.py")
kind = "envelope" if "perturb" in request else ("legacy" if legacy else "migrated")
started = time.time()
time.sleep(float(os.environ.get("SLEEP", "0")))
losses = [2.0, 1.9, 1.8, 1.7, 1.6]
if kind == "envelope":
    if os.environ.get("ENVELOPE_CRASH"):
        json.dump({{"status": "crashed", "error": {{"type": "ValueError", "message": "boom"}}}},
                  open(os.path.join(request["out_dir"], "result.json"), "w"))
        sys.exit(2)
    losses = [2.0, 1.9, 1.8, 1.7 + 1e-3, 1.6 + 1e-3]
elif kind == "migrated":
    losses = [2.0, 1.9, 1.8, 1.7 + float(os.environ.get("DRIFT", "0")), 1.6]
np.savez(os.path.join(request["out_dir"], "weights.npz"), initial_0=np.zeros(2), final_0=np.ones(2))
json.dump({{"status": "ok", "losses": losses, "replicas": 2, "loss_reduction": "mean", "training_calls": 1,
           "variables": [{{"name": "w", "shape": [2], "trainable": True}}], "evaluations": [],
           "perturbation": request.get("perturb"), "kind": kind, "started": started, "ended": time.time(),
           "request": request}}, open(os.path.join(request["out_dir"], "result.json"), "w"))
"""


@pytest.fixture()
def fake_python(tmp_path):
    path = tmp_path / "python"
    path.write_text(FAKE_SIDE.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def _run(tmp_path, fake_python, monkeypatch, **env):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return run_parity(FIXTURE / "before.py", FIXTURE / "after.py", legacy_python=fake_python,
                      target_python=fake_python, workdir=tmp_path / "work", seed=7)


def test_the_envelope_run_is_the_legacy_program_nudged_and_runs_alongside(tmp_path, fake_python, monkeypatch):
    result = _run(tmp_path, fake_python, monkeypatch, SLEEP="1", DRIFT="3e-3")
    assert result.passed and result.reason.startswith("agrees within the program's own numerical noise")
    work = tmp_path / "work"
    envelope = json.loads((work / "envelope" / "result.json").read_text())
    legacy = json.loads((work / "legacy" / "result.json").read_text())
    assert envelope["kind"] == "envelope" and envelope["request"]["perturb"] == {"seed": 7, "ulps": 16}
    assert envelope["request"]["program"] == legacy["request"]["program"] == str(FIXTURE / "before.py")
    assert envelope["started"] < legacy["ended"] and legacy["started"] < envelope["ended"]  # concurrently
    assert [row.envelope for row in result.steps] == pytest.approx([0, 0, 0, 1e-3, 1e-3])


def test_a_migration_beyond_the_noise_is_broken(tmp_path, fake_python, monkeypatch):
    result = _run(tmp_path, fake_python, monkeypatch, DRIFT="5e-3")
    assert result.verdict == "broken" and result.first_divergent_step == 4
    assert "(envelope 0.001, difference 0.005)" in result.reason


def test_a_failed_envelope_run_falls_back_to_the_fixed_tolerance(tmp_path, fake_python, monkeypatch):
    result = _run(tmp_path, fake_python, monkeypatch, ENVELOPE_CRASH="1", DRIFT="3e-3")
    assert result.verdict == "broken" and result.first_divergent_step == 4  # 3e-3 > the tight tolerance
    assert result.envelope["measured"] is False and "ValueError: boom" in result.envelope["reason"]
    assert result.settings["tolerance"].startswith("steps 1-10")


def test_no_envelope_runs_no_second_legacy_program(tmp_path, fake_python):
    result = run_parity(FIXTURE / "before.py", FIXTURE / "after.py", legacy_python=fake_python,
                        target_python=fake_python, workdir=tmp_path / "work", envelope=False)
    assert result.passed and result.envelope is None and result.settings["envelope"] == "off"
    assert not (tmp_path / "work" / "envelope").exists()
    assert all(row.envelope is None for row in result.steps)


# --- CLI --------------------------------------------------------------------------------------

def test_cli_passes_envelope_options(monkeypatch, capsys):
    from estimator2keras import cli
    from estimator2keras.parity import cli as parity_cli

    seen = {}

    def fake_run_parity(legacy, migrated, **kwargs):
        seen.update(kwargs)
        return _judge([1.0], [1.0], [1.0])

    monkeypatch.setattr(parity_cli, "run_parity", fake_run_parity)
    base = ["parity", str(FIXTURE / "before.py"), str(FIXTURE / "after.py")]
    assert cli.main(base) == 0
    assert seen["envelope"] is True and seen["tolerance"] is None
    assert cli.main(base + ["--no-envelope", "--envelope-k", "8"]) == 0
    assert seen["envelope"] is False and seen["tolerance"].envelope_k == 8
    assert cli.main(base + ["--envelope-k", "0"]) == 2
    assert "--envelope-k must be positive" in capsys.readouterr().err


# --- the nudge itself, in TensorFlow (slow) ----------------------------------------------------

@pytest.mark.slow
@support.requires_legacy
def test_the_envelope_run_moves_every_nonzero_weight_by_16_ulps_and_leaves_zeros(tmp_path):
    result = run_parity(FIXTURE / "before.py", FIXTURE / "after.py", steps=2, workdir=tmp_path,
                        legacy_python=support.legacy_python())
    assert result.passed and result.envelope["measured"], result.report()
    assert result.envelope["elements"] == 3 and result.envelope["ulps"] == 16
    with np.load(tmp_path / "legacy" / "weights.npz") as legacy, np.load(tmp_path / "envelope" / "weights.npz") as nudged:
        kernel, bias = legacy["initial_0"], legacy["initial_1"]
        moved = np.abs(nudged["initial_0"].astype(np.float64) - kernel)
        assert kernel.dtype == np.float32 and np.all(kernel != 0)
        np.testing.assert_array_equal(moved, 16 * np.spacing(np.abs(kernel)).astype(np.float64))
        np.testing.assert_array_equal(bias, 0)  # the bias starts at zero: one ulp of 0 is a denormal
        np.testing.assert_array_equal(nudged["initial_1"], bias)


# --- what the bootstraps read, in each interpreter (slow) ------------------------------------

READ_PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("side_common", sys.argv[1])
common = importlib.util.module_from_spec(spec)
spec.loader.exec_module(common)
import tensorflow as tf

record, on = [], {"gate": True}
common.patch_dropout(tf, record, lambda: on["gate"])
x = tf.ones((2, 4))
layer = tf.keras.layers.Dropout(0.3)
layer(x, training=True)
layer(x, training=True)          # the same layer again: recorded once
tf.keras.layers.Dropout(0.9)(x, training=False)  # not training: not recorded
tf.keras.layers.GaussianNoise(0.2)(x, training=True)
tf.nn.dropout(x, rate=0.25)
tf.compat.v1.nn.dropout(x, keep_prob=0.6)
on["gate"] = False
tf.keras.layers.Dropout(0.7)(x, training=True)  # outside the gate
out = {"dropout": [(d["kind"], round(d["value"], 6)) for d in record], "optimizers": []}
opts = [tf.keras.optimizers.Adam(0.01, epsilon=1e-8), tf.keras.optimizers.SGD(0.1, momentum=0.9),
        tf.keras.optimizers.RMSprop()]
if hasattr(tf.compat.v1.train, "MomentumOptimizer"):
    opts += [tf.compat.v1.train.MomentumOptimizer(0.1, 0.9), tf.compat.v1.train.GradientDescentOptimizer(0.5),
             tf.compat.v1.train.RMSPropOptimizer(0.01)]
for opt in opts:
    out["optimizers"].append(common.describe_optimizer(tf, opt))
print("RESULT " + json.dumps(out))
"""


def _read_probe(python: str) -> dict:
    import subprocess

    side_common = Path(__file__).resolve().parent.parent / "estimator2keras" / "parity" / "_side_common.py"
    done = subprocess.run([python, "-c", READ_PROBE, str(side_common)], capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def _check_read(out: dict) -> None:
    assert out["dropout"] == [["Dropout", 0.3], ["GaussianNoise", 0.2], ["Dropout", 0.25], ["Dropout", 0.4]]
    by_class = {o["class"]: o for o in out["optimizers"]}
    adam = by_class["Adam"]["params"]
    assert adam["epsilon"] == pytest.approx(1e-8) and adam["learning_rate"] == pytest.approx(0.01)
    assert by_class["SGD"]["params"]["momentum"] == pytest.approx(0.9)
    assert by_class["RMSprop"]["params"]["rho"] == pytest.approx(0.9)
    if "MomentumOptimizer" in by_class:  # TF1 optimizers, their defaults written out as Keras names
        assert by_class["MomentumOptimizer"] == {
            "kind": "SGD", "class": "MomentumOptimizer",
            "params": {"learning_rate": 0.1, "momentum": 0.9, "nesterov": False}}
        assert by_class["GradientDescentOptimizer"]["params"] == {"learning_rate": 0.5, "momentum": 0.0,
                                                                  "nesterov": False}
        assert by_class["RMSPropOptimizer"]["params"] == {"learning_rate": 0.01, "rho": 0.9, "momentum": 0.0,
                                                          "epsilon": 1e-10, "centered": False}


@pytest.mark.slow
@support.requires_legacy
def test_dropout_and_optimizers_are_read_on_the_legacy_interpreter():
    _check_read(_read_probe(support.legacy_python()))


@pytest.mark.slow
@support.requires_target
def test_dropout_and_optimizers_are_read_on_the_newest_tensorflow():
    _check_read(_read_probe(support.target_python()))
