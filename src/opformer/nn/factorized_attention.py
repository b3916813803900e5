"""FactFormer's axial factorised kernel attention (Li, Shu & Barati Farimani 2023, section 3.2).

A field ``u`` ``(batch, S_1, ..., S_n, d)`` is projected to one 1D function per axis (the learnable
projection, eq. 6); each 1D function gives a query and a key, whose RoPE-modulated product is the axis kernel
``A_m`` ``(S_m x S_m)`` per head (eq. 8); the values ``V = u W_v`` are contracted with every kernel along its
axis, ``Z = V x_1 A_1 x_2 A_2 ... x_n A_n`` (eq. 9). A layer is ``u + f(IN(Att(u)))`` (eq. 10). Computing the
kernels costs ``sum_m S_m^2 d`` and the contraction ``N sum_m S_m d``; no ``N x N`` matrix is formed.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.nn.rope import AxisRotaryEmbedding


class GaussianFourierFeatures(nn.Module):
    """Random Fourier features of coordinates (Tancik et al. 2020): ``[sin(2 pi x B), cos(2 pi x B)]``.

    ``B`` ``(ndim, n_features / 2)`` is drawn once from ``N(0, scale^2)`` and frozen: it is a buffer (saved in
    the state dict, not a parameter). Input ``(..., ndim)``, output ``(..., n_features)``.
    """

    def __init__(self, ndim: int, n_features: int, scale: float = 1.0) -> None:
        super().__init__()
        if n_features < 2 or n_features % 2:
            raise ConfigError(f"Fourier features: n_features must be even and >= 2, got {n_features}")
        self.register_buffer("matrix", torch.randn(ndim, n_features // 2) * scale)

    def forward(self, pos: Tensor) -> Tensor:
        """Features of the coordinates ``pos`` ``(..., ndim)``."""
        proj = 2 * math.pi * pos.to(self.matrix.dtype) @ self.matrix
        return torch.cat([proj.sin(), proj.cos()], dim=-1).to(pos.dtype)


class GEGLUFeedForward(nn.Module):
    """``Linear(in, 2 hidden) -> gelu(a) * b -> Linear(hidden, out)`` (Shazeer 2020)."""

    def __init__(self, in_features: int, hidden_features: int, out_features: int) -> None:
        super().__init__()
        self.linear1 = nn.Linear(in_features, 2 * hidden_features)
        self.linear2 = nn.Linear(hidden_features, out_features)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the network to the last axis of ``x``."""
        a, b = self.linear1(x).chunk(2, dim=-1)
        return self.linear2(F.gelu(a) * b)


class AxisProjection(nn.Module):
    """The learnable projection of eq. (6) onto one axis: ``phi = h(mean_{other axes} gamma(u))``.

    ``gamma = Linear(d, d, bias=False)``; ``h`` = LayerNorm then the GEGLU network ``d -> d -> latent`` (the
    authors' ``PoolingReducer``). Since ``gamma`` is linear it commutes with the mean, so the input is the pooled
    ``(batch, S_axis, d)`` (same function, ``S_m d^2`` instead of ``N d^2`` operations).
    """

    def __init__(self, dim: int, latent_dim: int) -> None:
        super().__init__()
        self.gamma = nn.Linear(dim, dim, bias=False)
        self.norm = nn.LayerNorm(dim)
        self.mlp = GEGLUFeedForward(dim, dim, latent_dim)

    def forward(self, pooled: Tensor) -> Tensor:
        """The 1D function ``(batch, S_axis, latent)`` of the pooled field ``(batch, S_axis, d)``."""
        return self.mlp(self.norm(self.gamma(pooled)))


