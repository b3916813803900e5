"""Darcy flow ``-div(a grad u) = f`` on the unit square with ``u = 0`` on the boundary.

The data of Cao (2021) Example 5.2 (and of Li et al., FNO): the coefficient is
``a = psi(p)``, ``psi(p) = 12`` for ``p >= 0`` and ``3`` otherwise, of a Gaussian random field
``p ~ N(0, (-Laplacian + 9 I)^-2)`` with homogeneous Neumann boundary conditions (``neumann_grf``);
``f = 1``.  The map ``a -> u`` is stored on an ``n x n`` grid of nodes ``x_i = i h``,
``h = 1 / (n - 1)``, boundary included.

Discretisation: the 5-point, second-order finite-difference (finite-volume) scheme

    (F_{i+1/2,j} - F_{i-1/2,j} + F_{i,j+1/2} - F_{i,j-1/2}) / h = -f_ij,
    F_{i+1/2,j} = a_{i+1/2,j} (u_{i+1,j} - u_ij) / h,

at the ``(n - 2)^2`` interior nodes.  The face coefficient is the *harmonic* mean of the two nodal
values, ``a_{i+1/2,j} = 2 a_ij a_{i+1,j} / (a_ij + a_{i+1,j})``.  Why: with ``a`` piecewise constant,
equal to ``a_ij`` on the half of the edge next to node ``ij`` and ``a_{i+1,j}`` on the other half, the
flux through the edge is continuous and the two halves act as resistances in series, so the exact
conductance of the edge is the harmonic mean; the arithmetic mean overstates the flow across an
interface (by up to ``(12 + 3)^2 / (4 * 12 * 3) = 1.5625`` times for this data), and the scheme with
harmonic means is the standard one for interface problems.  For smooth ``a`` both means equal
``a(x_{i+1/2,j}) + O(h^2)``: the scheme is second order (verified in tests/pde/test_darcy.py).
The matrix (the ``h^2``-scaled operator) is symmetric, and positive definite for ``a > 0``.

Solver: algebraic multigrid (pyamg's classical Ruge-Stuben hierarchy) as preconditioner of conjugate
gradients, to a relative residual of ``DEFAULT_TOLERANCE``; ``solver="direct"`` uses SciPy's sparse
LU instead (slower at n = 421, see docs/solvers.md).  Samples are solved in parallel by processes.
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from opformer.pde.grf import cosine_synthesis, neumann_grf_variances
from opformer.processes import exit_with_parent

#: Relative residual ``|f - A u| / |f|`` at which the AMG-preconditioned CG stops.
DEFAULT_TOLERANCE = 1e-10
#: The paper's coefficient field: ``p ~ N(0, sigma^2 (-Laplacian + tau^2 I)^-alpha)`` (Neumann), without
#: the constant mode as in the data of Li et al. that the paper trained on; ``a = 12`` where ``p >= 0``,
#: else ``3``.  (``sigma`` does not change ``a``: only the sign of ``p`` matters.)
PAPER_GRF = {"type": "neumann_grf", "alpha": 2.0, "tau": 3.0, "sigma": 1.0, "zero_mean": True}
HIGH, LOW = 12.0, 3.0
SOLVERS = ("amg", "direct")


def threshold_coefficient(p: np.ndarray, high: float = HIGH, low: float = LOW) -> np.ndarray:
    """``psi(p)``: ``high`` where ``p >= 0``, ``low`` elsewhere."""
    return np.where(p >= 0, high, low)


def face_coefficients(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Harmonic means of neighbouring nodal values: ``(a_{i+1/2,j}`` shape (n-1, n), ``a_{i,j+1/2}`` shape (n, n-1))."""
    return 2 * a[1:] * a[:-1] / (a[1:] + a[:-1]), 2 * a[:, 1:] * a[:, :-1] / (a[:, 1:] + a[:, :-1])


def assemble_darcy(a: np.ndarray) -> scipy.sparse.csr_matrix:
    """The ``h^2``-scaled 5-point matrix of ``-div(a grad .)`` on the interior nodes of the ``n x n`` grid.

    Unknown ``(i - 1) (n - 2) + (j - 1)`` is node ``(i, j)``; Dirichlet neighbours drop out.
    """
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 3:
        raise ValueError(f"a must be an n x n nodal field with n >= 3, got shape {a.shape}")
    if not np.all(a > 0):
        raise ValueError("a must be positive")
    m = a.shape[0] - 2
    ax, ay = face_coefficients(a)
    west, east = ax[:-1, 1:-1], ax[1:, 1:-1]  # (m, m): faces i -/+ 1/2 of interior node (i, j)
    south, north = ay[1:-1, :-1], ay[1:-1, 1:]
    diagonal = (west + east + south + north).ravel()
    along_i = -east[:-1].ravel()  # coupling (i, j) - (i + 1, j), offset m
    along_j = -north.copy()
    along_j[:, -1] = 0.0  # (i, m) - (i + 1, 1) are not neighbours
    along_j = along_j.ravel()[:-1]  # coupling (i, j) - (i, j + 1), offset 1
    return scipy.sparse.diags([diagonal, along_i, along_i, along_j, along_j], [0, m, -m, 1, -1], format="csr")


