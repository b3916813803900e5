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

Every step works in any number of dimensions (the velocity is a tuple of face arrays, one per axis, the buoyancy
along the last axis): ``smoke3d`` (FactFormer's 3D smoke) runs the same functions on three axes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np
import scipy.fft

from opformer.errors import ConfigError
from opformer.pde.diffusion_reaction import neumann_eigenvalues
from opformer.pde.parallel import check_stop, thread_map
from opformer.pde.samples import check_positive, check_resolution, solve_samples

#: PDEArena's NavierStokes2D (``pdedatagen/configs/navierstokes2dsmoke.yaml``): box side, viscosity, buoyancy,
#: time step ((102 - 18) / 56), steps before the first stored frame, steps after.
LENGTH, NU, BUOYANCY, DT = 32.0, 0.01, 0.5, 1.5
SKIP_STEPS, STEPS = 8, 56
#: Frames: every 4th of the 56 steps for "NS" (14 frames, 6 time units apart), every step for "NS-cond" (56).
SMOKE_FRAME_EVERY, CONDITIONED_FRAME_EVERY = 4, 1
#: NS-cond's buoyancy range (PDEArena draws one per 32 trajectories; we draw one per trajectory).
BUOYANCY_RANGE = (0.2, 0.5)
#: phiflow's ``Noise(scale=11, smoothness=6)`` initial smoke (its absolute value): Fourier amplitudes
#: ``(|m| scale / L)^(-2 smoothness)``, the mean mode removed, normalized to mean 0 and standard deviation 1 on
#: the grid. Modes beyond ``|m_x|, |m_y| <= NOISE_MODES`` weigh < 1.5e-11 of the lowest and are left out, so a
#: sample is the same smooth field on every grid.
NOISE_SCALE, NOISE_SMOOTHNESS, NOISE_MODES = 11.0, 6.0, 8
#: What the settings of a generated file say of the box's walls and of the stored velocity (2D and 3D alike).
CLOSED_BOX = "closed walls: no flow through them, zero tangential ghost velocity (phiflow's ZERO); zero-gradient smoke"
CELL_VELOCITY = "the mean of the two faces of each cell (the solver's velocity is staggered)"


def initial_smoke(rng: np.random.Generator, n: int, length: float = LENGTH, ndim: int = 2,
                  scale: float = NOISE_SCALE, smoothness: float = NOISE_SMOOTHNESS) -> np.ndarray:
    """``|noise|`` ``(n,) * ndim`` at the cell centres: phiflow's ``Noise(scale, smoothness)`` drawn from ``rng``.

    phiflow's noise: complex normal Fourier coefficients of the box's periodic modes ``m`` weighted by
    ``(|m| scale / length)^(-2 smoothness)`` where ``(|m| scale / length)^2 > 0.1`` (phiflow's high-pass; with
    both papers' settings it drops only the mean), normalized to mean 0 and standard deviation 1 on the grid.
    Modes beyond ``|m_i| <= NOISE_MODES`` are left out, so a sample is the same smooth field on every grid.
    """
    m = np.arange(-NOISE_MODES, NOISE_MODES + 1)
    k2 = sum(np.reshape(m**2, (-1,) + (1,) * (ndim - 1 - axis)) for axis in range(ndim)) * (scale / length) ** 2
    weight = np.divide(1.0, k2, out=np.zeros_like(k2), where=k2 > 0.1) ** smoothness
    coefficients = (rng.standard_normal(weight.shape) + 1j * rng.standard_normal(weight.shape)) * weight
    x = (np.arange(n) + 0.5) * length / n
    wave = np.exp(2j * np.pi * np.outer(x, m) / length)
    field = np.tensordot(wave, coefficients, axes=(1, 0))  # (m_1, ..., m_d) -> (x_1, ..., x_d), an axis at a time
    for axis in range(1, ndim):
        field = np.moveaxis(np.tensordot(field, wave, axes=(axis, 1)), -1, axis)
    field = field.real
    field = (field - field.mean()) / field.std()
    return np.abs(field)


def _sample(values: np.ndarray, indices: Sequence[np.ndarray], zero_outside: bool) -> np.ndarray:
    """Multilinear values of ``values`` ``(batch, *lattice)`` at fractional ``indices`` (one ``(batch or 1,
    *points)`` array per axis).

    Outside the lattice: 0 (``zero_outside``; the value falls linearly to 0 one spacing beyond the last point,
    phiflow's zero extrapolation) or the nearest edge value (zero gradient).
    """
    ndim = values.ndim - 1
    if zero_outside:
        values = np.pad(values, ((0, 0),) + ((1, 1),) * ndim)
        indices = [f + 1.0 for f in indices]
    batch, *sizes = values.shape
    shape = (batch,) + np.broadcast_shapes(*(np.shape(f) for f in indices))[1:]
    strides = [int(np.prod(sizes[axis + 1:])) for axis in range(ndim)]
    base, weights = 0, []
    for f, size, stride in zip(indices, sizes, strides):
        f = np.clip(np.broadcast_to(f, shape), 0.0, size - 1.0)
        i = np.minimum(f.astype(np.intp), size - 2)
        base = base + i * stride
        weights.append(f - i)
    flat, base = values.reshape(batch, -1), base.reshape(batch, -1)

    def interpolate(axis: int, offset: int) -> np.ndarray:
        if axis == ndim:
            return np.take_along_axis(flat, base + offset, axis=1).reshape(shape)
        t = weights[axis]
        return (1.0 - t) * interpolate(axis + 1, offset) + t * interpolate(axis + 1, offset + strides[axis])

    return interpolate(0, 0)


def _indices(shape: Sequence[int], shift: Sequence[float] | None = None) -> list[np.ndarray]:
    """The indices ``(1, *shape)`` of a lattice along each axis, plus ``shift[axis]`` (in spacings)."""
    shift = [0.0] * len(shape) if shift is None else shift
    grids = np.meshgrid(*(np.arange(size) + offset for size, offset in zip(shape, shift)), indexing="ij")
    return [g[None] for g in grids]


def _face_offsets(ndim: int, axis: int) -> np.ndarray:
    """Where the faces of component ``axis`` sit, in spacings from the corner: 0 along ``axis``, 1/2 along the
    others."""
    return np.where(np.arange(ndim) == axis, 0.0, 0.5)


def _pair_sum(w: np.ndarray, axis: int) -> np.ndarray:
    """The sum of the two faces of each cell of a velocity component ``w`` ``(batch, *lattice)`` along ``axis``."""
    lower, upper = [slice(None)] * w.ndim, [slice(None)] * w.ndim
    lower[axis + 1], upper[axis + 1] = slice(None, -1), slice(1, None)
    return w[tuple(lower)] + w[tuple(upper)]


def advect_smoke(smoke: np.ndarray, velocity: Sequence[np.ndarray], courant: float) -> np.ndarray:
    """Semi-Lagrangian step of the cell-centred ``smoke`` ``(batch, *cells)`` by the face ``velocity``.

    ``courant`` is ``dt / h``. The departure point of each centre is ``x - dt u(x)`` (``u(x)``: the mean of the two
    faces, the multilinear value); the smoke there is multilinear, the edge value outside (zero gradient).
    """
    shifts = [0.5 * courant * _pair_sum(w, a) for a, w in enumerate(velocity)]
    return _sample(smoke, [x - dx for x, dx in zip(_indices(smoke.shape[1:]), shifts)], zero_outside=False)


def advect_velocity(velocity: Sequence[np.ndarray], courant: float) -> tuple[np.ndarray, ...]:
    """Semi-Lagrangian self-advection of the face velocities: component ``a`` ``(batch, *cells)`` with one more
    point along axis ``a`` (e.g. 2D: ``u`` ``(batch, n + 1, n)``, ``v`` ``(batch, n, n + 1)``).

    Each interior face takes its own component at its departure point; the other components at a face and the
    values at the departure points are multilinear on that component's lattice, zero outside the walls. The wall
    faces stay 0.
    """
    ndim = len(velocity)
    out = []
    for a, w in enumerate(velocity):
        own = _indices(w.shape[1:])  # the faces of a, in indices of a's lattice
        at_faces = [w if b == a else _sample(other, _indices(w.shape[1:], _face_offsets(ndim, a)
                                                             - _face_offsets(ndim, b)), zero_outside=True)
                    for b, other in enumerate(velocity)]
        new = _sample(w, [f - courant * c for f, c in zip(own, at_faces)], zero_outside=True)
        walls = [slice(None)] * (ndim + 1)
        walls[a + 1] = [0, -1]
        new[tuple(walls)] = 0.0  # the wall faces are no unknowns (phiflow stores only the interior faces)
        out.append(new)
    return tuple(out)


def diffuse(w: np.ndarray, rate: float) -> np.ndarray:
    """Explicit diffusion steps of a velocity component ``(batch, *lattice)``: ``w + rate L w`` (the
    ``(2 ndim + 1)``-point ``L`` in spacings, zero ghost values), in ``ceil(2 ndim rate)`` equal sub-steps (one
    where ``rate <= 1 / (2 ndim)``, as PDEArena's and FactFormer's grids) for stability."""
    ndim = w.ndim - 1
    substeps = max(1, int(np.ceil(2 * ndim * rate - 1e-12)))
    inner = (slice(1, -1),) * ndim
    for _ in range(substeps):
        padded = np.pad(w, ((0, 0),) + ((1, 1),) * ndim)
        neighbours = []
        for axis in range(ndim):
            for shifted in (slice(2, None), slice(None, -2)):
                neighbours.append(padded[(slice(None),) + inner[:axis] + (shifted,) + inner[axis + 1:]])
        w = w + (rate / substeps) * (sum(neighbours) - 2.0 * ndim * w)
    return w


def solve_pressure(divergence: np.ndarray, length: float = LENGTH) -> np.ndarray:
    """The pressure ``p`` ``(batch, *cells)`` of ``L p = divergence`` with no flux through the walls, mean 0.

    ``L`` is the ``(2 ndim + 1)``-point cell-centred Laplacian of spacing ``length / n``; the DCT-II diagonalises
    it (``neumann_eigenvalues``). The mean of ``divergence`` (its null space; 0 for closed walls) is dropped.
    """
    ndim = divergence.ndim - 1
    axes = tuple(range(1, ndim + 1))
    eigenvalues = neumann_eigenvalues(divergence.shape[-1], length, ndim)
    eigenvalues[(0,) * ndim] = 1.0
    c = scipy.fft.dctn(divergence, type=2, axes=axes, norm="ortho")
    c /= eigenvalues
    c[(slice(None),) + (0,) * ndim] = 0.0
    return scipy.fft.idctn(c, type=2, axes=axes, norm="ortho")


def divergence(velocity: Sequence[np.ndarray], h: float) -> np.ndarray:
    """The MAC divergence ``(batch, *cells)`` of the face velocities: the net outflow of each cell over its size."""
    return sum(np.diff(w, axis=a + 1) for a, w in enumerate(velocity)) / h


def project(velocity: Sequence[np.ndarray], length: float = LENGTH) -> tuple[np.ndarray, ...]:
    """The divergence-free part of the face velocities: wall faces set to 0, then ``u -= grad p`` on the interior
    faces."""
    ndim = len(velocity)
    h = length / velocity[0].shape[-1]
    out = []
    for a, w in enumerate(velocity):
        w = w.copy()
        index = [slice(None)] * (ndim + 1)
        index[a + 1] = [0, -1]
        w[tuple(index)] = 0.0
        out.append(w)
    p = solve_pressure(divergence(out, h), length)
    for a, w in enumerate(out):
        index = [slice(None)] * (ndim + 1)
        index[a + 1] = slice(1, -1)
        w[tuple(index)] -= np.diff(p, axis=a + 1) / h
    return tuple(out)


def smoke_step(smoke: np.ndarray, velocity: Sequence[np.ndarray], buoyancy: np.ndarray, dt: float = DT,
               nu: float = NU, length: float = LENGTH, force_first: bool = False
               ) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """One step (module docstring) of the smoke ``(batch, *cells)`` and the face velocities; ``buoyancy``
    ``(batch,)`` pushes along the last axis (2D: y, 3D: z).

    ``force_first`` adds the buoyancy before the diffusion step, as PDEArena and FactFormer's script do (a uniform
    smoke then moves).
    """
    ndim = smoke.ndim - 1
    h = length / smoke.shape[-1]
    smoke = advect_smoke(smoke, velocity, dt / h)
    *others, up = advect_velocity(velocity, dt / h)
    force = dt * buoyancy.reshape((-1,) + (1,) * ndim) * 0.5 * (smoke[..., :-1] + smoke[..., 1:])
    if force_first:
        up[..., 1:-1] += force
    others, up = [diffuse(w, nu * dt / h**2) for w in others], diffuse(up, nu * dt / h**2)
    if not force_first:
        up[..., 1:-1] += force
    return smoke, project((*others, up), length)


def centred(smoke: np.ndarray, velocity: Sequence[np.ndarray]) -> np.ndarray:
    """``(batch, *cells, 1 + ndim)``: the smoke and the velocity averaged from the two faces of each cell to its
    centre."""
    return np.stack([smoke, *(0.5 * _pair_sum(w, a) for a, w in enumerate(velocity))], axis=-1)


def frame_steps(every: int, skip: int = SKIP_STEPS, steps: int = STEPS) -> np.ndarray:
    """The steps after which frames are stored: every ``every``-th of the ``steps`` after the ``skip`` first."""
    return np.arange(skip + 1, skip + steps + 1, every)


def solve_smoke(smoke: np.ndarray, buoyancy: float | np.ndarray, steps: np.ndarray, dt: float = DT, nu: float = NU,
                length: float = LENGTH, force_first: bool = False,
                stop: threading.Event | None = None) -> np.ndarray:
    """Frames ``(batch, len(steps), *cells, 1 + ndim)`` (float64; smoke and velocity at the cell centres) after
    each step in ``steps`` (increasing step numbers), from the smoke ``(batch, *cells)`` (``ndim`` axes of ``n``
    cells) at rest; ``buoyancy`` (one value, or ``(batch,)``) pushes along the last axis.

    ``stop`` (set: raise ``Stopped``) is polled every step. Raises ``ConfigError`` for steps that are not
    increasing numbers >= 1, or if the solution stops being finite.
    """
    smoke = np.array(smoke, dtype=np.float64)
    steps = np.asarray(steps)
    if steps.ndim != 1 or not len(steps) or steps[0] < 1 or np.any(np.diff(steps) <= 0):
        raise ConfigError(f"steps={steps.tolist()} is invalid: expected increasing step numbers >= 1")
    batch, *cells = smoke.shape
    ndim = len(cells)
    buoyancy = np.broadcast_to(np.asarray(buoyancy, dtype=np.float64), (batch,))
    velocity = tuple(np.zeros((batch, *(n + (a == b) for b, n in enumerate(cells)))) for a in range(ndim))
    frames = np.empty((batch, len(steps), *cells, 1 + ndim))
    stored = 0
    for step in range(1, int(steps[-1]) + 1):
        check_stop(stop)
        smoke, velocity = smoke_step(smoke, velocity, buoyancy, dt, nu, length, force_first)
        if step == steps[stored]:
            frames[:, stored] = centred(smoke, velocity)
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
        "boundary": CLOSED_BOX,
        "initial_condition": {"type": "|phiflow Noise|", "scale": NOISE_SCALE, "smoothness": NOISE_SMOOTHNESS,
                              "modes": NOISE_MODES, "velocity": 0.0},
        "times": (steps * DT).tolist(),
        "channels": ["smoke", "vx", "vy"],
        "velocity": CELL_VELOCITY,
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
