from pathlib import Path

import pytest
import yaml

from opformer.config import (DEFAULT_PADDING, apply_overrides, config_from_dict, config_to_dict, grid_defaults,
                             load_config, safe_load_yaml, yaml_problem)
from opformer.errors import ConfigError


def test_defaults_and_types():
    cfg = config_from_dict({"model": {"name": "fno1d"}, "optim": {"lr": 1}, "data": {"resolution": None}})
    assert cfg.optim.lr == 1.0 and isinstance(cfg.optim.lr, float)
    assert cfg.schedule.cycle_momentum is False
    assert cfg.seed == 1127802


def test_unknown_key_names_the_valid_ones():
    with pytest.raises(ConfigError, match=r"train\.epoch: unknown key; valid keys: epochs, batch_size"):
        config_from_dict({"train": {"epoch": 3}})
    with pytest.raises(ConfigError, match="valid keys: model, data, loss"):
        config_from_dict({"trian": {}})


@pytest.mark.parametrize("section, value, message", [
    ({"train": {"epochs": "ten"}}, None, r"train\.epochs: expected int, got 'ten'"),
    ({"train": {"epochs": True}}, None, r"train\.epochs: expected int"),
    ({"loss": {"name": "l1"}}, None, r"loss\.name: expected one of 'relative_l2', 'h1_relative'"),
    ({"optim": {"betas": [0.9, "x"]}}, None, r"optim\.betas\[1\]: expected float"),
    ({"train": {"grad_clip": "none"}}, None, r"train\.grad_clip: expected float or null"),
])
def test_wrong_types_are_one_line_errors(section, value, message):
    with pytest.raises(ConfigError, match=message) as info:
        config_from_dict(section)
    assert "\n" not in str(info.value)


def test_overrides_parse_yaml_values():
    data = apply_overrides({"train": {"epochs": 100}}, ["train.epochs=3", "optim.betas=[0.9, 0.9]", "seed=7"])
    assert data == {"train": {"epochs": 3}, "optim": {"betas": [0.9, 0.9]}, "seed": 7}
    with pytest.raises(ConfigError, match="expected key=value"):
        apply_overrides({}, ["train.epochs"])


def test_exponent_floats_without_a_dot_are_floats():
    # YAML 1.1 (PyYAML's default) reads 1e-3 as a string; run configs read it as the float a user means
    data = apply_overrides({}, ["optim.lr=1e-3", "model.layer_norm_eps=-2E+1", "name=1e", "seed=7"])
    assert data == {"optim": {"lr": 1e-3}, "model": {"layer_norm_eps": -20.0}, "name": "1e", "seed": 7}
    assert safe_load_yaml("lr: 5e-4\nbeta: 1.0e-7") == {"lr": 5e-4, "beta": 1e-7}
    with pytest.raises(yaml.YAMLError):  # still a safe loader: no Python objects
        safe_load_yaml("mode: !!python/name:os.system")


def test_duplicate_keys_are_refused_at_any_level_and_merge_keys_still_override():
    for text, problem in [("a: 1\nb: 2\na: 3\n", "duplicate key 'a' at line 3"),
                          ("train:\n  epochs: 1\n  batch_size: 2\n  epochs: 3\n", "duplicate key 'epochs' at line 4"),
                          ("betas: [{x: 1, x: 2}]\n", "duplicate key 'x' at line 1")]:
        with pytest.raises(yaml.YAMLError) as info:
            safe_load_yaml(text)
        assert yaml_problem(info.value) == problem
    assert safe_load_yaml("base: &b {x: 1, y: 2}\nrun:\n  <<: *b\n  x: 3\n")["run"] == {"x": 3, "y": 2}


