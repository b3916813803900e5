import pytest

from opformer.config import apply_overrides, config_from_dict, load_config
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
