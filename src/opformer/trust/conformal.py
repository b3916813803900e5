"""Split conformal prediction: the finite-sample quantile of calibration scores.

With ``n`` calibration scores exchangeable with a new one, the ``k``-th smallest, ``k = ceil((n + 1) c)``, bounds
the new score with probability at least ``c`` (and, for scores without ties, below ``c + 1 / (n + 1)``): exactly
``k / (n + 1)``. When ``k > n`` no calibration score is large enough and the bound is ``+inf``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

from opformer.errors import ConfigError, given


def check_coverage(coverage: float, option: str = "coverage=") -> float:
    """``coverage`` if it lies strictly between 0 and 1, else a one-line :class:`ConfigError` naming it as the
    call did (``option``: the flag, ``--coverage``, or the keyword, ``coverage=``: :func:`opformer.errors.given`)."""
    if not 0 < coverage < 1:
        raise ConfigError(f"{given(option, coverage)}: expected a level strictly between 0 and 1, e.g. 0.9")
    return float(coverage)


def conformal_rank(n: int, coverage: float) -> int | None:
    """The 1-based rank ``ceil((n + 1) coverage)`` of the calibration score that bounds a new one; None when it
    exceeds ``n`` (too few scores for this level). The product is exact: 0.9 counts as 9/10, so ``n = 9`` gives
    rank 9, where floating point (``10 * 0.9 = 9.000000000000002``) would give 10."""
    check_coverage(coverage)
    rank = math.ceil((n + 1) * Fraction(str(float(coverage))))
    return rank if rank <= n else None


def expected_coverage(n: int, coverage: float) -> float:
    """The probability that the bound of :func:`conformal_quantile` holds for a new exchangeable score (without
    ties): ``k / (n + 1)``, in ``[coverage, coverage + 1 / (n + 1))``; 1 when the bound is infinite."""
    rank = conformal_rank(n, coverage)
    return 1.0 if rank is None else rank / (n + 1)


def conformal_quantile(scores: torch.Tensor, coverage: float, sorted_: bool = False) -> torch.Tensor:
    """The split-conformal bound of ``scores`` ``(n, ...)`` along the first axis: the ``ceil((n + 1) coverage)``-th
    smallest (``+inf`` where there are too few scores), one value per trailing index. ``sorted_``: the scores are
    already sorted along the first axis."""
    rank = conformal_rank(scores.shape[0], coverage)
    if rank is None:
        return torch.full(scores.shape[1:], math.inf, dtype=scores.dtype)
    ordered = scores if sorted_ else scores.sort(dim=0).values
    return ordered[rank - 1]
