"""The physics estimates: exact on manufactured solutions (zero residual for an exact solution, the known value for
a known perturbation), the solver's own scheme, the rank arithmetic of normalized scores, a synthetic shift
flagged."""

import math

import numpy as np
import pytest
import torch

from opformer.pde.darcy import assemble_darcy, solve_darcy
from opformer.pde.kolmogorov import KOLMOGOROV_FORCING, kolmogorov_forcing, laminar_vorticity
from opformer.pde.navier_stokes import FNO_FORCING, fno_forcing
from opformer.trust.conformal import conformal_quantile, conformal_rank
from opformer.trust.physics import (DARCY_TOLERANCE, Vorticity, cg_steps, conjugate_gradients,
                                    contraction, darcy_error_estimate, darcy_estimates, darcy_operator,
                                    darcy_residual, forecast_estimates, history_estimates, inverse_laplacian,
                                    normalized_scores, vorticity_physics)
from opformer.trust.shift import flag_shifted
from tests.trust.trust_runs import smooth_vorticity, vorticity_frames


def interior_field(generator: torch.Generator, n: int, batch: int = 2) -> torch.Tensor:
    """A random nodal field, zero on the boundary."""
    u = torch.zeros(batch, n, n, dtype=torch.float64)
    u[:, 1:-1, 1:-1] = torch.randn(batch, n - 2, n - 2, generator=generator, dtype=torch.float64)
    return u


def test_darcy_residual_is_the_solvers_scheme():
    g = torch.Generator().manual_seed(0)
    n = 9
    a = torch.where(torch.randn(1, n, n, generator=g) > 0, 12.0, 3.0).double()
    u = interior_field(g, n, 1)
    h = 1 / (n - 1)
    matrix = assemble_darcy(a[0].numpy())
    expected = 1.0 - (matrix @ u[0, 1:-1, 1:-1].numpy().ravel()) / h**2
    assert np.allclose(darcy_residual(a, u, 1.0)[0].numpy().ravel(), expected, rtol=0, atol=1e-10)


def test_darcy_residual_vanishes_on_the_solvers_solution():
    g = torch.Generator().manual_seed(1)
    a = torch.where(torch.randn(17, 17, generator=g) > 0, 12.0, 3.0).double()
    u = torch.from_numpy(solve_darcy(a.numpy(), 1.0, solver="direct"))
    assert darcy_residual(a[None], u[None]).abs().max() < 1e-9
    assert darcy_estimates(a[None], u[None]).item() < 1e-11


def test_inverse_laplacian_solves_the_5_point_system():
    g = torch.Generator().manual_seed(2)
    m = 7
    r = torch.randn(3, m, m, generator=g, dtype=torch.float64)
    e = inverse_laplacian(r)
    padded = torch.nn.functional.pad(e, (1, 1, 1, 1))
    h = 1 / (m + 1)
    laplacian = (padded[:, 2:, 1:-1] + padded[:, :-2, 1:-1] + padded[:, 1:-1, 2:] + padded[:, 1:-1, :-2]
                 - 4 * e) / h**2
    assert torch.allclose(-laplacian, r, rtol=0, atol=1e-10)


@pytest.mark.parametrize("tolerance", [DARCY_TOLERANCE, None])
def test_darcy_estimate_is_the_error_of_a_known_perturbation_for_a_constant_coefficient(tolerance):
    g = torch.Generator().manual_seed(3)
    n = 12
    a = torch.full((2, n, n), 2.5, dtype=torch.float64)
    u = interior_field(g, n)
    f = -darcy_residual(a, u, 0.0)  # u solves the discrete problem with this forcing exactly
    f = torch.nn.functional.pad(f, (1, 1, 1, 1))
    assert darcy_residual(a, u, f).abs().max() < 1e-9
    delta = 1e-2 * interior_field(g, n)
    estimate = darcy_error_estimate(a, u + delta, f, tolerance)
    assert torch.allclose(estimate, -delta[:, 1:-1, 1:-1], rtol=0, atol=1e-12)
    relative = delta.flatten(1).norm(dim=1) / (u + delta).flatten(1).norm(dim=1)
    assert torch.allclose(darcy_estimates(a, u + delta, f, tolerance), relative, rtol=1e-10)


