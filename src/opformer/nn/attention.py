"""Simple self-attention of the Galerkin Transformer: galerkin, fourier, softmax and linear types.

Tokens are ``(batch, N, d_model)``; the grid coordinates of the N tokens are concatenated in front
of the queries, keys and values of every head, so the attention itself is dimension-agnostic (a 2D
grid is flattened to N tokens by the model). On a mesh, ``weights`` ``(batch, N)`` (quadrature weights summing to 1
over each sample's points, 0 on padding) replace the uniform ``1 / N`` in every sum over tokens, and a zero weight
excludes a token from every sum and softmax (``../shared/spec/mesh.md``). FactFormer's full-grid linear attention
with RoPE is another module, :mod:`opformer.nn.oformer_attention`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.nn.dropout import Dropout

ATTENTION_TYPES = ("galerkin", "fourier", "softmax", "linear")
NORM_SCHEMES = ("galerkin", "regular")


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    """Raise ``ConfigError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"{name}: unknown value {value!r}; valid: {', '.join(choices)}")


def _head_products(a: Tensor, b: Tensor, pos: Tensor | None) -> Tensor:
    """``[pos, a_h]^T [pos, b_h]`` of every head: ``a, b`` ``(batch, N, h, d)``, ``pos`` ``(N or batch, N, p)``
    or None; returns ``(batch, h, p + d, p + d)``, assembled from the blocks (no concatenated copies)."""
    batch, _, h, d = a.shape
    if h == 1:
        atb = torch.bmm(a.flatten(2).transpose(1, 2), b.flatten(2)).unsqueeze(1)
    else:
        atb = torch.einsum("bnhi,bnhj->bhij", a, b)
    if pos is None:
        return atb
    p = pos.shape[-1]
    pos_t = pos.transpose(-2, -1)
    ptp = (pos_t @ pos).unsqueeze(-3).expand(batch, h, p, p)
    ptb = (pos_t @ b.flatten(2)).view(batch, p, h, d).transpose(1, 2)
    pta = (pos_t @ a.flatten(2)).view(batch, p, h, d).permute(0, 2, 3, 1)  # (a^T pos), formed as pos^T a
    return torch.cat([torch.cat([ptp, ptb], dim=-1), torch.cat([pta, atb], dim=-1)], dim=-2)


def _head_gradient(other: Tensor, grad: Tensor, grad_pos: Tensor | None, pos: Tensor | None) -> Tensor:
    """``other_h grad_h + pos grad_pos_h`` per head as a contiguous ``(batch, N, h, d)`` tensor: the gradient of
    one factor of :func:`_head_products` (``other`` ``(batch, N, h, d)``, ``grad`` ``(batch, h, d, d)``,
    ``grad_pos`` ``(batch, h, p, d)``)."""
    batch, n_tokens, h, d = other.shape
    if pos is not None:
        pos = pos.expand(batch, n_tokens, pos.shape[-1])
    if h == 1:
        out = torch.bmm(other.flatten(2), grad[:, 0])
        if pos is not None:
            out.baddbmm_(pos, grad_pos[:, 0])
        return out.view(batch, n_tokens, 1, d)
    out = torch.einsum("bnhi,bhij->bnhj", other, grad)
    if pos is not None:
        out = out + torch.einsum("bnp,bhpj->bnhj", pos, grad_pos)
    return out.contiguous()


class _GalerkinGram(torch.autograd.Function):
    """:func:`_head_products` with a backward that writes both gradients as contiguous ``(batch, N, h, d)``
    tensors in one product each (autograd's would hand one factor a transposed gradient, which the layer
    norm before it copies, and form the coordinate blocks' gradients as separate N-sized tensors)."""

    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor, pos: Tensor | None) -> Tensor:
        ctx.save_for_backward(a, b, pos)
        ctx.autocast = torch.is_autocast_enabled(a.device.type), torch.get_autocast_dtype(a.device.type)
        return _head_products(a, b, pos)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        a, b, pos = ctx.saved_tensors
        p = 0 if pos is None else pos.shape[-1]
        enabled, dtype = ctx.autocast
        with torch.autocast(a.device.type, dtype=dtype, enabled=enabled):
            # d/da = b dA_ab^T + pos dA_ap^T, d/db = a dA_ab + pos dA_pb (blocks of dA as in the forward)
            grad_a = _head_gradient(b, grad[..., p:, p:].transpose(-2, -1), grad[..., p:, :p].transpose(-2, -1),
                                    pos) if ctx.needs_input_grad[0] else None
            grad_b = _head_gradient(a, grad[..., p:, p:], grad[..., :p, p:], pos) if ctx.needs_input_grad[1] else None
        return (None if grad_a is None else grad_a.to(a.dtype),
                None if grad_b is None else grad_b.to(b.dtype), None)


