"""2D compressible Navier–Stokes on the periodic unit square: PDEBench's 2D CFD "Rand" sets (DPOT's CNS data).

    rho_t + div(rho v) = 0,
    (rho v)_t + div(rho v v + p I) = div tau,
    E_t + div((E + p) v) = div(tau v),            E = p / (gamma - 1) + rho |v|^2 / 2,
    tau = mu (grad v + grad v^T) + (mu_b - 2 mu / 3) (div v) I,    mu = eta rho,  mu_b = zeta rho,

with ``gamma = 5/3`` and no heat conduction (PDEBench has none). The viscosities follow PDEBench's generator,
which makes the dynamic viscosities ``eta rho`` and ``zeta rho`` ("so that dv/dt = eta d^2v/dx^2"): ``eta`` and
``zeta`` act as kinematic viscosities, and a shear wave decays at ``exp(-eta k^2 t)`` whatever the density
(PDEBench's paper writes ``eta``, ``zeta`` as dynamic viscosities; its data come from the code). The stress is the
full Newtonian tensor; PDEBench's directionally split viscous update leaves out its mixed derivatives.

Finite volume on the cell centres ``x_i = (i + 1/2) / n``: MUSCL reconstruction of the primitive variables
``(rho, u, v, p)`` with the MC limiter, the HLLC flux (Toro; Davis wave speeds), central differences for the
stress on the faces (normal derivatives compact, tangential ones averaged from the two cells). Time: Strang
splitting, half a step of the viscous terms by RKL2 super-time-stepping (stable for any step with enough
stages), a step of the Euler terms by SSP-RK2, the other half of the viscous terms; per-sample steps limited by
the wave speeds only (an explicit viscous limit, ``h^2 / (4 (4/3 eta + zeta))``, would take ~9000 steps to t = 1
at 64^2 and eta = 0.1). Mass, momentum and energy are conserved to round-off; docs/solvers.md.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from opformer.errors import ConfigError
from opformer.pde.finite_volume import march_frames, muscl_faces, rkl2_stages, rkl2_step, ssp_rk2_step
from opformer.pde.parallel import thread_map
from opformer.pde.samples import check_positive, frame_times, solve_samples

#: PDEBench CFD: a monatomic ideal gas on the periodic unit square, frames every 0.05 up to t = 1.
GAMMA = 5.0 / 3.0
#: PDEBench's "2D_rand" initial fields (``init_multi_HD_2DRand`` with its defaults, config ``2D_Multi_Rand``):
#: background density ``rho0 ~ U(0.1, 10)`` and temperature ``T0 = p0 / rho0 ~ U(0.1, 10)``; each of ``vx, vy, p,
#: rho`` is a sum over the wave vectors ``2 pi (i, j)``, ``i, j`` in ``-4..4`` with ``i j != 0`` (64 modes), of
#: ``|k|^(-1/2) sin(k.x + phase)`` with a uniform random phase per mode and field; the velocity is scaled so that
#: its mean magnitude is ``Mach * sqrt(gamma T0)``, density and pressure become ``rho0 (1 + d f / mean|f|)``,
#: ``p0 (1 + d f / mean|f|)`` with ``d ~ U(0.01, 0.2)`` each. With probability 1/2 the perturbations are confined
#: to a random rectangle ``[xL, xR] x [yL, yR]``, ``xL, yL ~ U(0.1, 0.45)``, ``xR, yR ~ U(0.55, 0.9)``, by the window
#: ``(tanh((x - xL)/w) - tanh((x - xR)/w)) / 2`` (and the same in y), ``w = 0.01``: outside it the gas is the
#: background at rest. (PDEBench draws xL and xR, and yL and yR, from one key each, so they move together; here
#: the four edges are independent.)
RAND = {"k_max": 4, "density": (0.1, 10.0), "temperature": (0.1, 10.0), "density_perturbation": (0.01, 0.2),
        "pressure_perturbation": (0.01, 0.2), "window_probability": 0.5, "window_low": (0.1, 0.45),
        "window_high": (0.55, 0.9), "window_width": 0.01}
#: Time steps: ``dt (max(|u| + c) / dx + max(|v| + c) / dy) <= CFL`` per sample for the Euler terms (MUSCL-MC
#: is TVD for a CFL number <= 1/2 and SSP-RK2 keeps the bound); the viscous terms take RKL2 super-steps of
#: ``dt / 2`` with enough stages to be stable (``viscous_limit``), so viscosity never shortens the steps.
CFL = 0.45
#: The fraction of the Gershgorin bound of the viscous forward-Euler step that ``viscous_limit`` allows.
VISCOUS_SAFETY = 0.5
#: Stored channels, in PDEBench's (and DPOT's) order.
CHANNELS = ["vx", "vy", "density", "pressure"]


def primitives(state: np.ndarray, gamma: float = GAMMA) -> np.ndarray:
    """``(rho, u, v, p)`` of the conserved ``(rho, rho u, rho v, E)`` (first axis)."""
    rho = state[0]
    u, v = state[1] / rho, state[2] / rho
    return np.stack([rho, u, v, (gamma - 1.0) * (state[3] - 0.5 * rho * (u * u + v * v))])


def conserved(primitive: np.ndarray, gamma: float = GAMMA) -> np.ndarray:
    """``(rho, rho u, rho v, E)`` of the primitive ``(rho, u, v, p)`` (first axis)."""
    rho, u, v, p = primitive
    return np.stack([rho, rho * u, rho * v, p / (gamma - 1.0) + 0.5 * rho * (u * u + v * v)])


def hllc_flux(left: np.ndarray, right: np.ndarray, gamma: float = GAMMA) -> np.ndarray:
    """HLLC flux ``(4, ...)`` through faces of primitive states ``(rho, normal v, tangential v, p)`` ``(4, ...)``.

    Components: mass, normal momentum, tangential momentum, energy. Wave speeds by Davis: ``S_L = min(u_L - c_L,
    u_R - c_R)``, ``S_R = max(u_L + c_L, u_R + c_R)``; the contact speed ``S*`` from the HLL middle state (Toro,
    eqs. 10.37-10.39). The flux is that of the side of ``S*`` the face lies on, plus ``min(S_L, 0)`` (or ``max(S_R,
    0)``) times the jump to that side's star state: one star state per face instead of two.
    """
    (rl, ul, vl, pl), (rr, ur, vr, pr) = left, right
    cl, cr = np.sqrt(gamma * pl / rl), np.sqrt(gamma * pr / rr)
    slow, fast = np.minimum(ul - cl, ur - cr), np.maximum(ul + cl, ur + cr)
    ml, mr = rl * (slow - ul), rr * (fast - ur)  # mass fluxes through the outer waves, relative to them
    star = (pr - pl + ml * ul - mr * ur) / (ml - mr)
    # select a side by weights 0 and 1 (exact, and much faster than np.where on a mask that varies by face)
    upwind = (star >= 0.0).astype(star.dtype)
    downwind = 1.0 - upwind
    r, u, v, p, speed, mass = (upwind * a + downwind * b for a, b in
                               ((rl, rr), (ul, ur), (vl, vr), (pl, pr), (slow, fast), (ml, mr)))
    weight = upwind * np.minimum(slow, 0.0) + downwind * np.maximum(fast, 0.0)
    energy = p / (gamma - 1.0) + 0.5 * r * (u * u + v * v)
    density = mass / (speed - star)  # the star state's
    jump_mass = density - r
    jump_energy = density * (energy / r + (star - u) * (star + p / mass)) - energy
    flux_mass = r * u
    return np.stack([flux_mass + weight * jump_mass, flux_mass * u + p + weight * (density * star - r * u),
                     (flux_mass + weight * jump_mass) * v, (energy + p) * u + weight * jump_energy])


def _flux_difference(primitive: np.ndarray, gamma: float) -> np.ndarray:
    """``F(i + 1/2) - F(i - 1/2)`` along the (periodic) last axis of ``primitive`` ``(rho, normal, tangential, p)``."""
    n = primitive.shape[-1]
    padded = primitive[..., np.arange(-2, n + 2) % n]  # two periodic ghost cells a side (any n, 1 included)
    return np.diff(hllc_flux(*muscl_faces(padded), gamma), axis=-1)


def viscous_tendency(primitive: np.ndarray, dx: float, dy: float, eta: float, zeta: float) -> np.ndarray:
    """``(0, div tau, div(tau v))`` ``(4, batch, nx, ny)`` of ``primitive`` ``(rho, u, v, p)`` on the periodic grid.

    The stress is evaluated on the faces: on an x-face ``du/dx``, ``dv/dx`` are compact differences of the two
    cells, ``du/dy``, ``dv/dy`` the mean of their central differences, ``rho`` and ``v`` (for the work) their means;
    the same on y-faces. Its divergence is a difference of face values, so momentum and energy are conserved.
    """
    q = primitive[:3]
    q = np.concatenate([q[..., -1:, :], q, q[..., :1, :]], axis=-2)
    q = np.concatenate([q[..., -1:], q, q[..., :1]], axis=-1)  # (rho, u, v) with one periodic ghost cell a side
    out = np.zeros((4, *primitive.shape[1:]))
    for axis, h, h_other, normal, tangential in ((-2, dx, dy, 1, 2), (-1, dy, dx, 2, 1)):
        # axis of the faces first: (3, batch, n along + 2, n across + 2)
        grid = q if axis == -2 else q.swapaxes(-1, -2)
        cells = grid[..., 1:-1]  # no ghosts across
        left, right = cells[..., :-1, :], cells[..., 1:, :]  # either side of the n + 1 faces
        along = (right - left) / h
        central = (grid[..., 2:] - grid[..., :-2]) / (2.0 * h_other)  # across, in every cell
        across = 0.5 * (central[..., :-1, :] + central[..., 1:, :])
        mean = 0.5 * (left + right)
        divergence = along[normal] + across[tangential]
        tau_normal = mean[0] * (2.0 * eta * along[normal] + (zeta - 2.0 * eta / 3.0) * divergence)
        tau_shear = eta * mean[0] * (across[normal] + along[tangential])
        work = mean[normal] * tau_normal + mean[tangential] * tau_shear
        flux = np.stack([tau_normal, tau_shear, work])
        difference = (flux[..., 1:, :] - flux[..., :-1, :]) / h
        if axis == -1:
            difference = difference.swapaxes(-1, -2)
        out[[normal, tangential, 3]] = out[[normal, tangential, 3]] + difference
    return out


def inviscid_tendency(state: np.ndarray, dx: float, dy: float, gamma: float = GAMMA) -> np.ndarray:
    """``d state / dt`` of the Euler terms; ``state`` is ``(4, batch, nx, ny)``: ``rho, rho u, rho v, E``."""
    rho, u, v, p = primitives(state, gamma)
    along_x = _flux_difference(np.stack([rho, u, v, p]).swapaxes(-1, -2), gamma).swapaxes(-1, -2)
    along_y = _flux_difference(np.stack([rho, v, u, p]), gamma)[[0, 2, 1, 3]]
    return -(along_x / dx + along_y / dy)


def max_step(state: np.ndarray, dx: float, dy: float, gamma: float = GAMMA, cfl: float = CFL) -> np.ndarray:
    """The largest stable step of the Euler terms of each sample: ``cfl / (max(|u| + c) / dx + max(|v| + c) / dy)``."""
    rho, u, v, p = primitives(state, gamma)
    c = np.sqrt(gamma * p / rho)
    return cfl / ((np.abs(u) + c).max(axis=(-2, -1)) / dx + (np.abs(v) + c).max(axis=(-2, -1)) / dy)


def viscous_limit(rho: np.ndarray, dx: float, dy: float, eta: float, zeta: float) -> np.ndarray:
    """Each sample's forward-Euler step limit of the viscous terms, ``VISCOUS_SAFETY`` over the largest diagonal.

    The diagonal of the velocity's stress operator in a cell is at most ``(4/3 eta + zeta)`` times the sum over
    the axes of ``(rho of the two faces) / (rho h^2)``; a forward-Euler step is stable below its inverse
    (Gershgorin), with ``VISCOUS_SAFETY`` for the mixed derivatives.
    """
    diagonal = 0.0
    for axis, h in ((-2, dx), (-1, dy)):
        faces = 0.5 * (np.roll(rho, -1, axis) + 2.0 * rho + np.roll(rho, 1, axis))
        diagonal = diagonal + faces / (rho * h * h)
    return VISCOUS_SAFETY / ((4.0 * eta / 3.0 + zeta) * np.max(diagonal, axis=(-2, -1)))


def viscous_step(state: np.ndarray, dt: np.ndarray, dx: float, dy: float, eta: float, zeta: float,
                 gamma: float = GAMMA) -> np.ndarray:
    """The viscous terms over ``dt`` (one per sample) by RKL2, with the fewest stages stable for every sample."""
    ratio = np.max(dt / viscous_limit(state[0], dx, dy, eta, zeta))
    return rkl2_step(state, dt, lambda q: viscous_tendency(primitives(q, gamma), dx, dy, eta, zeta),
                     rkl2_stages(ratio))


def advance(state: np.ndarray, dt: np.ndarray, dx: float, dy: float, eta: float, zeta: float,
            gamma: float = GAMMA) -> np.ndarray:
    """One Strang-split step of ``dt`` (one per sample): viscous ``dt/2``, Euler ``dt`` (SSP-RK2), viscous ``dt/2``."""
    if not (eta or zeta):
        return ssp_rk2_step(state, dt, lambda q: inviscid_tendency(q, dx, dy, gamma))
    state = viscous_step(state, 0.5 * dt, dx, dy, eta, zeta, gamma)
    state = ssp_rk2_step(state, dt, lambda q: inviscid_tendency(q, dx, dy, gamma))
    return viscous_step(state, 0.5 * dt, dx, dy, eta, zeta, gamma)


def solve_compressible_ns(state: np.ndarray, times: np.ndarray, dx: float, dy: float, eta: float, zeta: float,
                          gamma: float = GAMMA, cfl: float = CFL,
                          stop: threading.Event | None = None) -> tuple[np.ndarray, int]:
    """Frames ``(len(times), 4, batch, nx, ny)`` (float64) of ``rho, rho u, rho v, E`` from ``state``; the steps taken.

    ``state`` is ``(4, batch, nx, ny)`` of cell averages on the periodic grid of spacings ``dx``, ``dy`` (a 1D problem
    is an ``n x 1`` strip). Each sample steps by ``max_step`` (``advance``), the steps landing on the frame times
    (``finite_volume.march_frames``); ``stop`` (set: raise ``Stopped``) is polled every step. Raises ``ConfigError``
    if a density or pressure stops being positive and finite.
    """

    def check(state: np.ndarray, t: float) -> None:
        rho, _, _, p = primitives(state, gamma)
        if not (np.all(rho > 0.0) and np.all(p > 0.0)):
            raise ConfigError(f"the density or pressure is no longer positive and finite at t={t:g}")

    return march_frames(state, times, lambda state: max_step(state, dx, dy, gamma, cfl),
                        lambda state, dt: advance(state, dt, dx, dy, eta, zeta, gamma), check, stop)


def _modes(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``RAND``'s mode amplitudes ``|k|^(-1/2)`` ``(m,)`` and ``sin(k.x)``, ``cos(k.x)`` ``(m, n, n)`` on the centres."""
    k_max = RAND["k_max"]
    pairs = np.array([(i, j) for j in range(-k_max, k_max + 1) for i in range(-k_max, k_max + 1) if i * j != 0])
    k = 2.0 * np.pi * pairs
    x = (np.arange(n) + 0.5) / n
    angle = k[:, 0, None, None] * x[:, None] + k[:, 1, None, None] * x[None, :]
    return np.hypot(k[:, 0], k[:, 1]) ** -0.5, np.sin(angle), np.cos(angle)


