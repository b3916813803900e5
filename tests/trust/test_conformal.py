"""Split conformal arithmetic: exact ranks, the quantile, and the coverage it reaches on known distributions."""

import math

import pytest
import torch

from opformer.errors import ConfigError
from opformer.trust.conformal import conformal_quantile, conformal_rank, expected_coverage


@pytest.mark.parametrize("n, coverage, rank", [(9, 0.9, 9), (8, 0.9, None), (4, 0.8, 4), (3, 0.8, None),
                                               (19, 0.95, 19), (99, 0.9, 90), (100, 0.9, 91), (1, 0.5, 1)])
def test_rank_is_exact(n, coverage, rank):
    # (n + 1) c in floating point is 9.000000000000002 for (9, 0.9) and 4.000000000000001 for (4, 0.8): a float
    # ceil would refuse both bounds
    assert conformal_rank(n, coverage) == rank


def test_quantile_is_the_order_statistic_along_the_first_axis():
    scores = torch.tensor([[5.0, 0.5], [1.0, 0.1], [4.0, 0.4], [2.0, 0.2], [3.0, 0.3]], dtype=torch.float64)
    # n = 5, c = 0.6: rank ceil(3.6) = 4 -> the 4th smallest of each column
    assert conformal_quantile(scores, 0.6).tolist() == [4.0, 0.4]
    assert conformal_quantile(scores.sort(dim=0).values, 0.6, sorted_=True).tolist() == [4.0, 0.4]
    assert conformal_quantile(scores, 0.9).tolist() == [math.inf, math.inf]  # rank 6 > 5
    assert expected_coverage(5, 0.6) == 4 / 6 and expected_coverage(5, 0.9) == 1.0


@pytest.mark.parametrize("coverage", [0.0, 1.0, -0.1, 1.5])
def test_levels_outside_0_1_are_one_line_errors(coverage):
    with pytest.raises(ConfigError, match="strictly between 0 and 1"):
        conformal_rank(10, coverage)


@pytest.mark.slow
@pytest.mark.parametrize("n, coverage", [(19, 0.9), (20, 0.8), (30, 0.95)])
def test_a_known_error_distribution_reaches_the_nominal_coverage(n, coverage):
    """Errors of a synthetic model drawn from a known (exponential) distribution: over many calibration draws the
    bound covers a new error with probability exactly k / (n + 1), within the binomial spread."""
    draws, tests = 4000, 25
    generator = torch.Generator().manual_seed(0)
    errors = torch.empty(draws, n + tests).exponential_(generator=generator)
    bounds = torch.stack([conformal_quantile(row[:n], coverage) for row in errors])
    covered = (errors[:, n:] <= bounds[:, None]).double().mean(dim=1)
    rank = conformal_rank(n, coverage)
    expected = rank / (n + 1)
    # per draw: coverage ~ Beta(k, n + 1 - k), plus the binomial spread of `tests` new errors
    a, b = rank, n + 1 - rank
    variance = a * b / ((a + b) ** 2 * (a + b + 1)) + expected * (1 - expected) / tests
    assert abs(float(covered.mean()) - expected) < 4 * math.sqrt(variance / draws)
    assert coverage <= expected < coverage + 1 / (n + 1)
