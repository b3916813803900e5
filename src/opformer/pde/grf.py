"""Gaussian random fields on periodic grids (any number of dimensions).

The field is the centred Gaussian field on the periodic box ``[0, length)^d`` with covariance
operator ``sigma^2 (-Laplacian + tau^2 I)^(-alpha)``.  Its Fourier-series coefficients
``c_k`` (``u(x) = sum_k c_k exp(2 pi i k.x / length)``) are independent with variance

    lambda(k) = sigma^2 ((2 pi / length)^2 |k|^2 + tau^2)^(-alpha),

*including* ``k = 0`` (variance ``sigma^2 tau^(-2 alpha)``): the field has zero mean in
expectation, but each sample has a random spatial mean, as the covariance prescribes. With
``zero_mean=True`` the constant mode is removed, so every sample has spatial mean exactly zero: the
convention of the Burgers and Navier-Stokes data of Li et al. (FNO), which the Galerkin Transformer
and DPOT papers train on.

Samples are the continuous field evaluated *exactly* at the grid points ``x_j = j length / n``.
Those point values are Gaussian with the circulant covariance ``C(x_i - x_j)``, whose
discrete eigenvalues are the aliased sums ``sum_{j in Z^d} lambda(m + j n)``; sampling with
them (rather than truncating the series at the Nyquist mode) makes the statistics independent
of the resolution: any grid, or any sub-grid of a finer sample, has the same distribution.
"""

from __future__ import annotations

import numpy as np
import scipy.fft

#: Summation of aliased images stops when the estimated remaining tail is below this
#: fraction of the pointwise variance ...
ALIAS_RTOL = 1e-13
#: ... or after this many image-grid evaluations (bounds the cost in 2D/3D; the omitted tail
#: is then < 1e-8 of the variance for alpha = 2.5 at n = 16 x 16).
ALIAS_MAX_EVALUATIONS = 10_000_000
#: Image-grid evaluations per vectorised chunk.
_CHUNK = 1_000_000


