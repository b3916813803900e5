"""The one trainer on trajectory data: rollout strategies, rollout validation and evaluation."""

import csv

import pytest

from opformer.config import config_from_dict
from opformer.errors import ConfigError, DataError
from opformer.data.trajectories import load_trajectories
from opformer.eval.evaluate import evaluate_run, persistence_row
from opformer.eval.metrics import relative_l2_per_sample
from opformer.train.trainer import Trainer, train


pytestmark = pytest.mark.usefixtures("time_mix")  # the tiny model "time_mix" is registered for every test


def rollout_config(path, **rollout):
    return {"seed": 0, "model": {"name": "time_mix", "t_in": 3, "t_out": 1},
            "data": {"path": str(path), "n_train": 6, "n_val": 2, "n_test": 2, "normalize_input": "channel",
                     "normalize_target": "channel"},
            "optim": {"lr": 3e-2}, "schedule": {"name": "constant"},
            "train": {"epochs": 6, "batch_size": 8, "num_threads": 1},
            "rollout": {"t_in": 3, "t_out": 1, **rollout}}


@pytest.mark.slow
@pytest.mark.parametrize("rollout", [{"strategy": "one_step"},
                                     {"strategy": "pushforward", "unroll_steps": 3, "noise": 0.01},
                                     {"strategy": "unroll", "unroll_steps": 3, "curriculum_epochs": 4,
                                      "windows": "random"}])
def test_rollout_strategies_learn_and_select_on_validation_rollouts(tmp_path, heat_file, rollout):
    run = tmp_path / "run"
    config = rollout_config(heat_file, **rollout)
    if rollout.get("windows") == "random":  # one window per trajectory and epoch: more epochs
        config["train"]["epochs"] = 40
    summary = train(config_from_dict(config), run)
    with open(run / "metrics.csv") as f:
        vals = [float(r["val_relative_l2"]) for r in csv.DictReader(f)]
    assert vals[-1] < 0.5 * vals[0]
    (row,) = evaluate_run(run, heat_file, [None], split="val")
    assert row["relative_l2"] == pytest.approx(summary["best_val_relative_l2"], rel=1e-5)
    assert row["frames"] == 9 and len(row["per_frame_relative_l2"]) == 9
    assert row["final_relative_l2"] == pytest.approx(row["per_frame_relative_l2"][-1])
    # the baseline on the same frames: the last given frame (index 2) against every later one
    baseline = persistence_row(run, heat_file, split="val")
    fields = load_trajectories(heat_file, "val", n_train=6, n_val=2, n_test=2).fields
    expected = [relative_l2_per_sample(fields[:, 2], fields[:, 3 + j]).mean().item() for j in range(9)]
    assert baseline["per_frame_relative_l2"] == pytest.approx(expected, rel=1e-5)
    assert baseline["relative_l2"] == pytest.approx(sum(expected) / 9, rel=1e-5)
    assert row["relative_l2"] < baseline["relative_l2"]  # the trained model beats it


def test_bad_windows_and_models_are_one_line_errors(tmp_path, heat_file):
    with pytest.raises(DataError, match="a training window of 3 input \\+ 10 future frames is longer than the 12"):
        Trainer(config_from_dict(rollout_config(heat_file, strategy="unroll", unroll_steps=10)), tmp_path / "a")
    config = rollout_config(heat_file)
    config["rollout"]["t_in"] = 4
    with pytest.raises(ConfigError, match="model.t_in: is 3 but rollout.t_in is 4; give t_in once, under rollout"):
        Trainer(config_from_dict(config), tmp_path / "b")
    config = rollout_config(heat_file)
    config["data"]["normalize_input"] = "pointwise"
    with pytest.raises(ConfigError, match="trajectory data take 'channel' or 'none'"):
        Trainer(config_from_dict(config), tmp_path / "c")


def test_a_2d_checkpoint_on_3d_data_is_an_error(tmp_path, heat_file):
    import numpy as np

    from opformer.data.store import write_trajectory_dataset

    run = tmp_path / "run"
    config = rollout_config(heat_file)
    config["train"]["epochs"] = 1
    train(config_from_dict(config), run)
    cube = write_trajectory_dataset(tmp_path / "cube.h5", np.zeros((10, 12, 4, 4, 4, 1)), np.arange(12.0),
                                    pde={}, solver={}, domain={"lengths": [1] * 3, "periodic": [True] * 3},
                                    seed=0, channels=["u"])
    with pytest.raises(DataError, match="3D data with channels \\['u'\\] -> \\['u'\\] does not fit"):
        evaluate_run(run, cube, [None])


@pytest.mark.slow
def test_plot_of_a_trajectory_run_writes_error_curve_frames_and_gif(tmp_path, heat_file):
    from opformer.eval.run_plots import plot_run

    run = tmp_path / "run"
    config = rollout_config(heat_file)
    config["train"]["epochs"] = 1
    train(config_from_dict(config), run)
    paths = plot_run(run, out_dir=tmp_path / "plots", samples=2)
    assert [p.name for p in paths] == ["losses.png", "rollout_errors.png", "rollout_frames.png", "rollout.gif"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths[:3])
    gif = paths[3].read_bytes()
    assert gif[:6] == b"GIF89a" and gif.count(b"\x21\xf9\x04") == 9  # one graphic-control block per frame
    assert not list((tmp_path / "plots").glob(".*"))  # no temporary file left behind
