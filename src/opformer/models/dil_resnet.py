"""Dilated residual CNN (Stachenfeld et al. 2022; group-norm variant of PDEArena), time as channels.

A CNN of fixed stencil: it runs on any grid size but, unlike FNO/F-FNO, is not resolution invariant (its
receptive field is a fixed number of cells), and with circular padding it needs at least 8 points per axis
(the largest dilation). It appends no coordinates, so with circular padding it is
exactly translation equivariant.
"""

from __future__ import annotations

from torch import Tensor, nn

from opformer.errors import ConfigError, DataError
from opformer.models.time_layout import channels_to_frames, check_time_sizes, frames_to_channels
from opformer.nn.mlp import make_activation
from opformer.validate import PositiveInt

DILATIONS = (1, 2, 4, 8, 4, 2, 1)
_CONVS = {2: nn.Conv2d, 3: nn.Conv3d}


def _conv(ndim: int, c_in: int, c_out: int, dilation: int, periodic: bool) -> nn.Module:
    """3^ndim convolution with ``dilation`` and 'same' padding, circular if ``periodic`` else zeros."""
    return _CONVS[ndim](
        c_in, c_out, 3, dilation=dilation, padding=dilation, padding_mode="circular" if periodic else "zeros"
    )


class DilatedBlock(nn.Module):
    """``x + stack(x)``: convolutions of dilation 1, 2, 4, 8, 4, 2, 1, each -> GroupNorm -> activation."""

    def __init__(self, ndim: int, width: int, norm_groups: int, activation: str, periodic: bool) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for dilation in DILATIONS:
            layers += [_conv(ndim, width, width, dilation, periodic), nn.GroupNorm(norm_groups, width)]
            layers.append(make_activation(activation))
        self.stack = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the block to ``x`` ``(batch, width, *spatial)`` (channel-first, as convolutions want)."""
        return x + self.stack(x)


class DilResNet(nn.Module):
    """Encoder conv -> ``n_blocks`` dilated residual blocks -> decoder conv, on ``(batch, *spatial, t, c)`` with
    ``ndim`` (2 or 3) spatial axes (``dil_resnet2d``, ``dil_resnet3d``); defaults as PDEArena: width 128,
    4 blocks, GELU."""

    def __init__(self, ndim: int, t_in: PositiveInt = 10, t_out: PositiveInt = 1, in_channels: PositiveInt = 1,
                 out_channels: PositiveInt | None = None, width: PositiveInt = 128, n_blocks: PositiveInt = 4,
                 norm_groups: PositiveInt = 8, activation: str = "gelu", periodic: bool = True) -> None:
        super().__init__()
        if ndim not in _CONVS:
            raise ConfigError(f"Dil-ResNet supports 2 or 3 spatial dimensions, got {ndim}")
        out_channels = out_channels or in_channels
        check_time_sizes(t_in, t_out, in_channels, out_channels)
        if min(width, n_blocks, norm_groups) < 1 or width % norm_groups:
            raise ConfigError(
                f"Dil-ResNet needs width, n_blocks, norm_groups >= 1 and width a multiple of norm_groups, "
                f"got width={width}, n_blocks={n_blocks}, norm_groups={norm_groups}"
            )
        self.ndim, self.t_in, self.t_out, self.in_channels, self.periodic = ndim, t_in, t_out, in_channels, periodic
        self.encoder = _conv(ndim, t_in * in_channels, width, 1, periodic)
        self.blocks = nn.Sequential(
            *(DilatedBlock(ndim, width, norm_groups, activation, periodic) for _ in range(n_blocks))
        )
        self.decoder = _conv(ndim, width, t_out * out_channels, 1, periodic)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, *spatial, t_in, in_channels)`` to ``(batch, *spatial, t_out, out_channels)``."""
        # channel-first and contiguous: convolutions of channel-last strides with circular padding run ~1.2x slower
        h = frames_to_channels(x, self.ndim, self.t_in, self.in_channels).movedim(-1, 1).contiguous()
        if self.periodic and min(h.shape[2:]) < max(DILATIONS):
            raise DataError(
                f"Dil-ResNet with circular padding needs >= {max(DILATIONS)} points per axis, got {tuple(h.shape[2:])}"
            )
        y = self.decoder(self.blocks(self.encoder(h))).movedim(1, -1)
        return channels_to_frames(y, self.t_out)
