"""Linear elasticity (opformer.pde.elasticity): a manufactured solution's orders, Kirsch's plate with a hole,
Geo-FNO's random unit cell."""

import numpy as np
import pytest

pytest.importorskip("skfem")
pytest.importorskip("triangle")

from opformer.errors import ConfigError  # noqa: E402
from opformer.pde.elasticity import (generate_elasticity, kirsch_stress, lame, solve_elasticity,  # noqa: E402
                                     solve_kirsch, void_boundary, void_radii, von_mises)
from opformer.pde.fem import l2_error  # noqa: E402

YOUNG, POISSON = 2.0, 0.3


def square_mesh(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The unit square, n x n squares each cut into two triangles along a diagonal."""
    x = np.linspace(0, 1, n + 1)
    points = np.stack(np.meshgrid(x, x, indexing="ij"), -1).reshape(-1, 2)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    a, b, c, d = (i * (n + 1) + j), ((i + 1) * (n + 1) + j), ((i + 1) * (n + 1) + j + 1), (i * (n + 1) + j + 1)
    cells = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    return points, cells


def manufactured(x):
    """u = (s, s), s = sin(pi x) sin(pi y): zero on the square's boundary."""
    s = np.sin(np.pi * x[0]) * np.sin(np.pi * x[1])
    return np.stack([s, s])


def manufactured_gradient(x):
    sx, sy, cx, cy = np.sin(np.pi * x[0]), np.sin(np.pi * x[1]), np.cos(np.pi * x[0]), np.cos(np.pi * x[1])
    row = np.stack([np.pi * cx * sy, np.pi * sx * cy])
    return np.stack([row, row])


def manufactured_force(x):
    """-div sigma(u) = -mu lap u - (lambda + mu) grad div u for u = (s, s)."""
    lam, mu = lame(YOUNG, POISSON)
    s = np.sin(np.pi * x[0]) * np.sin(np.pi * x[1])
    cc = np.cos(np.pi * x[0]) * np.cos(np.pi * x[1])
    f = 2 * np.pi**2 * mu * s + (lam + mu) * np.pi**2 * (s - cc)
    return np.stack([f, f])


def manufactured_errors(n: int, order: int) -> tuple[float, float]:
    points, cells = square_mesh(n)
    mesh, element, u = solve_elasticity(points, cells, young=YOUNG, poisson=POISSON,
                                        fixed=[(None, lambda x: np.ones(x.shape[1:], dtype=bool))],
                                        body_force=manufactured_force, order=order)
    return (l2_error(mesh, element, u, manufactured),
            l2_error(mesh, element, u, manufactured_gradient, gradient=True))


@pytest.mark.parametrize("order", [1, 2])
def test_manufactured_solution_converges_at_the_elements_orders(order):
    (u8, g8), (u16, g16) = manufactured_errors(8, order), manufactured_errors(16, order)
    assert np.log2(u8 / u16) == pytest.approx(order + 1, abs=0.2)
    assert np.log2(g8 / g16) == pytest.approx(order, abs=0.2)


def test_kirsch_stress_is_three_times_the_tension_at_the_top_of_the_hole_and_free_on_it():
    theta = np.linspace(0, np.pi / 2, 7)
    stress = kirsch_stress(2 * np.cos(theta), 2 * np.sin(theta), radius=2.0, tension=5.0)
    normal = np.stack([np.cos(theta), np.sin(theta)], -1)
    traction = np.stack([stress[:, 0] * normal[:, 0] + stress[:, 2] * normal[:, 1],
                         stress[:, 2] * normal[:, 0] + stress[:, 1] * normal[:, 1]], -1)
    np.testing.assert_allclose(traction, 0, atol=1e-12)
    # sigma_theta = S (1 - 2 cos 2 theta) on the hole; far away the plate's uniform tension
    hoop = -np.sin(theta) * (-stress[:, 0] * np.sin(theta) + stress[:, 2] * np.cos(theta)) + np.cos(theta) * (
        -stress[:, 2] * np.sin(theta) + stress[:, 1] * np.cos(theta))
    np.testing.assert_allclose(hoop, 5.0 * (1 - 2 * np.cos(2 * theta)), atol=1e-12)
    np.testing.assert_allclose(kirsch_stress(np.array(1e4), np.array(3e3), 1.0, 5.0), [5.0, 0, 0], atol=1e-6)


def hole_top(result):
    return result["stress"][np.argmin(np.hypot(result["points"][:, 0], result["points"][:, 1] - 1.0)), 0]


def test_kirsch_concentration_factor_within_two_percent_and_the_field_converges():
    coarse, fine = solve_kirsch(hole_points=17, far_spacing=1.0), solve_kirsch(hole_points=65, far_spacing=0.25)
    assert hole_top(fine) == pytest.approx(3.0, rel=0.02)
    errors = [np.linalg.norm(r["stress"] - r["exact"]) / np.linalg.norm(r["exact"]) for r in (coarse, fine)]
    assert errors[1] < errors[0] / 3


@pytest.mark.slow
def test_kirsch_factor_of_a_large_finite_plate_under_uniform_tension():
    # a / W = 1 / 40: the finite width raises the factor by about 1%
    result = solve_kirsch(width=20.0, hole_points=65, far_spacing=2.0, exact_traction=False)
    assert hole_top(result) == pytest.approx(3.0, rel=0.02)


def test_void_radii_lie_in_geo_fnos_range_and_the_boundary_interpolates_them():
    radii = void_radii(np.random.default_rng(3))
    assert radii.shape == (42,) and np.all((radii > 0.2) & (radii < 0.4)) and radii.std() > 0
    boundary = void_boundary(radii, 42 * 4)
    np.testing.assert_allclose(np.hypot(*(boundary[::4] - 0.5).T), radii, atol=1e-12)


def test_von_mises_of_uniaxial_plane_strain():
    stress = np.array([[2.0, 0.0, 0.0]])
    szz = 0.3 * 2.0
    expected = np.sqrt(0.5 * (2.0**2 + szz**2 + (szz - 2.0) ** 2))
    assert von_mises(stress, 0.3)[0] == pytest.approx(expected)
    assert von_mises(np.array([[0.0, 0.0, 1.0]]), 0.3)[0] == pytest.approx(np.sqrt(3))


def test_unit_cells_are_seeded_chunkable_and_balance_the_load():
    whole, settings = generate_elasticity(3, resolution=10, seed=7)
    part, _ = generate_elasticity(2, resolution=10, seed=7, first=1)
    for a, b in zip(whole[1:], part):
        np.testing.assert_array_equal(a.points, b.points)
        np.testing.assert_array_equal(a.fields["von_mises"], b.fields["von_mises"])
    sample = whole[0]
    assert sample.fields["stress"].shape == (len(sample.points), 3) and len(sample.settings) == 42
    assert sample.weights.sum() == pytest.approx(1 - np.pi * np.mean(np.array(list(sample.settings.values())) ** 2),
                                                 rel=0.02)
    # the mean of sigma_yy over the top edge is the applied traction (vertex averages of a P2 solution)
    assert top_edge_load(sample) == pytest.approx(settings["pde"]["traction"], rel=0.03)
    with pytest.raises(ConfigError, match="poisson"):
        generate_elasticity(1, poisson=0.5)


def top_edge_load(sample) -> float:
    """sigma_yy integrated over the unit cell's top edge (the trapezoidal rule on its vertices)."""
    top = sample.points[:, 1] > 1 - 1e-12
    order = np.argsort(sample.points[top, 0])
    x, syy = sample.points[top, 0][order], sample.fields["stress"][top, 1][order]
    return float(np.sum(0.5 * (syy[1:] + syy[:-1]) * np.diff(x)))


def near_void_share(sample, band: float = 0.08) -> float:
    """The share of a unit cell's points within ``band`` of its void over the share of its area there."""
    radii = np.array(list(sample.settings.values()))
    distance = np.hypot(*(sample.points - 0.5).T) - radii.mean()
    near = distance < band
    return near.mean() / (sample.weights[near].sum() / sample.weights.sum())


def test_a_graded_mesh_meshes_the_same_cell_denser_at_the_void_and_balances_the_load():
    (uniform,), _ = generate_elasticity(1, resolution=16, seed=2)
    (graded,), settings = generate_elasticity(1, resolution=16, seed=2, grading=4.0)
    assert graded.settings == uniform.settings and settings["pde"]["grading"] == 4.0  # the same void
    radii = np.array(list(graded.settings.values()))
    # the same domain: the square less the void (the area of a polygon of 4096 points on its boundary curve); the
    # graded mesh's finer polygon of the void is closer to it
    x, y = void_boundary(radii, 4096).T
    area = 1 - 0.5 * abs(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))
    errors = [abs(sample.weights.sum() - area) for sample in (graded, uniform)]
    assert errors[0] < errors[1] < 1e-2  # O(h^2) in the void polygon's spacing
    # denser at the void than the area there asks for, where the uniform mesh is about even
    assert near_void_share(graded) > 1.8 and near_void_share(uniform) < 1.3
    # the load's check holds on the graded mesh too: sigma_yy over the top edge integrates to the traction
    assert top_edge_load(graded) == pytest.approx(settings["pde"]["traction"], rel=0.03)
    with pytest.raises(ConfigError, match="grading"):
        generate_elasticity(1, grading=0.5)
