"""Linear elasticity on triangle meshes (P2 displacement, plane strain): Geo-FNO's unit cell with a random void
loaded in tension, and Kirsch's plate with a circular hole, the exact solution that verifies it.

The unit cell (Li et al. 2022, Geo-FNO, Sec. 4.1) is ``[0, 1]^2`` with a void at its centre whose radius varies
with the angle: ``r(theta) = 0.2 + 0.2 / (1 + exp(g(theta)))``, ``g`` a periodic Gaussian random field on the
circle with covariance ``4^2 (-d^2/dtheta^2 + 3^2)^-1``, stored, as Geo-FNO's ``Random_UnitCell_rr_10.npy``
stores it, as 42 radii at the angles ``2 pi k / 42`` (the settings ``radius_00`` ... ``radius_41``); the
boundary between them is their trigonometric interpolant. (The field's law is the paper's as we read it;
``../shared/spec/mesh.md`` confirms only the 42 radii, and it is not checked against the published radii.) The bottom edge is clamped and the top edge pulled
by the traction ``(0, traction)``; the other edges and the void are free.

The material is **linear** (Hooke's law with Lame constants from ``young``, ``poisson``, plane strain), not
Geo-FNO's incompressible Rivlin-Saunders hyperelastic one: the stresses are those of small strains, linear in
the load (and, with this clamped / traction loading, independent of ``young``).

Stored at the mesh's vertices: the stress components ``sigma_xx, sigma_yy, sigma_xy`` (each cell's P1 stress
at its vertices, averaged over the cells at a vertex by area) and the von Mises stress of the plane-strain
tensor (``sigma_zz = poisson (sigma_xx + sigma_yy)``), Geo-FNO's target.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from opformer.errors import ConfigError
from opformer.meshes import MeshSample
from opformer.pde.fem import fem_libraries, lagrange_element, skfem_mesh, triangulate, vertex_gradients
from opformer.pde.samples import check_positive

#: Geo-FNO's parametrisation of the void: radii at this many equally spaced angles.
VOID_RADII = 42
#: ``r = RADIUS_BASE + RADIUS_SPAN / (1 + exp(g))``: between 0.2 and 0.4.
RADIUS_BASE, RADIUS_SPAN = 0.2, 0.2
#: The random field ``g``: ``SIGMA^2 (-d^2/dtheta^2 + TAU^2)^-1`` on the circle.
FIELD_SIGMA, FIELD_TAU = 4.0, 3.0

Predicate = Callable[[np.ndarray], np.ndarray]
VectorField = Callable[[np.ndarray], np.ndarray]


def lame(young: float, poisson: float) -> tuple[float, float]:
    """The Lame constants ``(lambda, mu)`` of plane strain."""
    return young * poisson / ((1 + poisson) * (1 - 2 * poisson)), young / (2 * (1 + poisson))


def solve_elasticity(points: np.ndarray, cells: np.ndarray, *, young: float, poisson: float,
                     fixed: Iterable[tuple[int | None, Predicate]] = (),
                     tractions: Iterable[tuple[Predicate, VectorField]] = (),
                     body_force: VectorField | None = None, order: int = 2):
    """The displacement of ``-div sigma(u) = body_force`` on the triangle mesh: ``(mesh, element, dofs)``.

    ``fixed``: ``(component, where)`` pairs, the component (0: x, 1: y, None: both) held at 0 on the boundary
    facets whose midpoints satisfy ``where(x)`` (x of shape (2, ...)); ``tractions``: ``(where, t)`` pairs, the
    traction ``t(x)`` (2, ...) on those facets; the rest of the boundary is free."""
    skfem, _ = fem_libraries()
    from skfem.helpers import ddot, dot, sym_grad, trace, eye

    lam, mu = lame(young, poisson)
    mesh = skfem_mesh(points, cells)
    element = lagrange_element(order, vector=True)
    basis = skfem.Basis(mesh, element, intorder=2 * order)

    @skfem.BilinearForm
    def stiffness(u, v, w):
        strain = sym_grad(u)
        return ddot(eye(lam * trace(strain), 2) + 2 * mu * strain, sym_grad(v))

    matrix = skfem.asm(stiffness, basis)
    load = np.zeros(basis.N)
    if body_force is not None:
        load += skfem.asm(skfem.LinearForm(lambda v, w: dot(body_force(w.x), v)), basis)
    for where, traction in tractions:
        facets = mesh.facets_satisfying(where, boundaries_only=True)
        if len(facets):
            facet_basis = skfem.FacetBasis(mesh, element, facets=facets, intorder=2 * order + 2)
            load += skfem.asm(skfem.LinearForm(lambda v, w, t=traction: dot(t(w.x), v)), facet_basis)
    held = [np.zeros(0, dtype=np.int64)]
    for component, where in fixed:
        facets = mesh.facets_satisfying(where, boundaries_only=True)
        dofs = basis.get_dofs(facets)
        held += [dofs.all(name) for name in (["u^1", "u^2"] if component is None else [f"u^{component + 1}"])]
    u = skfem.solve(*skfem.condense(matrix, load, D=np.unique(np.concatenate(held))))
    return mesh, element, u


def vertex_stress(mesh, element, u: np.ndarray, young: float, poisson: float) -> np.ndarray:
    """``(n, 3)``: ``sigma_xx, sigma_yy, sigma_xy`` at the mesh's vertices (cells' stresses averaged by area)."""
    lam, mu = lame(young, poisson)
    grad = vertex_gradients(mesh, element, u)  # (n, component, derivative)
    exx, eyy, exy = grad[:, 0, 0], grad[:, 1, 1], 0.5 * (grad[:, 0, 1] + grad[:, 1, 0])
    return np.stack([lam * (exx + eyy) + 2 * mu * exx, lam * (exx + eyy) + 2 * mu * eyy, 2 * mu * exy], axis=1)


def von_mises(stress: np.ndarray, poisson: float) -> np.ndarray:
    """The von Mises stress of plane strain from ``(..., 3)`` in-plane components (``sigma_zz`` from ``poisson``)."""
    sxx, syy, sxy = stress[..., 0], stress[..., 1], stress[..., 2]
    szz = poisson * (sxx + syy)
    return np.sqrt(0.5 * ((sxx - syy) ** 2 + (syy - szz) ** 2 + (szz - sxx) ** 2) + 3 * sxy**2)


def kirsch_stress(x: np.ndarray, y: np.ndarray, radius: float, tension: float) -> np.ndarray:
    """Kirsch's exact stress ``(..., 3)`` (xx, yy, xy) around a circular hole of ``radius`` at the origin in an
    infinite plate under the tension ``tension`` along x."""
    r2, theta = x**2 + y**2, np.arctan2(y, x)
    q = radius**2 / r2
    c2, s2 = np.cos(2 * theta), np.sin(2 * theta)
    srr = tension / 2 * (1 - q) + tension / 2 * (1 - 4 * q + 3 * q**2) * c2
    stt = tension / 2 * (1 + q) - tension / 2 * (1 + 3 * q**2) * c2
    srt = -tension / 2 * (1 + 2 * q - 3 * q**2) * s2
    c, s = np.cos(theta), np.sin(theta)
    return np.stack([srr * c**2 + stt * s**2 - 2 * srt * s * c, srr * s**2 + stt * c**2 + 2 * srt * s * c,
                     (srr - stt) * s * c + srt * (c**2 - s**2)], axis=-1)


def _graded(start: float, stop: float, first: float, last: float) -> np.ndarray:
    """Points from ``start`` to ``stop`` (both included) whose spacing grows geometrically from ``first`` to
    about ``last``."""
    length, growth = stop - start, 1.0
    if last > first:
        growth = 1.0 + (last - first) / length  # spacing h_k = first * growth^k reaches `last` over the edge
    steps, position = [start], start
    h = first
    while position + h < stop - 0.5 * h:
        position += h
        steps.append(position)
        h = min(h * growth, last)
    return np.append(np.array(steps), stop)


def kirsch_plate(radius: float, width: float, hole_points: int, far_spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """The quarter ``[0, width]^2`` minus the disc of ``radius``: ``(points, triangles)``, ``hole_points`` on the
    quarter circle, spacing grading to ``far_spacing`` along the symmetry lines."""
    near = 0.5 * np.pi * radius / (hole_points - 1)
    angles = np.linspace(0.0, 0.5 * np.pi, hole_points)
    arc = radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)  # (a, 0) -> (0, a)
    along = _graded(radius, width, near, far_spacing)
    outer = np.linspace(0.0, width, max(2, int(np.ceil(width / far_spacing))) + 1)
    loop = np.concatenate([
        np.stack([along, np.zeros_like(along)], 1)[:-1],  # y = 0: (a, 0) -> (W, 0)
        np.stack([np.full_like(outer, width), outer], 1)[:-1],  # x = W
        np.stack([outer[::-1], np.full_like(outer, width)], 1)[:-1],  # y = W
        np.stack([np.zeros_like(along), along[::-1]], 1)[:-1],  # x = 0: (0, W) -> (0, a)
        arc[::-1][:-1],  # the hole: (0, a) -> (a, 0)
    ])
    return triangulate([loop], [], max_area=0.5 * far_spacing**2)


def solve_kirsch(radius: float = 1.0, width: float = 5.0, hole_points: int = 65, far_spacing: float = 0.5,
                 tension: float = 1.0, poisson: float = 0.3, order: int = 2,
                 exact_traction: bool = True) -> dict[str, np.ndarray]:
    """A quarter of Kirsch's plate (hole at the origin, the plate ``[-width, width]^2``): symmetry on the axes;
    on the outer edges Kirsch's exact traction (``exact_traction``: the infinite plate's solution, without a
    finite width's correction) or the uniform tension of a finite plate (the plate's ``x = width`` edge pulled,
    ``y = width`` free).

    Returns ``points``, ``cells``, the vertex ``stress`` (n, 3) and Kirsch's ``exact`` stress there."""
    points, cells = kirsch_plate(radius, width, hole_points, far_spacing)
    exact = lambda x: np.moveaxis(kirsch_stress(x[0], x[1], radius, tension), -1, 0)  # noqa: E731
    edge = 1e-9 * width
    tractions = [(lambda x: x[0] > width - edge, lambda x: exact(x)[[0, 2]]),
                 (lambda x: x[1] > width - edge, lambda x: exact(x)[[2, 1]])]
    if not exact_traction:
        tractions = [(lambda x: x[0] > width - edge, lambda x: np.stack([tension + 0 * x[0], 0 * x[0]]))]
    fixed = [(0, lambda x: x[0] < edge), (1, lambda x: x[1] < edge)]
    mesh, element, u = solve_elasticity(points, cells, young=1.0, poisson=poisson, fixed=fixed,
                                        tractions=tractions, order=order)
    return {"points": points, "cells": cells, "stress": vertex_stress(mesh, element, u, 1.0, poisson),
            "exact": kirsch_stress(points[:, 0], points[:, 1], radius, tension)}


