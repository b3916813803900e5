"""2D shallow-water equations, flat bottom: PDEBench's radial dam break (DPOT's SWE data set).

    h_t + (hu)_x + (hv)_y = 0,
    (hu)_t + (hu^2 + g h^2 / 2)_x + (huv)_y = 0,
    (hv)_t + (huv)_x + (hv^2 + g h^2 / 2)_y = 0.

Finite volume on a cell-centred grid: MUSCL reconstruction of the primitive variables ``(h, u, v)`` with the
MC limiter, the HLL flux with Einfeldt's wave speeds, SSP-RK2 (Heun) in time. Extrapolation (zero-gradient,
transmissive) boundaries: two ghost cells copy the edge cell. Each sample takes its own CFL-limited steps, so
a sample's solution does not depend on the others solved beside it. The reconstruction, SSP-RK2 and the march
to the frame times are ``opformer.pde.finite_volume``'s; docs/solvers.md.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from opformer.errors import ConfigError
from opformer.pde.finite_volume import march_frames, muscl_faces, ssp_rk2_step
from opformer.pde.parallel import thread_map
from opformer.pde.samples import check_positive, frame_times, solve_samples

#: PDEBench SWE (``2D_rdb_NA_NA.h5``): domain (-2.5, 2.5)^2, g = 1, depth 2 inside a circle of radius
#: r ~ U(0.3, 0.7) about the origin (cell centres with distance <= r), 1 outside, at rest; t in [0, 1].
LOWER, UPPER = -2.5, 2.5
GRAVITY = 1.0
DAM = {"h_inside": 2.0, "h_outside": 1.0, "radius_low": 0.3, "radius_high": 0.7, "centre": [0.0, 0.0]}
#: Time steps: ``dt (max(|u| + c) / dx + max(|v| + c) / dy) <= CFL`` with ``c = sqrt(g h)``, per sample; the
#: forward-Euler MUSCL step with a limiter of slope ratio <= 2 (MC) is TVD for a CFL number <= 1/2, and
#: SSP-RK2 keeps that bound.
CFL = 0.45


def hll_flux(left: np.ndarray, right: np.ndarray, g: float) -> np.ndarray:
    """HLL flux ``(3, ...)`` through faces of states ``(h, normal velocity, tangential velocity)`` ``(3, ...)``.

    Wave speeds by Einfeldt: ``S_L = min(u_L - c_L, u_roe - c_roe)``, ``S_R = max(u_R + c_R, u_roe + c_roe)``.
    Components: mass, normal momentum, tangential momentum.
    """
    (hl, ul, vl), (hr, ur, vr) = left, right
    cl, cr = np.sqrt(g * hl), np.sqrt(g * hr)
    sl, sr = np.sqrt(hl), np.sqrt(hr)
    u_roe = (sl * ul + sr * ur) / (sl + sr)
    c_roe = np.sqrt(0.5 * g * (hl + hr))
    slow = np.minimum(np.minimum(ul - cl, u_roe - c_roe), 0.0)
    fast = np.maximum(np.maximum(ur + cr, u_roe + c_roe), 0.0)
    ql = np.stack([hl, hl * ul, hl * vl])
    qr = np.stack([hr, hr * ur, hr * vr])
    fl = np.stack([ql[1], ql[1] * ul + 0.5 * g * hl * hl, ql[1] * vl])
    fr = np.stack([qr[1], qr[1] * ur + 0.5 * g * hr * hr, qr[1] * vr])
    return (fast * fl - slow * fr + slow * fast * (qr - ql)) / (fast - slow)


def _flux_difference(primitive: np.ndarray, g: float) -> np.ndarray:
    """``F(i + 1/2) - F(i - 1/2)`` along the last axis of ``primitive`` ``(h, normal, tangential velocity)``."""
    padded = np.pad(primitive, [(0, 0)] * (primitive.ndim - 1) + [(2, 2)], mode="edge")
    return np.diff(hll_flux(*muscl_faces(padded), g), axis=-1)


def tendency(state: np.ndarray, dx: float, dy: float, g: float = GRAVITY) -> np.ndarray:
    """``d state / dt`` of the semi-discrete scheme; ``state`` is ``(3, batch, nx, ny)``: ``h, hu, hv``."""
    h = state[0]
    u, v = state[1] / h, state[2] / h
    along_x = _flux_difference(np.stack([h, u, v]).swapaxes(-1, -2), g).swapaxes(-1, -2)  # of h, hu, hv
    along_y = _flux_difference(np.stack([h, v, u]), g)  # of h, hv, hu
    return -(along_x / dx + along_y[[0, 2, 1]] / dy)


def cfl_step(state: np.ndarray, dx: float, dy: float, g: float = GRAVITY, cfl: float = CFL) -> np.ndarray:
    """The largest stable step of each sample: ``cfl / (max(|u| + c) / dx + max(|v| + c) / dy)``."""
    h = state[0]
    c = np.sqrt(g * h)
    speed_x = (np.abs(state[1] / h) + c).max(axis=(-2, -1))
    speed_y = (np.abs(state[2] / h) + c).max(axis=(-2, -1))
    return cfl / (speed_x / dx + speed_y / dy)


def solve_shallow_water(state: np.ndarray, times: np.ndarray, dx: float, dy: float, g: float = GRAVITY,
                        cfl: float = CFL, stop: threading.Event | None = None) -> tuple[np.ndarray, int]:
    """Frames ``(len(times), 3, batch, nx, ny)`` (float64) of ``h, hu, hv`` from ``state`` at t = 0; the steps taken.

    ``state`` is ``(3, batch, nx, ny)`` on the cell-centred grid of spacings ``dx``, ``dy``. Each sample steps by
    ``cfl_step``, shortened so that the steps land exactly on the frame times (``finite_volume.march_frames``).
    ``stop`` (set: raise ``Stopped``) is polled every step. Raises ``ConfigError`` if a depth stops being positive
    and finite.
    """

    def check(state: np.ndarray, t: float) -> None:
        if not np.all(state[0] > 0.0):
            raise ConfigError(f"the depth is no longer positive and finite at t={t:g}")

    return march_frames(state, times, lambda state: cfl_step(state, dx, dy, g, cfl),
                        lambda state, dt: ssp_rk2_step(state, dt, lambda q: tendency(q, dx, dy, g)), check, stop)


def dam_break_state(radii: np.ndarray, n: int) -> np.ndarray:
    """Initial ``(3, batch, n, n)`` state: depth ``DAM`` inside each radius (about the origin), at rest."""
    x = LOWER + (np.arange(n) + 0.5) * (UPPER - LOWER) / n
    r = np.hypot(x[:, None] - DAM["centre"][0], x[None, :] - DAM["centre"][1])
    h = np.where(r[None] <= np.asarray(radii)[:, None, None], DAM["h_inside"], DAM["h_outside"])
    return np.stack([h, np.zeros_like(h), np.zeros_like(h)])


def generate_shallow_water(samples: int, resolution: int = 64, t_final: float = 1.0, frame_dt: float = 0.01,
                           seed: int = 0, *, first: int = 0, batch_size: int = 8, workers: int = 2,
                           progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Radial dam breaks (PDEBench SWE): ``(samples, time, n, n, 1)`` float32 depth ``h`` on the cell centres.

    Sample ``i``'s radius is ``U(0.3, 0.7)`` from ``SeedSequence(seed).spawn(first + samples)[first + i]``
    (``first`` skips to a later part of the same stream); frames every ``frame_dt`` up to ``t_final``. Chunks of
    ``batch_size`` samples are solved by ``workers`` threads; results do not depend on either. Returns the array
    and the settings ``{"pde", "solver"}``.
    """
    if int(resolution) != resolution or resolution < 4:
        raise ConfigError(f"resolution={resolution} is invalid: expected an integer >= 4")
    check_positive("batch_size", batch_size)
    times = frame_times(t_final, frame_dt)
    spacing = (UPPER - LOWER) / resolution

    def solve(radii: np.ndarray, stop: threading.Event) -> np.ndarray:
        frames, _ = solve_shallow_water(dam_break_state(radii, resolution), times, spacing, spacing, stop=stop)
        return frames[:, 0].swapaxes(0, 1)

    def solve_block(seeds: list[np.random.SeedSequence]) -> np.ndarray:
        radii = np.array([np.random.default_rng(s).uniform(DAM["radius_low"], DAM["radius_high"]) for s in seeds])
        chunks = [radii[i : i + batch_size] for i in range(0, len(radii), batch_size)]
        return np.concatenate(thread_map(solve, chunks, workers))[..., None]

    out = solve_samples(samples, seed, first, batch_size * max(1, workers), (len(times), resolution, resolution, 1),
                        solve_block, progress)
    pde = {"name": "shallow_water_2d_radial_dam_break", "gravity": GRAVITY, "length": UPPER - LOWER,
           "bounds": [LOWER, UPPER], "grid": "cell-centred: x_i = -2.5 + (i + 1/2) 5 / n, the same in y; axes (x, y)",
           "boundary": "extrapolation (zero-gradient, transmissive)",
           "initial_condition": {"type": "radial_dam_break", **DAM, "velocity": 0.0}, "times": times.tolist(),
           "channels": ["h"]}
    solver = {"name": "finite volume: HLL flux (Einfeldt speeds), MUSCL on (h, u, v) with the MC limiter, SSP-RK2",
              "solve_resolution": resolution, "cfl": CFL,
              "time_step": "per sample, CFL-limited, equal steps landing on the frame times"}
    return out, {"pde": pde, "solver": solver}
