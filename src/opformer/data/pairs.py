"""Operator-learning data sets: train/validation/test splits of a stored file on a chosen grid."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from opformer.grids import (NODES, axis_kinds, block_average, central_difference, restrict, restricted_shape,
                            stride_for)
from opformer.data.store import DatasetInfo, open_dataset_file, read_arrays, read_info
from opformer.errors import DataError
from opformer.kinds import MESH

GRADIENT_CHUNK = 64  #: samples whose stored-grid target gradients are computed at once

SPLITS = ("train", "val", "test", "all")


def sample_batches(n: int, batch_size: int, generator: torch.Generator | None = None) -> list[torch.Tensor]:
    """The indices of ``n`` samples in mini-batches: shuffled when a generator is given, in order otherwise."""
    order = torch.randperm(n, generator=generator) if generator is not None else torch.arange(n)
    return list(order.split(batch_size))


@dataclass
class OperatorSplit:
    """Input/target pairs of one split on one grid, channel-last.

    ``target_grad`` is the derivative of the target taken on the stored (finest) grid, then sub-sampled:
    the H1 regulariser compares the model's discrete derivative against it. In an inverse split the stored
    target is the input and the stored input the target (``input_channels``/``target_channels`` say which).
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    target_grad: torch.Tensor
    info: DatasetInfo
    resolution: tuple[int, ...]
    input_channels: list[str]
    target_channels: list[str]

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def plan(self, batch_size: int, generator: torch.Generator | None = None) -> list[torch.Tensor]:
        """The sample indices of each mini-batch (:func:`sample_batches`)."""
        return sample_batches(len(self), batch_size, generator)

    def fetch(self, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The samples ``index`` as ``(x, y, dy)``, on the split's device."""
        index = index.to(self.inputs.device, non_blocking=True)
        return self.inputs[index], self.targets[index], self.target_grad[index]

    def to(self, device: torch.device) -> OperatorSplit:
        """The split with its tensors on ``device``."""
        return dataclasses.replace(self, inputs=self.inputs.to(device), targets=self.targets.to(device),
                                   target_grad=self.target_grad.to(device))

    @property
    def nbytes(self) -> int:
        """Bytes of the split's tensors."""
        return sum(t.nbytes for t in (self.inputs, self.targets, self.target_grad))

    def batches(self, batch_size: int, generator: torch.Generator | None = None) -> Iterator[tuple[torch.Tensor, ...]]:
        """Mini-batches ``(x, y, dy)``; shuffled when a generator is given, in order otherwise."""
        for index in self.plan(batch_size, generator):
            yield self.fetch(index)


def split_range(split: str, n_train: int, n_val: int, n_test: int, n_samples: int, path: os.PathLike) -> slice:
    """The contiguous sample range of a split: train first, then validation, then test."""
    if split not in SPLITS:
        raise DataError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
    need = n_train + n_val + n_test
    if split != "all" and need > n_samples:
        raise DataError(f"{path}: holds {n_samples} samples but the splits need {need} "
                        f"(n_train {n_train} + n_val {n_val} + n_test {n_test})")
    bounds = {"train": (0, n_train), "val": (n_train, n_train + n_val),
              "test": (n_train + n_val, need), "all": (0, n_samples)}
    start, stop = bounds[split]
    return slice(start, stop)


@dataclass(frozen=True)
class PairLayout:
    """How the stored samples of an operator file become training pairs: which is input and which target
    (``direction``), the stride to the training grid and the target's grid; the same for every sample, so a split
    can be made whole (:func:`load_split`) or a batch at a time (:class:`opformer.data.streaming.StreamedPairs`)."""

    info: DatasetInfo
    stride: int
    direction: str = "forward"
    target_resolution: int | None = None

    @classmethod
    def of(cls, info: DatasetInfo, resolution: int | None = None, target_resolution: int | None = None,
           direction: str = "forward") -> PairLayout:
        """The layout of ``info``'s samples at ``resolution`` points per axis; bad settings are one-line errors."""
        if info.kind == MESH:
            raise DataError(f"{info.path}: holds mesh data (samples of varying point counts); operator splits on a "
                            "grid need grid data (mesh data: opformer.data.mesh_splits)")
        if not info.has_target:
            raise DataError(f"{info.path}: holds inputs only (no '/target'); training and evaluation need targets")
        if direction not in ("forward", "inverse"):
            raise DataError(f"direction {direction!r}: expected forward or inverse")
        kinds = axis_kinds(info.domain)
        strides = [stride_for(n, resolution or n, k, str(info.path)) for n, k in zip(info.spatial_shape, kinds)]
        if len(set(strides)) != 1:
            raise DataError(f"{info.path}: resolution {resolution} needs one stride on every axis of "
                            f"{info.spatial_shape}")
        if target_resolution is not None:
            if set(kinds) != {NODES} or info.ndim != 2 or len(set(info.spatial_shape)) != 1:
                raise DataError(f"{info.path}: data.target_resolution needs a square 2D grid of nodes (a closed "
                                "grid holding both ends)")
            stride_for(info.spatial_shape[0], target_resolution, NODES, f"{info.path}: data.target_resolution")
        return cls(info, strides[0], direction, target_resolution)

    @property
    def channels(self) -> tuple[list[str], list[str]]:
        """The input and target channel names."""
        names = (list(self.info.input_channels), list(self.info.target_channels))
        return names[::-1] if self.direction == "inverse" else names

    @property
    def shapes(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """Per-sample shapes of the input, the target and the target's gradient."""
        grid = restricted_shape(self.info.spatial_shape, self.stride, axis_kinds(self.info.domain))
        target_grid = (self.target_resolution,) * self.info.ndim if self.target_resolution else grid
        n_in, n_out = (len(c) for c in self.channels)
        return (*grid, n_in), (*target_grid, n_out), (*target_grid, n_out * self.info.ndim)

    def sample_bytes(self) -> int:
        """Bytes of one training pair (input, target, gradient) in float32."""
        return 4 * sum(math.prod(shape) for shape in self.shapes)

    def pairs(self, x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(inputs, targets, target_grad)`` of stored samples ``x``, ``y`` (``(sample, *stored, channels)``)."""
        if self.direction == "inverse":
            x, y = y, x
        kinds = axis_kinds(self.info.domain)
        lengths = tuple(float(v) for v in self.info.domain["lengths"])
        targets = torch.from_numpy(np.ascontiguousarray(y))
        if self.target_resolution is not None:
            targets = block_average(targets, self.target_resolution)
            grad = central_difference(targets, lengths, kinds)
        else:
            # on the stored grid, then sub-sampled; a few samples at a time, so no fine-grid gradient of the
            # whole split is held at once
            grad = torch.cat([restrict(central_difference(chunk, lengths, kinds), 1, self.stride, kinds)
                              for chunk in targets.split(GRADIENT_CHUNK)])
            targets = restrict(targets, 1, self.stride, kinds)
        inputs = restrict(torch.from_numpy(np.ascontiguousarray(x)), 1, self.stride, kinds)
        return inputs.contiguous(), targets.contiguous(), grad.contiguous()


def load_split(path: str | os.PathLike, split: str, *, n_train: int, n_val: int, n_test: int,
               resolution: int | None = None, target_resolution: int | None = None,
               direction: str = "forward") -> OperatorSplit:
    """Load one split of an operator data set, sub-sampled to ``resolution`` points per axis.

    ``direction="inverse"`` learns the inverse map: the stored target becomes the input and the stored input
    the target (the inverse Darcy problem: solution -> coefficient). ``target_resolution`` puts the target on a
    coarser closed grid by block averages of the stored (finest) target (:func:`block_average`).
    """
    info = read_info(path)
    layout = PairLayout.of(info, resolution, target_resolution, direction)
    samples = split_range(split, n_train, n_val, n_test, info.n_samples, info.path)
    parts = []
    with open_dataset_file(info.path) as data:  # a chunk of samples at a time: the stored grid of the whole
        for start in range(samples.start, samples.stop, GRADIENT_CHUNK):  # split is never in memory
            rows = (slice(start, min(start + GRADIENT_CHUNK, samples.stop)),)
            parts.append(layout.pairs(data.read("input", rows), data.read("target", rows)))
    inputs, targets, grad = (torch.cat(part) for part in zip(*parts)) if parts else layout.pairs(
        *read_arrays(info.path, samples))
    input_channels, target_channels = layout.channels
    return OperatorSplit(inputs=inputs, targets=targets, target_grad=grad, info=info,
                         resolution=tuple(inputs.shape[1:-1]), input_channels=input_channels,
                         target_channels=target_channels)


def split_options(data: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`load_split` that a run's data config (as a mapping) fixes."""
    keys = ("n_train", "n_val", "n_test", "target_resolution", "direction")
    defaults = {"target_resolution": None, "direction": "forward"}
    return {k: data.get(k, defaults.get(k)) for k in keys}