def solve_darcy(
    a: np.ndarray,
    f: np.ndarray | float = 1.0,
    solver: str = "amg",
    tol: float = DEFAULT_TOLERANCE,
    return_residual: bool = False,
) -> np.ndarray | tuple[np.ndarray, float]:
    """Solve ``-div(a grad u) = f``, ``u = 0`` on the boundary, for one nodal ``a`` (n, n) on ``[0, 1]^2``.

    ``f`` is a scalar or nodal (n, n) array (its boundary values are unused).  Returns ``u`` (n, n),
    float64, zero on the boundary; with ``return_residual`` also ``|f - A u| / |f|`` of the linear system.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver={solver!r}: expected one of {SOLVERS}")
    a = np.asarray(a, dtype=np.float64)
    n = a.shape[0]
    h = 1.0 / (n - 1)
    matrix = assemble_darcy(a)
    rhs = np.broadcast_to(np.asarray(f, dtype=np.float64), a.shape)[1:-1, 1:-1].ravel() * h**2
    if solver == "direct":
        x = scipy.sparse.linalg.splu(matrix.tocsc()).solve(rhs)
    else:
        import pyamg

        hierarchy = pyamg.ruge_stuben_solver(matrix)
        x = hierarchy.solve(rhs, tol=tol, accel="cg", maxiter=500)
    u = np.zeros_like(a)
    u[1:-1, 1:-1] = x.reshape(n - 2, n - 2)
    if return_residual:
        norm = np.linalg.norm(rhs)
        return u, float(np.linalg.norm(rhs - matrix @ x) / norm) if norm else 0.0
    return u


def manufactured_problem(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodal ``(a, f, u)`` on the ``n x n`` grid of a smooth exact solution, for convergence checks.

    ``u = sin(pi x) sin(pi y)`` (zero on the boundary), ``a = 2 + sin(2 pi x) cos(3 pi y)`` (in [1, 3]),
    ``f = -div(a grad u) = -(a_x u_x + a_y u_y) + 2 pi^2 a u``.
    """
    x, y = np.meshgrid(np.linspace(0.0, 1.0, n), np.linspace(0.0, 1.0, n), indexing="ij")
    pi = np.pi
    u = np.sin(pi * x) * np.sin(pi * y)
    a = 2.0 + np.sin(2 * pi * x) * np.cos(3 * pi * y)
    a_x, a_y = 2 * pi * np.cos(2 * pi * x) * np.cos(3 * pi * y), -3 * pi * np.sin(2 * pi * x) * np.sin(3 * pi * y)
    u_x, u_y = pi * np.cos(pi * x) * np.sin(pi * y), pi * np.sin(pi * x) * np.cos(pi * y)
    return a, -(a_x * u_x + a_y * u_y) + 2 * pi**2 * a * u, u


def observed_order(sizes: tuple[int, ...] = (33, 65, 129), solver: str = "amg") -> tuple[list[float], list[float]]:
    """Max-norm errors of ``solve_darcy`` on ``manufactured_problem`` at ``sizes`` and the orders between them."""
    errors = []
    for n in sizes:
        a, f, exact = manufactured_problem(n)
        errors.append(float(np.abs(solve_darcy(a, f, solver=solver) - exact).max()))
    h = [1.0 / (n - 1) for n in sizes]
    orders = [float(np.log(errors[i] / errors[i + 1]) / np.log(h[i] / h[i + 1])) for i in range(len(sizes) - 1)]
    return errors, orders


# Per-process state of a generation run, set once by ``_init_worker`` (forked or pickled once per worker).
_STATE: dict[str, Any] = {}


def _init_worker(state: dict[str, Any]) -> None:
    _STATE.clear()
    _STATE.update(state)


