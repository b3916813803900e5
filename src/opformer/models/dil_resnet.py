"""Dilated residual CNN (Stachenfeld et al. 2022; group-norm variant of PDEArena), time as channels.

A CNN of fixed stencil: it runs on any grid size but, unlike FNO/F-FNO, is not resolution invariant (its
receptive field is a fixed number of cells). Every convolution pads 'same', per axis: circularly along a periodic
axis (which then needs at least 8 points, the largest dilation), with zeros along a closed one. It appends no
coordinates, so it is exactly translation equivariant along the periodic axes.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from opformer.errors import ConfigError, DataError
from opformer.models.time_layout import channels_to_frames, check_time_sizes, frames_to_channels
from opformer.nn.domain_padding import axis_periodicity
from opformer.nn.mlp import make_activation
from opformer.validate import PositiveInt

DILATIONS = (1, 2, 4, 8, 4, 2, 1)
_CONVS = {2: nn.Conv2d, 3: nn.Conv3d}


class _AxisPadding:
    """A convolution built without padding that pads 'same' itself: circularly along the axes where ``periodic``
    is true, with zeros along the others (one padding mode per axis, which torch's convolutions lack)."""

    periodic: tuple[bool, ...]
    dilation: tuple[int, ...]

    def forward(self, x: Tensor) -> Tensor:
        """Pad ``x`` ``(batch, c, *spatial)`` axis by axis, then convolve."""
        ndim = len(self.periodic)
        for axis, (is_periodic, d) in enumerate(zip(self.periodic, self.dilation)):
            pads = [0] * (2 * ndim)  # F.pad counts from the last axis; circular wants every spatial axis named
            pads[2 * (ndim - 1 - axis):2 * (ndim - axis)] = [d, d]
            x = F.pad(x, pads, mode="circular" if is_periodic else "constant")
        return super().forward(x)  # type: ignore[misc]


class _AxisPaddedConv2d(_AxisPadding, nn.Conv2d):
    """:class:`_AxisPadding` on a 2D convolution."""


class _AxisPaddedConv3d(_AxisPadding, nn.Conv3d):
    """:class:`_AxisPadding` on a 3D convolution."""


_AXIS_PADDED = {2: _AxisPaddedConv2d, 3: _AxisPaddedConv3d}


def _conv(ndim: int, c_in: int, c_out: int, dilation: int, periodic: tuple[bool, ...]) -> nn.Module:
    """3^ndim convolution with ``dilation`` and 'same' padding: circular along the ``periodic`` axes, zeros along
    the others (torch's own padding where every axis has one kind; the parameters are the same either way)."""
    if len(set(periodic)) == 1:
        return _CONVS[ndim](c_in, c_out, 3, dilation=dilation, padding=dilation,
                            padding_mode="circular" if periodic[0] else "zeros")
    conv = _AXIS_PADDED[ndim](c_in, c_out, 3, dilation=dilation)
    conv.periodic = periodic
    return conv


class DilatedBlock(nn.Module):
    """``x + stack(x)``: convolutions of dilation 1, 2, 4, 8, 4, 2, 1, each -> GroupNorm -> activation."""

    def __init__(self, ndim: int, width: int, norm_groups: int, activation: str, periodic: tuple[bool, ...]) -> None:
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
    4 blocks, GELU. ``periodic`` (one bool, or one per axis) picks each axis's padding: circular or zeros."""

    def __init__(self, ndim: int, t_in: PositiveInt = 10, t_out: PositiveInt = 1, in_channels: PositiveInt = 1,
                 out_channels: PositiveInt | None = None, width: PositiveInt = 128, n_blocks: PositiveInt = 4,
                 norm_groups: PositiveInt = 8, activation: str = "gelu", periodic: bool | list[bool] = True) -> None:
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
        self.ndim, self.t_in, self.t_out, self.in_channels = ndim, t_in, t_out, in_channels
        self.axis_periodic = axes = axis_periodicity(periodic, ndim)
        self.encoder = _conv(ndim, t_in * in_channels, width, 1, axes)
        self.blocks = nn.Sequential(
            *(DilatedBlock(ndim, width, norm_groups, activation, axes) for _ in range(n_blocks))
        )
        self.decoder = _conv(ndim, width, t_out * out_channels, 1, axes)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, *spatial, t_in, in_channels)`` to ``(batch, *spatial, t_out, out_channels)``."""
        # channel-first and contiguous: convolutions of channel-last strides with circular padding run ~1.2x slower
        h = frames_to_channels(x, self.ndim, self.t_in, self.in_channels).movedim(-1, 1).contiguous()
        if any(p and n < max(DILATIONS) for p, n in zip(self.axis_periodic, h.shape[2:])):
            raise DataError(f"Dil-ResNet with circular padding needs >= {max(DILATIONS)} points per periodic axis, "
                            f"got {tuple(h.shape[2:])}")
        y = self.decoder(self.blocks(self.encoder(h))).movedim(1, -1)
        return channels_to_frames(y, self.t_out)
