"""``opformer export RUN DIR --format onnx``: every model family's graph in onnxruntime against torch (relative L2 at
most 1e-5 in float32, two batch sizes, two grids where the model runs on any), the CLI's folder, and the refusals."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from opformer import __version__
from opformer.cli import main
from opformer.data.store import read_arrays
from opformer.errors import ConfigError
from opformer.imports.onnx_graph import input_shape, relative_l2, write_graph
from opformer.nn.spectral import SpectralConv
from opformer.models.surrogate import Surrogate
from opformer.runs import Run

from tests.imports.onnx_families import FAMILIES, surrogate
from tests.imports.test_hub import one_line_error
from tests.imports.test_repository import trained  # noqa: F401 (a fixture)

README = Path(__file__).resolve().parents[2] / "README.md"
#: the families tested on their second grid too (one per kind of layer; the benchmark runs every family on both)
TWO_GRIDS = ("gt_1d", "gt_2d", "fno2d", "fno3d_time", "ffno2d", "factformer2d", "dil_resnet2d")
CASES = [(name, grid) for name, (_, grids) in FAMILIES.items() for grid in grids[:2 if name in TWO_GRIDS else 1]]


def onnx_output(path, x: torch.Tensor) -> torch.Tensor:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return torch.from_numpy(session.run(["y"], {"x": x.numpy()})[0])


@pytest.mark.slow
@pytest.mark.parametrize("name, grid", CASES, ids=[f"{n}-{'x'.join(map(str, g))}" for n, g in CASES])
def test_every_family_runs_in_onnxruntime_as_in_torch(name, grid, tmp_path):
    model = surrogate(name, grid)
    write_graph(model, tmp_path / "model.onnx")
    operators = {node.op_type for node in onnx.load(str(tmp_path / "model.onnx")).graph.node}
    assert not operators & {"DFT", "STFT"}  # spectral layers as matrix products
    generator = torch.Generator().manual_seed(1)
    for batch in (1, 4):
        x = model.input_normalizer.decode(torch.randn(input_shape(model, batch), generator=generator))
        with torch.no_grad():
            expected = model(x)
        got = onnx_output(tmp_path / "model.onnx", x)
        assert got.shape == expected.shape
        assert relative_l2(got, expected) <= 1e-5


@pytest.mark.slow
def test_the_cli_writes_the_graph_its_metadata_and_card_beside_the_repository(trained, tmp_path, capsys,  # noqa: F811
                                                                              monkeypatch):
    run, data = trained
    out = tmp_path / "shared" / "gt"  # the README's folder
    assert main(["export", str(run), str(out), "--format", "onnx", "--opset", "17"]) == 0
    assert "model.onnx" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.onnx", "model.safetensors"]
    assert main(["import", "opformer", str(out), "--out", str(tmp_path / "back")]) == 0  # still a repository
    graph = onnx.load(str(out / "model.onnx"))
    assert [o.version for o in graph.opset_import if o.domain == ""] == [17]
    described = json.loads((out / "config.json").read_text())["onnx"]
    assert described["opset"] == 17 and described["input_shape"] == ["batch", 17, 17, 1]
    assert described["sha256"] == hashlib.sha256((out / "model.onnx").read_bytes()).hexdigest()
    props = {p.key: p.value for p in graph.metadata_props}
    spec = Run(run).surrogate.spec["data"]
    assert props["opformer_version"] == __version__
    assert props["input_channels"] == '["a"]' and props["target_channels"] == '["u"]'
    assert props["grid"] == str(list(spec["stored_shape"])).replace(" ", "").replace(",", ", ")
    assert props["t_in"] == "null" and props["model"] == "galerkin_transformer_2d"
    x = torch.from_numpy(read_arrays(data, slice(None))[0]).float()
    surrogate, _ = Run(run).model("best")
    with torch.no_grad():
        expected = surrogate(x)  # physical units in and out: the normalizers (point-wise here) are in the graph
    assert relative_l2(onnx_output(out / "model.onnx", x), expected) <= 1e-5
    card = (out / "README.md").read_text()
    assert "ort.InferenceSession(\"model.onnx\"" in card and "Ort::Session" in card and "InferenceSession(" in card
    assert "(batch, 17, 17, 1)" in card
    (snippet,) = re.findall(r"```py\n(.*?)```", README.read_text(), flags=re.S)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(snippet, str(README), "exec"), scope)  # the README's five lines, as written
    assert scope["y"].shape == (8, 17, 17, 1) and np.isfinite(scope["y"]).all()


@pytest.mark.slow
def test_a_graph_the_exporter_cannot_build_is_refused_naming_the_operator(tmp_path, monkeypatch):
    """The FFT form of a 3D spectral layer does not export (complex tensors); the matrix form is what exports."""
    monkeypatch.setattr(SpectralConv, "_forward_matrices", SpectralConv._forward_fft)
    with pytest.raises(ConfigError) as refused:
        write_graph(surrogate("fno3d_time", (6, 6, 6)), tmp_path / "model.onnx")
    message = str(refused.value)
    assert "\n" not in message and message.startswith("fno3d_time: the ONNX graph cannot be exported: operator aten.")
    assert "pip install 'opformer[onnx]'" in message
    assert list(tmp_path.iterdir()) == []


class _NoDFT:
    """An onnxruntime that lacks a kernel (as older ones lack opset 20's DFT)."""

    def __init__(self, *args, **kwargs) -> None:
        raise RuntimeError("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for "
                           "DFT(20) node with name 'node_DFT_3'")


@pytest.mark.slow
def test_a_graph_the_runtime_cannot_run_is_refused_and_no_folder_is_left(trained, tmp_path, capsys,  # noqa: F811
                                                                          monkeypatch):
    run, _ = trained
    monkeypatch.setattr(onnxruntime, "InferenceSession", _NoDFT)
    out = tmp_path / "exported"
    one_line_error(capsys, ["export", str(run), str(out), "--format", "onnx"], "galerkin_transformer_2d",
                   "cannot be loaded by onnxruntime", "operator DFT", "pip install 'opformer[onnx]'")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor a temporary one


@pytest.mark.parametrize("missing", ["onnx", "onnxruntime", "onnxscript"])
def test_a_missing_package_names_the_extra(missing, trained, tmp_path, capsys, monkeypatch):  # noqa: F811
    run, _ = trained
    monkeypatch.setitem(sys.modules, missing, None)
    one_line_error(capsys, ["export", str(run), str(tmp_path / "x"), "--format", "onnx"],
                   f"--format onnx: the {missing} package is missing; pip install 'opformer[onnx]'")
    assert not (tmp_path / "x").exists()


def test_the_graph_input_shape_follows_the_data_signature():
    assert input_shape(surrogate("fno2d", (16, 16)), 3) == (3, 16, 16, 2)
    assert input_shape(surrogate("dpot2d_member", (16, 16)), 1) == (1, 16, 16, 3, 2)
    assert np.prod(input_shape(surrogate("gt_1d", (32,)), 5)) == 5 * 32


MESH_MODELS = {
    "gt_mesh_quadrature": {"name": "galerkin_transformer_mesh", "d_model": 16, "n_head": 2, "n_layers": 1,
                           "dim_ff": 16, "decoder_width": 8},
    "ft_mesh_uniform": {"name": "galerkin_transformer_mesh", "attention_type": "fourier", "weighting": "uniform",
                        "d_model": 16, "n_head": 2, "n_layers": 1, "dim_ff": 16, "decoder_width": 8},
    "transolver_quadrature": {"name": "transolver", "n_hidden": 16, "n_head": 2, "n_layers": 1, "slice_num": 4,
                              "weighting": "quadrature"},
    "mesh_mlp": {"name": "mesh_mlp", "width": 16, "n_layers": 2},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MESH_MODELS))
