"""The scores normalized by the physics estimate (``residual``) and by the backtest, through a calibration: exact rank
arithmetic, the conformal rate on a heteroscedastic model, storage, the flag from the estimates, and calibrations
written before them."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from opformer.config import config_from_dict
from opformer.data.store import DatasetInfo, write_trajectory_dataset
from opformer.data.trajectories import load_trajectories
from opformer.errors import ConfigError
from opformer.pde.darcy import solve_darcy
from opformer.pde.navier_stokes import FNO_FORCING
from opformer.train.trainer import train
from opformer.trust.bounds import Calibration, flag_estimates
from opformer.trust.calibrating import Scores, calibrate_run, select
from opformer.trust.conformal import conformal_rank
from opformer.trust.estimates import physics_settings, residual_estimates
from opformer.trust.physics import (DARCY_TOLERANCE, darcy_estimates, forecast_estimates, history_estimates,
                                    vorticity_physics)
from opformer.trust.scores import PLAIN_SCORES
from opformer.trust.storage import load_calibration, save_calibration
from tests.trust.trust_runs import operator_run, smooth_vorticity, vorticity_frames  # noqa: F401 (fixture)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DARCY = {"name": "darcy", "forcing": 1.0, "tolerance": DARCY_TOLERANCE}


def calibration_of(scores: Scores, kind: str = "trajectory") -> Calibration:
    return Calibration("run", kind, "", {}, {"": scores.group()})


def trajectories(errors: torch.Tensor, t_in: int = 3, n: int = 8) -> tuple[torch.Tensor, ...]:
    """Given frames, predictions and truth ``(sample, frames, n, 1)`` whose relative L2 errors are ``errors``
    ``(sample, frames)`` exactly (the prediction is the truth times ``1 + error``)."""
    g = torch.Generator().manual_seed(0)
    given = torch.randn(len(errors), t_in, n, 1, generator=g, dtype=torch.float64)
    truth = torch.randn(*errors.shape, n, 1, generator=g, dtype=torch.float64)
    return given, truth * (1 + errors[..., None, None]), truth


def test_the_backtest_score_keeps_the_rank_arithmetic_through_a_calibration():
    g = torch.Generator().manual_seed(1)
    n = 19
    errors = torch.rand(n, 2, generator=g, dtype=torch.float64)
    backtest = torch.rand(n, generator=g, dtype=torch.float64) + 0.5
    scores = Scores(backtest=2)
    given, preds, truth = trajectories(errors)
    scores.add(given, preds, truth, 1, backtest)
    group = scores.group()
    assert group.offered == (*PLAIN_SCORES, "backtest") and group.backtest == 2
    ratio = errors / backtest[:, None]
    torch.testing.assert_close(group.sorted_scores("backtest"), ratio.sort(dim=0).values)
    at = calibration_of(scores).at(0.9, score="backtest")
    k = conformal_rank(n, 0.9)  # ceil(20 * 0.9) = 18
    torch.testing.assert_close(at.quantile, ratio.sort(dim=0).values[k - 1])
    new = torch.tensor([0.5, 2.0], dtype=torch.float64)
    bounds = at(given[:2], preds[:2], new)
    torch.testing.assert_close(bounds.relative_l2, new[:, None] * at.quantile)
    with pytest.raises(ConfigError, match="score backtest: needs 2 given frames before the last t_in"):
        at(given[:2], preds[:2])
    joint = calibration_of(scores).at(0.9, score="backtest", joint=True)  # joint: every frame at once
    assert bool((joint(given[:2], preds[:2], new).relative_l2 >= bounds.relative_l2 - 1e-12).all())


@pytest.mark.slow
def test_normalized_bounds_through_a_calibration_cover_a_heteroscedastic_model_at_the_conformal_rate():
    g = torch.Generator().manual_seed(2)
    n, trials, coverage = 19, 600, 0.9
    covered = 0
    for _ in range(trials):
        estimate = torch.rand(n + 1, generator=g, dtype=torch.float64) * 10 + 0.1
        errors = (estimate * torch.randn(n + 1, generator=g, dtype=torch.float64).abs())[:, None]
        scores = Scores(backtest=1)
        given, preds, truth = trajectories(errors)
        scores.add(given[:n], preds[:n], truth[:n], 1, estimate[:n])
        bound = calibration_of(scores).at(coverage, score="backtest")(given[n:], preds[n:], estimate[n:])
        covered += int(errors[n, 0] <= bound.relative_l2[0, 0])
    rate, expected = covered / trials, conformal_rank(n, coverage) / (n + 1)
    assert abs(rate - expected) < 3 * (expected * (1 - expected) / trials) ** 0.5


def darcy_samples(count: int, seed: int, n: int = 17) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Coefficients ``(count, n, n, 1)``, the solver's solutions and perturbed predictions ``(count, 1, n, n, 1)``."""
    rng = np.random.default_rng(seed)
    a = np.where(rng.standard_normal((count, n, n)) > 0, 12.0, 3.0)
    u = torch.from_numpy(np.stack([solve_darcy(x, 1.0, solver="direct") for x in a]))
    x = torch.linspace(0, 1, n, dtype=torch.float64)
    bump = torch.outer(torch.sin(np.pi * x), torch.sin(np.pi * x))
    scale = torch.from_numpy(rng.uniform(0.01, 0.1, count))[:, None, None] * u.abs().max()
    pred = u + scale * bump
    return torch.from_numpy(a)[..., None], pred[:, None, ..., None], u[:, None, ..., None]


