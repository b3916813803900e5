"""Model registry: names -> model entries (class, fixed spatial dimension, defaults), presets, and ``build_model``
from a plain config."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from opformer.errors import ConfigError
from opformer.models.dil_resnet import DilResNet
from opformer.models.dpot import DPOT
from opformer.models.factformer import FactFormer2dSteady, FactFormerTime
from opformer.models.ffno import FFNO
from opformer.models.fno import FNO
from opformer.models.fno_time import FNOTime
from opformer.models.galerkin_transformer import GalerkinTransformer1d
from opformer.models.galerkin_transformer_2d import GalerkinTransformer2d
from opformer.models.mesh_mlp import PointwiseMLP
from opformer.models.mesh_transformer import MeshGalerkinTransformer
from opformer.models.transolver import Transolver
from opformer.validate import check_arguments


@dataclass(frozen=True)
class ModelEntry:
    """What a registry name builds: ``cls`` with the arguments the name ``fixes`` (e.g. the spatial dimension;
    not keys of the name's config) and the name's own ``defaults`` where they differ from the class's;
    ``follows_grid``: a run configured from its data takes the model's ``periodic`` from the data's grid kinds
    where the model section leaves it out (:func:`opformer.config.grid_defaults`)."""

    cls: type[nn.Module]
    fixes: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    follows_grid: bool = False


MODELS: dict[str, ModelEntry] = {
    "galerkin_transformer_1d": ModelEntry(GalerkinTransformer1d),
    "galerkin_transformer_2d": ModelEntry(GalerkinTransformer2d),
    # block averages (output_size) are 2D
    "fno1d": ModelEntry(FNO, {"ndim": 1, "output_size": None}, follows_grid=True),
    "fno2d": ModelEntry(FNO, {"ndim": 2}, {"width": 32, "modes": 12, "periodic": False}, follows_grid=True),
    # time-dependent baselines: (batch, *spatial, t_in, c) -> (batch, *spatial, t_out, c)
    "fno2d_time": ModelEntry(FNOTime, {"ndim": 2}, follows_grid=True),
    "fno3d_time": ModelEntry(FNOTime, {"ndim": 3}, {"width": 20, "modes": 8}, follows_grid=True),
    "ffno2d": ModelEntry(FFNO, {"ndim": 2}, follows_grid=True),
    "ffno3d": ModelEntry(FFNO, {"ndim": 3}, follows_grid=True),
    "dil_resnet2d": ModelEntry(DilResNet, {"ndim": 2}, follows_grid=True),
    "dil_resnet3d": ModelEntry(DilResNet, {"ndim": 3}, follows_grid=True),
    # FactFormer (docs/models.md): latent marching in 2D/3D, and a steady 2D version (Darcy)
    "factformer2d": ModelEntry(FactFormerTime, {"ndim": 2}),
    "factformer3d": ModelEntry(FactFormerTime, {"ndim": 3},
                               {"t_out": 2, "in_channels": 4, "n_head": 6, "kernel_multiplier": 3, "latent_dim": 192,
                                "decoder_groups": 8, "lift": "channelwise"}),
    "factformer2d_steady": ModelEntry(FactFormer2dSteady),
    # DPOT (docs/models.md): patches, temporal aggregation, Fourier-attention blocks
    "dpot2d": ModelEntry(DPOT, {"ndim": 2}),
    "dpot3d": ModelEntry(DPOT, {"ndim": 3}),
    # mesh models (docs/models.md), called model(x, pos, weights, mask): the GT/FT with quadrature-weighted sums,
    # Transolver, the point-wise MLP
    "galerkin_transformer_mesh": ModelEntry(MeshGalerkinTransformer),
    "transolver": ModelEntry(Transolver),
    "mesh_mlp": ModelEntry(PointwiseMLP),
}
#: The models that follow the data's grid kinds (``periodic``, per axis) where the model section leaves them out.
GRID_MODELS = frozenset(name for name, entry in MODELS.items() if entry.follows_grid)

_DPOT_PAPER = {"name": "dpot2d", "t_in": 10, "t_out": 1, "in_channels": 4, "patch_size": 8, "grid_size": 128,
               "n_classes": 12}
_DPOT_CPU = {"name": "dpot2d", "t_in": 10, "t_out": 1, "in_channels": 4, "patch_size": 4, "grid_size": 64,
             "depth": 4, "n_heads": 4, "mlp_ratio": 1, "head_width": 32}

PRESETS: dict[str, dict[str, Any]] = {
    # Cao 2021, Example 5.1 (Burgers): 530,305 parameters for each attention type.
    "gt_burgers": {"name": "galerkin_transformer_1d", "attention_type": "galerkin"},
    "ft_burgers": {"name": "galerkin_transformer_1d", "attention_type": "fourier"},
    "st_burgers": {"name": "galerkin_transformer_1d", "attention_type": "softmax"},
    "lt_burgers": {"name": "galerkin_transformer_1d", "attention_type": "linear"},
    # FNO1d baseline of the same example: 549,569 parameters.
    "fno1d_burgers": {"name": "fno1d", "width": 64, "modes": 16, "n_layers": 4},
    # Cao 2021, Example 5.2 (forward Darcy) at (n_f, n_c) = (141, 43): 2,220,829 parameters.
    "gt_darcy": {"name": "galerkin_transformer_2d", "attention_type": "galerkin", "coarse_size": 43},
    "ft_darcy": {"name": "galerkin_transformer_2d", "attention_type": "fourier", "coarse_size": 43},
    "fno2d_darcy": {"name": "fno2d", "width": 32, "modes": 12, "n_layers": 4},
    # Example 5.3 (inverse Darcy) at (141, 36): d = 192, point-wise regressor on the coarse grid, dropout 0.05.
    "gt_darcy_inverse": {
        "name": "galerkin_transformer_2d", "attention_type": "galerkin", "coarse_size": 36, "d_model": 192,
        "dim_ff": 384, "decoder": "pointwise", "decoder_width": 384, "decoder_layers": 3,
        "attention_dropout": 0.05, "ffn_dropout": 0.05, "downsample_dropout": 0.05, "decoder_dropout": 0.05,
    },
    "fno2d_darcy_inverse": {"name": "fno2d", "width": 32, "modes": 12, "n_layers": 4, "output_size": 36},
    # Time-dependent baselines (docs/models.md): 2D vorticity, 10 input frames -> 1 (or 4 bundled) frames.
    "fno2d_time_ns": {"name": "fno2d_time", "t_in": 10, "t_out": 1, "width": 20, "modes": 12},
    "ffno2d_ns": {"name": "ffno2d", "t_in": 10, "t_out": 1},
    "dil_resnet2d_ns": {"name": "dil_resnet2d", "t_in": 10, "t_out": 1},
    "ffno2d_kolmogorov": {"name": "ffno2d", "t_in": 4, "t_out": 4, "width": 48, "modes": 16, "n_layers": 8},
    # 3D velocity (3 channels), 4 input frames -> 2 bundled frames.
    "fno3d_time_velocity": {"name": "fno3d_time", "t_in": 4, "t_out": 2, "in_channels": 3},
    "ffno3d_velocity": {"name": "ffno3d", "t_in": 4, "t_out": 2, "in_channels": 3, "width": 32, "modes": 8},
    "dil_resnet3d_velocity": {"name": "dil_resnet3d", "t_in": 4, "t_out": 2, "in_channels": 3},
    # FactFormer (Li et al. 2023), the paper's configurations; parameter counts vs the paper in docs/models.md.
    "factformer_kolmogorov": {
        "name": "factformer2d", "t_in": 10, "t_out": 4, "d_model": 128, "n_head": 8, "head_dim": 64,
        "kernel_multiplier": 2, "n_layers": 4, "latent_dim": 256, "fourier_scale": 8.0,
    },
    "factformer_darcy": {
        "name": "factformer2d_steady", "d_model": 128, "n_head": 12, "head_dim": 64, "kernel_multiplier": 2,
        "n_layers": 3, "fourier_scale": 1.0,
    },
    "factformer_turbulence3d": {
        "name": "factformer3d", "t_in": 10, "t_out": 2, "in_channels": 4, "d_model": 128, "n_head": 6,
        "head_dim": 64, "kernel_multiplier": 3, "n_layers": 4, "latent_dim": 192, "fourier_scale": 8.0,
    },
    # the authors' smoke3d_fact_lm.yml: d (smoke) and u, 4 frames in, 4 per call, the closed-domain CNN, 2 padding
    # cells, coordinates on [0, 8] as theirs
    "factformer_smoke3d": {
        "name": "factformer3d", "t_in": 4, "t_out": 4, "in_channels": 4, "d_model": 128, "n_head": 6,
        "head_dim": 64, "kernel_multiplier": 3, "n_layers": 3, "latent_dim": 192, "decoder_groups": 12,
        "fourier_scale": 1.0, "cnn_layers": 2, "padding": 2, "length": 8.0, "periodic": False,
    },
    # the same Kolmogorov model with full-grid linear attention (same 8 x 64 heads) in every layer (section 4.3)
    "linear_kolmogorov": {
        "name": "factformer2d", "t_in": 10, "t_out": 4, "d_model": 128, "n_head": 8, "head_dim": 64,
        "n_layers": 4, "latent_dim": 256, "fourier_scale": 8.0, "attention": "linear",
    },
    # DPOT (Hao et al. 2024) Ti/S/M/L: 128^2 input, 4 channels, 10 frames, with the data-set classifier of
    # 12 classes; the parameter counts are the authors' (docs/models.md)
    "dpot_ti": {**_DPOT_PAPER, "width": 512, "depth": 4, "n_heads": 4, "mlp_ratio": 1, "head_width": 32},
    "dpot_s": {**_DPOT_PAPER, "width": 1024, "depth": 6, "n_heads": 8, "mlp_ratio": 1, "head_width": 32},
    "dpot_m": {**_DPOT_PAPER, "width": 1024, "depth": 12, "n_heads": 8, "mlp_ratio": 4, "head_width": 32},
    "dpot_l": {**_DPOT_PAPER, "width": 1536, "depth": 24, "n_heads": 16, "mlp_ratio": 4, "head_width": 128},
    # sized for a CPU: 64^2 input, patch 4, no classifier (1.66M and 0.47M parameters)
    "dpot_micro": {**_DPOT_CPU, "width": 256},
    "dpot_nano": {**_DPOT_CPU, "width": 128},
    # Transolver (Wu et al. 2024), the authors' scripts (scripts/Transolver_{Elas,Airfoil,Pipe}.sh): the input is
    # the coordinates; 713,665, 2,810,817 and 3,073,985 parameters, theirs (tests/fixtures/transolver)
    "transolver_elasticity": {"name": "transolver", "n_hidden": 128, "n_head": 8, "n_layers": 8, "slice_num": 64},
    "transolver_airfoil": {"name": "transolver", "n_hidden": 128, "n_head": 8, "n_layers": 8, "slice_num": 64,
                           "grid_shape": [221, 51]},
    "transolver_pipe": {"name": "transolver", "n_hidden": 128, "n_head": 8, "n_layers": 8, "slice_num": 64,
                        "mlp_ratio": 2, "grid_shape": [129, 129]},
    # the same elasticity model with quadrature-weighted slice tokens
    "transolver_elasticity_quadrature": {"name": "transolver", "n_hidden": 128, "n_head": 8, "n_layers": 8,
                                         "slice_num": 64, "weighting": "quadrature"},
    # the GT / FT on meshes at the Galerkin Transformer paper's Darcy width (d 128, 4 heads, 6 layers, FFN 256;
    # eps 1e-7), the input the coordinates, quadrature-weighted sums
    "gt_mesh_elasticity": {"name": "galerkin_transformer_mesh", "d_model": 128, "n_head": 4, "n_layers": 6,
                           "dim_ff": 256, "layer_norm_eps": 1e-7},
    "ft_mesh_elasticity": {"name": "galerkin_transformer_mesh", "attention_type": "fourier", "d_model": 128,
                           "n_head": 4, "n_layers": 6, "dim_ff": 256, "layer_norm_eps": 1e-7},
    "mesh_mlp_elasticity": {"name": "mesh_mlp", "width": 128, "n_layers": 4},
}


def preset(name: str) -> dict[str, Any]:
    """A copy of a named model config of ``PRESETS`` (the papers' sizes), to edit or pass to :func:`build_model`.

    Parameters
    ----------
    name
        A key of ``PRESETS``, e.g. ``"gt_burgers"`` or ``"dpot_ti"``.

    Returns
    -------
    dict[str, Any]
        ``{"name": <registry name>, **constructor kwargs}``, a deep copy: changing it leaves ``PRESETS`` as it is.

    Raises
    ------
    ConfigError
        ``name`` is no preset; the message lists the valid ones.
    """
    if name not in PRESETS:
        raise ConfigError(f"unknown model preset {name!r}; valid presets: {', '.join(sorted(PRESETS))}")
    return copy.deepcopy(PRESETS[name])


def _entry(config: Mapping[str, Any]) -> tuple[str, ModelEntry]:
    """The registry name of a model config and its entry; ``ConfigError`` if missing or unknown."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"model: expected a mapping, got {type(config).__name__}")
    valid_names = ", ".join(sorted(MODELS))
    if "name" not in config:
        raise ConfigError(f"model: missing key 'name'; valid names: {valid_names}")
    name = config["name"]
    if name not in MODELS:
        raise ConfigError(f"model: unknown name {name!r}; valid names: {valid_names}")
    return name, MODELS[name]


def model_keys(config: Mapping[str, Any]) -> list[str]:
    """The keys a config of ``config["name"]`` may hold besides ``name`` (its class's constructor arguments)."""
    _, entry = _entry(config)
    return [k for k in inspect.signature(entry.cls).parameters if k not in entry.fixes]


def resolve_model_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``{"name": <registry name>, **constructor kwargs}`` and fill in every default.

    Unknown names, unknown keys and values of the wrong type raise ``ConfigError``. The result is what
    :func:`build_model` stores as ``model.config``.
    """
    name, entry = _entry(config)
    kwargs = check_arguments(entry.cls, {k: v for k, v in config.items() if k != "name"}, "model",
                             exclude=frozenset(entry.fixes))
    bound = inspect.signature(entry.cls).bind(**entry.fixes, **{**entry.defaults, **kwargs})
    bound.apply_defaults()
    return {"name": name, **{k: v for k, v in bound.arguments.items() if k not in entry.fixes}}


def build_model(config: Mapping[str, Any]) -> nn.Module:
    """Build a model from a plain config.

    Parameters
    ----------
    config
        ``{"name": <registry name>, **constructor kwargs}``: a name of ``MODELS`` and any of its class's constructor
        arguments (:func:`resolve_model_config` checks them; the others take their defaults). :func:`preset` returns
        such configs.

    Returns
    -------
    torch.nn.Module
        The model, with its full resolved config (defaults filled in) as ``model.config``;
        ``build_model(model.config)`` rebuilds a model of the same shape.

    Raises
    ------
    ConfigError
        An unknown name or key, or a value of the wrong type or out of range.
    """
    resolved = resolve_model_config(config)
    entry = MODELS[resolved["name"]]
    model = entry.cls(**entry.fixes, **{k: v for k, v in resolved.items() if k != "name"})
    model.config = resolved
    return model
