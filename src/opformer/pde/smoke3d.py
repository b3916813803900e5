"""3D buoyancy-driven smoke in a closed box: FactFormer's smoke buoyancy data (Li et al. 2023, Table 3).

    u_t + (u . grad) u = -grad p + nu Laplacian u + b d e_z,    div u = 0,    d_t + u . grad d = 0,

on ``[0, 8]^3`` with closed walls, ``nu = 0.003``, buoyancy ``b = 0.5`` along z, time step 0.75: the authors'
``dataset/3d_smoke.py`` (a phiflow script after PDEArena's). The smoke ``d`` starts as ``|noise|`` (phiflow's
``Noise(scale=15, smoothness=4)``, :func:`opformer.pde.smoke.initial_smoke` on three axes), the velocity at
rest; 8 steps are skipped, then the next 20 are stored.

The grid and every step are the 2D solver's (:mod:`opformer.pde.smoke`), run on three axes: a MAC grid of
``n^3`` cells, semi-Lagrangian advection of the smoke and of the velocity (trilinear), explicit diffusion with
zero ghost values, the buoyancy at the z-faces, a projection by a cosine-transform pressure solve. As in 2D the
buoyancy is added after the diffusion (the authors' script adds it before, as PDEArena does), so a uniform smoke
stays still. Stored frames: ``d`` and the velocity averaged from the faces to the cell centres (the authors
store the lower face of each cell); docs/solvers.md.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from opformer.pde.parallel import thread_map
from opformer.pde.samples import check_positive, check_resolution, solve_samples
from opformer.pde.smoke import CELL_VELOCITY, CLOSED_BOX, NOISE_MODES, frame_steps, initial_smoke, solve_smoke

#: The authors' ``dataset/3d_smoke.py``: box side, viscosity, buoyancy (along z), time step, steps skipped before
#: the first stored frame, frames stored (one per step).
LENGTH, NU, BUOYANCY, DT = 8.0, 0.003, 0.5, 0.75
SKIP_STEPS, FRAMES = 8, 20
#: Their ``Noise(scale=15, smoothness=4)``: Fourier amplitudes ``(|m| 15 / 8)^(-8)``; the modes left out
#: (``|m_i| > NOISE_MODES``) weigh < 2.4e-8 of the lowest.
NOISE_SCALE, NOISE_SMOOTHNESS = 15.0, 4.0
CHANNELS = ["d", "u", "v", "w"]


def initial_smoke3d(rng: np.random.Generator, n: int) -> np.ndarray:
    """``|noise|`` ``(n, n, n)`` at the cell centres of ``[0, 8]^3``: the authors' initial smoke, from ``rng``."""
    return initial_smoke(rng, n, LENGTH, 3, NOISE_SCALE, NOISE_SMOOTHNESS)


def solve_smoke3d(smoke: np.ndarray, steps: np.ndarray | None = None, buoyancy: float = BUOYANCY,
                  stop: threading.Event | None = None) -> np.ndarray:
    """Frames ``(batch, len(steps), n, n, n, 4)`` (float64; d, u, v, w at the cell centres) after each step in
    ``steps`` (default: the stored 20 after 8 skipped) from the smoke ``(batch, n, n, n)`` at rest."""
    steps = frame_steps(1, SKIP_STEPS, FRAMES) if steps is None else steps
    return solve_smoke(smoke, buoyancy, steps, DT, NU, LENGTH, stop=stop)


def generate_smoke3d(samples: int, resolution: int = 64, seed: int = 0, *, first: int = 0, batch_size: int = 2,
                     workers: int = 2, progress: Callable[[int], None] | None = None
                     ) -> tuple[np.ndarray, dict[str, Any]]:
    """FactFormer's 3D smoke: ``(samples, 20, n, n, n, 4)`` float32 d, u, v, w at the cell centres.

    Sample ``i``'s initial smoke comes from ``SeedSequence(seed).spawn(first + samples)[first + i]`` (``first``
    skips to a later part of the same stream). ``batch_size`` samples per solver call, ``workers`` threads;
    results depend on neither. Returns the array and the settings ``{"pde", "solver"}``.
    """
    check_resolution("resolution", resolution)
    check_positive("batch_size", batch_size)
    steps = frame_steps(1, SKIP_STEPS, FRAMES)

    def solve(smoke: np.ndarray, stop: threading.Event) -> np.ndarray:
        return solve_smoke3d(smoke, steps, stop=stop)

    def solve_block(seeds: list[np.random.SeedSequence]) -> np.ndarray:
        smoke = np.stack([initial_smoke3d(np.random.default_rng(s), resolution) for s in seeds])
        return np.concatenate(thread_map(solve, [smoke[i : i + batch_size] for i in range(0, len(seeds), batch_size)],
                                         workers))

    out = solve_samples(samples, seed, first, batch_size * max(1, workers), (len(steps), *(resolution,) * 3, 4),
                        solve_block, progress)
    pde = {
        "name": "smoke_3d_buoyancy",
        "model": "FactFormer's 3D smoke buoyancy: incompressible Navier-Stokes with a passive smoke d pushing up by "
                 "b d along z (Boussinesq)",
        "nu": NU,
        "buoyancy": BUOYANCY,
        "length": LENGTH,
        "grid": "cell-centred: x_i = (i + 1/2) 8 / n, the same in y and z; axes (x, y, z), z up",
        "boundary": CLOSED_BOX,
        "initial_condition": {"type": "|phiflow Noise|", "scale": NOISE_SCALE, "smoothness": NOISE_SMOOTHNESS,
                              "modes": NOISE_MODES, "velocity": 0.0},
        "times": (steps * DT).tolist(),
        "channels": CHANNELS,
        "velocity": CELL_VELOCITY,
    }
    solver = {"name": "MAC grid: semi-Lagrangian advection (trilinear), explicit diffusion, buoyancy, projection by "
                      "a cosine-transform pressure solve",
              "dt": DT, "skipped_steps": SKIP_STEPS, "frame_every": 1}
    return out, {"pde": pde, "solver": solver}
