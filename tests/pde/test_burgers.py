"""Verification of the Burgers solver and data generator (paper settings: nu = 0.1 / (2 pi))."""

import json

import numpy as np
import pytest
from scipy.special import ive

from opformer.errors import ConfigError
from opformer.pde.burgers import (
    DEFAULT_DT,
    DEFAULT_SOLVE_RESOLUTION,
    _grid_from_modes,
    cole_hopf_solution,
    generate_burgers,
    solve_burgers,
)
from opformer.pde.grf import periodic_grf

NU = 0.1 / (2 * np.pi)
TOL = 1e-6


def rel_error(u: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Relative L2 error per sample."""
    return np.linalg.norm(u - ref, axis=-1) / np.linalg.norm(ref, axis=-1)


def sine_exact(x: np.ndarray, amplitude: float, t: float) -> np.ndarray:
    """Cole–Hopf for u0 = A sin(2 pi x) in closed form: phi = sum_m I_m(a) exp(-nu (2 pi m)^2 t + 2 pi i m x)."""
    a = amplitude / (4 * np.pi * NU)
    m = np.arange(-100, 101)
    terms = ive(m, a) * np.exp(-NU * (2 * np.pi * m) ** 2 * t + 2j * np.pi * np.outer(x, m))
    return (-2 * NU * (terms * 2j * np.pi * m).sum(axis=1) / terms.sum(axis=1)).real


def grid(n: int) -> np.ndarray:
    return np.arange(n) / n


def test_cole_hopf_reference_matches_closed_form() -> None:
    x = grid(1024)
    u0 = np.stack([np.sin(2 * np.pi * x), 2 * np.sin(2 * np.pi * x)])
    exact = np.stack([sine_exact(x, 1.0, 1.0), sine_exact(x, 2.0, 1.0)])
    assert rel_error(cole_hopf_solution(u0, NU, 1.0), exact).max() < 1e-13


def test_solver_matches_cole_hopf() -> None:
    x = grid(2048)
    u0 = np.stack(
        [
            2 * np.sin(2 * np.pi * x),
            np.sin(2 * np.pi * x) + 0.8 * np.cos(4 * np.pi * x + 1) - 0.5 * np.sin(6 * np.pi * x),
            0.7 + 1.5 * np.cos(2 * np.pi * x) * np.exp(np.sin(2 * np.pi * x)),  # non-zero mean
        ]
    )
    assert rel_error(solve_burgers(u0, NU, 1.0), cole_hopf_solution(u0, NU, 1.0)).max() < TOL


def test_grf_samples_match_cole_hopf() -> None:
    u0 = periodic_grf(8, (8192,), 2.0, 5.0, 25.0, rng=np.random.default_rng(5))
    assert rel_error(solve_burgers(u0, NU, 1.0), cole_hopf_solution(u0, NU, 1.0)).max() < TOL


@pytest.mark.slow
def test_refinement_in_space_and_time() -> None:
    u0 = periodic_grf(4, (8192,), 2.0, 5.0, 25.0, rng=np.random.default_rng(6))
    u = solve_burgers(u0, NU, 1.0)
    fine = solve_burgers(u0, NU, 1.0, solve_resolution=2 * DEFAULT_SOLVE_RESOLUTION, dt=DEFAULT_DT / 2)
    assert rel_error(u, fine).max() < TOL


@pytest.mark.slow
def test_generated_data_match_a_solve_on_the_storage_grid() -> None:
    u0, u1, _ = generate_burgers(2, 8192, seed=11)
    full = solve_burgers(u0, NU, 1.0, solve_resolution=8192)
    assert rel_error(u1, full).max() < TOL


def test_storage_grid_coarser_than_solve_grid() -> None:
    x = grid(32)
    u = solve_burgers(np.sin(2 * np.pi * x)[None], NU, 1.0)
    assert rel_error(u[0], sine_exact(x, 1.0, 1.0)) < TOL


def test_sampling_folds_unresolved_modes() -> None:
    rng = np.random.default_rng(7)
    c = rng.standard_normal((3, 50)) + 1j * rng.standard_normal((3, 50))
    c[:, 0] = c[:, 0].real
    np.testing.assert_allclose(_grid_from_modes(c, 24), _grid_from_modes(c, 240)[:, ::10], atol=1e-12)


@pytest.mark.slow
def test_generation_is_reproducible_and_independent_of_batch_size() -> None:
    calls: list[int] = []
    a0, a1, settings = generate_burgers(5, 1024, seed=3, batch_size=2, progress=calls.append)
    b0, b1, _ = generate_burgers(5, 1024, seed=3, batch_size=5, workers=1)
    c0, _, _ = generate_burgers(5, 1024, seed=4)
    assert calls == [2, 2, 1]
    assert a0.dtype == a1.dtype == np.float32 and a0.shape == a1.shape == (5, 1024)
    assert np.array_equal(a0, b0) and np.array_equal(a1, b1)
    assert not np.array_equal(a0, c0)
    json.dumps(settings)
    assert settings["pde"]["initial_condition"] == {"type": "grf", "alpha": 2.0, "tau": 5.0, "sigma": 25.0,
                                                    "zero_mean": True}
    # the paper's data (Li et al.) have no constant mode: every initial condition has mean zero
    assert np.abs(a0.astype(np.float64).mean(axis=1)).max() < 1e-6
    assert settings["solver"]["solve_resolution"] == DEFAULT_SOLVE_RESOLUTION


def test_too_large_time_step_is_refused() -> None:
    with pytest.raises(ConfigError, match="dt="):
        generate_burgers(2, 256, dt=0.05)


def test_threaded_solve_equals_serial_solve() -> None:
    u0 = periodic_grf(5, (512,), 2.0, 5.0, 25.0, rng=np.random.default_rng(8))
    assert np.array_equal(solve_burgers(u0, NU, 0.1, workers=1), solve_burgers(u0, NU, 0.1, workers=2))
