"""2D incompressible Navier–Stokes in vorticity form on the periodic square ``[0, L)^2``.

    w_t + u . grad w = nu Laplacian w - drag w + f,    u = (psi_y, -psi_x),  -Laplacian psi = w,

Fourier pseudo-spectral on a *solve grid* of ``N x N`` points with the 2/3 rule (the state is the
modes ``|m_x|, |m_y| <= K = (N - 1) // 3`` of ``rfft2``, so quadratic products are alias free),
time-stepped with ETDRK4: viscosity and drag (diagonal, stiff) are integrated exactly, advection
and the steady forcing explicitly.  Batched over samples.  Data enter and leave as point values on a
*storage grid*.  Also the FNO-nu preset (Kolmogorov flow: ``opformer.pde.kolmogorov``); docs/solvers.md.
The pieces the other pseudo-spectral presets share live here too: spectra on grids, ``etdrk4_frames`` (the
chunked frame march, also of ``navier_stokes3d``), ``frame_times`` and ``solve_samples`` (seeded blocks of samples).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable

import numpy as np
import scipy.fft

from opformer.errors import ConfigError
from opformer.pde.parallel import check_stop, thread_map
from opformer.pde.burgers import etdrk4_coefficients
from opformer.pde.grf import color_noise, grf_eigenvalues

#: Stability guard: the solver raises if ``dt max(|u| + |v|) N / L`` exceeds this at any frame.
#: ETDRK4 advection is stable for ``dt |k.u| < ~2.8`` and ``|k| <= 2 pi K / L ~ (2 pi / 3) N / L``.
MAX_CFL = 1.0
#: FFTs (of one real N x N field) per ETDRK4 step: 4 stages x (4 inverse + 1 forward).
FFTS_PER_STEP = 20
#: FNO-nu benchmark (Li et al. 2020, used by DPOT): initial vorticity N(0, sigma^2 (-Laplacian + 49 I)^-2.5)
#: with sigma = 7^1.5, the amplitude of the data-generation code of Li et al. (whose paper writes the
#: covariance as 7^(3/2) (...)^-2.5); constant mode removed (a periodic vorticity has zero mean).
FNO_GRF = {"alpha": 2.5, "tau": 7.0, "sigma": 7.0**1.5, "zero_mean": True}
#: Default time step of the FNO-nu preset, ``FNO_DT_TIMES_N / solve_resolution`` (0.02 at 64^2): CFL number
#: ``dt max(|u| + |v|) N`` <= 0.51 measured for nu = 1e-3, time error ~1e-9 (benchmarks/results/navier_stokes_data.md).
FNO_DT_TIMES_N = 1.28
#: Default solve grid below nu = 1e-3 (the grid of Li et al.); at nu = 1e-3 the storage grid (64^2 resolved).
FNO_FINE_SOLVE_RESOLUTION = 256


def check_positive(name: str, value: float, allow_zero: bool = False) -> None:
    """Raise ``ConfigError`` unless ``value`` is > 0 (or >= 0 with ``allow_zero``)."""
    if not (np.isfinite(value) and (value >= 0 if allow_zero else value > 0)):
        raise ConfigError(f"{name}={value} is invalid: expected a number {'>=' if allow_zero else '>'} 0")


def check_resolution(name: str, n: int, minimum: int = 8) -> None:
    """Raise ``ConfigError`` unless ``n`` is an even integer >= ``minimum``."""
    if int(n) != n or n < minimum or n % 2:
        raise ConfigError(f"{name}={n} is invalid: expected an even integer >= {minimum}")


def wavenumbers(n: int, d: int, length: float) -> list[np.ndarray]:
    """Angular wave numbers of an ``rfftn`` half spectrum of a ``n^d`` grid, one broadcastable array per axis."""
    out = []
    for axis in range(d):
        m = np.arange(n // 2 + 1) if axis == d - 1 else np.fft.fftfreq(n, 1.0 / n)
        shape = [1] * d
        shape[axis] = m.size
        out.append((2.0 * np.pi / length) * m.reshape(shape))
    return out


def dealias_mask(n: int, d: int) -> np.ndarray:
    """2/3 rule: True on the modes with every ``|m_i| <= (n - 1) // 3``."""
    k = (n - 1) // 3
    mask = np.ones((1,) * d, dtype=bool)
    for m in wavenumbers(n, d, 2.0 * np.pi):
        mask = mask & (np.abs(m) <= k + 0.5)
    return mask


