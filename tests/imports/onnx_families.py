"""Small surrogates of every model family for the ONNX export's checks (tests/imports/test_onnx_export.py and
benchmarks/systems/onnx_equality.py): each a surrogate spec and the grids it is exported on (two where the model
runs on any grid; one where its weights fix it: DPOT's positional embedding)."""

from __future__ import annotations

from typing import Any

import torch

from opformer.models.surrogate import Surrogate

GT1 = {"d_model": 16, "n_layers": 1, "dim_ff": 16, "decoder_width": 8, "decoder_modes": 4, "decoder_head_width": 8}
GT2 = {"coarse_size": 6, "d_model": 16, "n_layers": 1, "n_head": 2, "dim_ff": 16, "decoder_width": 8,
       "decoder_modes": 3, "decoder_head_width": 8}
FF = {"d_model": 16, "n_head": 2, "head_dim": 8, "n_layers": 1, "latent_dim": 16, "decoder_groups": 4}
STEADY = {k: v for k, v in FF.items() if k != "latent_dim"}  # the steady model decodes on the grid
DPOT = {"t_in": 3, "t_out": 1, "in_channels": 4, "width": 16, "depth": 1, "n_heads": 2, "head_width": 8,
        "patch_size": 4, "modes": 2}


def operator(model: dict[str, Any], ndim: int, channels: int = 1) -> dict[str, Any]:
    """An operator model's spec (input -> target pairs), point-wise normalizers on ``ndim`` axes."""
    return {"model": model, "normalize_input": "channel", "normalize_target": "channel",
            "data": {"periodic": [True] * ndim, "lengths": [1.0] * ndim,
                     "input_channels": [f"a{i}" for i in range(channels)],
                     "target_channels": [f"u{i}" for i in range(channels)]}}


def trajectory(model: dict[str, Any], ndim: int, channels: int, t_in: int, t_out: int) -> dict[str, Any]:
    """A time model's spec: ``t_in`` frames of ``channels`` fields in, ``t_out`` out."""
    spec = operator(model, ndim, channels)
    spec["data"].update(target_channels=spec["data"]["input_channels"], t_in=t_in, t_out=t_out)
    return spec


#: name -> (spec without its grid, grids to export on)
FAMILIES: dict[str, tuple[dict[str, Any], list[tuple[int, ...]]]] = {
    **{f"{kind}_1d": (operator({"name": "galerkin_transformer_1d", "attention_type": attention, **GT1}, 1),
                      [(32,), (48,)])
       for kind, attention in (("gt", "galerkin"), ("ft", "fourier"), ("st", "softmax"), ("lt", "linear"))},
    **{f"{kind}_2d": (operator({"name": "galerkin_transformer_2d", "attention_type": attention, **GT2}, 2),
                      [(21, 21), (16, 16)])
       for kind, attention in (("gt", "galerkin"), ("ft", "fourier"), ("st", "softmax"), ("lt", "linear"))},
    "fno1d": (operator({"name": "fno1d", "width": 8, "modes": 5, "n_layers": 2, "projection_width": 8}, 1),
              [(32,), (21,)]),
    "fno2d": (operator({"name": "fno2d", "in_channels": 2, "out_channels": 2, "width": 8, "modes": 4, "n_layers": 2,
                        "projection_width": 8}, 2, 2),
              [(16, 16), (13, 18)]),
    "fno2d_time": (trajectory({"name": "fno2d_time", "t_in": 3, "t_out": 2, "width": 8, "modes": 4, "n_layers": 1,
                               "projection_width": 8}, 2, 1, 3, 2), [(16, 16), (12, 12)]),
    "fno3d_time": (trajectory({"name": "fno3d_time", "t_in": 2, "t_out": 1, "in_channels": 2, "width": 6,
                               "modes": 3, "n_layers": 2, "projection_width": 8}, 3, 2, 2, 1),
                   [(8, 8, 8), (6, 10, 7)]),
    "ffno2d": (trajectory({"name": "ffno2d", "t_in": 2, "t_out": 1, "width": 8, "modes": 4, "n_layers": 2,
                           "projection_width": 8}, 2, 1, 2, 1), [(16, 16), (12, 20)]),
    "ffno3d": (trajectory({"name": "ffno3d", "t_in": 2, "t_out": 1, "width": 8, "modes": 3, "n_layers": 1,
                           "projection_width": 8}, 3, 1, 2, 1), [(8, 8, 8)]),
    "dpot2d": (trajectory({"name": "dpot2d", "grid_size": 16, **DPOT}, 2, 4, 3, 1), [(16, 16)]),
    # a mixture's member: two fields of a model of four channels (zero channels padded inside the graph)
    "dpot2d_member": (trajectory({"name": "dpot2d", "grid_size": 16, **DPOT, "modes": 8}, 2, 2, 3, 1), [(16, 16)]),
    "dpot3d": (trajectory({"name": "dpot3d", "grid_size": 8, **DPOT, "patch_size": 2}, 3, 4, 3, 1), [(8, 8, 8)]),
    "factformer2d": (trajectory({"name": "factformer2d", "t_in": 2, "t_out": 2, **FF}, 2, 1, 2, 2),
                     [(16, 16), (12, 20)]),
    "factformer3d": (trajectory({"name": "factformer3d", "t_in": 2, "t_out": 2, "in_channels": 4, **FF,
                                 "n_head": 2, "kernel_multiplier": 2}, 3, 4, 2, 2), [(8, 8, 8)]),
    "factformer2d_steady": (operator({"name": "factformer2d_steady", **STEADY, "cnn_layers": 1}, 2),
                            [(16, 16), (12, 20)]),
    "dil_resnet2d": (trajectory({"name": "dil_resnet2d", "t_in": 2, "t_out": 1, "width": 8, "n_blocks": 1,
                                 "norm_groups": 2}, 2, 1, 2, 1), [(12, 12), (16, 10)]),
}


def surrogate(name: str, grid: tuple[int, ...], seed: int = 0) -> Surrogate:
    """The family ``name``'s surrogate on ``grid``: seeded weights, normalizers (point-wise for operator data,
    per channel for frames) with statistics far from 0 and 1 (so that baking them in is checked)."""
    spec, _ = FAMILIES[name]
    mode = "channel" if "t_in" in spec["data"] else "pointwise"
    spec = {**spec, "normalize_input": mode, "normalize_target": mode,
            "data": {**spec["data"], "stored_shape": list(grid)}}
    torch.manual_seed(seed)
    built = Surrogate(spec).eval()
    with torch.no_grad():
        for normalizer in (built.input_normalizer, built.target_normalizer):
            normalizer.mean.copy_(torch.randn_like(normalizer.mean) + 2.0)
            normalizer.std.copy_(torch.rand_like(normalizer.std) + 0.5)
    return built