def galerkin_gram(k: Tensor, v: Tensor, pos: Tensor | None) -> Tensor:
    """``K'_h^T V'_h`` of every head with ``K'_h = [pos, K_h]``, ``V'_h = [pos, V_h]``: ``k, v`` ``(batch, N, h, d)``,
    ``pos`` ``(N or batch, N, p)`` or None (no coordinates); returns ``(batch, h, p + d, p + d)``."""
    return _GalerkinGram.apply(k, v, pos)


class HeadwiseLayerNorm(nn.Module):
    """Layer normalization of each head's features with its own affine parameters.

    Same parameters as ``n_head`` separate ``LayerNorm(d_head)`` (stored as ``(n_head, 1, d_head)``);
    input ``(..., n_head, d_head)``, i.e. heads split off the last axis of a ``(batch, N, d)`` tensor.
    """

    def __init__(self, n_head: int, d_head: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(n_head, 1, d_head))
        self.bias = nn.Parameter(torch.zeros(n_head, 1, d_head))

    def forward(self, x: Tensor) -> Tensor:
        """Normalize the last axis of ``x`` and apply the per-head scale and shift."""
        n_head, _, d_head = self.weight.shape
        weight, bias = self.weight.view(n_head, d_head), self.bias.view(n_head, d_head)
        if n_head == 1:  # one fused kernel, affine included
            return F.layer_norm(x, (d_head,), weight[0], bias[0], eps=self.eps)
        return torch.addcmul(bias, F.layer_norm(x, (d_head,), eps=self.eps), weight)


