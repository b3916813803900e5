"""3D incompressible Navier–Stokes in velocity form on the periodic box ``[0, L)^3``.

    u_t = P[u x omega] + nu Laplacian u + f,    omega = curl u,   div u = 0,

with ``P`` the Leray projection (``P a = a - k (k . a) / |k|^2`` mode by mode; it also removes the
gradient ``grad(p + |u|^2 / 2)``).  Fourier pseudo-spectral, 2/3 rule on an ``N^3`` grid, ETDRK4
(viscosity exact).  Optional forcing ``f = epsilon / (2 E_f) u`` on the modes ``0 < |k| <= k_f``
(``E_f`` their kinetic energy): it injects exactly the power ``epsilon`` at large scales, giving
statistically steady isotropic turbulence.  Batched over samples.

The pressure (kinematic, density 1) is the gradient part the projection removes: with ``div u = 0`` and a
divergence-free forcing, ``-Laplacian p = d_i d_j (u_i u_j)``, so ``p^ = -k_i k_j (u_i u_j)^ / |k|^2`` mode by
mode (zero mean), on the de-aliased modes (:func:`pressure`).  The turbulence files store it beside the velocity.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.fft

from opformer.errors import ConfigError
from opformer.pde.grf import color_noise, grf_eigenvalues
from opformer.pde.samples import check_positive, check_resolution, frame_times, solve_samples
from opformer.pde.spectral import (dealias_mask, etdrk4_frames, from_grid, resize_spectrum, solver_settings, to_grid,
                                   wavenumbers)

LENGTH = 2.0 * np.pi
#: FFTs (of one real N^3 field) per ETDRK4 step: 4 stages x (6 inverse + 3 forward).
FFTS_PER_STEP_3D = 36
#: Defaults of the isotropic-turbulence preset, scaled to 32^3: ``k_max eta ~ 1.1`` for ``epsilon = 0.1``
#: (Kolmogorov scale ``eta = (nu^3 / epsilon)^(1/4) = 0.11``, ``k_max = 10``).
TURBULENCE = {"nu": 0.025, "epsilon": 0.1, "forcing_wavenumber": 2.0, "velocity_rms": 0.7}
#: Random initial velocity: each component N(0, (-Laplacian + 9 I)^-3) (spectrum peaked at |k| ~ 2-3),
#: projected on divergence-free fields, then scaled to ``velocity_rms`` per component.
TURBULENCE_GRF = {"alpha": 3.0, "tau": 3.0, "sigma": 1.0, "zero_mean": True}
TURBULENCE_DT = 0.02


def project(c: np.ndarray, k: list[np.ndarray]) -> np.ndarray:
    """Leray projection of vector half spectra ``c`` (batch, 3, ...) on divergence-free fields."""
    k2 = sum(ki**2 for ki in k)
    divergence = sum(ki * c[:, i] for i, ki in enumerate(k)) / np.where(k2 > 0, k2, 1.0)
    return np.stack([c[:, i] - ki * divergence for i, ki in enumerate(k)], axis=1)


def cross(a: list[np.ndarray] | np.ndarray, b: list[np.ndarray] | np.ndarray) -> list[np.ndarray]:
    """Cross product of two vectors given as sequences of three (broadcastable) component arrays."""
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def half_spectrum_weights(n: int) -> np.ndarray:
    """Multiplicity of each ``rfftn`` half-spectrum mode in the full spectrum (for Parseval sums)."""
    weights = np.full(n // 2 + 1, 2.0)
    weights[0] = weights[-1] = 1.0
    return weights


def kinetic_energy(u: np.ndarray) -> np.ndarray:
    """Mean kinetic energy ``<|u|^2> / 2`` per sample of velocity point values (batch, 3, n, n, n)."""
    return 0.5 * (u**2).sum(axis=1).mean(axis=(1, 2, 3))


def solve_navier_stokes_3d(
    u0: np.ndarray,
    *,
    nu: float,
    times: np.ndarray,
    dt: float,
    epsilon: float = 0.0,
    forcing_wavenumber: float = 2.0,
    length: float = LENGTH,
    batch_size: int = 4,
    workers: int = 2,
) -> tuple[np.ndarray, np.ndarray]:
    """Velocity frames ``(batch, len(times), 3, n, n, n)`` (float64) from ``u0`` (batch, 3, n, n, n), and ``times``.

    ``u0`` holds point values (axis order x, y, z) on the grid ``x_i = i L / n``; its projection on the
    de-aliased divergence-free modes is frame 0.  ``epsilon > 0`` switches on the constant-power forcing of
    the modes ``0 < |k| L / (2 pi) <= forcing_wavenumber``.  Steps ``<= dt`` divide each frame interval.
    Raises ``ConfigError`` for bad arguments or if the CFL number exceeds ``spectral.MAX_CFL`` at a frame.
    """
    u0 = np.asarray(u0, dtype=np.float64)
    times = np.atleast_1d(np.asarray(times, dtype=np.float64))
    if u0.ndim != 5 or u0.shape[1] != 3 or not u0.shape[2] == u0.shape[3] == u0.shape[4]:
        raise ConfigError(f"u0 has shape {u0.shape}: expected (batch, 3, n, n, n)")
    n = u0.shape[-1]
    check_resolution("resolution", n)
    check_positive("nu", nu, allow_zero=True)
    check_positive("epsilon", epsilon, allow_zero=True)
    check_positive("dt", dt)
    check_positive("length", length)
    k = wavenumbers(n, 3, length)
    k2 = sum(ki**2 for ki in k)
    mask = dealias_mask(n, 3)
    ik = [1j * ki * mask for ki in k]
    forced = (k2 > 0) & (k2 <= (2.0 * np.pi / length * forcing_wavenumber) ** 2 + 1e-9) & mask
    weights = half_spectrum_weights(n)
    axes = (-3, -2, -1)

    def nonlinear(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Modes of ``P[u x omega] + f`` and the velocity on the grid."""
        spectra = np.concatenate([c, np.stack(cross(ik, c.swapaxes(0, 1)), axis=1)], axis=1)
        fields = scipy.fft.irfftn(spectra, s=(n,) * 3, axes=axes, norm="forward")
        u, w = fields[:, :3], fields[:, 3:]
        lamb = np.stack(cross(u.swapaxes(0, 1), w.swapaxes(0, 1)), axis=1)
        out = project(scipy.fft.rfftn(lamb, axes=axes, norm="forward"), k) * mask
        if epsilon > 0:
            energy = 0.5 * (np.abs(c) ** 2 * forced * weights).sum(axis=(1, 2, 3, 4))
            out += (epsilon / (2.0 * energy))[:, None, None, None, None] * forced * c
        return out, u

    frames = etdrk4_frames(u0, times, dt, -nu * k2, nonlinear, lambda chunk: project(from_grid(chunk, n, 3), k),
                           lambda c: to_grid(c, n, n, 3), n, length, batch_size, workers)
    return frames, times


