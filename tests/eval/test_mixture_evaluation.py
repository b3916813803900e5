"""A run trained on a mixture: evaluated and plotted per member on its stored grid, beside persistence."""

import csv
import json

import pytest
import torch

from opformer.cli import main
from opformer.config import config_from_dict
from opformer.data.mixture import pad_channels
from opformer.data.trajectories import load_trajectories
from opformer.errors import ConfigError
from opformer.eval.metrics import masked_relative_l2_per_sample, relative_l2_per_sample
from opformer.models.inference import rollout
from opformer.eval.mixture import evaluate_mixture, paper_frames
from opformer.runs import Run
from opformer.train.trainer import train


@pytest.fixture
def mixture_run(tmp_path, toy_mixture):
    """FNO2d-time trained one epoch on two members: a (1 channel, periodic 16^2), b (2 channels, 32^2 cells)."""
    config = {"seed": 0,
              "model": {"name": "fno2d_time", "in_channels": 2, "width": 4, "modes": 2, "n_layers": 1,
                        "projection_width": 8},
              "data": {"mixture": [{"path": str(toy_mixture[0])}, {"path": str(toy_mixture[1]), "n_test": 2}],
                       "resolution": 16, "windows_per_epoch": 8, "n_train": 3, "n_val": 1, "n_test": 1},
              "optim": {"lr": 1e-3}, "schedule": {"name": "constant"},
              "train": {"epochs": 1, "batch_size": 4, "num_threads": 1}, "rollout": {"t_in": 3, "t_out": 1}}
    run = tmp_path / "run"
    train(config_from_dict(config), run)
    return run


def direct(run, path, samples, split, frames, channels):
    """The member's L2RE and persistence L2RE computed here from the file, the checkpoint and the formula."""
    surrogate, _ = Run(run).model("best")
    data = load_trajectories(path, split, n_train=3, n_val=1, n_test=samples)
    fields = pad_channels(data.fields, 2)
    mask = torch.arange(2) < channels
    with torch.no_grad():
        pred = rollout(lambda x: surrogate(x) * mask, fields[:, :3].movedim(1, -2), frames).movedim(-2, 1)
    truth = fields[:, 3:3 + frames]
    model = masked_relative_l2_per_sample(pred, truth, mask.expand(len(fields), -1))
    # persistence by the formula: per sample and real channel over space and time, mean over channels
    last = data.fields[:, 2:3]
    real = data.fields[:, 3:3 + frames]
    ratios = ((last - real).pow(2).sum(dim=(1, 2, 3)) / real.pow(2).sum(dim=(1, 2, 3))).sqrt()
    per_frame = relative_l2_per_sample(pred.flatten(0, 1), truth.flatten(0, 1)).reshape(len(fields), frames)
    return float(model.mean()), float(ratios.mean(dim=1).mean()), per_frame.mean(dim=0).tolist()


