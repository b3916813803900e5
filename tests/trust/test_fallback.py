"""The solver where the bound fails: ``opformer predict --tolerance`` splits samples by their bound, merges the
solver's answers into the output, lists the samples of data it cannot solve, and reports."""

import json

import h5py
import numpy as np
import pytest
import torch

import opformer
from opformer.config import config_from_dict
from opformer.data.generate import generate_file
from opformer.data.store import read_arrays, read_fields, read_info, write_operator_dataset
from opformer.pde.resolve import resolve_operator, resolve_trajectory
from opformer.train.trainer import train
from opformer.trust.calibration import calibrate_run, load_calibration
from opformer.serve.fallback import REPORT_SUFFIX, predict_with_fallback, to_solver
from opformer.trust.physics import forecast_estimates, vorticity_physics
from tests.cli.test_cli import one_line_error, run_cli


def test_samples_go_to_the_solver_when_a_bound_exceeds_the_tolerance_or_is_not_guaranteed():
    bounds = np.array([[0.005, 0.02], [0.001, 0.002], [0.003, 0.004], [np.inf, 0.0], [0.01, 0.01]])
    flagged = np.array([0, 0, 1, 0, 0], dtype=np.uint8)
    assert to_solver(bounds, flagged, 0.01).tolist() == [True, False, True, True, False]  # 0.01 is not over 0.01
    assert to_solver(bounds[:, 0], flagged, 0.004).tolist() == [True, False, True, True, True]
    assert to_solver(np.zeros((0,)), np.zeros(0), 0.01).shape == (0,)


@pytest.fixture
def burgers_run(tmp_path, tiny_config):
    """A tiny Galerkin Transformer on generated Burgers data at n = 32 (16 train, 4 val, 20 test), calibrated."""
    data = generate_file("burgers", tmp_path / "burgers.h5", 40, resolution=32)
    config = tiny_config(data, epochs=2)
    config["data"].update(n_train=16, n_val=4, n_test=20)
    train(config_from_dict(config), tmp_path / "run")
    calibrate_run(tmp_path / "run", device="cpu")
    return tmp_path / "run", data


