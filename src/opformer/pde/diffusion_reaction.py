"""2D diffusion-reaction (FitzHugh–Nagumo, PDEBench's DR data set and DPOT's) on ``(-1, 1)^2``, no-flux walls.

    u_t = Du Laplacian u + u - u^3 - k - v,    v_t = Dv Laplacian v + u - v,    grad u . n = grad v . n = 0,

on the cell-centred grid ``x_i = -1 + (i + 1/2) h``, ``h = 2 / n`` (PDEBench's grid). The Laplacian is the
5-point finite-volume one with no flux through the walls (PDEBench's spatial discretisation); the DCT-II
diagonalises it, with eigenvalues ``-(2 / h)^2 (sin^2(pi p / 2n) + sin^2(pi q / 2n))``. Time stepping is Strang
splitting: half a step of diffusion solved exactly in that cosine basis, a full reaction step (classical RK4
per cell), another half step of diffusion; second order in ``dt``. Batched over samples; docs/solvers.md.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np
import scipy.fft

from opformer.errors import ConfigError
from opformer.pde.parallel import check_stop, thread_map
from opformer.pde.samples import check_positive, check_resolution, frame_steps, frame_times, solve_samples

#: PDEBench's 2D diffusion-reaction parameters (also DPOT's): diffusivities of u and v, the reaction constant.
DU, DV, K = 1e-3, 5e-3, 5e-3
#: The side of the square (-1, 1)^2 and its lower-left corner.
LENGTH, ORIGIN = 2.0, -1.0
#: Default time step: 2.5e-3 keeps RK4 stable for |u| <= ~19 (N(0, 1) initial values stay below ~5); the
#: time error it leaves at 64^2 is measured in benchmarks/results/solvers/diffusion_reaction.md.
DR_DT = 2.5e-3
_AXES = (-2, -1)


def neumann_eigenvalues(n: int, length: float = LENGTH, ndim: int = 2) -> np.ndarray:
    """Eigenvalues ``(n,) * ndim`` of the ``(2 ndim + 1)``-point cell-centred no-flux Laplacian, in the order of
    ``dctn(type=2)``: the sum of one axis's eigenvalues over the axes."""
    h = length / n
    lam = -((2.0 / h) * np.sin(np.pi * np.arange(n) / (2 * n))) ** 2
    out = lam
    for _ in range(ndim - 1):
        out = out[..., None] + lam
    return out


#: Classical RK4 as (stage offset, weight) per stage: stage i + 1 starts at ``y + offset_i h k_i``.
_RK4 = ((0.5, 1.0 / 6.0), (0.5, 1.0 / 3.0), (1.0, 1.0 / 3.0), (0.0, 1.0 / 6.0))


def rk4_reaction(state: np.ndarray, h: float, k: float) -> np.ndarray:
    """One classical RK4 step of length ``h`` of the reaction ODE ``(u - u^3 - k - v, u - v)`` in every cell.

    ``state`` is ``(batch, 2, n, n)`` (u, v); the stages are computed in place (this is most of the solver's time).
    """
    u, v = state[:, 0], state[:, 1]
    out = state.copy()
    su, sv = u, v
    ru, rv = np.empty_like(u), np.empty_like(u)
    for offset, weight in _RK4:
        np.subtract(su, sv, out=rv)  # R_v = u - v
        np.multiply(su, su, out=ru)
        ru *= su
        np.subtract(rv, ru, out=ru)
        ru -= k  # R_u = u - v - u^3 - k
        out[:, 0] += (weight * h) * ru
        out[:, 1] += (weight * h) * rv
        if offset:
            su, sv = u + (offset * h) * ru, v + (offset * h) * rv
    return out