def test_the_residual_score_of_darcy_is_the_error_over_the_physics_estimate():
    a, pred, truth = darcy_samples(12, 0)
    scores = Scores(DARCY)
    scores.add(a, pred, truth, 2)
    group = scores.group()
    assert group.offered == (*PLAIN_SCORES, "residual") and group.physics == DARCY
    estimates = darcy_estimates(a[..., 0], pred[:, 0, ..., 0])
    torch.testing.assert_close(group.estimates["residual"][:, 0], estimates)
    errors = (pred - truth).flatten(1).norm(dim=1) / truth.flatten(1).norm(dim=1)
    torch.testing.assert_close(group.sorted_scores("residual")[:, 0], (errors / estimates).sort().values)
    at = calibration_of(scores, "operator").at(0.8, score="residual")  # ceil(13 * 0.8) = 11th of 12
    assert float(at.quantile[0]) == pytest.approx(float((errors / estimates).sort().values[10]))
    new_a, new_pred, _ = darcy_samples(3, 1)
    bounds = at(new_a, new_pred[:, 0])
    torch.testing.assert_close(bounds.relative_l2,
                               darcy_estimates(new_a[..., 0], new_pred[:, 0, ..., 0]) * at.quantile[0])
    record = select(scores)  # the physics estimate tracks the error here: the sharpest
    assert set(record["median_bound_over_error"]) == {"relative_l2", "roughness", "residual"}
    assert record["score"] == "residual"


def test_darcy_settings_without_a_tolerance_keep_the_one_poisson_solve_they_were_calibrated_with():
    a, pred, truth = darcy_samples(12, 0)
    one_solve = darcy_estimates(a[..., 0], pred[:, 0, ..., 0], tolerance=None)
    assert not torch.allclose(one_solve, darcy_estimates(a[..., 0], pred[:, 0, ..., 0]), rtol=1e-3)
    scores = Scores({"name": "darcy", "forcing": 1.0})  # the settings of a calibration written before the CG steps
    scores.add(a, pred, truth, 2)
    group = scores.group()
    torch.testing.assert_close(group.estimates["residual"][:, 0], one_solve)
    at = calibration_of(scores, "operator").at(0.8, score="residual")
    new_a, new_pred, _ = darcy_samples(3, 1)
    torch.testing.assert_close(at(new_a, new_pred[:, 0]).relative_l2,
                               darcy_estimates(new_a[..., 0], new_pred[:, 0, ..., 0], tolerance=None) * at.quantile[0])


def test_physics_settings_come_from_the_data_files_pde():
    def info(kind: str, pde: dict, shape=(16, 16), times=()) -> DatasetInfo:
        return DatasetInfo(Path("f.h5"), kind, 4, shape, ["w"], ["w"], True, pde, {}, {}, 0, times=times)

    assert physics_settings(info("operator", {"name": "darcy", "forcing": 1.0, "resolution": 16})) == DARCY
    ns = {"name": "navier_stokes_2d_fno", "nu": 1e-3, "forcing": FNO_FORCING, "times": [0.0, 1.0, 2.0]}
    assert physics_settings(info("trajectory", ns, times=(0.0, 1.0, 2.0)), 2) == \
        {"name": "navier_stokes_2d_fno", "nu": 1e-3, "forcing": FNO_FORCING, "spacing": 2.0}
    assert physics_settings(info("trajectory", ns, times=(0.0, 1.0, 3.0))) is None  # uneven frames
    assert physics_settings(info("trajectory", {**ns, "forcing": "other"}, times=(0.0, 1.0))) is None
    assert physics_settings(info("trajectory", {"name": "heat"}, times=(0.0, 1.0))) is None


