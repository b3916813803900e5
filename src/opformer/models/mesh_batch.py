"""What the mesh models share: the batch they take and the quadrature weights their sums use.

A batch of mesh samples (``../shared/spec/mesh.md``, the mesh contract): ``x (B, N, c_in)`` the input fields (``c_in``
may be 0), ``pos (B, N, d)`` the coordinates, ``weights (B, N)`` the quadrature weights (summing to 1 over each
sample's real points, 0 on padding) and ``mask (B, N)`` bool, True on real points; samples shorter than N are padded
at the end. Every mesh model is called ``model(x, pos, weights, mask) -> (B, N, c_out)``, zero on padding.
"""

from __future__ import annotations

import torch
from torch import Tensor

from opformer.errors import DataError
from opformer.nn.attention import check_choice

#: How a mesh model weights its sums over points: the mesh's quadrature weights, or ``1 / n`` on each real point.
WEIGHTINGS = ("quadrature", "uniform")


def check_mesh_batch(name: str, x: Tensor, pos: Tensor, weights: Tensor, mask: Tensor, in_channels: int,
                     space_dim: int) -> None:
    """Raise ``DataError`` naming the model and the tensor unless the four tensors form one batch of the shapes the
    model was built for."""
    if pos.dim() != 3 or pos.shape[-1] != space_dim:
        raise DataError(f"{name}: expected coordinates (batch, points, {space_dim}), got {tuple(pos.shape)}")
    batch, n = pos.shape[:2]
    expected = {"x": ((batch, n, in_channels), x), "weights": ((batch, n), weights), "mask": ((batch, n), mask)}
    for key, (shape, tensor) in expected.items():
        if tuple(tensor.shape) != shape:
            raise DataError(f"{name}: expected {key} of shape {shape}, got {tuple(tensor.shape)}")
    if mask.dtype != torch.bool:
        raise DataError(f"{name}: expected a bool mask, got {mask.dtype}")


def sum_weights(weights: Tensor, mask: Tensor, weighting: str) -> Tensor:
    """The weights of every sum over points ``(B, N)``: the quadrature weights renormalised to sum 1 over each
    sample's real points (``"quadrature"``), or ``1 / n`` on each of its n real points (``"uniform"``); 0 on padding."""
    check_choice("weighting", weighting, WEIGHTINGS)
    if weighting == "uniform":
        w = mask.to(weights.dtype if weights.is_floating_point() else torch.get_default_dtype())
    else:
        w = weights * mask
    return w / w.sum(dim=1, keepdim=True)