def solve_diffusion_reaction(
    state: np.ndarray,
    times: np.ndarray,
    dt: float,
    *,
    du: float = DU,
    dv: float = DV,
    k: float = K,
    length: float = LENGTH,
    reaction: bool = True,
    stop: threading.Event | None = None,
) -> np.ndarray:
    """Frames ``(batch, len(times), 2, n, n)`` (float64) of the states ``(batch, 2, n, n)`` (u, v) at t = 0.

    Each frame interval is split into equal steps ``<= dt``; a step is Strang splitting (exact diffusion for
    ``h / 2``, RK4 reaction for ``h``, exact diffusion for ``h / 2``). ``reaction=False`` leaves only the
    diffusion (a check of the exact decay). A set ``stop`` ends the march at the next step. Raises
    ``ConfigError`` if the solution stops being finite (``dt`` too large for the reaction step).
    """
    state = np.asarray(state, dtype=np.float64)
    times = np.atleast_1d(np.asarray(times, dtype=np.float64))
    if state.ndim != 4 or state.shape[1] != 2 or state.shape[2] != state.shape[3]:
        raise ConfigError(f"state has shape {state.shape}: expected (batch, 2, n, n)")
    check_positive("dt", dt)
    rates = np.stack([du, dv])[:, None, None] * neumann_eigenvalues(state.shape[-1], length)
    steps = frame_steps(times, dt)
    halves = {h: np.exp(0.5 * h * rates) for _, h in steps if h > 0}
    frames = np.empty((len(state), len(times), *state.shape[1:]))
    for index, ((n_steps, h), t) in enumerate(zip(steps, times)):
        if n_steps:
            c = scipy.fft.dctn(state, type=2, axes=_AXES, norm="ortho")
            with np.errstate(over="ignore", invalid="ignore"):  # a diverging reaction step is reported below
                for _ in range(n_steps):
                    check_stop(stop)
                    c *= halves[h]
                    if reaction:
                        state = rk4_reaction(scipy.fft.idctn(c, type=2, axes=_AXES, norm="ortho"), h, k)
                        c = scipy.fft.dctn(state, type=2, axes=_AXES, norm="ortho")
                    c *= halves[h]
            state = scipy.fft.idctn(c, type=2, axes=_AXES, norm="ortho")
            if not np.isfinite(state).all():
                raise ConfigError(f"dt={dt} is too large: the reaction step diverged before t={t:g}")
        frames[:, index] = state
    return frames


def generate_diffusion_reaction(
    samples: int,
    resolution: int = 64,
    t_final: float = 5.0,
    frame_dt: float = 0.05,
    dt: float = DR_DT,
    seed: int = 0,
    *,
    first: int = 0,
    batch_size: int = 8,
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """FitzHugh–Nagumo trajectories ``(samples, time, n, n, 2)`` float32, channels u, v, axes (x, y), cell centres.

    PDEBench's setup (``DU``, ``DV``, ``K`` on (-1, 1)^2, frames every ``frame_dt`` up to ``t_final``: 101 frames
    over [0, 5]) with ``u``, ``v`` ~ N(0, 1) independently in every cell, drawn (u, then v) from
    ``SeedSequence(seed).spawn(first + samples)[first + i]`` for sample ``i`` (``first`` skips to a later part
    of the same stream). ``batch_size`` samples per solver call, ``workers`` threads; results depend on neither.
    Returns the array and the settings ``{"pde", "solver"}``.
    """
    check_resolution("resolution", resolution)
    check_positive("dt", dt)
    times = frame_times(t_final, frame_dt)

    def solve_chunk(chunk: np.ndarray, stop: threading.Event) -> np.ndarray:
        return solve_diffusion_reaction(chunk, times, dt, stop=stop)

    def solve_block(seeds: list[np.random.SeedSequence]) -> np.ndarray:
        initial = np.stack([np.random.default_rng(s).standard_normal((2, resolution, resolution)) for s in seeds])
        chunks = [initial[i : i + batch_size] for i in range(0, len(initial), batch_size)]
        return np.moveaxis(np.concatenate(thread_map(solve_chunk, chunks, workers)), 2, -1)

    out = solve_samples(samples, seed, first, batch_size * max(1, workers), (len(times), resolution, resolution, 2),
                        solve_block, progress)
    settings = {
        "pde": {
            "name": "diffusion_reaction_2d",
            "model": "FitzHugh-Nagumo (PDEBench 2D diffusion-reaction)",
            "du": DU,
            "dv": DV,
            "k": K,
            "reaction": "R_u = u - u^3 - k - v, R_v = u - v",
            "boundary": "no-flux (Neumann) on every wall",
            "length": LENGTH,
            "origin": [ORIGIN, ORIGIN],
            "grid": "cell-centred: x_i = -1 + (i + 1/2) h, h = 2 / n, on both axes (x, y)",
            "initial_condition": {"type": "white noise", "u": "N(0, 1) per cell", "v": "N(0, 1) per cell"},
            "times": times.tolist(),
            "channels": ["u", "v"],
        },
        "solver": {
            "name": "Strang splitting: exact diffusion of the 5-point no-flux Laplacian (DCT-II), RK4 reaction",
            "solve_resolution": resolution,
            "dt_max": dt,
            "order": 2,
        },
    }
    return out, settings
