"""FactFormer equals the authors' code (BaratiLab/FactFormer) with mapped weights, in float64, for their 2D time
model, their 3D turbulence and smoke models and their steady Darcy model (fixtures made by
tests/fixtures/import_fixtures_factformer.py), and ``opformer import factformer`` reads their trainer's checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from opformer.cli import main
from opformer.errors import CheckpointError
from opformer.imports import factformer
from opformer.imports.convert import convert_file
from opformer.models.registry import build_model
from opformer.runs import Run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
CASES = ["ns2d", "ns3d", "smoke3d", "darcy"]


def fixture(case: str) -> tuple[dict[str, torch.Tensor], dict, torch.Tensor, torch.Tensor]:
    """Their state dict, their YAML config, the input and their output (float64) of a case."""
    tensors = load_file(FIXTURES / f"factformer_{case}.safetensors")
    state = {k.removeprefix("model."): v for k, v in tensors.items() if k.startswith("model.")}
    config = yaml.safe_load((FIXTURES / f"factformer_{case}.yml").read_text())
    return state, config, tensors["input"], tensors["output"]


def their_checkpoint(tmp_path, state: dict[str, torch.Tensor], name: str = "checkpoint_final.pth", **extra):
    """A file as their trainers save it: model, AdamW and OneCycleLR state dicts after one step, ``n_iter``."""
    params = [torch.nn.Parameter(v.float().clone()) for v in state.values() if v.is_floating_point()]
    optimizer = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-3, total_steps=10, div_factor=1e4)
    sum(p.sum() for p in params).backward()
    optimizer.step()
    scheduler.step()
    path = tmp_path / name
    torch.save({"model": {k: v.float() for k, v in state.items()}, "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "n_iter": 1, **extra}, path)
    return path


def write_config(tmp_path, config: dict, name: str = "their.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("case", CASES)
def test_outputs_equal_the_authors_code_in_float64(case):
    state, config, x, expected = fixture(case)
    ours_config, _ = factformer.infer_config(state, config["model"], case)
    model = build_model(ours_config).double().eval()
    model.load_state_dict(factformer.convert(state, ours_config, case))
    with torch.no_grad():
        y = model(x)
    assert y.shape == expected.shape
    assert (y - expected).norm() / expected.norm() < 1e-13  # measured 2e-16 .. 2e-15
    # the same parameters (frozen Fourier matrices aside: their nn.Parameter, opformer's buffer)
    theirs = sum(v.numel() for k, v in state.items() if not k.endswith(("._B", ".inv_freq")))
    assert sum(p.numel() for p in model.parameters()) == theirs


def test_the_config_picks_their_script_and_sizes():
    state, config, _, _ = fixture("smoke3d")
    ours, notes = factformer.infer_config(state, config["model"], "smoke.yml")
    assert ours == {"name": "factformer3d", "t_in": 2, "t_out": 2, "in_channels": 4, "out_channels": 4,
                    "d_model": 16, "n_head": 2, "head_dim": 4, "kernel_multiplier": 3, "n_layers": 2,
                    "fourier_scale": 1.0, "length": 8.0, "periodic": False, "latent_dim": 24, "decoder_groups": 12,
                    "lift": "channelwise", "cnn_layers": 2, "padding": 2}
    assert "the 2 padding cells at the grid's spacing (theirs: 8 / n)" in notes
    state3, config3, _, _ = fixture("ns3d")  # their turbulence script: GroupNorm(8), 'latent_mutliplier'
    ours3, _ = factformer.infer_config(state3, config3["model"], "ns3d.yml")
    assert (ours3["decoder_groups"], ours3["latent_dim"], ours3.get("cnn_layers", 0)) == (8, 24, 0)


def test_the_cli_imports_their_checkpoint_and_the_run_predicts_as_theirs(tmp_path, capsys):
    state, config, x, expected = fixture("ns2d")
    checkpoint = their_checkpoint(tmp_path, state)
    yml = FIXTURES / "factformer_ns2d.yml"
    out = tmp_path / "run"
    assert main(["import", "factformer", str(checkpoint), "--config", str(yml), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "factformer2d, 10,225 parameters; their ns2d model, coordinates linspace(0, 6.28319, n)" in printed
    run = Run(out).config
    assert run.imported.format == "factformer" and run.model["t_in"] == 3 and run.model["lift"] == "linear"
    # the 10,225 tensors less the two frozen 2 x 8 Fourier matrices (their nn.Parameter, opformer's buffer)
    assert json.loads((out / "summary.json").read_text())["parameters"] == 10193
    surrogate, _ = Run(out).model("best")
    with torch.no_grad():
        y = surrogate(x.float())
    assert (y.double() - expected).norm() / expected.norm() < 1e-5  # float32 weights


def test_a_scheduler_pickled_by_an_older_torch_is_not_loaded(tmp_path):
    """torch < 2.2 pickled OneCycleLR's bound ``anneal_func`` (and with it the scheduler and its optimizer)."""
    state, config, _, _ = fixture("darcy")
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))])
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-3, total_steps=10)
    path = tmp_path / "old.pth"
    torch.save({"model": state, "scheduler": {"anneal_func": scheduler._annealing_cos}, "n_iter": 5}, path)
    imported = convert_file("factformer", path, config=str(FIXTURES / "factformer_darcy.yml"))
    assert imported.config["name"] == "factformer2d_steady" and imported.config["cnn_layers"] == 2


