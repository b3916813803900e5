"""Training splits read from disk a batch at a time, for data sets larger than the memory a run may use.

A streamed split reads, for each batch, only the samples (operator pairs) or the frames of each window
(trajectories, at the time stride) that the batch needs, one stored chunk at a time (a sample, or a frame: see
:func:`opformer.data.store.chunk_shape`), and applies the split's striding, cell averaging or gradient to what it
read. It makes the same tensors as the split held whole (:mod:`opformer.data.pairs`,
:mod:`opformer.data.trajectories`), sample for sample, so a run gives the same numbers either way.

The file stays open (:class:`opformer.data.store.DataFile`, whose chunk cache is the split's share of
``data.memory_gb``) and reopens itself in a worker process. Whether a split is held or streamed is
:func:`fits`'s decision.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from opformer.data.normalize import NORMALIZER_CHUNK
from opformer.data.pairs import PairLayout, sample_batches
from opformer.data.store import DataFile, DatasetInfo
from opformer.data.trajectories import TrajectoryLayout, TrajectorySplit, frames_last
from opformer.grids import axis_kinds, restrict

GIB = 2**30


def fits(nbytes: int, memory_gb: float) -> bool:
    """Whether a split of ``nbytes`` is held in memory under the budget ``data.memory_gb``."""
    return nbytes <= memory_gb * GIB


@dataclass
class StreamedPairs:
    """The operator pairs of a sample range, read per batch: the interface of
    :class:`opformer.data.pairs.OperatorSplit` without its tensors."""

    layout: PairLayout
    samples: slice
    cache_bytes: int | None = None
    file: DataFile = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.file = DataFile(self.layout.info.path, self.cache_bytes)

    @property
    def info(self) -> DatasetInfo:
        """The file's description."""
        return self.layout.info

    def __len__(self) -> int:
        return self.samples.stop - self.samples.start

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """Shape of one input sample on the training grid."""
        return self.layout.shapes[0]

    @property
    def nbytes(self) -> int:
        """Bytes the split would take in memory."""
        return len(self) * self.layout.sample_bytes()

    def plan(self, batch_size: int, generator: torch.Generator | None = None) -> list[torch.Tensor]:
        """The sample indices of each mini-batch, as :meth:`OperatorSplit.plan` draws them."""
        return sample_batches(len(self), batch_size, generator)

    def fetch(self, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(x, y, dy)`` of the samples ``index`` (of the split), read one stored sample at a time."""
        stored = [self.samples.start + int(i) for i in index]
        x = np.stack([self.file.read("input", (s,)) for s in stored])
        y = np.stack([self.file.read("target", (s,)) for s in stored])
        return self.layout.pairs(x, y)

    def chunks(self, size: int = NORMALIZER_CHUNK, stored: bool = False) -> Iterator[tuple[torch.Tensor, ...]]:
        """``(inputs, targets)`` of the split, ``size`` samples at a time: on the training grid, or on the stored
        grid (``stored``, for point-wise statistics: what :func:`load_split` gives without a resolution)."""
        layout = dataclasses.replace(self.layout, stride=1) if stored else self.layout
        for start in range(self.samples.start, self.samples.stop, size):
            rows = slice(start, min(start + size, self.samples.stop))
            yield layout.pairs(self.file.read("input", (rows,)), self.file.read("target", (rows,)))[:2]


class StreamedTrajectories(TrajectorySplit):
    """The trajectories of a split (:class:`TrajectoryLayout`), read per window: each window reads the frames it
    needs at the time stride and strides them in space. ``fields`` is None; the windows, plans and checks are
    :class:`TrajectorySplit`'s."""

    def __init__(self, layout: TrajectoryLayout, cache_bytes: int | None = None) -> None:
        super().__init__(fields=None, times=layout.times, info=layout.info, resolution=layout.resolution)
        self.layout = layout
        self.file = DataFile(layout.info.path, cache_bytes)

    def __len__(self) -> int:
        return self.layout.samples.stop - self.layout.samples.start

    @property
    def n_times(self) -> int:
        """Frames per trajectory (after the time stride)."""
        return len(self.times)

    @property
    def frame_shape(self) -> tuple[int, ...]:
        """``(*training grid, channels)`` of one frame."""
        return (*self.resolution, len(self.info.input_channels))

    def _read(self, trajectories: Any, frames: slice) -> torch.Tensor:
        """Stored frames of the split's trajectories (an index or a slice of them) on the training grid."""
        layout = self.layout
        if isinstance(trajectories, slice):
            trajectories = slice(layout.samples.start + trajectories.start, layout.samples.start + trajectories.stop)
        else:
            trajectories = layout.samples.start + trajectories
        block = torch.from_numpy(self.file.read("fields", (trajectories, frames)))
        return restrict(block, 2 if isinstance(trajectories, slice) else 1, layout.stride, axis_kinds(self.info.domain))

    def fetch(self, pairs: torch.Tensor, t_in: int, span: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Context and future frames of the (trajectory, first frame) pairs, read from disk."""
        step = self.layout.time_stride
        frames = [self._read(trajectory, slice(first * step, (first + t_in + span - 1) * step + 1, step))
                  for trajectory, first in pairs.tolist()]
        batch = torch.stack(frames).contiguous()
        return frames_last(batch[:, :t_in]), frames_last(batch[:, t_in:])

    def to(self, device: torch.device) -> StreamedTrajectories:
        """A streamed split is read on the host: itself."""
        return self

    def chunks(self, size: int = NORMALIZER_CHUNK) -> Iterator[torch.Tensor]:
        """The split's trajectories on the training grid, ``size`` at a time."""
        for start in range(0, len(self), size):
            yield self._read(slice(start, min(start + size, len(self))),
                             slice(None, None, self.layout.time_stride)).contiguous()


def cache_share(memory_gb: float, readers: int) -> int:
    """HDF5 chunk-cache bytes of each of ``readers`` open files under a budget of ``memory_gb``."""
    return int(memory_gb * GIB / max(1, readers))


def worker_count(workers: int) -> int:
    """Loader worker processes for ``data.workers``: at most the cores this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, min(workers, cores))
