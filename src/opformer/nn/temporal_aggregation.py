"""DPOT's temporal aggregation (Hao et al. 2024, eq. 6): frames combined by learned matrices and cosine features."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from opformer.errors import ConfigError


class TemporalAggregation(nn.Module):
    """``z = sum_t W_t^T (z_t * cos(gamma * tau_t))`` on ``(..., frames, width) -> (..., width)``, with
    ``tau_t = t / (frames - 1)`` (0 for one frame).

    ``weight`` ``(frames, width, width)`` is initialised ``N(0, 1) / (frames * sqrt(width))``; ``gamma``
    ``(width,)`` is learnable, initialised ``2 ** linspace(-10, 10, width)``. (The paper writes
    ``exp(-i gamma t)``; the authors' code, which this follows, uses the cosine.) The cosines are folded into the
    weight, so the sum is one ``(frames * width) x width`` matrix product.
    """

    def __init__(self, frames: int, width: int) -> None:
        super().__init__()
        if frames < 1 or width < 1:
            raise ConfigError(f"temporal aggregation needs frames and width >= 1, got {frames}, {width}")
        self.frames, self.width = frames, width
        self.weight = nn.Parameter(torch.randn(frames, width, width) / (frames * math.sqrt(width)))
        self.gamma = nn.Parameter(2.0 ** torch.linspace(-10, 10, width))

    def extra_repr(self) -> str:
        return f"frames={self.frames}, width={self.width}"

    def forward(self, z: Tensor) -> Tensor:
        """Aggregate ``z`` ``(..., frames, width)`` to ``(..., width)``."""
        if z.shape[-2:] != (self.frames, self.width):
            raise ValueError(f"expected (..., {self.frames}, {self.width}), got {tuple(z.shape)}")
        tau = torch.linspace(0, 1, self.frames, device=z.device, dtype=self.gamma.dtype)
        features = torch.cos(tau[:, None] * self.gamma)  # (frames, width)
        weight = (features[..., None] * self.weight).reshape(self.frames * self.width, self.width)
        return z.flatten(-2) @ weight.to(z.dtype)
