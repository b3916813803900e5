"""Inverted dropout with a keep mask drawn from 16-bit random integers.

``torch.nn.Dropout`` draws one Bernoulli variate per element, which on a CPU costs about as much as the FFN
matmul it follows (25 ms for 1.3M elements on one core here, 13% of a Darcy GT training step). This module
draws 64 random bits per four elements and keeps an element when its 16 bits are at least ``round(p * 2^16)``
(as a signed offset), so the drop probability is ``p`` rounded to a multiple of ``2^-16`` and the kept values
are scaled by ``1 / (1 - p_rounded)``: the expectation of the output is exactly the input. Works on any device;
``torch.manual_seed`` makes the masks reproducible as for ``nn.Dropout``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

LEVELS = 1 << 16


def drop_levels(p: float) -> int:
    """Number of the ``2^16`` equally likely 16-bit values that drop an element: ``round(p * 2^16)``."""
    return round(p * LEVELS)


def keep_mask(x: Tensor, p: float) -> Tensor:
    """A tensor like ``x`` of ``0`` (dropped, probability ``drop_levels(p) / 2^16``) and ``1 / (1 - that)``."""
    dropped = drop_levels(p)
    n = x.numel()
    bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(1 << 63), None)
    halves = bits.view(torch.int16)[:n].view(x.shape)
    return (halves >= dropped - LEVELS // 2).to(x.dtype).mul_(LEVELS / (LEVELS - dropped))


class Dropout(nn.Module):
    """Drop-in for ``nn.Dropout(p)`` (training mode only; identity in eval mode), faster on CPUs."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        """``x`` times a fresh keep mask in training mode, ``x`` itself otherwise."""
        if not self.training or drop_levels(self.p) == 0:
            return x
        if drop_levels(self.p) == LEVELS:
            return x * 0.0
        return x * keep_mask(x, self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"