def resize_spectrum(c: np.ndarray, n_new: int, d: int, k_max: int) -> np.ndarray:
    """Copy the modes ``|m_i| <= k_max`` of ``rfftn`` half spectra (last ``d`` axes) onto a ``n_new^d`` grid."""
    out = np.zeros(c.shape[:-d] + (n_new,) * (d - 1) + (n_new // 2 + 1,), dtype=np.complex128)
    low, high = slice(0, k_max + 1), slice(-k_max, None) if k_max > 0 else slice(0, 0)
    for index in itertools.product((low, high), repeat=d - 1):
        out[(Ellipsis, *index, low)] = c[(Ellipsis, *index, low)]
    return out


def to_grid(c: np.ndarray, n_solve: int, n_out: int, d: int, workers: int = 1) -> np.ndarray:
    """Point values on a ``n_out^d`` grid of the de-aliased field with half spectrum ``c`` (``norm='forward'``)."""
    k = (n_solve - 1) // 3
    axes = tuple(range(-d, 0))
    if 2 * k < n_out:  # every mode fits below the storage grid's Nyquist mode
        padded = resize_spectrum(c, n_out, d, k)
        return scipy.fft.irfftn(padded, s=(n_out,) * d, axes=axes, norm="forward", workers=workers)
    if n_solve % n_out:
        raise ConfigError(f"solve_resolution={n_solve} is invalid: expected a multiple of the resolution {n_out}")
    step = slice(None, None, n_solve // n_out)
    return scipy.fft.irfftn(c, s=(n_solve,) * d, axes=axes, norm="forward", workers=workers)[(Ellipsis,) + (step,) * d]


def from_grid(w: np.ndarray, n_solve: int, d: int) -> np.ndarray:
    """De-aliased solve-grid half spectrum of point values ``w`` (batch, n^d); Nyquist modes are dropped."""
    n = w.shape[-1]
    c = scipy.fft.rfftn(w, axes=tuple(range(-d, 0)), norm="forward")
    return resize_spectrum(c, n_solve, d, min((n_solve - 1) // 3, (n - 1) // 2))


def frame_steps(times: np.ndarray, dt: float) -> list[tuple[int, float]]:
    """Per frame interval: the number of steps and the step (<= ``dt``, dividing the interval)."""
    intervals = np.diff(np.concatenate([[0.0], times]))
    if np.any(intervals < 0):
        raise ConfigError(f"times={times.tolist()} is invalid: expected non-decreasing times >= 0")
    steps = [max(1, int(np.ceil(h / dt - 1e-9))) if h > 0 else 0 for h in intervals]
    return [(s, h / s if s else 0.0) for s, h in zip(steps, intervals)]


def etdrk4_march(c: np.ndarray, n_steps: int, coefficients: tuple[np.ndarray, ...],
                 nonlinear: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], cfl_per_speed: float,
                 dt: float, t: float, stop: threading.Event | None = None) -> np.ndarray:
    """``n_steps`` ETDRK4 steps (Cox-Matthews, Kassam-Trefethen coefficients) of the spectral state ``c``.

    ``nonlinear(c)`` returns the explicit term and the grid velocity ``(batch, d, *grid)``; after the last step
    the CFL number ``cfl_per_speed * max(sum_d |u_d|)`` must stay below ``MAX_CFL`` (the error names the
    requested ``dt`` and the frame time ``t``). A set ``stop`` ends the march at the next step.
    """
    e, e2, q, f1, f2, f3 = coefficients
    for _ in range(n_steps):
        check_stop(stop)
        nc, velocity = nonlinear(c)
        a = e2 * c + q * nc
        na, _ = nonlinear(a)
        nb, _ = nonlinear(e2 * c + q * na)
        nd, _ = nonlinear(e2 * a + q * (2.0 * nb - nc))
        c = e * c + f1 * nc + 2.0 * f2 * (na + nb) + f3 * nd
    cfl = cfl_per_speed * float(np.abs(velocity).sum(axis=1).max())
    if not cfl <= MAX_CFL:
        raise ConfigError(f"dt={dt} is too large: CFL number {cfl:.3g} > {MAX_CFL} before t={t:g}")
    return c


def etdrk4_frames(initial: np.ndarray, times: np.ndarray, dt: float, linear: np.ndarray,
                  nonlinear: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                  spectrum: Callable[[np.ndarray], np.ndarray], grid: Callable[[np.ndarray], np.ndarray],
                  n_solve: int, length: float, batch_size: int, workers: int) -> np.ndarray:
    """Frames ``(batch, len(times), *initial.shape[1:])`` (float64) of the ETDRK4 march from point values ``initial``.

    ``spectrum`` maps a chunk of point values to its spectral state and ``grid`` a state to a frame; ``linear``
    is the diagonal linear operator and ``nonlinear`` as in :func:`etdrk4_march` (CFL per speed
    ``h n_solve / length``). Each frame interval is split into equal steps ``<= dt``. Chunks of ``batch_size``
    samples are solved by ``workers`` threads; results do not depend on either.
    """
    steps = frame_steps(times, dt)
    coefficients = {h: etdrk4_coefficients(linear, h) for _, h in steps if h > 0}

    def solve(chunk: np.ndarray, stop: threading.Event) -> np.ndarray:
        c = spectrum(chunk)
        frames = np.empty((len(chunk), len(times), *chunk.shape[1:]))
        for index, ((n_steps, h), t) in enumerate(zip(steps, times)):
            if n_steps:
                c = etdrk4_march(c, n_steps, coefficients[h], nonlinear, h * n_solve / length, dt, t, stop)
            frames[:, index] = grid(c)
        return frames

    chunks = [initial[i : i + batch_size] for i in range(0, len(initial), batch_size)]
    return np.concatenate(thread_map(solve, chunks, workers))


def frame_times(t_final: float, frame_dt: float) -> np.ndarray:
    """The stored frame times ``0, frame_dt, ...`` up to ``t_final`` (``t_final / frame_dt`` rounded)."""
    check_positive("t_final", t_final)
    check_positive("frame_dt", frame_dt)
    return np.arange(int(round(t_final / frame_dt)) + 1) * frame_dt


def solve_samples(samples: int, seed: int, first: int, block_size: int, shape: tuple[int, ...],
                  solve_block: Callable[[list[np.random.SeedSequence]], np.ndarray],
                  progress: Callable[[int], None] | None) -> np.ndarray:
    """``(samples, *shape)`` float32: ``solve_block(seeds)`` for blocks of ``block_size`` samples.

    Sample ``i`` gets ``SeedSequence(seed).spawn(first + samples)[first + i]`` (``first`` skips to a later part of
    the same stream, so a chunked run gives the same samples); ``progress`` is called after each block.
    """
    check_positive("samples", samples)
    check_positive("first", first, allow_zero=True)
    seeds = np.random.SeedSequence(seed).spawn(first + samples)[first:]
    out = np.empty((samples, *shape), dtype=np.float32)
    for start in range(0, samples, block_size):
        block = seeds[start : start + block_size]
        out[start : start + len(block)] = solve_block(block)
        if progress is not None:
            progress(len(block))
    return out


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
    Raises ``ConfigError`` for bad arguments or if the CFL number exceeds ``MAX_CFL`` at a frame.
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
        "solver": solver_settings(solve_resolution, dt),
    }
    return out, settings


def solver_settings(n_solve: int, dt: float, name: str = "pseudo-spectral vorticity, ETDRK4",
                    ffts_per_step: int = FFTS_PER_STEP) -> dict[str, Any]:
    """Solver metadata of the pseudo-spectral presets (defaults: the 2D vorticity solver's)."""
    return {
        "name": name,
        "solve_resolution": n_solve,
        "dt_max": dt,
        "dealias": "2/3",
        "ffts_per_step": ffts_per_step,
    }