def test_darcy_operator_is_the_solvers_matrix():
    g = torch.Generator().manual_seed(4)
    n = 9
    a = torch.where(torch.randn(2, n, n, generator=g) > 0, 12.0, 3.0).double()
    e = torch.randn(2, n - 2, n - 2, generator=g, dtype=torch.float64)
    for i in range(2):
        expected = assemble_darcy(a[i].numpy()) @ e[i].numpy().ravel() * (n - 1) ** 2
        assert np.allclose(darcy_operator(a, e)[i].numpy().ravel(), expected, rtol=1e-12, atol=0)


def test_cg_steps_follow_the_a_priori_bound_of_the_contrast():
    a = torch.ones(4, 5, 5, dtype=torch.float64)
    a[0, 0, 0] = 4.0  # contrast 4: rate 1/3, 2 / 27 <= 0.1 < 2 / 9
    a[1, 2, 2] = 10.0  # contrast 10: rate 0.519..., 2 rate^5 = 0.076 <= 0.1 < 2 rate^4 = 0.146
    a[2] *= 7.0  # constant: one step is exact
    a[3, 1, 1] = 100.0  # contrast 100: rate 9 / 11, 15 steps (2 rate^14 = 0.12)
    assert torch.allclose(contraction(a), torch.tensor([1 / 3, (10**0.5 - 1) / (10**0.5 + 1), 0.0, 9 / 11],
                                                       dtype=torch.float64), rtol=1e-14, atol=0)
    assert cg_steps(a, 0.1).tolist() == [3, 5, 1, 15]
    assert cg_steps(a, 0.05).tolist() == [4, 6, 1, 19]
    assert cg_steps(a, 0.5).tolist() == [2, 3, 1, 7]
    a[0, 0, 0] = 0.0  # no contrast bound
    assert cg_steps(a, 0.1).tolist() == [1, 5, 1, 15]


