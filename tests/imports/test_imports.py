"""``opformer import``: foreign weights give the reference implementations' outputs, on the committed fixtures.

The fixtures (tests/fixtures/imports/, made by tests/fixtures/import_fixtures.py from the DPOT authors' code, the
Galerkin Transformer package and neuraloperator 2.0) hold each reference's file as it writes it, an input and
the reference's outputs in float32 and float64 (and, for the tiny DPOT, the gradients of a loss).
"""

import argparse
import fractions
import importlib
import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import torch

import opformer
from opformer.cli import build_parser, main
from opformer.cli.importing import FORMATS as CLI_FORMATS
from opformer.config import ImportFormat, config_from_dict
from opformer.errors import CheckpointError, ConfigError
from opformer.imports import dpot, galerkin, neuraloperator
from opformer.imports.convert import build_surrogate, convert_file, import_run
from opformer.imports.formats import FILE_FORMATS, FORMATS
from opformer.models.registry import build_model
from opformer.runs import Run
from opformer.train.trainer import Trainer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
CONVERT = {"dpot": dpot.convert, "galerkin-transformer": galerkin.convert, "neuraloperator": neuraloperator.convert}


def io(name):
    return torch.load(FIXTURES / f"{name}_io.pt", weights_only=True)


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def float64_model(fmt, imported):
    """opformer's model of an import in float64, converted from the file's tensors cast to float64."""
    model = build_model(imported.config).double()
    state = {k: v.to(torch.complex128 if v.is_complex() else torch.float64) for k, v in imported.source.items()}
    model.load_state_dict(CONVERT[fmt](state, imported.config, "fixture"))
    return model.eval()


def convert(fmt, name, **options):
    """Convert a fixture file; keep the file's own tensors on the result (for the float64 model)."""
    path = FIXTURES / name
    imported = convert_file(fmt, path, **options)
    if fmt == "dpot":
        imported.source = dpot.read_dpot(path)[0]
    elif fmt == "neuraloperator":
        imported.source = neuraloperator.read_neuraloperator_weights(path)[0]
    else:
        imported.source = galerkin.read_galerkin(path, options.get("config"))[0]
    return imported


def test_the_cli_lists_the_formats_of_the_registry_and_each_has_its_converter():
    (sub,) = [a for a in build_parser()._actions if a.dest == "command"]
    (fmt,) = [a for a in sub.choices["import"]._actions if a.dest == "format"]
    assert list(fmt.choices) == list(CLI_FORMATS) == list(FORMATS)
    assert set(typing.get_args(ImportFormat)) == set(FILE_FORMATS) == set(FORMATS) - {"opformer"}
    for name in FILE_FORMATS:
        assert callable(importlib.import_module(f"opformer.imports.{FORMATS[name].module}").import_file)
    with pytest.raises(ConfigError, match="format 'onnx': expected one of dpot, factformer"):
        convert_file("onnx", "model.onnx")


