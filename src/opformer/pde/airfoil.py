"""Incompressible potential flow around an airfoil with the Kutta condition, by finite elements on the stream
function; random NACA 4-digit airfoils, and the exact flow around a Joukowski airfoil that verifies it.

The velocity is ``(u, v) = (d psi / dy, -d psi / dx)`` with ``lap psi = 0`` outside the airfoil, ``psi`` constant
on it (the surface is a streamline) and the free stream's ``U (y cos alpha - x sin alpha)`` on a far circle.
The constant on the airfoil is the circulation's degree of freedom: ``psi = psi_0 + k psi_1``, ``psi_0`` with
0 on the airfoil, ``psi_1`` 1 there and 0 far away, and ``k`` chosen by the Kutta condition, the flow leaving the
trailing edge smoothly (with any other ``k`` the velocity there is infinite): the airfoil's streamline
``psi = k`` then leaves the trailing edge along the bisector of its surfaces, so in discrete form
``psi_0(p) + k psi_1(p) = k`` at the point ``p`` one boundary spacing behind the trailing edge on that bisector
(:func:`wake_point`), which fixes ``k``. (Minimising the kinetic energy near the trailing edge over ``k`` was
tried first: it did not converge monotonically under refinement.)
P2 elements on a triangle mesh graded from the airfoil (``triangle``); velocity and pressure (Bernoulli:
``p = p_inf + rho (U^2 - |u|^2) / 2``, ``p_inf = 0``) at the mesh's vertices.

The circulation ``Gamma`` (clockwise positive, the lift ``L = rho U Gamma``) is the flux of ``grad psi`` through
the airfoil, ``integral grad psi . grad psi_1`` (Green's identity with ``psi_1``).

Verification (``tests/pde/test_airfoil.py``): the Joukowski airfoil, the image of a circle through ``zeta = c``
under ``z = zeta + c^2 / zeta``; the flow past the circle with ``Gamma = 4 pi U R sin(alpha + beta)`` maps to the
exact flow around the airfoil.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from opformer.errors import ConfigError
from opformer.meshes import MeshSample
from opformer.pde.fem import fem_libraries, lagrange_element, skfem_mesh, triangulate, vertex_gradients
from opformer.pde.samples import check_positive

#: NACA 4-digit ranges drawn per sample: maximum camber, its position, thickness (fractions of the chord).
CAMBER, CAMBER_POSITION, THICKNESS = (0.0, 0.06), (0.2, 0.6), (0.08, 0.18)


def naca4(camber: float, position: float, thickness: float, points: int) -> np.ndarray:
    """A NACA 4-digit airfoil of chord 1 (leading edge at 0, trailing edge at (1, 0)), closed trailing edge:
    ``(2 points - 2, 2)`` vertices counter-clockwise from the trailing edge (upper surface first), cosine-spaced."""
    x = 0.5 * (1 - np.cos(np.linspace(0.0, np.pi, points)))  # 0 .. 1
    half = 5 * thickness * (0.2969 * np.sqrt(x) - 0.1260 * x - 0.3516 * x**2 + 0.2843 * x**3 - 0.1036 * x**4)
    if camber > 0:
        front = x < position
        line = np.where(front, camber / position**2 * (2 * position * x - x**2),
                        camber / (1 - position) ** 2 * (1 - 2 * position + 2 * position * x - x**2))
        slope = np.where(front, 2 * camber / position**2 * (position - x),
                         2 * camber / (1 - position) ** 2 * (position - x))
    else:
        line, slope = np.zeros_like(x), np.zeros_like(x)
    angle = np.arctan(slope)
    upper = np.stack([x - half * np.sin(angle), line + half * np.cos(angle)], 1)
    lower = np.stack([x + half * np.sin(angle), line - half * np.cos(angle)], 1)
    return np.concatenate([upper[::-1][:-1], lower[:-1]])  # TE -> upper -> LE -> lower (TE once)


def joukowski_map(zeta: np.ndarray, c: float) -> np.ndarray:
    """``z = zeta + c^2 / zeta``."""
    return zeta + c**2 / zeta


def joukowski_airfoil(centre: complex, c: float, points: int) -> np.ndarray:
    """``(points, 2)``: the image of the circle about ``centre`` through ``zeta = c``, counter-clockwise from the
    trailing edge ``z = 2 c``; points equally spaced in the circle's angle."""
    radius = abs(c - centre)
    start = np.angle(c - centre)
    zeta = centre + radius * np.exp(1j * (start + 2 * np.pi * np.arange(points) / points))
    z = joukowski_map(zeta, c)
    return np.stack([z.real, z.imag], 1)


