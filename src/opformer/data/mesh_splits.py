"""Operator splits of mesh data files and their padded batches (the mesh contract's batch).

A batch of samples of different point counts is padded at the end to the largest count ``N`` in it:

- ``x (B, N, c_in)`` the input fields (``c_in`` may be 0: the coordinates alone are the input);
- ``pos (B, N, d)`` the coordinates;
- ``weights (B, N)`` the quadrature weights normalised to sum 1 over each sample's real points, 0 on padding;
- ``mask (B, N)`` True on real points;
- ``y (B, N, c_out)`` the targets.

Padding is zeros everywhere, so a model that weights every sum over points by ``weights`` and keeps padded points
out of every max and softmax (``mask``) gives each sample of a batch what it gives that sample alone. A split is
held in memory, or read per batch when it is larger than ``data.memory_gb`` (:class:`StreamedMeshSplit`: the
same tensors, sample for sample).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from opformer.data.pairs import sample_batches, split_range
from opformer.data.store import DatasetInfo, MeshFile
from opformer.data.streaming import fits
from opformer.errors import DataError
from opformer.kinds import OPERATOR
from opformer.meshes import MeshSample


class MeshBatch(NamedTuple):
    """A padded batch of mesh samples (see the module's docstring)."""

    x: torch.Tensor
    pos: torch.Tensor
    weights: torch.Tensor
    mask: torch.Tensor
    y: torch.Tensor


#: One sample as a split holds it: (x (n, c_in), pos (n, d), weights (n,) normalised, y (n, c_out)).
Rows = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def sample_rows(sample: MeshSample, inputs: list[str], targets: list[str]) -> Rows:
    """A sample's rows in float32: its input fields and target fields (channels joined in the order named), its
    points and its weights normalised to sum 1."""
    n = len(sample.points)

    def joined(names: list[str]) -> torch.Tensor:
        parts = [np.asarray(sample.fields[name], dtype=np.float32).reshape(n, -1) for name in names]
        return torch.from_numpy(np.concatenate(parts, axis=1) if parts else np.zeros((n, 0), np.float32))

    weights = np.asarray(sample.weights, dtype=np.float64)
    return (joined(inputs), torch.from_numpy(np.asarray(sample.points, dtype=np.float32)),
            torch.from_numpy((weights / weights.sum()).astype(np.float32)), joined(targets))


def pad(rows: list[Rows]) -> MeshBatch:
    """The padded batch of samples' rows: zeros after each sample's points, ``mask`` True on its own."""
    size = max(len(r[1]) for r in rows)
    x, pos, weights, y = (torch.zeros(len(rows), size, *rows[0][k].shape[1:], dtype=rows[0][k].dtype,
                                      device=rows[0][k].device) for k in range(4))
    mask = torch.zeros(len(rows), size, dtype=torch.bool, device=rows[0][1].device)
    for b, (xi, pi, wi, yi) in enumerate(rows):
        n = len(pi)
        x[b, :n], pos[b, :n], weights[b, :n], y[b, :n], mask[b, :n] = xi, pi, wi, yi, True
    return MeshBatch(x, pos, weights, mask, y)


def _fields(info: DatasetInfo) -> tuple[list[str], list[str]]:
    """The input and target field names of an operator mesh file (training needs targets)."""
    if info.kind != "mesh" or info.mesh["task"] != OPERATOR:
        raise DataError(f"{info.path}: holds {info.kind} data"
                        f"{'' if info.kind != 'mesh' else ' of task ' + info.mesh['task']}; a mesh operator split "
                        "needs mesh operator data")
    if not info.has_target:
        raise DataError(f"{info.path}: holds inputs only (no '/point_target'); training and evaluation need targets")
    return [name for name, _ in info.mesh["inputs"]], [name for name, _ in info.mesh["targets"]]


@dataclass
class MeshSplit:
    """The samples of one split of a mesh operator file, held in memory (each sample's rows, unpadded)."""

    rows: list[Rows]
    info: DatasetInfo
    samples: slice

    def __len__(self) -> int:
        return len(self.rows)

    def plan(self, batch_size: int, generator: torch.Generator | None = None) -> list[torch.Tensor]:
        """The sample indices of each mini-batch: shuffled with a generator, in order without."""
        return sample_batches(len(self), batch_size, generator)

    def fetch(self, index: torch.Tensor) -> MeshBatch:
        """The padded batch of the split's samples ``index``."""
        return pad([self.rows[int(i)] for i in index])

    def to(self, device: torch.device) -> MeshSplit:
        """The split with its tensors on ``device``."""
        return MeshSplit([tuple(t.to(device) for t in r) for r in self.rows], self.info, self.samples)

    @property
    def nbytes(self) -> int:
        """Bytes of the split's tensors."""
        return sum(t.nbytes for r in self.rows for t in r)

    def point_counts(self) -> list[int]:
        """The number of points of each sample."""
        return [len(r[1]) for r in self.rows]


@dataclass
class StreamedMeshSplit:
    """The samples of one split of a mesh operator file, read from disk per batch (the interface of
    :class:`MeshSplit` without its tensors; the file reopens itself in a worker process)."""

    info: DatasetInfo
    samples: slice
    cache_bytes: int | None = None
    file: MeshFile = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.file = MeshFile(self.info.path, self.cache_bytes)
        self.inputs, self.targets = _fields(self.info)

    def __len__(self) -> int:
        return self.samples.stop - self.samples.start

    def plan(self, batch_size: int, generator: torch.Generator | None = None) -> list[torch.Tensor]:
        """The sample indices of each mini-batch, as :meth:`MeshSplit.plan` draws them."""
        return sample_batches(len(self), batch_size, generator)

    def fetch(self, index: torch.Tensor) -> MeshBatch:
        """The padded batch of the split's samples ``index``, each read from disk."""
        return pad([sample_rows(self.file.sample(self.samples.start + int(i)), self.inputs, self.targets)
                    for i in index])

    def to(self, device: torch.device) -> StreamedMeshSplit:
        """A streamed split is read on the host: itself."""
        return self

    @property
    def nbytes(self) -> int:
        """Bytes the split would take in memory."""
        return split_bytes(self.file, self.samples)

    def point_counts(self) -> list[int]:
        """The number of points of each sample."""
        return self.file.point_counts()[self.samples].tolist()


def split_bytes(data: MeshFile, samples: slice) -> int:
    """Bytes a split of ``samples`` takes held in memory (float32 inputs, points, weights, targets)."""
    info = data.info
    per_point = len(info.input_channels) + info.mesh["dim"] + 1 + len(info.target_channels)
    return 4 * per_point * int(data.offsets[samples.stop] - data.offsets[samples.start])


def load_mesh_split(path: str | os.PathLike, split: str, *, n_train: int, n_val: int, n_test: int,
                    memory_gb: float | None = None) -> MeshSplit | StreamedMeshSplit:
    """One split (``train``, ``val``, ``test`` or ``all``: contiguous sample ranges, as grid files split) of a
    mesh operator file: held whole, or streamed per batch where it is larger than ``memory_gb``."""
    with MeshFile(path) as data:
        inputs, targets = _fields(data.info)
        samples = split_range(split, n_train, n_val, n_test, len(data), data.path)
        if memory_gb is not None and not fits(split_bytes(data, samples), memory_gb):
            return StreamedMeshSplit(data.info, samples)
        rows = [sample_rows(data.sample(i), inputs, targets) for i in range(samples.start, samples.stop)]
        return MeshSplit(rows, data.info, samples)
