"""Unit-Gaussian normalisers, stored inside the surrogate (and so in every checkpoint)."""

from __future__ import annotations

import torch
from torch import nn

from opformer.grids import stride_for
from opformer.errors import DataError


class UnitGaussianNormalizer(nn.Module):
    """``encode(x) = (x - mean) / (std + eps)``, fitted on training data.

    ``mode="pointwise"`` keeps one mean/std per grid point and channel, fitted on the stored (finest) grid;
    a coarser grid that is a strided sub-sample of it uses the strided statistics.
    ``mode="channel"`` keeps one mean/std per channel (any grid). ``mode="none"`` is the identity.
    """

    def __init__(self, mode: str, spatial_shape: tuple[int, ...], channels: int, periodic: tuple[bool, ...],
                 eps: float = 1e-5) -> None:
        super().__init__()
        if mode not in ("none", "pointwise", "channel"):
            raise DataError(f"normaliser mode {mode!r}: expected none, pointwise or channel")
        self.mode = mode
        self.eps = eps
        self.periodic = tuple(periodic)
        shape = (*spatial_shape, channels) if mode == "pointwise" else (channels,)
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("std", torch.ones(shape))

    def fit(self, data: torch.Tensor) -> UnitGaussianNormalizer:
        """Fit the statistics on ``data`` of shape ``(sample, *spatial, channels)`` on the stored grid."""
        if self.mode == "none":
            return self
        dims = (0,) if self.mode == "pointwise" else tuple(range(data.ndim - 1))
        self.mean.copy_(data.mean(dim=dims))
        self.std.copy_(data.std(dim=dims))
        return self

    def _stats(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.mode != "pointwise":
            return self.mean, self.std
        spatial = tuple(x.shape[1:-1])
        index = tuple(slice(None, None, stride_for(n, m, p, "normaliser"))
                      for n, m, p in zip(self.mean.shape[:-1], spatial, self.periodic))
        return self.mean[index], self.std[index]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x`` (``(batch, *spatial, channels)``)."""
        if self.mode == "none":
            return x
        mean, std = self._stats(x)
        return (x - mean) / (std + self.eps)

    def decode(self, x: torch.Tensor) -> torch.Tensor:
        """Invert :meth:`encode`."""
        if self.mode == "none":
            return x
        mean, std = self._stats(x)
        return x * (std + self.eps) + mean
