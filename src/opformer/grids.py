"""Grids: sub-sampling arithmetic, finite differences and block averages of channel-last fields.

Shared by data loading, normalizers, losses, models and evaluation; depends on nothing but torch."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from opformer.errors import DataError


#: Per-axis grid kinds. ``periodic``: ``n`` points at the left ends of ``n`` equal cells (``x_i = L i / n``);
#: ``nodes``: a closed axis holding both ends (``x_i = L i / (n - 1)``); ``cells``: the centres of ``n`` equal
#: cells of a closed axis (``x_i = L (i + 1/2) / n``, finite-volume data such as PDEBench's).
PERIODIC, NODES, CELLS = "periodic", "nodes", "cells"
GRID_KINDS = (PERIODIC, NODES, CELLS)
#: A grid kind, or a bool as older code and files say it (True: periodic, False: nodes).
Kind = str | bool


def kind_of(kind: Kind) -> str:
    """The grid kind ``kind`` names (a bool: True is periodic, False is nodes); ``ValueError`` for anything else."""
    if isinstance(kind, bool):
        return PERIODIC if kind else NODES
    if kind not in GRID_KINDS:
        raise ValueError(f"grid kind {kind!r}: expected one of {', '.join(GRID_KINDS)}")
    return kind


def axis_kinds(domain: dict) -> tuple[str, ...]:
    """The grid kind of each axis of a stored domain: its ``grid`` list, else from ``periodic`` (files written
    before cell-centred grids existed: periodic or nodes)."""
    return tuple(kind_of(k) for k in domain.get("grid", domain["periodic"]))


def axis_points(n: int, length: float, kind: Kind, *, device: torch.device | str | None = None) -> Tensor:
    """The ``n`` coordinates (float64) of an axis of ``length`` of the given kind (see ``GRID_KINDS``).

    ``(i * length) / m`` is correctly rounded, so a strided sub-grid of periodic or node points is exactly
    the coarse grid's points."""
    kind = kind_of(kind)
    i = torch.arange(n, device=device, dtype=torch.float64)
    if kind == CELLS:
        return (2 * i + 1) * length / (2 * n)
    return i * length / (n if kind == PERIODIC else max(n - 1, 1))


def interpolate_axis(values: Tensor, axis: int, size: int, kind: Kind, extend: bool = False) -> Tensor:
    """Linear interpolation of grid values along ``axis`` to ``size`` points of the same domain and kind.

    Periodic axes hold the left ends of ``n`` equal cells (point ``j`` of ``m`` at ``j n / m`` stored points,
    wrapping around); node axes hold both ends (point ``j`` at ``j (n - 1) / (m - 1)``); cell axes the centres
    of ``n`` cells (point ``j`` at ``((2 j + 1) n / m - 1) / 2``). Beyond the outer stored cell centres the
    values are held (``extend=False``: statistics stay in range) or extended linearly from the last two
    (``extend=True``: a linear field is reproduced exactly). Positions are found in integer arithmetic, so a
    strided sub-grid of points gets the stored values exactly. ``DataError`` if there is nothing to interpolate.
    """
    kind = kind_of(kind)
    n = values.shape[axis]
    if size == n:
        return values
    if size < (2 if kind == NODES else 1) or (kind != PERIODIC and n < 2):
        raise DataError(f"cannot interpolate a {kind} axis of {n} points to {size}")
    j = torch.arange(size, device=values.device)
    if kind == CELLS:
        numerator, denominator = (2 * j + 1) * n - size, 2 * size
        if not extend:
            numerator = numerator.clamp(0, 2 * (n - 1) * size)
    else:
        numerator, denominator = (j * n, size) if kind == PERIODIC else (j * (n - 1), size - 1)
    left = torch.div(numerator, denominator, rounding_mode="floor")
    if kind != PERIODIC:
        left = left.clamp(0, n - 2)
    weight = (numerator - left * denominator).to(values.dtype) / denominator
    right = (left + 1) % n
    shape = [1] * values.dim()
    shape[axis] = size
    weight = weight.reshape(shape)
    return values.index_select(axis, left) * (1 - weight) + values.index_select(axis, right) * weight


def stride_for(stored: int, wanted: int, kind: Kind, what: str = "data") -> int:
    """The stride that takes a grid of ``stored`` points to ``wanted`` points of the same domain.

    Periodic grids hold the left end of each cell (``n`` points, stride ``stored / wanted``); node grids hold
    both ends (``n = (stored - 1) / s + 1``, as Darcy's 421 -> 211, 141, 85, 61, 43); cell grids merge ``s``
    cells into one (``stored / wanted``, see :func:`restrict`).
    """
    if wanted == stored:
        return 1
    if kind_of(kind) != NODES:
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


def restrict(x: Tensor, first_axis: int, stride: int, kinds: Sequence[Kind]) -> Tensor:
    """``x`` on the coarser grid of ``stride`` (spatial axes ``first_axis ..`` of the given kinds): every
    ``stride``-th point of periodic and node axes, the mean of each ``stride`` consecutive cells of cell axes
    (the coarse cell's average, so finite-volume data stay cell averages)."""
    if stride == 1:
        return x
    for axis, kind in enumerate(kinds, start=first_axis):
        if kind_of(kind) == CELLS:
            shape = x.shape
            x = x.reshape(*shape[:axis], shape[axis] // stride, stride, *shape[axis + 1:]).mean(dim=axis + 1)
        else:
            x = x[(slice(None),) * axis + (slice(None, None, stride),)]
    return x


def restricted_shape(shape: Sequence[int], stride: int, kinds: Sequence[Kind]) -> tuple[int, ...]:
    """The grid :func:`restrict` makes of ``shape`` with ``stride``: every ``stride``-th point, or ``n / stride``
    cells."""
    return tuple(n // stride if kind_of(kind) == CELLS else len(range(0, n, stride)) for n, kind in zip(shape, kinds))


def spacing(n: int, length: float, kind: Kind) -> float:
    """The distance between neighbouring points of an axis of ``n`` points of the given kind."""
    return length / (n - 1) if kind_of(kind) == NODES else length / n


def central_difference(u: torch.Tensor, lengths: Sequence[float], periodic: Sequence[Kind]) -> torch.Tensor:
    """Second-order central differences of ``u`` ``(batch, *spatial, channels)`` along each spatial axis.

    Returns ``(batch, *spatial, channels * ndim)`` (axis-major: all channels of d/dx_1, then d/dx_2, ...).
    ``periodic``: each axis's grid kind (or bool). Periodic axes wrap around; closed axes (nodes or cells)
    use second-order one-sided differences at the two ends.
    """
    grads = []
    for axis, (length, kind) in enumerate(zip(lengths, periodic)):
        dim = axis + 1
        n = u.shape[dim]
        h, wrap = spacing(n, length, kind), kind_of(kind) == PERIODIC
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
