"""generate -> train -> evaluate -> plot on a time-dependent preset, through the command line."""

import json

import h5py
import numpy as np
import pytest
import yaml

from opformer.cli import main


@pytest.mark.slow
def test_navier_stokes_generate_train_evaluate_plot(capsys, tmp_path):
    data = tmp_path / "ns.h5"
    assert main(["generate", "navier-stokes", "--samples", "6", "--resolution", "16", "--t-final", "7",
                 "--out", str(data)]) == 0
    with h5py.File(data) as f:
        assert f.attrs["kind"] == b"trajectory" and f["fields"].shape == (6, 8, 16, 16, 1)
        np.testing.assert_array_equal(f["times"][()], np.arange(8.0))
        # the vorticity of a periodic flow has zero mean, in every frame
        assert np.abs(f["fields"][()].mean(axis=(2, 3, 4))).max() < 1e-5
    config = {"seed": 0, "model": {"name": "fno2d_time", "t_in": 3, "t_out": 1, "width": 8, "modes": 4,
                                   "n_layers": 2},
              "data": {"path": str(data), "n_train": 4, "n_val": 1, "n_test": 1, "normalize_input": "channel",
                       "normalize_target": "channel"},
              "optim": {"lr": 3e-3}, "train": {"epochs": 2, "batch_size": 4, "num_threads": 1},
              "rollout": {"t_in": 3, "t_out": 1, "strategy": "pushforward", "unroll_steps": 2}}
    path = tmp_path / "ns.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "run"), "--data", str(data), "--resolution", "16",
                 "--json", str(tmp_path / "e.json")]) == 0
    out = capsys.readouterr().out
    assert "final frame" in out and "frames" in out
    (row,) = yaml.safe_load((tmp_path / "e.json").read_text())["results"]
    assert row["frames"] == 5 and len(row["per_frame_relative_l2"]) == 5
    assert main(["plot", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "rollout.gif").stat().st_size > 0


def test_trajectory_generate_errors_are_one_line(capsys, tmp_path):
    code = main(["generate", "kolmogorov", "--samples", "1", "--nu", "0.01", "--out", str(tmp_path / "k.h5")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "--nu: only used by navier-stokes" in err
    assert not (tmp_path / "k.h5").exists()


SOLVE_RESOLUTION_USERS = "--solve-resolution: only used by navier-stokes, kolmogorov, smoke and smoke-conditioned"


@pytest.mark.parametrize(("argv", "needle"), [
    (["kolmogorov", "--resolution", "16", "--solve-resolution", "24"], "--solve-resolution 24: expected a multiple"),
    (["turbulence3d", "--solve-resolution", "64"], SOLVE_RESOLUTION_USERS),
    (["burgers", "--solve-resolution", "64"], SOLVE_RESOLUTION_USERS),
    (["darcy", "--t-final", "2"], "--t-final: only used by burgers, navier-stokes, kolmogorov, turbulence3d"),
])
def test_solver_grid_and_time_flags_are_checked(capsys, tmp_path, argv, needle):
    code = main(["generate", argv[0], "--samples", "1", "--out", str(tmp_path / "d.h5"), *argv[1:]])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and needle in err, err
    assert not (tmp_path / "d.h5").exists()


@pytest.mark.slow
def test_kolmogorov_solve_resolution_scales_the_time_step(tmp_path):
    main(["generate", "kolmogorov", "--samples", "1", "--resolution", "16", "--solve-resolution", "32",
          "--t-final", "0.0625", "--out", str(tmp_path / "k.h5")])
    with h5py.File(tmp_path / "k.h5") as f:
        solver = json.loads(f.attrs["solver"])
    # 256^2 takes dt = 1e-3; a grid 8x coarser keeps the CFL number with a step 8x longer
    assert solver["solve_resolution"] == 32 and solver["dt_max"] == pytest.approx(8e-3)
