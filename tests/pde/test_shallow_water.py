"""Shallow water (finite volume, HLL + MUSCL-MC + SSP-RK2): conservation, the exact dam break, rest states, the file."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.optimize

from opformer.cli import main
from opformer.data.store import read_fields, read_info
from opformer.errors import ConfigError
from opformer.pde.parallel import Stopped
from opformer.pde.shallow_water import dam_break_state, generate_shallow_water, solve_shallow_water


def dam_break_exact(x: np.ndarray, t: float, h_left: float, h_right: float, g: float = 1.0) -> np.ndarray:
    """Depth of the exact (Stoker) dam break from rest, ``h_left > h_right > 0``, the dam at x = 0.

    A left rarefaction and a right shock; the middle depth ``h_m`` makes the rarefaction's velocity
    ``2 (c_l - c_m)`` equal the shock's ``(h_m - h_r) sqrt(g (1/h_m + 1/h_r) / 2)``.
    """
    c_left = np.sqrt(g * h_left)

    def shock_velocity(h: float) -> float:
        return (h - h_right) * np.sqrt(0.5 * g * (1.0 / h + 1.0 / h_right))

    h_mid = scipy.optimize.brentq(lambda h: 2.0 * (c_left - np.sqrt(g * h)) - shock_velocity(h), h_right, h_left,
                                  xtol=1e-15)
    u_mid, c_mid = shock_velocity(h_mid), np.sqrt(g * h_mid)
    shock_speed = h_mid * u_mid / (h_mid - h_right)
    xi = x / t
    fan = ((2.0 * c_left - xi) / 3.0) ** 2 / g
    return np.where(xi < -c_left, h_left, np.where(xi < u_mid - c_mid, fan, np.where(xi < shock_speed, h_mid, h_right)))


def test_the_exact_dam_break_is_continuous_in_the_fan_and_conserves_mass():
    x = np.linspace(-1.0, 1.0, 200001)
    h = dam_break_exact(x, 0.4, 2.0, 1.0)
    assert h[0] == 2.0 and h[-1] == 1.0 and np.all(np.diff(h[x < 0.3]) <= 0.0)
    assert np.trapezoid(h, x) == pytest.approx(3.0, abs=1e-5)  # the waves stay inside [-1, 1]


def dam_break_l1_error(n: int, t: float = 0.4) -> float:
    """L1 error of the depth of a 1D dam break (2 | 1 at x = 0, on (-1, 1)) solved on an n x 1 strip."""
    dx = 2.0 / n
    x = -1.0 + (np.arange(n) + 0.5) * dx
    h = np.where(x < 0.0, 2.0, 1.0)[None, :, None]
    frames, _ = solve_shallow_water(np.stack([h, 0 * h, 0 * h]), np.array([0.0, t]), dx, dx)
    return float(np.abs(frames[-1, 0, 0, :, 0] - dam_break_exact(x, t, 2.0, 1.0)).sum() * dx)


@pytest.mark.slow
def test_a_dam_break_converges_to_the_exact_solution_at_first_order():
    # Measured: errors 2.38e-2, 1.12e-2, 6.06e-3, 2.71e-3 (pairwise orders 1.09, 0.88, 1.16; fitted 1.03).
    # A first-order scheme (no slopes) gives 2.0e-2 at n = 400 and order ~0.7; a wrong flux, order ~0.
    ns = np.array([50, 100, 200, 400])
    errors = np.array([dam_break_l1_error(n) for n in ns])
    order = -np.polyfit(np.log(ns), np.log(errors), 1)[0]
    assert 0.9 <= order <= 1.2
    assert errors[-1] < 4e-3


def test_mass_is_conserved_to_round_off_and_the_radial_break_stays_symmetric():
    state = dam_break_state(np.array([0.5, 0.7]), 32)
    frames, _ = solve_shallow_water(state, np.linspace(0.0, 0.5, 6), 5 / 32, 5 / 32)
    h = frames[:, 0]
    assert np.all(h[-1][:, [0, -1], :] == 1.0) and np.all(h[-1][:, :, [0, -1]] == 1.0)  # no wave at the boundary
    assert np.abs(h[-1] - 1.0).max() > 0.1  # yet the waves have travelled
    mass = h.sum(axis=(-2, -1))
    assert np.abs(mass / mass[0] - 1.0).max() < 1e-12
    assert np.array_equal(h, h.swapaxes(-1, -2)) and np.array_equal(h, h[..., ::-1, :])
    assert np.abs(frames[:, 1:].sum(axis=(-2, -1))).max() < 1e-12  # momentum: zero by symmetry


@pytest.mark.parametrize("u, v", [(0.0, 0.0), (0.3, -0.2)])
def test_a_lake_at_rest_and_a_uniform_stream_stay_exactly_as_they_are(u, v):
    h = np.full((2, 8, 6), 1.5)
    state = np.stack([h, u * h, v * h])
    frames, _ = solve_shallow_water(state, np.linspace(0.0, 0.5, 3), 0.1, 0.2)
    assert np.array_equal(frames, np.broadcast_to(state, frames.shape))


def test_steps_land_on_the_frame_times_and_a_set_stop_ends_the_solve():
    state = dam_break_state(np.array([0.5]), 16)
    frames, _ = solve_shallow_water(state, np.array([0.0, 0.03, 0.1, 0.5]), 5 / 16, 5 / 16)
    direct, _ = solve_shallow_water(state, np.array([0.0, 0.5]), 5 / 16, 5 / 16)
    assert np.array_equal(frames[0], state)
    # Other steps, the same end time: 1.2e-3 apart (steps overshooting the frames instead: 6e-2).
    assert np.abs(frames[-1] - direct[-1]).max() < 5e-3
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopped):
        solve_shallow_water(state, np.array([0.0, 0.5]), 5 / 16, 5 / 16, stop=stop)


def test_generated_samples_do_not_depend_on_chunks_batches_or_threads():
    whole, settings = generate_shallow_water(3, resolution=16, t_final=0.05, batch_size=2, workers=2)
    part, _ = generate_shallow_water(2, resolution=16, t_final=0.05, first=1, batch_size=1, workers=1)
    assert whole.shape == (3, 6, 16, 16, 1) and whole.dtype == np.float32
    assert np.array_equal(whole[1:], part)
    assert settings["pde"]["times"] == pytest.approx([0.0, 0.01, 0.02, 0.03, 0.04, 0.05])
    radii = [np.random.default_rng(s).uniform(0.3, 0.7) for s in np.random.SeedSequence(0).spawn(3)]
    assert np.array_equal(whole[:, 0, ..., 0], dam_break_state(np.array(radii), 16)[0])
    with pytest.raises(ConfigError):
        generate_shallow_water(1, resolution=2)


@pytest.mark.slow
def test_opformer_generate_shallow_water_writes_a_self_describing_resumable_file(tmp_path, resume_after_interrupt):
    path = tmp_path / "swe.h5"
    assert main(["generate", "shallow-water", "--samples", "2", "--resolution", "16", "--out", str(path)]) == 0
    info = read_info(path)
    fields = read_fields(path, slice(None))
    assert info.kind == "trajectory" and info.input_channels == ["h"] and fields.shape == (2, 101, 16, 16, 1)
    assert info.times[0] == 0.0 and info.times[-1] == pytest.approx(1.0) and len(info.times) == 101
    assert info.domain == {"lengths": [5.0, 5.0], "periodic": [False, False], "grid": ["cells", "cells"]}
    assert info.pde["grid"].startswith("cell-centred") and info.pde["bounds"] == [-2.5, 2.5]
    assert np.array_equal(fields, generate_shallow_water(2, resolution=16)[0])

    resumed = tmp_path / "resumed.h5"
    assert resume_after_interrupt("shallow-water", resumed, 2, chunk=1, resolution=16) == [1, 1]
    assert np.array_equal(read_fields(resumed, slice(None)), fields)
