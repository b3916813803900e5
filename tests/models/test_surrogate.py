"""The surrogate: normalizers around the model, and zero channels padded for a model with more channels."""

import pytest
import torch

from opformer.config import config_from_dict
from opformer.errors import ConfigError
from opformer.eval.evaluate import evaluate_run
from opformer.models.surrogate import Surrogate, channel_padding
from opformer.train.trainer import Trainer

DPOT = {"name": "dpot2d", "t_in": 3, "t_out": 1, "in_channels": 4, "width": 16, "depth": 1, "n_heads": 2,
        "head_width": 8, "patch_size": 4, "grid_size": 16, "modes": 2}


def trajectory_spec(channels):
    return {"model": DPOT, "normalize_input": "channel", "normalize_target": "channel",
            "data": {"stored_shape": [16, 16], "periodic": [True, True], "lengths": [1.0, 1.0],
                     "input_channels": channels, "target_channels": channels, "t_in": 3, "t_out": 1}}


def test_a_model_with_more_channels_sees_the_data_zero_padded_and_returns_the_data_s_channels():
    torch.manual_seed(0)
    surrogate = Surrogate(trajectory_spec(["u"])).double()
    assert surrogate.padding == 3
    for normalizer, mean, std in ((surrogate.input_normalizer, 0.5, 2.0), (surrogate.target_normalizer, -1.0, 3.0)):
        normalizer.mean.fill_(mean)
        normalizer.std.fill_(std)
    x = torch.randn(2, 16, 16, 3, 1, dtype=torch.float64)
    with torch.no_grad():
        y = surrogate(x)
        z = surrogate.input_normalizer.encode(x)
        padded = torch.cat([z, torch.zeros(2, 16, 16, 3, 3, dtype=torch.float64)], dim=-1)
        expected = surrogate.target_normalizer.decode(surrogate.model(padded)[..., :1])
    assert y.shape == (2, 16, 16, 1, 1)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)


@pytest.mark.parametrize("model, data, expected", [
    ({"in_channels": 4}, {"input_channels": ["u", "v"], "target_channels": ["u", "v"]}, 2),
    ({"in_channels": 2, "out_channels": None}, {"input_channels": ["u", "v"], "target_channels": ["u", "v"]}, 0),
    ({"in_channels": 4, "out_channels": 1}, {"input_channels": ["u"], "target_channels": ["u"]}, 0),
    ({"in_channels": 4}, {"input_channels": ["a"], "target_channels": ["u"]}, 0),  # operator data
    ({"in_channels": 1}, {"input_channels": ["u", "v"], "target_channels": ["u", "v"]}, 0),
    ({}, {"input_channels": ["u"], "target_channels": ["u"]}, 0),
])
def test_padding_applies_to_same_fields_in_and_out_only(model, data, expected):
    assert channel_padding(model, data) == expected


def test_a_padded_model_trains_on_fewer_channels_and_other_mismatches_stay_errors(tmp_path, heat_file, toy_file,
                                                                                 tiny_config):
    config = {"seed": 0, "model": DPOT, "data": {"path": str(heat_file), "n_train": 6, "n_val": 2, "n_test": 2},
              "train": {"epochs": 1, "batch_size": 8, "num_threads": 1}, "rollout": {"t_in": 3, "t_out": 1}}
    trainer = Trainer(config_from_dict(config), tmp_path / "a")
    assert trainer.surrogate.padding == 3 and trainer.surrogate.spec["data"]["input_channels"] == ["u"]
    summary = trainer.fit()
    (row,) = evaluate_run(tmp_path / "a", heat_file, [None], split="val")  # the run evaluates on its 1 channel
    assert row["relative_l2"] == pytest.approx(summary["best_val_relative_l2"], rel=1e-5)
    config["model"] = {**DPOT, "out_channels": 2}  # the output is not the input's fields: no padding
    with pytest.raises(ConfigError, match=r"^model.in_channels: is 4 but .*heat.h5 has 1 \(u\)$"):
        Trainer(config_from_dict(config), tmp_path / "b")
    operator = tiny_config(toy_file)
    operator["model"] = {"name": "fno1d", "in_channels": 2, "width": 4, "modes": 2, "n_layers": 1}
    with pytest.raises(ConfigError, match=r"^model.in_channels: is 2 but .*toy.h5 has 1 \(u0\)$"):
        Trainer(config_from_dict(operator), tmp_path / "c")