@pytest.mark.slow
def test_the_solver_answers_the_samples_over_the_tolerance_and_the_surrogate_the_rest(capsys, burgers_run, tmp_path):
    run, data = burgers_run
    info = read_info(data)
    x, y = read_arrays(data, slice(20, 30))  # calibration samples, then the same inputs far out of range
    x = np.concatenate([x, 4 * x])
    y = np.concatenate([y, resolve_operator(info.pde, info.solver, x[10:])])
    new = write_operator_dataset(tmp_path / "new.h5", x, y, pde=info.pde, solver=info.solver, domain=info.domain,
                                 seed=0, input_channels=info.input_channels, target_channels=info.target_channels)
    # no bound exceeds 1e3: the samples flagged as unlike the calibration data go to the solver, the others not
    code, out, _ = run_cli(capsys, "predict", run, "--input", new, "--output", tmp_path / "p.h5", "--tolerance", 1e3)
    with h5py.File(tmp_path / "p.h5") as f:
        merged, chosen, flagged = f["target"][:], f["to_solver"][:].astype(bool), f["flagged"][:].astype(bool)
    sent = int(chosen.sum())
    assert code == 0 and f"{sent} of 20 samples ({sent / 20:.1%}) over the tolerance, {sent} of them flagged" in out
    assert (chosen == flagged).all() and not chosen[:10].any() and chosen[10:].any()
    surrogate = opformer.load_surrogate(run, device="cpu").predict(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(merged[chosen], y[chosen])  # the solver's answers, bit for bit
    np.testing.assert_allclose(merged[~chosen], surrogate[~chosen], atol=1e-6)
    report = json.loads((tmp_path / ("p.h5" + REPORT_SUFFIX)).read_text())
    assert report["to_solver"] == sent and report["indices"] == np.flatnonzero(chosen).tolist() and report["solved"]
    # the 20 samples are one chunk: solving it whole for timing measures solving every sample
    assert report["all_solver_measured"] and report["timed_batch"] == 0 and report["true_errors_known"]
    assert report["all_solver_seconds"] > 0 and "(measured); speed-up" in out
    errors = np.linalg.norm((surrogate - y).reshape(20, -1), axis=1) / np.linalg.norm(y.reshape(20, -1), axis=1)
    assert report["max_true_error"] == pytest.approx(errors[~chosen].max(), rel=1e-5)
    # a tolerance below every bound: everything solved, the time of solving everything measured
    code, out, _ = run_cli(capsys, "predict", run, "--input", new, "--output", tmp_path / "q.npz", "--tolerance", 1e-9)
    report = json.loads((tmp_path / ("q.npz" + REPORT_SUFFIX)).read_text())
    assert report["to_solver"] == 20 and report["all_solver_measured"] and report["max_true_error"] is None
    with np.load(tmp_path / "q.npz") as z:
        np.testing.assert_array_equal(z["y"], y)


class Clock:
    """A fake ``time`` for the fallback: each reading advances 1 ms, each solve 1 s whatever its number of samples
    (a batch solver's time, far from its size times one sample's)."""

    def __init__(self, monkeypatch):
        import opformer.serve.fallback as fallback
        self.now, self.sizes, solve = 0.0, [], fallback.solve_samples
        monkeypatch.setattr(fallback, "time", self)

        def timed_solve(inputs, given, frames):
            self.now += 1.0
            self.sizes.append(len(given))
            return solve(inputs, given, frames)

        monkeypatch.setattr(fallback, "solve_samples", timed_solve)

    def perf_counter(self) -> float:
        self.now += 1e-3
        return self.now


@pytest.mark.slow
def test_solving_every_sample_is_timed_on_a_whole_chunk_never_from_one_sample(capsys, monkeypatch, burgers_run,
                                                                              tmp_path):
    run, data = burgers_run
    info = read_info(data)
    x, y = read_arrays(data, slice(20, 30))  # calibration samples: none flagged, none over a tolerance of 1e3

    def fallback(x, y, name):
        new = write_operator_dataset(tmp_path / f"{name}.h5", x, y, pde=info.pde, solver=info.solver,
                                     domain=info.domain, seed=0, input_channels=info.input_channels,
                                     target_channels=info.target_channels)
        code, out, _ = run_cli(capsys, "predict", run, "--input", new, "--output", tmp_path / f"{name}_p.h5",
                               "--tolerance", 1e3)
        assert code == 0, _
        return json.loads((tmp_path / f"{name}_p.h5{REPORT_SUFFIX}").read_text()), out

    clock = Clock(monkeypatch)
    monkeypatch.setattr("opformer.serve.predict.CHUNK_BYTES", 4 * 4 * (32 + 32))  # 4 samples of 32 in, 32 out
    # 10 samples in chunks of 4, none sent to the solver: the first chunk is solved whole, once, for timing;
    # solving all 10 is its 1 s times 10 / 4 (one sample's time times 10 would say 10 s)
    report, out = fallback(x, y, "none")
    assert report["to_solver"] == 0 and clock.sizes == [4] and report["solver_seconds"] == 0
    assert report["all_solver_seconds"] == pytest.approx(2.5, abs=0.01) and not report["all_solver_measured"]
    assert report["timed_batch"] == 4 and report["timed_batch_seconds"] == pytest.approx(1.0, abs=0.01)
    assert ("solving every sample: 2.5 s (estimated from one chunk of 4 samples solved whole in 1 s); speed-up "
            f"{2.5 / report['seconds']:.3g}x") in out
    # the first chunk far out of range goes to the solver whole: that solve is the timing, nothing is solved twice
    x[:4] = 4 * x[:4] + 1
    y[:4] = resolve_operator(info.pde, info.solver, x[:4])
    clock.sizes.clear()
    report, out = fallback(x, y, "first")
    assert report["indices"] == [0, 1, 2, 3] and clock.sizes == [4] and report["timed_batch"] == 4
    assert report["all_solver_seconds"] == pytest.approx(2.5, abs=0.01) and not report["all_solver_measured"]
    # every sample in one chunk: solving it whole for timing measures solving every sample
    clock.sizes.clear()
    report, out = fallback(x[4:8], y[4:8], "one")
    assert clock.sizes == [4] and report["all_solver_measured"] and report["timed_batch"] == 0
    assert report["all_solver_seconds"] == pytest.approx(1.0, abs=0.01) and "1 s (measured); speed-up" in out


@pytest.mark.slow
def test_the_fallback_bounds_by_the_score_asked_for(burgers_run, tmp_path, capsys):
    run, data = burgers_run
    x = torch.from_numpy(read_arrays(data, slice(None))[0])
    calibration = load_calibration(run)
    preds = opformer.load_surrogate(run, device="cpu").predict(x)
    expected = {score: calibration.bounds(x, preds, 0.9, score=score) for score in ("relative_l2", "roughness")}
    tolerance = float(expected["roughness"].relative_l2.median())  # splits the inputs by their roughness
    for score, bounds in expected.items():
        report = predict_with_fallback(run, data, tmp_path / f"{score}.h5", tolerance, device="cpu", score=score)
        # the command line takes the same score: the same bounds and the same samples to the solver
        code, _, _ = run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / f"{score}_cli.h5",
                             "--tolerance", tolerance, "--score", score, "--device", "cpu")
        assert code == 0
        with h5py.File(tmp_path / f"{score}.h5") as f, h5py.File(tmp_path / f"{score}_cli.h5") as g:
            for key in ("bound_relative_l2", "flagged", "to_solver"):
                np.testing.assert_array_equal(f[key][:], g[key][:])
        with h5py.File(tmp_path / f"{score}.h5") as f:
            bound, flagged, chosen = f["bound_relative_l2"][:], f["flagged"][:], f["to_solver"][:].astype(bool)
        np.testing.assert_allclose(bound.reshape(-1), bounds.relative_l2.reshape(-1).numpy(), rtol=1e-5)
        assert (chosen == to_solver(bound, flagged, tolerance)).all() and report.to_solver == chosen.sum()
    assert len(np.unique(expected["relative_l2"].relative_l2)) == 1  # the plain score: one bound for every input
    assert 0 < report.to_solver < len(x)  # the roughness score's per-input bounds: some over the tolerance, some not


