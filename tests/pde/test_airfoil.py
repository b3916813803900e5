"""Potential flow around airfoils (opformer.pde.airfoil): the exact flow around a Joukowski airfoil, its
circulation, Kutta-Joukowski's lift, NACA shapes and the generator's seeds."""

import numpy as np
import pytest

pytest.importorskip("skfem")
pytest.importorskip("triangle")

from opformer.errors import ConfigError  # noqa: E402
from opformer.pde.airfoil import (generate_airfoil, joukowski_airfoil, joukowski_flow, naca4,  # noqa: E402
                                  solve_airfoil, solve_joukowski)


def near_field_error(flow: dict, radius: float = 0.75) -> float:
    """The relative L2 error of the vertex velocities (lumped weights) within ``radius`` of the origin."""
    from opformer.meshes import lumped_weights

    w = lumped_weights(flow["points"], flow["cells"], "triangle")
    keep = np.isfinite(flow["exact_velocity"]).all(1) & (np.hypot(*flow["points"].T) < radius)
    error = np.sum(w[keep] * np.sum((flow["velocity"] - flow["exact_velocity"])[keep] ** 2, 1))
    return float(np.sqrt(error / np.sum(w[keep] * np.sum(flow["exact_velocity"][keep] ** 2, 1))))


def test_joukowski_flow_is_tangent_to_the_airfoil_with_kuttas_circulation():
    centre, c, alpha = -0.1 + 0.1j, 1.0, 0.2
    airfoil = joukowski_airfoil(centre, c, 200)
    psi, velocity, gamma = joukowski_flow(airfoil[1:, 0], airfoil[1:, 1], centre, c, 2.0, alpha)
    np.testing.assert_allclose(psi, psi[0], atol=1e-10)  # the surface is a streamline
    beta = np.arctan(0.1 / 1.1)
    assert gamma == pytest.approx(4 * np.pi * 2.0 * abs(c - centre) * np.sin(alpha + beta))
    far = joukowski_flow(np.array(1e5), np.array(2e5), centre, c, 2.0, alpha)[1]
    np.testing.assert_allclose(far, [2.0 * np.cos(alpha), 2.0 * np.sin(alpha)], atol=1e-4)
    # the trailing edge is the image of zeta = c: z = 2c, a cusp
    np.testing.assert_allclose(airfoil[0], [2 * c, 0.0], atol=1e-12)


@pytest.mark.slow
def test_joukowski_velocity_and_circulation_converge_and_lift_is_kutta_joukowskis():
    coarse, fine = solve_joukowski(48, 16), solve_joukowski(96, 32)
    errors = [near_field_error(coarse), near_field_error(fine)]
    assert np.log2(errors[0] / errors[1]) > 1.5  # measured 1.9 (benchmarks/solvers/fem.py)
    gamma_errors = [abs(f["gamma"] / f["exact_gamma"] - 1) for f in (coarse, fine)]
    assert gamma_errors[1] < 0.01 and gamma_errors[1] < gamma_errors[0] / 2.5
    assert fine["lift"] == pytest.approx(1.0 * 1.0 * fine["exact_gamma"], rel=0.02)


@pytest.mark.slow
def test_naca_shapes_symmetric_airfoil_carries_no_lift_and_camber_some():
    airfoil = naca4(0.0, 0.4, 0.12, 33)
    assert len(airfoil) == 64 and np.allclose(airfoil[0], [1.0, 0.0], atol=1e-12)
    upper, lower = airfoil[1:32], airfoil[33:][::-1]
    np.testing.assert_allclose(upper * [1, -1], lower, atol=1e-12)
    assert np.max(upper[:, 1]) == pytest.approx(0.06, rel=0.01)  # half of 12%
    symmetric = solve_airfoil(airfoil, 1.0, 0.0, 1.0, 10.0, 32)
    cambered = solve_airfoil(naca4(0.04, 0.4, 0.12, 33), 1.0, 0.0, 1.0, 10.0, 32)
    assert abs(symmetric["gamma"]) < 2e-3 * cambered["gamma"] and cambered["gamma"] > 0


def test_generated_airfoils_are_seeded_and_chunkable():
    whole, settings = generate_airfoil(2, resolution=24, seed=5, far_radius=4.0)
    part, _ = generate_airfoil(1, resolution=24, seed=5, first=1, far_radius=4.0)
    np.testing.assert_array_equal(whole[1].fields["velocity"], part[0].fields["velocity"])
    sample = whole[0]
    assert sample.fields["pressure"].shape == (len(sample.points), 1) and abs(sample.settings["alpha"]) <= 10
    assert sample.weights.sum() == pytest.approx(np.pi * 4.0**2, rel=0.02)
    with pytest.raises(ConfigError, match="max_alpha"):
        generate_airfoil(1, max_alpha=45)


def test_a_graded_or_finer_mesh_meshes_the_same_airfoils_and_their_circulation_agrees():
    (base,), _ = generate_airfoil(1, resolution=32, seed=4, far_radius=4.0)
    (graded,), settings = generate_airfoil(1, resolution=32, seed=4, far_radius=4.0, grading=4.0)
    (fine,), _ = generate_airfoil(1, resolution=64, seed=4, far_radius=4.0, far_points=128)
    drawn = ("camber", "camber_position", "thickness", "alpha")
    assert all(graded.settings[k] == base.settings[k] == fine.settings[k] for k in drawn)
    assert settings["pde"]["grading"] == 4.0 and len(graded.points) < 0.7 * len(base.points) < 0.25 * len(fine.points)
    for other in (graded, fine):  # the same domain, the same flow's circulation (the exact check's quantity)
        assert other.weights.sum() == pytest.approx(base.weights.sum(), rel=2e-3)
        assert other.settings["circulation"] == pytest.approx(base.settings["circulation"], rel=0.03)
    with pytest.raises(ConfigError, match="grading"):
        generate_airfoil(1, grading=0.0)
    with pytest.raises(ConfigError, match="far_points"):
        generate_airfoil(1, far_points=4)
