"""Factorised spectral convolution (Tran et al. 2023, F-FNO): one 1D spectral convolution per axis, summed."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from opformer.errors import ConfigError


class AxisSpectralConv(nn.Module):
    """1D spectral convolution along one spatial axis of a channel-last field.

    ``rfft`` along ``axis`` (``norm="ortho"``), multiply the lowest ``modes`` frequencies ``0..modes-1`` by a
    learned complex matrix per frequency (``in -> out`` channels), zero the rest, ``irfft`` back. On a grid
    of ``n`` points at most ``n // 2 + 1`` modes exist; the extra weights are then unused. Complex weights
    are stored as a real tensor ``(in, out, modes, 2)`` (a complex entry counts twice, as in the papers),
    initialised like FNO: uniform in ``[0, 1 / (in * out))``. The FFT runs in float32 (float64 for float64
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
        n = x.shape[dim]
        real_dtype = torch.promote_types(x.dtype, torch.float32)
        with torch.autocast(device_type=x.device.type, enabled=False):
            x_ft = torch.fft.rfft(x.to(real_dtype), dim=dim, norm="ortho").movedim(dim, -2)  # (..., freq, in)
            kept = min(self.modes, n // 2 + 1)
            weight = torch.view_as_complex(self.weight.to(real_dtype))[:, :, :kept]
            out_ft = x_ft.new_zeros((*x_ft.shape[:-1], self.out_channels))
            # one (in -> out) matrix per frequency: a batched matmul over the kept frequencies
            low = x_ft[..., :kept, :].movedim(-2, 0)  # (kept, ..., in)
            mixed = torch.bmm(low.reshape(kept, -1, self.in_channels), weight.permute(2, 0, 1))
            out_ft[..., :kept, :] = mixed.reshape(*low.shape[:-1], self.out_channels).movedim(0, -2)
            return torch.fft.irfft(out_ft.movedim(-2, dim), n=n, dim=dim, norm="ortho")


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
