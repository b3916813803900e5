"""Quadrature weights of meshes: exact cell measures, second-order integration, estimates on point clouds."""

import numpy as np
import pytest
from scipy.spatial import Delaunay

from opformer.errors import DataError
from opformer.meshes import (WEIGHTS_ESTIMATED, WEIGHTS_LUMPED, MeshSample, cell_measures, estimated_weights,
                             lumped_weights)


def square_mesh(n: int, graded: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A Delaunay triangulation of (n + 1)^2 points of the unit square; graded: dense near x = 0."""
    s = np.linspace(0.0, 1.0, n + 1)
    x = s**2 if graded else s
    points = np.stack(np.meshgrid(x, s, indexing="ij"), -1).reshape(-1, 2)
    return points, Delaunay(points).simplices


def test_cell_measures_are_exact_for_each_kind():
    points = np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 1.0], [0.0, 1.0]])
    assert cell_measures(points, np.array([[0, 1, 2]]), "triangle") == pytest.approx([1.0])
    assert cell_measures(points, np.array([[0, 2, 1]]), "triangle") == pytest.approx([1.0])  # orientation
    assert cell_measures(points, np.array([[0, 1, 2, 3]]), "quad") == pytest.approx([2.0])
    cube = np.array([[0.0, 0, 0], [3, 0, 0], [0, 2, 0], [0, 0, 1]])
    assert cell_measures(cube, np.array([[0, 1, 2, 3]]), "tetra") == pytest.approx([1.0])


@pytest.mark.parametrize("graded", [False, True])
def test_lumped_weights_integrate_to_second_order_whatever_the_grading(graded):
    f = lambda p: np.exp(p[:, 0]) * np.cos(p[:, 1])  # noqa: E731
    exact = (np.e - 1.0) * np.sin(1.0)
    errors = []
    for n in (8, 16, 32):
        points, cells = square_mesh(n, graded)
        w = lumped_weights(points, cells, "triangle")
        assert w.sum() == pytest.approx(1.0, rel=1e-12)
        errors.append(abs(w @ f(points) - exact))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders > 1.9)  # second order at least (a uniform lattice's symmetry gives more)


def test_a_point_cloud_gets_estimated_weights_and_a_mesh_lumped_ones():
    points, cells = square_mesh(20)
    with_cells = MeshSample(points, {"u": points[:, :1]}, cells=cells)
    assert with_cells.cell_kind == "triangle" and with_cells.weights_from == WEIGHTS_LUMPED
    cloud = MeshSample(points, {"u": points[:, :1]})
    assert cloud.weights_from == WEIGHTS_ESTIMATED
    interior = (points.min(1) > 0.2) & (points.max(1) < 0.8)
    # on a square lattice of spacing h the 8 nearest neighbours lie within sqrt(2) h: pi 2 h^2 / 8 each
    h = 1.0 / 20
    assert estimated_weights(points)[interior] == pytest.approx(np.pi * h**2 / 4, rel=1e-12)


def test_bad_cells_are_named():
    with pytest.raises(DataError, match=r"triangle cells of shape \(1, 4\)"):
        cell_measures(np.zeros((4, 2)), np.zeros((1, 4), dtype=int), "triangle")
    with pytest.raises(DataError, match="cell kind 'hexagon'"):
        cell_measures(np.zeros((4, 2)), np.zeros((1, 4), dtype=int), "hexagon")
