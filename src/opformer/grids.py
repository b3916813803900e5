"""Grids: sub-sampling arithmetic, finite differences and block averages of channel-last fields.

Shared by data loading, normalisers, losses, models and evaluation; depends on nothing but torch."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from opformer.errors import DataError


def stride_for(stored: int, wanted: int, periodic: bool, what: str = "data") -> int:
    """The stride that sub-samples a grid of ``stored`` points to ``wanted`` points.

    Periodic grids hold the left end of each cell (``n`` points, stride ``stored / wanted``); closed grids hold
    both ends (``n = (stored - 1) / s + 1``, as Darcy's 421 -> 211, 141, 85, 61, 43).
    """
    if wanted == stored:
        return 1
    if periodic:
        ok = 0 < wanted < stored and stored % wanted == 0
        stride = stored // wanted if ok else 0
        valid = [stored // s for s in range(1, stored + 1) if stored % s == 0]
    else:
        ok = 1 < wanted < stored and (stored - 1) % (wanted - 1) == 0
        stride = (stored - 1) // (wanted - 1) if ok else 0
        valid = [(stored - 1) // s + 1 for s in range(1, stored) if (stored - 1) % s == 0]
    if not ok:
        shown = ", ".join(str(v) for v in valid[:8]) + (", ..." if len(valid) > 8 else "")
        raise DataError(f"{what}: resolution {wanted} is not a strided sub-sample of the stored {stored} points "
                        f"(valid: {shown})")
    return stride


def central_difference(u: torch.Tensor, lengths: Sequence[float], periodic: Sequence[bool]) -> torch.Tensor:
    """Second-order central differences of ``u`` ``(batch, *spatial, channels)`` along each spatial axis.

    Returns ``(batch, *spatial, channels * ndim)`` (axis-major: all channels of d/dx_1, then d/dx_2, ...).
    Periodic axes wrap around; closed axes (points at both ends) use second-order one-sided differences at
    the two ends.
    """
    grads = []
    for axis, (length, wrap) in enumerate(zip(lengths, periodic)):
        dim = axis + 1
        n = u.shape[dim]
        h = length / n if wrap else length / (n - 1)
        if wrap:
            grads.append((u.roll(-1, dim) - u.roll(1, dim)) / (2 * h))
            continue
        inner = (u.narrow(dim, 2, n - 2) - u.narrow(dim, 0, n - 2)) / (2 * h)
        u0, u1, u2 = (u.narrow(dim, i, 1) for i in range(3))
        v0, v1, v2 = (u.narrow(dim, n - 1 - i, 1) for i in range(3))
        first = (-3 * u0 + 4 * u1 - u2) / (2 * h)
        last = (3 * v0 - 4 * v1 + v2) / (2 * h)
        grads.append(torch.cat([first, inner, last], dim=dim))
    return torch.cat(grads, dim=-1)


def block_average(x: Tensor, size: int) -> Tensor:
    """Average a channel-last field on a closed ``n x n`` grid over blocks centred at a coarser grid's nodes.

    The coarse grid of ``size`` points per axis must be a strided sub-grid (``(n - 1) % (size - 1) == 0``,
    stride ``s``); coarse node ``j`` gets the mean over the fine nodes within ``s // 2`` of ``j s`` on each axis,
    clipped at the boundary (for odd ``s`` the blocks tile the grid). This is how the inverse problem's coarse
    target coefficient is made from the fine one.
    """
    n = x.shape[1]
    if size == n:
        return x
    if size < 2 or size > n or (n - 1) % (size - 1):
        raise DataError(f"block average: {size} points per axis is not a strided sub-grid of {n} "
                        f"(needs (n - 1) divisible by (size - 1))")
    stride = (n - 1) // (size - 1)
    radius = stride // 2
    y = F.avg_pool2d(x.permute(0, 3, 1, 2), kernel_size=2 * radius + 1, stride=stride, padding=radius,
                     count_include_pad=False)
    return y.permute(0, 2, 3, 1)
