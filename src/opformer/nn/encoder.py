"""Encoder layer of the Galerkin Transformer: simple attention and a point-wise FFN with residuals."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from opformer.nn.attention import SimpleAttention
from opformer.nn.dropout import Dropout, drop_levels
from opformer.nn.mlp import FeedForward


class SimpleEncoderLayer(nn.Module):
    """One encoder layer on tokens ``(batch, N, d_model)`` with coordinates ``(N or batch, N, pos_dim)``.

    Galerkin norm scheme (normalization inside the attention, none on the residual stream)::

        x = x + drop(attn(x, pos));  x = x + drop(ffn(x))

    Regular scheme (no Q/K/V norm; post-LN on the residual stream)::

        x = LN1(x + drop(attn(x, pos)));  x = LN2(x + drop(ffn(x)))

    ``dropout`` acts on both residual branches, ``ffn_dropout`` inside the FFN and
    ``attention_dropout`` on the attention weights; all are active in training only. ``weights`` ``(batch, N)``
    are the tokens' quadrature weights on a mesh (:class:`~opformer.nn.attention.SimpleAttention`).
    """

    def __init__(self, d_model: int, n_head: int = 1, dim_ff: int | None = None, attention_type: str = "galerkin",
                 norm_scheme: str = "galerkin", pos_dim: int = 1, activation: str = "relu", dropout: float = 0.0,
                 ffn_dropout: float = 0.0, attention_dropout: float = 0.0, eps: float = 1e-5, xavier_gain: float = 0.01,
                 diagonal_weight: float = 0.01) -> None:
        super().__init__()
        self.attention = SimpleAttention(
            d_model,
            n_head,
            attention_type=attention_type,
            norm_scheme=norm_scheme,
            pos_dim=pos_dim,
            eps=eps,
            xavier_gain=xavier_gain,
            diagonal_weight=diagonal_weight,
            dropout=attention_dropout,
        )
        self.ffn = FeedForward(d_model, dim_ff or 2 * d_model, activation=activation, dropout=ffn_dropout)
        self.dropout = Dropout(dropout)
        self.post_norms = norm_scheme == "regular"
        if self.post_norms:
            self.norm1 = nn.LayerNorm(d_model, eps=eps)
            self.norm2 = nn.LayerNorm(d_model, eps=eps)

    def forward(self, x: Tensor, pos: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
        """Apply attention and FFN with their residual connections."""
        if self.training and drop_levels(self.dropout.p) > 0:
            x = x + self.dropout(self.attention(x, pos, weights=weights))
        else:
            x = self.attention(x, pos, residual=True, weights=weights)
        if self.post_norms:
            x = self.norm1(x)
        x = x + self.dropout(self.ffn(x))
        if self.post_norms:
            x = self.norm2(x)
        return x


class SimpleEncoder(nn.ModuleList):
    """``n_layers`` :class:`SimpleEncoderLayer` of the same settings (``layer_kwargs``), applied in turn to tokens
    ``(batch, N, d_model)`` with the same coordinates ``pos`` (and quadrature ``weights``, if given)."""

    def __init__(self, n_layers: int, d_model: int, **layer_kwargs: Any) -> None:
        super().__init__(SimpleEncoderLayer(d_model, **layer_kwargs) for _ in range(n_layers))

    def forward(self, x: Tensor, pos: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
        """Apply every layer to ``x``."""
        for layer in self:
            x = layer(x, pos, weights)
        return x
