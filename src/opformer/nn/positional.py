"""Grid coordinates that models build from the shape of their input."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from opformer.grids import Kind, axis_points


def _per_axis(value: float | str | Sequence, ndim: int, name: str) -> list:
    """Broadcast a scalar to one value per axis, or check a sequence has one per axis."""
    if isinstance(value, (int, float, bool, str)):
        return [value] * ndim
    values = list(value)
    if len(values) != ndim:
        raise ValueError(f"{name}: expected {ndim} values (one per axis), got {len(values)}")
    return values


def grid_coordinates(
    shape: tuple[int, ...],
    *,
    lengths: float | Sequence[float] = 1.0,
    periodic: Kind | Sequence[Kind] = True,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Coordinates of a tensor-product grid, shape ``(*shape, len(shape))``.

    ``periodic`` gives each axis's grid kind (:data:`opformer.grids.GRID_KINDS`; a bool: True periodic, False
    nodes). Along a periodic axis of ``n`` points the coordinates are ``length * i / n`` (i = 0..n-1), so a
    strided sub-sample of a fine grid gives exactly the coarse grid's points; along a node axis they are
    ``linspace(0, length, n)`` (both ends included); along a cell axis the cell centres ``length (i + 1/2) / n``.
    """
    ndim = len(shape)
    lengths_ = _per_axis(lengths, ndim, "lengths")
    kinds = _per_axis(periodic, ndim, "periodic")
    axes = [axis_points(n, length, kind, device=device).to(dtype) for n, length, kind in zip(shape, lengths_, kinds)]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)


def append_coordinates(x: Tensor, pos: Tensor) -> Tensor:
    """Append coordinates ``(*spatial, ndim)`` to the channels of ``x`` ``(batch, *spatial, c)``."""
    pos = pos.to(x.dtype).expand(x.shape[0], *pos.shape)
    return torch.cat([x, pos], dim=-1)


def fourier_features(pos: Tensor, n_frequencies: int) -> Tensor:
    """Coordinates and their Fourier features: ``[x, sin(2 pi k x_j), cos(2 pi k x_j)]`` for ``k = 1..n_frequencies``
    and every axis ``j``; ``pos`` ``(..., d)`` -> ``(..., d (1 + 2 n_frequencies))``."""
    if n_frequencies == 0:
        return pos
    k = torch.arange(1, n_frequencies + 1, dtype=pos.dtype, device=pos.device)
    angles = (2 * torch.pi * pos.unsqueeze(-1) * k).flatten(-2)
    return torch.cat([pos, angles.sin(), angles.cos()], dim=-1)
