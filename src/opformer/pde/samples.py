"""What every generator shares: its arguments checked (one-line :class:`~opformer.errors.ConfigError`), the
stored frame times and the steps between them, and seeded blocks of samples (a chunked run gives the samples
of a whole one); and what every re-solver shares: a recorded setting read (:func:`recorded`)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from opformer.errors import ConfigError, DataError


def check_positive(name: str, value: float, allow_zero: bool = False) -> None:
    """Raise ``ConfigError`` unless ``value`` is > 0 (or >= 0 with ``allow_zero``)."""
    if not (np.isfinite(value) and (value >= 0 if allow_zero else value > 0)):
        raise ConfigError(f"{name}={value} is invalid: expected a number {'>=' if allow_zero else '>'} 0")


def check_resolution(name: str, n: int, minimum: int = 8) -> None:
    """Raise ``ConfigError`` unless ``n`` is an even integer >= ``minimum``."""
    if int(n) != n or n < minimum or n % 2:
        raise ConfigError(f"{name}={n} is invalid: expected an even integer >= {minimum}")


def recorded(settings: dict[str, Any], key: str, where: str) -> Any:
    """The value of ``key`` in a data file's ``where`` settings (``pde`` or ``solver``); ``DataError`` (one line)
    where the file lacks it, since its input cannot then be solved again."""
    if key not in settings:
        raise DataError(f"{where} settings lack {key!r}: cannot solve the input again")
    return settings[key]


def frame_times(t_final: float, frame_dt: float) -> np.ndarray:
    """The stored frame times ``0, frame_dt, ...`` up to ``t_final`` (``t_final / frame_dt`` rounded)."""
    check_positive("t_final", t_final)
    check_positive("frame_dt", frame_dt)
    return np.arange(int(round(t_final / frame_dt)) + 1) * frame_dt


def frame_steps(times: np.ndarray, dt: float) -> list[tuple[int, float]]:
    """Per frame interval: the number of steps and the step (<= ``dt``, dividing the interval)."""
    intervals = np.diff(np.concatenate([[0.0], times]))
    if np.any(intervals < 0):
        raise ConfigError(f"times={times.tolist()} is invalid: expected non-decreasing times >= 0")
    steps = [max(1, int(np.ceil(h / dt - 1e-9))) if h > 0 else 0 for h in intervals]
    return [(s, h / s if s else 0.0) for s, h in zip(steps, intervals)]


def solve_samples(samples: int, seed: int, first: int, block_size: int, shape: tuple[int, ...],
                  solve_block: Callable[[list[np.random.SeedSequence]], np.ndarray],
                  progress: Callable[[int], None] | None) -> np.ndarray:
    """``(samples, *shape)`` float32: ``solve_block(seeds)`` for blocks of ``block_size`` samples.

    Sample ``i`` gets ``SeedSequence(seed).spawn(first + samples)[first + i]`` (``first`` skips to a later part of
    the same stream, so a chunked run gives the same samples); ``progress`` is called after each block.
    """
    check_positive("samples", samples)
    check_positive("first", first, allow_zero=True)
    seeds = np.random.SeedSequence(seed).spawn(first + samples)[first:]
    out = np.empty((samples, *shape), dtype=np.float32)
    for start in range(0, samples, block_size):
        block = seeds[start : start + block_size]
        out[start : start + len(block)] = solve_block(block)
        if progress is not None:
            progress(len(block))
    return out
