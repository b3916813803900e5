"""Resizing stored fields to another grid of the same domain, axis by axis, by the axis's grid kind.

Periodic axes: Fourier resize (the spectrum truncated or zero-padded), exact for a band-limited field.
Node axes: linear interpolation between the nodes (both ends held). Cell axes: the mean of ``s`` consecutive
cells when the size shrinks by an integer factor ``s`` (:func:`opformer.grids.restrict`, the coarse cell's
average), else linear interpolation between cell centres, extended linearly past the outer centres. Both are
exact for a linear field.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from opformer.grids import CELLS, PERIODIC, Kind, interpolate_axis, kind_of, restrict


def fourier_resize(x: Tensor, axis: int, size: int) -> Tensor:
    """``x`` resampled to ``size`` points along a periodic ``axis`` by its trigonometric interpolant.

    Computed in float64, returned in ``x``'s dtype. On an even grid the Nyquist mode ``n/2`` is a cosine: going
    up, its coefficient is split evenly between ``+n/2`` and ``-n/2``; going down to an even ``size``, the
    modes ``+-size/2`` fold into the real Nyquist coefficient. So a field of modes ``|k| < min(n, size) / 2``
    (and the cosine at an even size's Nyquist) is resized exactly, and shrinking samples the interpolant at
    the coarse points.
    """
    n = x.shape[axis]
    if size == n:
        return x
    spectrum = torch.fft.rfft(x.double(), dim=axis, norm="forward")
    keep = min(n, size) // 2 + 1
    spectrum = spectrum.narrow(axis, 0, keep)
    if size > n and n % 2 == 0:  # the input's Nyquist cosine, half at +n/2, half at -n/2
        spectrum = spectrum.clone()
        spectrum.select(axis, n // 2).mul_(0.5)
    if size < n and size % 2 == 0:  # +-size/2 fold into one real coefficient (irfft keeps its real part once)
        spectrum = spectrum.clone()
        spectrum.select(axis, size // 2).mul_(2.0)
    return torch.fft.irfft(spectrum, n=size, dim=axis, norm="forward").to(x.dtype)


def resize(x: Tensor, first_axis: int, shape: Sequence[int], kinds: Sequence[Kind]) -> Tensor:
    """``x`` with its spatial axes ``first_axis ..`` (of the given kinds) resized to ``shape``: Fourier on
    periodic axes, cell means for an integer coarsening of cells, linear interpolation otherwise."""
    for axis, (size, kind) in enumerate(zip(shape, kinds), start=first_axis):
        n, kind = x.shape[axis], kind_of(kind)
        if kind == PERIODIC:
            x = fourier_resize(x, axis, size)
        elif kind == CELLS and size < n and n % size == 0:
            x = restrict(x, axis, n // size, [CELLS])
        else:
            x = interpolate_axis(x, axis, size, kind, extend=True)
    return x