def void_radii(rng: np.random.Generator, count: int = VOID_RADII) -> np.ndarray:
    """``count`` radii of a random void at the angles ``2 pi k / count``: ``0.2 + 0.2 / (1 + exp(g))``, with
    ``g = sigma (xi_0 / tau + sum_{1 <= k < count / 2} (a_k cos k theta + b_k sin k theta) / sqrt(k^2 + tau^2))``
    and ``xi_0, a_k, b_k`` standard normal (the field's Karhunen-Loeve sum, cut below the samples' Nyquist mode)."""
    modes = np.arange(1, (count + 1) // 2)
    angles = 2 * np.pi * np.arange(count) / count
    a, b = rng.standard_normal((2, len(modes)))
    scale = 1.0 / np.sqrt(modes**2 + FIELD_TAU**2)
    field = rng.standard_normal() / FIELD_TAU + (scale * (a * np.cos(np.outer(angles, modes))
                                                          + b * np.sin(np.outer(angles, modes)))).sum(axis=1)
    return RADIUS_BASE + RADIUS_SPAN / (1 + np.exp(FIELD_SIGMA * field))


def void_boundary(radii: np.ndarray, points: int, centre: tuple[float, float] = (0.5, 0.5)) -> np.ndarray:
    """``points`` vertices (counter-clockwise) of the void whose radius is the trigonometric interpolant of
    ``radii`` (given at the angles ``2 pi k / len(radii)``)."""
    spectrum = np.fft.rfft(radii)
    fine = np.fft.irfft(spectrum, n=len(radii)) if points == len(radii) else _resample(spectrum, len(radii), points)
    angles = 2 * np.pi * np.arange(points) / points
    return np.stack([centre[0] + fine * np.cos(angles), centre[1] + fine * np.sin(angles)], axis=1)


def _resample(spectrum: np.ndarray, count: int, points: int) -> np.ndarray:
    """The trigonometric interpolant of ``count`` equispaced values (their ``rfft``) at ``points`` angles."""
    if count % 2 == 0:  # the Nyquist mode of an even count splits between +-count/2
        spectrum = spectrum.copy()
        spectrum[-1] *= 0.5
    padded = np.zeros(points // 2 + 1, dtype=complex)
    padded[: len(spectrum)] = spectrum
    return np.fft.irfft(padded, n=points) * points / count


def unit_cell_mesh(radii: np.ndarray, resolution: int, grading: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The unit square minus the void of ``radii``, ``resolution`` segments on each edge of the square and the
    void's boundary at about the same spacing ``h = 1 / resolution``: ``(points, triangles)``.

    ``grading`` g > 1 grades the mesh: the void's boundary at the spacing ``h / sqrt(g)``, the square's edges and
    the largest cells at ``h sqrt(g)`` (about ``resolution / sqrt(g)`` segments an edge), so that the cells grow
    about g-fold from the void outwards; the domain is the same (the void is the same curve, sampled finer)."""
    h = 1.0 / resolution
    far = max(2, int(round(resolution / np.sqrt(grading))))
    edge = np.linspace(0.0, 1.0, far + 1)[:-1]
    square = np.concatenate([np.stack([edge, 0 * edge], 1), np.stack([1 + 0 * edge, edge], 1),
                             np.stack([1 - edge, 1 + 0 * edge], 1), np.stack([0 * edge, 1 - edge], 1)])
    void = void_boundary(radii, max(VOID_RADII, int(np.ceil(2 * np.pi * radii.mean() * np.sqrt(grading) / h))))
    return triangulate([square, void], [(0.5, 0.5)], max_area=0.5 * h * h * grading)


def unit_cell_sample(radii: np.ndarray, resolution: int, traction: float, young: float,
                     poisson: float, grading: float = 1.0) -> MeshSample:
    """One unit cell solved on its (``grading``: graded) mesh: ``stress`` (n, 3) and ``von_mises`` (n, 1)."""
    points, cells = unit_cell_mesh(radii, resolution, grading)
    edge = 1e-9
    mesh, element, u = solve_elasticity(
        points, cells, young=young, poisson=poisson, fixed=[(None, lambda x: x[1] < edge)],
        tractions=[(lambda x: x[1] > 1 - edge, lambda x: np.stack([0 * x[0], traction + 0 * x[0]]))])
    stress = vertex_stress(mesh, element, u, young, poisson)
    return MeshSample(points=points, cells=cells, cell_kind="triangle",
                      fields={"von_mises": von_mises(stress, poisson)[:, None], "stress": stress},
                      settings={f"radius_{k:02d}": float(r) for k, r in enumerate(radii)})


def generate_elasticity(samples: int, resolution: int = 28, seed: int = 0, progress=None, first: int = 0,
                        traction: float = 100.0, young: float = 1.0, poisson: float = 0.45, grading: float = 1.0
                        ) -> tuple[list[MeshSample], dict]:
    """``samples`` unit cells with random voids (Geo-FNO's elasticity set, linear material), sample ``i`` from
    ``SeedSequence(seed).spawn(first + samples)[first + i]``; ``(samples, settings)``. The void is drawn before
    and apart from the mesh: another ``resolution`` or ``grading`` (:func:`unit_cell_mesh`) meshes the same
    cells."""
    if int(resolution) != resolution or resolution < 8:
        raise ConfigError(f"resolution={resolution} is invalid: expected an integer >= 8 (segments per edge)")
    check_positive("young", young)
    if not 0 <= poisson < 0.5:
        raise ConfigError(f"poisson={poisson} is invalid: expected 0 <= poisson < 0.5")
    check_positive("samples", samples)
    if not grading >= 1:
        raise ConfigError(f"grading={grading} is invalid: expected at least 1 (1: a uniform mesh)")
    out = []
    for sequence in np.random.SeedSequence(seed).spawn(first + samples)[first:]:
        radii = void_radii(np.random.default_rng(sequence))
        out.append(unit_cell_sample(radii, resolution, traction, young, poisson, grading))
        if progress is not None:
            progress(1)
    settings = {"pde": {"name": "elasticity", "traction": traction, "young": young, "poisson": poisson,
                        "resolution": resolution, "grading": grading, "void_radii": VOID_RADII,
                        "radius": f"{RADIUS_BASE} + {RADIUS_SPAN} / (1 + exp(g)), "
                                  f"g ~ GRF {FIELD_SIGMA}^2 (-d2/dtheta2 + {FIELD_TAU}^2)^-1"},
                "solver": {"element": "P2", "plane": "strain", "material": "linear (Hooke)",
                           "mesher": "triangle", "stress": "cell P1 stress at vertices, area-averaged"}}
    return out, settings
