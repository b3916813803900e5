"""build_model: round trip through model.config, presets and the error messages."""

from __future__ import annotations

import json

import pytest
import torch

from opformer.errors import ConfigError
from opformer.models import PRESETS, build_model, preset
from opformer.models.registry import model_keys


LARGE = {"dpot_s", "dpot_m", "dpot_l"}  # dpot_ti's class, 30M-509M parameters: counted on the meta device below


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(PRESETS) - LARGE))
def test_round_trip_through_config(name):
    model = build_model(preset(name))
    config = json.loads(json.dumps(model.config))
    assert config["name"] == preset(name)["name"]
    assert set(config) - {"name"} == set(model_keys(config)) and "ndim" not in config
    rebuilt = build_model(config)
    assert type(rebuilt) is type(model)
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == shapes
    rebuilt.load_state_dict(model.state_dict())
    if getattr(model, "mesh", False):  # model(x, pos, weights, mask) on the points of a mesh (or structured grid)
        shape = model.config.get("grid_shape") or [7, 5]
        n = shape[0] * shape[1]
        inputs = (torch.randn(1, n, model.config["in_channels"]), torch.rand(1, n, model.config["space_dim"]),
                  torch.rand(1, n), torch.ones(1, n, dtype=torch.bool))
        with torch.no_grad():
            torch.testing.assert_close(rebuilt.eval()(*inputs), model.eval()(*inputs))
        return
    # 1D/2D grids the model accepts: at least its coarse grid, a multiple of its output grid's cells
    n = max(32, model.config.get("coarse_size", 0), 2 * (model.config.get("output_size") or 1) - 1)
    n = 8 if model.ndim == 3 else n  # 3D models: a small grid keeps the test fast
    # time-dependent models take (batch, *spatial, t_in, in_channels)
    frames = (model.config["t_in"], model.config["in_channels"]) if "t_in" in model.config else (1,)
    x = torch.randn(1, *[n] * model.ndim, *frames)
    with torch.no_grad():
        torch.testing.assert_close(rebuilt.eval()(x), model.eval()(x))  # eval: no dropout


def test_config_holds_resolved_defaults_and_overrides():
    model = build_model({"name": "galerkin_transformer_1d", "d_model": 16, "n_head": 2, "dim_ff": 32})
    assert model.config["d_model"] == 16 and model.config["n_layers"] == 4
    assert model.config["attention_type"] == "galerkin"


def test_unknown_name_lists_valid_names():
    with pytest.raises(ConfigError, match="unknown name 'gt'; valid names: dil_resnet2d, dil_resnet3d, dpot2d, dpot3d, factformer2d, factformer2d_steady, factformer3d, ffno2d, ffno3d, fno1d, fno2d, fno2d_time, fno3d_time, galerkin_transformer_1d, galerkin_transformer_2d, galerkin_transformer_mesh, mesh_mlp, transolver"):
        build_model({"name": "gt"})
    with pytest.raises(ConfigError, match="missing key 'name'"):
        build_model({"d_model": 4})


def test_unknown_key_lists_valid_keys():
    with pytest.raises(ConfigError) as info:
        build_model({"name": "fno1d", "foo": 1})
    valid = "in_channels, out_channels, width, modes, n_layers, projection_width, activation, length, periodic, padding"
    assert str(info.value) == f"model.foo: unknown key; valid keys: {valid}"


@pytest.mark.parametrize(
    ("key", "value"),
    [("d_model", "96"), ("d_model", 96.0), ("n_layers", True), ("dropout", "0.1"),
     ("periodic", 1), ("attention_type", 3)],
)
def test_wrong_types_rejected(key, value):
    with pytest.raises(ConfigError, match=f"model.{key}: expected "):
        build_model({"name": "galerkin_transformer_1d", key: value})


def test_int_accepted_for_float_and_bad_values_rejected():
    assert build_model({"name": "fno1d", "length": 2, "width": 4, "modes": 2}).config["length"] == 2
    with pytest.raises(ConfigError, match="attention_type"):
        build_model({"name": "galerkin_transformer_1d", "attention_type": "cosine"})
    with pytest.raises(ConfigError, match="activation"):
        build_model({"name": "fno1d", "activation": "swish"})
    with pytest.raises(ConfigError, match="multiple of n_head"):
        build_model({"name": "galerkin_transformer_1d", "n_head": 5})


def test_presets_are_copies_and_unknown_preset_errors():
    config = preset("gt_burgers")
    config["d_model"] = 8
    assert "d_model" not in PRESETS["gt_burgers"]
    with pytest.raises(ConfigError, match="valid presets: dil_resnet2d_ns, dil_resnet3d_velocity, dpot_l, dpot_m, dpot_micro, dpot_nano, dpot_s, dpot_ti, factformer_darcy, factformer_kolmogorov, factformer_smoke3d, factformer_turbulence3d, ffno2d_kolmogorov, ffno2d_ns, ffno3d_velocity, fno1d_burgers, fno2d_darcy"):
        preset("nope")


