"""Scores: the relative L2 and pointwise scores on tiny inputs, and the band's coverage on a synthetic model."""

import math

import pytest
import torch

from opformer.trust.conformal import conformal_quantile, conformal_rank
from opformer.trust.scores import POINT_LEVELS, local_scale, point_level, pointwise_scores, relative_l2


def test_relative_l2_and_the_rms_scale():
    truth = torch.tensor([[[3.0], [4.0]]])
    pred = torch.tensor([[[3.0], [1.0]]])
    assert relative_l2(pred, truth).tolist() == [3 / 5]
    assert torch.allclose(local_scale(pred, "rms"), torch.full((1, 2, 1), math.sqrt(5.0), dtype=torch.float64))


def test_local_scale_is_the_box_mean_of_the_magnitude_plus_a_floor():
    pred = torch.tensor([[[0.0], [-4.0], [8.0], [0.0]]])  # n = 4 -> radius 1: neighbours that exist
    rms = math.sqrt(80 / 4)
    expected = torch.tensor([2.0, 4.0, 4.0, 4.0]) + 0.1 * rms
    assert torch.allclose(local_scale(pred, "local")[0, :, 0], expected.double())


def test_pointwise_scores_are_order_statistics_of_the_normalized_errors():
    truth = torch.zeros(1, 10, 1, dtype=torch.float64)
    pred = torch.ones(1, 10, 1, dtype=torch.float64)
    truth[0, :, 0] = 1 - torch.arange(10, dtype=torch.float64) / 10  # |pred - truth| = 0.0, 0.1, ..., 0.9; rms scale 1
    scores = pointwise_scores(pred, truth, "rms")[0]
    # level p -> the ceil(p * 10)-th smallest: 0.9 -> 9th (0.8), 1.0 -> the largest (0.9), 0.85 -> 9th
    expected = {0.5: 0.4, 0.85: 0.8, 0.9: 0.8, 1.0: 0.9}
    for level, value in expected.items():
        assert math.isclose(float(scores[POINT_LEVELS.index(level)]), value, abs_tol=1e-12)
    assert POINT_LEVELS[point_level(0.87)] == 0.9 and POINT_LEVELS[point_level(0.9)] == 0.9


@pytest.mark.slow
def test_the_pointwise_band_covers_at_its_level_on_a_synthetic_model():
    """A model whose error is Gaussian noise of a random per-sample level times the field's local magnitude: at
    coverage c, at least a fraction c of a new sample's points lie in the band for a fraction k / (n + 1) of
    samples (over many calibration draws)."""
    generator = torch.Generator().manual_seed(1)
    draws, n, tests, points, coverage = 300, 39, 20, 64, 0.9
    x = torch.linspace(0, 2 * math.pi, points)
    amplitude = 1 + torch.rand(draws, n + tests, 1, generator=generator)
    truth = (amplitude * torch.sin(x + torch.rand(draws, n + tests, 1, generator=generator) * 6))[..., None]
    level = 0.01 + 0.1 * torch.rand(draws, n + tests, 1, 1, generator=generator)
    pred = truth + level * truth.abs() * torch.randn(truth.shape, generator=generator)
    level_index = point_level(coverage)
    hits = []
    for d in range(draws):
        calib = pointwise_scores(pred[d, :n], truth[d, :n], "local")[:, level_index]
        half = conformal_quantile(calib, coverage) * local_scale(pred[d, n:], "local")
        inside = ((truth[d, n:] - pred[d, n:]).abs() <= half).double().flatten(1).mean(dim=1)
        hits.append(inside >= POINT_LEVELS[level_index])
    rate = float(torch.cat(hits).double().mean())
    rank = conformal_rank(n, coverage)
    expected = rank / (n + 1)
    # the spread of the rate: Beta(k, n + 1 - k) per calibration draw, and the binomial spread of the new samples
    a, b = rank, n + 1 - rank
    variance = a * b / ((a + b) ** 2 * (a + b + 1)) / draws + expected * (1 - expected) / (draws * tests)
    assert abs(rate - expected) < 4 * math.sqrt(variance)
