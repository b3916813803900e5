"""2D buoyancy-driven smoke in a closed box: PDEArena's NavierStokes2D data (DPOT's "NS" and "NS-cond" sets).

    u_t + (u . grad) u = -grad p + nu Laplacian u + b s e_y,    div u = 0,    s_t + u . grad s = 0,

on ``[0, 32]^2`` with closed walls, ``nu = 0.01``, buoyancy ``b = 0.5`` (or one ``b ~ U(0.2, 0.5)`` per
trajectory), time step 1.5. A marker-and-cell (staggered) grid of ``n x n`` cells: the smoke ``s`` at the cell
centres, ``u`` on the ``n + 1`` x-faces of each row, ``v`` on the ``n + 1`` y-faces of each column. One step, as
PDEArena's phiflow script (semi-Lagrangian advection, explicit diffusion, projection):

1. ``s`` <- ``s`` at the departure points ``x - dt u(x)`` of the cell centres (bilinear, zero-gradient outside);
2. ``u, v`` <- themselves at the departure points of their own faces (bilinear, zero outside the walls: phiflow's
   ``extrapolation.ZERO``), then one explicit diffusion step of the 5-point Laplacian with zero ghost values;
3. ``v`` += ``dt b s`` at the y-faces (the mean of the two cells beside the face);
4. projection: the wall faces set to 0, the pressure of ``L p = div u`` (no-flux walls) solved exactly by
   cosine transforms (DCT-II, as ``diffusion_reaction``), ``u -= grad p`` on the interior faces.

PDEArena adds the force before the diffusion step; its zero ghost values then slow a uniform (hydrostatic) force
next to the side walls before the projection can cancel it, and a uniform smoke starts a circulation. We add it
after, so a hydrostatic force is a pure gradient and a uniform smoke stays still (docs/solvers.md, measured).
Stored frames: the smoke and the velocity averaged from the faces to the cell centres; docs/solvers.md.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np
import scipy.fft

from opformer.errors import ConfigError
from opformer.pde.diffusion_reaction import neumann_eigenvalues
from opformer.pde.navier_stokes import check_positive, check_resolution, solve_samples
from opformer.pde.parallel import check_stop, thread_map

#: PDEArena's NavierStokes2D (``pdedatagen/configs/navierstokes2dsmoke.yaml``): box side, viscosity, buoyancy,
#: time step ((102 - 18) / 56), steps before the first stored frame, steps after.
LENGTH, NU, BUOYANCY, DT = 32.0, 0.01, 0.5, 1.5
SKIP_STEPS, STEPS = 8, 56
#: Frames: every 4th of the 56 steps for "NS" (14 frames, 6 time units apart), every step for "NS-cond" (56).
SMOKE_FRAME_EVERY, CONDITIONED_FRAME_EVERY = 4, 1
#: NS-cond's buoyancy range (PDEArena draws one per 32 trajectories; we draw one per trajectory).
BUOYANCY_RANGE = (0.2, 0.5)
#: phiflow's ``Noise(scale=11, smoothness=6)`` initial smoke (its absolute value): Fourier amplitudes
#: ``(|m| scale / L)^(-2 smoothness)``, the mean mode removed, normalised to mean 0 and standard deviation 1 on
#: the grid. Modes beyond ``|m_x|, |m_y| <= NOISE_MODES`` weigh < 1.5e-11 of the lowest and are left out, so a
#: sample is the same smooth field on every grid.
NOISE_SCALE, NOISE_SMOOTHNESS, NOISE_MODES = 11.0, 6.0, 8
_AXES = (-2, -1)


def initial_smoke(rng: np.random.Generator, n: int, length: float = LENGTH) -> np.ndarray:
    """``|noise|`` ``(n, n)`` at the cell centres: phiflow's smooth noise (see ``NOISE_*``) drawn from ``rng``."""
    m = np.arange(-NOISE_MODES, NOISE_MODES + 1)
    k2 = (m[:, None] ** 2 + m[None, :] ** 2) * (NOISE_SCALE / length) ** 2
    weight = np.divide(1.0, k2, out=np.zeros_like(k2), where=k2 > 0.0) ** NOISE_SMOOTHNESS
    coefficients = (rng.standard_normal(weight.shape) + 1j * rng.standard_normal(weight.shape)) * weight
    x = (np.arange(n) + 0.5) * length / n
    wave = np.exp(2j * np.pi * np.outer(x, m) / length)
    field = (wave @ coefficients @ wave.T).real
    field = (field - field.mean()) / field.std()
    return np.abs(field)


