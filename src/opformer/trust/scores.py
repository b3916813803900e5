"""Nonconformity scores: how wrong a prediction was on a calibration sample, in a form whose conformal quantile is
a bound for a new prediction.

- ``relative_l2``: the per-sample relative L2 error ``||pred - truth|| / ||truth||`` (over grid and channels); its
  quantile is the bound on a new sample's relative L2 error (the same for every input of a frame). Normalized
  (``roughness``): the error over a difficulty of the input known before solving, its roughness
  (:func:`opformer.trust.shift.roughness`); the bound is the quantile times the new input's roughness. So, where
  they apply, ``residual`` (the physics estimate of the prediction's error) and ``backtest`` (the surrogate's error
  on the input's own earlier frames): :mod:`opformer.trust.estimates`.
- pointwise: ``|pred - truth| / scale(pred)`` at every grid point and channel, where ``scale`` is a local magnitude
  computed from the prediction alone (so it is known for a new input):

  - ``rms``: the prediction's root mean square over the grid, per sample and channel (a band of uniform width);
  - ``local``: the prediction's magnitude ``|pred|`` averaged over a box of neighbours (``2 r + 1`` points per
    axis, ``r = max(1, n // 16)``) plus ``LOCAL_FLOOR`` times the ``rms`` scale (no zero width where the field
    crosses zero).

  A sample's pointwise score at level ``p`` is the ``ceil(p m)``-th smallest of its ``m`` normalized errors: the
  band ``pred +- q scale`` with ``q`` the conformal quantile of these scores at coverage ``c`` holds, with probability
  at least ``c`` over samples, at least a fraction ``p`` of a new sample's points (``p = 1``: all of them).
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

from opformer.eval.metrics import relative_l2_per_sample

#: The per-sample scores and the scales of the pointwise score (see the module's docstring); a calibration uses the
#: sharper of each on the run's validation split, else the defaults (docs/trust.md). Every calibration offers the
#: plain scores; ``residual`` and ``backtest`` (:mod:`opformer.trust.estimates`) where they apply.
PLAIN_SCORES = ("relative_l2", "roughness")
SAMPLE_SCORES = (*PLAIN_SCORES, "residual", "backtest")
SCALES = ("rms", "local")
DEFAULT_SCORE, DEFAULT_SCALE = "relative_l2", "local"
#: Fraction of the ``rms`` scale added to the ``local`` one.
LOCAL_FLOOR = 0.1
#: The fractions of a sample's points at which pointwise scores are stored; a band at coverage ``c`` uses the
#: smallest level at least ``c``.
POINT_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 1.0)


def relative_l2(pred: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """Per-sample relative L2 errors of ``(sample, *spatial, channels)`` fields, in float64."""
    return relative_l2_per_sample(pred.double(), truth.double())


def _box_mean(x: torch.Tensor, axis: int, radius: int) -> torch.Tensor:
    """The mean of ``x`` over ``2 radius + 1`` neighbours along ``axis`` (fewer at the ends: those that exist)."""
    n = x.shape[axis]
    sums = torch.cat([torch.zeros_like(x.narrow(axis, 0, 1)), x.cumsum(axis)], dim=axis)
    index = torch.arange(n, device=x.device)
    high, low = (index + radius + 1).clamp(max=n), (index - radius).clamp(min=0)
    shape = [1] * x.dim()
    shape[axis] = n
    count = (high - low).reshape(shape).to(x.dtype)
    return (sums.index_select(axis, high) - sums.index_select(axis, low)) / count


def local_scale(pred: torch.Tensor, scale: str) -> torch.Tensor:
    """The pointwise score's scale of predictions ``(sample, *spatial, channels)`` (float64, the same shape)."""
    pred = pred.double()
    axes = tuple(range(1, pred.dim() - 1))
    rms = pred.pow(2).mean(dim=axes, keepdim=True).sqrt().expand_as(pred)
    if scale == "rms":
        return rms
    if scale != "local":
        raise ValueError(f"scale {scale!r}: expected one of {', '.join(SCALES)}")
    smooth = pred.abs()
    for axis in axes:
        smooth = _box_mean(smooth, axis, max(1, pred.shape[axis] // 16))
    return smooth + LOCAL_FLOOR * rms


def pointwise_scores(pred: torch.Tensor, truth: torch.Tensor, scale: str,
                     local: torch.Tensor | None = None) -> torch.Tensor:
    """``(sample, len(POINT_LEVELS))``: each sample's ``ceil(p m)``-th smallest normalized error ``|pred - truth| /
    scale`` over its ``m`` grid points and channels, for each level ``p`` of :data:`POINT_LEVELS` (``local``:
    ``local_scale(pred, scale)`` where the caller has it already)."""
    local = local_scale(pred, scale) if local is None else local
    ratio = ((pred.double() - truth.double()).abs() / local).flatten(1).sort(dim=1).values
    m = ratio.shape[1]
    ranks = torch.tensor([math.ceil(Fraction(str(level)) * m) - 1 for level in POINT_LEVELS], device=ratio.device)
    return ratio.index_select(1, ranks)


def point_level(coverage: float) -> int:
    """The index in :data:`POINT_LEVELS` of the smallest level at least ``coverage``."""
    return next(i for i, level in enumerate(POINT_LEVELS) if level >= coverage - 1e-12)
