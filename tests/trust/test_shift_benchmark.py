"""The shift benchmark's metrics (benchmarks/trust/shift.py) on a small synthetic case."""

import numpy as np
import pytest
import torch

from benchmarks.trust.shift import goal, measured, predicted, shift_metrics, wilson_interval
from opformer.data.trajectories import load_trajectories
from opformer.serve.forecaster import open_forecaster
from opformer.trust.calibration import calibrate_run
from opformer.trust.scores import relative_l2
from tests.trust.trust_runs import heat_run  # noqa: F401 (fixture)


def test_silent_failures_are_the_unflagged_units_outside_their_bound():
    # 4 samples x 2 frames: sample 0 inside, 1 outside at frame 1, 2 outside at both but flagged, 3 outside at 0
    errors = np.array([[0.1, 0.1], [0.1, 0.5], [0.9, 0.9], [0.4, 0.1]])
    bound = np.array([[0.2, 0.2], [0.2, 0.2], [0.2, np.inf], [0.3, 0.3]])
    flagged = np.array([0, 0, 1, 0])
    m = shift_metrics(errors <= bound, bound, flagged)
    assert m["samples"] == 4 and m["flagged"] == 0.25
    assert m["coverage"] == pytest.approx(5 / 8)  # (0,0) (0,1) (1,0) (2,1) (3,1)
    assert m["coverage_unflagged"] == pytest.approx(4 / 6)
    assert m["silent_failures"] == pytest.approx(2 / 8)  # (1,1) and (3,0); sample 2's failure is flagged
    assert m["mean_bound"] == pytest.approx((0.2 * 5 + 0.3 * 2) / 7)  # the infinite bound left out
    # joint: a sample is inside when it is at every frame
    joint = shift_metrics((errors <= bound).all(axis=1, keepdims=True), bound, flagged)
    assert joint["coverage"] == 0.25 and joint["silent_failures"] == 0.5 and joint["coverage_unflagged"] == 1 / 3
    everything = shift_metrics(errors <= bound, np.full_like(bound, np.inf), np.ones(4))
    assert everything["coverage_unflagged"] is None and everything["silent_failures"] == 0
    assert everything["mean_bound"] is None


def test_the_goal_allows_one_and_a_half_times_the_miscoverage_on_shifted_data():
    held = {"coverage": 0.905, "samples": 10**6}
    shifted = {"low": {"silent_failures": 0.14}, "high": {"silent_failures": 0.16}}
    g = goal(0.9, 99, held, shifted)
    assert g["silent_allowed"] == pytest.approx(0.15) and g["coverage_target"] == pytest.approx([0.9, 0.91])
    assert g["flag_rate_target"] == pytest.approx(0.01) and g["held_coverage_ok"]
    assert g["shifted_silent_ok"] == {"low": True, "high": False}
    assert not goal(0.9, 99, {"coverage": 0.92, "samples": 10**6}, {})["held_coverage_ok"]
    assert not goal(0.9, 99, {"coverage": 0.89, "samples": 10**6}, {})["held_coverage_ok"]
    # on 200 samples the measured coverage is uncertain by about 0.04: 0.92 and 0.89 are within it, 0.85 is not
    assert goal(0.9, 99, {"coverage": 0.92, "samples": 200}, {})["held_coverage_ok"]
    assert goal(0.9, 99, {"coverage": 0.89, "samples": 200}, {})["held_coverage_ok"]
    assert not goal(0.9, 99, {"coverage": 0.85, "samples": 200}, {})["held_coverage_ok"]


@pytest.mark.parametrize("inside,samples", [(45, 50), (181, 200), (3, 7)])
def test_the_wilson_interval_is_scipys(inside, samples):
    from scipy.stats import binomtest

    expected = binomtest(inside, samples).proportion_ci(method="wilson")
    assert wilson_interval(inside / samples, samples) == pytest.approx((expected.low, expected.high), rel=1e-12)
    assert wilson_interval(1.0, 20)[1] == pytest.approx(1.0) and wilson_interval(0.0, 20)[0] == pytest.approx(0.0, abs=1e-15)


def test_a_backtest_calibration_is_measured_from_the_frames_it_was_given(heat_run, monkeypatch):
    monkeypatch.setattr("benchmarks.trust.shift.COVERAGE", 0.5)  # finite bounds from 4 calibration samples
    run, heat = heat_run
    calibrate_run(run, device="cpu", backtest=2)
    forecaster = open_forecaster(run, "cpu", calibrated=True)
    given, preds, errors = predicted(forecaster, str(heat), 5, batch=3)
    fields = load_trajectories(heat, "all", n_train=4, n_val=2, n_test=4).fields
    torch.testing.assert_close(given, fields[:, :5])  # 2 frames for the backtest, then the context of 3
    torch.testing.assert_close(preds, forecaster.rollout(fields[:, 2:5], 5))
    truth = fields[:, 5:10]
    torch.testing.assert_close(errors, relative_l2(preds.flatten(0, 1), truth.flatten(0, 1)).reshape(-1, 5).double())
    bound = forecaster.bounds(given, preds, 0.5, score="backtest").relative_l2.double()
    assert torch.isfinite(bound).all()
    m = measured(forecaster, None, given, preds, errors, "backtest")["per_frame"]
    assert m["coverage"] == pytest.approx((errors <= bound).double().mean().item())
    assert m["mean_bound"] == pytest.approx(bound.mean().item())


def test_the_selection_check_keeps_a_physics_choice_and_applies_the_rule_to_the_others():
    from benchmarks.trust.selection import selection

    def per_frame(bound, silent):
        return {"per_frame": {"mean_bound": bound, "silent_failures": silent, "coverage": 1 - silent}}

    held, shifted = "held-out (calibration's physics)", "Re 2500"
    case = {"calibration_score": "relative_l2",
            "scores": {"relative_l2": {held: per_frame(0.66, 0.08), shifted: per_frame(0.66, 0.27)},
                       "roughness": {held: per_frame(0.63, 0.12), shifted: per_frame(0.69, 0.13)},
                       "residual": {held: per_frame(0.68, 0.10), shifted: per_frame(0.70, 0.04)}}}
    physics = {**case, "calibration_score": "residual"}
    found = selection({"coverage": 0.9, "cases": {"a": case, "b": physics}})["cases"]
    assert found["a"]["after"] == "residual"  # 0.68 <= 1.1 x 0.63
    assert found["a"]["files"][shifted]["before"]["per_frame"]["silent_failures"] == 0.27
    assert found["a"]["files"][shifted]["after"]["per_frame"]["silent_failures"] == 0.04
    assert found["b"]["after"] == "residual" and found["b"]["how"].startswith("the earlier choice")
    case["scores"]["residual"][held] = per_frame(0.70, 0.10)  # 0.70 > 1.1 x 0.63: the earlier rule
    assert selection({"coverage": 0.9, "cases": {"a": case}})["cases"]["a"]["after"] == "relative_l2"
