"""What the finite-element generators share (opformer.pde.fem): meshes of polygons, vertex gradients, L2 errors
and the one-line error without the mesh extra."""

import sys

import numpy as np
import pytest

pytest.importorskip("skfem")
pytest.importorskip("triangle")

from opformer.errors import ConfigError  # noqa: E402
from opformer.meshes import lumped_weights  # noqa: E402
from opformer.pde.fem import (fem_libraries, l2_error, lagrange_element, skfem_mesh, triangulate,  # noqa: E402
                              vertex_gradients)

_T = np.linspace(0, 1, 10, endpoint=False)
#: The rectangle [0, 2] x [0, 1], its boundary cut into pieces of 0.1 to 0.2 (triangle adds no boundary points).
SQUARE = np.concatenate([np.stack([2 * _T, 0 * _T], 1), np.stack([2 + 0 * _T, _T], 1),
                         np.stack([2 - 2 * _T, 1 + 0 * _T], 1), np.stack([0 * _T, 1 - _T], 1)])
HOLE = 0.5 + 0.2 * np.stack([np.cos(np.linspace(0, 2 * np.pi, 12, endpoint=False)),
                             np.sin(np.linspace(0, 2 * np.pi, 12, endpoint=False))], 1)


def test_triangulate_keeps_the_loops_vertices_first_and_honours_holes_and_areas():
    points, cells = triangulate([SQUARE, HOLE], [(0.5, 0.5)], max_area=0.03)
    np.testing.assert_array_equal(points[:52], np.concatenate([SQUARE, HOLE]))
    hole_area = 0.5 * 12 * 0.2**2 * np.sin(2 * np.pi / 12)
    assert lumped_weights(points, cells, "triangle").sum() == pytest.approx(2.0 - hole_area, rel=1e-12)
    p = points[cells]
    signed = (p[:, 1, 0] - p[:, 0, 0]) * (p[:, 2, 1] - p[:, 0, 1]) - (p[:, 1, 1] - p[:, 0, 1]) * (p[:, 2, 0] - p[:, 0, 0])
    assert np.all(signed > 0) and 0.5 * signed.max() <= 0.03 + 1e-12
    fine, _ = triangulate([SQUARE], [], max_area=1.0, regions=[(1.0, 0.5, 0.002)])
    assert len(fine) > 4 * len(triangulate([SQUARE], [], max_area=1.0)[0])


@pytest.mark.parametrize("order", [1, 2])
def test_gradients_and_errors_of_an_interpolated_polynomial_are_exact(order):
    points, cells = triangulate([SQUARE], [], max_area=0.05)
    mesh = skfem_mesh(points, cells)
    element = lagrange_element(order)
    from skfem import Basis

    basis = Basis(mesh, element)
    x, y = basis.doflocs
    u = 3 * x - 2 * y + 1 + (order - 1) * x * y
    grad = vertex_gradients(mesh, element, u)
    expected = np.stack([3 + (order - 1) * points[:, 1], -2 + (order - 1) * points[:, 0]], 1)
    if order == 1:
        np.testing.assert_allclose(grad, expected, atol=1e-12)
    else:  # the cells' gradients are exact at the vertices, so their average is too
        np.testing.assert_allclose(grad, expected, atol=1e-10)
    exact = lambda p: 3 * p[0] - 2 * p[1] + 1 + (order - 1) * p[0] * p[1]  # noqa: E731
    assert l2_error(mesh, element, u, exact) < 1e-12
    assert l2_error(mesh, element, u, lambda p: exact(p) + 1.0) == pytest.approx(np.sqrt(2.0))


def test_without_the_mesh_extra_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "triangle", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match=r"^the finite-element generators: the triangle package is missing; "
                                          r"pip install 'opformer\[mesh\]'$"):
        fem_libraries()