def failure(tmp_path, capsys, checkpoint, config) -> str:
    out = tmp_path / "bad"
    args = ["import", "factformer", str(checkpoint), "--out", str(out)] + (["--config", str(config)] if config else [])
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not out.exists()
    return err


def test_bad_files_and_configs_are_one_line_errors(tmp_path, capsys):
    state, config, _, _ = fixture("ns3d")
    yml = FIXTURES / "factformer_ns3d.yml"
    good = their_checkpoint(tmp_path, state)
    assert "give the authors' YAML config it was trained with as --config FILE" in failure(tmp_path, capsys, good,
                                                                                            None)
    missing = dict(state)
    del missing["encoder.layers.1.1.to_v.weight"]
    err = failure(tmp_path, capsys, their_checkpoint(tmp_path, missing, "missing.pth"), yml)
    assert "missing key 'encoder.layers.1.1.to_v.weight' (expected shape (8, 16))" in err
    wrong = {**state, "expand_latent.weight": torch.zeros(24, 17)}
    err = failure(tmp_path, capsys, their_checkpoint(tmp_path, wrong, "wrong.pth"), yml)
    assert "expand_latent.weight has shape (24, 17), expected (24, 16)" in err
    rope = {**state, "encoder.layers.0.1.low_rank_kernel_x.pos_emb.inv_freq": torch.ones(6)}
    err = failure(tmp_path, capsys, their_checkpoint(tmp_path, rope, "rope.pth"), yml)
    assert "low_rank_kernel_x.pos_emb.inv_freq is not RoPE's 10000^(-2j/12)" in err
    one_d = write_config(tmp_path, {"model": {**config["model"], "pos_in_dim": 1}})
    assert "pos_in_dim 1 with in_time_window is none of their models" in failure(tmp_path, capsys, good, one_d)
    no_depth = {k: v for k, v in config["model"].items() if k != "depth"}
    no_depth_file = write_config(tmp_path, {"model": no_depth})
    assert "model key 'depth' is missing" in failure(tmp_path, capsys, good, no_depth_file)
    assert "no 'model' section" in failure(tmp_path, capsys, good, write_config(tmp_path, {"data": {}}, "d.yml"))
    not_theirs = tmp_path / "plain.pth"
    torch.save(state, not_theirs)
    assert "expected the authors' {'model': state_dict, ...}" in failure(tmp_path, capsys, not_theirs, yml)
    assert main(["import", "dpot", str(good), "--config", str(yml), "--out", str(tmp_path / "x")]) == 2
    assert "--config: only used with format factformer or galerkin-transformer" in capsys.readouterr().err


def test_a_run_of_the_layout_before_the_authors_is_a_one_line_error(tmp_path):
    """A checkpoint of opformer's FactFormer before the authors' layout (biases in the blocks' output networks)."""
    from opformer.imports.convert import import_run
    from opformer.runs import checksum, load_checkpoint

    state, _, _, _ = fixture("ns2d")
    out = import_run("factformer", their_checkpoint(tmp_path, state), tmp_path / "run",
                     config=str(FIXTURES / "factformer_ns2d.yml"))[0]
    path = out / "best.pt"
    payload = torch.load(path, weights_only=True)
    payload["state_dict"]["model.encoder.blocks.0.out.0.bias"] = torch.zeros(16)
    payload["checksum"] = checksum(payload)
    torch.save(payload, path)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert str(info.value) == (
        f"{path}: a FactFormer of opformer's earlier layout (biases in every block's output network: it has "
        "model.encoder.blocks.0.out.0.bias), which does not load; retrain it with this version, or import the "
        "authors' weights with 'opformer import factformer'")
    with pytest.raises(CheckpointError, match="opformer's earlier layout"):
        Run(path.parent).model()