def _sample(values: np.ndarray, fx: np.ndarray, fy: np.ndarray, zero_outside: bool) -> np.ndarray:
    """Bilinear values of ``values`` ``(batch, nx, ny)`` at fractional indices ``fx``, ``fy`` ``(batch, *points)``.

    Outside the lattice: 0 (``zero_outside``; the value falls linearly to 0 one spacing beyond the last point,
    phiflow's zero extrapolation) or the nearest edge value (zero gradient).
    """
    if zero_outside:
        values = np.pad(values, ((0, 0), (1, 1), (1, 1)))
        fx, fy = fx + 1.0, fy + 1.0
    batch, nx, ny = values.shape
    shape = (batch,) + np.broadcast_shapes(np.shape(fx), np.shape(fy))[1:]
    fx = np.clip(np.broadcast_to(fx, shape), 0.0, nx - 1.0)
    fy = np.clip(np.broadcast_to(fy, shape), 0.0, ny - 1.0)
    i = np.minimum(fx.astype(np.intp), nx - 2)
    j = np.minimum(fy.astype(np.intp), ny - 2)
    tx, ty = fx - i, fy - j
    flat, index = values.reshape(batch, -1), (i * ny + j).reshape(batch, -1)

    def at(offset: int) -> np.ndarray:
        return np.take_along_axis(flat, index + offset, axis=1).reshape(i.shape)

    return (1.0 - tx) * ((1.0 - ty) * at(0) + ty * at(1)) + tx * ((1.0 - ty) * at(ny) + ty * at(ny + 1))