def joukowski_flow(x: np.ndarray, y: np.ndarray, centre: complex, c: float, speed: float,
                   alpha: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The exact flow around the Joukowski airfoil at ``x + i y``: ``(psi, velocity (..., 2), Gamma)``, the free
    stream ``speed`` at the angle ``alpha`` (radians), with Kutta's circulation ``4 pi U R sin(alpha + beta)``."""
    radius = abs(c - centre)
    beta = -np.angle(c - centre)
    gamma = 4 * np.pi * speed * radius * np.sin(alpha + beta)
    z = np.asarray(x) + 1j * np.asarray(y)
    root = np.sqrt(z * z - 4 * c * c + 0j)
    roots = np.stack([(z + root) / 2, (z - root) / 2])
    zeta = np.take_along_axis(roots, np.argmax(np.abs(roots - centre), axis=0)[None], axis=0)[0]
    s = zeta - centre
    potential = speed * (s * np.exp(-1j * alpha) + radius**2 * np.exp(1j * alpha) / s) \
        + 1j * gamma / (2 * np.pi) * np.log(s)
    dw = speed * (np.exp(-1j * alpha) - radius**2 * np.exp(1j * alpha) / s**2) + 1j * gamma / (2 * np.pi * s)
    conjugate = dw / (1 - c * c / zeta**2)  # u - i v
    return potential.imag, np.stack([conjugate.real, -conjugate.imag], -1), gamma


def airfoil_mesh(airfoil: np.ndarray, far_radius: float, far_points: int, centre: tuple[float, float] = (0.5, 0.0),
                 near_radius: float = 1.0, grading: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The disc of ``far_radius`` about ``centre`` (``far_points`` on its circle) minus the airfoil polygon
    ``airfoil`` (counter-clockwise, inside the circle of ``near_radius``): ``(points, triangles)``.

    Within ``near_radius`` the cells are about as fine as the airfoil's mean spacing ``h``, beyond it as the far
    circle's, graded between: refining both halves ``h`` everywhere. ``grading`` g > 1 lets the cells within
    ``near_radius`` grow to ``g h``, graded from ``h`` at the airfoil (a mesh dense at the airfoil only). The first
    vertices are the far circle's, then the near circle's, then the airfoil's (:func:`airfoil_vertices`)."""
    h = np.mean(np.linalg.norm(np.roll(airfoil, -1, axis=0) - airfoil, axis=1))
    far_h = 2 * np.pi * far_radius / far_points
    ring_points = max(8, int(np.ceil(2 * np.pi * near_radius / (1.5 * h * grading))))
    loops = [_circle(centre, far_radius, far_points), _circle(centre, near_radius, ring_points), airfoil]
    n = len(airfoil)
    inside = 0.5 * (airfoil[n // 4] + airfoil[n - n // 4])  # between the surfaces, a quarter from the TE
    top = np.max(np.abs(airfoil[:, 1] - centre[1]))  # the inner region's point: above the airfoil, in the ring
    regions = [(centre[0], centre[1] + 0.5 * (near_radius + far_radius), 0.5 * far_h**2),
               (centre[0], centre[1] + 0.5 * (top + near_radius * np.cos(np.pi / ring_points)),
                0.5 * (grading * h) ** 2)]
    return triangulate(loops, [tuple(inside)], max_area=0.5 * far_h**2, regions=regions)


def _circle(centre: tuple[float, float], radius: float, points: int) -> np.ndarray:
    angles = 2 * np.pi * np.arange(points) / points
    return np.stack([centre[0] + radius * np.cos(angles), centre[1] + radius * np.sin(angles)], 1)


def airfoil_vertices(mesh_points: np.ndarray, airfoil: np.ndarray) -> np.ndarray:
    """The indices of an :func:`airfoil_mesh`'s airfoil vertices (the last loop's, kept in order)."""
    start = int(np.flatnonzero(np.all(mesh_points == airfoil[0], axis=1))[0])
    return np.arange(start, start + len(airfoil))


def solve_stream_function(points: np.ndarray, cells: np.ndarray, body_vertices: np.ndarray, far_values: Callable,
                          wake_point: np.ndarray, order: int = 2) -> dict:
    """The stream function on an :func:`airfoil_mesh` whose airfoil is the vertices ``body_vertices``; the rest
    of the boundary is the far circle, where ``psi = far_values(x)`` (x of shape (2, ...)).

    Returns ``mesh``, ``element``, ``psi`` (its dofs), ``gamma`` (the circulation, clockwise positive) and the
    Kutta constant ``k`` (``psi`` on the airfoil)."""
    skfem, _ = fem_libraries()
    from skfem.helpers import dot, grad

    mesh = skfem_mesh(points, cells)
    element = lagrange_element(order)
    basis = skfem.Basis(mesh, element)
    body_facets = np.flatnonzero(np.all(np.isin(mesh.facets[:, mesh.boundary_facets()], body_vertices), axis=0))
    body_facets = mesh.boundary_facets()[body_facets]
    far_facets = np.setdiff1d(mesh.boundary_facets(), body_facets)
    body = basis.get_dofs(body_facets).all()
    far = basis.get_dofs(far_facets).all()
    laplace = skfem.asm(skfem.BilinearForm(lambda u, v, w: dot(grad(u), grad(v))), basis)
    held = np.concatenate([body, far])
    free = np.setdiff1d(np.arange(basis.N), held)
    base, unit = np.zeros(basis.N), np.zeros(basis.N)
    base[far] = far_values(basis.doflocs[:, far])
    unit[body] = 1.0
    solved = []
    for boundary in (base, unit):
        solved.append(skfem.solve(*skfem.condense(laplace, np.zeros(basis.N), x=boundary, I=free)))
    psi0, psi1 = solved
    probe = basis.probes(np.asarray(wake_point, dtype=np.float64).reshape(2, 1))
    k = float((probe @ psi0)[0] / (1.0 - (probe @ psi1)[0]))
    psi = psi0 + k * psi1
    gamma = -float(psi @ (laplace @ psi1))
    return {"mesh": mesh, "element": element, "psi": psi, "gamma": gamma, "k": k}


def vertex_velocity(mesh, element, psi: np.ndarray) -> np.ndarray:
    """``(n, 2)``: ``(d psi / dy, -d psi / dx)`` at the vertices."""
    g = vertex_gradients(mesh, element, psi)
    return np.stack([g[:, 1], -g[:, 0]], 1)


def surface_lift(airfoil: np.ndarray, velocity: np.ndarray, speed: float, alpha: float, density: float) -> float:
    """The lift per span from the pressure ``rho (U^2 - |u|^2) / 2`` on the airfoil polygon (counter-clockwise
    vertices, ``velocity`` at them), the force's component normal to the free stream (trapezoidal rule)."""
    pressure = 0.5 * density * (speed**2 - np.sum(velocity**2, axis=1))
    edge = np.roll(airfoil, -1, axis=0) - airfoil
    outward = np.stack([edge[:, 1], -edge[:, 0]], 1)  # normal of length |edge| out of the airfoil (ccw loop)
    mean = 0.5 * (pressure + np.roll(pressure, -1))
    force = -np.sum(mean[:, None] * outward, axis=0)
    return float(-force[0] * np.sin(alpha) + force[1] * np.cos(alpha))


def wake_point(airfoil: np.ndarray) -> np.ndarray:
    """A point one boundary spacing downstream of the trailing edge ``airfoil[0]``, on the bisector of its
    surfaces: where the Kutta condition asks the airfoil's streamline to pass."""
    te = airfoil[0]
    sides = [(te - airfoil[1]), (te - airfoil[-1])]
    direction = sum(side / np.linalg.norm(side) for side in sides)
    spacing = min(np.linalg.norm(side) for side in sides)
    return te + spacing * direction / np.linalg.norm(direction)


def solve_airfoil(airfoil: np.ndarray, speed: float, alpha: float, density: float, far_radius: float,
                  far_points: int, centre: tuple[float, float] = (0.5, 0.0), near_radius: float = 0.75,
                  far_values: Callable | None = None, order: int = 2, grading: float = 1.0) -> dict:
    """The flow around the airfoil polygon (counter-clockwise from its trailing edge): ``points``, ``cells``,
    ``velocity`` (n, 2), ``pressure`` (n,), ``gamma`` and the ``lift`` from the surface pressure.

    ``far_values`` (default: the free stream ``U (y cos alpha - x sin alpha)``) is ``psi`` on the far circle;
    ``grading``: :func:`airfoil_mesh`'s."""
    points, cells = airfoil_mesh(airfoil, far_radius, far_points, centre, near_radius, grading)
    if far_values is None:
        far_values = lambda x: speed * (x[1] * np.cos(alpha) - x[0] * np.sin(alpha))  # noqa: E731
    body = airfoil_vertices(points, airfoil)
    flow = solve_stream_function(points, cells, body, far_values, wake_point(airfoil), order=order)
    velocity = vertex_velocity(flow["mesh"], flow["element"], flow["psi"])
    return {"points": points, "cells": cells, "velocity": velocity, "gamma": flow["gamma"],
            "pressure": 0.5 * density * (speed**2 - np.sum(velocity**2, axis=1)),
            "lift": surface_lift(airfoil, velocity[body], speed, alpha, density)}


def generate_airfoil(samples: int, resolution: int = 96, seed: int = 0, progress=None, first: int = 0,
                     speed: float = 1.0, max_alpha: float = 10.0, density: float = 1.0, far_radius: float = 20.0,
                     far_points: int = 64, grading: float = 1.0) -> tuple[list[MeshSample], dict]:
    """``samples`` NACA 4-digit airfoils (chord 1) with camber, its position and thickness drawn uniformly from
    ``CAMBER``, ``CAMBER_POSITION``, ``THICKNESS`` and the angle of attack from ``[-max_alpha, max_alpha]``
    degrees; ``resolution`` vertices on the airfoil, ``far_points`` on the far circle, ``grading`` as
    :func:`airfoil_mesh`'s (the airfoil and its flow are drawn apart from the mesh: another ``resolution``,
    ``far_points`` or ``grading`` meshes the same airfoils). Each sample's fields: ``freestream`` (the free-stream
    velocity at every vertex: the input that tells the angle), ``velocity`` and ``pressure``. Sample ``i`` from
    ``SeedSequence(seed).spawn(first + samples)[first + i]``; ``(samples, settings)``."""
    if int(resolution) != resolution or resolution < 16 or resolution % 2:
        raise ConfigError(f"resolution={resolution} is invalid: expected an even integer >= 16 (airfoil vertices)")
    for name, value in (("speed", speed), ("density", density), ("samples", samples)):
        check_positive(name, value)
    if not 0 <= max_alpha < 30:
        raise ConfigError(f"max_alpha={max_alpha} is invalid: expected 0 <= max_alpha < 30 degrees")
    if not far_radius >= 2:
        raise ConfigError(f"far_radius={far_radius} is invalid: expected at least 2 chords")
    if int(far_points) != far_points or far_points < 8:
        raise ConfigError(f"far_points={far_points} is invalid: expected an integer >= 8 (far circle vertices)")
    if not grading >= 1:
        raise ConfigError(f"grading={grading} is invalid: expected at least 1 (1: the default mesh)")
    out = []
    for sequence in np.random.SeedSequence(seed).spawn(first + samples)[first:]:
        rng = np.random.default_rng(sequence)
        camber, position, thickness = rng.uniform(*CAMBER), rng.uniform(*CAMBER_POSITION), rng.uniform(*THICKNESS)
        alpha = rng.uniform(-max_alpha, max_alpha)
        airfoil = naca4(camber, position, thickness, resolution // 2 + 1)
        flow = solve_airfoil(airfoil, speed, np.radians(alpha), density, far_radius, far_points, grading=grading)
        out.append(MeshSample(
            points=flow["points"], cells=flow["cells"], cell_kind="triangle",
            fields={"freestream": np.tile([speed * np.cos(np.radians(alpha)), speed * np.sin(np.radians(alpha))],
                                          (len(flow["points"]), 1)),
                    "velocity": flow["velocity"], "pressure": flow["pressure"][:, None]},
            settings={"camber": camber, "camber_position": position, "thickness": thickness, "alpha": alpha,
                      "circulation": flow["gamma"], "lift": flow["lift"]}))
        if progress is not None:
            progress(1)
    settings = {"pde": {"name": "airfoil", "speed": speed, "max_alpha": max_alpha, "density": density,
                        "far_radius": far_radius, "far_points": far_points, "grading": grading,
                        "resolution": resolution, "camber": list(CAMBER),
                        "camber_position": list(CAMBER_POSITION), "thickness": list(THICKNESS)},
                "solver": {"equation": "stream function, Laplace", "element": "P2", "mesher": "triangle",
                           "kutta": "the airfoil's streamline through a point one spacing behind the trailing edge",
                           "far_field": "free stream on the far circle", "pressure": "Bernoulli, p_inf = 0"}}
    return out, settings


def solve_joukowski(airfoil_points: int, far_points: int, speed: float = 1.0, alpha: float = np.radians(5.0),
                    centre: complex = -0.025 + 0.025j, c: float = 0.25, far_radius: float = 4.0,
                    near_radius: float = 0.75, order: int = 2) -> dict:
    """:func:`solve_airfoil` on the Joukowski airfoil of ``centre`` and ``c`` (chord about ``4 c``, centred at
    the origin) with the exact stream function on the far circle, beside the exact ``exact_velocity`` at the
    points (NaN at the trailing edge, where the map is singular) and ``exact_gamma``."""
    airfoil = joukowski_airfoil(centre, c, airfoil_points)
    exact = lambda x: joukowski_flow(x[0], x[1], centre, c, speed, alpha)[0]  # noqa: E731
    flow = solve_airfoil(airfoil, speed, alpha, 1.0, far_radius, far_points, (0.0, 0.0), near_radius, exact, order)
    with np.errstate(divide="ignore", invalid="ignore"):
        _, velocity, gamma = joukowski_flow(flow["points"][:, 0], flow["points"][:, 1], centre, c, speed, alpha)
    return {**flow, "exact_velocity": np.where(np.isfinite(velocity), velocity, np.nan), "exact_gamma": gamma}