class SimpleAttention(nn.Module):
    """Multi-head simple attention (Cao 2021, section 4.1) with coordinates in every head.

    Q, K, V = ``Linear(d, d)`` split into ``n_head`` heads of ``d_head = d / n_head``. With the
    galerkin norm scheme, K and V (galerkin, linear) or Q and K (fourier, softmax) are layer-normalized
    per head. The ``pos_dim`` coordinates are then concatenated in front of Q, K and V of every head,
    so each head works in ``e = d_head + pos_dim``:

    - galerkin: ``Q (K^T V) / N`` (never forms an N x N matrix)
    - fourier: ``(Q K^T) V / N``
    - softmax: ``softmax(Q K^T / sqrt(e)) V`` (the scale uses the head width including coordinates)
    - linear: ``softmax_features(Q) (softmax_positions(K)^T V)``

    The heads are merged to ``n_head * e`` features and ``Linear(d + n_head * pos_dim, d)`` maps back.
    ``dropout`` acts on the N x N attention matrix (fourier, softmax) or on ``K^T V`` (galerkin,
    linear), in training only.

    With quadrature ``weights`` ``w`` (``(batch, N)``, each row summing to 1; 0 excludes a token) the sums over
    tokens are quadratures: galerkin ``Q (K^T diag(w) V)``, fourier ``(Q K^T) diag(w) V``, softmax
    ``softmax(s + log w)`` over keys, linear ``softmax_positions(K + log w)``. ``w = 1 / N`` gives the unweighted
    layer.
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
        self.dropout = Dropout(dropout)
        self.out = nn.Linear(d_model + n_head * pos_dim, d_model)
        self.reset_projections(xavier_gain, diagonal_weight)

    @torch.no_grad()
    def reset_projections(self, xavier_gain: float, diagonal_weight: float) -> None:
        """Set W_Q, W_K, W_V to ``xavier_uniform(gain=xavier_gain) + diagonal_weight * I``, biases to 0."""
        for linear in (self.query, self.key, self.value):
            nn.init.xavier_uniform_(linear.weight, gain=xavier_gain)
            linear.weight.diagonal().add_(diagonal_weight)
            nn.init.zeros_(linear.bias)

    def _project(self, name: str, x: Tensor) -> Tensor:
        """Project ``x`` with the named linear map, layer-normalized per head if configured.

        Returns ``(batch, N, n_head, d_head)`` (a view of the ``(batch, N, d)`` projection).
        """
        batch, n_tokens, _ = x.shape
        y = getattr(self, name)(x).view(batch, n_tokens, self.n_head, self.d_head)
        return self.norms[name](y) if name in self.norms else y

    def _check_pos(self, pos: Tensor | None, n_tokens: int) -> None:
        """Raise ``ValueError`` unless ``pos`` holds ``pos_dim`` coordinates of the ``n_tokens`` tokens."""
        if pos is None or pos.shape[-1] != self.pos_dim or pos.shape[-2] != n_tokens:
            got = None if pos is None else tuple(pos.shape)
            raise ValueError(f"expected coordinates (..., {n_tokens}, {self.pos_dim}), got {got}")

    def forward(self, x: Tensor, pos: Tensor | None = None, residual: bool = False,
                weights: Tensor | None = None) -> Tensor:
        """Attend over the N tokens of ``x`` ``(batch, N, d)`` with coordinates ``pos``; with ``residual``, return
        ``x`` plus the attention (for the galerkin type one product gives both, outside autocast).

        ``pos`` is ``(N, pos_dim)`` or ``(batch, N, pos_dim)``; it may be None only if ``pos_dim == 0``.
        ``weights`` ``(batch, N)``: the quadrature weights of the tokens (None: ``1 / N`` each).
        """
        batch, n_tokens, _ = x.shape
        if self.pos_dim > 0:
            self._check_pos(pos, n_tokens)
            pos = pos.to(x.dtype)
        if weights is not None and tuple(weights.shape) != (batch, n_tokens):
            raise ValueError(f"expected weights ({batch}, {n_tokens}), got {tuple(weights.shape)}")
        if self.attention_type == "galerkin":
            if residual and torch.is_autocast_enabled(x.device.type):  # keep the residual stream's precision
                return x + self._galerkin(x, pos, False, weights)
            return self._galerkin(x, pos, residual, weights)
        if residual:
            return x + self.forward(x, pos, weights=weights)
        q, k, v = (self._project(name, x).transpose(1, 2) for name in ("query", "key", "value"))
        if self.pos_dim > 0:
            pos = pos.unsqueeze(-3).expand(batch, self.n_head, n_tokens, self.pos_dim)
            q, k, v = (torch.cat([pos, t], dim=-1) for t in (q, k, v))
        z = self._attend(q, k, v, None if weights is None else weights.to(q.dtype)[:, None, :, None])
        z = z.transpose(1, 2).reshape(batch, n_tokens, -1)
        return self.out(z)

    def _galerkin(self, x: Tensor, pos: Tensor | None, residual: bool, weights: Tensor | None) -> Tensor:
        """Galerkin attention and the output map, regrouped so that only d x d matrices are formed.

        With ``K' = [pos, K_h]``, ``V' = [pos, V_h]``, ``Q' = [pos, Q_h]`` per head and the output map
        ``W_o = [W_o,1 ... W_o,h]`` split by head, the layer is ``sum_h Q'_h (A_h W_o,h^T) + b_o`` with
        ``A_h = drop(K'_h^T V'_h / N)``. ``A_h`` is assembled from the blocks ``pos^T pos``, ``pos^T V_h``,
        ``K_h^T pos`` and ``K_h^T V_h`` (no concatenated copies of K and V), and since Q is not
        normalized, ``Q_h = x W_q,h^T + b_q,h`` is folded in: ``out = x G + c + pos P`` with per-sample
        ``G = W_q^T M_q`` (d x d), ``c = b_q M_q + b_o`` and ``P = sum_h M_h[:pos_dim]``, where
        ``M_h = A_h W_o,h^T``. Same function as the per-head formula, fewer products over N. With ``residual``,
        ``x + out = x (G + I) + c + pos P``. With quadrature ``weights``, ``A_h = drop(K'_h^T diag(w) V'_h)``.
        """
        batch, n_tokens, _ = x.shape
        h, d_head, p = self.n_head, self.d_head, self.pos_dim
        k, v = self._project("key", x), self._project("value", x)
        if weights is None:
            kv = galerkin_gram(k, v, pos) / n_tokens
        else:  # K'^T diag(w) V': both factors, and the coordinates in the Gram matrix, scaled by sqrt(w)
            root = weights.to(k.dtype).sqrt().unsqueeze(-1)
            gram_pos = None if pos is None else pos.expand(batch, n_tokens, p) * root
            kv = galerkin_gram(k * root.unsqueeze(-1), v * root.unsqueeze(-1), gram_pos)
        kv = self.dropout(kv)
        # M_h = A_h W_o,h^T: (batch, h, e, d)
        m = kv @ self.out.weight.t().reshape(h, d_head + p, -1)
        m_q = m[:, :, p:].reshape(batch, h * d_head, -1)
        g = self.query.weight.t() @ m_q
        if residual:
            g = g + torch.eye(g.shape[-1], dtype=g.dtype, device=g.device)
        c = torch.baddbmm(self.out.bias.expand(batch, 1, -1), self.query.bias.expand(batch, 1, -1), m_q)
        out = torch.baddbmm(c, x, g)
        if p > 0:  # one rank-p product added on, without forming pos P
            pos_term = m[:, :, :p].sum(dim=1).to(out.dtype)
            out = torch.baddbmm(out, pos.to(out.dtype).expand(batch, n_tokens, p), pos_term)
        return out

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, weights: Tensor | None) -> Tensor:
        """Per-head fourier, softmax or linear attention on ``(batch, h, N, e)`` tensors; ``weights``
        ``(batch, 1, N, 1)`` or None (uniform)."""
        n_tokens = q.shape[-2]
        log_w = None if weights is None else weights.log()  # -inf where a token is excluded
        if self.attention_type == "linear":
            keys = k if log_w is None else k + log_w
            kv = keys.softmax(dim=-2).transpose(-2, -1) @ v
            return q.softmax(dim=-1) @ self.dropout(kv)
        if self.attention_type == "fourier":
            if weights is None:
                return self.dropout((q / n_tokens) @ k.transpose(-2, -1)) @ v
            return self.dropout(q @ k.transpose(-2, -1)) @ (v * weights)
        scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)
        if log_w is not None:
            scores = scores + log_w.transpose(-2, -1)
        return self.dropout(scores.softmax(dim=-1)) @ v
