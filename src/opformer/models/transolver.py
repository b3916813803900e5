"""Transolver (Wu et al., ICML 2024): a transformer whose attention runs between learned slices of the mesh.

Written from the paper (its section 3 and appendix on the architecture); the authors' code (thuml/Transolver) is the
test reference (``tests/fixtures/transolver_fixture.py``): the forward pass equals theirs in float64 with mapped
weights, and the parameter counts of their configurations are theirs (docs/models.md). Beside the paper's model, the
slice tokens may be quadrature-weighted means (``weighting="quadrature"``; :mod:`opformer.nn.physics_attention`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.models.mesh_batch import WEIGHTINGS, check_mesh_batch, sum_weights
from opformer.nn.attention import check_choice
from opformer.nn.mlp import FeedForward
from opformer.nn.physics_attention import PhysicsAttention
from opformer.validate import Fraction, NonNegativeInt, PositiveInt


class TransolverBlock(nn.Module):
    """``x = x + attn(LN1(x));  x = x + MLP(LN2(x))`` with physics attention and ``MLP = Linear -> act -> Linear``
    (hidden ``mlp_ratio * dim``)."""

    def __init__(self, dim: int, n_head: int, slice_num: int, mlp_ratio: int, activation: str, dropout: float,
                 grid_shape: list[int] | None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attention = PhysicsAttention(dim, n_head, slice_num, dropout, grid_shape)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = FeedForward(dim, dim * mlp_ratio, dim, activation=activation)

    def forward(self, x: Tensor, weights: Tensor, mask: Tensor) -> Tensor:
        """Apply both residual branches."""
        x = x + self.attention(self.norm1(x), weights, mask)
        return x + self.ffn(self.norm2(x))


class Transolver(nn.Module):
    """Transolver on a mesh: ``model(x, pos, weights, mask) -> (B, N, out_channels)``
    (:mod:`~opformer.models.mesh_batch`).

    - Lift: ``FeedForward(space_dim + in_channels, 2 n_hidden, n_hidden)`` of ``[pos, x]`` plus a learned vector
      ``placeholder`` (the authors' structured-mesh model adds it only when there are no input fields, and so does
      this one when ``grid_shape`` is given).
    - ``n_layers`` :class:`TransolverBlock` (physics attention of ``n_head`` heads and ``slice_num`` slices).
    - Head: ``Linear(n_hidden, out_channels)`` of ``LayerNorm(x)``.

    ``grid_shape`` (``[H, W]`` or ``[H, W, D]``): a structured mesh whose points are its nodes in C order; the
    attention's projections are then convolutions over the index grid (the authors' structured-mesh models).
    ``reference_grid`` ``r > 0``: the lift sees, instead of the coordinates, their distances to the nodes of an
    ``r x r`` grid on the unit square (the authors' ``unified_pos``, their Darcy and Navier-Stokes runs).
    ``weighting``: ``"uniform"`` (the paper's slice tokens, means over the points) or ``"quadrature"`` (weighted by
    the mesh's quadrature weights). The defaults are the authors' elasticity configuration
    (``scripts/Transolver_Elas.sh``: 128 hidden, 8 heads, 8 layers, 64 slices; 713,665 parameters, as theirs).
    Initialisation as the authors': truncated normal (std 0.02) weights and zero biases in every Linear, temperature
    0.5, ``placeholder`` uniform on ``[0, 1 / n_hidden)``.
    """

    mesh = True  # called as model(x, pos, weights, mask)

    def __init__(self, in_channels: NonNegativeInt = 0, out_channels: PositiveInt = 1, space_dim: PositiveInt = 2,
                 n_hidden: PositiveInt = 128, n_layers: PositiveInt = 8, n_head: PositiveInt = 8,
                 slice_num: PositiveInt = 64, mlp_ratio: PositiveInt = 1, activation: str = "gelu",
                 dropout: Fraction = 0.0, weighting: str = "uniform", grid_shape: list[int] | None = None,
                 reference_grid: NonNegativeInt = 0) -> None:
        super().__init__()
        check_choice("weighting", weighting, WEIGHTINGS)
        if grid_shape is not None and len(grid_shape) != space_dim:
            raise ConfigError(f"model.grid_shape: expected {space_dim} axes (space_dim), got {grid_shape}")
        self.in_channels, self.space_dim, self.weighting = in_channels, space_dim, weighting
        self.grid_shape, self.reference_grid = grid_shape, reference_grid
        position_features = reference_grid ** space_dim if reference_grid else space_dim
        self.lift = FeedForward(position_features + in_channels, 2 * n_hidden, n_hidden, activation=activation)
        self.blocks = nn.ModuleList(
            TransolverBlock(n_hidden, n_head, slice_num, mlp_ratio, activation, dropout, grid_shape)
            for _ in range(n_layers))
        self.head_norm = nn.LayerNorm(n_hidden)
        self.head = nn.Linear(n_hidden, out_channels)
        self.apply(_init_linear)
        self.placeholder = nn.Parameter(torch.rand(n_hidden) / n_hidden)
        self.adds_placeholder = grid_shape is None or in_channels == 0

    def forward(self, x: Tensor, pos: Tensor, weights: Tensor, mask: Tensor) -> Tensor:
        """Map the input fields on the mesh to ``(B, N, out_channels)``, zero on padding."""
        check_mesh_batch(type(self).__name__, x, pos, weights, mask, self.in_channels, self.space_dim)
        if self.grid_shape is not None and not bool(mask.all()):
            raise ValueError("Transolver on a structured mesh: every sample is the whole grid (no padding)")
        keep = mask.unsqueeze(-1).to(pos.dtype)
        h = self.lift(torch.cat([self._position_features(pos), x], dim=-1) * keep)
        if self.adds_placeholder:
            h = h + self.placeholder
        w = sum_weights(weights.to(h.dtype), mask, self.weighting)
        for block in self.blocks:
            h = block(h, w, mask)
        return self.head(self.head_norm(h)) * keep

    def _position_features(self, pos: Tensor) -> Tensor:
        """The coordinates, or with ``reference_grid = r`` their distances to the ``r^d`` nodes of a uniform grid on
        the unit square or cube (the authors' ``unified_pos``), ``(B, N, r^d)``, the first axis slowest."""
        if not self.reference_grid:
            return pos
        axis = torch.linspace(0, 1, self.reference_grid, dtype=pos.dtype, device=pos.device)
        nodes = torch.stack(torch.meshgrid(*[axis] * self.space_dim, indexing="ij"), dim=-1).reshape(-1, self.space_dim)
        return (pos.unsqueeze(-2) - nodes).square().sum(dim=-1).sqrt()


def _init_linear(module: nn.Module) -> None:
    """The authors' initialisation of a Linear: truncated normal weights (std 0.02, cut at +-2), zero bias."""
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
