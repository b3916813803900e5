"""Unit-Gaussian normalizers, stored inside the surrogate (and so in every checkpoint)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from opformer.errors import DataError
from opformer.grids import Kind, interpolate_axis, kind_of


#: samples per chunk of a normalizer's statistics (:meth:`UnitGaussianNormalizer.fit`)
NORMALIZER_CHUNK = 16


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
            raise DataError(f"normalizer mode {mode!r}: expected none, pointwise or channel")
        self.mode = mode
        self.eps = eps
        self.periodic = tuple(kind_of(kind) for kind in periodic)
        shape = (*spatial_shape, channels) if mode == "pointwise" else (channels,)
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("std", torch.ones(shape))

    def fit(self, data: torch.Tensor | Iterable[torch.Tensor]) -> UnitGaussianNormalizer:
        """Fit the statistics on ``data`` of shape ``(sample, *spatial, channels)`` (or ``(sample, time, *spatial,
        channels)`` for channel statistics) on the stored grid: a tensor, or its consecutive chunks of samples
        (see :func:`fit_together`)."""
        chunks = data.split(NORMALIZER_CHUNK) if isinstance(data, torch.Tensor) else data
        return fit_together(((chunk,) for chunk in chunks), self)[0]

    def _stats(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.mode != "pointwise":
            return self.mean, self.std
        spatial = tuple(x.shape[1:-1])
        if len(spatial) != len(self.periodic):
            raise DataError(f"normalizer: fitted on {len(self.periodic)}D data, got {len(spatial)}D")
        mean, std = self.mean, self.std
        for axis, (m, kind) in enumerate(zip(spatial, self.periodic)):
            mean, std = (interpolate_axis(s, axis, m, kind) for s in (mean, std))
        return mean, std

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize ``x`` (``(batch, *spatial, channels)``)."""
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


class _Moments:
    """Float64 sums of a normalizer's statistics over chunks of samples, about the first chunk's mean (so the
    sums of squares do not cancel)."""

    def __init__(self, pointwise: bool) -> None:
        self.pointwise, self.count = pointwise, 0
        self.shift: torch.Tensor | None = None
        self.total: torch.Tensor | float = 0.0
        self.squares: torch.Tensor | float = 0.0

    def add(self, chunk: torch.Tensor) -> None:
        flat = chunk.double() if self.pointwise else chunk.double().flatten(0, -2)  # (rows, channels); 0 channels too
        if self.shift is None:
            self.shift = flat.mean(dim=0)
        centred = flat - self.shift
        self.total = self.total + centred.sum(dim=0)
        self.squares = self.squares + centred.square().sum(dim=0)
        self.count += flat.shape[0]

    def set(self, normalizer: UnitGaussianNormalizer) -> None:
        """The mean and the sample standard deviation into ``normalizer``'s buffers."""
        if self.shift is None:
            return
        mean = self.total / self.count
        variance = (self.squares - self.count * mean.square()) / max(self.count - 1, 1)
        normalizer.mean.copy_(self.shift + mean)
        normalizer.std.copy_(variance.clamp_min(0).sqrt())


def fit_together(chunks: Iterable[tuple[torch.Tensor, ...]],
                 *normalizers: UnitGaussianNormalizer) -> tuple[UnitGaussianNormalizer, ...]:
    """Fit ``normalizers[k]`` on element ``k`` of every chunk, in one pass over the chunks (consecutive samples;
    :data:`NORMALIZER_CHUNK` at a time where the data are split here). The sums run in float64, so a split held in
    memory and the same split read from disk chunk by chunk give the same statistics."""
    moments = [_Moments(n.mode == "pointwise") if n.mode != "none" else None for n in normalizers]
    if any(moments):
        for chunk in chunks:
            for moment, part in zip(moments, chunk):
                if moment is not None:
                    moment.add(part)
    for moment, normalizer in zip(moments, normalizers):
        if moment is not None:
            moment.set(normalizer)
    return normalizers
