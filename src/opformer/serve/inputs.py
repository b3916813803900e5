"""The inputs of ``opformer predict``: an opformer HDF5 file or a ``.npy``/``.npz`` array, checked against the run
in one line before anything is read or written, then read a block of samples at a time."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from opformer.data.readers.arrays import block, channel_last, paired_targets, sample_array
from opformer.data.readers.source import TRAJECTORY
from opformer.data.store import DataFile, DatasetInfo, open_dataset_file
from opformer.errors import ConfigError, DataError
from opformer.grids import axis_kinds
from opformer.models.inference import check_compatible
from opformer.serve.forecaster import Forecaster

#: Suffixes of the array formats; any other file is opformer HDF5.
ARRAY_SUFFIXES = (".npy", ".npz")


@dataclass
class Inputs:
    """The samples of an input file, read a block at a time: ``read(start, stop)`` gives samples
    ``start..stop-1`` as float32 ``(n, *shape)``: the inputs of an operator run, or the given frames of a trajectory
    run (at the run's time stride, from the stored frame ``first``): ``extra`` frames for the backtest, then the
    ``t_in`` context frames."""

    path: Path
    count: int
    shape: tuple[int, ...]
    read: Callable[[int, int], np.ndarray]
    info: DatasetInfo | None  # an HDF5 input's description; None for an array
    times: np.ndarray | None = None  # trajectories: the time of every stored frame up to the last given one
    stride: int = 1
    kinds: tuple[str, ...] | None = None  # the grid kinds of the input's axes
    handle: DataFile | None = None  # an HDF5 input's open file, closed by :meth:`close`
    member: str | None = None  # the mixture member the samples belong to, where named (``predict --member``)
    first: int = 0  # trajectories: the stored frame of the first given frame
    extra: int = 0  # trajectories: given frames before the context (for the backtest)
    #: operator inputs: the true targets of samples ``start..stop-1`` where the file holds them (an HDF5 file's
    #: ``/target``, an ``.npz``'s ``y`` beside ``x`` or ``target`` beside ``input``), else None
    truth: Callable[[int, int], np.ndarray] | None = None

    @property
    def context_start(self) -> int:
        """Trajectories: the stored frame of the first of the ``t_in`` context frames."""
        return self.first + self.stride * self.extra

    def close(self) -> None:
        """Close the input file (an array's memory map is released with the object)."""
        if self.handle is not None:
            self.handle.close()


def _expected(forecaster: Forecaster, frames: int | None) -> str:
    """The shape an array input must have, as text (one channel may leave out its axis, as everywhere)."""
    grid = [f"{forecaster.ndim} grid axes"] if forecaster.padded else [str(n) for n in forecaster.grid]
    channels = (f"1 to {len(forecaster.input_channels)} channels" if forecaster.padded
                else str(len(forecaster.input_channels)))
    axes = ["N", *([f"T >= {frames}"] if frames else []), *grid]
    one = forecaster.padded or len(forecaster.input_channels) == 1
    return f"({', '.join([*axes, channels])})" + (f" or ({', '.join(axes)}) for one channel" if one else "")


class Window:
    """The stored frames a trajectory input is given: ``extra`` frames for the backtest (as many of ``wanted`` as the
    file holds) and the ``t_in`` context frames, ``stride`` apart; from the stored frame ``first``, or (``first``
    None) ending at the file's last frame, so that the forecast continues after the frames given."""

    def __init__(self, first: int | None, wanted: int, t_in: int, stride: int) -> None:
        self.first, self.wanted, self.t_in, self.stride = first, wanted, t_in, stride
        self.extra = wanted
        self.span = 1 + stride * (t_in - 1)  # stored frames the context alone covers

    def fit(self, path: Path, stored: int) -> slice:
        """The frames of a file of ``stored`` frames (the backtest's dropped where they do not fit); a one-line
        error where the context does not fit from ``first``."""
        if self.first is None:
            self.extra = self.wanted if self.span + self.stride * self.wanted <= stored else 0
            self.first = max(0, stored - self.span - self.stride * self.extra)
        if self.first + self.span > stored:
            raise DataError(f"{path}: {stored} frames, but a context of {self.t_in} frames {self.stride} stored frames "
                            f"apart from frame {self.first} (--start) needs {self.first + self.span}")
        if self.first + self.span + self.stride * self.wanted > stored:
            self.extra = 0
        return slice(self.first, self.first + self.span + self.stride * self.extra, self.stride)


def open_inputs(path: str | os.PathLike, forecaster: Forecaster, member: str | None = None,
                start: int | None = None, extra: int = 0) -> Inputs:
    """``path`` (opformer HDF5, or ``.npy``/``.npz``: the run's grid and channels assumed) checked against the
    run in one line before anything is read or written. ``member``: the mixture member the samples belong to
    (its time stride; default: the member whose file ``path`` is). Trajectories: given ``extra`` frames for the
    backtest where the file holds them, then ``t_in`` for the context: the last frames of the file (``start``
    None), else those from the stored frame ``start``."""
    path = Path(path)
    trajectory = forecaster.kind == TRAJECTORY
    stride = forecaster.time_stride(path, member)
    if start is not None and start < 0:
        raise ConfigError(f"--start {start}: expected a frame index of at least 0")
    window = Window(start, extra, forecaster.t_in or 1, stride)
    span = window.span if trajectory else 0  # stored frames the context covers
    if path.suffix in ARRAY_SUFFIXES:
        return _array_inputs(path, forecaster, stride, span, member, window)
    data = open_dataset_file(path)  # the one handle every read of the input goes through
    try:
        info = data.info()
        _check_file(path, info, forecaster, span, stride)
    except BaseException:
        data.close()
        raise
    channels = len(info.input_channels)
    if not trajectory:
        truth = (lambda start, stop: data.read("target", (slice(start, stop),))) if info.has_target else None
        return Inputs(path, info.n_samples, (*info.spatial_shape, channels),
                      lambda start, stop: data.read("input", (slice(start, stop),)), info,
                      kinds=axis_kinds(info.domain), handle=data, member=member, truth=truth)
    try:
        frames = window.fit(path, len(info.times))
    except BaseException:
        data.close()
        raise
    return Inputs(path, info.n_samples, (forecaster.t_in + window.extra, *info.spatial_shape, channels),
                  lambda start, stop: data.read("fields", (slice(start, stop), frames)), info,
                  np.asarray(info.times)[:frames.stop], stride, axis_kinds(info.domain), data, member, window.first,
                  window.extra)


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


def _array_inputs(path: Path, forecaster: Forecaster, stride: int, span: int, member: str | None,
                  given: Window) -> Inputs:
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
                      lambda start, stop: block(path, key, array, start, stop, shape, False), None, member=member,
                      truth=_array_truth(path, key, array, shape, forecaster))
    window = given.fit(path, shape[0])

    def read(start: int, stop: int) -> np.ndarray:
        return block(path, key, array, start, stop, shape, False)[:, window]

    return Inputs(path, int(array.shape[0]), (forecaster.t_in + given.extra, *shape[1:]), read, None,
                  np.arange(window.stop, dtype=np.float64), stride, member=member, first=given.first,
                  extra=given.extra)


def _array_truth(path: Path, key: str, inputs: np.ndarray, shape: tuple[int, ...], forecaster: Forecaster
                 ) -> Callable[[int, int], np.ndarray] | None:
    """The reader of the true targets an ``.npz`` holds beside its inputs ``key`` (:func:`paired_targets`), checked
    against the inputs and the run in one line; None where it holds none."""
    found = paired_targets(path, key)
    if found is None:
        return None
    name, targets = found
    channels = len(forecaster.target_channels)
    expected = f"({len(inputs)}, {', '.join(map(str, shape[:-1]))}, {channels})"
    fits = len(targets) == len(inputs) and targets.ndim in (len(shape), len(shape) + 1)
    if fits:
        target_shape = channel_last(path, name, targets, 1, len(shape) - 1, False)
        fits = target_shape == (*shape[:-1], channels)
    if not fits:
        raise DataError(f"{path}: '{name}' (the true targets beside '{key}', kept as 'truth' in the output) has shape "
                        f"{tuple(targets.shape)}, expected {expected}")
    return lambda start, stop: block(path, name, targets, start, stop, target_shape, False)


def forecast_times(times: np.ndarray, stride: int, n: int) -> np.ndarray:
    """The times of ``n`` frames after the last of ``times``, ``stride`` stored frame steps apart (the last
    step's length; 1 for a single stored frame)."""
    step = float(times[-1] - times[-2]) if len(times) > 1 else 1.0
    return float(times[-1]) + stride * step * np.arange(1, n + 1)