def _half_spectrum_modes(shape: tuple[int, ...]) -> list[np.ndarray]:
    """Integer wave numbers of an ``rfftn`` half spectrum, one broadcastable array per axis."""
    modes = []
    for axis, n in enumerate(shape):
        m = np.arange(n // 2 + 1) if axis == len(shape) - 1 else np.fft.fftfreq(n, 1.0 / n)
        view = [1] * len(shape)
        view[axis] = m.size
        modes.append(m.reshape(view).astype(np.float64))
    return modes


def pointwise_variance(eigenvalues: np.ndarray, shape: tuple[int, ...]) -> float:
    """Sum of an ``rfftn`` half spectrum over the full spectrum (the field's pointwise variance)."""
    n = shape[-1]
    weights = np.full(eigenvalues.shape[-1], 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    return float((eigenvalues * weights).sum())


def grf_eigenvalues(
    shape: tuple[int, ...],
    alpha: float,
    tau: float,
    sigma: float,
    length: float = 1.0,
    zero_mean: bool = False,
) -> np.ndarray:
    """Variances of the grid field's Fourier coefficients, on the ``rfftn`` half spectrum.

    Entry ``m`` is ``E|c_m|^2`` for ``c = rfftn(u, norm="forward")`` of a sample ``u`` on a
    grid of ``shape``: the covariance eigenvalue ``lambda(m)`` plus its aliases
    ``lambda(m + j n)``, ``j != 0``.  Their ``pointwise_variance`` is that of the continuous field.
    ``zero_mean`` sets the constant mode's entry to zero (samples with spatial mean exactly 0).
    """
    if 2 * alpha <= len(shape):
        raise ValueError(f"alpha={alpha} gives no pointwise-defined field in {len(shape)}D (need alpha > d/2)")
    d = len(shape)
    modes = _half_spectrum_modes(shape)
    scale = (2.0 * np.pi / length) ** 2

    def images(offsets: np.ndarray) -> np.ndarray:
        """Sum of lambda(m + j n) over the image offsets ``j`` (rows of ``offsets``)."""
        k2 = sum(
            (m[None] + offsets[:, axis].reshape((-1,) + (1,) * d) * n) ** 2
            for axis, (m, n) in enumerate(zip(modes, shape))
        )
        return (sigma**2 * (scale * k2 + tau**2) ** (-alpha)).sum(axis=0)

    total = images(np.zeros((1, d), dtype=np.int64))
    grid_size = total.size
    evaluations = grid_size
    shell = 0
    while True:
        shell += 1
        side = np.arange(-shell, shell + 1)
        cube = np.stack(np.meshgrid(*([side] * d), indexing="ij"), axis=-1).reshape(-1, d)
        offsets = cube[np.abs(cube).max(axis=1) == shell]
        chunk = max(1, _CHUNK // grid_size)
        contribution = sum(images(offsets[i : i + chunk]) for i in range(0, len(offsets), chunk))
        total += contribution
        evaluations += len(offsets) * grid_size
        # Shell contributions decay like shell^-(2 alpha - d + 1): the tail is ~ shell / (2 alpha - d) of the last.
        tail = pointwise_variance(contribution, shape) * shell / (2 * alpha - d)
        if tail < ALIAS_RTOL * pointwise_variance(total, shape) or evaluations > ALIAS_MAX_EVALUATIONS:
            if zero_mean:
                total[(0,) * d] = 0.0
            return total


def color_noise(noise: np.ndarray, eigenvalues: np.ndarray, workers: int = 1) -> np.ndarray:
    """Turn white noise ``(batch, *shape)`` into GRF samples with the given ``grf_eigenvalues``."""
    shape = noise.shape[1:]
    axes = tuple(range(1, noise.ndim))
    spectrum = scipy.fft.rfftn(noise, axes=axes, norm="ortho", workers=workers)
    spectrum *= np.sqrt(eigenvalues * np.prod(shape))
    return scipy.fft.irfftn(spectrum, s=shape, axes=axes, norm="ortho", workers=workers)


def periodic_grf(
    n_samples: int,
    shape: tuple[int, ...],
    alpha: float,
    tau: float,
    sigma: float,
    length: float = 1.0,
    *,
    rng: np.random.Generator,
    zero_mean: bool = False,
    workers: int = 1,
) -> np.ndarray:
    """Draw ``n_samples`` periodic GRF samples, N(0, sigma^2 (-Laplacian + tau^2 I)^(-alpha)).

    Returns float64 point values of shape ``(n_samples, *shape)`` on the grid
    ``x_j = j * length / n`` of each axis; ``zero_mean`` removes each sample's spatial mean mode.
    """
    eigenvalues = grf_eigenvalues(tuple(shape), alpha, tau, sigma, length, zero_mean)
    noise = rng.standard_normal((n_samples, *shape))
    return color_noise(noise, eigenvalues, workers=workers)


def neumann_grf_variances(
    n: int, dim: int, alpha: float, tau: float, sigma: float, zero_mean: bool = False
) -> np.ndarray:
    """Variances of the node-grid cosine coefficients of the Neumann GRF on ``[0, 1]^dim``.

    The field is ``u(x) = sum_{k >= 0} xi_k sqrt(lambda(k)) phi_k(x)`` with the L2-orthonormal
    Neumann eigenfunctions ``phi_k = prod_i c_{k_i} cos(pi k_i x_i)`` (``c_0 = 1``, else ``sqrt 2``)
    and ``lambda(k) = sigma^2 (pi^2 |k|^2 + tau^2)^(-alpha)``: the covariance
    ``sigma^2 (-Laplacian + tau^2 I)^(-alpha)`` with homogeneous Neumann boundary conditions.
    At the ``n`` nodes ``x_j = j / (n - 1)`` of each axis the modes ``q + 2 m (n - 1)`` and
    ``2 m (n - 1) - q`` coincide with mode ``q``, so the point values are *exactly*
    ``u_j = sum_{q=0}^{n-1} b_q prod_i cos(pi q_i j_i / (n - 1))`` with independent centred ``b_q``
    of variance ``prod_i w(q_i) * sum_{m in Z^dim} lambda(q + 2 (n - 1) m)``, ``w = 1`` at
    ``q_i in {0, n - 1}`` and 2 otherwise.  The alias sum is the periodic one of period 2
    (the even extension), computed by ``grf_eigenvalues``.  Returns shape ``(n,) * dim``.
    """
    if n < 2:
        raise ValueError(f"n={n}: a Neumann GRF needs at least 2 nodes per axis")
    period = 2 * (n - 1)
    periodic = grf_eigenvalues((period,) * dim, alpha, tau, sigma, length=2.0, zero_mean=zero_mean)
    variances = periodic[(slice(0, n),) * dim]
    weight = np.full(n, 2.0)
    weight[[0, -1]] = 1.0
    for axis in range(dim):
        variances = variances * weight.reshape([-1 if i == axis else 1 for i in range(dim)])
    return variances


def neumann_grf(
    n_samples: int,
    n: int,
    dim: int,
    alpha: float,
    tau: float,
    sigma: float,
    *,
    rng: np.random.Generator,
    zero_mean: bool = False,
    variances: np.ndarray | None = None,
) -> np.ndarray:
    """Draw ``n_samples`` Neumann GRF samples (see ``neumann_grf_variances``) at the nodes of ``[0, 1]^dim``.

    Returns float64 point values of shape ``(n_samples,) + (n,) * dim`` on the grid ``x_j = j / (n - 1)``
    (boundary included); every sub-grid with stride ``s`` (``s`` dividing ``n - 1``) of a sample has the
    distribution of a sample drawn directly at ``(n - 1) / s + 1`` nodes.  ``variances`` may pass
    precomputed ``neumann_grf_variances`` to save their computation.
    """
    if variances is None:
        variances = neumann_grf_variances(n, dim, alpha, tau, sigma, zero_mean)
    coefficients = rng.standard_normal((n_samples,) + (n,) * dim) * np.sqrt(variances)
    return cosine_synthesis(coefficients)


def cosine_synthesis(coefficients: np.ndarray) -> np.ndarray:
    """``u_j = sum_q b_q prod_i cos(pi q_i j_i / (n_i - 1))`` over the trailing axes except the first (batch)."""
    axes = tuple(range(1, coefficients.ndim))
    # scipy's DCT-I: y_j = x_0 + (-1)^j x_{n-1} + 2 sum_{0<q<n-1} x_q cos(pi q j / (n-1)); halve the interior.
    scaled = coefficients.copy()
    for axis in axes:
        index = [slice(None)] * coefficients.ndim
        index[axis] = slice(1, -1)
        scaled[tuple(index)] *= 0.5
    return scipy.fft.dctn(scaled, type=1, axes=axes)


def cosine_analysis(values: np.ndarray) -> np.ndarray:
    """Inverse of ``cosine_synthesis``: the node-grid cosine coefficients ``b_q`` of ``values``."""
    axes = tuple(range(1, values.ndim))
    coefficients = scipy.fft.idctn(values, type=1, axes=axes)
    for axis in axes:
        index = [slice(None)] * values.ndim
        index[axis] = slice(1, -1)
        coefficients[tuple(index)] *= 2.0
    return coefficients
