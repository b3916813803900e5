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

    def frame_weights(self) -> Tensor:
        """``(frames, width, width)``: each ``W_t`` with its cosine features ``cos(gamma tau_t)`` folded into its
        rows."""
        tau = torch.linspace(0, 1, self.frames, device=self.gamma.device, dtype=self.gamma.dtype)
        return torch.cos(tau[:, None] * self.gamma)[..., None] * self.weight

    def forward(self, z: Tensor) -> Tensor:
        """Aggregate ``z`` ``(..., frames, width)`` to ``(..., width)``."""
        if z.shape[-2:] != (self.frames, self.width):
            raise ValueError(f"expected (..., {self.frames}, {self.width}), got {tuple(z.shape)}")
        return z.flatten(-2) @ self.frame_weights().reshape(-1, self.width).to(z.dtype)

    def forward_linear(self, h: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        """The aggregation of the frames ``z_t = h_t weight^T + bias`` without forming them.

        ``h`` ``(..., frames, k)``, ``weight`` ``(width, k)``, ``bias`` ``(width,)`` or any shape broadcasting
        to ``(..., width)`` (the same for every frame). The aggregation is linear, so it equals
        ``sum_t h_t (weight^T W'_t) + bias sum_t W'_t`` (``W'_t`` the :meth:`frame_weights`): one
        ``(frames * k) x width`` product instead of ``(frames * width) x width``, and no ``(..., frames, width)``
        tensor. Equal to ``self(h @ weight.T + bias[..., None, :])`` up to rounding.
        """
        if h.shape[-2] != self.frames or weight.shape != (self.width, h.shape[-1]):
            raise ValueError(f"expected h (..., {self.frames}, k) and weight ({self.width}, k), got "
                             f"{tuple(h.shape)} and {tuple(weight.shape)}")
        frame_weights = self.frame_weights().to(h.dtype)
        fused = torch.einsum("ek,tef->tkf", weight.to(h.dtype), frame_weights).reshape(-1, self.width)
        return h.flatten(-2) @ fused + bias.to(h.dtype) @ frame_weights.sum(0)
