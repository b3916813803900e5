"""2D incompressible Navier–Stokes in vorticity form on the periodic square ``[0, L)^2``.

    w_t + u . grad w = nu Laplacian w - drag w + f,    u = (psi_y, -psi_x),  -Laplacian psi = w,

Fourier pseudo-spectral on a *solve grid* of ``N x N`` points with the 2/3 rule (the state is the
modes ``|m_x|, |m_y| <= K = (N - 1) // 3`` of ``rfft2``, so quadratic products are alias free),
time-stepped with ETDRK4: viscosity and drag (diagonal, stiff) are integrated exactly, advection
and the steady forcing explicitly.  Batched over samples.  Data enter and leave as point values on a
*storage grid*.  Also the FNO-nu preset (Kolmogorov flow: ``opformer.pde.kolmogorov``); docs/solvers.md.
The pseudo-spectral pieces it shares with the other periodic solvers are in :mod:`opformer.pde.spectral`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

import numpy as np
import scipy.fft

from opformer.errors import ConfigError
from opformer.pde.grf import color_noise, grf_eigenvalues
from opformer.pde.samples import check_positive, check_resolution, frame_times, recorded, solve_samples
from opformer.pde.spectral import dealias_mask, etdrk4_frames, from_grid, solver_settings, to_grid, wavenumbers

#: The solver as a file's settings name it.
VORTICITY_SOLVER = "pseudo-spectral vorticity, ETDRK4"
#: FFTs (of one real N x N field) per ETDRK4 step: 4 stages x (4 inverse + 1 forward).
FFTS_PER_STEP = 20
#: FNO-nu benchmark (Li et al. 2020, used by DPOT): initial vorticity N(0, sigma^2 (-Laplacian + 49 I)^-2.5)
#: with sigma = 7^1.5, the amplitude of the data-generation code of Li et al. (whose paper writes the
#: covariance as 7^(3/2) (...)^-2.5); constant mode removed (a periodic vorticity has zero mean).
FNO_GRF = {"alpha": 2.5, "tau": 7.0, "sigma": 7.0**1.5, "zero_mean": True}
#: Default time step of the FNO-nu preset, ``FNO_DT_TIMES_N / solve_resolution`` (0.02 at 64^2): CFL number
#: ``dt max(|u| + |v|) N`` <= 0.51 measured for nu = 1e-3, time error ~1e-9 (benchmarks/results/solvers/navier_stokes.md).
FNO_DT_TIMES_N = 1.28
#: Default solve grid below nu = 1e-3 (the grid of Li et al.); at nu = 1e-3 the storage grid (64^2 resolved).
FNO_FINE_SOLVE_RESOLUTION = 256


def solve_navier_stokes_2d(
    w0: np.ndarray,
    *,
    nu: float,
    times: np.ndarray,
    dt: float,
    forcing: np.ndarray | None = None,
    drag: float = 0.0,
    length: float = 1.0,
    solve_resolution: int | None = None,
    batch_size: int = 50,
    workers: int = 2,
) -> tuple[np.ndarray, np.ndarray]:
    """Vorticity frames ``(batch, len(times), n, n)`` (float64) from ``w0`` (batch, n, n), and ``times``.

    ``w0`` and ``forcing`` (n, n) (vorticity forcing, i.e. the curl of the body force) are point values on
    the grid ``x_i = i L / n``, axis order ``(x, y)``; they are projected on the de-aliased modes of the solve
    grid (``solve_resolution``, default ``n``) and the frames are that solution's point values on the same
    grid (frame ``t = 0`` is the projected ``w0``).  Each frame interval is split into equal steps ``<= dt``.
    Chunks of ``batch_size`` samples are solved by ``workers`` threads; results do not depend on either.
    Raises ``ConfigError`` for bad arguments or if the CFL number exceeds :data:`~opformer.pde.spectral.MAX_CFL`
    at a frame.
    """
    w0 = np.asarray(w0, dtype=np.float64)
    times = np.atleast_1d(np.asarray(times, dtype=np.float64))
    if w0.ndim != 3 or w0.shape[1] != w0.shape[2]:
        raise ConfigError(f"w0 has shape {w0.shape}: expected (batch, n, n)")
    n = w0.shape[-1]
    n_solve = n if solve_resolution is None else solve_resolution
    check_resolution("resolution", n)
    check_resolution("solve_resolution", n_solve)
    check_positive("nu", nu, allow_zero=True)
    check_positive("drag", drag, allow_zero=True)
    check_positive("dt", dt)
    check_positive("length", length)
    kx, ky = wavenumbers(n_solve, 2, length)
    k2 = kx**2 + ky**2
    inv_k2 = np.where(k2 > 0, 1.0 / np.where(k2 > 0, k2, 1.0), 0.0)
    mask = dealias_mask(n_solve, 2)
    force = np.zeros((1, 1)) if forcing is None else from_grid(np.asarray(forcing, np.float64)[None], n_solve, 2)[0]
    ikx, iky = 1j * kx * mask, 1j * ky * mask

    def nonlinear(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Modes of ``-u . grad w + f`` and the velocity (u, v) on the solve grid."""
        psi = c * inv_k2
        spectra = np.stack([iky * psi, -ikx * psi, ikx * c, iky * c], axis=1)
        fields = scipy.fft.irfft2(spectra, s=(n_solve, n_solve), norm="forward")
        advection = fields[:, 0] * fields[:, 2] + fields[:, 1] * fields[:, 3]
        return force - mask * scipy.fft.rfft2(advection, norm="forward"), fields[:, :2]

    frames = etdrk4_frames(w0, times, dt, -nu * k2 - drag, nonlinear, lambda chunk: from_grid(chunk, n_solve, 2),
                           lambda c: to_grid(c, n_solve, n, 2), n_solve, length, batch_size, workers)
    return frames, times


