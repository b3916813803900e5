"""Meshes: points, cells and the quadrature weight of each point (the area or volume it stands for).

A function sampled at a mesh's points is integrated as ``sum_i w_i f(x_i)``. With the lumped mass of P1 cells as
``w`` the sum converges to the integral whatever the mesher's point density (``../shared/spec/mesh.md``), which is
what makes a quadrature-weighted model an operator on functions rather than on point sets. Stored weights are the
measure itself (they sum to the domain's area or volume); models and metrics normalise them per sample.

numpy and scipy only: the solvers (``opformer.pde``) use this module too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from opformer.errors import DataError

#: Cell kinds and their number of vertices (meshio's names).
CELL_VERTICES = {"triangle": 3, "quad": 4, "tetra": 4}
#: How a sample's weights were obtained: lumped from its cells, or estimated from the points alone.
WEIGHTS_LUMPED, WEIGHTS_ESTIMATED = "lumped", "knn-estimate"


def cell_kind_of(cells: np.ndarray, dim: int) -> str:
    """The kind of ``cells`` from their vertices and the points' dimension: 3 a triangle, 4 a quad in 2D or a
    tetrahedron in 3D."""
    vertices = cells.shape[1] if cells.ndim == 2 else 0
    kinds = {(3, 2): "triangle", (4, 2): "quad", (4, 3): "tetra"}
    if (vertices, dim) not in kinds:
        raise DataError(f"cells of shape {tuple(cells.shape)} on {dim}D points: expected triangles or quads in 2D, "
                        "tetrahedra in 3D")
    return kinds[vertices, dim]


def cell_measures(points: np.ndarray, cells: np.ndarray, kind: str) -> np.ndarray:
    """The area (triangles, quads in 2D) or volume (tetrahedra) of each cell, positive whatever the orientation.

    A quad's vertices go round its boundary; its area is the shoelace formula, exact for any simple quad."""
    if kind not in CELL_VERTICES:
        raise DataError(f"cell kind {kind!r}: expected one of {', '.join(CELL_VERTICES)}")
    if cells.ndim != 2 or cells.shape[1] != CELL_VERTICES[kind]:
        raise DataError(f"{kind} cells of shape {tuple(cells.shape)}: expected (cells, {CELL_VERTICES[kind]})")
    p = np.asarray(points, dtype=np.float64)[cells]
    if kind == "tetra":
        edges = p[:, 1:] - p[:, :1]
        return np.abs(np.linalg.det(edges)) / 6.0
    if p.shape[-1] != 2:
        raise DataError(f"{kind} cells need 2D points: the points have {p.shape[-1]} coordinates")
    x, y = p[..., 0], p[..., 1]
    return 0.5 * np.abs(np.sum(x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y, axis=1))


def lumped_weights(points: np.ndarray, cells: np.ndarray, kind: str) -> np.ndarray:
    """The lumped mass of each point: ``sum over the cells T touching i of |T| / (vertices of T)``.

    Their sum is the mesh's area or volume; ``sum_i w_i f(x_i)`` integrates P1 functions on triangles and
    tetrahedra to second order in the element size. A point no cell touches gets 0."""
    measures = cell_measures(points, cells, kind)
    weights = np.zeros(len(points), dtype=np.float64)
    np.add.at(weights, cells.reshape(-1), np.repeat(measures / cells.shape[1], cells.shape[1]))
    return weights


def estimated_weights(points: np.ndarray, neighbours: int = 8) -> np.ndarray:
    """Weights of a point cloud without cells: the ball out to each point's ``neighbours``-th nearest neighbour
    holds about ``neighbours`` points, so a point stands for ``volume(ball) / neighbours``.

    An estimate (flagged as such where stored): a k-nearest-neighbour density, biased near the boundary, which is
    why cells are preferred wherever they exist."""
    from scipy.spatial import cKDTree

    points = np.asarray(points, dtype=np.float64)
    n, d = points.shape
    k = min(neighbours, n - 1)
    if k < 1:
        raise DataError(f"a point cloud of {n} points: at least 2 are needed to estimate weights")
    radius = cKDTree(points).query(points, k=k + 1)[0][:, -1]
    ball = math.pi ** (d / 2) / math.gamma(d / 2 + 1)
    return ball * radius**d / k


@dataclass
class MeshSample:
    """One sample on a mesh: ``points`` (n, d), per-point ``fields`` (name -> (n, channels) or, for a trajectory,
    (time, n, channels)), optional ``cells`` (m, vertices) of ``cell_kind``, the quadrature ``weights`` (n,) and
    how they were found, and, for a structured curvilinear mesh, its index ``shape`` (points in (i, j) order)."""

    points: np.ndarray
    fields: dict[str, np.ndarray]
    cells: np.ndarray | None = None
    cell_kind: str | None = None
    weights: np.ndarray | None = None
    weights_from: str = WEIGHTS_LUMPED
    shape: tuple[int, ...] | None = None
    settings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Weights from the cells where none are given, else estimated from the points (and marked so)."""
        if self.weights is None:
            if self.cells is not None:
                self.cell_kind = self.cell_kind or cell_kind_of(self.cells, self.points.shape[1])
                self.weights = lumped_weights(self.points, self.cells, self.cell_kind)
                self.weights_from = WEIGHTS_LUMPED
            else:
                self.weights = estimated_weights(self.points)
                self.weights_from = WEIGHTS_ESTIMATED


def structured_quads(shape: tuple[int, int]) -> np.ndarray:
    """The quad cells of a structured (i, j) mesh whose points are stored in C order (point ``i * J + j``): each
    cell's vertices (i, j), (i+1, j), (i+1, j+1), (i, j+1) go round its boundary."""
    rows, cols = shape
    index = np.arange(rows * cols).reshape(rows, cols)
    corners = (index[:-1, :-1], index[1:, :-1], index[1:, 1:], index[:-1, 1:])
    return np.stack([c.reshape(-1) for c in corners], axis=1)
