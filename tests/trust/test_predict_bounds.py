"""Bounds with every prediction: ``opformer predict --coverage`` (HDF5 and .npz outputs) and
``opformer.load_surrogate(...).bounds``."""

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

import opformer
from opformer.data.pairs import load_split
from opformer.data.trajectories import load_trajectories
from opformer.errors import CheckpointError
from opformer.trust.calibration import calibrate_run, load_calibration
from tests.trust.trust_runs import heat_run, operator_run  # noqa: F401 (fixtures)
from tests.cli.test_cli import one_line_error, run_cli


@pytest.mark.slow
def test_predict_writes_bounds_beside_the_predictions(capsys, operator_run, tmp_path):
    run, data = operator_run
    (run / "calibration.pt").unlink(missing_ok=True)
    one_line_error(*run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "p.h5", "--coverage",
                            0.9)[::2], "not calibrated")
    assert not (tmp_path / "p.h5").exists()
    calibrate_run(run, device="cpu")
    one_line_error(*run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "p.npy", "--coverage",
                            0.9)[::2], "a .npy file holds the predictions only")
    code, out, _ = run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "p.h5", "--coverage", 0.9)
    assert code == 0 and "with error bounds at coverage 0.9" in out
    calibration = load_calibration(run)
    with h5py.File(tmp_path / "p.h5") as f:
        preds, bound, half, flagged = (f[k][:] for k in ("target", "bound_relative_l2", "band_half_width", "flagged"))
    assert bound.shape == (40,) and half.shape == preds.shape == (40, 64, 1) and flagged.shape == (40,)
    assert np.allclose(bound, float(calibration.quantiles(0.9)[0])) and (half > 0).all()
    assert not flagged[20:].any() and flagged[:20].sum() <= 2  # the calibration inputs, then train and val ones
    code, _, _ = run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "p.npz", "--coverage", 0.8)
    with np.load(tmp_path / "p.npz") as z:
        assert sorted(z.files) == ["band_half_width", "bound_relative_l2", "flagged", "truth", "x", "y"]
        with h5py.File(data) as f:  # the input file's true targets, kept beside the predictions
            np.testing.assert_array_equal(z["truth"], f["target"][:])
        assert np.allclose(z["bound_relative_l2"], float(calibration.quantiles(0.8)[0]))


def test_a_forecast_has_bounds_per_frame_from_the_cli_and_from_python(capsys, heat_run, tmp_path):
    run, data = heat_run
    calibration = calibrate_run(run, device="cpu")
    code, _, _ = run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "f.npz", "--coverage", 0.75,
                         "--frames", 6, "--start", 0)
    assert code == 0
    with np.load(tmp_path / "f.npz") as z:
        bound, half, fields = z["bound_relative_l2"], z["band_half_width"], z["fields"]
    assert bound.shape == (10, 6) and half.shape == fields.shape == (10, 6, 16, 16, 1)
    assert np.allclose(bound[:, :5], calibration.quantiles(0.75).numpy()) and np.isinf(bound[:, 5]).all()
    forecaster = opformer.load_surrogate(run, device="cpu")
    frames = load_trajectories(data, "test", n_train=4, n_val=2, n_test=4).fields
    forecast = forecaster.rollout(frames[:, :3], 5)
    bounds = forecaster.bounds(frames[:, :3], forecast, 0.75)
    assert torch.allclose(bounds.relative_l2[0], calibration.quantiles(0.75)) and not bounds.flagged.any()
    # the calibration's own trajectories: each frame's bound holds for the samples it was calibrated on at rank n
    truth = frames[:, 3:8]
    errors = ((forecast - truth).flatten(2).norm(dim=2) / truth.flatten(2).norm(dim=2)).double()
    assert bool((errors <= bounds.relative_l2 + 1e-6).all())
    # --joint: bounds for all frames at once, at least the per-frame ones; at rank n they hold for every frame of
    # every calibration trajectory; --tolerance uses them; --joint without --coverage is one line
    joint = calibration.joint_quantiles(0.75)
    assert bool((joint >= calibration.quantiles(0.75)).all())
    assert torch.allclose(forecaster.bounds(frames[:, :3], forecast, 0.75, joint=True).relative_l2[0], joint)
    assert bool((errors <= joint + 1e-6).all())
    code, _, _ = run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "j.npz", "--coverage", 0.75,
                         "--frames", 6, "--joint", "--start", 0)
    assert code == 0
    with np.load(tmp_path / "j.npz") as z:
        bound = z["bound_relative_l2"]
        assert np.allclose(bound[:, :5], joint.numpy()) and np.isinf(bound[:, 5]).all()
    code, _, _ = run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "t.npz", "--coverage", 0.75,
                         "--frames", 5, "--tolerance", 1e9, "--start", 0)
    assert code == 0
    with np.load(tmp_path / "t.npz") as z:
        assert np.allclose(z["bound_relative_l2"], joint.numpy())
        np.testing.assert_array_equal(z["to_solver"], z["flagged"])  # a tolerance above every bound: flagged only
    one_line_error(*run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "n.npz", "--joint")[::2],
                   "--joint: bounds at a coverage")
    (run / "calibration.pt").unlink()
    with pytest.raises(CheckpointError, match="no calibration loaded"):
        opformer.load_surrogate(run, device="cpu").bounds(frames[:, :3], forecast, 0.75)


