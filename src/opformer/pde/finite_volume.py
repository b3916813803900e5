"""What the finite-volume solvers share: MUSCL-MC reconstruction, SSP-RK2, RKL2 (for viscosity), the march to frames.

A state is ``(fields, batch, nx, ny)`` of cell averages; each sample of the batch takes its own time steps
(``dt`` is one number per sample), so a sample's solution does not depend on the others solved beside it.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from opformer.pde.parallel import check_stop

#: ``d state / dt`` of a semi-discrete scheme.
Tendency = Callable[[np.ndarray], np.ndarray]


def mc_slope(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The monotonised-central limited slope of the one-sided differences ``left`` and ``right``.

    ``sign(left) min(2 |left|, 2 |right|, |left + right| / 2)`` where both differences have one sign, else 0:
    written without branches (``np.where`` on a mask that changes from cell to cell is ~20x slower).
    """
    sign = np.copysign(1.0, left)
    slope = np.minimum(np.minimum(2.0 * np.abs(left), 2.0 * sign * right), 0.5 * sign * (left + right))
    return sign * np.maximum(slope, 0.0)


def muscl_faces(padded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MUSCL-MC states either side of the ``n + 1`` faces along the last axis (``n`` cells + 2 ghosts a side).

    The reconstructed values lie between the two cell values either side of each face (the MC limiter is
    TVD), so a positive quantity stays positive.
    """
    d = np.diff(padded, axis=-1)
    s = mc_slope(d[..., :-1], d[..., 1:])  # cells 1 .. n + 2 of the padded axis
    return padded[..., 1:-2] + 0.5 * s[..., :-1], padded[..., 2:-1] - 0.5 * s[..., 1:]


def ssp_rk2_step(state: np.ndarray, dt: np.ndarray, tendency: Tendency) -> np.ndarray:
    """One SSP-RK2 (Heun) step of ``dt`` (one per sample; 0 leaves a sample exactly as it is)."""
    dt = dt[:, None, None]
    stage = state + dt * tendency(state)
    return 0.5 * (state + stage + dt * tendency(stage))


def rkl2_stages(ratio: float) -> int:
    """The fewest stages ``s >= 2`` of :func:`rkl2_step` stable for ``ratio`` = step / forward-Euler limit.

    RKL2 with ``s`` stages is stable up to ``(s^2 + s - 2) / 4`` forward-Euler limits.
    """
    return max(2, int(np.ceil((np.sqrt(9.0 + 16.0 * ratio) - 1.0) / 2.0 - 1e-12)))


def rkl2_step(state: np.ndarray, dt: np.ndarray, tendency: Tendency, stages: int) -> np.ndarray:
    """One step of ``dt`` (one per sample) of RKL2, the second-order Runge-Kutta-Legendre super-time-stepping
    scheme (Meyer, Balsara & Aslam 2014, J. Comput. Phys. 257) with ``stages`` evaluations of ``tendency``: for a
    parabolic (diffusion) tendency, stable for ``dt`` up to ``(s^2 + s - 2) / 4`` times the forward-Euler limit.

    Every stage is an affine combination of states and tendencies, so what the tendency conserves, the step does.
    """
    dt = dt[:, None, None]
    s = stages
    b = [1.0 / 3.0] * 3 + [(j * j + j - 2.0) / (2.0 * j * (j + 1.0)) for j in range(3, s + 1)]
    w1 = 4.0 / (s * s + s - 2.0)
    first = dt * tendency(state)
    before, current = state, state + b[1] * w1 * first
    for j in range(2, s + 1):
        mu = (2.0 * j - 1.0) / j * b[j] / b[j - 1]
        nu = -(j - 1.0) / j * b[j] / b[j - 2]
        forward = mu * w1 * dt * tendency(current)
        # mu Y(j-1) + nu Y(j-2) + (1 - mu - nu) Y0 + ..., written about Y0 so that a steady state stays bitwise
        following = (state + mu * (current - state) + nu * (before - state) + forward
                     - (1.0 - b[j - 1]) * mu * w1 * first)
        before, current = current, following
    return current


def march_frames(state: np.ndarray, times: np.ndarray, max_step: Callable[[np.ndarray], np.ndarray],
                 advance: Callable[[np.ndarray, np.ndarray], np.ndarray],
                 check: Callable[[np.ndarray, float], None] | None = None,
                 stop: threading.Event | None = None) -> tuple[np.ndarray, int]:
    """Frames ``(len(times), *state.shape)`` (float64) of steps ``advance(state, dt)`` from ``state`` at t = 0 (``dt``
    one per sample, e.g. :func:`ssp_rk2_step`); the steps taken.

    Each sample steps by ``max_step(state)`` (its stable step), shortened so that the remaining time to the next
    frame is split into equal steps: steps land exactly on the frame times. A sample that has reached the next
    frame waits for the others without being computed (``max_step`` and ``advance`` see only the samples still
    stepping), so a block costs the sum of its samples' steps, not its slowest sample's times the block size. ``stop`` (set: raise ``Stopped``) is
    polled every step; ``check(state, t)`` (raising a one-line error for a state gone bad) runs at every frame.
    """
    state = np.array(state, dtype=np.float64)
    t = np.zeros(state.shape[1])
    frames = np.empty((len(times), *state.shape))
    steps = 0
    for index, target in enumerate(times):
        while np.any(t < target):
            check_stop(stop)
            active = np.flatnonzero(t < target)  # samples that reached the frame wait (no work spent on them)
            every = len(active) == len(t)
            current = state if every else state[:, active]
            remaining = target - t[active]
            count = np.ceil(remaining / max_step(current))
            dt = remaining / np.maximum(count, 1.0)
            stepped = advance(current, dt)
            if every:
                state = stepped
            else:
                state[:, active] = stepped
            t[active] = np.where(count <= 1.0, target, t[active] + dt)
            steps += 1
        if check is not None:
            check(state, float(target))
        frames[index] = state
    return frames, steps
