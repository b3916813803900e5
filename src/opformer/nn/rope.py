"""Rotary position encoding (RoPE, Su et al. 2021) of 1D coordinates, as FactFormer uses on each axis.

A feature vector of width ``D`` at coordinate ``x`` is rotated in the planes ``(j, j + D/2)`` by the angle
``x * lam * theta_j`` with ``theta_j = base^(-2j/D)`` (``j = 0 .. D/2 - 1``; the "rotate-half" layout). Since
``R(a)^T R(b) = R(b - a)``, the dot product of a rotated query at ``x_i`` and a rotated key at ``x_j``
depends on the coordinates only through ``x_i - x_j``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from opformer.errors import ConfigError


def rotate_half(t: Tensor) -> Tensor:
    """``[t1, t2] -> [-t2, t1]`` on the last axis (the two halves of the features)."""
    first, second = t.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


class AxisRotaryEmbedding(nn.Module):
    """RoPE on features ``(..., S, dim)`` at the 1D coordinates ``(S,)`` of one axis.

    ``scale`` is the paper's mesh weight ``lambda`` (64: the slowest frequency turns once per ``2 pi / 64``
    of the coordinate), ``base`` the usual 10000.
    """

    def __init__(self, dim: int, scale: float = 64.0, base: float = 10000.0) -> None:
        super().__init__()
        if dim < 2 or dim % 2:
            raise ConfigError(f"rotary embedding: the feature width must be even and >= 2, got {dim}")
        self.scale = scale
        theta = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        self.register_buffer("theta", theta, persistent=False)

    def angles(self, coords: Tensor) -> Tensor:
        """Rotation angles ``(S, dim)``: ``x * lambda * theta_j``, repeated for the two halves."""
        dtype = torch.promote_types(coords.dtype, torch.float32)
        angle = coords.to(dtype)[:, None] * (self.scale * self.theta.to(coords.device, dtype))
        return torch.cat([angle, angle], dim=-1)

    def forward(self, t: Tensor, coords: Tensor) -> Tensor:
        """Rotate ``t`` ``(..., S, dim)`` by the angles of ``coords`` ``(S,)``."""
        angle = self.angles(coords)
        cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)
        return t * cos + rotate_half(t) * sin
