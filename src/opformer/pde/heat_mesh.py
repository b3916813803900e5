"""The heat equation ``u_t = kappa lap u`` on random star-shaped domains, ``u = 0`` on the boundary: P1 finite
elements in space (consistent mass), Crank-Nicolson in time, frames at the mesh's vertices.

A domain is ``r <= R(theta)``, ``R(theta) = 1 + sum_{k=2}^{5} (a_k cos k theta + b_k sin k theta)`` with
``a_k, b_k ~ U(-0.3 / k, 0.3 / k)`` (stored as settings ``a2`` ... ``b5``; the boundary is a polygon of
``resolution`` vertices on it). The initial temperature is ``u0 = (1 - (r / R(theta))^2) g(x, y)``, zero on the
boundary, with ``g = sum_{j=1}^{4} c_j cos(k_j . x + phi_j)``, ``c_j ~ N(0, 1)``, ``k_j`` of length up to 4 in a
random direction and ``phi_j ~ U(0, 2 pi)``.

Verification (``tests/pde/test_heat_mesh.py``): on the unit disc the Bessel mode
``u = J0(j_01 r) exp(-kappa j_01^2 t)`` is exact; the error at the last frame falls as ``h^2`` under
refinement of the mesh and the time stepping converges as ``dt^2``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse.linalg

from opformer.errors import ConfigError
from opformer.meshes import MeshSample
from opformer.pde.fem import fem_libraries, lagrange_element, skfem_mesh, triangulate
from opformer.pde.samples import check_positive, frame_steps, frame_times

#: The boundary's Fourier modes and the bound of their amplitudes, ``SHAPE_AMPLITUDE / k``.
SHAPE_MODES, SHAPE_AMPLITUDE = (2, 3, 4, 5), 0.3
#: The initial temperature's plane waves: how many and their largest wave number.
WAVES, MAX_WAVENUMBER = 4, 4.0


def boundary_radius(theta: np.ndarray, shape: dict[str, float]) -> np.ndarray:
    """``R(theta)`` of the domain with the coefficients ``shape`` (``a2`` ... ``b5``)."""
    radius = np.ones_like(theta)
    for k in SHAPE_MODES:
        radius += shape[f"a{k}"] * np.cos(k * theta) + shape[f"b{k}"] * np.sin(k * theta)
    return radius


def domain_mesh(shape: dict[str, float], boundary_points: int) -> tuple[np.ndarray, np.ndarray]:
    """The star-shaped domain of ``shape``: ``boundary_points`` vertices on its boundary (equal angles), cells of
    about the boundary's spacing inside."""
    theta = 2 * np.pi * np.arange(boundary_points) / boundary_points
    radius = boundary_radius(theta, shape)
    loop = np.stack([radius * np.cos(theta), radius * np.sin(theta)], 1)
    spacing = np.mean(np.linalg.norm(np.roll(loop, -1, axis=0) - loop, axis=1))
    return triangulate([loop], [], max_area=0.5 * spacing**2)


def solve_heat(points: np.ndarray, cells: np.ndarray, initial: np.ndarray, times: np.ndarray, dt: float,
               diffusivity: float) -> np.ndarray:
    """``(len(times), n)``: the temperature at the vertices at ``times`` (``times[0] = 0``: ``initial``, its
    boundary values set to 0), Crank-Nicolson steps of at most ``dt`` between frames."""
    skfem, _ = fem_libraries()
    from skfem.helpers import dot, grad

    mesh = skfem_mesh(points, cells)
    basis = skfem.Basis(mesh, lagrange_element(1))
    stiffness = skfem.asm(skfem.BilinearForm(lambda u, v, w: dot(grad(u), grad(v))), basis)
    mass = skfem.asm(skfem.BilinearForm(lambda u, v, w: u * v), basis)
    free = basis.complement_dofs(basis.get_dofs())
    stiffness, mass = stiffness[free][:, free].tocsc(), mass[free][:, free].tocsc()
    u = np.zeros(len(points))
    u[free] = initial[free]
    frames = np.zeros((len(times), len(points)))
    frames[0] = u
    factors: dict[float, tuple] = {}
    for index, (steps, step) in enumerate(frame_steps(np.asarray(times)[1:], dt), start=1):
        if steps:
            if step not in factors:
                factors[step] = (scipy.sparse.linalg.splu(mass + 0.5 * step * diffusivity * stiffness),
                                 mass - 0.5 * step * diffusivity * stiffness)
            solver, explicit = factors[step]
            for _ in range(steps):
                u[free] = solver.solve(explicit @ u[free])
        frames[index] = u
    return frames


