"""Unit-Gaussian normalisers, stored inside the surrogate (and so in every checkpoint)."""

from __future__ import annotations

import torch
from torch import nn

from opformer.errors import DataError
from opformer.grids import Kind, interpolate_axis, kind_of


class UnitGaussianNormalizer(nn.Module):
    """``encode(x) = (x - mean) / (std + eps)``, fitted on training data.

    ``mode="pointwise"`` keeps one mean/std per grid point and channel, fitted on the stored grid; on any
    other grid of the same domain the statistics are interpolated linearly along each axis (periodic axes
    wrap around, node axes hold both ends, cell axes their cells' centres), which on a strided sub-grid of
    points is exactly the strided statistics: a model trained on one grid is evaluated zero-shot on a coarser
    or finer one. ``periodic``: each axis's grid kind (:data:`opformer.grids.GRID_KINDS`, or a bool).
    ``mode="channel"`` keeps one mean/std per channel (any grid). ``mode="none"`` is the identity.
    """

    def __init__(self, mode: str, spatial_shape: tuple[int, ...], channels: int, periodic: tuple[Kind, ...],
                 eps: float = 1e-5) -> None:
        super().__init__()
        if mode not in ("none", "pointwise", "channel"):
            raise DataError(f"normaliser mode {mode!r}: expected none, pointwise or channel")
        self.mode = mode
        self.eps = eps
        self.periodic = tuple(kind_of(kind) for kind in periodic)
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
        if len(spatial) != len(self.periodic):
            raise DataError(f"normaliser: fitted on {len(self.periodic)}D data, got {len(spatial)}D")
        mean, std = self.mean, self.std
        for axis, (m, kind) in enumerate(zip(spatial, self.periodic)):
            mean, std = (interpolate_axis(s, axis, m, kind) for s in (mean, std))
        return mean, std

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
