"""Trajectory data sets: splits of stored trajectories, and windows of context frames -> future frames.

Stored frames are ``(sample, time, *spatial, channels)``; a window handed to a model is channel-last with
time before the channels, ``(batch, *spatial, time, channels)`` (docs/layout.md, conventions).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from opformer.data.pairs import split_range
from opformer.grids import axis_kinds, restrict, restricted_shape, stride_for
from opformer.data.store import DatasetInfo, open_dataset_file, read_info
from opformer.errors import DataError
from opformer.kinds import TRAJECTORY


READ_CHUNK = 16  #: trajectories read (and strided) at once when a split is loaded


def frames_last(frames: torch.Tensor) -> torch.Tensor:
    """``(batch, time, *spatial, channels)`` -> ``(batch, *spatial, time, channels)``."""
    return frames.movedim(1, -2)


@dataclass
class TrajectorySplit:
    """The trajectories of one split on one grid: ``fields`` ``(sample, time, *spatial, channels)``."""

    fields: torch.Tensor
    times: torch.Tensor
    info: DatasetInfo
    resolution: tuple[int, ...]

    def __len__(self) -> int:
        return self.fields.shape[0]

    @property
    def n_times(self) -> int:
        """Frames per trajectory (after the time stride)."""
        return self.fields.shape[1]

    def check_window(self, t_in: int, span: int, what: str = "window") -> None:
        """Raise a one-line error if ``t_in`` context frames and ``span`` future frames do not fit."""
        if t_in + span > self.n_times:
            raise DataError(f"{self.info.path}: a {what} of {t_in} input + {span} future frames is longer than "
                            f"the {self.n_times} frames of each trajectory (after the time stride)")

    def window_starts(self, t_in: int, span: int, mode: str, generator: torch.Generator | None) -> torch.Tensor:
        """``(n, 2)`` pairs (trajectory, first frame) of the windows of an epoch.

        ``all``: every start of every trajectory; ``random``: one uniformly drawn start per trajectory.
        """
        self.check_window(t_in, span)
        count = self.n_times - t_in - span + 1
        if mode == "random":
            starts = torch.randint(count, (len(self),), generator=generator)
            return torch.stack([torch.arange(len(self)), starts], dim=1)
        grid = torch.cartesian_prod(torch.arange(len(self)), torch.arange(count))
        return grid.reshape(-1, 2)

    def fetch(self, pairs: torch.Tensor, t_in: int, span: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Context ``(b, *spatial, t_in, c)`` and future ``(b, *spatial, span, c)`` frames of the pairs, on the
        split's device."""
        pairs = pairs.to(self.fields.device, non_blocking=True)
        offsets = torch.arange(t_in + span, device=pairs.device)
        frames = self.fields[pairs[:, :1], pairs[:, 1:2] + offsets]
        return frames_last(frames[:, :t_in]), frames_last(frames[:, t_in:])

    def plan(self, batch_size: int, t_in: int, span: int, mode: str,
             generator: torch.Generator | None = None) -> list[torch.Tensor]:
        """The (trajectory, first frame) pairs of each mini-batch; shuffled when a generator is given."""
        pairs = self.window_starts(t_in, span, mode, generator)
        if generator is not None:
            pairs = pairs[torch.randperm(len(pairs), generator=generator)]
        return list(pairs.split(batch_size))

    def to(self, device: torch.device) -> TrajectorySplit:
        """The split with its frames on ``device``."""
        return dataclasses.replace(self, fields=self.fields.to(device))

    def batches(self, batch_size: int, t_in: int, span: int, mode: str,
                generator: torch.Generator | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Mini-batches of windows; shuffled when a generator is given, in order otherwise."""
        for pairs in self.plan(batch_size, t_in, span, mode, generator):
            yield self.fetch(pairs, t_in, span)


@dataclass(frozen=True)
class TrajectoryLayout:
    """Where a split's trajectories lie in a file and the grid they are trained on: the file, its samples, the
    spatial and time strides, the frames' times and the training grid."""

    info: DatasetInfo
    samples: slice
    stride: int
    time_stride: int
    times: torch.Tensor
    resolution: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """Bytes of the split on the training grid (float32)."""
        count = self.samples.stop - self.samples.start
        return 4 * count * len(self.times) * math.prod(self.resolution) * len(self.info.input_channels)


def trajectory_layout(path: str | os.PathLike, split: str, *, n_train: int, n_val: int, n_test: int,
                      resolution: int | None = None, time_stride: int = 1) -> TrajectoryLayout:
    """The layout of one split of a trajectory data set, strided to ``resolution`` points per axis and in time
    (one-line errors for a file of another kind, too few samples or a resolution that is no sub-grid)."""
    info = read_info(path)
    if info.kind != TRAJECTORY:
        raise DataError(f"{info.path}: is an {info.kind} data set; rollout training needs a trajectory data set")
    samples = split_range(split, n_train, n_val, n_test, info.n_samples, info.path)
    kinds = axis_kinds(info.domain)
    strides = {stride_for(n, resolution or n, k, str(info.path)) for n, k in zip(info.spatial_shape, kinds)}
    if len(strides) != 1:
        raise DataError(f"{info.path}: resolution {resolution} needs one stride on every axis of {info.spatial_shape}")
    (stride,) = strides
    times = torch.tensor(info.times, dtype=torch.float64)[::time_stride]
    return TrajectoryLayout(info, samples, stride, time_stride, times,
                            restricted_shape(info.spatial_shape, stride, kinds))


def load_trajectories(path: str | os.PathLike, split: str, *, n_train: int, n_val: int, n_test: int,
                      resolution: int | None = None, time_stride: int = 1) -> TrajectorySplit:
    """Load one split of a trajectory data set, strided to ``resolution`` points per axis and in time."""
    layout = trajectory_layout(path, split, n_train=n_train, n_val=n_val, n_test=n_test, resolution=resolution,
                               time_stride=time_stride)
    kinds, samples = axis_kinds(layout.info.domain), layout.samples
    fields = torch.empty(samples.stop - samples.start, len(layout.times), *layout.resolution,
                         len(layout.info.input_channels))
    with open_dataset_file(layout.info.path) as data:  # a few trajectories at a time: the stored grid of the
        for start in range(samples.start, samples.stop, READ_CHUNK):  # whole split is never in memory
            rows = slice(start, min(start + READ_CHUNK, samples.stop))
            block = torch.from_numpy(data.read("fields", (rows, slice(None, None, time_stride))))
            fields[rows.start - samples.start:rows.stop - samples.start] = restrict(block, 2, layout.stride, kinds)
    return TrajectorySplit(fields=fields, times=layout.times, info=layout.info, resolution=layout.resolution)
