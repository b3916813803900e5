"""Viscous Burgers equation ``u_t + (u^2/2)_x = nu u_xx`` on the periodic interval ``(0, L)``.

Fourier pseudo-spectral discretisation with the 2/3 rule, time-stepped with ETDRK4
(Cox & Matthews 2002; phi functions by the contour integrals of Kassam & Trefethen 2005),
batched over samples.  The dynamics are solved on a *solve grid* of ``solve_resolution``
points (the state is its ``K + 1 = (solve_resolution - 1) // 3 + 1`` de-aliased Fourier
modes); data enter and leave on any *storage grid* by spectral truncation / zero padding.
See docs/solvers.md for the choice of the defaults and their verification.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np
import scipy.fft

from opformer.errors import ConfigError
from opformer.pde.grf import color_noise, grf_eigenvalues
from opformer.pde.parallel import check_stop, thread_imap, thread_map
from opformer.pde.samples import recorded
from opformer.pde.spectral import etdrk4_coefficients

#: Solve grid for the paper's data (nu = 0.1 / (2 pi), GRF N(0, 625 (-Laplacian + 25 I)^-2)):
#: 64 de-aliased modes; measured spatial error < 1e-10 relative (docs/solvers.md).
DEFAULT_SOLVE_RESOLUTION = 192
#: Default time step; measured time error < 1e-7 relative for the paper's data.
DEFAULT_DT = 1e-3
#: Largest advective step ``max|u0| dt / length`` allowed (max|u| never grows for Burgers, so
#: max|u0| bounds the speed at all times).  The time error grows like its 4th power: measured
#: 1.1e-6 relative at 1.06e-2 (paper data, dt = 2e-3), so ~3.5e-7 at this bound.
MAX_ADVECTIVE_STEP = 8e-3
#: GRF of the paper's initial data: N(0, sigma^2 (-Laplacian + tau^2 I)^-alpha) without the constant
#: mode, as in the data of Li et al. that the paper used. (A mean c only translates the solution,
#: u(x, t) = c + w(x - c t, t), by Galilean invariance; the paper's data have none.)
PAPER_GRF = {"type": "grf", "alpha": 2.0, "tau": 5.0, "sigma": 25.0, "zero_mean": True}


def _modes_from_grid(u: np.ndarray, n_modes: int) -> np.ndarray:
    """First ``n_modes`` Fourier-series coefficients of the trigonometric interpolant of ``u``."""
    n = u.shape[-1]
    c = scipy.fft.rfft(u, norm="forward")
    if n % 2 == 0:
        c[..., -1] *= 0.5  # the interpolant splits the Nyquist mode between +n/2 and -n/2
    out = np.zeros((u.shape[0], n_modes), dtype=np.complex128)
    m = min(n_modes, c.shape[-1])
    out[:, :m] = c[:, :m]
    return out


def _grid_from_modes(c: np.ndarray, n: int) -> np.ndarray:
    """Values at ``n`` equispaced points of the real field with Fourier coefficients ``c`` (m >= 0)."""
    n_modes = c.shape[-1]
    if 2 * (n_modes - 1) < n:
        return scipy.fft.irfft(c, n=n, norm="forward")
    # The grid cannot resolve all modes: sample exactly by folding the spectrum onto it.
    full = np.concatenate([np.conj(c[:, :0:-1]), c], axis=-1)
    index = np.arange(-(n_modes - 1), n_modes) % n
    folded = np.zeros((c.shape[0], n), dtype=np.complex128)
    for start in range(0, full.shape[-1], n):
        folded[:, index[start : start + n]] += full[:, start : start + n]
    return scipy.fft.ifft(folded, norm="forward").real


def default_dt(u0: np.ndarray, length: float = 1.0) -> float:
    """``DEFAULT_DT``, reduced if needed to an advective step ``max|u0| dt / length`` of ``MAX_ADVECTIVE_STEP``."""
    u_max = float(np.max(np.abs(u0)))
    return DEFAULT_DT if u_max == 0 else min(DEFAULT_DT, MAX_ADVECTIVE_STEP * length / u_max)


def solve_burgers(
    u0: np.ndarray,
    viscosity: float,
    t_final: float,
    length: float = 1.0,
    solve_resolution: int | None = None,
    dt: float | None = None,
    workers: int = 2,
    stop: threading.Event | None = None,
) -> np.ndarray:
    """Solve ``u_t + (u^2/2)_x = viscosity u_xx`` from ``u0`` (batch, n) to ``t_final``.

    ``u0`` holds point values on the grid ``x_j = j length / n``; the result (float64) holds
    those of ``u(., t_final)`` on the same grid.  ``solve_resolution`` defaults to
    ``DEFAULT_SOLVE_RESOLUTION``; ``dt`` (rounded down so that it divides ``t_final``)
    defaults to ``default_dt(u0, length)``.  ``workers`` threads solve contiguous chunks of
    the batch (each sample's result does not depend on the chunking); a set ``stop`` ends them at the
    next time step (:class:`opformer.pde.parallel.Stopped`).
    """
    u0 = np.asarray(u0, dtype=np.float64)
    if u0.ndim != 2:
        raise ValueError(f"u0 must have shape (batch, n), got {u0.shape}")
    n_solve = DEFAULT_SOLVE_RESOLUTION if solve_resolution is None else solve_resolution
    dt = default_dt(u0, length) if dt is None else dt
    n_steps = max(1, int(np.ceil(t_final / dt - 1e-9)))
    dt = t_final / n_steps

    n_modes = (n_solve - 1) // 3 + 1  # keep |m| < n_solve / 3: products are alias free
    k = 2.0 * np.pi / length * np.arange(n_modes)
    e, e2, q, f1, f2, f3 = etdrk4_coefficients(-viscosity * k**2, dt)
    # Fold the x-derivative of the flux u^2 / 2, i.e. the factor -i k / 2, into the coefficients
    # (and the 2 of ETDRK4's 2 (N(a) + N(b)) f2 into f2).
    g = -0.5j * k
    q, f1, f2, f3 = q * g, f1 * g, 2.0 * f2 * g, f3 * g

    def square(v: np.ndarray) -> np.ndarray:
        """De-aliased Fourier modes of u^2."""
        u = scipy.fft.irfft(v, n=n_solve, norm="forward")
        return scipy.fft.rfft(u * u, norm="forward")[:, :n_modes]

    def solve(chunk: np.ndarray, stop: threading.Event) -> np.ndarray:
        v = _modes_from_grid(chunk, n_modes)
        for _ in range(n_steps):
            check_stop(stop)
            nv = square(v)
            e2v = e2 * v
            a = e2v + q * nv
            na = square(a)
            nb = square(e2v + q * na)
            nc = square(e2 * a + q * (2.0 * nb - nv))
            v = e * v + f1 * nv + f2 * (na + nb) + f3 * nc
        return _grid_from_modes(v, chunk.shape[-1])

    return np.concatenate(thread_map(solve, np.array_split(u0, max(1, min(workers, len(u0)))), workers, stop))


def cole_hopf_solution(
    u0: np.ndarray,
    viscosity: float,
    t: float,
    length: float = 1.0,
    fine_resolution: int = 1 << 15,
) -> np.ndarray:
    """Exact ``u(., t)`` (batch, n) for the trigonometric interpolant of ``u0`` (batch, n), by Cole–Hopf.

    With ``c`` the mean of ``u0`` and ``U`` a primitive of ``u0 - c``, ``u(x, t) = c + w(x - c t, t)``,
    ``w = -2 nu phi_x / phi`` where ``phi`` solves the heat equation from ``exp(-U / (2 nu))``;
    ``phi`` is a Fourier series computed on ``fine_resolution`` points (a multiple of ``n``).
    """
    u0 = np.asarray(u0, dtype=np.float64)
    n = u0.shape[-1]
    if fine_resolution % n:
        raise ValueError(f"fine_resolution={fine_resolution} is not a multiple of n={n}")
    c = _modes_from_grid(u0, fine_resolution // 2 + 1)
    mean = c[:, :1].real
    k = 2.0 * np.pi / length * np.arange(c.shape[-1])
    primitive_modes = np.zeros_like(c)
    primitive_modes[:, 1:] = c[:, 1:] / (1j * k[1:])
    primitive = scipy.fft.irfft(primitive_modes, n=fine_resolution, norm="forward")
    primitive -= primitive.min(axis=-1, keepdims=True)  # phi0 in (0, 1]: no overflow
    phi_modes = scipy.fft.rfft(np.exp(-primitive / (2.0 * viscosity)), norm="forward")
    phi_modes *= np.exp(-viscosity * k**2 * t - 1j * k * mean * t)
    phi = scipy.fft.irfft(phi_modes, n=fine_resolution, norm="forward")
    phi_x = scipy.fft.irfft(1j * k * phi_modes, n=fine_resolution, norm="forward")
    return (mean - 2.0 * viscosity * phi_x / phi)[:, :: fine_resolution // n]


def generate_burgers(
    n_samples: int,
    resolution: int = 8192,
    viscosity: float = 0.1 / (2 * np.pi),
    t_final: float = 1.0,
    seed: int = 0,
    batch_size: int = 128,
    progress: Callable[[int], None] | None = None,
    solve_resolution: int = DEFAULT_SOLVE_RESOLUTION,
    dt: float = DEFAULT_DT,
    workers: int = 2,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The Burgers data set of Cao (2021) Example 5.1 / Li et al. (2020): ``u0 -> u(., t_final)``.

    Initial data are GRF samples N(0, 625 (-Laplacian + 25 I)^-2) at ``resolution`` points of
    (0, 1); sample ``i`` draws its noise from ``SeedSequence(seed).spawn(n_samples)[i]`` and
    every sample uses the same ``dt``, so the data do not depend on ``batch_size``.  Batches
    are solved by ``workers`` threads.  Returns float32 arrays ``u0``, ``u1`` of shape
    ``(n_samples, resolution)`` and the JSON-serialisable settings ``{"pde", "solver"}``;
    ``progress`` is called, in order, with the number of samples each batch finished.
    Raises ``ConfigError`` if a sample's advective step exceeds ``MAX_ADVECTIVE_STEP``.
    """
    length = 1.0
    n_steps = max(1, int(np.ceil(t_final / dt - 1e-9)))
    grf = {key: PAPER_GRF[key] for key in ("alpha", "tau", "sigma", "zero_mean")}
    eigenvalues = grf_eigenvalues((resolution,), length=length, **grf)
    seeds = np.random.SeedSequence(seed).spawn(n_samples)

    def run(start: int, stop_event: threading.Event) -> tuple[np.ndarray, np.ndarray]:
        stop = min(start + batch_size, n_samples)
        noise = np.stack([np.random.default_rng(s).standard_normal(resolution) for s in seeds[start:stop]])
        initial = color_noise(noise, eigenvalues).astype(np.float32)  # solve exactly what is stored
        u_max = float(np.max(np.abs(initial)))
        if u_max * (t_final / n_steps) / length > MAX_ADVECTIVE_STEP:
            raise ConfigError(
                f"dt={dt} is too large for samples {start}..{stop - 1} (max|u0|={u_max:.3g}): "
                f"use dt <= {MAX_ADVECTIVE_STEP * length / u_max:.3g}"
            )
        final = solve_burgers(initial, viscosity, t_final, length, solve_resolution, dt, workers=1, stop=stop_event)
        return initial, final.astype(np.float32)

    u0 = np.empty((n_samples, resolution), dtype=np.float32)
    u1 = np.empty((n_samples, resolution), dtype=np.float32)
    starts = range(0, n_samples, batch_size)
    for start, (initial, final) in zip(starts, thread_imap(run, starts, workers)):
        u0[start : start + len(initial)] = initial
        u1[start : start + len(final)] = final
        if progress is not None:
            progress(len(initial))
    settings = {
        "pde": {
            "name": "burgers",
            "viscosity": viscosity,
            "t_final": t_final,
            "length": length,
            "initial_condition": dict(PAPER_GRF),
        },
        "solver": {
            "name": "pseudo-spectral ETDRK4",
            "solve_resolution": solve_resolution,
            "dt": t_final / n_steps,
            "dealias": "2/3",
        },
    }
    return u0, u1, settings


def resolve_burgers(pde: dict[str, Any], solver: dict[str, Any], inputs: np.ndarray) -> np.ndarray:
    """Targets ``u(., t_final)`` ``(batch, n, 1)`` float32 of stored inputs ``u0`` ``(batch, n, 1)``, solved again
    with a file's recorded ``pde`` and ``solver`` settings (:mod:`opformer.pde.resolve`)."""
    x = np.asarray(inputs, dtype=np.float32)[..., 0]
    u = solve_burgers(x.reshape(len(x), -1), float(recorded(pde, "viscosity", "pde")),
                      float(recorded(pde, "t_final", "pde")), float(pde.get("length", 1.0)),
                      int(recorded(solver, "solve_resolution", "solver")), float(recorded(solver, "dt", "solver")),
                      workers=1)
    return u.astype(np.float32)[..., None]
