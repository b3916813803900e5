"""Transolver's physics attention (Wu et al., ICML 2024, section 3.1), with quadrature-weighted slice tokens.

Per head, every point ``n`` is softly assigned to ``G`` learned slices, ``s_ng = softmax_g(Linear(x_n) / tau)``;
each slice becomes one token, the weighted mean of the point features in it; the ``G`` tokens attend to each other
(softmax attention); and each point takes back the mix ``sum_g s_ng z'_g`` of the attended tokens. The only sum over
points is the slice token's mean, taken here as a quadrature (``../shared/spec/mesh.md``):

    z_g = sum_n w_n s_ng f_n / (sum_n w_n s_ng + eps * mean_n w_n)

with ``w`` the points' weights (0 on padding) and the mean over the real points. With ``w = 1 / n`` this is the
paper's ``sum_n s_ng f_n / (sum_n s_ng + eps)``, the authors' ``eps = 1e-5`` included: the eps is relative to the
weights' scale, so it means the same with weights that sum to 1 as with the paper's unit weights.

On a structured mesh (``grid_shape`` given: the points are the ``(i, j[, k])`` nodes in C order) the projections to
the features and the slice logits are convolutions over the index grid (kernel 3), and the temperature is clamped to
[0.1, 5], as in the authors' structured-mesh attention.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.nn.dropout import Dropout

#: The structured meshes' bounds on the learned temperature (the authors' clamp).
TEMPERATURE_RANGE = (0.1, 5.0)


class PhysicsAttention(nn.Module):
    """Physics attention on ``(B, N, dim)`` tokens with ``n_head`` heads of ``dim / n_head`` and ``slice_num`` slices.

    Parameters (the authors' layout): ``project_x``, ``project_f`` (``dim -> dim``: Linear, or a convolution of
    ``kernel`` on a structured mesh), ``slice`` (``Linear(d_head, slice_num)``, shared by the heads), ``temperature``
    ``(1, n_head, 1, 1)`` initialised to 0.5, ``query``, ``key``, ``value`` (``Linear(d_head, d_head)`` without bias,
    shared by the heads, acting on the slice tokens) and ``out`` (``Linear(dim, dim)``). ``dropout`` acts on the
    tokens' attention matrix and the output, in training only.
    """

    def __init__(self, dim: int, n_head: int = 8, slice_num: int = 32, dropout: float = 0.0,
                 grid_shape: Sequence[int] | None = None, kernel: int = 3, eps: float = 1e-5) -> None:
        super().__init__()
        if n_head < 1 or dim % n_head != 0:
            raise ConfigError(f"n_hidden ({dim}) must be a multiple of n_head ({n_head})")
        self.n_head, self.d_head, self.eps = n_head, dim // n_head, eps
        self.grid_shape = None if grid_shape is None else tuple(grid_shape)
        if self.grid_shape is None:
            self.project_x, self.project_f = nn.Linear(dim, dim), nn.Linear(dim, dim)
        elif len(self.grid_shape) in (2, 3):
            conv = nn.Conv2d if len(self.grid_shape) == 2 else nn.Conv3d
            self.project_x = conv(dim, dim, kernel, 1, kernel // 2)
            self.project_f = conv(dim, dim, kernel, 1, kernel // 2)
        else:
            raise ConfigError(f"grid_shape: expected 2 or 3 axes of a structured mesh, got {list(self.grid_shape)}")
        self.slice = nn.Linear(self.d_head, slice_num)
        self.temperature = nn.Parameter(torch.full((1, n_head, 1, 1), 0.5))
        self.query = nn.Linear(self.d_head, self.d_head, bias=False)
        self.key = nn.Linear(self.d_head, self.d_head, bias=False)
        self.value = nn.Linear(self.d_head, self.d_head, bias=False)
        self.out = nn.Linear(dim, dim)
        self.dropout = Dropout(dropout)

    def _heads(self, projection: nn.Module, x: Tensor) -> Tensor:
        """``projection(x)`` split into heads, ``(B, n_head, N, d_head)``."""
        batch, n, dim = x.shape
        if self.grid_shape is None:
            y = projection(x)
        else:
            if n != _count(self.grid_shape):
                raise ValueError(f"expected the {_count(self.grid_shape)} nodes of a {list(self.grid_shape)} mesh, "
                                 f"got {n} points")
            grid = x.transpose(1, 2).reshape(batch, dim, *self.grid_shape)
            y = projection(grid).flatten(2).transpose(1, 2)
        return y.reshape(batch, n, self.n_head, self.d_head).transpose(1, 2)

    def forward(self, x: Tensor, weights: Tensor, mask: Tensor) -> Tensor:
        """Attend through the slices: ``x (B, N, dim)``, ``weights (B, N)`` the points' weights in the slice tokens'
        means (0 on padding), ``mask (B, N)`` True on real points (the eps's scale is their mean weight)."""
        batch, n, _ = x.shape
        f = self._heads(self.project_f, x)
        logits = self.slice(self._heads(self.project_x, x))
        tau = self.temperature if self.grid_shape is None else self.temperature.clamp(*TEMPERATURE_RANGE)
        s = (logits / tau).softmax(dim=-1)  # (B, h, N, G)
        ws = s * weights.to(s.dtype)[:, None, :, None]
        scale = weights.sum(dim=1) / mask.sum(dim=1)  # the mean weight of a real point
        norm = ws.sum(dim=2) + self.eps * scale.to(s.dtype)[:, None, None]  # (B, h, G)
        tokens = (ws.transpose(-2, -1) @ f) / norm.unsqueeze(-1)  # (B, h, G, d_head)
        q, k, v = self.query(tokens), self.key(tokens), self.value(tokens)
        attention = ((q @ k.transpose(-2, -1)) * self.d_head ** -0.5).softmax(dim=-1)
        attended = self.dropout(attention) @ v
        y = (s @ attended).transpose(1, 2).reshape(batch, n, -1)  # deslice: sum_g s_ng z'_g
        return self.dropout(self.out(y))


def _count(shape: Sequence[int]) -> int:
    """The number of nodes of a grid of ``shape``."""
    count = 1
    for size in shape:
        count *= size
    return count
