"""Losses and the relative L2 metric of the Galerkin Transformer paper (its eq. (2) and appendix C)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from opformer.eval.metrics import relative_l2_per_sample
from opformer.grids import Kind, central_difference, spacing


def relative_l2(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample relative L2 error averaged over the batch (the paper's metric)."""
    return relative_l2_per_sample(pred, target).mean()


def channel_relative_l2_per_sample(pred: torch.Tensor, target: torch.Tensor, weights: Sequence[float]
                                   ) -> torch.Tensor:
    """``sum_c w_c ||pred_c - target_c|| / ||target_c||`` per sample, each channel's norms over every axis but the
    batch and the channels (grid and frames); a channel of weight 0 takes no part (a channel of zeros may have it).
    The FactFormer authors' 3D loss is the pressure's relative L2 plus the mean of the three velocity
    components': weights 1 and 1/3."""
    w = torch.tensor(weights, dtype=pred.dtype, device=pred.device)
    diff = (pred - target).pow(2).flatten(1, -2).sum(dim=1)
    norm = target.pow(2).flatten(1, -2).sum(dim=1)
    used = w > 0
    ratio = torch.where(used, diff / torch.where(used, norm, 1), 1)  # 1, not 0: sqrt's gradient at 0 is inf
    return (ratio.sqrt() * w).sum(dim=1)


def normalized_metric(metric: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                      encode: Callable[[torch.Tensor], torch.Tensor]
                      ) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``metric`` between ``encode(pred)`` and ``encode(target)`` (``encode``: a fitted normalizer's)."""
    return lambda pred, target: metric(encode(pred), encode(target))


class H1RelativeLoss(nn.Module):
    """Relative L2 plus the paper's H1-seminorm regulariser, averaged over the batch (any dimension).

    ``loss_i = sqrt(sum (u_hat - u)^2 / sum u^2) + sqrt(gamma * h * sum w |grad u - D_h u_hat|^2 / sum w |grad u|^2)``
    with ``D_h`` the central difference on the training grid of mesh size ``h`` (of the first axis),
    ``grad u`` the derivative of the target taken on the finest grid (passed in as ``target_grad``), sums
    over grid points and gradient components, and ``w`` a point-wise weight: 1, or the coefficient ``a`` of
    Darcy flow (the paper's ``||a grad(T(a) - u)||`` regulariser, Example 5.2). In 1D with ``w = 1`` this is
    appendix C.1's formula.

    ``interior``: the misfit sums over the points that are not first or last on any axis (the denominator still
    over every point), as the authors' package does in 1D: its central difference drops both ends, on a periodic
    grid too. Otherwise periodic axes wrap around and closed ones take one-sided differences at the ends.
    """

    def __init__(self, gamma: float, lengths: Sequence[float], periodic: Sequence[Kind],
                 interior: bool = False) -> None:
        super().__init__()
        self.gamma = gamma
        self.lengths = tuple(lengths)
        self.periodic = tuple(periodic)
        self.interior = interior

    def forward(self, pred: torch.Tensor, target: torch.Tensor, target_grad: torch.Tensor,
                weight: torch.Tensor | None = None) -> torch.Tensor:
        """Loss of a batch; ``target_grad`` has the layout of :func:`central_difference`'s output and
        ``weight`` (optional) is ``(batch, *spatial, 1)``."""
        data_term = relative_l2_per_sample(pred, target)
        if self.gamma == 0:  # sqrt(0 * x) would make a NaN gradient
            return data_term.mean()
        n = pred.shape[1]
        h = spacing(n, self.lengths[0], self.periodic[0])
        pred_grad = central_difference(pred, self.lengths, self.periodic)
        w = 1.0 if weight is None else weight
        squared = w * (target_grad - pred_grad).pow(2)
        if self.interior:
            for dim in range(1, pred.dim() - 1):
                squared = squared.narrow(dim, 1, squared.shape[dim] - 2)
        misfit = squared.flatten(1).sum(dim=1)
        scale = (w * target_grad.pow(2)).flatten(1).sum(dim=1)
        regulariser = torch.sqrt(self.gamma * h * misfit / scale)
        return (data_term + regulariser).mean()
