"""The inputs of ``opformer predict``: an opformer HDF5 file or a ``.npy``/``.npz`` array, checked against the run
in one line before anything is read or written, then read a block of samples at a time."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from opformer.data.readers.arrays import block, channel_last, sample_array
from opformer.data.readers.source import TRAJECTORY
from opformer.data.store import DataFile, DatasetInfo, open_dataset_file
from opformer.errors import ConfigError, DataError
from opformer.eval.evaluate import check_compatible
from opformer.grids import axis_kinds
from opformer.serve.forecaster import Forecaster

#: Suffixes of the array formats; any other file is opformer HDF5.
ARRAY_SUFFIXES = (".npy", ".npz")


@dataclass
class Inputs:
    """The samples of an input file, read a block at a time: ``read(start, stop)`` gives samples
    ``start..stop-1`` as float32 ``(n, *shape)``: the inputs of an operator run, or the ``t_in`` context frames of
    a trajectory run (at the run's time stride, ending with the last stored frame)."""

    path: Path
    count: int
    shape: tuple[int, ...]
    read: Callable[[int, int], np.ndarray]
    info: DatasetInfo | None  # an HDF5 input's description; None for an array
    times: np.ndarray | None = None  # trajectories: the time of every stored frame
    stride: int = 1
    kinds: tuple[str, ...] | None = None  # the grid kinds of the input's axes
    handle: DataFile | None = None  # an HDF5 input's open file, closed by :meth:`close`
    member: str | None = None  # the mixture member the samples belong to, where named (``predict --member``)

    def close(self) -> None:
        """Close the input file (an array's memory map is released with the object)."""
        if self.handle is not None:
            self.handle.close()


def _expected(forecaster: Forecaster, frames: int | None) -> str:
    """The shape an array input must have, as text."""
    grid = [f"{forecaster.ndim} grid axes"] if forecaster.padded else [str(n) for n in forecaster.grid]
    channels = (f"1 to {len(forecaster.input_channels)} channels" if forecaster.padded
                else str(len(forecaster.input_channels)))
    return "(" + ", ".join(["N", *([f"T >= {frames}"] if frames else []), *grid, channels]) + ")"


def open_inputs(path: str | os.PathLike, forecaster: Forecaster, member: str | None = None) -> Inputs:
    """``path`` (opformer HDF5, or ``.npy``/``.npz``: the run's grid and channels assumed) checked against the
    run in one line before anything is read or written. ``member``: the mixture member the samples belong to
    (its time stride; default: the member whose file ``path`` is)."""
    path = Path(path)
    trajectory = forecaster.kind == TRAJECTORY
    stride = forecaster.time_stride(path, member)
    span = 1 + stride * (forecaster.t_in - 1) if trajectory else 0  # stored frames the context covers
    if path.suffix in ARRAY_SUFFIXES:
        return _array_inputs(path, forecaster, stride, span, member)
    data = open_dataset_file(path)  # the one handle every read of the input goes through
    try:
        info = data.info()
        _check_file(path, info, forecaster, span, stride)
    except BaseException:
        data.close()
        raise
    channels = len(info.input_channels)
    if not trajectory:
        return Inputs(path, info.n_samples, (*info.spatial_shape, channels),
                      lambda start, stop: data.read("input", (slice(start, stop),)), info,
                      kinds=axis_kinds(info.domain), handle=data, member=member)
    stored = len(info.times)
    frames = slice(stored - span, stored, stride)
    return Inputs(path, info.n_samples, (forecaster.t_in, *info.spatial_shape, channels),
                  lambda start, stop: data.read("fields", (slice(start, stop), frames)), info,
                  np.asarray(info.times), stride, axis_kinds(info.domain), data, member)


def _check_file(path: Path, info: DatasetInfo, forecaster: Forecaster, span: int, stride: int) -> None:
    """An HDF5 input against the run: its kind, grid and channels, and (trajectories) enough frames."""
    if info.kind != forecaster.kind:
        raise ConfigError(f"--input {path}: holds {info.kind} data but {forecaster.source} was trained on "
                          f"{forecaster.kind} data")
    if forecaster.padded:
        if info.ndim != forecaster.ndim or len(info.input_channels) > len(forecaster.input_channels):
            raise DataError(f"{path}: {info.ndim}D data with {len(info.input_channels)} channels does not fit "
                            f"{forecaster.source}, a model of {forecaster.ndim}D data with up to "
                            f"{len(forecaster.input_channels)} channels")
    else:
        check_compatible(forecaster.surrogate, info, forecaster.source)
    if forecaster.kind == TRAJECTORY and len(info.times) < span:
        raise DataError(f"{path}: {len(info.times)} frames, but {forecaster.source} rolls out from "
                        f"{forecaster.t_in} frames {stride} stored frames apart ({span} frames)")


def _array_inputs(path: Path, forecaster: Forecaster, stride: int, span: int, member: str | None) -> Inputs:
    """An array file's samples; its shape must be the run's grid and channels (any grid and up to the model's
    channels for a padded run), trajectories at least ``span`` frames."""
    trajectory = forecaster.kind == TRAJECTORY
    key, array = sample_array(path, forecaster.kind)
    leading = 2 if trajectory else 1
    expected = _expected(forecaster, span)
    fits = array.ndim in (leading + forecaster.ndim, leading + forecaster.ndim + 1)
    if fits:
        shape = channel_last(path, key, array, leading, forecaster.ndim, False)
        grid, own = shape[leading - 1:-1], shape[-1]
        fits = ((1 <= own <= len(forecaster.input_channels)) if forecaster.padded else
                (grid == forecaster.grid and own == len(forecaster.input_channels)))
        fits = fits and (not trajectory or shape[0] >= span)
    if not fits:
        raise DataError(f"{path}: '{key}' has shape {tuple(array.shape)}, expected {expected} (the grid and "
                        f"channels of {forecaster.source})")
    if not trajectory:
        return Inputs(path, int(array.shape[0]), shape,
                      lambda start, stop: block(path, key, array, start, stop, shape, False), None, member=member)
    frames = shape[0]
    window = slice(frames - span, frames, stride)

    def read(start: int, stop: int) -> np.ndarray:
        return block(path, key, array, start, stop, shape, False)[:, window]

    return Inputs(path, int(array.shape[0]), (forecaster.t_in, *shape[1:]), read, None,
                  np.arange(frames, dtype=np.float64), stride, member=member)


def forecast_times(times: np.ndarray, stride: int, n: int) -> np.ndarray:
    """The times of ``n`` frames after the last of ``times``, ``stride`` stored frame steps apart (the last
    step's length; 1 for a single stored frame)."""
    step = float(times[-1] - times[-2]) if len(times) > 1 else 1.0
    return float(times[-1]) + stride * step * np.arange(1, n + 1)