def random_shape(rng: np.random.Generator) -> dict[str, float]:
    """The coefficients ``a_k, b_k ~ U(-0.3 / k, 0.3 / k)`` of a random domain."""
    shape = {}
    for k in SHAPE_MODES:
        shape[f"a{k}"], shape[f"b{k}"] = rng.uniform(-SHAPE_AMPLITUDE / k, SHAPE_AMPLITUDE / k, size=2)
    return {name: float(value) for name, value in shape.items()}


def random_initial(rng: np.random.Generator, points: np.ndarray, shape: dict[str, float]) -> np.ndarray:
    """``u0 = (1 - (r / R(theta))^2) g`` at ``points``, ``g`` a random sum of plane waves."""
    r, theta = np.hypot(points[:, 0], points[:, 1]), np.arctan2(points[:, 1], points[:, 0])
    envelope = 1 - (r / boundary_radius(theta, shape)) ** 2
    g = np.zeros(len(points))
    for _ in range(WAVES):
        length, direction, phase = rng.uniform(0, MAX_WAVENUMBER), rng.uniform(0, 2 * np.pi), rng.uniform(0, 2 * np.pi)
        g += rng.standard_normal() * np.cos(length * (np.cos(direction) * points[:, 0]
                                                      + np.sin(direction) * points[:, 1]) + phase)
    return np.clip(envelope, 0, None) * g


def generate_heat_mesh(samples: int, resolution: int = 64, seed: int = 0, progress=None, first: int = 0,
                       diffusivity: float = 0.1, t_final: float = 1.0, frame_dt: float = 0.05, dt: float = 0.01
                       ) -> tuple[list[MeshSample], dict]:
    """``samples`` trajectories of heat on random domains (``resolution`` boundary vertices), frames every
    ``frame_dt`` to ``t_final``; sample ``i`` from ``SeedSequence(seed).spawn(first + samples)[first + i]``.
    Returns ``(samples, settings)``, each sample's field ``u`` of shape ``(frames, n, 1)``."""
    if int(resolution) != resolution or resolution < 8:
        raise ConfigError(f"resolution={resolution} is invalid: expected an integer >= 8 (boundary vertices)")
    check_positive("diffusivity", diffusivity)
    check_positive("dt", dt)
    check_positive("samples", samples)
    times = frame_times(t_final, frame_dt)
    out = []
    for sequence in np.random.SeedSequence(seed).spawn(first + samples)[first:]:
        rng = np.random.default_rng(sequence)
        shape = random_shape(rng)
        points, cells = domain_mesh(shape, resolution)
        frames = solve_heat(points, cells, random_initial(rng, points, shape), times, dt, diffusivity)
        out.append(MeshSample(points=points, cells=cells, cell_kind="triangle", fields={"u": frames[..., None]},
                              settings=shape))
        if progress is not None:
            progress(1)
    settings = {"pde": {"name": "heat-mesh", "diffusivity": diffusivity, "t_final": t_final,
                        "frame_dt": frame_dt, "times": times.tolist(), "channels": ["u"], "resolution": resolution,
                        "shape_modes": list(SHAPE_MODES), "shape_amplitude": SHAPE_AMPLITUDE},
                "solver": {"element": "P1, consistent mass", "time": "Crank-Nicolson", "dt": dt,
                           "boundary": "u = 0", "mesher": "triangle"}}
    return out, settings
