"""Verification of the 3D velocity-projection solver and the forced-turbulence preset."""

import numpy as np
import pytest
import scipy.fft

from opformer.errors import ConfigError
from opformer.pde.navier_stokes import wavenumbers
from opformer.pde.navier_stokes3d import (
    LENGTH,
    generate_turbulence3d,
    kinetic_energy,
    pressure,
    random_velocity,
    solve_navier_stokes_3d,
)

N = 16


def grid(n: int = N) -> tuple[np.ndarray, ...]:
    x = np.arange(n) * LENGTH / n
    return np.meshgrid(x, x, x, indexing="ij")


def max_divergence(u: np.ndarray) -> float:
    """max |div u| relative to max |grad u| (spectral derivatives), for velocity (batch, 3, n, n, n)."""
    c = scipy.fft.rfftn(u, axes=(-3, -2, -1))
    k = wavenumbers(u.shape[-1], 3, LENGTH)
    div = scipy.fft.irfftn(sum(1j * k[i] * c[:, i] for i in range(3)), s=u.shape[-3:], axes=(-3, -2, -1))
    grad = scipy.fft.irfftn(1j * k[0] * c[:, 0], s=u.shape[-3:], axes=(-3, -2, -1))
    return float(np.abs(div).max() / np.abs(grad).max())


def test_exact_solutions_abc_and_two_dimensional_taylor_green() -> None:
    # ABC (Beltrami) flow: curl u = k u, so u x omega = 0 and u(t) = u0 exp(-nu k^2 t) exactly (here k = 1, 2).
    # 2D Taylor-Green in 3D: u x omega = grad(...), removed by the projection: u(t) = u0 exp(-2 nu t) exactly.
    x, y, z = grid()
    abc = np.stack([np.sin(z) + 0.5 * np.cos(y), 0.8 * np.sin(x) + np.cos(z), 0.5 * np.sin(y) + 0.8 * np.cos(x)])
    abc2 = np.stack([np.sin(2 * z), np.cos(2 * z), 0 * x])
    tg = np.stack([np.sin(x) * np.cos(y), -np.cos(x) * np.sin(y), 0 * x])
    nu, times = 0.05, np.array([0.0, 0.5, 1.0])
    frames, _ = solve_navier_stokes_3d(np.stack([abc, abc2, tg]), nu=nu, times=times, dt=0.05)
    for sample, (u0, rate) in enumerate([(abc, nu), (abc2, 4 * nu), (tg, 2 * nu)]):
        for i, t in enumerate(times):
            assert np.abs(frames[sample, i] - u0 * np.exp(-rate * t)).max() < 1e-12


def test_taylor_green_3d_energy_decays_at_exact_rate_over_short_time() -> None:
    # u0 = (sin x cos y cos z, -cos x sin y cos z, 0): all energy at |k|^2 = 3, so dE/dt = -nu <|omega|^2> = -6 nu E
    # while the nonlinear transfer (zero at t = 0) only changes E(t) / (E0 exp(-6 nu t)) at O(t^3).
    x, y, z = grid()
    u0 = np.stack([np.sin(x) * np.cos(y) * np.cos(z), -np.cos(x) * np.sin(y) * np.cos(z), 0 * x])
    nu, times = 0.1, np.array([0.0, 0.05, 0.1])
    frames, _ = solve_navier_stokes_3d(u0[None], nu=nu, times=times, dt=0.01)
    energy = kinetic_energy(frames[0])
    assert np.isclose(energy[0], 1 / 8)
    deviation = energy / (energy[0] * np.exp(-6 * nu * times)) - 1
    assert abs(deviation[1]) < 5e-6  # a wrong rate -4 nu would give 1e-2
    assert 6 < deviation[2] / deviation[1] < 10  # the O(t^3) transfer: factor 8 per doubling of t


def test_nonlinear_term_matches_closed_form() -> None:
    # For the classical Taylor-Green u0, -P[u . grad u] = (-sin 2x cos 2z, -sin 2y cos 2z, (cos 2x + cos 2y) sin 2z) / 8
    # (derived by hand); compared with the inviscid tendency by a second-order one-sided difference.
    x, y, z = grid()
    u0 = np.stack([np.sin(x) * np.cos(y) * np.cos(z), -np.cos(x) * np.sin(y) * np.cos(z), 0 * x])
    c2x, c2y, c2z = np.cos(2 * x), np.cos(2 * y), np.cos(2 * z)
    exact = np.stack([-np.sin(2 * x) * c2z, -np.sin(2 * y) * c2z, (c2x + c2y) * np.sin(2 * z)]) / 8
    h = 1e-4
    frames, _ = solve_navier_stokes_3d(u0[None], nu=0.0, times=[0.0, h, 2 * h], dt=h)
    tendency = (-3 * frames[0, 0] + 4 * frames[0, 1] - frames[0, 2]) / (2 * h)
    assert np.linalg.norm(tendency - exact) / np.linalg.norm(exact) < 1e-6


