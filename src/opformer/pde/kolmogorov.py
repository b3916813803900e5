"""Kolmogorov flow (Kochkov et al. 2021; FactFormer's 2D data): forced 2D Navier–Stokes on ``[0, 2 pi)^2``.

Body force ``F sin(k_f y) e_x`` (vorticity forcing ``-F k_f cos(k_f y)``), linear drag ``alpha``,
``nu = 1 / Re``; solved by ``opformer.pde.navier_stokes.solve_navier_stokes_2d``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from opformer.errors import ConfigError
from opformer.pde.grf import color_noise, grf_eigenvalues
from opformer.pde.navier_stokes import solve_navier_stokes_2d, vorticity_solver_settings
from opformer.pde.samples import check_positive, check_resolution, frame_times, solve_samples

LENGTH = 2.0 * np.pi
#: Random initial vorticity before the spin-up: N(0, sigma^2 (-Laplacian + 16 I)^-2.5), mean removed
#: (spectrum peaked near the forcing scale |k| = 4; pointwise std ~2.2, rms velocity ~1.0).
KOLMOGOROV_GRF = {"alpha": 2.5, "tau": 4.0, "sigma": 12.0, "zero_mean": True}
#: Default solve grid and time step (CFL number <= ~0.5 for |u| + |v| <= 10).
KOLMOGOROV_SOLVE_RESOLUTION = 256
KOLMOGOROV_DT = 1e-3
#: The forcing as the generator records it in a file's settings (amplitude 1, wave number 4).
KOLMOGOROV_FORCING = "sin(4 y) e_x (vorticity -4 cos(4 y))"


def kolmogorov_forcing(n: int, amplitude: float = 1.0, wavenumber: int = 4) -> np.ndarray:
    """Vorticity forcing ``curl(F sin(k y) e_x) = -F k cos(k y)`` on the ``n x n`` grid of ``[0, 2 pi)^2``."""
    y = np.arange(n) * LENGTH / n
    return np.broadcast_to(-amplitude * wavenumber * np.cos(wavenumber * y)[None, :], (n, n)).copy()


def laminar_vorticity(n: int, nu: float, drag: float, amplitude: float = 1.0, wavenumber: int = 4) -> np.ndarray:
    """Exact steady laminar state ``u = F sin(k y) / (nu k^2 + drag)``: vorticity ``w = -u_y``."""
    return kolmogorov_forcing(n, amplitude, wavenumber) / (nu * wavenumber**2 + drag)


def generate_kolmogorov(
    samples: int,
    resolution: int = 64,
    reynolds: float = 1000.0,
    drag: float = 0.1,
    t_final: float = 10.0,
    frame_dt: float = 0.0625,
    spinup: float = 30.0,
    seed: int = 0,
    *,
    first: int = 0,
    solve_resolution: int = KOLMOGOROV_SOLVE_RESOLUTION,
    dt: float | None = None,
    batch_size: int = 8,
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Kolmogorov-flow trajectories ``(samples, time, n, n, 1)`` float32 vorticity, frames every ``frame_dt``.

    Each sample starts from ``KOLMOGOROV_GRF`` (drawn on the solve grid from
    ``SeedSequence(seed).spawn(first + samples)[first + i]``: ``first`` skips to a later part of the same
    stream), runs ``spinup`` time units which are discarded, then ``t_final`` more; frame times are reported
    from the end of the spin-up.  ``dt`` defaults to ``KOLMOGOROV_DT`` scaled by
    ``KOLMOGOROV_SOLVE_RESOLUTION / solve_resolution`` (the same CFL number).
    Returns the array and the settings ``{"pde", "solver"}``.
    """
    check_resolution("resolution", resolution)
    check_resolution("solve_resolution", solve_resolution)
    if dt is None:
        dt = KOLMOGOROV_DT * KOLMOGOROV_SOLVE_RESOLUTION / solve_resolution
    check_positive("reynolds", reynolds)
    check_positive("spinup", spinup, allow_zero=True)
    times = frame_times(t_final, frame_dt)
    if solve_resolution % resolution:
        raise ConfigError(
            f"solve_resolution={solve_resolution} is invalid: expected a multiple of resolution={resolution}"
        )
    nu = 1.0 / reynolds
    eigenvalues = grf_eigenvalues((solve_resolution,) * 2, length=LENGTH, **KOLMOGOROV_GRF)
    forcing = kolmogorov_forcing(solve_resolution)
    common = dict(nu=nu, dt=dt, forcing=forcing, drag=drag, length=LENGTH, batch_size=batch_size, workers=workers)
    stride = solve_resolution // resolution

    def solve_block(seeds: list[np.random.SeedSequence]) -> np.ndarray:
        noise = np.stack([np.random.default_rng(s).standard_normal((solve_resolution,) * 2) for s in seeds])
        w = color_noise(noise, eigenvalues)
        if spinup > 0:
            w = solve_navier_stokes_2d(w, times=[spinup], **common)[0][:, -1]
        frames, _ = solve_navier_stokes_2d(w, times=times, **common)
        return frames[..., ::stride, ::stride, None]

    out = solve_samples(samples, seed, first, batch_size * max(1, workers), (len(times), resolution, resolution, 1),
                        solve_block, progress)
    settings = {
        "pde": {
            "name": "kolmogorov_flow",
            "reynolds": reynolds,
            "nu": nu,
            "length": LENGTH,
            "forcing": KOLMOGOROV_FORCING,
            "drag": drag,
            "initial_condition": {"type": "grf", **KOLMOGOROV_GRF, "spinup": spinup},
            "times": times.tolist(),
            "channels": ["vorticity"],
        },
        "solver": vorticity_solver_settings(solve_resolution, dt),
    }
    return out, settings
