"""Simple self-attention of the Galerkin Transformer: galerkin, fourier, softmax and linear types.

Tokens are ``(batch, N, d_model)``; the grid coordinates of the N tokens are concatenated in front
of the queries, keys and values of every head, so the attention itself is dimension-agnostic (a 2D
grid is flattened to N tokens by the model).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from opformer.errors import ConfigError

ATTENTION_TYPES = ("galerkin", "fourier", "softmax", "linear")
NORM_SCHEMES = ("galerkin", "regular")


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    """Raise ``ConfigError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"{name}: unknown value {value!r}; valid: {', '.join(choices)}")


class HeadwiseLayerNorm(nn.Module):
    """Layer normalisation of each head's features with its own affine parameters.

    Same parameters as ``n_head`` separate ``LayerNorm(d_head)``; input ``(batch, n_head, N, d_head)``.
    """

    def __init__(self, n_head: int, d_head: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(n_head, 1, d_head))
        self.bias = nn.Parameter(torch.zeros(n_head, 1, d_head))

    def forward(self, x: Tensor) -> Tensor:
        """Normalise the last axis of ``x`` and apply the per-head scale and shift."""
        return F.layer_norm(x, x.shape[-1:], eps=self.eps) * self.weight + self.bias


class SimpleAttention(nn.Module):
    """Multi-head simple attention (Cao 2021, section 4.1) with coordinates in every head.

    Q, K, V = ``Linear(d, d)`` split into ``n_head`` heads of ``d_head = d / n_head``. With the
    galerkin norm scheme, K and V (galerkin, linear) or Q and K (fourier, softmax) are layer-normalised
    per head. The ``pos_dim`` coordinates are then concatenated in front of Q, K and V of every head,
    so each head works in ``e = d_head + pos_dim``:

    - galerkin: ``Q (K^T V) / N`` (never forms an N x N matrix)
    - fourier: ``(Q K^T) V / N``
    - softmax: ``softmax(Q K^T / sqrt(e)) V`` (the scale uses the head width including coordinates)
    - linear: ``softmax_features(Q) (softmax_positions(K)^T V)``

    The heads are merged to ``n_head * e`` features and ``Linear(d + n_head * pos_dim, d)`` maps back.
    ``dropout`` acts on the N x N attention matrix (fourier, softmax) or on ``K^T V`` (galerkin,
    linear), in training only.
    """

    def __init__(
        self,
        d_model: int,
        n_head: int = 1,
        attention_type: str = "galerkin",
        norm_scheme: str = "galerkin",
        pos_dim: int = 1,
        eps: float = 1e-5,
        xavier_gain: float = 0.01,
        diagonal_weight: float = 0.01,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_choice("attention_type", attention_type, ATTENTION_TYPES)
        check_choice("norm_scheme", norm_scheme, NORM_SCHEMES)
        if n_head < 1 or d_model % n_head != 0:
            raise ConfigError(f"d_model ({d_model}) must be a multiple of n_head ({n_head})")
        if pos_dim < 0:
            raise ConfigError(f"pos_dim must be >= 0, got {pos_dim}")
        self.attention_type = attention_type
        self.norm_scheme = norm_scheme
        self.n_head = n_head
        self.d_head = d_model // n_head
        self.pos_dim = pos_dim
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.norms = nn.ModuleDict()
        if norm_scheme == "galerkin":
            normed = ("key", "value") if attention_type in ("galerkin", "linear") else ("query", "key")
            for name in normed:
                self.norms[name] = HeadwiseLayerNorm(n_head, self.d_head, eps)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(d_model + n_head * pos_dim, d_model)
        self.reset_projections(xavier_gain, diagonal_weight)

    @torch.no_grad()
    def reset_projections(self, xavier_gain: float, diagonal_weight: float) -> None:
        """Set W_Q, W_K, W_V to ``xavier_uniform(gain=xavier_gain) + diagonal_weight * I``, biases to 0."""
        for linear in (self.query, self.key, self.value):
            nn.init.xavier_uniform_(linear.weight, gain=xavier_gain)
            linear.weight.diagonal().add_(diagonal_weight)
            nn.init.zeros_(linear.bias)

    def _heads(self, name: str, x: Tensor) -> Tensor:
        """Project ``x`` with the named linear map and split into heads ``(batch, h, N, d_head)``."""
        batch, n_tokens, _ = x.shape
        y = getattr(self, name)(x).view(batch, n_tokens, self.n_head, self.d_head).transpose(1, 2)
        return self.norms[name](y) if name in self.norms else y

    def forward(self, x: Tensor, pos: Tensor | None = None) -> Tensor:
        """Attend over the N tokens of ``x`` ``(batch, N, d)`` with coordinates ``pos``.

        ``pos`` is ``(N, pos_dim)`` or ``(batch, N, pos_dim)``; it may be None only if ``pos_dim == 0``.
        """
        batch, n_tokens, _ = x.shape
        q, k, v = (self._heads(name, x) for name in ("query", "key", "value"))
        if self.pos_dim > 0:
            if pos is None or pos.shape[-1] != self.pos_dim or pos.shape[-2] != n_tokens:
                got = None if pos is None else tuple(pos.shape)
                raise ValueError(f"expected coordinates (..., {n_tokens}, {self.pos_dim}), got {got}")
            pos = pos.to(q.dtype)
            pos = pos.unsqueeze(-3).expand(batch, self.n_head, n_tokens, self.pos_dim)
            q, k, v = (torch.cat([pos, t], dim=-1) for t in (q, k, v))
        z = self._attend(q, k, v)
        z = z.transpose(1, 2).reshape(batch, n_tokens, -1)
        return self.out(z)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """Per-head attention on ``(batch, h, N, e)`` tensors."""
        n_tokens = q.shape[-2]
        if self.attention_type == "galerkin":
            return q @ self.dropout(k.transpose(-2, -1) @ v / n_tokens)
        if self.attention_type == "linear":
            kv = k.softmax(dim=-2).transpose(-2, -1) @ v
            return q.softmax(dim=-1) @ self.dropout(kv)
        if self.attention_type == "fourier":
            return self.dropout((q / n_tokens) @ k.transpose(-2, -1)) @ v
        scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)
        return self.dropout(scores.softmax(dim=-1)) @ v
