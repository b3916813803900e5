"""Statistics of the periodic Gaussian random fields.

Sampling tolerances are 5 standard deviations of the estimator (computed from the target
eigenvalues), with fixed seeds: a correct sampler fails a 5-sigma check with probability
< 1e-6 per quantity.
"""

import numpy as np
import pytest
import scipy.fft

from opformer.pde.grf import grf_eigenvalues, periodic_grf, pointwise_variance

BURGERS = dict(alpha=2.0, tau=5.0, sigma=25.0)  # N(0, 625 (-Laplacian + 25 I)^-2)
NS = dict(alpha=2.5, tau=7.0, sigma=7.0**1.5)


def continuous_variance(dim: int, alpha: float, tau: float, sigma: float, k_max: int) -> float:
    """sum over k in Z^dim, |k_i| <= k_max, of sigma^2 (4 pi^2 |k|^2 + tau^2)^-alpha."""
    k2 = np.arange(-k_max, k_max + 1, dtype=np.float64) ** 2
    if dim == 2:
        k2 = k2[:, None] + k2[None, :]
    return float((sigma**2 * (4 * np.pi**2 * k2 + tau**2) ** (-alpha)).sum())


def self_conjugate(shape: tuple[int, ...]) -> np.ndarray:
    """Mask of the rfftn half-spectrum entries whose coefficient is real."""
    mask = np.ones([n // 2 + 1 if i == len(shape) - 1 else n for i, n in enumerate(shape)], dtype=bool)
    for axis, n in enumerate(shape):
        m = np.arange(mask.shape[axis])
        if axis < len(shape) - 1:
            m = np.fft.fftfreq(n, 1.0 / n)
        real = (m == 0) | (2 * np.abs(m) == n)
        mask &= real.reshape([-1 if i == axis else 1 for i in range(len(shape))])
    return mask


def check_spectrum(samples: np.ndarray, eigenvalues: np.ndarray) -> None:
    """Mean |c_m|^2 / lambda_m is 1 within 5 sigma: sigma = 1/sqrt(N) (complex), sqrt(2/N) (real)."""
    shape = samples.shape[1:]
    coefficients = scipy.fft.rfftn(samples, axes=tuple(range(1, samples.ndim)), norm="forward")
    ratio = (np.abs(coefficients) ** 2).mean(axis=0) / eigenvalues
    std = np.where(self_conjugate(shape), np.sqrt(2.0), 1.0) / np.sqrt(len(samples))
    assert np.all(np.abs(ratio - 1) < 5 * std), np.max(np.abs(ratio - 1) / std)


def check_moments(samples: np.ndarray, eigenvalues: np.ndarray) -> None:
    """Pointwise variance and mean match the eigenvalues within 5 sigma of their estimators."""
    shape = samples.shape[1:]
    n = len(samples)
    # The spatial mean of u^2 is sum_m |c_m|^2 over the full spectrum (Parseval), whose
    # variance is sum_m 2 lambda_m^2 (conjugate pairs are not independent).
    variance = pointwise_variance(eigenvalues, shape)
    var_std = np.sqrt(2.0 * pointwise_variance(eigenvalues**2, shape) / n)
    assert abs((samples**2).mean() - variance) < 5 * var_std
    mean_std = np.sqrt(eigenvalues.flat[0] / n)  # the spatial mean of a sample is c_0
    assert abs(samples.mean()) < 5 * mean_std


def test_1d_spectrum_and_moments() -> None:
    shape = (64,)
    samples = periodic_grf(4000, shape, **BURGERS, rng=np.random.default_rng(0))
    assert samples.shape == (4000, 64) and samples.dtype == np.float64
    eigenvalues = grf_eigenvalues(shape, **BURGERS)
    check_spectrum(samples, eigenvalues)
    check_moments(samples, eigenvalues)


@pytest.mark.slow
def test_2d_spectrum_and_moments() -> None:
    shape = (16, 16)
    samples = periodic_grf(2000, shape, **NS, rng=np.random.default_rng(1))
    assert samples.shape == (2000, 16, 16)
    eigenvalues = grf_eigenvalues(shape, **NS)
    check_spectrum(samples, eigenvalues)
    check_moments(samples, eigenvalues)


@pytest.mark.parametrize("n", [16, 64, 8192])
def test_1d_variance_is_that_of_the_continuous_field(n: int) -> None:
    exact = continuous_variance(1, **BURGERS, k_max=10**6)
    assert pointwise_variance(grf_eigenvalues((n,), **BURGERS), (n,)) == pytest.approx(exact, rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("n", [16, 64])
def test_2d_variance_is_that_of_the_continuous_field(n: int) -> None:
    exact = continuous_variance(2, **NS, k_max=2000)
    assert pointwise_variance(grf_eigenvalues((n, n), **NS), (n, n)) == pytest.approx(exact, rel=1e-8)


def test_eigenvalues_below_nyquist_are_the_covariance_eigenvalues() -> None:
    """lambda(k) = sigma^2 (4 pi^2 k^2 / L^2 + tau^2)^-alpha: on a fine grid low modes' aliases are < 1e-11 relative."""
    k = np.arange(8)
    expected = 625.0 * (4 * np.pi**2 * k**2 + 25.0) ** -2
    np.testing.assert_allclose(grf_eigenvalues((8192,), **BURGERS)[:8], expected, rtol=1e-11)
    length = 2.0
    expected = 625.0 * (4 * np.pi**2 * k**2 / length**2 + 25.0) ** -2
    np.testing.assert_allclose(grf_eigenvalues((8192,), **BURGERS, length=length)[:8], expected, rtol=1e-11)


def test_subgrid_of_a_fine_sample_has_the_coarse_distribution() -> None:
    """Resolution independence: every 8th point of n=512 samples has the n=64 spectrum."""
    fine = periodic_grf(4000, (512,), **BURGERS, rng=np.random.default_rng(2))
    check_spectrum(fine[:, ::8], grf_eigenvalues((64,), **BURGERS))


def test_zero_mean_removes_only_the_constant_mode():
    """zero_mean: every sample has spatial mean 0; all other modes keep their variances."""
    full = grf_eigenvalues((64,), alpha=2.0, tau=5.0, sigma=25.0)
    centred = grf_eigenvalues((64,), alpha=2.0, tau=5.0, sigma=25.0, zero_mean=True)
    assert centred[0] == 0.0 and full[0] > 0
    np.testing.assert_array_equal(centred[1:], full[1:])
    samples = periodic_grf(50, (32, 32), alpha=2.5, tau=7.0, sigma=7.0**1.5, rng=np.random.default_rng(1),
                           zero_mean=True)
    assert np.abs(samples.mean(axis=(1, 2))).max() < 1e-12 * np.abs(samples).max()
