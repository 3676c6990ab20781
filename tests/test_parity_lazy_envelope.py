"""envelope="when-needed": the nudged legacy run only when the verdict may depend on it.

Without TensorFlow (fake interpreters whose sides report what the test says): a migration that
agrees within the tight tolerance gets parity with no envelope run, as it does with one; one
that agrees only within the program's own noise, one beyond it, one that the fixed schedule
passes but the envelope's tight floor does not, and one whose envelope run crashes all get the
envelope run and exactly the result ``envelope=True`` gives. A generated test checks the rule
itself on ``compare``: whenever it says the envelope cannot change the verdict, the comparison
with any nudged run passes. The slow test runs the canonical fixture both ways in TensorFlow."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator2keras.parity import Tolerance, run_parity, run_parity_many
from estimator2keras.parity._compare import compare, side_info
from estimator2keras.parity._runner import WHEN_NEEDED, ParityUsageError, envelope_cannot_change_verdict
from parity_programs import support

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "seed_mirrored_linear"
TOL = Tolerance()

# A side that reports what $FAKE_SPEC (a JSON file) says for its kind: "legacy", "envelope"
# (the legacy program with a "perturb" request) or "migrated".
FAKE_SIDE = """#!{python}
import json, os, sys
import numpy as np
request = json.load(open(sys.argv[2]))
legacy = sys.argv[1].endswith("_legacy_side.py")
kind = "envelope" if "perturb" in request else ("legacy" if legacy else "migrated")
spec = json.load(open(os.environ["FAKE_SPEC"]))[kind]
with open(os.path.join(os.environ["FAKE_LOG"], kind), "a") as log:
    log.write("ran\\n")
if spec.get("crash"):
    json.dump({{"status": "crashed", "error": {{"type": "ValueError", "message": "boom"}}}},
              open(os.path.join(request["out_dir"], "result.json"), "w"))
    sys.exit(2)
np.savez(os.path.join(request["out_dir"], "weights.npz"), initial_0=np.zeros(2), final_0=np.array(spec["final"]))
json.dump({{"status": "ok", "losses": spec["losses"], "replicas": 2, "loss_reduction": "mean",
           "training_calls": 1, "variables": [{{"name": "w", "shape": [2], "trainable": True}}],
           "evaluations": spec.get("evaluations", []), "perturbation": request.get("perturb")}},
          open(os.path.join(request["out_dir"], "result.json"), "w"))
