"""The Darcy finite-difference solver and data generator (Cao 2021, Example 5.2)."""

import json

import numpy as np
import pytest
import scipy.sparse

from opformer.pde.darcy import (
    assemble_darcy,
    face_coefficients,
    generate_darcy,
    manufactured_problem,
    observed_order,
    solve_darcy,
    threshold_coefficient,
)
from opformer.pde.grf import neumann_grf


def interface_coefficient(n: int, seed: int = 0) -> np.ndarray:
    """A psi(GRF) coefficient (values 3 and 12) on n x n nodes."""
    p = neumann_grf(1, n, 2, alpha=2.0, tau=3.0, sigma=1.0, rng=np.random.default_rng(seed), zero_mean=True)[0]
    return threshold_coefficient(p)


@pytest.mark.parametrize("solver", ["amg", "direct"])
def test_second_order_convergence_on_a_manufactured_solution(solver: str) -> None:
    """u = sin(pi x) sin(pi y), a = 2 + sin(2 pi x) cos(3 pi y): max-norm error ~ h^2."""
    errors, orders = observed_order((17, 33, 65), solver=solver)
    assert all(1.8 <= order <= 2.2 for order in orders), orders
    assert errors[-1] < 1e-3


def test_constant_coefficient_gives_the_five_point_laplacian() -> None:
    """a = 1: the h^2-scaled matrix is kron(T, I) + kron(I, T), T = tridiag(-1, 2, -1)."""
    m = 5
    t = scipy.sparse.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1])
    expected = scipy.sparse.kron(t, scipy.sparse.eye(m)) + scipy.sparse.kron(scipy.sparse.eye(m), t)
    assert np.abs(assemble_darcy(np.ones((m + 2, m + 2))) - expected).max() == 0.0
    assert np.abs(assemble_darcy(np.full((m + 2, m + 2), 3.0)) - 3 * expected).max() == 0.0


def test_face_coefficients_are_harmonic_means() -> None:
    a = np.array([[3.0, 12.0], [12.0, 12.0]])
    ax, ay = face_coefficients(a)
    np.testing.assert_array_equal(ax, [[2 * 3 * 12 / 15, 12.0]])
    np.testing.assert_array_equal(ay, [[2 * 3 * 12 / 15], [12.0]])


def test_matrix_is_symmetric_positive_definite() -> None:
    a = interface_coefficient(11)
    matrix = assemble_darcy(a)
    assert matrix.shape == (81, 81) and matrix.nnz == 81 + 4 * 9 * 8
    assert (matrix != matrix.T).nnz == 0  # exactly symmetric
    eigenvalues = np.linalg.eigvalsh(matrix.toarray())
    assert eigenvalues.min() > 0
    # Bounds from the coefficient range: 3 lambda_min(Laplacian) <= lambda_min(A) <= 12 lambda_min(Laplacian).
    laplace_min = 8 * np.sin(np.pi / 20) ** 2
    assert 3 * laplace_min - 1e-12 <= eigenvalues.min() <= 12 * laplace_min + 1e-12


def test_amg_matches_direct_solve_and_meets_its_tolerance() -> None:
    a = interface_coefficient(65, seed=1)
    u_amg, residual = solve_darcy(a, return_residual=True)
    u_lu = solve_darcy(a, solver="direct")
    assert residual < 1e-10
    assert np.abs(u_amg - u_lu).max() < 1e-8 * np.abs(u_lu).max()


def test_solution_obeys_boundary_condition_maximum_principle_and_compliance_bounds() -> None:
    """u = 0 on the boundary; f = 1 > 0 gives u > 0 inside (the matrix is an M-matrix)."""
    u = solve_darcy(interface_coefficient(33, seed=2))
    assert np.all(u[[0, -1]] == 0) and np.all(u[:, [0, -1]] == 0)
    assert u[1:-1, 1:-1].min() > 0
    # 3 L <= A <= 12 L (L: the Laplacian matrix) brackets the compliance f^T A^-1 f = h^2 sum(u).
    ones = np.ones((33, 33))
    assert solve_darcy(12 * ones).sum() < u.sum() < solve_darcy(3 * ones).sum()


@pytest.mark.slow
def test_generated_data_are_reproducible_and_independent_of_workers() -> None:
    a1, u1, settings = generate_darcy(4, resolution=9, seed=5, workers=1)
    a2, u2, _ = generate_darcy(4, resolution=9, seed=5, workers=2)
    assert a1.shape == u1.shape == (4, 9, 9) and a1.dtype == u1.dtype == np.float32
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(u1, u2)
    assert set(np.unique(a1).tolist()) == {3.0, 12.0}
    assert not np.array_equal(a1, generate_darcy(4, resolution=9, seed=6, workers=1)[0])
    np.testing.assert_allclose(u1[2], solve_darcy(a1[2].astype(np.float64)), rtol=1e-6)
    assert settings["solver"]["max_relative_residual"] < 1e-10
    assert json.loads(json.dumps(settings)) == settings


def test_manufactured_problem_is_consistent() -> None:
    """f = -div(a grad u) checked by a centred difference of the flux at a fine grid's interior nodes."""
    n = 401
    a, f, u = manufactured_problem(n)
    h = 1 / (n - 1)
    ax, ay = (a[1:] + a[:-1]) / 2, (a[:, 1:] + a[:, :-1]) / 2
    flux_x, flux_y = ax * np.diff(u, axis=0) / h, ay * np.diff(u, axis=1) / h
    div = np.diff(flux_x, axis=0)[:, 1:-1] / h + np.diff(flux_y, axis=1)[1:-1] / h
    np.testing.assert_allclose(-div, f[1:-1, 1:-1], atol=1e-3 * np.abs(f).max())