@pytest.mark.slow
def test_forced_run_is_divergence_free_and_injects_exact_power() -> None:
    # With nu = 0 the de-aliased nonlinear term conserves energy, so E(t) = E0 + epsilon t exactly.
    u0 = random_velocity(2, N, np.random.SeedSequence(0).spawn(2), 0.7)
    times = np.array([0.0, 0.5, 1.0])
    frames, _ = solve_navier_stokes_3d(u0, nu=0.0, epsilon=0.1, times=times, dt=0.02)
    energy = np.stack([kinetic_energy(frames[:, i]) for i in range(len(times))], axis=1)
    assert np.abs(energy - energy[:, :1] - 0.1 * times).max() < 1e-6
    assert max_divergence(frames.reshape(-1, 3, N, N, N)) < 1e-13
    assert max_divergence(u0) < 1e-13


def test_pressure_of_taylor_green_and_abc_flows_is_exact() -> None:
    # Classical Taylor-Green: p = (cos 2x + cos 2y)(cos 2z + 2) / 16. ABC (Beltrami, u x omega = 0): grad(p + |u|^2/2)
    # = 0, so p = -|u|^2 / 2 up to its mean. 2D Taylor-Green solved to t: p = (cos 2x + cos 2y) exp(-4 nu t) / 4.
    x, y, z = grid()
    tg = np.stack([np.sin(x) * np.cos(y) * np.cos(z), -np.cos(x) * np.sin(y) * np.cos(z), 0 * x])
    abc = np.stack([np.sin(z) + 0.5 * np.cos(y), 0.8 * np.sin(x) + np.cos(z), 0.5 * np.sin(y) + 0.8 * np.cos(x)])
    p_tg, p_abc = pressure(np.stack([tg, abc]))
    assert np.abs(p_tg - (np.cos(2 * x) + np.cos(2 * y)) * (np.cos(2 * z) + 2) / 16).max() < 1e-14
    half_speed2 = 0.5 * (abc**2).sum(axis=0)
    assert np.abs(p_abc - (half_speed2.mean() - half_speed2)).max() < 1e-14
    nu, times = 0.05, np.array([0.0, 0.5, 1.0])
    tg2 = np.stack([np.sin(x) * np.cos(y), -np.cos(x) * np.sin(y), 0 * x])
    frames, _ = solve_navier_stokes_3d(tg2[None], nu=nu, times=times, dt=0.05)
    for i, t in enumerate(times):
        exact = (np.cos(2 * x) + np.cos(2 * y)) * np.exp(-4 * nu * t) / 4
        assert np.abs(pressure(frames[:, i])[0] - exact).max() < 1e-13
    # a box of side 1 scales the wave numbers by 2 pi: the same Taylor-Green field in x / (2 pi) has the same p
    assert np.abs(pressure(tg[None], length=1.0)[0] - p_tg).max() < 1e-14


@pytest.mark.slow
def test_turbulence_generator_deterministic() -> None:
    kwargs = dict(samples=2, resolution=16, t_final=0.1, spinup=0.2)
    data, settings = generate_turbulence3d(**kwargs)
    again, _ = generate_turbulence3d(**kwargs, batch_size=1, workers=1)
    other, _ = generate_turbulence3d(**kwargs, seed=1)
    second, _ = generate_turbulence3d(**{**kwargs, "samples": 1}, first=1)
    assert data.shape == (2, 3, 16, 16, 16, 4) and data.dtype == np.float32
    assert np.array_equal(data, again) and not np.allclose(data, other)
    assert np.array_equal(second, data[1:])
    velocity = np.moveaxis(data[:, -1, ..., :3], -1, 1).astype(np.float64)
    assert max_divergence(velocity) < 1e-6  # float32 storage
    p = pressure(velocity)  # the stored p is the pressure of the stored velocity (to float32 rounding)
    assert np.abs(data[:, -1, ..., 3] - p).max() < 1e-5 * np.abs(p).max() and np.abs(p).max() > 0.1
    assert settings["pde"]["channels"] == ["u", "v", "w", "p"] and settings["pde"]["nu"] == 0.025


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: solve_navier_stokes_3d(np.zeros((1, 3, 8, 8, 8)), nu=-0.1, times=[1.0], dt=0.1), "nu=-0.1"),
        (lambda: solve_navier_stokes_3d(np.zeros((1, 3, 8, 8, 8)), nu=0.1, times=[1.0], dt=-1.0), "dt=-1.0"),
        (lambda: generate_turbulence3d(1, resolution=7), "resolution=7"),
        (lambda: generate_turbulence3d(1, resolution=16, viscosity=0.1), "viscosity"),
    ],
)
def test_bad_arguments_raise_config_error(call, name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        call()
