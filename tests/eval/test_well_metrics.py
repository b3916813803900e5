"""The Well's metrics (VRMSE, NRMSE over rollout windows): by hand, against ``the_well``'s own functions, and
through ``opformer evaluate --metrics well``."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from opformer.cli import main
from opformer.eval.metrics import WELL_EPS, parse_windows, well_errors, window_means


def test_vrmse_and_nrmse_by_hand():
    """Target 1, 2, 3, 4 (mean 2.5, unbiased variance 5/3, mean square 7.5), prediction off by 1 everywhere:
    MSE 1, VRMSE sqrt(1 / (5/3 + eps)), NRMSE sqrt(1 / (7.5 + eps)); a perfect prediction 0."""
    target = torch.tensor([[1.0, 2.0], [3.0, 4.0]]).reshape(1, 2, 2, 1)
    errors = well_errors(target + 1, target, ndim=2)
    assert errors["vrmse"].shape == (1, 1)
    assert errors["vrmse"].item() == pytest.approx(math.sqrt(1 / (5 / 3 + WELL_EPS)), rel=1e-12)
    assert errors["nrmse"].item() == pytest.approx(math.sqrt(1 / (7.5 + WELL_EPS)), rel=1e-12)
    assert well_errors(target, target, ndim=2)["vrmse"].item() == 0
    # predicting the field's mean scores VRMSE sqrt((n - 1) / n) (the unbiased variance in the denominator)
    mean = torch.full_like(target, 2.5)
    assert well_errors(mean, target, ndim=2)["vrmse"].item() == pytest.approx(math.sqrt(3 / 4), rel=1e-6)


def test_windows_by_hand():
    """Values v[s, t, c] = 10 t + c + s: window 1:3 averages frames 1 and 2 over both samples."""
    values = (10 * torch.arange(5.0)[None, :, None] + torch.arange(2.0) + torch.arange(2.0)[:, None, None])
    means = window_means(values, ((1, 3),))
    torch.testing.assert_close(means["1:3"], torch.tensor([15.5, 16.5]))
    torch.testing.assert_close(means["all"], torch.tensor([20.5, 21.5]))
    assert parse_windows("6:12, 13:30") == ((6, 12), (13, 30))
    for bad in ("6", "12:6", "-1:3", "a:b"):
        with pytest.raises(ValueError):
            parse_windows(bad)


def _random_rollout(ndim):
    generator = torch.Generator().manual_seed(ndim)
    shape = (3, 31, *(6, 5, 4)[:ndim], 2)
    target = torch.randn(shape, generator=generator, dtype=torch.float64)
    return target + 0.3 * torch.randn(shape, generator=generator, dtype=torch.float64), target


@pytest.mark.parametrize("ndim", [2, 3])
def test_equal_to_the_wells_metric_functions(ndim):
    """On random (batch, time, *grid, fields) tensors VRMSE and NRMSE equal the_well's, per sample, frame and
    field."""
    spatial = pytest.importorskip("the_well.benchmark.metrics.spatial")
    pred, target = _random_rollout(ndim)
    meta = SimpleNamespace(n_spatial_dims=ndim)
    ours = well_errors(pred, target, ndim)
    torch.testing.assert_close(ours["vrmse"], spatial.VRMSE.eval(pred, target, meta), rtol=1e-12, atol=0)
    torch.testing.assert_close(ours["nrmse"], spatial.NRMSE.eval(pred, target, meta), rtol=1e-12, atol=0)


def test_windows_equal_the_wells_trainer_logs():
    """The window means equal the T=6:12, T=13:30 and T=all logs of the_well's trainer (which needs its
    ``benchmark`` extra, wandb among them)."""
    training = pytest.importorskip("the_well.benchmark.trainer.training")
    pred, target = _random_rollout(2)
    ours = well_errors(pred, target, 2)
    per_frame = ours["vrmse"].mean(0)  # the trainer's input: averaged over the batch, (time, field)
    for field in range(2):
        logs = training.Trainer.temporal_split_losses(None, per_frame[:, field], [6, 12, 13, 30], "VRMSE", "d")
        means = window_means(ours["vrmse"], ((6, 12), (13, 30)))
        for window in ("6:12", "13:30", "all"):
            assert means[window][field].item() == pytest.approx(logs[f"d/full_VRMSE_T={window}"].item(), rel=1e-12)


def test_evaluate_metrics_well_on_a_converted_file(tmp_path, layouts, capsys):
    """A run trained one epoch on a converted Well file: ``evaluate --metrics well`` reports, per channel and
    window, the VRMSE and NRMSE of its rollout; the mean leaves out the constant field; windows beyond the
    rollout and --windows without --metrics well are one-line errors."""
    from opformer.data.convert import convert_file
    from opformer.eval.evaluate import rollout_row
    from opformer.runs import Run
    from opformer.config import config_from_dict
    from opformer.train.trainer import train

    path = layouts.the_well(tmp_path / "w.hdf5", samples=4, frames=8, shape=(8, 6))
    data, _ = convert_file("the-well", [path], tmp_path / "w.h5")
    config = {"seed": 0, "model": {"name": "fno2d_time", "in_channels": 10, "width": 4, "modes": 2, "n_layers": 1,
                                   "projection_width": 8},
              "data": {"path": str(data), "n_train": 2, "n_val": 1, "n_test": 1},
              "optim": {"lr": 1e-3}, "schedule": {"name": "constant"},
              "train": {"epochs": 1, "batch_size": 2, "num_threads": 1}, "rollout": {"t_in": 2, "t_out": 1}}
    run = tmp_path / "run"
    train(config_from_dict(config), run)
    out = tmp_path / "well.json"
    assert main(["evaluate", str(run), "--metrics", "well", "--windows", "0:2,3:6", "--json", str(out)]) == 0
    assert "VRMSE 0:2" in capsys.readouterr().out
    well = json.loads(out.read_text())["results"][0]["well"]
    checkpoint, (surrogate, payload) = str(Run(run).checkpoint()), Run(run).model()
    _, split, preds = rollout_row(surrogate, payload, checkpoint, data, None, "test", torch.device("cpu"))
    truth = split.fields[:, 2:]
    vrmse = well_errors(preds, truth, 2)["vrmse"]  # (sample, frame, channel)
    channels = split.info.input_channels
    assert well["windows"] == ["0:2", "3:6"] and well["constant_fields"] == ["obstacle"]
    for c, name in enumerate(channels):
        assert well["vrmse"]["3:6"][name] == pytest.approx(vrmse[:, 3:6, c].mean().item(), rel=1e-9)
    assert well["vrmse"]["all"]["mean"] == pytest.approx(vrmse[..., :-1].mean().item(), rel=1e-9)
    assert np.isfinite(well["nrmse"]["0:2"]["density"])
    with pytest.MonkeyPatch.context() as patch:  # refused before the rollout
        patch.setattr("opformer.eval.evaluate.rollout_errors", lambda *a, **k: pytest.fail("rolled out first"))
        assert main(["evaluate", str(run), "--metrics", "well", "--windows", "0:9"]) == 2
    assert "--windows 0:9: the rollout has 6 predicted frames" in capsys.readouterr().err
    assert main(["evaluate", str(run), "--windows", "0:2"]) == 2
    assert "--windows: only with --metrics well" in capsys.readouterr().err