def energy_norm(a: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    return (e * darcy_operator(a, e)).flatten(1).sum(dim=1).sqrt()


def test_conjugate_gradients_approach_the_exact_discrete_error_within_the_bound():
    g = torch.Generator().manual_seed(5)
    n = 9
    a = torch.where(torch.randn(2, n, n, generator=g) > 0, 12.0, 3.0).double()
    u = torch.from_numpy(np.stack([solve_darcy(x.numpy(), 1.0, solver="direct") for x in a]))
    pred = u + 0.05 * u.abs().max() * interior_field(g, n)
    r = darcy_residual(a, pred)
    dense = [np.linalg.solve(assemble_darcy(x.numpy()).toarray() * (n - 1) ** 2, ri.numpy().ravel())
             for x, ri in zip(a, r)]
    exact = torch.from_numpy(np.stack(dense)).reshape(r.shape)
    assert torch.allclose(exact, (u - pred)[:, 1:-1, 1:-1], rtol=0, atol=1e-9)  # A (u - pred) = r
    size = energy_norm(a, exact)
    misses = [energy_norm(a, exact - conjugate_gradients(a, r, torch.full((2,), k))) / size for k in range(8)]
    rate = contraction(a)
    for k in range(1, 8):
        assert (misses[k] < misses[k - 1]).all()  # conjugate gradients minimise the energy-norm error
        assert (misses[k] <= 2 * rate**k).all()
    assert misses[0].eq(1).all()
    converged = conjugate_gradients(a, r, torch.full((2,), (n - 2) ** 2))
    assert torch.allclose(converged, exact, rtol=0, atol=1e-9 * float(exact.abs().max()))
    estimate = darcy_error_estimate(a, pred)  # cg_steps: 3 at contrast 4
    assert torch.equal(estimate, conjugate_gradients(a, r, torch.full((2,), 3)))
    assert (energy_norm(a, exact - estimate) <= DARCY_TOLERANCE * size).all()
    one_solve = darcy_error_estimate(a, pred, tolerance=None)
    assert torch.allclose(one_solve, inverse_laplacian(r) / a.flatten(1).mean(dim=1)[:, None, None], rtol=1e-14)
    assert ((exact - estimate).flatten(1).norm(dim=1) < (exact - one_solve).flatten(1).norm(dim=1)).all()


def test_conjugate_gradients_stop_each_sample_after_its_own_steps():
    g = torch.Generator().manual_seed(6)
    n = 10
    a = torch.exp(torch.randn(3, n, n, generator=g, dtype=torch.float64))
    r = torch.randn(3, n - 2, n - 2, generator=g, dtype=torch.float64)
    steps = torch.tensor([1, 4, 2])
    together = conjugate_gradients(a, r, steps)
    for i in range(3):
        alone = conjugate_gradients(a[i:i + 1], r[i:i + 1], steps[i:i + 1])
        assert torch.allclose(together[i:i + 1], alone, rtol=1e-13, atol=0)
    assert torch.equal(conjugate_gradients(a, torch.zeros_like(r), steps), torch.zeros_like(r))


def same_shell_vortex(n: int, length: float = 2 * math.pi) -> torch.Tensor:
    """Vorticity of modes (1, 2), (2, 1), (2, -1) on ``[0, length)^2``: its advection vanishes (one |k| shell)."""
    x = torch.arange(n, dtype=torch.float64) * length / n
    k = 2 * math.pi / length
    X, Y = torch.meshgrid(x, x, indexing="ij")
    return torch.cos(k * (X + 2 * Y)) + 0.5 * torch.sin(k * (2 * X + Y)) - 0.3 * torch.cos(k * (2 * X - Y))


def test_vorticity_residual_vanishes_for_a_decaying_vortex_and_sees_a_perturbed_step():
    n, nu, drag, h = 16, 0.05, 0.1, 0.3
    physics = Vorticity(nu, drag, 2 * math.pi, h)
    w0 = same_shell_vortex(n)
    rate = nu * 5 + drag  # |k|^2 = 5
    frames = torch.stack([w0 * math.exp(-rate * h * k) for k in range(4)])[None]
    assert physics.residual(frames).abs().max() < 1e-13
    x = torch.arange(n, dtype=torch.float64) * 2 * math.pi / n
    frames[0, 2] += 1e-3 * torch.cos(2 * x)[:, None]  # mode (2, 0): another shell, advected by the vortex
    r = physics.residual(frames)[0].abs().amax(dim=(1, 2))
    assert r[0] < 1e-13 and r[1] > 1e-4 and r[2] > 1e-4  # the steps into and out of the perturbed frame


def test_vorticity_residual_is_a_same_shell_perturbation_exactly():
    n, h = 16, 0.25
    physics = Vorticity(0.02, 0.0, 2 * math.pi, h)
    w0 = same_shell_vortex(n)
    frames = torch.stack([w0 * math.exp(-0.02 * 5 * h * k) for k in range(3)])[None].clone()
    x = torch.arange(n, dtype=torch.float64) * 2 * math.pi / n
    X, Y = torch.meshgrid(x, x, indexing="ij")
    delta = 1e-3 * torch.sin(X - 2 * Y)  # the same shell: advection stays zero
    frames[0, 2] += delta
    r = physics.residual(frames)[0]
    assert r[0].abs().max() < 1e-13
    assert torch.allclose(r[1], delta, rtol=0, atol=1e-13)


def test_the_laminar_kolmogorov_state_and_the_fno_steady_state_have_zero_residual():
    n = 32
    pde = {"name": "kolmogorov_flow", "nu": 1e-3, "drag": 0.1, "length": 2 * math.pi, "forcing": KOLMOGOROV_FORCING}
    physics = vorticity_physics(pde, n, 0.0625)
    laminar = torch.from_numpy(laminar_vorticity(n, 1e-3, 0.1))
    assert torch.equal(physics.forcing, torch.from_numpy(kolmogorov_forcing(n)))
    assert physics.residual(laminar.expand(1, 3, n, n)).abs().max() < 1e-12
    fno = {"name": "navier_stokes_2d_fno", "nu": 1e-3, "drag": 0.0, "length": 1.0, "forcing": FNO_FORCING}
    physics = vorticity_physics(fno, n, 1.0)
    steady = torch.from_numpy(fno_forcing(n)) / (1e-3 * 8 * math.pi**2)  # |k|^2 = 8 pi^2
    assert physics.residual(steady.expand(2, 2, n, n)).abs().max() < 1e-12
    assert vorticity_physics({**fno, "forcing": "another"}, n, 1.0) is None
    assert vorticity_physics({"name": "darcy"}, n, 1.0) is None


def test_forecast_estimates_accumulate_the_step_residuals():
    n, h = 16, 0.25
    physics = Vorticity(0.02, 0.0, 2 * math.pi, h)
    w0 = same_shell_vortex(n)
    exact = torch.stack([w0 * math.exp(-0.1 * h * k) for k in range(4)])[None]
    assert forecast_estimates(physics, exact[:, 0], exact[:, 1:]).max() < 1e-13
    x = torch.arange(n, dtype=torch.float64) * 2 * math.pi / n
    X, Y = torch.meshgrid(x, x, indexing="ij")
    delta = 1e-3 * torch.sin(X - 2 * Y)
    forecast = exact[:, 1:].clone()
    forecast[:, 0] += delta  # the first forecast frame is off; the second step decays it, the third is exact
    steps = physics.residual(torch.cat([exact[:, :1], forecast], dim=1))[0].pow(2).mean(dim=(1, 2)).sqrt()
    rms = forecast[0].pow(2).mean(dim=(1, 2)).sqrt()
    assert torch.allclose(forecast_estimates(physics, exact[:, 0], forecast)[0], steps.cumsum(0) / rms)
    assert steps[0] == pytest.approx(delta.pow(2).mean().sqrt().item(), rel=1e-10)


@pytest.mark.slow
def test_a_history_at_another_viscosity_is_flagged():
    n, h = 32, 0.5
    w0, times = smooth_vorticity(48, n), np.arange(5) * h
    pde = {"name": "navier_stokes_2d_fno", "nu": 1e-3, "drag": 0.0, "length": 1.0, "forcing": FNO_FORCING}
    physics = vorticity_physics(pde, n, h)
    calibration = history_estimates(physics, vorticity_frames(1e-3, w0[:40], times)[..., 0])
    same = history_estimates(physics, vorticity_frames(1e-3, w0[40:44], times)[..., 0])
    shifted = history_estimates(physics, vorticity_frames(1e-2, w0[44:48], times)[..., 0])
    reference = calibration.log()[:, None]  # the calibration's screen of the estimates (trust.bounds.flag_estimates)
    assert not flag_shifted(same.log()[:, None], reference).any()
    assert flag_shifted(shifted.log()[:, None], reference).all()


def test_normalized_scores_keep_the_rank_arithmetic():
    errors = torch.tensor([0.1, 0.4, 0.2, 0.8, 0.3, 0.6, 0.5, 0.9, 0.7])
    estimates = torch.tensor([1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0])
    scores = normalized_scores(errors, estimates)
    assert torch.allclose(scores, (errors / estimates).double())
    assert conformal_rank(9, 0.8) == 8  # ceil(10 * 0.8)
    q = conformal_quantile(scores, 0.8)
    assert q.item() == pytest.approx(sorted(scores.tolist())[7])
    assert normalized_scores(torch.zeros(1), torch.zeros(1)).item() == 0
    assert math.isinf(normalized_scores(torch.ones(1), torch.zeros(1)).item())


def test_normalized_bounds_cover_a_heteroscedastic_model_at_the_conformal_rate():
    g = torch.Generator().manual_seed(4)
    n, trials, coverage = 19, 4000, 0.9
    estimates = torch.rand(trials, n + 1, generator=g, dtype=torch.float64) * 10 + 0.1
    errors = estimates * torch.randn(trials, n + 1, generator=g, dtype=torch.float64).abs()
    scores = normalized_scores(errors[:, :n], estimates[:, :n]).T
    bounds = conformal_quantile(scores, coverage) * estimates[:, n]
    covered = (errors[:, n] <= bounds).double().mean().item()
    assert abs(covered - conformal_rank(n, coverage) / (n + 1)) < 0.015  # 18 / 20 = 0.9, 3 standard errors
