"""3D buoyant smoke (FactFormer's Table 3 data): projection, advection order, rest state, the 2D solver on a slab,
mirror symmetry, mass, the files."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from opformer.cli import main
from opformer.data.store import read_fields, read_info
from opformer.pde.diffusion_reaction import neumann_eigenvalues
from opformer.pde.parallel import Stopped
from opformer.pde.smoke import advect_smoke, divergence, initial_smoke, project, smoke_step, solve_pressure, \
    solve_smoke
from opformer.pde.smoke3d import (BUOYANCY, DT, LENGTH, NOISE_SCALE, NOISE_SMOOTHNESS, NU, generate_smoke3d,
                                  initial_smoke3d, solve_smoke3d)


def random_faces(rng: np.random.Generator, n: int, batch: int = 2) -> tuple[np.ndarray, ...]:
    """Random face velocities of an ``n^3`` MAC grid: component ``a`` has ``n + 1`` faces along axis ``a``."""
    return tuple(rng.standard_normal((batch, *(n + (a == b) for b in range(3)))) for a in range(3))


def test_the_projection_leaves_no_discrete_divergence_in_3d_and_is_a_projection():
    # Measured at 12^3: max |div| 13.4 before, 7.3e-15 after.
    rng = np.random.default_rng(0)
    n = 12
    h = LENGTH / n
    velocity = random_faces(rng, n)
    projected = project(velocity, LENGTH)
    assert np.abs(divergence(velocity, h)).max() > 1.0
    assert np.abs(divergence(projected, h)).max() < 1e-12
    assert all(np.all(np.take(w, [0, -1], axis=a + 1) == 0.0) for a, w in enumerate(projected))  # closed walls
    again = project(projected, LENGTH)
    assert max(np.abs(p - q).max() for p, q in zip(projected, again)) < 1e-13
    smoke = initial_smoke3d(rng, n)[None]
    _, stepped = smoke_step(smoke, [w[:1] for w in projected], np.array([BUOYANCY]), DT, NU, LENGTH)
    assert np.abs(divergence(stepped, h)).max() < 1e-12  # a full step ends divergence-free too


def test_the_pressure_solve_inverts_the_7_point_no_flux_laplacian():
    n = 8
    h = LENGTH / n
    x = (np.arange(n) + 0.5) * h
    mode = (np.cos(np.pi * 3 * x / LENGTH)[:, None, None] * np.cos(np.pi * x / LENGTH)[None, :, None]
            * np.cos(np.pi * 2 * x / LENGTH)[None, None, :])[None]
    q = np.pad(mode, ((0, 0), (1, 1), (1, 1), (1, 1)), mode="edge")  # ghost cells copy the edge: no flux
    laplacian = (q[:, 2:, 1:-1, 1:-1] + q[:, :-2, 1:-1, 1:-1] + q[:, 1:-1, 2:, 1:-1] + q[:, 1:-1, :-2, 1:-1]
                 + q[:, 1:-1, 1:-1, 2:] + q[:, 1:-1, 1:-1, :-2] - 6.0 * mode) / h**2
    eigenvalue = neumann_eigenvalues(n, LENGTH, 3)[3, 1, 2]
    assert np.abs(laplacian - eigenvalue * mode).max() < 1e-12 * abs(eigenvalue)
    assert np.abs(solve_pressure(eigenvalue * mode, LENGTH) - mode).max() < 1e-12


def test_semi_lagrangian_advection_by_a_uniform_velocity_is_second_order_in_3d():
    # Measured (max error after 4 steps of dt = 0.75 at speeds (2, -2, 2) / 9, a Gaussian of variance 1.5):
    # 1.89e-1, 5.32e-2, 1.37e-2 at 16^3, 32^3, 64^3, orders 1.82, 1.95. Nearest-point sampling would be first
    # order, a wrong departure point order 0.
    def error(n: int, speed: float = 2.0 / 9.0, steps: int = 4) -> float:
        h = LENGTH / n
        x = np.meshgrid(*[(np.arange(n) + 0.5) * h] * 3, indexing="ij")

        def bump(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
            return np.exp(-((a - 4.0) ** 2 + (b - 4.0) ** 2 + (c - 4.0) ** 2) / 3.0)

        smoke = bump(*x)[None]
        velocity = [np.full((1, *(n + (a == b) for b in range(3))), sign * speed) for a, sign in enumerate((1, -1, 1))]
        for _ in range(steps):
            smoke = advect_smoke(smoke, velocity, DT / h)
        shift = speed * DT * steps
        return float(np.abs(smoke[0] - bump(x[0] - shift, x[1] + shift, x[2] - shift)).max())

    errors = np.array([error(n) for n in (16, 32, 64)])
    orders = np.log2(errors[:-1] / errors[1:])
    assert 1.9 <= orders[-1] <= 2.1 and orders[0] > 1.7 and errors[-1] < 1.5e-2


def test_a_uniform_smoke_stays_still_and_the_authors_force_order_would_move_it():
    frames = solve_smoke3d(np.full((1, 8, 8, 8), 0.7), np.array([1, 5, 28]))
    assert np.abs(frames[..., 1:]).max() < 1e-12 and np.abs(frames[..., 0] - 0.7).max() < 1e-12
    # The authors' script adds the force before the diffusion: the zero ghost velocities slow the hydrostatic
    # force next to the side walls before the projection, and the fluid turns (measured 8.2e-4 after one step).
    moved = solve_smoke(np.full((1, 8, 8, 8), 0.7), np.array([BUOYANCY]), np.array([1]), DT, NU, LENGTH,
                        force_first=True)
    assert np.abs(moved[..., 1:]).max() > 1e-4


@pytest.mark.slow
def test_a_smoke_constant_along_y_is_the_2d_solver_in_x_and_z_without_viscosity():
    # The same functions on two and three axes; with nu = 0 (measured max difference 7e-15 over 28 steps at
    # 16^3, velocities up to 0.9). With nu = 0.003 the y-walls' zero ghost velocities drag the flow, so it stops being
    # constant along y: measured 5.3e-3 after 4 steps, 0.15 after 28 (v reaches 0.04).
    n = 16
    slab = initial_smoke(np.random.default_rng(1), n, LENGTH, 2, NOISE_SCALE, NOISE_SMOOTHNESS)[None]
    steps = np.array([1, 4, 12, 28])
    flat = solve_smoke(slab, np.array([BUOYANCY]), steps, DT, 0.0, LENGTH)  # s, vx, vy with y up
    box = solve_smoke(np.repeat(slab[:, :, None], n, axis=2), np.array([BUOYANCY]), steps, DT, 0.0, LENGTH)
    assert np.abs(box[..., 2]).max() == 0.0  # no v ever
    assert np.abs(box[..., [0, 1, 3]] - flat[:, :, :, None]).max() < 1e-12
    assert np.abs(flat[:, -1, ..., 1:]).max() > 0.5  # a flow that moved
    viscous = solve_smoke(np.repeat(slab[:, :, None], n, axis=2), np.array([BUOYANCY]), steps[:2], DT, NU, LENGTH)
    assert np.abs(viscous[:, 1, ..., 2]).max() > 1e-4  # v after 4 steps: 4.3e-4


def test_mirror_symmetric_smoke_stays_mirror_symmetric():
    # Mirrored in x: d, v, w even and u odd (measured 9e-15 after 12 steps at 16^3); symmetric under x <-> y:
    # u and v swap (1.6e-14).
    smoke = initial_smoke3d(np.random.default_rng(2), 16)[None]
    frames = solve_smoke3d(smoke + smoke[:, ::-1], np.array([4, 12]))
    mirrored = frames[:, :, ::-1] * np.array([1.0, -1.0, 1.0, 1.0])
    assert np.abs(frames - mirrored).max() < 1e-12 and np.abs(frames[..., 1]).max() > 0.5
    frames = solve_smoke3d(smoke + smoke.swapaxes(1, 2), np.array([12]))
    swapped = frames.swapaxes(2, 3)[..., [0, 2, 1, 3]]
    assert np.abs(frames - swapped).max() < 1e-12


@pytest.mark.slow
def test_a_uniform_shift_keeps_the_mass_and_the_flow_changes_it_without_new_extrema():
    n = 16
    x = np.meshgrid(*[(np.arange(n) + 0.5) * LENGTH / n] * 3, indexing="ij")
    bump = np.exp(-sum((c - 4.0) ** 2 for c in x) / 0.3)[None]  # < 1e-15 within two cells of the walls
    velocity = [np.full((1, *(n + (a == b) for b in range(3))), speed) for a, speed in enumerate((0.7, -0.4, 0.3))]
    shifted = advect_smoke(bump, velocity, DT * n / LENGTH)
    assert shifted.sum() == pytest.approx(bump.sum(), rel=1e-12)  # the trilinear weights of a shift sum to one
    smoke = np.stack([initial_smoke3d(np.random.default_rng(s), n) for s in range(2)])
    d = solve_smoke3d(smoke)[..., 0]
    # Trilinear sampling is a convex combination: no new extrema, no negative smoke ...
    assert np.all(d.min(axis=(1, 2, 3, 4)) >= smoke.min(axis=(1, 2, 3)) - 1e-12)
    assert np.all(d.max(axis=(1, 2, 3, 4)) <= smoke.max(axis=(1, 2, 3)) + 1e-12)
    # ... but a back-traced departure point is not volume-preserving: the semi-Lagrangian scheme is not
    # conservative and the total drifts by a time-step error (measured over the 28 steps: 0.94-1.004 of the
    # initial at 16^3, 0.85-1.0004 at 32^3).
    mass = d.sum(axis=(2, 3, 4)) / smoke.sum(axis=(1, 2, 3))[:, None]
    assert np.all(mass > 0.9) and np.all(mass < 1.01) and mass.min() < 0.99


@pytest.mark.slow
def test_samples_do_not_depend_on_chunks_batches_or_threads_and_a_set_stop_ends_the_solve():
    whole, settings = generate_smoke3d(3, resolution=8, batch_size=2, workers=2)
    part, _ = generate_smoke3d(2, resolution=8, first=1, batch_size=1, workers=1)
    assert whole.shape == (3, 20, 8, 8, 8, 4) and whole.dtype == np.float32 and np.array_equal(whole[1:], part)
    assert settings["pde"]["times"] == pytest.approx(0.75 * np.arange(9, 29))
    assert settings["pde"]["channels"] == ["d", "u", "v", "w"] and settings["pde"]["length"] == 8.0
    first = initial_smoke3d(np.random.default_rng(np.random.SeedSequence(0).spawn(1)[0]), 8)
    assert np.array_equal(whole[0], solve_smoke3d(first[None])[0].astype(np.float32))
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopped):
        solve_smoke3d(np.ones((1, 8, 8, 8)), stop=stop)


def test_the_initial_smoke_is_the_same_field_on_every_grid():
    # The noise is a sum of the modes |m_i| <= 8 evaluated at the cell centres, and a grid of more than 16 cells
    # per axis sums each mode's square exactly, so its normalization (mean 0, standard deviation 1) is the field's
    # own: the centres of a 16^3 grid are every third centre of a 48^3 one, and the values agree (measured 6e-15;
    # 3.4e-7 between 8^3 and 24^3, where the 8^3 grid aliases the top modes).
    fine = initial_smoke3d(np.random.default_rng(7), 48)
    coarse = initial_smoke3d(np.random.default_rng(7), 16)
    assert np.abs(fine[1::3, 1::3, 1::3] - coarse).max() < 1e-12
    assert fine.min() >= 0.0 and abs(np.mean(fine**2) - 1.0) < 1e-12  # |noise| of a unit-variance noise


@pytest.mark.slow
def test_opformer_generate_smoke3d_stores_a_closed_3d_box_and_resumes(tmp_path, resume_after_interrupt):
    path = tmp_path / "smoke3d.h5"
    assert main(["generate", "smoke3d", "--samples", "2", "--resolution", "8", "--out", str(path)]) == 0
    info = read_info(path)
    assert info.input_channels == ["d", "u", "v", "w"]
    assert info.domain == {"lengths": [8.0, 8.0, 8.0], "periodic": [False] * 3, "grid": ["cells"] * 3}
    direct, _ = generate_smoke3d(2, resolution=8)
    assert np.array_equal(read_fields(path, slice(None)), direct)
    resumed = tmp_path / "resumed.h5"
    assert resume_after_interrupt("smoke3d", resumed, 3, chunk=2, resolution=8) == [2, 1]
    assert np.array_equal(read_fields(resumed, slice(None))[:2], direct)
