from pathlib import Path

import pytest
import yaml

from opformer.config import apply_overrides, config_from_dict, load_config, safe_load_yaml
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


def test_negative_noise_and_tiny_grids_are_rejected():
    with pytest.raises(ConfigError, match=r"data.input_noise: expected a noise level >= 0, got -0.01"):
        config_from_dict({"data": {"input_noise": -0.01}})
    with pytest.raises(ConfigError, match=r"data.target_resolution: expected at least 2 grid points, got 1"):
        config_from_dict({"data": {"target_resolution": 1}})


CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*/*.yaml"))


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