@pytest.mark.slow
def test_plot_draws_the_band_of_1d_predictions_and_the_bound_of_rollouts(capsys, operator_run, heat_run, tmp_path,
                                                                          monkeypatch):
    from opformer.eval import plots

    figures = {}

    def keep(fig, out, suptitle=""):  # the figures as drawn, before they are saved and closed
        figures[Path(out).name] = fig
        return Path(out)

    monkeypatch.setattr(plots, "_save", keep)
    run, _ = operator_run
    one_line_error(*run_cli(capsys, "plot", run, "--out", tmp_path / "a", "--coverage", 0.9)[::2], "not calibrated")
    calibration = calibrate_run(run, device="cpu")
    assert run_cli(capsys, "plot", run, "--out", tmp_path / "a", "--coverage", 0.9, "--samples", 2)[0] == 0
    axes = figures["predictions.png"].axes
    surrogate = opformer.load_surrogate(run, device="cpu")
    test = load_split(run.parent / "toy.h5", "test", resolution=32, n_train=16, n_val=4, n_test=2)  # plot's grid
    prediction = surrogate.predict(test.inputs)
    band = calibration.bounds(test.inputs, prediction, 0.9)
    (shade,) = axes[0].collections  # sample 0: the band around the prediction, from lower to upper
    ys = shade.get_paths()[0].vertices[:, 1]
    assert np.isclose(ys.min(), float(band.lower[0].min()), rtol=1e-5)
    assert np.isclose(ys.max(), float(band.upper[0].max()), rtol=1e-5)
    assert len(axes[1].collections) == 1  # the band around the error
    run, _ = heat_run
    calibration = calibrate_run(run, device="cpu")
    assert run_cli(capsys, "plot", run, "--out", tmp_path / "b", "--coverage", 0.75)[0] == 0
    lines = {line.get_label(): line for line in figures["rollout_errors.png"].axes[0].lines}
    assert np.allclose(lines["bound at coverage 0.75"].get_ydata(), calibration.quantiles(0.75).numpy())


def test_a_backtest_calibration_bounds_each_forecast_by_its_own_earlier_error(heat_run, tmp_path, capsys):
    from opformer.trust.scores import relative_l2

    run, heat = heat_run
    calibration = calibrate_run(run, device="cpu", backtest=2)
    group = calibration.group()
    assert group.backtest == 2 and "backtest" in group.offered and calibration.source["start"] == 0
    forecaster = opformer.load_surrogate(run, device="cpu")
    fields = load_trajectories(heat, "all", n_train=4, n_val=2, n_test=4).fields
    given = fields[:, :5]  # 2 frames for the backtest, then the context
    forecast = forecaster.rollout(given, 5)
    torch.testing.assert_close(forecast, forecaster.rollout(given[:, 2:], 5))
    bounds = forecaster.bounds(given, forecast, 0.9, score="backtest")
    observed = relative_l2(forecaster.rollout(given[:, :3], 2).flatten(1, 2), given[:, 3:5].flatten(1, 2))
    at = calibration.at(0.9, score="backtest")
    torch.testing.assert_close(bounds.relative_l2, observed[:, None] * at.quantile)
    # the statistics and estimates see the context only, as the rollout does
    roughness_bounds = forecaster.bounds(given, forecast, 0.9, score="roughness")
    context_only = calibration.at(0.9, score="roughness")(given[:, 2:], forecast)
    torch.testing.assert_close(roughness_bounds.relative_l2, context_only.relative_l2)
    assert torch.equal(forecaster.bounds(fields, forecast, 0.9, score="roughness").flagged,
                       calibration.at(0.9, score="roughness")(fields[:, -3:], forecast).flagged)
    # predict from the calibration's frames gives each input the backtest's and writes the backtest's bounds
    code, _, _ = run_cli(capsys, "predict", run, "--input", heat, "--output", tmp_path / "f.npz", "--frames", 5,
                         "--coverage", 0.9, "--score", "backtest", "--start", 0)
    assert code == 0
    with np.load(tmp_path / "f.npz") as z:
        np.testing.assert_allclose(z["fields"], forecast.numpy())
        np.testing.assert_allclose(z["bound_relative_l2"], bounds.relative_l2.numpy(), rtol=1e-6)
    one_line_error(*run_cli(capsys, "predict", run, "--input", heat, "--output", tmp_path / "g.npz",
                            "--coverage", 0.9, "--score", "sharpest")[::2],
                   "--score sharpest: expected one of relative_l2, roughness, backtest")
    one_line_error(*run_cli(capsys, "predict", run, "--input", heat, "--output", tmp_path / "g.npz",
                            "--score", "backtest")[::2], "--score backtest: the score of the bounds; give --coverage")
    one_line_error(*run_cli(capsys, "calibrate", run, "--start", 7, "--backtest", 2)[::2],
                   "--start 7 --backtest 2: 9 frames before the 3 of the context and 5 to forecast are 17; ",
                   "has 12 per trajectory")