def _init_pool_worker(state: dict[str, Any]) -> None:
    """A worker process: leaves Ctrl-C to its parent (which stops the pool) and ends when the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()
    _init_worker(state)


def _sample(index: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Coefficient, solution and residual of sample ``index`` of the run in ``_STATE``."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # one BLAS thread per sample: CG's dot products thrash with more (2.3x slower)
        return _sample_single_threaded(index)


def _sample_single_threaded(index: int) -> tuple[np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(_STATE["seeds"][index])
    noise = rng.standard_normal(_STATE["variances"].shape)
    p = cosine_synthesis((noise * np.sqrt(_STATE["variances"]))[None])[0]
    a = threshold_coefficient(p, _STATE["a_high"], _STATE["a_low"])
    u, residual = solve_darcy(a, 1.0, _STATE["solver"], _STATE["tol"], return_residual=True)
    return a.astype(np.float32), u.astype(np.float32), residual


def default_workers() -> int:
    """Cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def generate_darcy(
    n_samples: int,
    resolution: int = 421,
    seed: int = 0,
    workers: int | None = None,
    solver: str = "amg",
    tol: float = DEFAULT_TOLERANCE,
    progress: Callable[[int], None] | None = None,
    a_high: float = HIGH,
    a_low: float = LOW,
    tau: float = PAPER_GRF["tau"],
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The Darcy data set of Cao (2021) Example 5.2: ``a -> u`` on ``resolution x resolution`` nodes.

    The coefficient is ``a_high`` where the random field ``p ~ N(0, (-Laplacian + tau^2 I)^-2)`` is ``>= 0``, else
    ``a_low`` (the paper's 12, 3 and 3 by default): the contrast and the correlation length of a shifted data set.

    Sample ``i`` draws its noise from ``SeedSequence(seed).spawn(n_samples)[i]``, so the data do not
    depend on ``workers`` (processes; default: the available cores).  Returns float32 arrays ``a``, ``u``
    of shape ``(n_samples, resolution, resolution)`` and the JSON-serialisable settings ``{"pde", "solver"}``
    (the solver's entry includes the largest relative residual); ``progress`` is called with 1 per sample.
    """
    workers = default_workers() if workers is None else workers
    grf = {**{key: PAPER_GRF[key] for key in ("alpha", "sigma", "zero_mean")}, "tau": tau}
    state = {
        "a_high": a_high,
        "a_low": a_low,
        "variances": neumann_grf_variances(resolution, 2, **grf),
        "seeds": np.random.SeedSequence(seed).spawn(n_samples),
        "solver": solver,
        "tol": tol,
    }
    a = np.empty((n_samples, resolution, resolution), dtype=np.float32)
    u = np.empty_like(a)
    residuals = np.empty(n_samples)

    def store(index: int, result: tuple[np.ndarray, np.ndarray, float]) -> None:
        a[index], u[index], residuals[index] = result
        if progress is not None:
            progress(1)

    if workers <= 1 or n_samples <= 1:
        _init_worker(state)
        for index in range(n_samples):
            store(index, _sample(index))
    else:
        chunk = max(1, min(16, n_samples // (4 * workers)))
        pool = ProcessPoolExecutor(max_workers=workers, initializer=_init_pool_worker, initargs=(state,))
        try:
            for index, result in enumerate(pool.map(_sample, range(n_samples), chunksize=chunk)):
                store(index, result)
        finally:  # on an interrupt: the samples not yet started never start
            pool.shutdown(wait=True, cancel_futures=True)
    settings = {
        "pde": {
            "name": "darcy",
            "equation": "-div(a grad u) = f on (0,1)^2, u = 0 on the boundary",
            "forcing": 1.0,
            "coefficient": {**PAPER_GRF, "tau": tau, "boundary_condition": "neumann",
                            "domain": [[0.0, 1.0], [0.0, 1.0]], "map": f"a = {a_high:g} where p >= 0, else {a_low:g}"},
        },
        "solver": {
            "name": "5-point finite differences, nodes x_i = i / (n - 1) including the boundary",
            "face_coefficient": "harmonic mean of the two nodal values",
            "linear_solver": ("algebraic multigrid (pyamg Ruge-Stuben) preconditioned CG" if solver == "amg"
                              else "sparse LU (scipy splu)"),
            "tolerance": tol if solver == "amg" else None,
            "max_relative_residual": float(residuals.max()) if n_samples else 0.0,
        },
    }
    return a, u, settings


def resolve_darcy(pde: dict[str, Any], solver: dict[str, Any], inputs: np.ndarray) -> np.ndarray:
    """Solutions ``u`` ``(batch, n, n, 1)`` float32 of stored coefficients ``a`` ``(batch, n, n, 1)``, solved again
    with a file's recorded ``pde`` and ``solver`` settings (:mod:`opformer.pde.resolve`)."""
    x = np.asarray(inputs, dtype=np.float32)[..., 0]
    method = "amg" if "multigrid" in str(solver.get("linear_solver", "")) else "direct"
    tol = solver.get("tolerance")
    options = {} if tol is None else {"tol": float(tol)}
    return np.stack([solve_darcy(a, float(pde.get("forcing", 1.0)), method, **options) for a in x]
                    ).astype(np.float32)[..., None]
