"""Fine-tuning and transfer: components of a pre-trained DPOT copied into a new model (the ``init`` section)."""

import csv
import shutil

import pytest
import torch

from opformer.config import COMPONENTS, config_from_dict, config_to_dict
from opformer.errors import CheckpointError, ConfigError
from opformer.models.registry import build_model
from opformer.runs import Run, load_checkpoint
from opformer.train.trainer import Trainer, train
from opformer.train.transfer import SUBMODULES, copy_components

TINY = {"width": 16, "depth": 1, "n_heads": 2, "head_width": 8, "patch_size": 4, "grid_size": 16, "modes": 2}


def dpot(**overrides):
    """A tiny float64 DPOT (2D unless ``name`` says otherwise)."""
    config = {"name": "dpot2d", "t_in": 3, "t_out": 1, "in_channels": 2, **TINY, **overrides}
    return build_model(config).double()


def run_config(path, epochs=1, seed=0, init=None, **model):
    """DPOT with 2 channels on the 1-channel heat trajectories (padded by the surrogate)."""
    config = {"seed": seed, "model": {"name": "dpot2d", "in_channels": 2, **TINY, **model},
              "data": {"path": str(path), "n_train": 6, "n_val": 2, "n_test": 2, "normalize_input": "channel",
                       "normalize_target": "channel"},
              "optim": {"lr": 1e-3}, "schedule": {"name": "constant"},
              "train": {"epochs": epochs, "batch_size": 8, "num_threads": 1},
              "rollout": {"t_in": 3, "t_out": 1}}
    if init is not None:
        config["init"] = init
    return config_from_dict(config)


def model_state(trainer):
    return trainer.surrogate.model.state_dict()


def metrics(run):
    with open(run / "metrics.csv") as f:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


def test_the_component_names_are_the_config_s():
    assert tuple(SUBMODULES) == COMPONENTS


@pytest.fixture
def pretrained(tmp_path, heat_file):
    """A one-epoch run of the tiny DPOT on the heat data (its best.pt is the source)."""
    run = tmp_path / "pre"
    train(run_config(heat_file, seed=5), run)
    return run


