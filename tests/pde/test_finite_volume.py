"""The shared finite-volume pieces: the MC limiter, MUSCL faces, SSP-RK2 and the march to the frame times."""

from __future__ import annotations

import numpy as np
import pytest

from opformer.pde.finite_volume import march_frames, mc_slope, muscl_faces, rkl2_stages, rkl2_step, ssp_rk2_step


def test_the_mc_slope_is_the_limited_central_difference_and_zero_at_extrema():
    left, right = np.array([1.0, 1.0, 1.0, -1.0, 0.0, -3.0]), np.array([1.0, 3.0, 0.2, 2.0, 5.0, -1.0])
    assert np.array_equal(mc_slope(left, right), [1.0, 2.0, 0.4, 0.0, 0.0, -2.0])


def test_muscl_faces_are_exact_for_a_linear_profile_and_bounded_by_the_neighbours_at_a_jump():
    left, right = muscl_faces(np.arange(8.0) * 0.5)  # 4 cells + 2 ghosts a side: 5 faces
    assert np.allclose(left, [0.75, 1.25, 1.75, 2.25, 2.75]) and np.allclose(right, left)
    left, right = muscl_faces(np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0]))
    assert np.array_equal(left, [0.0, 0.0, 1.0]) and np.array_equal(right, [0.0, 1.0, 1.0])


def test_ssp_rk2_is_heun_and_a_zero_step_leaves_a_sample_as_it_is():
    state = np.ones((1, 2, 1, 1))
    stepped = ssp_rk2_step(state, np.array([0.1, 0.0]), lambda q: -q)
    assert stepped[0, 0, 0, 0] == pytest.approx(1.0 - 0.1 + 0.005, abs=1e-15) and stepped[0, 1, 0, 0] == 1.0


def test_the_march_lands_on_the_frames_with_equal_steps_per_sample_and_checks_each_frame():
    state = np.ones((2, 2, 1, 1))
    state[1, :, 0, 0] = [0.125, 0.3]  # a field that stays: each sample's largest step
    checked, batches = [], []

    def tendency(q: np.ndarray) -> np.ndarray:
        batches.append(q.shape[1])
        return np.stack([-q[0], 0.0 * q[1]])

    frames, steps = march_frames(state, np.array([0.0, 0.5, 1.0]), lambda q: q[1, :, 0, 0],
                                 lambda q, dt: ssp_rk2_step(q, dt, tendency), lambda q, t: checked.append(t))
    assert checked == [0.0, 0.5, 1.0] and steps == 8  # the finer sample's 4 steps per frame interval
    # the coarser sample takes 2 steps per interval; while the finer one takes the other 2, it is not computed
    assert batches == [2, 2, 2, 2, 1, 1, 1, 1] * 2
    heun = {0: 1.0 - 0.125 + 0.125**2 / 2, 1: 1.0 - 0.25 + 0.25**2 / 2}  # 4 steps of 0.125; 2 of 0.3 -> 0.25
    assert frames[1, 0, 0, 0, 0] == pytest.approx(heun[0] ** 4, rel=1e-14)
    assert frames[2, 0, 1, 0, 0] == pytest.approx(heun[1] ** 4, rel=1e-14)


@pytest.mark.parametrize("stages", [2, 3, 5, 9])
def test_rkl2_is_stable_up_to_its_bound_and_second_order(stages):
    # y' = -y: a step of z = dt is stable (|R| <= 1) for z up to (s^2 + s - 2) / 4 forward-Euler limits (2 each)
    bound = (stages * stages + stages - 2) / 2
    z = np.linspace(0.0, bound, 2001)
    amplification = rkl2_step(np.ones((1, len(z), 1, 1)), z, lambda q: -q, stages)[0, :, 0, 0]
    assert np.abs(amplification).max() <= 1.0 + 1e-12
    assert rkl2_stages(bound / 2) == stages and rkl2_stages(bound / 2 + 1e-3) == stages + 1
    errors = [abs(rkl2_step(np.ones((1, 1, 1, 1)), np.array([h]), lambda q: -q, stages)[0, 0, 0, 0] - np.exp(-h))
              for h in (0.1, 0.05)]
    assert 2.8 < np.log2(errors[0] / errors[1]) < 3.2  # local error O(dt^3): second order
