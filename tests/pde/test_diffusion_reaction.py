"""FitzHugh–Nagumo diffusion-reaction: exact diffusion, the reaction ODE, second order in time, the stored file."""

import threading

import numpy as np
import pytest
import scipy.linalg
from scipy.integrate import solve_ivp

from opformer.cli import main
from opformer.data.store import read_fields, read_info
from opformer.errors import ConfigError
from opformer.pde.diffusion_reaction import DU, DV, K, generate_diffusion_reaction, solve_diffusion_reaction
from opformer.pde.parallel import Stopped


def cell_centres(n: int) -> np.ndarray:
    return -1.0 + (np.arange(n) + 0.5) * 2.0 / n


def neumann_laplacian(n: int) -> np.ndarray:
    """The 5-point finite-volume Laplacian on n x n cells of (-1, 1)^2, no flux through the walls (as PDEBench)."""
    d2 = (np.diag(np.full(n - 1, 1.0), -1) + np.diag(np.full(n - 1, 1.0), 1) - 2.0 * np.eye(n))
    d2[0, 0] = d2[-1, -1] = -1.0
    d2 /= (2.0 / n) ** 2
    return np.kron(d2, np.eye(n)) + np.kron(np.eye(n), d2)


def test_without_reaction_diffusion_is_the_exact_exponential_of_the_no_flux_laplacian():
    n, times = 6, np.array([0.0, 0.3, 1.0])
    state = np.random.default_rng(0).standard_normal((2, 2, n, n))
    frames = solve_diffusion_reaction(state, times, dt=0.5, reaction=False)
    lap = neumann_laplacian(n)
    for index, t in enumerate(times):
        for channel, d in enumerate((DU, DV)):
            exact = (scipy.linalg.expm(d * t * lap) @ state[:, channel].reshape(2, -1).T).T.reshape(2, n, n)
            np.testing.assert_allclose(frames[:, index, channel], exact, rtol=0, atol=1e-12)


def test_without_reaction_a_cosine_mode_decays_at_its_exact_rate():
    n, (p, q) = 16, (3, 5)
    x = cell_centres(n)
    mode = np.cos(p * np.pi * (x[:, None] + 1) / 2) * np.cos(q * np.pi * (x[None, :] + 1) / 2)
    h = 2.0 / n
    # an eigenvector of the no-flux 5-point Laplacian; the eigenvalue is -(pi/2)^2 (p^2 + q^2) (1 + O(h^2))
    rate = -(2 / h) ** 2 * (np.sin(np.pi * p / (2 * n)) ** 2 + np.sin(np.pi * q / (2 * n)) ** 2)
    np.testing.assert_allclose(neumann_laplacian(n) @ mode.ravel(), rate * mode.ravel(), atol=1e-10)
    assert abs(rate / (-(np.pi / 2) ** 2 * (p**2 + q**2)) - 1) < 0.1
    times = np.array([0.0, 2.0, 5.0])
    frames = solve_diffusion_reaction(np.stack([mode, 2 * mode])[None], times, dt=0.7, reaction=False)
    for channel, (d, amplitude) in enumerate(((DU, 1.0), (DV, 2.0))):
        exact = amplitude * np.exp(d * rate * times)[:, None, None] * mode
        assert np.abs(frames[0, :, channel] - exact).max() < 1e-13


def test_a_uniform_state_follows_the_reaction_ode():
    times = np.linspace(0.0, 5.0, 101)
    starts = [(0.8, -0.3), (-2.0, 1.5), (0.05, 0.0)]
    state = np.stack([np.broadcast_to(np.array(s)[:, None, None], (2, 8, 8)) for s in starts])
    frames = solve_diffusion_reaction(state, times, dt=2.5e-3)

    def rates(t, y):
        u, v = y
        return [u - u**3 - K - v, u - v]

    for sample, start in enumerate(starts):
        exact = solve_ivp(rates, (0.0, 5.0), start, t_eval=times, method="DOP853", rtol=1e-12, atol=1e-12).y.T
        assert np.abs(frames[sample] - exact[:, :, None, None]).max() < 1e-8
        assert np.ptp(frames[sample], axis=(-2, -1)).max() == 0.0  # stays uniform


def test_the_full_scheme_is_second_order_in_time():
    state = 0.7 * np.random.default_rng(1).standard_normal((1, 2, 8, 8))
    times = np.array([0.0, 1.0])
    dts = 0.1 / 2.0 ** np.arange(4)
    finals = [solve_diffusion_reaction(state, times, dt, du=0.05, dv=0.1)[:, -1] for dt in dts]
    differences = [np.sqrt(np.mean((a - b) ** 2)) for a, b in zip(finals, finals[1:])]
    order = np.polyfit(np.log(dts[:-1]), np.log(differences), 1)[0]
    assert abs(order - 2.0) < 0.3, (order, differences)


def test_a_too_large_step_is_a_config_error():
    state = np.full((1, 2, 8, 8), 5.0)
    with pytest.raises(ConfigError, match="dt=0.5 is too large"):
        solve_diffusion_reaction(state, np.array([0.0, 5.0]), dt=0.5)


def test_a_set_stop_event_ends_the_march_within_a_step():
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopped):
        solve_diffusion_reaction(np.zeros((1, 2, 8, 8)), np.array([0.0, 5.0]), dt=2.5e-3, stop=stop)


def test_generate_writes_a_self_describing_resumable_file(capsys, tmp_path, resume_after_interrupt):
    out = tmp_path / "dr.h5"
    assert main(["generate", "diffusion-reaction", "--samples", "2", "--resolution", "16", "--t-final", "0.5",
                 "--seed", "3", "--out", str(out)]) == 0
    info = read_info(out)
    assert info.kind == "trajectory" and info.input_channels == ["u", "v"] and info.seed == 3
    assert info.domain == {"lengths": [2.0, 2.0], "periodic": [False, False], "grid": ["cells", "cells"]}
    assert info.pde["grid"].startswith("cell-centred") and info.pde["origin"] == [-1.0, -1.0]
    assert (info.pde["du"], info.pde["dv"], info.pde["k"]) == (1e-3, 5e-3, 5e-3)
    np.testing.assert_allclose(info.times, np.arange(11) * 0.05)
    fields = read_fields(out, slice(None))
    assert fields.shape == (2, 11, 16, 16, 2) and fields.dtype == np.float32
    # sample i starts from N(0, 1) noise (u, then v) of SeedSequence(seed).spawn(samples)[i]
    seeds = np.random.SeedSequence(3).spawn(2)
    start = np.random.default_rng(seeds[1]).standard_normal((2, 16, 16)).astype(np.float32)
    assert np.array_equal(fields[1, 0], np.moveaxis(start, 0, -1))
    assert np.array_equal(fields, generate_diffusion_reaction(2, 16, t_final=0.5, seed=3)[0])

    again = tmp_path / "again.h5"
    assert resume_after_interrupt("diffusion-reaction", again, 2, resolution=16, t_final=0.5, seed=3, chunk=1) == [1, 1]
    assert np.array_equal(read_fields(again, slice(None)), fields)


def test_a_bad_time_step_is_refused_in_one_line(capsys, tmp_path):
    assert main(["generate", "diffusion-reaction", "--samples", "1", "--dt", "-1", "--out",
                 str(tmp_path / "x.h5")]) == 2
    assert capsys.readouterr().err.strip().endswith("--dt -1.0: expected a positive time step")
