"""The mesh benchmark's random half of a mesh (benchmarks/systems/mesh_accuracy.py): re-triangulated within the
original domain, its weights re-lumped, its fields the original values at the kept points."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from benchmarks.systems.mesh_accuracy import subsampled  # noqa: E402
from opformer.meshes import MeshSample  # noqa: E402


def square_with_hole(n: int = 21) -> MeshSample:
    """The unit square less (0.3, 0.7)^2, from an n x n grid's triangles: the field ``x + 2 y``."""
    axis = np.linspace(0.0, 1.0, n)
    points = np.stack(np.meshgrid(axis, axis, indexing="ij"), -1).reshape(-1, 2)
    index = np.arange(n * n).reshape(n, n)
    a, b, c, d = index[:-1, :-1].ravel(), index[1:, :-1].ravel(), index[1:, 1:].ravel(), index[:-1, 1:].ravel()
    cells = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    centroid = points[cells].mean(axis=1)
    cells = cells[~np.all((centroid > 0.3) & (centroid < 0.7), axis=1)]
    used = np.unique(cells)
    renumber = np.full(len(points), -1)
    renumber[used] = np.arange(len(used))
    points = points[used]
    return MeshSample(points=points, cells=renumber[cells], cell_kind="triangle",
                      fields={"u": (points[:, 0] + 2 * points[:, 1])[:, None]})


def test_a_random_half_of_a_mesh_is_triangulated_within_its_domain_and_relumped():
    mesh = square_with_hole()
    half = subsampled(mesh, seed=3)
    assert 0.4 * len(mesh.points) < len(half.points) <= len(mesh.points) // 2
    np.testing.assert_array_equal(half.fields["u"][:, 0], half.points[:, 0] + 2 * half.points[:, 1])
    centroid = half.points[half.cells].mean(axis=1)
    assert not np.any(np.all((centroid > 0.3 + 1e-9) & (centroid < 0.7 - 1e-9), axis=1))  # none in the hole
    # the domain's area within a few percent: the random boundary cuts some off, a triangle whose centroid is
    # outside the hole may reach into it
    assert np.all(half.weights > 0) and half.weights.sum() == pytest.approx(mesh.weights.sum(), rel=0.05)
    # lumped weights integrate a linear function to the mesh's own exactness: sum w u against the cells' integral
    e1, e2 = (half.points[half.cells[:, k]] - half.points[half.cells[:, 0]] for k in (1, 2))
    area = 0.5 * np.abs(e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0])
    exact = np.sum(area * half.fields["u"][half.cells, 0].mean(axis=1))
    assert np.sum(half.weights * half.fields["u"][:, 0]) == pytest.approx(exact, rel=0.05)
    assert np.array_equal(subsampled(mesh, seed=3).points, half.points)  # seeded
