"""The point-wise baseline on a mesh: an MLP of the coordinates and the input fields at each point, alone."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from opformer.models.mesh_batch import check_mesh_batch
from opformer.nn.regressors import PointwiseRegressor
from opformer.validate import NonNegativeInt, PositiveInt


class PointwiseMLP(nn.Module):
    """``PointwiseRegressor(space_dim + in_channels, out_channels, width, n_layers)`` of ``[pos, x]`` at every point
    (no interaction between points); ``model(x, pos, weights, mask)``, zero on padding
    (:mod:`opformer.models.mesh_batch`)."""

    mesh = True  # called as model(x, pos, weights, mask)

    def __init__(self, in_channels: NonNegativeInt = 0, out_channels: PositiveInt = 1, space_dim: PositiveInt = 2,
                 width: PositiveInt = 128, n_layers: PositiveInt = 4, activation: str = "gelu") -> None:
        super().__init__()
        self.in_channels, self.space_dim = in_channels, space_dim
        self.net = PointwiseRegressor(space_dim + in_channels, out_channels, width, n_layers, activation)

    def forward(self, x: Tensor, pos: Tensor, weights: Tensor, mask: Tensor) -> Tensor:
        """Apply the MLP at every point."""
        check_mesh_batch(type(self).__name__, x, pos, weights, mask, self.in_channels, self.space_dim)
        keep = mask.unsqueeze(-1).to(pos.dtype)
        return self.net(torch.cat([pos, x], dim=-1) * keep) * keep