class AxisKernel(nn.Module):
    """The kernel of one axis, eq. (8): ``A = scale * rope(Q) rope(K)^T`` per head, no softmax.

    ``Q, K = Linear(latent, n_head * width)`` of the 1D function ``phi`` (Xavier-uniform with gain
    ``init_gain``, no bias); with ``rope_scale`` None the coordinates are not used.
    """

    def __init__(self, latent_dim: int, n_head: int, width: int, scale: float, rope_scale: float | None,
                 init_gain: float = 0.02) -> None:
        super().__init__()
        self.n_head, self.width, self.scale = n_head, width, scale
        self.query = nn.Linear(latent_dim, n_head * width, bias=False)
        self.key = nn.Linear(latent_dim, n_head * width, bias=False)
        for linear in (self.query, self.key):
            nn.init.xavier_uniform_(linear.weight, gain=init_gain)
        self.rope = None if rope_scale is None else AxisRotaryEmbedding(width, rope_scale)

    def heads(self, linear: nn.Linear, phi: Tensor, coords: Tensor) -> Tensor:
        """``linear(phi)`` split into heads ``(batch, n_head, S, width)``, RoPE-rotated if configured."""
        t = linear(phi).unflatten(-1, (self.n_head, self.width)).transpose(1, 2)
        return t if self.rope is None else self.rope(t, coords)

    def forward(self, phi: Tensor, coords: Tensor) -> Tensor:
        """Kernel matrices ``(batch, n_head, S, S)`` of ``phi`` ``(batch, S, latent)`` at ``coords`` ``(S,)``."""
        q, k = self.heads(self.query, phi, coords), self.heads(self.key, phi, coords)
        return (q * self.scale) @ k.transpose(-2, -1)


def factorized_contraction(values: Tensor, kernels: Sequence[Tensor]) -> Tensor:
    """``Z = V x_1 A_1 x_2 A_2 ... x_n A_n`` per head: ``Z[i_1..i_n] = sum_j prod_m A_m[i_m, j_m] V[j_1..j_n]``.

    ``values`` ``(batch, S_1, ..., S_n, n_head, c)``, ``kernels[m]`` ``(batch, n_head, S_m, S_m)``; one
    contraction per axis, so the largest intermediate has the size of ``values``.
    """
    ndim = values.dim() - 3
    if len(kernels) != ndim:
        raise ValueError(f"expected {ndim} axis kernels, got {len(kernels)}")
    letters = string.ascii_lowercase[:ndim]  # spatial indices; 'z' is the contracted one
    z = values
    for axis, kernel in enumerate(kernels):
        inner = letters[:axis] + "z" + letters[axis + 1:]
        z = torch.einsum(f"HY{letters[axis]}z,H{inner}YC->H{letters}YC", kernel, z)
    return z


class FactorizedAttention(nn.Module):
    """Multi-head factorised kernel attention on ``(batch, *spatial, d)`` (eq. 9), output ``n_head*head_dim``.

    ``V = Linear(d, n_head * head_dim, bias=False)``; a shared ``Linear(d, d, bias=False)`` (the authors'
    ``to_in``), then per axis the mean over the other axes, an :class:`AxisProjection` to ``latent_dim`` and an
    :class:`AxisKernel` whose queries and keys have ``head_dim * kernel_multiplier`` features per head; the kernel
    scale is 1, or ``1/sqrt(head_dim * kernel_multiplier)`` when ``kernel_multiplier > 4``. The authors apply
    ``to_in`` and ``gamma`` on the full grid before the mean; both are linear, so here they act on the pooled
    ``(batch, S_m, d)`` (the same function).
    """

    def __init__(self, dim: int, n_head: int, head_dim: int, ndim: int, latent_dim: int | None = None,
                 kernel_multiplier: int = 1, rope_scale: float | None = 64.0) -> None:
        super().__init__()
        if min(dim, n_head, head_dim, ndim, kernel_multiplier) < 1:
            raise ConfigError("factorized attention: dim, n_head, head_dim, ndim, kernel_multiplier must be >= 1")
        latent_dim = latent_dim or dim
        width = head_dim * kernel_multiplier
        scale = 1 / math.sqrt(width) if kernel_multiplier > 4 else 1.0
        self.n_head, self.head_dim = n_head, head_dim
        self.value = nn.Linear(dim, n_head * head_dim, bias=False)
        self.shared = nn.Linear(dim, dim, bias=False)
        self.projections = nn.ModuleList(AxisProjection(dim, latent_dim) for _ in range(ndim))
        self.kernels = nn.ModuleList(
            AxisKernel(latent_dim, n_head, width, scale, rope_scale) for _ in range(ndim)
        )

    def axis_kernels(self, u: Tensor, axes: Sequence[Tensor]) -> list[Tensor]:
        """The kernels ``A_m`` ``(batch, n_head, S_m, S_m)`` of ``u`` at the axis coordinates ``axes``."""
        ndim = u.dim() - 2
        kernels = []
        for m, (projection, kernel) in enumerate(zip(self.projections, self.kernels)):
            others = tuple(1 + a for a in range(ndim) if a != m)
            pooled = u.mean(dim=others) if others else u
            kernels.append(kernel(projection(self.shared(pooled)), axes[m]))
        return kernels

    def forward(self, u: Tensor, axes: Sequence[Tensor]) -> Tensor:
        """Attend over ``u`` ``(batch, *spatial, d)``; ``axes[m]`` holds the ``S_m`` coordinates of axis m."""
        if u.dim() - 2 != len(self.kernels) or len(axes) != len(self.kernels):
            raise ValueError(f"expected (batch, {len(self.kernels)} spatial axes, d) and as many coordinate "
                             f"vectors, got {tuple(u.shape)} and {len(axes)}")
        v = self.value(u).unflatten(-1, (self.n_head, self.head_dim))
        return factorized_contraction(v, self.axis_kernels(u, axes)).flatten(-2)