@pytest.mark.parametrize("in_channels", [0, 2])
def test_a_mesh_surrogate_runs_in_onnxruntime_with_any_batch_and_point_count(name, in_channels, tmp_path):
    from opformer.imports.onnx_graph import example_inputs

    torch.manual_seed(0)
    spec = {"model": {**MESH_MODELS[name], "in_channels": in_channels, "out_channels": 3}, "normalize_input": "channel",
            "normalize_target": "channel",
            "data": {"layout": "mesh", "space_dim": 2, "input_channels": [f"a{i}" for i in range(in_channels)],
                     "target_channels": ["u0", "u1", "u2"]}}
    model = Surrogate.from_spec(spec).eval()
    write_graph(model, tmp_path / "model.onnx")
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["x", "pos", "weights", "mask"]
    generator = torch.Generator().manual_seed(1)
    for batch in (1, 5):  # 4 and 16 points, the last sample padded
        inputs = example_inputs(model, batch, generator)
        with torch.no_grad():
            expected = model(*inputs.values())
        got = torch.from_numpy(session.run(["y"], {k: v.numpy() for k, v in inputs.items()})[0])
        assert got.shape == expected.shape == (batch, 3 * batch + 1, 3)
        assert relative_l2(got, expected) <= 1e-5
        assert torch.all(got[~inputs["mask"]] == 0)  # padding gives zeros, as in torch
