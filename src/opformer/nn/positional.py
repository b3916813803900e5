"""Grid coordinates that models build from the shape of their input."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def _per_axis(value: float | bool | Sequence, ndim: int, name: str) -> list:
    """Broadcast a scalar to one value per axis, or check a sequence has one per axis."""
    if isinstance(value, (int, float, bool)):
        return [value] * ndim
    values = list(value)
    if len(values) != ndim:
        raise ValueError(f"{name}: expected {ndim} values (one per axis), got {len(values)}")
    return values


def grid_coordinates(
    shape: tuple[int, ...],
    *,
    lengths: float | Sequence[float] = 1.0,
    periodic: bool | Sequence[bool] = True,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Coordinates of a tensor-product grid, shape ``(*shape, len(shape))``.

    Along a periodic axis of ``n`` points the coordinates are ``length * i / n`` (i = 0..n-1),
    so a strided sub-sample of a fine grid gives exactly the coarse grid's points; along a
    non-periodic axis they are ``linspace(0, length, n)`` (both ends included).
    """
    ndim = len(shape)
    lengths_ = _per_axis(lengths, ndim, "lengths")
    periodic_ = _per_axis(periodic, ndim, "periodic")
    axes = []
    for n, length, is_periodic in zip(shape, lengths_, periodic_):
        # (i * length) / m is correctly rounded, so strided sub-grids match coarse grids exactly
        m = n if is_periodic else max(n - 1, 1)
        axis = torch.arange(n, device=device, dtype=torch.float64) * length / m
        axes.append(axis.to(dtype))
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)


def append_coordinates(x: Tensor, pos: Tensor) -> Tensor:
    """Append coordinates ``(*spatial, ndim)`` to the channels of ``x`` ``(batch, *spatial, c)``."""
    pos = pos.to(x.dtype).expand(x.shape[0], *pos.shape)
    return torch.cat([x, pos], dim=-1)