def group_norm_last(x: Tensor, groups: int, norm: nn.GroupNorm | None = None, eps: float = 1e-5) -> Tensor:
    """Group normalization of a channel-last ``x`` ``(batch, *spatial, c)`` over each group's channels and the
    grid (``norm``'s affine parameters and eps if given)."""
    weight, bias, eps = (None, None, eps) if norm is None else (norm.weight, norm.bias, norm.eps)
    return F.group_norm(x.movedim(-1, 1), groups, weight, bias, eps).movedim(1, -1)


def head_norm(x: Tensor, groups: int, eps: float = 1e-8) -> Tensor:
    """The authors' domain-wise group norm of a channel-last ``x`` ``(batch, *spatial, c)``, no affine: each
    group's ``n`` values (its channels over the whole grid) divided by ``sqrt(unbiased variance + eps)``.

    Computed by the fused group norm (biased variance ``v``): ``(x - m) / sqrt(v + eps (n-1)/n) * sqrt((n-1)/n)``
    is ``(x - m) / sqrt(n v / (n-1) + eps)``, the same value."""
    n = x[0].numel() // groups
    if n < 2:
        raise ValueError(f"head_norm: each of the {groups} groups needs 2 values or more, got {n}")
    ratio = (n - 1) / n
    return group_norm_last(x, groups, eps=eps * ratio) * math.sqrt(ratio)


class MixerBlock(nn.Module):
    """``u + f(IN(mixer(LN(u))))`` (eq. 10) for a token mixer mapping ``(batch, *spatial, d)`` to ``width``
    features in ``n_head`` groups; ``IN`` normalizes each head over its features and the grid, without affine
    (:func:`head_norm`, the authors' ``GroupNorm(domain_wise=True)``); ``f = Linear(width, d) -> GELU ->
    Linear(d, d)``, no biases.
    """

    def __init__(self, dim: int, mixer: nn.Module, width: int, n_head: int) -> None:
        super().__init__()
        if width % n_head:
            raise ConfigError(f"mixer width ({width}) must be a multiple of n_head ({n_head})")
        self.norm = nn.LayerNorm(dim)
        self.mixer = mixer
        self.n_head = n_head
        self.out = nn.Sequential(nn.Linear(width, dim, bias=False), nn.GELU(), nn.Linear(dim, dim, bias=False))

    def forward(self, u: Tensor, axes: Sequence[Tensor]) -> Tensor:
        """Apply the block to ``u`` ``(batch, *spatial, d)`` with the axis coordinates ``axes``."""
        z = self.mixer(self.norm(u), axes)
        return u + self.out(head_norm(z, self.n_head))


def factorized_block(dim: int, n_head: int, head_dim: int, ndim: int, latent_dim: int | None = None,
                     kernel_multiplier: int = 1, rope_scale: float | None = 64.0) -> MixerBlock:
    """A FactFormer layer: :class:`MixerBlock` around :class:`FactorizedAttention`."""
    attention = FactorizedAttention(dim, n_head, head_dim, ndim, latent_dim, kernel_multiplier, rope_scale)
    return MixerBlock(dim, attention, n_head * head_dim, n_head)
