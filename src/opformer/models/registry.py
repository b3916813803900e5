"""Model registry: names -> classes, presets, and ``build_model`` from a plain config."""

from __future__ import annotations

import copy
import inspect
import types
import typing
from collections.abc import Mapping
from typing import Any

from torch import nn

from opformer.errors import ConfigError
from opformer.models.dil_resnet import DilResNet2d, DilResNet3d
from opformer.models.factformer import FactFormer2d, FactFormer2dSteady, FactFormer3d
from opformer.models.ffno import FFNO2d, FFNO3d
from opformer.models.fno import FNO1d, FNO2d
from opformer.models.fno_time import FNO2dTime, FNO3dTime
from opformer.models.galerkin_transformer import GalerkinTransformer1d
from opformer.models.galerkin_transformer_2d import GalerkinTransformer2d

MODELS: dict[str, type[nn.Module]] = {
    "galerkin_transformer_1d": GalerkinTransformer1d,
    "galerkin_transformer_2d": GalerkinTransformer2d,
    "fno1d": FNO1d,
    "fno2d": FNO2d,
    # time-dependent baselines: (batch, *spatial, t_in, c) -> (batch, *spatial, t_out, c)
    "fno2d_time": FNO2dTime,
    "fno3d_time": FNO3dTime,
    "ffno2d": FFNO2d,
    "ffno3d": FFNO3d,
    "dil_resnet2d": DilResNet2d,
    "dil_resnet3d": DilResNet3d,
    # FactFormer (docs/models.md): latent marching in 2D/3D, and a steady 2D version (Darcy)
    "factformer2d": FactFormer2d,
    "factformer3d": FactFormer3d,
    "factformer2d_steady": FactFormer2dSteady,
}

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
        "name": "factformer3d", "t_in": 10, "t_out": 2, "in_channels": 3, "d_model": 128, "n_head": 6,
        "head_dim": 64, "kernel_multiplier": 3, "n_layers": 4, "latent_dim": 256, "fourier_scale": 8.0,
    },
    # the same Kolmogorov model with full-grid linear attention (same 8 x 64 heads) in every layer (section 4.3)
    "linear_kolmogorov": {
        "name": "factformer2d", "t_in": 10, "t_out": 4, "d_model": 128, "n_head": 8, "head_dim": 64,
        "n_layers": 4, "latent_dim": 256, "fourier_scale": 8.0, "attention": "linear",
    },
}

_SIMPLE_TYPES = (bool, int, float, str)


def preset(name: str) -> dict[str, Any]:
    """Return a copy of the named model config in ``PRESETS``."""
    if name not in PRESETS:
        raise ConfigError(f"unknown model preset {name!r}; valid presets: {', '.join(sorted(PRESETS))}")
    return copy.deepcopy(PRESETS[name])


def _accepts(value: Any, hint: Any) -> bool:
    """Whether ``value`` matches a type hint made of bool/int/float/str/None; True if not checkable."""
    members = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    simple = [m for m in members if m in _SIMPLE_TYPES or m is type(None)]
    if len(simple) != len(members):
        return True
    for member in simple:
        if member is type(None) and value is None:
            return True
        if member is bool and isinstance(value, bool):
            return True
        if member is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if member is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if member is str and isinstance(value, str):
            return True
    return False


def _type_name(hint: Any) -> str:
    """Readable name of a type hint."""
    return getattr(hint, "__name__", None) or str(hint)


def build_model(config: Mapping[str, Any]) -> nn.Module:
    """Build a model from ``{"name": <registry name>, **constructor kwargs}``.

    Unknown names, unknown keys and values of the wrong type raise ``ConfigError``. The model keeps
    its full resolved config (defaults filled in) as ``model.config``; ``build_model(model.config)``
    rebuilds a model of the same shape.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"model: expected a mapping, got {type(config).__name__}")
    valid_names = ", ".join(sorted(MODELS))
    if "name" not in config:
        raise ConfigError(f"model: missing key 'name'; valid names: {valid_names}")
    name = config["name"]
    if name not in MODELS:
        raise ConfigError(f"model: unknown name {name!r}; valid names: {valid_names}")
    cls = MODELS[name]
    parameters = inspect.signature(cls.__init__).parameters
    valid_keys = sorted(k for k in parameters if k != "self")
    hints = typing.get_type_hints(cls.__init__)
    kwargs = {k: v for k, v in config.items() if k != "name"}
    for key, value in kwargs.items():
        if key not in parameters or key == "self":
            raise ConfigError(f"model: unknown key {key!r}; valid keys: {', '.join(valid_keys)}")
        hint = hints.get(key)
        if hint is not None and not _accepts(value, hint):
            raise ConfigError(
                f"model: key {key!r} expects {_type_name(hint)}, got {type(value).__name__} {value!r}"
            )
    model = cls(**kwargs)
    bound = inspect.signature(cls).bind(**kwargs)
    bound.apply_defaults()
    model.config = {"name": name, **bound.arguments}
    return model