def _points(nx: int, ny: int, offset_x: float, offset_y: float) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(1, nx, ny)``, in grid spacings, of a lattice of points starting at ``(offset_x, offset_y)``."""
    x, y = np.meshgrid(np.arange(nx) + offset_x, np.arange(ny) + offset_y, indexing="ij")
    return x[None], y[None]


def advect_smoke(smoke: np.ndarray, u: np.ndarray, v: np.ndarray, courant: float) -> np.ndarray:
    """Semi-Lagrangian step of the cell-centred ``smoke`` ``(batch, n, n)`` by the face velocities ``u``, ``v``.

    ``courant`` is ``dt / h``. The departure point of each centre is ``x - dt u(x)`` (``u(x)``: the mean of the two
    faces, the bilinear value); the smoke there is bilinear, the edge value outside (zero gradient).
    """
    n = smoke.shape[-1]
    x, y = _points(n, n, 0.0, 0.0)
    dx = 0.5 * courant * (u[:, :-1] + u[:, 1:])
    dy = 0.5 * courant * (v[:, :, :-1] + v[:, :, 1:])
    return _sample(smoke, x - dx, y - dy, zero_outside=False)


def advect_velocity(u: np.ndarray, v: np.ndarray, courant: float) -> tuple[np.ndarray, np.ndarray]:
    """Semi-Lagrangian self-advection of the face velocities ``u`` ``(batch, n + 1, n)``, ``v`` ``(batch, n, n + 1)``.

    Each interior face takes its own component at its departure point; the other component at a face and the
    values at the departure points are bilinear on that component's lattice, zero outside the walls. The wall
    faces stay 0.
    """
    n = u.shape[-1]
    xu, yu = _points(n + 1, n, 0.0, 0.5)  # x-faces, in cells of the lattice of u: (i, j + 1/2)
    xv, yv = _points(n, n + 1, 0.5, 0.0)
    v_at_u = _sample(v, xu - 0.5, yu, zero_outside=True)
    u_at_v = _sample(u, xv, yv - 0.5, zero_outside=True)
    new_u = _sample(u, xu - courant * u, yu - 0.5 - courant * v_at_u, zero_outside=True)
    new_v = _sample(v, xv - 0.5 - courant * u_at_v, yv - courant * v, zero_outside=True)
    new_u[:, [0, -1]] = 0.0  # the wall faces are no unknowns (phiflow stores only the interior faces)
    new_v[:, :, [0, -1]] = 0.0
    return new_u, new_v


def diffuse(w: np.ndarray, rate: float) -> np.ndarray:
    """Explicit diffusion steps of a velocity component: ``w + rate L w`` (5-point ``L`` in spacings, zero ghost
    values), in ``ceil(4 rate)`` equal sub-steps (one where ``rate <= 1/4``, as PDEArena's grids) for stability."""
    substeps = max(1, int(np.ceil(4.0 * rate - 1e-12)))
    for _ in range(substeps):
        padded = np.pad(w, ((0, 0), (1, 1), (1, 1)))
        laplacian = (padded[:, 2:, 1:-1] + padded[:, :-2, 1:-1] + padded[:, 1:-1, 2:] + padded[:, 1:-1, :-2]
                     - 4.0 * w)
        w = w + (rate / substeps) * laplacian
    return w


def solve_pressure(divergence: np.ndarray, length: float = LENGTH) -> np.ndarray:
    """The pressure ``p`` ``(batch, n, n)`` of ``L p = divergence`` with no flux through the walls, mean 0.

    ``L`` is the 5-point cell-centred Laplacian of spacing ``length / n``; the DCT-II diagonalises it
    (``neumann_eigenvalues``). The mean of ``divergence`` (its null space; 0 for closed walls) is dropped.
    """
    eigenvalues = neumann_eigenvalues(divergence.shape[-1], length)
    eigenvalues[0, 0] = 1.0
    c = scipy.fft.dctn(divergence, type=2, axes=_AXES, norm="ortho")
    c /= eigenvalues
    c[..., 0, 0] = 0.0
    return scipy.fft.idctn(c, type=2, axes=_AXES, norm="ortho")


def divergence(u: np.ndarray, v: np.ndarray, h: float) -> np.ndarray:
    """The MAC divergence ``(batch, n, n)`` of the face velocities: the net outflow of each cell over its area."""
    return (np.diff(u, axis=1) + np.diff(v, axis=2)) / h


def project(u: np.ndarray, v: np.ndarray, length: float = LENGTH) -> tuple[np.ndarray, np.ndarray]:
    """The divergence-free part of ``u``, ``v``: wall faces set to 0, then ``u -= grad p`` on the interior faces."""
    h = length / u.shape[-1]
    u, v = u.copy(), v.copy()
    u[:, [0, -1]] = 0.0
    v[:, :, [0, -1]] = 0.0
    p = solve_pressure(divergence(u, v, h), length)
    u[:, 1:-1] -= np.diff(p, axis=1) / h
    v[:, :, 1:-1] -= np.diff(p, axis=2) / h
    return u, v


def smoke_step(smoke: np.ndarray, u: np.ndarray, v: np.ndarray, buoyancy: np.ndarray, dt: float = DT,
               nu: float = NU, length: float = LENGTH, force_first: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step (module docstring) of the smoke ``(batch, n, n)`` and face velocities; ``buoyancy`` ``(batch,)``.

    ``force_first`` adds the buoyancy before the diffusion step, as PDEArena does (a uniform smoke then moves).
    """
    n = smoke.shape[-1]
    h = length / n
    smoke = advect_smoke(smoke, u, v, dt / h)
    u, v = advect_velocity(u, v, dt / h)
    force = dt * buoyancy[:, None, None] * 0.5 * (smoke[:, :, :-1] + smoke[:, :, 1:])
    if force_first:
        v[:, :, 1:-1] += force
    u, v = diffuse(u, nu * dt / h**2), diffuse(v, nu * dt / h**2)
    if not force_first:
        v[:, :, 1:-1] += force
    u, v = project(u, v, length)
    return smoke, u, v


def centred(smoke: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``(batch, n, n, 3)``: the smoke and the velocity averaged from the two faces of each cell to its centre."""
    return np.stack([smoke, 0.5 * (u[:, :-1] + u[:, 1:]), 0.5 * (v[:, :, :-1] + v[:, :, 1:])], axis=-1)


def frame_steps(every: int) -> np.ndarray:
    """The steps after which frames are stored: every ``every``-th of the ``STEPS`` after the ``SKIP_STEPS``."""
    return np.arange(SKIP_STEPS + 1, SKIP_STEPS + STEPS + 1, every)


def solve_smoke(smoke: np.ndarray, buoyancy: np.ndarray, steps: np.ndarray, dt: float = DT, nu: float = NU,
                length: float = LENGTH, force_first: bool = False,
                stop: threading.Event | None = None) -> np.ndarray:
    """Frames ``(batch, len(steps), n, n, 3)`` (float64; smoke, vx, vy at the cell centres) after each step in
    ``steps`` (increasing step numbers), from the smoke ``(batch, n, n)`` at rest; ``buoyancy`` ``(batch,)``.

    ``stop`` (set: raise ``Stopped``) is polled every step. Raises ``ConfigError`` for steps that are not
    increasing numbers >= 1, or if the solution stops being finite.
    """
    smoke = np.array(smoke, dtype=np.float64)
    steps = np.asarray(steps)
    if steps.ndim != 1 or not len(steps) or steps[0] < 1 or np.any(np.diff(steps) <= 0):
        raise ConfigError(f"steps={steps.tolist()} is invalid: expected increasing step numbers >= 1")
    batch, n = smoke.shape[0], smoke.shape[-1]
    buoyancy = np.broadcast_to(np.asarray(buoyancy, dtype=np.float64), (batch,))
    u, v = np.zeros((batch, n + 1, n)), np.zeros((batch, n, n + 1))
    frames = np.empty((batch, len(steps), n, n, 3))
    stored = 0
    for step in range(1, int(steps[-1]) + 1):
        check_stop(stop)
        smoke, u, v = smoke_step(smoke, u, v, buoyancy, dt, nu, length, force_first)
        if step == steps[stored]:
            frames[:, stored] = centred(smoke, u, v)
            stored += 1
    if not np.isfinite(frames).all():
        raise ConfigError("the smoke solution is no longer finite")
    return frames


def cell_means(fields: np.ndarray, factor: int) -> np.ndarray:
    """``fields`` ``(..., n, n, c)`` averaged over blocks of ``factor x factor`` cells: the coarse cells' means."""
    if factor == 1:
        return fields
    *lead, n, _, c = fields.shape
    return fields.reshape(*lead, n // factor, factor, n // factor, factor, c).mean(axis=(-4, -2))


def _generate(samples: int, resolution: int, solve_resolution: int | None, seed: int, first: int, batch_size: int,
              workers: int, progress: Callable[[int], None] | None, conditioned: bool
              ) -> tuple[np.ndarray, dict[str, Any]]:
    check_resolution("resolution", resolution)
    check_positive("batch_size", batch_size)
    n_solve = resolution if solve_resolution is None else int(solve_resolution)
    if n_solve < resolution or n_solve % resolution:
        raise ConfigError(f"solve_resolution={solve_resolution} is invalid: expected a multiple of {resolution}")
    steps = frame_steps(CONDITIONED_FRAME_EVERY if conditioned else SMOKE_FRAME_EVERY)
    buoyancies = []

    def solve(chunk: tuple[np.ndarray, np.ndarray], stop: threading.Event) -> np.ndarray:
        return cell_means(solve_smoke(*chunk, steps, stop=stop), n_solve // resolution)

    def solve_block(seeds: list[np.random.SeedSequence]) -> np.ndarray:
        rngs = [np.random.default_rng(s) for s in seeds]
        smoke = np.stack([initial_smoke(rng, n_solve) for rng in rngs])
        b = np.array([rng.uniform(*BUOYANCY_RANGE) if conditioned else BUOYANCY for rng in rngs])
        buoyancies.extend(b.tolist())
        chunks = [(smoke[i : i + batch_size], b[i : i + batch_size]) for i in range(0, len(seeds), batch_size)]
        return np.concatenate(thread_map(solve, chunks, workers))

    out = solve_samples(samples, seed, first, batch_size * max(1, workers), (len(steps), resolution, resolution, 3),
                        solve_block, progress)
    pde = {
        "name": "smoke_2d_buoyancy" + ("_conditioned" if conditioned else ""),
        "model": "PDEArena NavierStokes2D" + ("-cond" if conditioned else "") + ": incompressible Navier-Stokes "
                 "with a passive smoke s pushing up by b s (Boussinesq)",
        "nu": NU,
        "buoyancy": (f"U({BUOYANCY_RANGE[0]}, {BUOYANCY_RANGE[1]}) per trajectory, in per_sample" if conditioned
                     else BUOYANCY),
        "length": LENGTH,
        "grid": "cell-centred: x_i = (i + 1/2) 32 / n, the same in y; axes (x, y), y up",
        "boundary": "closed walls: no flow through them, zero tangential ghost velocity (phiflow's ZERO); "
                    "zero-gradient smoke",
        "initial_condition": {"type": "|phiflow Noise|", "scale": NOISE_SCALE, "smoothness": NOISE_SMOOTHNESS,
                              "modes": NOISE_MODES, "velocity": 0.0},
        "times": (steps * DT).tolist(),
        "channels": ["smoke", "vx", "vy"],
        "velocity": "the mean of the two faces of each cell (the solver's velocity is staggered)",
    }
    if conditioned:
        pde["per_sample"] = {"buoyancy": buoyancies}
    solver = {"name": "MAC grid: semi-Lagrangian advection (bilinear), explicit diffusion, buoyancy, projection by "
                      "a cosine-transform pressure solve",
              "solve_resolution": n_solve, "dt": DT, "skipped_steps": SKIP_STEPS,
              "frame_every": int(steps[1] - steps[0]) if len(steps) > 1 else 1,
              "stored": "cell means of the solver's cells" if n_solve > resolution else "the solver's cells"}
    return out, {"pde": pde, "solver": solver}


def generate_smoke(samples: int, resolution: int = 64, solve_resolution: int | None = None, seed: int = 0, *,
                   first: int = 0, batch_size: int = 4, workers: int = 2,
                   progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """PDEArena's smoke ("NS"): ``(samples, 14, n, n, 3)`` float32 smoke, vx, vy at the cell centres, b = 0.5.

    Sample ``i``'s initial smoke comes from ``SeedSequence(seed).spawn(first + samples)[first + i]`` (``first``
    skips to a later part of the same stream). Solved on ``solve_resolution`` cells per axis (default: the
    stored ``resolution``) and stored as cell means. ``batch_size`` samples per solver call, ``workers``
    threads; results depend on neither. Returns the array and the settings ``{"pde", "solver"}``.
    """
    return _generate(samples, resolution, solve_resolution, seed, first, batch_size, workers, progress, False)


def generate_smoke_conditioned(samples: int, resolution: int = 64, solve_resolution: int | None = None,
                               seed: int = 0, *, first: int = 0, batch_size: int = 4, workers: int = 2,
                               progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """PDEArena's conditioned smoke ("NS-cond"): as :func:`generate_smoke` with 56 frames, one step apart, and a
    buoyancy ``U(0.2, 0.5)`` per trajectory (drawn after its initial smoke, from the same stream), listed in
    ``settings["pde"]["per_sample"]["buoyancy"]``."""
    return _generate(samples, resolution, solve_resolution, seed, first, batch_size, workers, progress, True)
