"""What the finite-volume solvers share: MUSCL reconstruction with the MC limiter, SSP-RK2, the march to frames.

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
    """The monotonised-central limited slope of the one-sided differences ``left`` and ``right``."""
    slope = np.minimum(np.minimum(2.0 * np.abs(left), 2.0 * np.abs(right)), 0.5 * np.abs(left + right))
    return np.where(left * right > 0.0, np.sign(left) * slope, 0.0)


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


def march_frames(state: np.ndarray, times: np.ndarray, max_step: Callable[[np.ndarray], np.ndarray],
                 tendency: Tendency, check: Callable[[np.ndarray, float], None] | None = None,
                 stop: threading.Event | None = None) -> tuple[np.ndarray, int]:
    """Frames ``(len(times), *state.shape)`` (float64) of SSP-RK2 steps from ``state`` at t = 0; the steps taken.

    Each sample steps by ``max_step(state)`` (its stable step), shortened so that the remaining time to the next
    frame is split into equal steps: steps land exactly on the frame times. ``stop`` (set: raise ``Stopped``) is
    polled every step; ``check(state, t)`` (raising a one-line error for a state gone bad) runs at every frame.
    """
    state = np.array(state, dtype=np.float64)
    t = np.zeros(state.shape[1])
    frames = np.empty((len(times), *state.shape))
    steps = 0
    for index, target in enumerate(times):
        while np.any(t < target):
            check_stop(stop)
            remaining = target - t
            count = np.ceil(remaining / max_step(state))
            dt = np.where(remaining > 0.0, remaining / np.maximum(count, 1.0), 0.0)
            state = ssp_rk2_step(state, dt, tendency)
            t = np.where(count <= 1.0, target, t + dt)
            steps += 1
        if check is not None:
            check(state, float(target))
        frames[index] = state
    return frames, steps