def _window(x: np.ndarray, low: float, high: float) -> np.ndarray:
    width = RAND["window_width"]
    return 0.5 * (np.tanh((x - low) / width) - np.tanh((x - high) / width))


def random_fields(rngs: list[np.random.Generator], n: int, mach: float, gamma: float = GAMMA) -> np.ndarray:
    """PDEBench's random initial fields (``RAND``): primitive ``(rho, u, v, p)`` ``(4, batch, n, n)``, one per rng.

    Each rng draws, in this order: ``rho0``, the density perturbation, ``T0``, the pressure perturbation, the
    phases ``(64, 4)`` (of ``vx, vy, p, rho``), whether to window, the window's ``xL, xR, yL, yR``.
    """
    amplitude, sine, cosine = _modes(n)
    x = (np.arange(n) + 0.5) / n
    out = np.empty((4, len(rngs), n, n))
    for index, rng in enumerate(rngs):
        rho0 = rng.uniform(*RAND["density"])
        delta_rho = rng.uniform(*RAND["density_perturbation"])
        t0 = rng.uniform(*RAND["temperature"])
        delta_p = rng.uniform(*RAND["pressure_perturbation"])
        phase = rng.uniform(0.0, 2.0 * np.pi, (len(amplitude), 4))
        windowed = rng.uniform() < RAND["window_probability"]
        (x_low, y_low), (x_high, y_high) = rng.uniform(*RAND["window_low"], 2), rng.uniform(*RAND["window_high"], 2)
        # sum_m a_m sin(k_m.x + phase) = sum_m a_m (cos(phase) sin(k_m.x) + sin(phase) cos(k_m.x))
        vx, vy, p, rho = (np.tensordot(amplitude[:, None] * np.cos(phase), sine, axes=(0, 0))
                          + np.tensordot(amplitude[:, None] * np.sin(phase), cosine, axes=(0, 0)))
        scale = mach * np.sqrt(gamma * t0) / np.hypot(vx, vy).mean()
        rho = rho0 * (1.0 + delta_rho * rho / np.abs(rho).mean())
        p = rho0 * t0 * (1.0 + delta_p * p / np.abs(p).mean())
        mask = _window(x, x_low, x_high)[:, None] * _window(x, y_low, y_high)[None, :] if windowed else 1.0
        out[:, index] = [rho0 + (rho - rho0) * mask, scale * vx * mask, scale * vy * mask,
                         rho0 * t0 + (p - rho0 * t0) * mask]
    return out


