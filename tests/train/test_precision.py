"""Mixed precision on the CPU: bf16 autocast trains the tiny models as fp32 does, within bf16's resolution."""

import csv

import pytest
import torch

from opformer.config import config_from_dict
from opformer.errors import ConfigError
from opformer.runtime import autocast
from opformer.train.trainer import train


def _curves(run):
    with open(run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    return [float(r["train_loss"]) for r in rows], [float(r["val_relative_l2"]) for r in rows]


def _fno2d(darcy_config, darcy_file):
    config = darcy_config(darcy_file, epochs=12)
    config["train"]["batch_size"] = 2
    config["model"] = {"name": "fno2d", "width": 8, "modes": 3, "n_layers": 2}
    config["data"].pop("boundary", None)
    return config


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gt", "fno2d"])
def test_bf16_training_learns_and_matches_fp32(tmp_path, toy_file, tiny_config, darcy_file, darcy_config, model):
    base = tiny_config(toy_file, epochs=6) if model == "gt" else _fno2d(darcy_config, darcy_file)
    curves = {}
    for precision in ("fp32", "bf16"):
        config = {**base, "train": {**base["train"], "precision": precision}}
        train(config_from_dict(config), tmp_path / precision)
        curves[precision] = _curves(tmp_path / precision)
    (loss32, fp32), (loss16, bf16) = curves["fp32"], curves["bf16"]
    assert loss16[-1] < 0.7 * loss16[0] and loss32[-1] < 0.7 * loss32[0]  # both reduce the loss
    # bf16 keeps 8 bits of mantissa (a product rounds by up to 2^-9 = 2e-3 relative); the rounding errors of a
    # few dozen steps partly average out: measured 0.06% (GT) and 0.01% (FNO2d) apart; allowed 1%, a few
    # roundings, far below the 30% or more that training itself changes the error by
    assert abs(bf16[-1] - fp32[-1]) < 0.01 * fp32[-1], (fp32, bf16)
    assert fp32 != bf16, (fp32, bf16)  # the products really ran in bf16


def test_autocast_contexts():
    cpu = torch.device("cpu")
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with autocast("fp32", cpu):
        assert (a @ b).dtype == torch.float32
    with autocast("bf16", cpu):
        assert (a @ b).dtype == torch.bfloat16
    with pytest.raises(ConfigError, match="train.precision: expected one of 'fp32', 'bf16', 'fp16', got 'fp8'"):
        config_from_dict({"train": {"precision": "fp8"}})