def pressure(u: np.ndarray, length: float = LENGTH) -> np.ndarray:
    """Pressure ``(batch, n, n, n)`` (zero mean) of velocity point values ``u`` (batch, 3, n, n, n) on the periodic
    box of side ``length``: ``p^ = -k_i k_j (u_i u_j)^ / |k|^2`` on the de-aliased modes of the 2/3 rule (where the
    products of de-aliased velocities are free of aliasing, so exact), zero elsewhere."""
    n = u.shape[-1]
    axes = (-3, -2, -1)
    k = wavenumbers(n, 3, length)
    k2 = sum(ki**2 for ki in k)
    c = sum((2.0 if i != j else 1.0) * k[i] * k[j] * scipy.fft.rfftn(u[:, i] * u[:, j], axes=axes, norm="forward")
            for i in range(3) for j in range(i, 3))
    c = -c * dealias_mask(n, 3) / np.where(k2 > 0, k2, 1.0)
    c[:, 0, 0, 0] = 0.0
    return scipy.fft.irfftn(c, s=(n,) * 3, axes=axes, norm="forward")


def random_velocity(samples: int, n: int, seeds: list[np.random.SeedSequence], velocity_rms: float) -> np.ndarray:
    """Divergence-free random velocity (samples, 3, n, n, n): ``TURBULENCE_GRF``, rms ``velocity_rms`` per component.

    The components' Nyquist modes are dropped, so the field is an exactly divergence-free trigonometric polynomial.
    """
    eigenvalues = grf_eigenvalues((n,) * 3, length=LENGTH, **TURBULENCE_GRF)
    noise = np.stack([np.random.default_rng(s).standard_normal((3, n, n, n)) for s in seeds[:samples]])
    u = color_noise(noise.reshape(-1, n, n, n), eigenvalues).reshape(samples, 3, n, n, n)
    c = resize_spectrum(scipy.fft.rfftn(u, axes=(-3, -2, -1), norm="forward"), n, 3, n // 2 - 1)  # no Nyquist modes
    c = project(c, wavenumbers(n, 3, LENGTH))
    u = scipy.fft.irfftn(c, s=(n,) * 3, axes=(-3, -2, -1), norm="forward")
    return u * velocity_rms / np.sqrt((u**2).mean(axis=(1, 2, 3, 4), keepdims=True))


def generate_turbulence3d(
    samples: int,
    resolution: int = 32,
    t_final: float = 1.0,
    frame_dt: float = 0.05,
    spinup: float = 5.0,
    seed: int = 0,
    *,
    first: int = 0,
    dt: float = TURBULENCE_DT,
    batch_size: int = 2,
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
    **physics: float,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Forced isotropic turbulence, velocity and pressure (u, v, w, p) ``(samples, time, n, n, n, 4)`` float32 every
    ``frame_dt`` (:func:`pressure` of each stored velocity; files written before p existed hold u, v, w only).

    ``physics`` overrides ``TURBULENCE`` (nu, epsilon, forcing_wavenumber, velocity_rms).  Sample ``i``
    starts from ``random_velocity`` with noise from ``SeedSequence(seed).spawn(first + samples)[first + i]``
    (``first`` skips to a later part of the same stream), runs ``spinup`` (discarded) then ``t_final``.
    Returns the array and the settings ``{"pde", "solver"}``.
    """
    unknown = set(physics) - set(TURBULENCE)
    if unknown:
        raise ConfigError(f"{sorted(unknown)[0]} is not a turbulence parameter: expected one of {sorted(TURBULENCE)}")
    p = {**TURBULENCE, **physics}
    check_resolution("resolution", resolution)
    check_positive("spinup", spinup, allow_zero=True)
    times = frame_times(t_final, frame_dt)
    common = dict(
        nu=p["nu"], dt=dt, epsilon=p["epsilon"], forcing_wavenumber=p["forcing_wavenumber"],
        batch_size=batch_size, workers=workers,
    )

    def solve_block(seeds: list[np.random.SeedSequence]) -> np.ndarray:
        u = random_velocity(len(seeds), resolution, seeds, p["velocity_rms"])
        if spinup > 0:
            u = solve_navier_stokes_3d(u, times=[spinup], **common)[0][:, -1]
        frames, _ = solve_navier_stokes_3d(u, times=times, **common)
        pressures = pressure(frames.reshape(-1, *frames.shape[2:])).reshape(*frames.shape[:2], 1, *frames.shape[3:])
        return np.moveaxis(np.concatenate([frames, pressures], axis=2), 2, -1)

    out = solve_samples(samples, seed, first, batch_size * max(1, workers), (len(times), *(resolution,) * 3, 4),
                        solve_block, progress)
    settings = {
        "pde": {
            "name": "navier_stokes_3d_forced_turbulence",
            "length": LENGTH,
            **p,
            "initial_condition": {"type": "projected_grf", **TURBULENCE_GRF, "spinup": spinup},
            "times": times.tolist(),
            "channels": ["u", "v", "w", "p"],
        },
        "solver": solver_settings(resolution, dt, "pseudo-spectral velocity-projection, ETDRK4", FFTS_PER_STEP_3D),
    }
    return out, settings