@pytest.mark.slow
def test_data_no_solver_made_get_the_indices_to_solve(capsys, burgers_run, tmp_path):
    run, data = burgers_run
    x, _ = read_arrays(data, slice(20, 30))
    np.savez(tmp_path / "x.npz", x=np.concatenate([x, 4 * x]))
    code, out, _ = run_cli(capsys, "predict", run, "--input", tmp_path / "x.npz", "--output", tmp_path / "p.npz",
                           "--tolerance", 1e3)
    assert code == 0 and "not solved (an array records no PDE)" in out
    report = json.loads((tmp_path / ("p.npz" + REPORT_SUFFIX)).read_text())
    surrogate = opformer.load_surrogate(run, device="cpu").predict(torch.from_numpy(4 * x)).numpy()
    with np.load(tmp_path / "p.npz") as z:
        chosen = z["to_solver"].astype(bool)
        assert (chosen == z["flagged"].astype(bool)).all() and chosen[10:].any() and not chosen[:10].any()
        np.testing.assert_allclose(z["y"][10:], surrogate, atol=1e-6)  # left to the user's solver
    assert report["indices"] == np.flatnonzero(chosen).tolist() and not report["solved"]
    assert report["solver_seconds"] == 0 and report["all_solver_seconds"] is None


@pytest.mark.slow
def test_tolerance_errors_are_one_line(capsys, burgers_run, tmp_path):
    run, data = burgers_run
    for value in (0, -1, "nan"):
        one_line_error(*run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "p.h5",
                                "--tolerance", value)[::2], f"--tolerance {value}: expected a positive relative L2")
    one_line_error(*run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "p.npy", "--tolerance",
                            0.01)[::2], "a .npy file holds the predictions only")
    (run / "calibration.pt").unlink()
    one_line_error(*run_cli(capsys, "predict", run, "--input", data, "--output", tmp_path / "p.h5", "--tolerance",
                            0.01)[::2], "not calibrated")
    assert not (tmp_path / "p.h5").exists() and not (tmp_path / ("p.h5" + REPORT_SUFFIX)).exists()


@pytest.mark.slow
def test_a_forecast_over_the_tolerance_is_solved_on_from_the_last_given_frame(capsys, tmp_path, time_mix):
    data = generate_file("navier-stokes", tmp_path / "ns.h5", 12, resolution=16, t_final=6.0, seed=3)
    config = {"seed": 0, "model": {"name": "time_mix", "t_in": 3, "t_out": 1},
              "data": {"path": str(data), "n_train": 4, "n_val": 2, "n_test": 6, "normalize_input": "channel",
                       "normalize_target": "channel"},
              "optim": {"lr": 3e-2}, "schedule": {"name": "constant"},
              "train": {"epochs": 1, "batch_size": 4, "num_threads": 1}, "rollout": {"t_in": 3, "t_out": 1}}
    train(config_from_dict(config), tmp_path / "run")
    group = calibrate_run(tmp_path / "run", device="cpu").group()  # an FNO-nu file: the physics estimate applies
    assert "residual" in group.offered and set(group.estimates) == {"residual", "history"}
    assert (group.physics["name"], group.physics["nu"], group.physics["spacing"]) == ("navier_stokes_2d_fno", 1e-3, 1.0)
    code, out, _ = run_cli(capsys, "predict", tmp_path / "run", "--input", data, "--output", tmp_path / "f.h5",
                           "--frames", 2, "--tolerance", 1e-9, "--start", 0)
    assert code == 0 and "12 of 12 samples" in out
    info = read_info(data)
    last = read_fields(data, slice(None))[:, 2]  # the given frames start where calibration's do: frames 0, 1, 2
    expected = resolve_trajectory(info.pde, info.solver, last, [2.0, 3.0, 4.0])
    with h5py.File(tmp_path / "f.h5") as f:
        np.testing.assert_array_equal(f["fields"][:], expected)
        assert f["to_solver"][:].all() and f["times"][:].tolist() == [3.0, 4.0]
    # the residual score: each forecast frame's bound is the quantile times its physics estimate
    code, _, _ = run_cli(capsys, "predict", tmp_path / "run", "--input", data, "--output", tmp_path / "r.npz",
                         "--frames", 2, "--coverage", 0.9, "--score", "residual", "--start", 0)
    assert code == 0
    surrogate = opformer.load_surrogate(tmp_path / "run", device="cpu")
    physics = vorticity_physics(group.physics, 16, 1.0)
    with np.load(tmp_path / "r.npz") as z:
        forecast = torch.from_numpy(z["fields"])
        given = torch.from_numpy(read_fields(data, slice(None))[:, :3])
        estimates = forecast_estimates(physics, given[:, -1, ..., 0].double(), forecast[..., 0].double())
        quantile = surrogate.calibration.at(0.9, score="residual").quantile
        np.testing.assert_allclose(z["bound_relative_l2"], (estimates * quantile[:2]).numpy(), rtol=1e-5)