#: The FNO-nu forcing as the generator records it in a file's settings.
FNO_FORCING = "0.1 (sin(2 pi (x + y)) + cos(2 pi (x + y)))"


def fno_forcing(n: int) -> np.ndarray:
    """FNO-nu forcing ``0.1 (sin 2 pi (x + y) + cos 2 pi (x + y))`` on the ``n x n`` grid of (0, 1)^2."""
    x = np.arange(n) / n
    s = 2.0 * np.pi * (x[:, None] + x[None, :])
    return 0.1 * (np.sin(s) + np.cos(s))


def generate_fno_nu(
    samples: int,
    nu: float = 1e-3,
    resolution: int = 64,
    t_final: float = 50.0,
    frame_dt: float = 1.0,
    seed: int = 0,
    *,
    first: int = 0,
    solve_resolution: int | None = None,
    dt: float | None = None,
    batch_size: int = 50,
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """FNO-nu trajectories (Li et al. 2020; DPOT's FNO-1e-3/1e-4/1e-5): ``(samples, time, n, n, 1)`` float32 vorticity.

    (0, 1)^2, forcing ``fno_forcing``, no drag, ``w0 ~ FNO_GRF`` sampled on the storage grid (sample ``i``
    from ``SeedSequence(seed).spawn(first + samples)[first + i]``: ``first`` skips to a later part of the same
    stream), frames every ``frame_dt`` up to ``t_final``.  The solve grid defaults to ``resolution`` for
    ``nu >= 1e-3`` and to ``FNO_FINE_SOLVE_RESOLUTION`` below; ``dt`` to ``FNO_DT_TIMES_N / solve_resolution``.
    ``progress`` is called with the number of samples each chunk finished.  Returns the array and
    the JSON-serialisable settings ``{"pde", "solver"}``.
    """
    check_resolution("resolution", resolution)
    check_positive("nu", nu, allow_zero=True)
    times = frame_times(t_final, frame_dt)
    if solve_resolution is None:
        solve_resolution = resolution if nu >= 1e-3 else max(resolution, FNO_FINE_SOLVE_RESOLUTION)
    dt = FNO_DT_TIMES_N / solve_resolution if dt is None else dt
    forcing = fno_forcing(resolution)
    eigenvalues = grf_eigenvalues((resolution,) * 2, **FNO_GRF)

    def solve_block(seeds: list[np.random.SeedSequence]) -> np.ndarray:
        noise = np.stack([np.random.default_rng(s).standard_normal((resolution,) * 2) for s in seeds])
        frames, _ = solve_navier_stokes_2d(
            color_noise(noise, eigenvalues), nu=nu, times=times, dt=dt, forcing=forcing,
            solve_resolution=solve_resolution, batch_size=batch_size, workers=workers,
        )
        return frames[..., None]

    out = solve_samples(samples, seed, first, batch_size * max(1, workers), (len(times), resolution, resolution, 1),
                        solve_block, progress)
    settings = {
        "pde": {
            "name": "navier_stokes_2d_fno",
            "nu": nu,
            "length": 1.0,
            "forcing": FNO_FORCING,
            "drag": 0.0,
            "initial_condition": {"type": "grf", **FNO_GRF},
            "times": times.tolist(),
            "channels": ["vorticity"],
        },
        "solver": vorticity_solver_settings(solve_resolution, dt),
    }
    return out, settings


def vorticity_solver_settings(n_solve: int, dt: float) -> dict[str, Any]:
    """The solver settings a file made by :func:`solve_navier_stokes_2d` records."""
    return solver_settings(n_solve, dt, VORTICITY_SOLVER, FFTS_PER_STEP)




def resolve_fno_nu(pde: dict[str, Any], solver: dict[str, Any], last: np.ndarray, times: Sequence[float]) -> np.ndarray:
    """The frames ``(batch, len(times) - 1, n, n, 1)`` float32 at ``times[1:]`` after the FNO-nu vorticity frames
    ``last`` ``(batch, n, n, 1)`` at ``times[0]``, solved with a file's recorded ``pde`` and ``solver`` settings
    (:mod:`opformer.pde.resolve`)."""
    times = np.asarray(times, dtype=np.float64)
    w = np.asarray(last, dtype=np.float32)[..., 0]
    frames, _ = solve_navier_stokes_2d(
        w, nu=float(recorded(pde, "nu", "pde")), times=times - times[0], dt=float(recorded(solver, "dt_max", "solver")),
        forcing=fno_forcing(w.shape[-1]), length=float(pde.get("length", 1.0)),
        solve_resolution=int(recorded(solver, "solve_resolution", "solver")), workers=1)
    return frames[:, 1:, ..., None].astype(np.float32)
