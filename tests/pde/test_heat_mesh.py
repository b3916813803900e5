"""Heat on random domains (opformer.pde.heat_mesh): the Bessel mode on the unit disc, its orders in space and
time, and the generator's seeds."""

import numpy as np
import pytest

pytest.importorskip("skfem")
pytest.importorskip("triangle")

from scipy.special import j0, jn_zeros  # noqa: E402

from opformer.errors import ConfigError  # noqa: E402
from opformer.pde.heat_mesh import domain_mesh, generate_heat_mesh, solve_heat  # noqa: E402
from opformer.pde.fem import l2_error, lagrange_element, skfem_mesh  # noqa: E402

KAPPA, T = 0.5, 0.5
J01 = jn_zeros(0, 1)[0]
DISC = {f"{c}{k}": 0.0 for c in "ab" for k in (2, 3, 4, 5)}


def bessel(x, t):
    return j0(J01 * np.hypot(x[0], x[1])) * np.exp(-KAPPA * J01**2 * t)


def disc_error(boundary_points: int, dt: float) -> tuple[float, np.ndarray]:
    points, cells = domain_mesh(DISC, boundary_points)
    frames = solve_heat(points, cells, bessel(points.T, 0.0), np.array([0.0, T]), dt, KAPPA)
    return l2_error(skfem_mesh(points, cells), lagrange_element(1), frames[-1], lambda x: bessel(x, T)), frames[-1]


def test_bessel_mode_decays_at_its_rate_with_second_order_in_space():
    coarse, fine = disc_error(24, 1e-3)[0], disc_error(48, 1e-3)[0]
    assert np.log2(coarse / fine) == pytest.approx(2.0, abs=0.3)
    assert fine < 0.01 * np.sqrt(np.pi) * np.exp(-KAPPA * J01**2 * T)


def test_crank_nicolson_is_second_order_in_time():
    steps = [disc_error(24, dt)[1] for dt in (0.02, 0.01, 0.005)]
    ratio = np.linalg.norm(steps[0] - steps[1]) / np.linalg.norm(steps[1] - steps[2])
    assert np.log2(ratio) == pytest.approx(2.0, abs=0.2)


def test_heat_on_random_domains_is_seeded_chunkable_and_decays():
    whole, settings = generate_heat_mesh(2, resolution=24, seed=3, t_final=0.2, frame_dt=0.1)
    part, _ = generate_heat_mesh(1, resolution=24, seed=3, first=1, t_final=0.2, frame_dt=0.1)
    np.testing.assert_array_equal(whole[1].fields["u"], part[0].fields["u"])
    u = whole[0].fields["u"]
    assert u.shape == (3, len(whole[0].points), 1) and settings["pde"]["times"] == pytest.approx([0, 0.1, 0.2])
    energy = [np.sum(whole[0].weights * frame[:, 0] ** 2) for frame in u]
    assert energy[0] > energy[1] > energy[2] > 0
    with pytest.raises(ConfigError, match="diffusivity"):
        generate_heat_mesh(1, diffusivity=0)
