"""What the finite-element generators share: the mesh extra's libraries, meshing a polygonal domain with
``triangle``, scikit-fem meshes and bases, and values of an FE function's gradient at the mesh's vertices.

scikit-fem and triangle are the ``mesh`` extra (``pip install 'opformer[mesh]'``), imported when a solver runs;
without them :func:`fem_libraries` raises a one-line ``ConfigError`` naming the extra.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from opformer.errors import ConfigError
from opformer.extras import require
from opformer.meshes import cell_measures

#: The vertices of the reference triangle, in the order of a cell's vertices (scikit-fem's affine map).
REFERENCE_VERTICES = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


def fem_libraries() -> tuple[ModuleType, ModuleType]:
    """``(skfem, triangle)``; ``ConfigError`` naming the ``mesh`` extra when either is missing."""
    return (require("skfem", "mesh", "the finite-element generators"),
            require("triangle", "mesh", "the finite-element generators"))


def loop_segments(start: int, count: int) -> np.ndarray:
    """The ``count`` segments ``(start + k, start + k + 1)`` of a closed loop of ``count`` vertices."""
    k = np.arange(count)
    return np.stack([start + k, start + (k + 1) % count], axis=1)


def triangulate(loops: list[np.ndarray], holes: list[tuple[float, float]], max_area: float,
                min_angle: float = 30.0, regions: list[tuple[float, float, float]] = ()
                ) -> tuple[np.ndarray, np.ndarray]:
    """A quality Delaunay triangulation ``(points (n, 2), triangles (m, 3))`` of the region bounded by the closed
    polygons ``loops`` (each ``(k, 2)``, not repeating its first vertex), with a point inside each hole.

    The loops' vertices are kept as given and no point is added on the boundary (triangle's ``Y``), so a curved
    boundary is exactly as fine as its polygon; inside, triangles are at most ``max_area`` with angles of at
    least ``min_angle`` degrees (a cell on a boundary edge cannot be smaller than that edge allows), graded from
    the boundary's spacing; ``regions`` ``(x, y, area)`` give the part
    of the domain around ``(x, y)`` (bounded by the loops) its own largest area. The output's first vertices are
    the loops', in order. Triangles are counter-clockwise."""
    _, triangle = fem_libraries()
    vertices = np.concatenate(loops)
    starts = np.cumsum([0] + [len(loop) for loop in loops[:-1]])
    segments = np.concatenate([loop_segments(s, len(loop)) for s, loop in zip(starts, loops)])
    geometry = {"vertices": vertices, "segments": segments}
    if holes:
        geometry["holes"] = np.asarray(holes, dtype=np.float64)
    switches = f"pq{min_angle:g}Ya{max_area:.12g}"
    if regions:
        geometry["regions"] = np.array([[x, y, k, area] for k, (x, y, area) in enumerate(regions)])
        switches += "a"
    mesh = triangle.triangulate(geometry, switches)
    points, cells = np.asarray(mesh["vertices"], dtype=np.float64), np.asarray(mesh["triangles"], dtype=np.int64)
    p = points[cells]
    turn = (p[:, 1, 0] - p[:, 0, 0]) * (p[:, 2, 1] - p[:, 0, 1]) - (p[:, 1, 1] - p[:, 0, 1]) * (p[:, 2, 0] - p[:, 0, 0])
    cells[turn < 0] = cells[turn < 0][:, [0, 2, 1]]
    return points, cells


def skfem_mesh(points: np.ndarray, cells: np.ndarray):
    """The scikit-fem triangle mesh of ``points`` (n, 2) and ``cells`` (m, 3)."""
    skfem, _ = fem_libraries()
    return skfem.MeshTri(np.ascontiguousarray(points.T), np.ascontiguousarray(cells.T))


def lagrange_element(order: int, vector: bool = False):
    """The P1 or P2 Lagrange element on triangles (a vector element of two components with ``vector``)."""
    skfem, _ = fem_libraries()
    if order not in (1, 2):
        raise ConfigError(f"element order {order}: expected 1 or 2")
    element = skfem.ElementTriP1() if order == 1 else skfem.ElementTriP2()
    return skfem.ElementVector(element) if vector else element


def vertex_gradients(mesh, element, dofs: np.ndarray) -> np.ndarray:
    """The gradient of the FE function ``dofs`` at each vertex of ``mesh``: ``(n, 2)`` for a scalar element,
    ``(n, 2, 2)`` (component, derivative) for a vector one.

    Each cell's gradient is evaluated at its own vertices and the cells at a vertex are averaged, weighted by
    their areas (the recovery of a continuous field from the cell-wise gradients)."""
    skfem, _ = fem_libraries()
    basis = skfem.Basis(mesh, element, quadrature=(REFERENCE_VERTICES, np.full(3, 1.0 / 6.0)))
    grad = np.asarray(basis.interpolate(dofs).grad)  # (..., 2, cells, 3)
    cells = mesh.t.T
    area = cell_measures(mesh.p.T, cells, "triangle")
    values = np.moveaxis(grad, (-2, -1), (0, 1)) * area[:, None].reshape((-1, 1) + (1,) * (grad.ndim - 2))
    total = np.zeros((mesh.p.shape[1],) + values.shape[2:])
    np.add.at(total, cells.reshape(-1), values.reshape((-1,) + values.shape[2:]))
    weight = np.zeros(mesh.p.shape[1])
    np.add.at(weight, cells.reshape(-1), np.repeat(area, 3))
    return total / weight.reshape((-1,) + (1,) * (total.ndim - 1))


def l2_error(mesh, element, dofs: np.ndarray, exact, gradient: bool = False, intorder: int = 6) -> float:
    """``sqrt(integral |u_h - u|^2)`` of the FE function ``dofs`` against ``exact(x)`` (x of shape (2, ...); the
    value's shape is the element's: (...) scalar, (2, ...) vector), or of the gradients with ``gradient``
    (``exact`` then gives (2, ...) or (2, 2, ...)), by a quadrature exact to degree ``intorder``."""
    skfem, _ = fem_libraries()
    basis = skfem.Basis(mesh, element, intorder=intorder)

    @skfem.Functional
    def squared(w):
        field = w["uh"].grad if gradient else w["uh"]
        difference = np.asarray(field) - exact(w.x)
        return np.sum(difference.reshape((-1,) + difference.shape[-2:]) ** 2, axis=0)

    return float(np.sqrt(skfem.asm(squared, basis, uh=basis.interpolate(dofs))))