def test_load_config_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: {epochs: [1\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match=r"missing\.yaml: no such config file"):
        load_config(tmp_path / "missing.yaml")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("train: {lr: 1}\n")
    with pytest.raises(ConfigError, match=r"unknown\.yaml: train\.lr: unknown key"):
        load_config(unknown)


def _nested(key: str, value):
    """``{"a": {"b": value}}`` for the key ``"a.b"``."""
    head, _, rest = key.partition(".")
    return {head: _nested(rest, value) if rest else value}


GT = {"name": "galerkin_transformer_1d"}
OUT_OF_RANGE = [  # key, value, what the message says was expected
    ("train.epochs", 0, "an integer >= 1"), ("train.epochs", -3, "an integer >= 1"),
    ("train.batch_size", 0, "an integer >= 1"), ("train.eval_batch_size", -1, "an integer >= 1"),
    ("train.num_threads", 0, "an integer >= 1 or null"), ("train.grad_clip", -1, "a number > 0 or null"),
    ("train.grad_clip", 0.0, "a number > 0 or null"),
    ("data.n_train", 0, "an integer >= 1"), ("data.n_val", 0, "an integer >= 1"),
    ("data.n_test", -1, "an integer >= 1"),
    ("data.resolution", 1, "an integer >= 2 or null"), ("data.target_resolution", 1, "an integer >= 2 or null"),
    ("data.input_noise", -0.01, "a number >= 0"), ("loss.gamma", -0.1, "a number >= 0"),
    ("optim.lr", 0, "a number > 0"), ("optim.lr", -1e-3, "a number > 0"), ("optim.lr", float("nan"), "a number > 0"),
    ("optim.lr", float("inf"), "a number > 0"), ("optim.weight_decay", -1e-4, "a number >= 0"),
    ("optim.betas", [0.9], "2 numbers in [0, 1)"), ("optim.betas", [0.9, 0.99, 0.5], "2 numbers in [0, 1)"),
    ("optim.betas[1]", [0.9, 1.0], "a number in [0, 1)"), ("optim.betas[0]", [-0.1, 0.9], "a number in [0, 1)"),
    ("schedule.pct_start", 0, "a number in (0, 1)"), ("schedule.pct_start", 1.0, "a number in (0, 1)"),
    ("schedule.div_factor", 0, "a number > 0"), ("schedule.final_div_factor", -1e4, "a number > 0"),
    ("rollout.t_in", 0, "an integer >= 1"), ("rollout.time_stride", 0, "an integer >= 1"),
    ("rollout.noise", -0.1, "a number >= 0"), ("rollout.curriculum_epochs", -1, "an integer >= 0"),
    ("rollout.eval_frames", 0, "an integer >= 1 or null"),
    ("model.dropout", 1.0, "a number in [0, 1)"), ("model.attention_dropout", -0.1, "a number in [0, 1)"),
    ("model.ffn_dropout", 1.5, "a number in [0, 1)"),
    ("seed", -1, "an integer in [0, 9223372036854775808)"),
    ("seed", 2**64, "an integer in [0, 9223372036854775808)"),
]


@pytest.mark.parametrize(("key", "value", "expected"), OUT_OF_RANGE, ids=[f"{k}={v}" for k, v, _ in OUT_OF_RANGE])
def test_values_out_of_range_are_one_line_errors_naming_key_value_and_range(key, value, expected):
    section = key.partition("[")[0]
    data = _nested(section, value)
    if section.startswith("model."):
        data = {"model": {**GT, **data["model"]}}
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    shown = value[int(key[-2])] if key.endswith("]") else value
    assert str(info.value) == f"{key}: expected {expected}, got {shown!r}"


def test_ranges_hold_on_2d_model_dropouts_and_leave_null_and_bounds_valid():
    config = config_from_dict({"train": {"grad_clip": None, "num_threads": 1, "epochs": 1},
                               "optim": {"betas": [0.0, 0.5]}, "data": {"n_val": 1, "resolution": 2}})
    assert (config.train.grad_clip, config.optim.betas, config.data.resolution) == (None, [0.0, 0.5], 2)
    with pytest.raises(ConfigError, match=r"^model\.decoder_dropout: expected a number in \[0, 1\), got 1$"):
        config_from_dict({"model": {"preset": "gt_darcy", "decoder_dropout": 1}})
    with pytest.raises(ConfigError, match=r"^model\.downsample_dropout: expected float, got 'x'$"):
        config_from_dict({"model": {"preset": "gt_darcy", "downsample_dropout": "x"}})


CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").rglob("*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[f"{p.parent.name}/{p.name}" for p in CONFIGS])
def test_every_shipped_config_is_valid_and_builds_its_model(path):
    from opformer.models import build_model

    config = load_config(path)
    model = build_model(config.model)
    if path.parent.name in ("darcy", "darcy_inverse"):
        size = {"141": 141, "211": 211}[path.stem.split("_")[-1]]
        assert config.data.resolution == size
        if path.parent.name == "darcy_inverse":
            assert config.data.direction == "inverse" and config.data.input_noise == 0.01
            coarse = model.config.get("coarse_size") or model.config.get("output_size")
            assert (size, coarse) in ((141, 36), (211, 71)) and config.data.target_resolution == coarse
        elif model.config["name"] == "galerkin_transformer_2d":
            assert (size, model.config["coarse_size"]) in ((141, 43), (211, 61))
            assert sum(p.numel() for p in model.parameters()) == 2_220_829