@pytest.mark.slow
def test_a_history_at_another_viscosity_is_flagged_by_the_estimates_and_bounded_by_the_residual():
    n, h = 32, 0.5
    w0 = smooth_vorticity(48, n)
    times = np.arange(6) * h
    settings = {"name": "navier_stokes_2d_fno", "nu": 1e-3, "drag": 0.0, "length": 1.0, "forcing": FNO_FORCING,
                "spacing": h}
    calibration_frames = vorticity_frames(1e-3, w0[:40], times)
    scores = Scores(settings)
    preds = calibration_frames[:, 4:] * 1.01
    scores.add(calibration_frames[:, :4], preds, calibration_frames[:, 4:], 2)
    group = scores.group()
    assert group.offered == (*PLAIN_SCORES, "residual") and set(group.estimates) == {"residual", "history"}
    physics = vorticity_physics(settings, n, h)
    torch.testing.assert_close(group.estimates["history"],
                               history_estimates(physics, calibration_frames[:, :4, ..., 0]))
    torch.testing.assert_close(group.estimates["residual"],
                               forecast_estimates(physics, calibration_frames[:, 3, ..., 0], preds[..., 0]))
    at = calibration_of(scores).at(0.9, score="residual")
    same, shifted = vorticity_frames(1e-3, w0[40:44], times), vorticity_frames(2e-2, w0[44:48], times)
    in_distribution = at(same[:, :4], same[:, 4:] * 1.01)
    assert not in_distribution.flagged.any()
    expected = forecast_estimates(physics, same[:, 3, ..., 0], same[:, 4:, ..., 0] * 1.01) * at.quantile
    torch.testing.assert_close(in_distribution.relative_l2, expected)
    assert at(shifted[:, :4], shifted[:, 4:] * 1.01).flagged.all()
    # the estimates alone flag the shift
    residual = forecast_estimates(physics, shifted[:, 3, ..., 0], shifted[:, 4:, ..., 0] * 1.01)
    assert flag_estimates(group, residual, shifted[:, :4], 2).all()


@pytest.mark.slow
def test_a_mixture_member_of_vorticity_data_is_offered_the_residual_score(tmp_path, mixture_config, member_writer):
    times = np.arange(13) * 0.5
    domain = {"lengths": [1.0, 1.0], "periodic": [True, True], "grid": ["periodic", "periodic"]}
    ns = write_trajectory_dataset(tmp_path / "ns.h5", vorticity_frames(1e-3, smooth_vorticity(6, 16), times).numpy(),
                                  times, pde={"name": "navier_stokes_2d_fno", "nu": 1e-3, "forcing": FNO_FORCING},
                                  solver={}, domain=domain, seed=0, channels=["w"])
    config = mixture_config([ns, member_writer(tmp_path / "b.h5", n=32, channels=2, grid="cells", seed=1)])
    config["data"]["mixture"][0]["time_stride"] = 2  # 7 frames 1.0 apart, as the toy member's 7
    train(config_from_dict(config), tmp_path / "mix")
    calibration = calibrate_run(tmp_path / "mix", device="cpu")
    group = calibration.group("ns")
    assert group.offered == (*PLAIN_SCORES, "residual") and set(group.estimates) == {"residual", "history"}
    assert group.physics == {"name": "navier_stokes_2d_fno", "nu": 1e-3, "forcing": FNO_FORCING, "spacing": 1.0}
    assert calibration.group("b").offered == PLAIN_SCORES and calibration.group("b").physics is None
    test = load_trajectories(ns, "test", n_train=4, n_val=1, n_test=1, time_stride=2).fields
    bounds = calibration.bounds(test[:, :3], test[:, 3:] * 1.01, 0.5, member="ns", score="residual")
    expected = residual_estimates(group.physics, test[:, :3], test[:, 3:] * 1.01) * \
        calibration.quantiles(0.5, "ns", "residual")
    torch.testing.assert_close(bounds.relative_l2, expected)


def test_new_scores_and_estimates_are_stored_and_read_back(operator_run):
    from opformer.trust.calibrating import calibrate_run

    run, _ = operator_run
    calibration = calibrate_run(run, device="cpu")
    a, pred, truth = darcy_samples(6, 3)
    scores = Scores(DARCY)
    scores.add(a, pred, truth, 2)
    stored = replace(calibration, groups={"": scores.group({"score": "residual", "scale": "rms"})})
    save_calibration(run / "calibration.pt", stored)
    loaded = load_calibration(run).group()
    expected = stored.groups[""]
    assert (loaded.score, loaded.scale, loaded.physics, loaded.backtest) == ("residual", "rms", DARCY, 0)
    assert loaded.offered == expected.offered
    for name in ("residual",):
        torch.testing.assert_close(loaded.normalized_by[name], expected.normalized_by[name])
        torch.testing.assert_close(loaded.joint[name], expected.joint[name])
        torch.testing.assert_close(loaded.frame_scale[name], expected.frame_scale[name])
    torch.testing.assert_close(loaded.estimates["residual"], expected.estimates["residual"])


def test_a_calibration_written_before_the_new_scores_offers_the_old_ones():
    calibration = load_calibration(FIXTURES / "runs" / "calibrated_v1")
    group = calibration.group()
    assert group.offered == PLAIN_SCORES and group.physics is None and group.backtest == 0 and not group.estimates
    with pytest.raises(ConfigError, match="score='residual': expected one of relative_l2, roughness"):
        calibration.at(0.9, score="residual")