# parameter counts of every preset, measured before the per-dimension classes were folded into one class each
# (FactFormer's: the authors' layout, issue 46; docs/models.md)
PRESET_PARAMETERS = {
    "dil_resnet2d_ns": 4_152_321, "dil_resnet3d_velocity": 12_459_398, "factformer_darcy": 3_749_953,
    "factformer_kolmogorov": 3_463_489, "factformer_turbulence3d": 5_093_188, "factformer_smoke3d": 4_501_764,
    "ffno2d_kolmogorov": 1_336_148,
    "ffno2d_ns": 2_371_137, "ffno3d_velocity": 465_542, "fno1d_burgers": 549_569, "fno2d_darcy": 2_368_001,
    "fno2d_darcy_inverse": 2_368_001, "fno2d_time_ns": 926_357, "fno3d_time_velocity": 6_559_062,
    "ft_burgers": 530_305, "ft_darcy": 2_220_829, "gt_burgers": 530_305, "gt_darcy": 2_220_829,
    "gt_darcy_inverse": 2_348_353, "linear_kolmogorov": 1_295_681, "lt_burgers": 530_305, "st_burgers": 530_305,
    "dpot_ti": 7_534_643, "dpot_s": 30_801_459, "dpot_m": 122_125_875, "dpot_l": 509_018_739,
    "dpot_micro": 1_657_383, "dpot_nano": 469_927,
    # mesh models: Transolver's are the authors' counts (tests/models/test_transolver.py)
    "transolver_elasticity": 713_665, "transolver_airfoil": 2_810_817, "transolver_pipe": 3_073_985,
    "transolver_elasticity_quadrature": 713_665, "gt_mesh_elasticity": 834_817, "ft_mesh_elasticity": 834_817,
    "mesh_mlp_elasticity": 50_049,
}


def test_every_preset_keeps_its_parameter_count():
    assert set(PRESET_PARAMETERS) == set(PRESETS)
    for name, count in PRESET_PARAMETERS.items():
        with torch.device("meta"):  # counts need no memory
            model = build_model(preset(name))
        assert sum(p.numel() for p in model.parameters()) == count, name


# model.config as checkpoints written before the fold store it (all constructor arguments, no ndim)
OLD_CONFIGS = [
    ({"name": "ffno3d", "t_in": 10, "t_out": 1, "in_channels": 1, "out_channels": None, "width": 64, "modes": 16,
      "n_layers": 8, "ffn_width": None, "projection_width": 128, "activation": "gelu", "share_weights": False,
      "length": 1.0, "periodic": True}, 3_419_777, 62),
    ({"name": "fno3d_time", "t_in": 10, "t_out": 1, "in_channels": 1, "out_channels": None, "width": 20, "modes": 8,
      "n_layers": 4, "projection_width": 128, "activation": "gelu", "length": 1.0, "periodic": True}, 6_558_377, 18),
    ({"name": "fno1d", "in_channels": 1, "out_channels": 1, "width": 64, "modes": 16, "n_layers": 4,
      "projection_width": 128, "activation": "relu", "length": 1.0, "periodic": True}, 549_569, 18),
    # FactFormer: the authors' layout since issue 46 (the full config as checkpoints store it since; a FactFormer
    # checkpoint of the layout before does not load: "weights do not fit the stored model config")
    ({"name": "factformer3d", "t_in": 10, "t_out": 2, "in_channels": 4, "out_channels": None, "d_model": 128,
      "n_head": 6, "head_dim": 64, "kernel_multiplier": 3, "n_layers": 4, "latent_dim": 192, "block_latent": None,
      "decoder_groups": 8, "lift": "channelwise", "cnn_layers": 0, "padding": 0, "fourier_scale": 8.0,
      "rope_scale": 64.0, "attention": "factorized", "length": 1.0, "periodic": True}, 5_093_188, 161),
]


#: constructor arguments newer than some OLD_CONFIGS, with their defaults (padding: issue 46's domain padding)
ADDED = {"padding": 0}


@pytest.mark.parametrize(("config", "count", "n_tensors"), OLD_CONFIGS, ids=[c[0]["name"] for c in OLD_CONFIGS])
def test_old_style_full_configs_build_the_same_model(config, count, n_tensors):
    model = build_model(config)
    # arguments added since, at the values that keep the old model (Trainer.resume fills them into a stored spec)
    added = {k: v for k, v in ADDED.items() if k in model.config and k not in config}
    assert model.config == {**config, **added}
    assert sum(p.numel() for p in model.parameters()) == count
    assert len(model.state_dict()) == n_tensors
    # the bare name builds the same model: the registry entry supplies ndim and the name's own defaults
    assert {k: v.shape for k, v in build_model({"name": config["name"]}).state_dict().items()} == (
        {k: v.shape for k, v in model.state_dict().items()})


def test_ndim_is_fixed_by_the_name():
    with pytest.raises(ConfigError, match="model.ndim: unknown key; valid keys: t_in, t_out"):
        build_model({"name": "ffno2d", "ndim": 3})
    with pytest.raises(ConfigError, match="model.output_size: unknown key"):
        build_model({"name": "fno1d", "output_size": 4})
    assert build_model({"name": "dil_resnet3d", "width": 8, "n_blocks": 1}).ndim == 3
