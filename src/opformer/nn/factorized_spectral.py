"""Factorised spectral convolution (Tran et al. 2023, F-FNO): one 1D spectral convolution per axis, summed."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.nn.spectral import complex_blocks, axis_mode_product


class AxisSpectralConv(nn.Module):
    """1D spectral convolution along one spatial axis of a channel-last field.

    ``rfft`` along ``axis`` (``norm="ortho"``), multiply the lowest ``modes`` frequencies ``0..modes-1`` by a
    learned complex matrix per frequency (``in -> out`` channels), zero the rest, ``irfft`` back; computed as
    matrix products with the kept modes' DFT bases (:func:`~opformer.nn.spectral.axis_mode_product`). On a grid
    of ``n`` points at most ``n // 2 + 1`` modes exist; the extra weights are then unused. Complex weights
    are stored as a real tensor ``(in, out, modes, 2)`` (a complex entry counts twice, as in the papers),
    initialised like FNO: uniform in ``[0, 1 / (in * out))``. It runs in float32 (float64 for float64
    input) even under autocast.
    """

    def __init__(self, in_channels: int, out_channels: int, modes: int, axis: int) -> None:
        super().__init__()
        if min(in_channels, out_channels, modes) < 1:
            raise ConfigError(f"channels and modes must be >= 1, got {in_channels}, {out_channels}, {modes}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.modes = modes
        self.axis = axis
        self.weight = nn.Parameter(torch.rand(in_channels, out_channels, modes, 2) / (in_channels * out_channels))

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, modes={self.modes}, axis={self.axis}"

    def forward(self, x: Tensor) -> Tensor:
        """Apply the convolution along spatial axis ``axis`` of ``x`` ``(batch, *spatial, in_channels)``."""
        dim = self.axis + 1
        shape = x.shape
        real_dtype = torch.promote_types(x.dtype, torch.float32)
        with torch.autocast(device_type=x.device.type, enabled=False):
            kept = min(self.modes, shape[dim] // 2 + 1)
            blocks = complex_blocks(self.weight[:, :, :kept].to(real_dtype))
            # (before the axis, axis, after the axis, channels): the product along axis 1 of that view
            grid = x.to(real_dtype).reshape(math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:-1]), -1)
            return axis_mode_product(grid, blocks).view(*shape[:-1], self.out_channels)


class FactorizedSpectralConv(nn.Module):
    """Sum over the spatial axes of :class:`AxisSpectralConv`, each axis with its own weights (F-FNO's K)."""

    def __init__(self, in_channels: int, out_channels: int, modes: int | Sequence[int], ndim: int) -> None:
        super().__init__()
        if ndim not in (1, 2, 3):
            raise ConfigError(f"factorised spectral convolution supports 1, 2 or 3 dimensions, got {ndim}")
        modes_ = [modes] * ndim if isinstance(modes, int) else list(modes)
        if len(modes_) != ndim:
            raise ConfigError(f"modes must be {ndim} positive integers, got {modes!r}")
        self.ndim = ndim
        self.axes = nn.ModuleList(
            AxisSpectralConv(in_channels, out_channels, m, axis) for axis, m in enumerate(modes_)
        )

    def forward(self, x: Tensor) -> Tensor:
        """Apply ``sum_axis K_axis(x)`` to ``x`` ``(batch, *spatial, in_channels)``."""
        if x.ndim != self.ndim + 2:
            raise ValueError(f"expected (batch, {self.ndim} spatial axes, channels), got {tuple(x.shape)}")
        out = self.axes[0](x)
        for conv in self.axes[1:]:
            out = out + conv(x)
        return out