@pytest.mark.slow
def test_the_parser_imports_no_models():
    code = ("import sys; from opformer.cli import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m.startswith(('opformer.models', 'opformer.imports.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(opformer.__file__).parents[1])}).stdout
    assert out.strip() == "['opformer.imports.formats']"


# --- DPOT -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["dpot_tiny", "dpot_small", "dpot3d_small"])
def test_dpot_outputs_equal_the_authors_code(name):
    imported = convert("dpot", f"{name}.pth")
    data = io(name)
    model = build_surrogate(imported).model
    double = float64_model("dpot", imported)
    with torch.no_grad():
        z, z64 = model.encode(data["input"]), double.encode(data["input"].double())
        assert rel(model.decode(z), data["output32"]) < 1e-5
        assert rel(double.decode(z64), data["output64"]) < 1e-10
        if "cls32" in data:  # the data-set classifier's logits too
            assert rel(model.classify(z), data["cls32"]) < 1e-5
            assert rel(double.classify(z64), data["cls64"]) < 1e-10


def test_dpot_sizes_are_inferred_from_the_tensors():
    tiny = convert_file("dpot", FIXTURES / "dpot_tiny.pth")
    assert tiny.config == {"name": "dpot2d", "t_in": 4, "t_out": 1, "in_channels": 4, "out_channels": 4,
                           "patch_size": 4, "grid_size": 16, "width": 16, "depth": 2, "n_heads": 2, "head_width": 8,
                           "modes": 32, "n_classes": 12, "modes_kept": "positive", "mlp_ratio": 1}
    assert tiny.preset == "custom" and tiny.notes == ["modes 32 (args.modes)"]
    assert tiny.data["t_in"] == 4 and tiny.data["stored_shape"] == [16, 16]
    # in 3 -> out 2 channels (the first patch convolution is out * P + 3 wide), 2 frames out, 3 of 4 modes
    small = convert_file("dpot", FIXTURES / "dpot_small.pth")
    assert {k: small.config[k] for k in ("in_channels", "out_channels", "t_in", "t_out", "embed_width", "modes",
                                         "mlp_ratio", "n_classes")} == \
        {"in_channels": 3, "out_channels": 2, "t_in": 3, "t_out": 2, "embed_width": 11, "modes": 3, "mlp_ratio": 2,
         "n_classes": 5}
    cube = convert_file("dpot", FIXTURES / "dpot3d_small.pth")
    assert cube.config["name"] == "dpot3d" and cube.config["last_modes"] == 8 and cube.preset == "3D"
    # --modes overrides args.modes
    assert convert_file("dpot", FIXTURES / "dpot_small.pth", modes=4).config["modes"] == 4


def test_the_authors_mode_selection_is_needed_where_it_drops_modes():
    """At modes 3 on a 4x4 latent grid, [:3, :3] (positive frequencies) is not opformer's symmetric choice."""
    imported = convert_file("dpot", FIXTURES / "dpot_small.pth")
    symmetric = build_model({**imported.config, "modes_kept": "both_signs"})
    symmetric.load_state_dict(imported.state)
    with torch.no_grad():
        assert rel(symmetric(io("dpot_small")["input"]), io("dpot_small")["output32"]) > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("size,width,depth,heads,ratio,head", [("Ti", 512, 4, 4, 1, 32), ("L", 1536, 24, 16, 4, 128)])
def test_the_released_sizes_are_named(size, width, depth, heads, ratio, head):
    """The preset of a released checkpoint is read off its shapes (no weights needed: shapes only)."""
    config = {"name": "dpot2d", "t_in": 10, "t_out": 1, "in_channels": 4, "patch_size": 8, "grid_size": 128,
              "width": width, "depth": depth, "n_heads": heads, "mlp_ratio": ratio, "head_width": head,
              "n_classes": 12, "modes": 32}
    shapes = {}
    for rule in dpot.rules(config):
        with torch.device("meta"):
            target = build_model(config).state_dict()[rule.target]
        shapes[rule.source] = torch.empty(rule.source_shape(tuple(target.shape)), device="meta")
    inferred, label, notes = dpot.infer_config(shapes, None, "model.pth")
    assert label == size and inferred["n_heads"] == heads and inferred["head_width"] == head
    assert f"the sizes of opformer's preset dpot_{size.lower()}" in notes


def test_dpot_gradients_equal_the_authors_code():
    imported = convert("dpot", "dpot_tiny.pth")
    data = io("dpot_tiny")
    model = float64_model("dpot", imported)
    (model(data["input"].double()) * data["loss_weights"]).sum().backward()
    parameters = dict(model.named_parameters())
    checked = 0
    for rule in dpot.rules(imported.config):
        if rule.source in data["grads64"]:
            assert rel(parameters[rule.target].grad, rule.convert(data["grads64"][rule.source])) < 1e-10, rule.source
            checked += 1
    assert checked == len(data["grads64"]) == len(parameters) - 6  # all but the classifier's 6 tensors


def authors_file(tmp_path, state, **extra):
    """A checkpoint as the authors' fine-tuning saves it: args, model and optimizer."""
    path = tmp_path / "model.pth"
    params = [torch.nn.Parameter(v.clone()) for v in state.values()]
    optimizer = torch.optim.Adam(params)
    params[0].grad = torch.ones_like(params[0])
    optimizer.step()
    torch.save({"args": argparse.Namespace(modes=32, T_bundle=1, act="gelu", normalize=0, train_paths=["a", "b"]),
                "model": state, "optimizer": optimizer.state_dict(), **extra}, path)
    return path


def test_a_fine_tuned_checkpoint_with_args_and_optimizer_imports(tmp_path):
    state, _ = dpot.read_dpot(FIXTURES / "dpot_tiny.pth")
    path = authors_file(tmp_path, {f"module.{k}": v for k, v in state.items()})  # their data-parallel prefix
    imported = convert_file("dpot", path)
    assert imported.config == convert_file("dpot", FIXTURES / "dpot_tiny.pth").config
    for key, value in convert_file("dpot", FIXTURES / "dpot_tiny.pth").state.items():
        torch.testing.assert_close(imported.state[key], value, rtol=0, atol=0)


def fails(tmp_path, error, match, fmt, path, **options):
    """The import is refused with a one-line error and writes nothing."""
    out = tmp_path / "out"
    with pytest.raises(error) as info:
        import_run(fmt, path, out, **options)
    message = str(info.value)
    assert len(message.splitlines()) == 1 and match in message, message
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    return message


def test_bad_dpot_files_are_one_line_errors_naming_the_key(tmp_path):
    state, _ = dpot.read_dpot(FIXTURES / "dpot_tiny.pth")
    with_extra = authors_file(tmp_path, {**state, "extra.weight": torch.zeros(3)})
    fails(tmp_path, CheckpointError, "unexpected key 'extra.weight' (3,)", "dpot", with_extra)
    missing = authors_file(tmp_path, {k: v for k, v in state.items() if k != "blocks.1.norm2.bias"})
    fails(tmp_path, CheckpointError, "missing key 'blocks.1.norm2.bias' (expected shape (16,))", "dpot", missing)
    wrong = authors_file(tmp_path, {**state, "out_layer.2.weight": torch.zeros(8, 8, 2, 2)})
    fails(tmp_path, CheckpointError, "out_layer.2.weight has shape (8, 8, 2, 2), expected (8, 8, 1, 1)", "dpot", wrong)
    adain = authors_file(tmp_path, {**state, "scale_feats_mu.weight": torch.zeros(16, 8)})
    fails(tmp_path, CheckpointError, "normalize=True", "dpot", adain)
    no_model = tmp_path / "other.pth"
    torch.save({"state_dict": state}, no_model)
    fails(tmp_path, CheckpointError, "expected the authors' {'model': state_dict, ...}", "dpot", no_model)


def test_a_file_that_asks_for_other_code_is_refused(tmp_path):
    state, _ = dpot.read_dpot(FIXTURES / "dpot_tiny.pth")
    path = authors_file(tmp_path, state, extra=fractions.Fraction(1, 3))  # any global but argparse.Namespace
    message = fails(tmp_path, CheckpointError, "refused: it asks to unpickle fractions.Fraction", "dpot", path)
    assert message.endswith("only tensors, plain values, argparse.Namespace are read from a weights file (no code "
                            "from it is run)")
    not_torch = tmp_path / "text.pth"
    not_torch.write_text("hello")
    fails(tmp_path, CheckpointError, "not a readable weights file", "dpot", not_torch)


def test_the_cli_writes_the_run_and_reports_errors_in_one_line(tmp_path, capsys):
    out = tmp_path / "ti"
    assert main(["import", "dpot", str(FIXTURES / "dpot_tiny.pth"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "dpot2d (custom), 9,043 parameters; modes 32 (args.modes)" in printed and f"wrote {out}" in printed
    config = Run(out).config
    assert config.imported.format == "dpot" and config.imported.source == str(FIXTURES / "dpot_tiny.pth")
    import hashlib
    assert config.imported.sha256 == hashlib.sha256((FIXTURES / "dpot_tiny.pth").read_bytes()).hexdigest()
    record = json.loads((out / "run.json").read_text())["sessions"][0]
    assert record["imported"]["sha256"] == config.imported.sha256 and record["command"]
    assert json.loads((out / "summary.json").read_text())["parameters"] == 9043
    # the same folder again: refused before reading anything
    assert main(["import", "dpot", str(FIXTURES / "dpot_tiny.pth"), "--out", str(out)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main(["import", "dpot", str(FIXTURES / "gt_small.pt"), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "expected the authors'" in err and not (tmp_path / "x").exists()
    assert main(["import", "neuraloperator", str(FIXTURES / "fno1d_small.pt"), "--out", str(tmp_path / "y"),
                 "--modes", "3"]) == 2
    assert "--modes: only used with format dpot" in capsys.readouterr().err


# --- the run directory in use -----------------------------------------------------------------------------------

@pytest.fixture
def dpot_run(tmp_path):
    return import_run("dpot", FIXTURES / "dpot_tiny.pth", tmp_path / "imported")[0]


@pytest.mark.slow
def test_an_imported_dpot_is_evaluated_on_a_member_padded_and_resized(tmp_path, capsys, dpot_run):
    from tests.toy_data import write_toy_heat
    from opformer.data.resize import resize
    from opformer.eval.mixture import imported_member, member_rollout

    heat = write_toy_heat(tmp_path / "heat32.h5", samples=2, n=32, frames=8)  # 1 channel at 32^2, model: 4 at 16^2
    code = main(["evaluate", str(dpot_run), "--data", str(heat), "--frames", "2", "--json", str(tmp_path / "e.json")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "note: channels u padded with 3 zero channels to the model's 4 (errors over the real ones)" in out
    assert "note: frames resized 32x32 -> 16x16 for the model (its img_size)" in out
    (row,) = json.loads((tmp_path / "e.json").read_text())["results"]
    assert row["samples"] == 2 and row["stored_shape"] == [32, 32] and row["trained_at"] == [16, 16]
    # the first predicted frame is the model's on the padded window resized to 16^2, resized back to 32^2
    surrogate, _, member, step, _ = imported_member(dpot_run, heat, frames=1, device="cpu")
    predicted = member_rollout(step, member, 4, 2, torch.device("cpu")).predictions[:, 0]
    window = member.fields[:, :4].movedim(1, -2)
    with torch.no_grad():
        expected = resize(surrogate.model(resize(window, 1, (16, 16), ("periodic",) * 2)), 1, (32, 32),
                          ("periodic",) * 2)[..., 0, :] * torch.tensor([1.0, 0, 0, 0])
    torch.testing.assert_close(predicted, expected.float(), rtol=1e-5, atol=1e-6)
    assert main(["plot", str(dpot_run), "--data", str(heat), "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "rollout_heat32.png").is_file()
    assert main(["evaluate", str(dpot_run)]) == 2
    assert "give the data to evaluate them on with --data FILE" in capsys.readouterr().err


def test_fine_tuning_from_an_imported_dpot_equals_the_native_model_with_its_weights(tmp_path, heat_file, dpot_run):
    """One training step from ``init: {checkpoint: RUN}`` equals one step of opformer's DPOT built from the same
    config and given the converted weights directly (the classifier, never copied, is fresh in both)."""
    model = {k: v for k, v in Run(dpot_run).config.model.items() if k not in ("t_in", "t_out")}

    def config(init):
        return config_from_dict({
            "seed": 3, "model": model, "rollout": {"t_in": 4, "t_out": 1, "windows": "random"},
            "data": {"path": str(heat_file), "n_train": 6, "n_val": 2, "n_test": 2},
            "optim": {"lr": 1e-3}, "schedule": {"name": "constant"},
            "train": {"epochs": 1, "batch_size": 8, "num_threads": 1}, **({"init": init} if init else {})})

    fine = Trainer(config({"checkpoint": str(dpot_run)}), tmp_path / "fine")
    assert f"from {dpot_run}/best.pt (dpot weights imported from" in fine.init_note
    native = Trainer(config(None), tmp_path / "native")
    weights = convert_file("dpot", FIXTURES / "dpot_tiny.pth").state
    native.surrogate.model.load_state_dict({**native.surrogate.model.state_dict(),
                                            **{k: v for k, v in weights.items() if not k.startswith("classifier.")}})
    before = {k: v.clone() for k, v in native.surrogate.model.state_dict().items()}
    for key, value in fine.surrogate.model.state_dict().items():
        torch.testing.assert_close(value, before[key], rtol=0, atol=0)
    assert fine.task.steps_per_epoch() == 1 and fine.surrogate.padding == 3  # 1 heat channel, padded to 4
    fine.fit()
    native.fit()
    after = native.surrogate.model.state_dict()
    for key, value in fine.surrogate.model.state_dict().items():
        torch.testing.assert_close(value, after[key], rtol=1e-6, atol=1e-9)
    assert not torch.equal(after["blocks.0.mixer.w1"], before["blocks.0.mixer.w1"])  # a step was taken


def test_bench_takes_a_run_directory(dpot_run):
    from opformer.bench.cell import model_config, run_cell
    from opformer.bench.sweep import BenchSettings

    BenchSettings(models=[str(dpot_run)], resolutions=[16]).validate()
    assert model_config(str(dpot_run))["name"] == "dpot2d"
    result = run_cell({"preset": str(dpot_run), "implementation": "opformer", "resolution": 16, "batch": 1,
                       "mode": "forward", "repeats": 1, "warmup": 0, "threads": 1, "device": "cpu"})
    assert result["status"] == "ok" and result["parameters"] == 9043


def test_an_imported_run_cannot_be_resumed(dpot_run, capsys):
    assert main(["train", "--resume", str(dpot_run)]) == 2
    assert "holds imported dpot weights, not a training run" in capsys.readouterr().err


# --- Galerkin Transformer ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gt_small", "ft_small"])
def test_galerkin_transformer_outputs_equal_the_package_at_two_resolutions(name):
    imported = convert("galerkin-transformer", f"{name}.pt", config=str(FIXTURES / f"{name}.yaml"))
    model, double = build_surrogate(imported).model, float64_model("galerkin-transformer", imported)
    data = io(name)
    assert sorted(data) == [32, 64]
    for n, case in data.items():
        with torch.no_grad():
            assert rel(model(case["input"]), case["output32"]) < 1e-5, n
            assert rel(double(case["input"].double()), case["output64"]) < 1e-10, n


def test_galerkin_transformer_config_mapping():
    config, notes = galerkin.model_config(yaml_config("gt_small"), "gt.yaml")
    assert {k: config[k] for k in ("d_model", "n_layers", "n_head", "dim_ff", "attention_type", "norm_scheme",
                                    "decoder_width", "decoder_modes", "periodic")} == \
        {"d_model": 16, "n_layers": 2, "n_head": 2, "dim_ff": 32, "attention_type": "galerkin",
         "norm_scheme": "galerkin", "decoder_width": 8, "decoder_modes": 4, "periodic": False}
    burgers = {**yaml_config("gt_small"), "n_hidden": 96, "num_encoder_layers": 4, "n_head": 1,
               "dim_feedforward": 192, "freq_dim": 48, "fourier_modes": 16}
    config, _ = galerkin.model_config(burgers, "gt.yaml")
    assert sum(p.numel() for p in build_model(config).parameters()) == 530_305
    with pytest.raises(ConfigError, match=r"^gt.yaml: config spacial_fc: True is not supported"):
        galerkin.model_config({**burgers, "spacial_fc": True}, "gt.yaml")
    with pytest.raises(ConfigError, match="layer_norm and attn_norm are both set"):
        galerkin.model_config({**burgers, "layer_norm": True, "attn_norm": True}, "gt.yaml")


def yaml_config(name):
    import yaml
    return yaml.safe_load((FIXTURES / f"{name}.yaml").read_text())


@pytest.mark.slow
def test_galerkin_transformer_needs_its_config_and_checks_keys(tmp_path, toy_file, capsys):
    fails(tmp_path, ConfigError, "holds no config; give the SimpleTransformer config", "galerkin-transformer",
          FIXTURES / "gt_small.pt")
    state = torch.load(FIXTURES / "gt_small.pt", weights_only=True)
    state.pop("encoder_layers.1.attn.norm_V.1.bias")
    path = tmp_path / "gt.pt"
    torch.save({"state_dict": state, "config": yaml_config("gt_small")}, path)  # the config in the file
    fails(tmp_path, CheckpointError, "missing key 'encoder_layers.1.attn.norm_V.1.bias' (expected shape (8,))",
          "galerkin-transformer", path)
    # an imported GT runs on opformer's data: evaluate (its channel names need not match) and predict
    run = tmp_path / "gt_run"
    assert main(["import", "galerkin-transformer", str(FIXTURES / "gt_small.pt"), "--config",
                 str(FIXTURES / "gt_small.yaml"), "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(toy_file)]) == 0
    out = capsys.readouterr().out
    assert "(all split)" in out and "imported weights" in out
    assert main(["predict", str(run), "--input", str(toy_file), "--output", str(tmp_path / "p.h5")]) == 0
    assert main(["plot", str(run), "--data", str(toy_file), "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "predictions.png").is_file() and not (tmp_path / "plots" / "losses.png").exists()


# --- neuraloperator ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["fno1d_small", "fno2d_small"])
def test_neuraloperator_outputs_equal_the_package(name):
    imported = convert("neuraloperator", f"{name}.pt")
    model, double = build_surrogate(imported).model, float64_model("neuraloperator", imported)
    for n, case in io(name).items():
        with torch.no_grad():
            assert rel(model(case["input"]), case["output32"]) < 1e-5, n
            assert rel(double(case["input"].double()), case["output64"]) < 1e-10, n


def test_neuraloperator_metadata_is_read_without_importing_it(tmp_path):
    """The fixture's _metadata names torch.nn.functional.relu and neuralop's SpectralConv: read as placeholders."""
    _, metadata = neuraloperator.read_neuraloperator_weights(FIXTURES / "fno2d_small.pt")
    assert metadata["n_modes"] == (6, 4) and repr(metadata["conv_module"]) != "SpectralConv"
    assert "neuralop" not in __import__("sys").modules
    weights = neuraloperator.read_neuraloperator_weights(FIXTURES / "fno2d_small.pt")
    config, notes = neuraloperator.infer_config(*weights, "fno.pt")
    assert config == {"name": "fno2d", "in_channels": 1, "out_channels": 1, "width": 6, "modes": 3, "n_layers": 2,
                      "projection_width": 12, "activation": "relu", "length": 1.0, "periodic": True}
    state, metadata = neuraloperator.read_neuraloperator_weights(FIXTURES / "fno1d_small.pt")
    gelu = tmp_path / "gelu.pt"
    torch.save({**state, "_metadata": {**metadata, "non_linearity": torch.nn.functional.gelu,
                                       "conv_module": None}}, gelu)
    fails(tmp_path, CheckpointError, "gelu; only ReLU imports exactly",
          "neuraloperator", gelu)
    real = tmp_path / "real.pt"
    torch.save({**state, "fno_blocks.convs.0.weight.tensor": state["fno_blocks.convs.0.weight.tensor"].real}, real)
    fails(tmp_path, CheckpointError, "expected a complex tensor", "neuraloperator", real)
