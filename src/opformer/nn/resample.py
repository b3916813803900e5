"""Linear resampling of cell-centred grids (periodic or not), e.g. a learned positional embedding on a new grid."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def linear_resample_matrix(n: int, m: int, periodic: bool, dtype: torch.dtype = torch.float64,
                           device: torch.device | str | None = None) -> Tensor:
    """``(m, n)`` matrix of linear interpolation from ``n`` to ``m`` cell centres of one axis.

    New cell ``j`` sits at ``s = (j + 0.5) n / m - 0.5`` in old-cell units (``align_corners=False``). A periodic
    axis wraps around; a non-periodic one clamps to its end cells, as ``torch.nn.functional.interpolate``.
    """
    s = (torch.arange(m, dtype=torch.float64) + 0.5) * n / m - 0.5
    if not periodic:
        s = s.clamp(0, n - 1)
    low = torch.floor(s)
    frac = s - low
    low = low.long()
    high = (low + 1) % n if periodic else (low + 1).clamp(max=n - 1)
    low = low % n
    matrix = torch.zeros(m, n, dtype=torch.float64)
    rows = torch.arange(m)
    matrix.index_put_((rows, low), 1 - frac, accumulate=True)
    matrix.index_put_((rows, high), frac, accumulate=True)
    return matrix.to(device=device, dtype=dtype)


def linear_resample(x: Tensor, size: Sequence[int], periodic: bool) -> Tensor:
    """Resample the trailing ``len(size)`` axes of ``x`` (cell-centred grids) to ``size`` by (multi)linear
    interpolation, axis by axis; axes already of their size are left alone."""
    first = x.dim() - len(size)
    for axis, m in enumerate(size, start=first):
        n = x.shape[axis]
        if n != m:
            matrix = linear_resample_matrix(n, m, periodic, x.dtype, x.device)
            x = (x.movedim(axis, -1) @ matrix.t()).movedim(-1, axis)
    return x
