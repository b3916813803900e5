import math

import pytest
import torch

from opformer.grids import central_difference
from opformer.train.losses import H1RelativeLoss, channel_relative_l2_per_sample, relative_l2


def col(values):
    return torch.tensor(values, dtype=torch.float64)[None, :, None]


def test_relative_l2_is_the_batch_mean_of_the_per_sample_errors():
    pred = torch.cat([col([1, 2, 3, 4]), col([0, 0, 0, 0])])
    target = torch.cat([col([1, 2, 3, 5]), col([3, 0, 0, 4])])
    assert relative_l2(pred, target).item() == pytest.approx((math.sqrt(1 / 39) + 1) / 2)


def test_h1_loss_by_hand():
    # n = 4, h = 1/4: D_h pred = (p[i+1] - p[i-1]) / (2h) = [4, 0, -4, 0]
    pred, target, target_grad = col([0, 1, 0, -1]), col([0, 1, 0, 0]), col([1, 1, 1, 1])
    loss = H1RelativeLoss(0.1, [1.0], [True])(pred, target, target_grad)
    # relative L2 = 1; regulariser = sqrt(gamma h * ((1-4)^2 + 1 + 25 + 1) / 4)
    assert loss.item() == pytest.approx(1 + math.sqrt(0.1 * 0.25 * 36 / 4))


def test_h1_loss_over_interior_points_by_hand():
    # the example above with the misfits of the two end points dropped; the denominator keeps all four
    pred, target, target_grad = col([0, 1, 0, -1]), col([0, 1, 0, 0]), col([1, 1, 1, 1])
    loss = H1RelativeLoss(0.1, [1.0], [True], interior=True)(pred, target, target_grad)
    assert loss.item() == pytest.approx(1 + math.sqrt(0.1 * 0.25 * (1 + 25) / 4))


def test_h1_loss_vanishes_for_the_exact_solution_only():
    n = 16
    x = torch.arange(n, dtype=torch.float64) / n
    u = torch.sin(2 * math.pi * x)[None, :, None]
    grad = central_difference(u, [1.0], [True])
    loss = H1RelativeLoss(0.1, [1.0], [True])
    assert loss(u, u, grad).item() == 0
    assert loss(1.01 * u, u, grad).item() == pytest.approx(0.01 + math.sqrt(0.1 / n) * 0.01)


def test_weighted_h1_loss_in_2d_by_hand():
    # closed 5 x 5 grid of length 2 (h = 1/2); pred = x^2, whose central/one-sided differences are exactly 2x
    n = 5
    x = torch.linspace(0, 2, n, dtype=torch.float64)
    X, _ = torch.meshgrid(x, x, indexing="ij")
    pred = (X ** 2)[None, ..., None]
    target = (X + 1)[None, ..., None]
    target_grad = torch.stack([torch.ones_like(X), torch.zeros_like(X)], dim=-1)[None]  # grad of x + 1
    a = torch.where(X < 1, 1.0, 3.0).to(torch.float64)[None, ..., None]
    loss = H1RelativeLoss(0.5, [2.0, 2.0], [False, False])
    misfit = (a[0, ..., 0] * (1 - 2 * X) ** 2).sum()
    regulariser = math.sqrt(0.5 * 0.5 * misfit / a.sum())
    rel = math.sqrt(((X ** 2 - X - 1) ** 2).sum() / ((X + 1) ** 2).sum())
    assert loss(pred, target, target_grad, a).item() == pytest.approx(rel + regulariser)
    unweighted = math.sqrt(0.5 * 0.5 * ((1 - 2 * X) ** 2).sum() / n ** 2)
    assert loss(pred, target, target_grad).item() == pytest.approx(rel + unweighted)


def test_h1_loss_without_regulariser_has_finite_gradients():
    # gamma = 0 (the inverse problem's setting) must be the relative L2 with its gradient, not NaN from sqrt(0)
    pred = col([0.5, 1.0, 0.0, -1.0]).requires_grad_(True)
    target, target_grad = col([0, 1, 0, 0]), col([1, 1, 1, 1])
    loss = H1RelativeLoss(0.0, [1.0], [True])(pred, target, target_grad)
    loss.backward()
    assert loss.item() == pytest.approx(relative_l2(pred, target).item())
    assert torch.isfinite(pred.grad).all()


def test_channel_weighted_relative_l2_by_hand():
    """Two samples of two frames, channels (p, u, v, w): p's relative L2 plus the mean of u's, v's and w's (the
    FactFormer authors' 3D loss), and a channel of zeros with weight 0 takes no part, its gradient included."""
    target = torch.zeros(2, 2, 4, dtype=torch.float64)  # (batch, frames, channels)
    target[..., 0], target[..., 1], target[..., 2], target[..., 3] = 2.0, 1.0, -1.0, 4.0
    pred = target.clone()
    pred[0, :, 0] += 1.0  # sample 0: p off by 1 in both frames -> sqrt(2 / 8) = 0.5
    pred[1, 0, 2] += 3.0  # sample 1: v off by 3 in one frame -> sqrt(9 / 2)
    loss = channel_relative_l2_per_sample(pred, target, [1, 1 / 3, 1 / 3, 1 / 3])
    assert loss.tolist() == pytest.approx([0.5, (9 / 2) ** 0.5 / 3])
    zeros = target.clone()
    zeros[..., 3] = 0.0
    pred = zeros.clone().requires_grad_()
    loss = channel_relative_l2_per_sample(pred + 0.1, zeros, [1, 1, 1, 0]).sum()
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(pred.grad).all() and not pred.grad[..., 3].any()
