"""Fourier pseudo-spectral pieces the periodic solvers share (1D Burgers, 2D vorticity, Kolmogorov flow, 3D
turbulence): wave numbers and the 2/3 rule, spectra moved between a solve grid and a storage grid, ETDRK4
(Cox & Matthews 2002; phi functions by the contour integrals of Kassam & Trefethen 2005) marched frame by
frame over chunks of samples on threads, and the solver settings a file records."""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable

import numpy as np
import scipy.fft

from opformer.errors import ConfigError
from opformer.pde.parallel import check_stop, thread_map
from opformer.pde.samples import frame_steps

#: Stability guard: the solver raises if ``dt max(|u| + |v|) N / L`` exceeds this at any frame.
#: ETDRK4 advection is stable for ``dt |k.u| < ~2.8`` and ``|k| <= 2 pi K / L ~ (2 pi / 3) N / L``.
MAX_CFL = 1.0
#: Points on the contour for the phi-function evaluation.
CONTOUR_POINTS = 32


def etdrk4_coefficients(linear: np.ndarray, dt: float) -> tuple[np.ndarray, ...]:
    """ETDRK4 coefficients ``(E, E2, Q, f1, f2, f3)`` for a diagonal real linear operator.

    The phi functions are means over a circle of radius 1 around each ``dt * linear``
    (Kassam & Trefethen), which avoids the cancellation of the closed forms near zero.
    """
    hl = dt * linear
    roots = np.exp(1j * np.pi * (np.arange(1, CONTOUR_POINTS + 1) - 0.5) / CONTOUR_POINTS)
    r = hl[..., None] + roots
    er = np.exp(r)
    q = dt * np.real(np.mean((np.exp(r / 2) - 1) / r, axis=-1))
    f1 = dt * np.real(np.mean((-4 - r + er * (4 - 3 * r + r**2)) / r**3, axis=-1))
    f2 = dt * np.real(np.mean((2 + r + er * (r - 2)) / r**3, axis=-1))
    f3 = dt * np.real(np.mean((-4 - 3 * r - r**2 + er * (4 - r)) / r**3, axis=-1))
    return np.exp(hl), np.exp(hl / 2), q, f1, f2, f3


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


def solver_settings(n_solve: int, dt: float, name: str, ffts_per_step: int) -> dict[str, Any]:
    """Solver metadata of a pseudo-spectral preset: ``name``, its solve grid, largest step and FFTs per step."""
    return {
        "name": name,
        "solve_resolution": n_solve,
        "dt_max": dt,
        "dealias": "2/3",
        "ffts_per_step": ffts_per_step,
    }
