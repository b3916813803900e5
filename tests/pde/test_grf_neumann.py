"""Statistics and boundary behaviour of the Neumann (cosine-series) Gaussian random field.

Sampling tolerances are 5 standard deviations of the estimator with fixed seeds, as in test_grf.py.
"""

import numpy as np
import pytest

from opformer.pde.darcy import threshold_coefficient
from opformer.pde.grf import cosine_analysis, cosine_synthesis, neumann_grf, neumann_grf_variances

DARCY = dict(alpha=2.0, tau=3.0, sigma=1.0)  # N(0, (-Laplacian + 9 I)^-2), Neumann


def check_coefficient_variances(samples: np.ndarray, variances: np.ndarray) -> None:
    """Mean b_q^2 / Var(b_q) is 1 within 5 sigma, sigma = sqrt(2 / N) (b_q real Gaussian)."""
    coefficients = cosine_analysis(samples)
    ratio = (coefficients**2).mean(axis=0) / variances
    std = np.sqrt(2.0 / len(samples))
    assert np.all(np.abs(ratio - 1) < 5 * std), np.max(np.abs(ratio - 1) / std)


def brute_force_variances(n: int, alpha: float, tau: float, sigma: float, k_max: int) -> np.ndarray:
    """Var(b_q) = sum of lambda(k) c_k1^2 c_k2^2 over the modes k < k_max equal to mode q at the nodes."""
    k = np.arange(k_max)
    period = 2 * (n - 1)
    folded = np.minimum(k % period, period - k % period)  # cos(pi k j / (n-1)) = cos(pi q j / (n-1))
    c2 = np.where(k == 0, 1.0, 2.0)
    lam = sigma**2 * (np.pi**2 * (k[:, None] ** 2 + k[None, :] ** 2) + tau**2) ** (-alpha)
    weighted = lam * c2[:, None] * c2[None, :]
    out = np.zeros((n, n))
    np.add.at(out, (folded[:, None].repeat(k_max, 1), folded[None, :].repeat(k_max, 0)), weighted)
    return out


def test_cosine_synthesis_is_the_cosine_sum_and_analysis_inverts_it() -> None:
    b = np.random.default_rng(0).standard_normal((2, 5, 7))
    j, l = np.arange(5)[:, None] / 4, np.arange(7)[None, :] / 6
    direct = sum(b[1, p, q] * np.cos(np.pi * p * j) * np.cos(np.pi * q * l) for p in range(5) for q in range(7))
    np.testing.assert_allclose(cosine_synthesis(b)[1], direct, atol=1e-13)
    np.testing.assert_allclose(cosine_analysis(cosine_synthesis(b)), b, atol=1e-13)


@pytest.mark.slow
def test_variances_are_the_aliased_neumann_eigenvalues() -> None:
    """Independent brute-force fold of lambda(k) = (pi^2 |k|^2 + 9)^-2 over k < 1200 (tail < 1e-6 relative)."""
    expected = brute_force_variances(5, **DARCY, k_max=1200)
    np.testing.assert_allclose(neumann_grf_variances(5, 2, **DARCY), expected, rtol=1e-5)


def test_low_modes_on_a_fine_grid_have_the_covariance_eigenvalues() -> None:
    """Var(b_q) = w_q lambda(q) with w = 1, 2 (q = 0, q > 0) per axis when aliases (modes >= 512) are negligible."""
    variances = neumann_grf_variances(257, 2, **DARCY)
    q = np.arange(4)
    lam = (np.pi**2 * (q[:, None] ** 2 + q[None, :] ** 2) + 9.0) ** -2.0
    w = np.where(q == 0, 1.0, 2.0)
    np.testing.assert_allclose(variances[:4, :4], lam * w[:, None] * w[None, :], rtol=1e-7)  # aliases ~3e-8


@pytest.mark.slow
def test_samples_have_the_prescribed_coefficient_variances() -> None:
    samples = neumann_grf(3000, 9, 2, **DARCY, rng=np.random.default_rng(3))
    assert samples.shape == (3000, 9, 9) and samples.dtype == np.float64
    check_coefficient_variances(samples, neumann_grf_variances(9, 2, **DARCY))


def test_subgrid_of_a_fine_sample_has_the_coarse_distribution() -> None:
    """Every 2nd node of n = 17 samples (with the boundary) is distributed as an n = 9 sample."""
    fine = neumann_grf(3000, 17, 2, **DARCY, rng=np.random.default_rng(4))
    check_coefficient_variances(fine[:, ::2, ::2], neumann_grf_variances(9, 2, **DARCY))


def test_zero_mean_removes_the_constant_mode() -> None:
    samples = neumann_grf(20, 9, 2, **DARCY, rng=np.random.default_rng(5), zero_mean=True)
    assert np.abs(cosine_analysis(samples)[:, 0, 0]).max() < 1e-14


def test_normal_derivative_vanishes_on_the_boundary() -> None:
    """A smooth sample's one-sided normal derivative at x = 0 is O(h^3) (the field is even about the
    boundary, so u' = u''' = 0 there), while its tangential derivative along the same edge is O(1)."""
    smooth = dict(alpha=8.0, tau=3.0, sigma=1.0)
    u = neumann_grf(4, 129, 2, **smooth, rng=np.random.default_rng(6))
    normal, scale = [], []
    for stride in (4, 2, 1):
        v, h = u[:, ::stride, ::stride], stride / 128
        normal.append(np.abs(-3 * v[:, 0] + 4 * v[:, 1] - v[:, 2]).max() / (2 * h))  # d/dx at x = 0
        normal.append(np.abs(-3 * v[:, :, 0] + 4 * v[:, :, 1] - v[:, :, 2]).max() / (2 * h))  # d/dy at y = 0
        scale.append(np.abs(np.diff(v[:, 0], axis=-1)).max() / h)  # d/dy along the edge x = 0
    normal = np.array(normal).reshape(3, 2)
    assert normal[-1].max() < 1e-3 * scale[-1]
    assert np.all(normal[0] / normal[1] > 6) and np.all(normal[1] / normal[2] > 6)  # ~8: third order


def test_threshold_maps_to_exactly_3_and_12() -> None:
    p = np.concatenate([neumann_grf(2, 17, 2, **DARCY, rng=np.random.default_rng(7)).ravel(), [0.0, -0.0, -1e-300]])
    a = threshold_coefficient(p)
    assert set(np.unique(a).tolist()) == {3.0, 12.0}
    np.testing.assert_array_equal(a == 12.0, p >= 0)


@pytest.mark.parametrize("n", [1])
def test_rejects_too_few_nodes(n: int) -> None:
    with pytest.raises(ValueError, match="at least 2 nodes"):
        neumann_grf_variances(n, 2, **DARCY)