@pytest.mark.slow
def test_each_member_is_evaluated_on_its_stored_grid_as_a_direct_computation(mixture_run, toy_mixture, tmp_path,
                                                                             capsys):
    rows = evaluate_mixture(mixture_run, device="cpu")
    assert [(r["member"], r["samples"], r["stored_shape"], r["frames"]) for r in rows] == [
        ("a", 1, [16, 16], 4), ("b", 2, [32, 32], 4)]
    for row, path, samples, channels in zip(rows, toy_mixture, (1, 2), (1, 2)):
        l2re, persistence_l2re, per_frame = direct(mixture_run, path, samples, "test", 4, channels)
        assert row["l2re"] == pytest.approx(l2re, rel=1e-5)
        assert row["persistence_l2re"] == pytest.approx(persistence_l2re, rel=1e-5)
        assert row["per_frame_relative_l2"] == pytest.approx(per_frame, rel=1e-5)
        assert row["relative_l2"] == pytest.approx(sum(per_frame) / 4, rel=1e-5)
    # the validation split gives back the value training selected on (the mean over members)
    val = evaluate_mixture(mixture_run, split="val", device="cpu")
    with open(mixture_run / "metrics.csv") as f:
        (epoch,) = csv.DictReader(f)
    assert sum(r["l2re"] for r in val) / 2 == pytest.approx(float(epoch["val_relative_l2"]), rel=1e-5)
    # --frames shortens every member's rollout; the CLI prints a row per member and writes them as JSON
    short = evaluate_mixture(mixture_run, frames=2, device="cpu")
    assert short[1]["l2re"] == pytest.approx(direct(mixture_run, toy_mixture[1], 2, "test", 2, 2)[0], rel=1e-5)
    out = tmp_path / "eval.json"
    assert main(["evaluate", str(mixture_run), "--frames", "2", "--json", str(out), "--device", "cpu"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in table[2:]] == ["a", "b", "mean"]
    assert json.loads(out.read_text())["results"] == short


def test_rollout_lengths_too_long_or_unknown_are_one_line_errors(mixture_run, capsys):
    with pytest.raises(ConfigError, match=r"--frames: 5 frames after t_in 3 need 8 but member 'a' .* has 7"):
        evaluate_mixture(mixture_run, frames=5, device="cpu")
    assert main(["evaluate", str(mixture_run), "--paper-lengths"]) == 2
    assert "member 'a' has no rollout length in the DPOT paper" in capsys.readouterr().err


def test_paper_lengths_by_member_name():
    assert [paper_frames(n) for n in ("fno_nu1e-5", "fno_nu1e-4", "fno_nu1e-3", "cns_m1_eta0.1", "cns_m0.1_eta0.01",
                                      "dr", "swe", "smoke", "smoke_conditioned")] == [10, 20, 20, 11, 11, 91, 91, 4, 46]


@pytest.mark.slow
def test_plot_writes_a_rollout_figure_per_member(mixture_run, tmp_path, capsys):
    out = tmp_path / "plots"
    assert main(["plot", str(mixture_run), "--out", str(out), "--device", "cpu"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["losses.png", "rollout_a.png", "rollout_b.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in out.iterdir())


@pytest.mark.slow
def test_a_member_s_time_stride_and_the_run_s_eval_frames_reach_evaluation_and_plots(tmp_path, toy_mixture,
                                                                                     monkeypatch):
    from opformer.eval import run_plots

    config = {"seed": 0,
              "model": {"name": "fno2d_time", "in_channels": 2, "width": 4, "modes": 2, "n_layers": 1,
                        "projection_width": 8},
              "data": {"mixture": [{"path": str(toy_mixture[0]), "time_stride": 2}, {"path": str(toy_mixture[1])}],
                       "resolution": 16, "windows_per_epoch": 8, "n_train": 3, "n_val": 1, "n_test": 1},
              "optim": {"lr": 1e-3}, "schedule": {"name": "constant"},
              "train": {"epochs": 1, "batch_size": 4, "num_threads": 1},
              "rollout": {"t_in": 2, "t_out": 1, "eval_frames": 2}}
    run = tmp_path / "strided"
    train(config_from_dict(config), run)
    rows = evaluate_mixture(run, device="cpu")  # every frame after t_in: a has 4 frames at stride 2, b 7
    assert [(r["member"], r["frames"]) for r in rows] == [("a", 2), ("b", 5)]
    fields = load_trajectories(toy_mixture[0], "test", n_train=3, n_val=1, n_test=1).fields[:, ::2]
    last, real = fields[:, 1:2], fields[:, 2:4]
    expected = ((last - real).pow(2).sum(dim=(1, 2, 3)) / real.pow(2).sum(dim=(1, 2, 3))).sqrt().mean()
    assert rows[0]["persistence_l2re"] == pytest.approx(float(expected), rel=1e-5)
    # the plots roll out what validation did: the run's eval_frames, at each member's stride
    shown = {}
    monkeypatch.setattr(run_plots, "plot_rollout_frames",
                        lambda truth, pred, times, path, **kw: shown.setdefault(path.name, times) and path)
    run_plots.plot_run(run, out_dir=tmp_path / "plots", device="cpu")
    assert shown == {"rollout_a.png": pytest.approx([0.4, 0.6]), "rollout_b.png": pytest.approx([0.2, 0.3])}
