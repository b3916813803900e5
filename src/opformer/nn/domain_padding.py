"""Domain padding (Li et al., FNO, on non-periodic problems): zero cells appended at the end of each closed axis
of a channel-last field before the spectral layers, cropped after them, so that the Fourier series of the
spectral layers need not be periodic on the data's domain."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated

import torch.nn.functional as F
from torch import Tensor

from opformer.errors import ConfigError
from opformer.validate import NonNegativeInt, Range

#: what a model's ``padding`` may be: a number of cells (0: none) or a fraction of each closed axis in (0, 1)
Padding = NonNegativeInt | Annotated[float, Range(gt=0, lt=1)]


def axis_periodicity(periodic: bool | Sequence[bool], ndim: int) -> tuple[bool, ...]:
    """One bool per axis from a model's ``periodic`` (one bool for every axis, or a list of ``ndim``);
    ``ConfigError`` if a list has another length."""
    if isinstance(periodic, bool):
        return (periodic,) * ndim
    if len(periodic) != ndim:
        raise ConfigError(f"periodic: expected one bool or {ndim} (one per axis), got {list(periodic)}")
    return tuple(periodic)


def padding_cells(n: int, padding: int | float) -> int:
    """The cells appended to an axis of ``n`` points: ``padding`` itself (an int), or ``padding * n`` rounded
    half up (a fraction, which scales with the grid: the padded domain is the same at every resolution)."""
    return math.floor(padding * n + 0.5) if isinstance(padding, float) else padding


def pad_domain(h: Tensor, periodic: Sequence[bool], padding: int | float) -> Tensor:
    """``h`` ``(batch, *spatial, c)`` with :func:`padding_cells` zeros appended at the end of every axis that is
    not ``periodic`` (as the FNO authors' ``F.pad`` after the lifting); periodic axes are left as they are."""
    pads = [0, 0]  # F.pad counts from the last axis: the channels first
    for n, is_periodic in zip(reversed(h.shape[1:-1]), reversed(periodic)):
        pads += [0, 0 if is_periodic else padding_cells(n, padding)]
    return F.pad(h, pads) if any(pads) else h


def crop_domain(h: Tensor, spatial: Sequence[int]) -> Tensor:
    """The first ``spatial`` points of each spatial axis of ``h`` ``(batch, *padded, c)``: the unpadded domain."""
    return h[(slice(None), *(slice(0, n) for n in spatial))]
