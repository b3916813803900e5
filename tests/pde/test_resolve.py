"""Solving a stored input again with its file's settings gives what the generator stored."""

import numpy as np
import pytest

from opformer.data.generate import generate_file
from opformer.data.store import read_arrays, read_fields, read_info
from opformer.errors import DataError
from opformer.pde.resolve import resolvable, resolve_operator, resolve_trajectory


@pytest.mark.slow
@pytest.mark.parametrize("pde, flags", [("burgers", {"resolution": 32}), ("darcy", {"resolution": 9, "workers": 1})])
def test_an_operator_input_solved_again_is_the_stored_target(tmp_path, pde, flags):
    path = generate_file(pde, tmp_path / f"{pde}.h5", 3, seed=4, **flags)
    info = read_info(path)
    x, y = read_arrays(path, slice(None))
    assert resolvable(info.pde)
    np.testing.assert_allclose(resolve_operator(info.pde, info.solver, x[1:]), y[1:], rtol=0, atol=1e-6 * abs(y).max())


@pytest.mark.slow
def test_a_trajectory_restarted_from_a_stored_frame_gives_the_stored_later_frames(tmp_path):
    path = generate_file("navier-stokes", tmp_path / "ns.h5", 2, resolution=16, t_final=5.0, seed=1)
    info = read_info(path)
    fields, times = read_fields(path, slice(None)), np.asarray(info.times)
    later = resolve_trajectory(info.pde, info.solver, fields[:, 2], times[2:])
    assert later.shape == (2, 3, 16, 16, 1)
    # the restart differs from the generator's march by the float32 rounding of the stored frame only
    error = np.linalg.norm(later - fields[:, 3:]) / np.linalg.norm(fields[:, 3:])
    assert error < 1e-5
    # a frame further from the truth gives a wrong answer: the comparison can fail
    assert np.linalg.norm(resolve_trajectory(info.pde, info.solver, fields[:, 1], times[2:]) - fields[:, 3:]) > 0.1


def test_other_pdes_are_not_resolvable_and_say_so_in_one_line():
    assert not resolvable({"name": "kolmogorov"}) and not resolvable({"name": "toy darcy"})
    assert not resolvable({"name": "navier_stokes_2d_fno", "forcing": "none", "drag": 0.0})
    with pytest.raises(DataError, match="pde 'kolmogorov': no solver for its trajectories"):
        resolve_trajectory({"name": "kolmogorov"}, {}, np.zeros((1, 8, 8, 1)), [0.0, 1.0])
    with pytest.raises(DataError, match="pde 'toy': no solver for its operator inputs"):
        resolve_operator({"name": "toy"}, {}, np.zeros((1, 8, 1)))
    with pytest.raises(DataError, match="solver settings lack 'dt'"):
        resolve_operator({"name": "burgers", "viscosity": 0.1, "t_final": 1.0}, {"solve_resolution": 64},
                         np.zeros((1, 8, 1)))