def generate_compressible_ns(samples: int, resolution: int = 64, mach: float = 1.0, eta: float = 0.1,
                             t_final: float = 1.0, frame_dt: float = 0.05, seed: int = 0, *, first: int = 0,
                             batch_size: int = 8, workers: int = 2,
                             progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """PDEBench 2D CFD "Rand" trajectories: ``(samples, time, n, n, 4)`` float32 ``vx, vy, density, pressure``.

    ``zeta = eta`` (as in every PDEBench and DPOT set); frames every ``frame_dt`` up to ``t_final`` (21 frames by
    default). The grid: cell centres ``x_i = (i + 1/2) / n``, stored as the periodic grid (``i / n``; the half-cell
    offset is a constant shift of a periodic axis). Sample ``i``'s initial fields come from
    ``SeedSequence(seed).spawn(first + samples)[first + i]`` (``random_fields``); chunks of ``batch_size`` samples
    are solved by ``workers`` threads; results do not depend on either. Returns the array and ``{"pde", "solver"}``.
    """
    if int(resolution) != resolution or resolution < 4:
        raise ConfigError(f"resolution={resolution} is invalid: expected an integer >= 4")
    check_positive("mach", mach)
    check_positive("eta", eta, allow_zero=True)
    check_positive("batch_size", batch_size)
    times = frame_times(t_final, frame_dt)
    spacing = 1.0 / resolution

    def solve(primitive: np.ndarray, stop: threading.Event) -> np.ndarray:
        frames, _ = solve_compressible_ns(conserved(primitive), times, spacing, spacing, eta, eta, stop=stop)
        rho, u, v, p = primitives(frames.swapaxes(0, 1))  # (4, time, batch, n, n)
        return np.stack([u, v, rho, p], axis=-1).swapaxes(0, 1)

    def solve_block(seeds: list[np.random.SeedSequence]) -> np.ndarray:
        primitive = random_fields([np.random.default_rng(s) for s in seeds], resolution, mach)
        chunks = [primitive[:, i : i + batch_size] for i in range(0, len(seeds), batch_size)]
        return np.concatenate(thread_map(solve, chunks, workers))

    out = solve_samples(samples, seed, first, batch_size * max(1, workers), (len(times), resolution, resolution, 4),
                        solve_block, progress)
    pde = {"name": "compressible_navier_stokes_2d_rand", "gamma": GAMMA, "mach": mach, "eta": eta, "zeta": eta,
           "viscosity": "PDEBench's: dynamic shear and bulk viscosities eta rho and zeta rho; no heat conduction",
           "length": 1.0, "grid": "cell centres x_i = (i + 1/2) / n (stored as the periodic grid i / n); axes (x, y)",
           "boundary": "periodic", "initial_condition": {"type": "pdebench_2d_rand", "mach": mach, **RAND},
           "times": times.tolist(), "channels": CHANNELS}
    solver = {"name": "finite volume: HLLC flux (Davis speeds), MUSCL on (rho, u, v, p) with the MC limiter, "
                      "central viscous stress on the faces; Strang splitting: RKL2 viscous half steps, SSP-RK2 "
                      "Euler step", "solve_resolution": resolution, "cfl": CFL, "viscous_safety": VISCOUS_SAFETY,
              "time_step": "per sample, limited by the wave speeds, landing on the frame times"}
    return out, {"pde": pde, "solver": solver}