SMOKE3D_64 = sorted((Path(__file__).resolve().parents[1] / "configs" / "factformer").glob("smoke3d_64_*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("path", SMOKE3D_64, ids=[p.stem for p in SMOKE3D_64])
def test_the_64_cubed_smoke3d_recipes_take_a_training_step_on_a_tiny_box(path):
    # The paper-size Table 3 recipes (GPU runs): closed-domain models of d, u, v, w that step on any box; a
    # 4^3 one keeps the test fast (Dil-ResNet's 12.5M parameters dominate it).
    import torch

    from opformer.models import build_model

    config = load_config(path)
    assert config.data.path == "data/smoke3d_64.h5" and (config.rollout.t_in, config.rollout.eval_frames) == (4, 16)
    assert config.model.get("periodic") is False
    torch.manual_seed(0)
    torch.set_num_threads(1)  # restored after the test (conftest)
    model = build_model(config.model)
    before = [p.detach().clone() for p in model.parameters()]
    y = model(torch.randn(1, 4, 4, 4, 4, 4))
    assert y.shape == (1, 4, 4, 4, config.rollout.t_out, 4) and torch.isfinite(y).all()
    y.square().mean().backward()
    torch.optim.AdamW(model.parameters(), lr=config.optim.lr).step()
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert sum(not torch.equal(p, q) for p, q in zip(model.parameters(), before)) >= len(before) // 2


def test_model_section_names_a_preset_and_overrides_it():
    config = config_from_dict({"model": {"preset": "gt_darcy", "attention_type": "linear", "coarse_size": 61}})
    assert config.model["name"] == "galerkin_transformer_2d"
    assert (config.model["attention_type"], config.model["coarse_size"]) == ("linear", 61)
    assert config.model == {"name": "galerkin_transformer_2d", "attention_type": "linear", "coarse_size": 61}
    assert config_from_dict(config_to_dict(config)).model == config.model  # the stored form reloads unchanged
    with pytest.raises(ConfigError, match="model.preset: unknown model preset 'gt'; valid presets: dil_resnet2d_ns"):
        config_from_dict({"model": {"preset": "gt"}})
    with pytest.raises(ConfigError, match="model.preset: expected str, got 3"):
        config_from_dict({"model": {"preset": 3}})
    with pytest.raises(ConfigError, match="model.depth: unknown key; valid keys: in_channels, out_channels"):
        config_from_dict({"model": {"preset": "gt_burgers", "depth": 3}})  # validated when loaded
    with pytest.raises(ConfigError, match="model.width: expected int, got '8'"):
        config_from_dict({"model": {"name": "fno1d", "width": "8"}})
    assert config_from_dict({}).model == {}


def test_time_models_take_t_in_and_t_out_from_the_rollout_section():
    # the preset's t_in 10, t_out 4 give way to the rollout section's
    config = config_from_dict({"model": {"preset": "factformer_kolmogorov"}, "rollout": {"t_in": 3, "t_out": 1}})
    assert (config.model["t_in"], config.model["t_out"]) == (3, 1)
    assert config_from_dict({"model": {"name": "ffno2d"}}).model["t_in"] == 10  # rollout's default
    agreed = config_from_dict({"model": {"name": "ffno2d", "t_in": 4}, "rollout": {"t_in": 4}})
    assert agreed.model["t_in"] == 4
    with pytest.raises(ConfigError, match="model.t_out: is 2 but rollout.t_out is 1; give t_out once, under rollout"):
        config_from_dict({"model": {"name": "ffno2d", "t_out": 2}})
    assert "t_in" not in config_from_dict({"model": {"name": "fno1d"}}).model  # not a time model


def test_data_section_lists_a_mixture():
    data = {"mixture": [{"path": "a.h5", "weight": 2}, {"path": "b.h5", "name": "b", "n_train": 5}],
            "resolution": 64, "sampling": "weight_x_size", "windows_per_epoch": 100}
    config = config_from_dict({"data": data})
    assert config.data.mixture[0].weight == 2.0 and config.data.mixture[1].n_train == 5
    assert config.data.mixture[0].n_train is None and config.data.sampling == "weight_x_size"
    assert config_from_dict(config_to_dict(config)) == config  # config.yaml reloads unchanged
    assert config_from_dict({"data": {"path": "x.h5"}}).data.mixture == []  # the single-file form as it was
    for bad, message in [
        ({**data, "mixture": [{"path": "a.h5", "weight": -1}]}, r"data\.mixture\[0\]\.weight: expected a number > 0"),
        ({**data, "mixture": [{"weight": 1}]}, r"data\.mixture\[0\]\.path: required"),
        ({**data, "mixture": [{"path": "a.h5", "size": 1}]}, r"data\.mixture\[0\]\.size: unknown key; valid keys: path"),
        ({**data, "path": "c.h5"}, "data.path: give data.path or data.mixture, not both"),
        ({**data, "resolution": None}, "data.resolution: required with data.mixture"),
        ({"path": "c.h5", "sampling": "weight_x_size"}, "data.sampling: only used with data.mixture"),
        ({"path": "c.h5", "windows_per_epoch": 10}, "data.windows_per_epoch: only used with data.mixture"),
    ]:
        with pytest.raises(ConfigError, match=message):
            config_from_dict({"data": bad})


@pytest.mark.parametrize(("model", "periodic", "expected"), [
    ({"name": "fno2d"}, [False, False], {"periodic": False, "padding": 0.1}),
    ({"name": "fno2d_time"}, [True, True], {"periodic": True}),
    ({"name": "ffno3d"}, [True, False, True], {"periodic": [True, False, True], "padding": 0.1}),
    ({"name": "fno3d_time", "padding": 0, "periodic": True}, [False] * 3, {"padding": 0, "periodic": True}),
    ({"name": "fno2d", "padding": 3}, [False, False], {"padding": 3, "periodic": False}),
    ({"name": "dil_resnet2d"}, [True, False], {"periodic": [True, False]}),  # a CNN pads its convolutions
    ({"name": "galerkin_transformer_2d"}, [False, False], {}),
])
def test_the_data_grid_fills_periodic_and_padding_the_model_section_leaves_out(model, periodic, expected):
    assert grid_defaults(model, periodic) == {**model, **expected}
    assert DEFAULT_PADDING == 0.1


def test_load_config_takes_a_mapping_as_it_takes_the_file(tmp_path):
    mapping = {"model": {"name": "fno1d", "modes": 4, "width": 8}, "data": {"path": "d.h5", "n_train": 8},
               "train": {"epochs": 3}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(mapping))
    from_dict = load_config(mapping, ["train.epochs=5"])
    assert config_to_dict(from_dict) == config_to_dict(load_config(tmp_path / "run.yaml", ["train.epochs=5"]))
    assert from_dict.train.epochs == 5 and from_dict.data.n_train == 8 and from_dict.model["modes"] == 4
    assert mapping["train"] == {"epochs": 3}  # the caller's mapping is not modified by the overrides
    with pytest.raises(ConfigError, match=r"^config: train.epochz: unknown key"):
        load_config({"train": {"epochz": 3}})
    with pytest.raises(ConfigError, match=r"^load_config: expected a YAML file's path or a mapping of sections, "
                                          r"got list"):
        load_config([("train", {})])