def test_init_copies_the_named_components_and_keeps_the_others_fresh(tmp_path, heat_file, pretrained):
    components = ["blocks", "embed", "head"]
    config = run_config(heat_file, seed=1, init={"checkpoint": str(pretrained), "components": components})
    trainer = Trainer(config, tmp_path / "fine")
    fresh = model_state(Trainer(run_config(heat_file, seed=1), tmp_path / "scratch"))
    source = load_checkpoint(pretrained / "best.pt")["state_dict"]
    copied = 0
    for key, value in model_state(trainer).items():
        if key.split(".")[0] in ("blocks", "patch_embed", "head"):
            torch.testing.assert_close(value, source[f"model.{key}"], rtol=0, atol=0)
            copied += 1
        else:  # pos_embed and time_agg: the fresh initialisation of the run's seed
            torch.testing.assert_close(value, fresh[key], rtol=0, atol=0)
            assert not torch.equal(value, source[f"model.{key}"])
    assert copied == 22  # 12 in the block, 4 in the embedding, 6 in the head
    assert "init: copied blocks, embed, head from" in trainer.init_note
    assert trainer.init_note.endswith("best.pt (epoch 1); freshly initialised: pos, time_agg")
    # the run records the section (the checkpoint absolute) and logs what was copied; its spec has no new key
    run = tmp_path / "run"
    relative = shutil.copytree(pretrained, tmp_path / "pre2").relative_to(tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        train(run_config(heat_file, seed=1, init={"checkpoint": str(relative)}), run)
    stored = Run(run).config.init
    assert stored.checkpoint == str(tmp_path / "pre2") and stored.components == list(COMPONENTS)
    assert "init: copied embed, pos, time_agg, blocks, head from" in (run / "train.log").read_text()
    spec = load_checkpoint(run / "last.pt")["spec"]
    assert spec == load_checkpoint(pretrained / "last.pt")["spec"]


def test_runs_without_init_store_no_checkpoint(heat_file):
    init = config_to_dict(run_config(heat_file))["init"]
    assert init == {"checkpoint": None, "components": ["embed", "pos", "time_agg", "blocks", "head"]}


@pytest.mark.slow
def test_a_resumed_fine_tune_continues_from_its_own_weights(tmp_path, heat_file, pretrained):
    init = {"checkpoint": str(pretrained), "components": ["blocks", "embed"]}
    reference = tmp_path / "reference"
    train(run_config(heat_file, epochs=2, seed=1, init=init), reference)
    run = tmp_path / "fine"
    train(run_config(heat_file, epochs=1, seed=1, init=init), run)
    shutil.rmtree(pretrained)  # the source is not read again
    train(run_config(heat_file, epochs=2, seed=1, init=init), run, resume=True)
    assert metrics(run) == metrics(reference)
    ref, res = load_checkpoint(reference / "last.pt"), load_checkpoint(run / "last.pt")
    for key, value in ref["state_dict"].items():
        torch.testing.assert_close(res["state_dict"][key], value, rtol=0, atol=0)
    log = (run / "train.log").read_text()
    assert log.count("init: copied") == 1


@pytest.mark.parametrize("periodic", [True, False])
def test_the_positional_embedding_is_resampled_to_a_finer_latent_grid(periodic):
    torch.manual_seed(0)
    source = dpot(periodic=periodic)  # built for 16^2: latent 4^2
    target = dpot(periodic=True, grid_size=32)  # latent 8^2
    notes = copy_components(target, source.state_dict(), list(COMPONENTS), periodic, "source")
    assert notes[:2] == ["embed", "pos (resampled 4x4 -> 8x8)"]
    # the fine-tuned model starts as the pre-trained one applied at 32^2 (which resamples on the fly)
    x = torch.randn(2, 32, 32, 3, 2, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(target(x), source(x), rtol=1e-12, atol=1e-12)


def test_2d_to_3d_and_steady_transfer_copy_the_blocks_only():
    torch.manual_seed(0)
    source = dpot(n_classes=3)
    cube = dpot(name="dpot3d", grid_size=8, modes=3)
    copy_components(cube, source.state_dict(), ["blocks"], True, "source")
    blocks = {k: v for k, v in cube.state_dict().items() if k.startswith("blocks.")}
    assert len(blocks) == 12  # 2 GroupNorms, the mixer's w1, b1, w2, b2, the MLP's two layers
    for key, value in blocks.items():
        torch.testing.assert_close(value, source.state_dict()[key], rtol=0, atol=0)
    with pytest.raises(ConfigError) as error:
        copy_components(cube, source.state_dict(), ["blocks", "embed"], True, "pre.pt")
    assert str(error.value) == ("init.components: embed: patch_embed.0.weight is (11, 5, 4, 4) in pre.pt but "
                                "(12, 6, 4, 4, 4) in this model")
    steady = dpot(t_in=1)
    before = steady.state_dict()["time_agg.weight"].clone()
    with pytest.raises(ConfigError, match=r"^init.components: time_agg: time_agg.weight is \(3, 16, 16\) in pre.pt "
                                          r"but \(1, 16, 16\) in this model$"):
        copy_components(steady, source.state_dict(), ["blocks", "time_agg"], True, "pre.pt")
    assert torch.equal(steady.state_dict()["time_agg.weight"], before)  # nothing copied by a failed call
    assert not torch.equal(steady.state_dict()["blocks.0.mixer.w1"], source.state_dict()["blocks.0.mixer.w1"])
    copy_components(steady, source.state_dict(), ["blocks"], True, "pre.pt")
    assert torch.equal(steady.state_dict()["blocks.0.mixer.w1"], source.state_dict()["blocks.0.mixer.w1"])
    deeper = dpot(depth=2)
    with pytest.raises(ConfigError, match=r"^init.components: blocks: blocks.1.norm1.weight is absent in pre.pt but "
                                          r"\(16,\) in this model$"):
        copy_components(deeper, source.state_dict(), ["blocks"], True, "pre.pt")


@pytest.mark.parametrize("init, message", [
    ({"checkpoint": "x", "components": ["mixer"]},
     "init.components[0]: expected one of 'embed', 'pos', 'time_agg', 'blocks', 'head', got 'mixer'"),
    ({"components": ["blocks"]}, "init.components: only used with init.checkpoint"),
    ({"checkpoint": "x", "components": ["blocks", "blocks"]}, "init.components: 'blocks' is given twice"),
    ({"checkpoint": "x", "components": []}, "init.components: empty; name some of embed, pos, time_agg, blocks, head"),
    ({"checkpoint": ""}, "init.checkpoint: expected a run directory or a checkpoint file, got ''"),
])
def test_bad_init_sections_are_one_line_errors(init, message):
    with pytest.raises(ConfigError) as error:
        config_from_dict({"init": init})
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_missing_and_foreign_sources_and_other_models_are_one_line_errors(tmp_path, heat_file, toy_file,
                                                                          tiny_config):
    missing = tmp_path / "nope.pt"
    with pytest.raises(CheckpointError, match=f"^init.checkpoint: {missing}: no such checkpoint$"):
        Trainer(run_config(heat_file, init={"checkpoint": str(missing)}), tmp_path / "a")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"^init.checkpoint: .*empty: holds no best.pt"):
        Trainer(run_config(heat_file, init={"checkpoint": str(tmp_path / "empty")}), tmp_path / "b")
    gt = tmp_path / "gt"
    train(config_from_dict(tiny_config(toy_file, epochs=1)), gt)
    with pytest.raises(ConfigError, match=r"^init.checkpoint: .*best.pt holds a galerkin_transformer_1d model, "
                                          r"not DPOT \(dpot2d, dpot3d\)$"):
        Trainer(run_config(heat_file, init={"checkpoint": str(gt)}), tmp_path / "c")
    config = config_from_dict({**tiny_config(toy_file), "init": {"checkpoint": str(gt)}})
    with pytest.raises(ConfigError, match=r"^init: copies components of DPOT models \(dpot2d, dpot3d\), not of "
                                          r"galerkin_transformer_1d$"):
        Trainer(config, tmp_path / "d")


def steady_config(path, init=None, t_in=1):
    """Tiny DPOT on the toy Darcy pairs (a -> u on 17 x 17: grid 17, patch 1)."""
    config = {"seed": 0, "model": {"name": "dpot2d", "in_channels": 1, "out_channels": 1,
                                   **{**TINY, "grid_size": 17, "patch_size": 1}, "periodic": False},
              "data": {"path": str(path), "n_train": 8, "n_val": 2, "n_test": 2},
              "optim": {"lr": 1e-3}, "schedule": {"name": "constant"},
              "train": {"epochs": 1, "batch_size": 4, "num_threads": 1}, "rollout": {"t_in": t_in, "t_out": 1}}
    if init is not None:
        config["init"] = init
    return config_from_dict(config)


def test_a_time_model_on_operator_pairs_takes_one_frame_and_gets_pre_trained_blocks(tmp_path, darcy_file,
                                                                                   pretrained):
    trainer = Trainer(steady_config(darcy_file, {"checkpoint": str(pretrained), "components": ["blocks"]}),
                      tmp_path / "steady")
    surrogate = trainer.surrogate.double()
    source = load_checkpoint(pretrained / "best.pt")["state_dict"]
    blocks = {key: value for key, value in surrogate.model.state_dict().items() if key.startswith("blocks.")}
    assert surrogate.one_frame and len(blocks) == 12
    assert all(torch.equal(value, source[f"model.{key}"].double()) for key, value in blocks.items())
    x = torch.randn(3, 17, 17, 1, dtype=torch.float64)
    with torch.no_grad():  # input (batch, n, n, channels) is one frame (batch, n, n, 1, channels), and back
        expected = surrogate.target_normalizer.decode(
            surrogate.model(surrogate.input_normalizer.encode(x).unsqueeze(-2)).squeeze(-2))
        torch.testing.assert_close(surrogate(x), expected, rtol=0, atol=0)
    with pytest.raises(ConfigError, match=r"^rollout.t_in/t_out: are 3/1 but .*toy_darcy.h5 holds input -> target "
                                          r"pairs, which a time model takes as one frame to one: set both to 1$"):
        Trainer(steady_config(darcy_file, t_in=3), tmp_path / "three")
