"""Verification of the 2D vorticity solver, the FNO-nu preset and Kolmogorov flow."""

import numpy as np
import pytest

from opformer.errors import ConfigError
from opformer.pde.grf import periodic_grf
from opformer.pde.kolmogorov import LENGTH, generate_kolmogorov, kolmogorov_forcing, laminar_vorticity
from opformer.pde.navier_stokes import FNO_GRF, fno_forcing, generate_fno_nu, solve_navier_stokes_2d


def grid(n: int, length: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(n) * length / n
    return np.meshgrid(x, x, indexing="ij")


def rel_error(u: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(u - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("length, drag, solve_resolution", [(1.0, 0.0, None), (2 * np.pi, 0.3, 64)])
def test_taylor_green_decays_at_exact_rate(length: float, drag: float, solve_resolution: int | None) -> None:
    # Modes (3, 4), (5, 0), (0, 5) share |m|^2 = 25, so w = |k|^2 psi and u . grad w = 0: an exact
    # nonlinear solution w(t) = w0 exp(-(nu |k|^2 + drag) t), |k| = 2 pi 5 / L.
    x, y = grid(32, length)
    k = 2 * np.pi / length
    w0 = np.sin(3 * k * x) * np.cos(4 * k * y) + 0.7 * np.cos(5 * k * x + 0.3) - 0.4 * np.sin(5 * k * y)
    nu = 2e-3 * length**2
    times = np.array([0.0, 0.5, 1.0])
    frames, t = solve_navier_stokes_2d(
        w0[None], nu=nu, times=times, dt=0.05, drag=drag, length=length, solve_resolution=solve_resolution
    )
    rate = nu * 25 * k**2 + drag
    for i, ti in enumerate(t):
        assert rel_error(frames[0, i], w0 * np.exp(-rate * ti)) < 1e-11
    # The decay is not trivially satisfied: a 1 % error in the rate is far above the tolerance.
    assert rel_error(frames[0, -1], w0 * np.exp(-1.01 * rate)) > 1e-4


def test_advection_term_matches_closed_form() -> None:
    # w0 = A cos(2 pi x) + B cos(4 pi y): u = psi_y = -B sin(4 pi y) / (4 pi), v = -psi_x = A sin(2 pi x) / (2 pi), so
    # the inviscid tendency is w_t = -u . grad w = 1.5 A B sin(2 pi x) sin(4 pi y) (second-order one-sided difference).
    x, y = grid(16)
    a, b, h = 1.0, 0.5, 1e-4
    w0 = a * np.cos(2 * np.pi * x) + b * np.cos(4 * np.pi * y)
    frames, _ = solve_navier_stokes_2d(w0[None], nu=0.0, times=[0.0, h, 2 * h], dt=h)
    tendency = (-3 * frames[0, 0] + 4 * frames[0, 1] - frames[0, 2]) / (2 * h)
    assert rel_error(tendency, 1.5 * a * b * np.sin(2 * np.pi * x) * np.sin(4 * np.pi * y)) < 1e-6


@pytest.mark.slow
def test_kolmogorov_laminar_state_exact() -> None:
    # Force sin(4 y) e_x from rest: the flow stays a shear flow (u . grad w = 0), so
    # w(t) = w_s (1 - exp(-(16 nu + drag) t)) with the steady state w_s = -4 cos(4 y) / (16 nu + drag).
    n, nu, drag = 16, 1e-3, 0.1
    steady = laminar_vorticity(n, nu, drag)
    assert np.isclose(np.abs(steady).max(), 4 / (16 * nu + drag))  # velocity amplitude 1 / (16 nu + drag)
    times = np.array([1.0, 5.0, 40.0])
    frames, _ = solve_navier_stokes_2d(
        np.zeros((1, n, n)), nu=nu, times=times, dt=0.04, forcing=kolmogorov_forcing(n), drag=drag, length=LENGTH
    )
    for i, t in enumerate(times):
        assert rel_error(frames[0, i], steady * (1 - np.exp(-(16 * nu + drag) * t))) < 1e-12
    # Started at the laminar state with Re = 1000, it stays there.
    frames, _ = solve_navier_stokes_2d(
        steady[None], nu=nu, times=[10.0], dt=0.04, forcing=kolmogorov_forcing(n), drag=drag, length=LENGTH
    )
    assert rel_error(frames[0, -1], steady) < 1e-12


def test_time_step_convergence_order_is_four() -> None:
    # ETDRK4 is 4th order: halving dt divides the error at t = 0.5 by ~16 (measured orders 4.05, 4.03).
    w0 = periodic_grf(2, (32, 32), rng=np.random.default_rng(3), **FNO_GRF) * 3  # nonlinear: CFL 0.7 at dt = 1/8
    kwargs = dict(nu=1e-3, times=[0.5], forcing=fno_forcing(32))
    ref = solve_navier_stokes_2d(w0, dt=0.5 / 128, **kwargs)[0][:, -1]
    errors = [rel_error(solve_navier_stokes_2d(w0, dt=0.5 / s, **kwargs)[0][:, -1], ref) for s in (4, 8, 16)]
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert errors[-1] > 1e-9  # the errors are far above round-off: the orders measure the scheme
    assert np.all(np.abs(orders - 4) < 0.3), (errors, orders)


def test_solve_grid_finer_than_storage_grid() -> None:
    # A smooth flow solved on 32^2 and on 96^2 (stored on 32^2) agrees to the spatial error of the 32^2 solve.
    w0 = periodic_grf(2, (32, 32), rng=np.random.default_rng(4), **FNO_GRF) * 3
    kwargs = dict(nu=1e-2, times=[0.0, 1.0], dt=0.05, forcing=fno_forcing(32))
    coarse, _ = solve_navier_stokes_2d(w0, **kwargs)
    fine, _ = solve_navier_stokes_2d(coarse[:, 0], solve_resolution=96, **kwargs)
    assert rel_error(fine[:, 0], coarse[:, 0]) < 1e-13  # frame 0: the same de-aliased initial modes
    assert rel_error(fine[:, 1], coarse[:, 1]) < 1e-6


@pytest.mark.slow
def test_fno_nu_deterministic_and_batch_independent() -> None:
    kwargs = dict(samples=3, nu=1e-3, resolution=16, t_final=2.0)
    data, settings = generate_fno_nu(**kwargs, batch_size=1)
    again, _ = generate_fno_nu(**kwargs, batch_size=2, workers=1)
    other, _ = generate_fno_nu(**kwargs, seed=1)
    tail, _ = generate_fno_nu(**{**kwargs, "samples": 2}, first=1)
    assert data.shape == (3, 3, 16, 16, 1) and data.dtype == np.float32
    assert np.array_equal(data, again)
    assert np.array_equal(tail, data[1:])  # samples 1, 2 of the same stream
    assert not np.allclose(data, other)
    assert np.abs(data[:, 0].mean(axis=(1, 2))).max() < 1e-6  # zero-mean vorticity
    assert settings["pde"]["times"] == [0.0, 1.0, 2.0]
    assert settings["solver"]["solve_resolution"] == 16 and settings["solver"]["dt_max"] == 0.08


@pytest.mark.slow
def test_kolmogorov_generator() -> None:
    kwargs = dict(samples=2, resolution=16, t_final=0.25, spinup=0.5, solve_resolution=32, dt=0.01)
    data, settings = generate_kolmogorov(**kwargs)
    again, _ = generate_kolmogorov(**kwargs, batch_size=1, workers=1)
    second, _ = generate_kolmogorov(**{**kwargs, "samples": 1}, first=1)
    prefix, _ = generate_kolmogorov(**{**kwargs, "samples": 1})  # fewer samples: the same first ones
    assert data.shape == (2, 5, 16, 16, 1) and np.isfinite(data).all()
    assert np.array_equal(data, again) and np.array_equal(second, data[1:]) and np.array_equal(prefix, data[:1])
    assert settings["pde"]["nu"] == 1e-3 and settings["pde"]["drag"] == 0.1


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: solve_navier_stokes_2d(np.zeros((1, 8, 8)), nu=-1.0, times=[1.0], dt=0.1), "nu=-1.0"),
        (lambda: solve_navier_stokes_2d(np.zeros((1, 8, 8)), nu=1e-3, times=[1.0], dt=0.0), "dt=0.0"),
        (lambda: solve_navier_stokes_2d(np.zeros((1, 9, 9)), nu=1e-3, times=[1.0], dt=0.1), "resolution=9"),
        (lambda: generate_fno_nu(1, 1e-3, resolution=4), "resolution=4"),
        (lambda: generate_fno_nu(1, 1e-3, resolution=16, dt=-0.1), "dt=-0.1"),
        (lambda: generate_kolmogorov(1, resolution=48, solve_resolution=64), "solve_resolution=64"),
        (lambda: solve_navier_stokes_2d(np.ones((1, 8, 8)) * 0, nu=0.0, times=[2.0, 1.0], dt=0.1), "times="),
    ],
)
def test_bad_arguments_raise_config_error(call, name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        call()


def test_cfl_guard() -> None:
    x, y = grid(16)
    w0 = 50 * np.sin(2 * np.pi * x)[None] + 20 * np.sin(4 * np.pi * y)[None]
    with pytest.raises(ConfigError, match="dt=0.1 is too large"):
        solve_navier_stokes_2d(w0, nu=1e-3, times=[0.2], dt=0.1)
