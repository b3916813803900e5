"""Published implementations benchmarked next to opformer's models (the optional ``peers`` extra).

Each peer is built with the paper's configuration of the opformer preset it stands beside
(Cao 2021, Example 5.1: d = 96, 4 layers, 1 head, FFN 192, spectral decoder 96 -> 48 -> 48 with 16 modes;
FNO1d width 64, 16 modes, 4 layers), so both rows run the same model on the same input values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

OPFORMER = "opformer"
GALERKIN_TRANSFORMER = "galerkin-transformer"
NEURALOPERATOR = "neuraloperator"

#: opformer preset -> (peer implementation, attention type or None).
PEER_OF_PRESET: dict[str, tuple[str, str | None]] = {
    "gt_burgers": (GALERKIN_TRANSFORMER, "galerkin"),
    "ft_burgers": (GALERKIN_TRANSFORMER, "fourier"),
    "st_burgers": (GALERKIN_TRANSFORMER, "softmax"),
    "lt_burgers": (GALERKIN_TRANSFORMER, "linear"),
    "fno1d_burgers": (NEURALOPERATOR, None),
}


class PeerUnavailable(Exception):
    """The peer package cannot be imported or cannot build the model."""


@dataclass
class Peer:
    """A built peer model with the call that maps a channel-last input to its output."""

    model: nn.Module
    forward: Callable[[Tensor], Tensor]
    channel_first: bool = False  # the model takes (batch, channels, n)


def _galerkin_transformer(attention_type: str) -> Peer:
    """The authors' ``SimpleTransformer`` with the Burgers configuration (530,305 parameters)."""
    try:
        from galerkin_transformer.model import SimpleTransformer
    except Exception as exc:  # the package pulls in IPython and others; any import failure disables it
        raise PeerUnavailable(f"cannot import galerkin_transformer ({type(exc).__name__}: {exc})") from None
    config: dict[str, Any] = {
        "node_feats": 1, "n_targets": 1, "n_hidden": 96, "num_feat_layers": 0, "num_encoder_layers": 4,
        "n_head": 1, "dim_feedforward": 192, "attention_type": attention_type, "feat_extract_type": None,
        "layer_norm": False, "attn_norm": True, "norm_type": "layer", "batch_norm": False, "pos_dim": 1,
        "spacial_dim": 1, "spacial_fc": False, "decoder_type": "ifft", "freq_dim": 48,
        "num_regressor_layers": 2, "fourier_modes": 16, "n_freq_targets": 0, "return_attn_weight": False,
        "return_latent": False, "spacial_residual": False, "regressor_activation": "silu",
        "attn_activation": "relu", "xavier_init": 0.01, "diagonal_weight": 0.01, "symmetric_init": False,
        "residual_type": "add", "dropout": 0.0, "encoder_dropout": 0.0, "decoder_dropout": 0.0,
        "ffn_dropout": 0.0, "debug": False,
    }
    model = SimpleTransformer(**config)

    def forward(x: Tensor) -> Tensor:
        n = x.shape[1]
        pos = torch.arange(n, device=x.device, dtype=x.dtype).div(n).view(1, n, 1).expand(x.shape[0], n, 1)
        return model(x, None, pos, pos)["preds"]

    return Peer(model, forward)


def _neuraloperator_fno1d() -> Peer:
    """neuraloperator's ``FNO`` as the paper's FNO1d: width 64, 16 rfft modes, 4 layers, ReLU, no channel MLP."""
    try:
        from neuralop.models import FNO
    except Exception as exc:
        raise PeerUnavailable(f"cannot import neuralop ({type(exc).__name__}: {exc})") from None
    # neuraloperator keeps n_modes // 2 + 1 modes of the last (real FFT) axis: 30 -> 16
    model = FNO(n_modes=(30,), in_channels=1, out_channels=1, hidden_channels=64, n_layers=4,
                lifting_channel_ratio=0, projection_channel_ratio=2, use_channel_mlp=False,
                non_linearity=nn.functional.relu, fno_skip="linear")

    return Peer(model, model, channel_first=True)


def build_peer(implementation: str, attention_type: str | None) -> Peer:
    """Build the named peer implementation; raises ``PeerUnavailable`` with the reason."""
    if implementation == GALERKIN_TRANSFORMER:
        return _galerkin_transformer(attention_type or "galerkin")
    if implementation == NEURALOPERATOR:
        return _neuraloperator_fno1d()
    raise PeerUnavailable(f"unknown implementation {implementation!r}")