"""

LEGACY = [2.0, 1.9, 1.8, 1.7, 1.6]
NUDGED = [2.0, 1.9, 1.8, 1.7 + 1e-3, 1.6 + 1e-3]  # the program's noise: 1e-3 from step 4


def _spec(migrated, *, legacy=LEGACY, nudged=NUDGED, final=(1.0, 1.0), envelope_crash=False,
          evaluations=None, migrated_evaluations=None):
    evaluation = [evaluations] if evaluations else []
    return {
        "legacy": {"losses": list(legacy), "final": [1.0, 1.0], "evaluations": evaluation},
        "envelope": {"losses": list(nudged), "final": [1.0, 1.0], "evaluations": evaluation,
                     "crash": envelope_crash},
        "migrated": {"losses": list(migrated), "final": list(final),
                     "evaluations": [migrated_evaluations] if migrated_evaluations else evaluation},
    }


@pytest.fixture()
def fake(tmp_path, monkeypatch):
    python = tmp_path / "python"
    python.write_text(FAKE_SIDE.format(python=sys.executable))
    python.chmod(0o755)
    log = tmp_path / "log"
    log.mkdir()
    monkeypatch.setenv("FAKE_LOG", str(log))

    def run(spec, envelope, **kwargs):
        for ran in log.iterdir():
            ran.unlink()
        path = tmp_path / "spec.json"
        path.write_text(json.dumps(spec))
        monkeypatch.setenv("FAKE_SPEC", str(path))
        result = run_parity(FIXTURE / "before.py", FIXTURE / "after.py", legacy_python=str(python),
                            target_python=str(python), seed=7, envelope=envelope, **kwargs)
        runs = {ran.name: len(ran.read_text().splitlines()) for ran in log.iterdir()}
        return result, runs

    return run


def _same(eager, lazy):
    """Everything but the runs' timings and interpreters' paths is the same."""
    def strip(result):
        data = result.to_dict()
        for side in ("legacy", "migrated"):
            data[side]["seconds"] = None
        return data

    assert strip(lazy) == strip(eager)


def test_a_migration_within_the_tight_tolerance_needs_no_envelope_run(fake):
    spec = _spec([2.0, 1.9, 1.8, 1.7 + 1e-6, 1.6])
    eager, eager_runs = fake(spec, True)
    lazy, lazy_runs = fake(spec, WHEN_NEEDED)
    assert eager_runs == {"legacy": 1, "envelope": 1, "migrated": 1}
    assert lazy_runs == {"legacy": 1, "migrated": 1}  # the nudged legacy run did not happen
    assert eager.verdict == lazy.verdict == "parity"
    assert eager.envelope["measured"] and not lazy.envelope["measured"]
    assert lazy.envelope["reason"].startswith("not needed (envelope='when-needed')")
    assert lazy.settings["envelope"].startswith("not run: not needed")
    assert any(note.startswith("no noise envelope: not needed") for note in lazy.notes)
    assert "noise envelope: not measured (not needed" in lazy.report()
    assert [row.passed for row in lazy.steps] == [row.passed for row in eager.steps]


@pytest.mark.parametrize("what, spec, verdict", [
    # agrees only within k x the program's own noise: the envelope is what passes it
    ("within the noise", _spec([2.0, 1.9, 1.8, 1.7 + 3e-3, 1.6]), "parity"),
    # beyond it
    ("beyond the noise", _spec([2.0, 1.9, 1.8, 1.7 + 5e-3, 1.6]), "broken"),
    # a quiet program: 1 % at step 12 is within the fixed schedule's 5 %, not within the tight
    # floor and k x an envelope of 1e-9
    ("quiet program", _spec([1.0] * 11 + [1.01], legacy=[1.0] * 12, nudged=[1.0 + 1e-9] * 12), "broken"),
    # an eval metric 3e-5 apart: beyond the fixed tolerance after 5 steps (1e-5 + 1e-6 * 0.5),
    # within the envelope's (1e-5 + METRIC_RTOL * 0.5)
    ("metric within METRIC_RTOL", _spec(LEGACY, evaluations={"accuracy": 0.5},
                                        migrated_evaluations={"accuracy": 0.5 + 3e-5}), "parity"),
    # and the other way round: 1e-3 relative is beyond METRIC_RTOL once there is an envelope
    ("metric beyond METRIC_RTOL", _spec([1.0] * 12, legacy=[1.0] * 12, nudged=[1.0] * 12,
                                        evaluations={"accuracy": 0.5},
                                        migrated_evaluations={"accuracy": 0.5005}), "broken"),
    # a final weight beyond the fixed tolerance: only its envelope (0 here) could widen it
    ("weight", _spec(LEGACY, final=(1.0, 1.001)), "broken"),
    # the envelope run crashes: the fixed schedule judges, and says why
    ("envelope crashed", _spec([2.0, 1.9, 1.8, 1.7 + 3e-3, 1.6], envelope_crash=True), "broken"),
    # within the tight floor (METRIC_RTOL) but not the fixed tolerance, and the envelope run crashes
    ("metric within METRIC_RTOL, envelope crashed", _spec(LEGACY, evaluations={"accuracy": 0.5},
                                                          migrated_evaluations={"accuracy": 0.5 + 3e-5},
                                                          envelope_crash=True), "broken"),
    # the envelope run trains another number of steps: not used, and said so
    ("envelope of another length", _spec([1.0] * 11 + [1.02], legacy=[1.0] * 12, nudged=[1.0] * 11), "parity"),
])
def test_when_the_verdict_may_depend_on_it_the_envelope_runs_and_the_result_is_the_eager_one(fake, what, spec, verdict):
    eager, eager_runs = fake(spec, True)
    lazy, lazy_runs = fake(spec, WHEN_NEEDED)
    assert eager.verdict == verdict, eager.report()
    assert lazy_runs == eager_runs == {"legacy": 1, "envelope": 1, "migrated": 1}
    _same(eager, lazy)


def test_several_migrations_share_one_envelope_run_when_one_needs_it(fake, tmp_path):
    spec = _spec([2.0, 1.9, 1.8, 1.7 + 3e-3, 1.6])
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    eager, _ = fake(spec, True)
    for ran in (tmp_path / "log").iterdir():
        ran.unlink()
    # the same migration twice through run_parity_many: one legacy run, one envelope run
    python = str(tmp_path / "python")
    both = run_parity_many(FIXTURE / "before.py", [FIXTURE / "after.py", (FIXTURE / "after.py", python)],
                           legacy_python=python, target_python=python, seed=7, envelope=WHEN_NEEDED)
    ran = {p.name: len(p.read_text().splitlines()) for p in (tmp_path / "log").iterdir()}
    assert ran == {"legacy": 1, "envelope": 1, "migrated": 2}
    for result in both:
        _same(eager, result)


def test_the_envelope_option_is_checked():
    with pytest.raises(ParityUsageError, match="when-needed"):
        run_parity(FIXTURE / "before.py", FIXTURE / "after.py", envelope="lazy")


# --- the rule itself, on compare ---------------------------------------------------------------

def _side(losses, final, evaluation, trainable):
    return {"status": "ok", "losses": list(losses), "replicas": 2, "strategy": "MirroredStrategy",
            "loss_reduction": "mean", "training_calls": 1,
            "variables": [{"name": "w", "shape": [2], "trainable": True},
                          {"name": "moving_mean", "shape": [2], "trainable": trainable}],
            "evaluations": [evaluation] if evaluation else []}, {
        "initial_0": np.zeros(2), "final_0": np.asarray(final[0]),
        "initial_1": np.zeros(2), "final_1": np.asarray(final[1])}


_SCALES = [0.0, 1e-9, 1e-7, 1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 1e-3, 1e-2, 0.1]


@st.composite
def _runs(draw):
    """A legacy run, a migration and a nudged run: each of the migration's and the nudged run's
    quantities (losses, final weights, metrics) off by its own scales (0 to 10 %, one up to some
    step or element, another after it), a random fraction of it for each; sometimes a NaN or infinite legacy loss, fewer migrated or nudged
    steps, metrics only one side reports, non-trainable state (a known evaluation difference)."""
    n = draw(st.integers(1, 14))
    legacy = [draw(st.sampled_from([0.5, 1.0, 2.0, 100.0])) for _ in range(n)]
    if not draw(st.integers(0, 19)):
        legacy[draw(st.integers(0, n - 1))] = draw(st.sampled_from([math.nan, math.inf]))

    def near(values):
        # a scale up to some step (small, mostly: tight tolerances pass), another from it on
        split = draw(st.integers(0, len(values)))
        early, late = draw(st.sampled_from(_SCALES[:6])), draw(st.sampled_from(_SCALES))
        return [v + (early if i < split else late) * draw(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]))
                for i, v in enumerate(values)]

    def shorter(values):
        return values if draw(st.integers(0, 9)) else values[:draw(st.integers(0, n))]

    final = [[1.0, 0.5], [0.1, 0.2]]
    evaluation = {"loss": 0.7, "accuracy": 0.5} if draw(st.booleans()) else None

    def moved(weights):
        return [near(row) for row in weights]

    def evaluated(evaluation):
        if evaluation is None:
            return None
        names = [k for k in evaluation if draw(st.integers(0, 5))]
        return dict(zip(names, near([evaluation[k] for k in names])))

    trainable = draw(st.booleans())
    return (_side(legacy, final, evaluation, trainable),
            _side(shorter(near(legacy)), moved(final), evaluated(evaluation), trainable),
            _side(shorter(near(legacy)), moved(final), evaluated(evaluation), trainable))


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_runs())
def test_when_the_rule_skips_the_envelope_every_envelope_gives_parity(runs):
    (legacy, legacy_weights), (migrated, migrated_weights), (nudged, nudged_weights) = runs

    def judge(nudged_side=None, nudged_final=None):
        return compare(legacy, migrated, legacy_weights, migrated_weights, TOL,
                       legacy_info=side_info(legacy, "l.py", "python", 1.0),
                       migrated_info=side_info(migrated, "m.py", "python", 1.0), settings={"replicas": 2},
                       nudged=nudged_side, nudged_weights=nudged_final)

    fixed, floor = judge(), judge(legacy, legacy_weights)
    with_envelope = judge(nudged, nudged_weights)
    failed_envelope = judge()  # what a crashed envelope run leaves: the fixed schedule
    if envelope_cannot_change_verdict(fixed, floor):
        assert with_envelope.passed, with_envelope.report()
        assert failed_envelope.passed


# --- in TensorFlow (slow) ----------------------------------------------------------------------

@pytest.mark.slow
@support.requires_legacy
def test_the_canonical_fixture_gets_the_same_verdict_without_its_envelope_run(tmp_path):
    kwargs = dict(steps=3, legacy_python=support.legacy_python())
    eager = run_parity(FIXTURE / "before.py", FIXTURE / "after.py", workdir=tmp_path / "eager", **kwargs)
    lazy = run_parity(FIXTURE / "before.py", FIXTURE / "after.py", workdir=tmp_path / "lazy",
                      envelope=WHEN_NEEDED, **kwargs)
    assert eager.verdict == lazy.verdict == "parity", lazy.report()
    assert (tmp_path / "eager" / "envelope" / "result.json").is_file()
    assert not (tmp_path / "lazy" / "envelope").exists()
    assert [row.migrated_loss for row in lazy.steps] == [row.migrated_loss for row in eager.steps]
    assert [row.max_abs_diff for row in lazy.weights] == [row.max_abs_diff for row in eager.weights]
