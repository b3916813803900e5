"""Operator-learning data sets: train/validation/test splits of a stored file on a chosen grid."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from opformer.grids import NODES, axis_kinds, block_average, central_difference, restrict, stride_for
from opformer.data.store import DatasetInfo, read_arrays, read_info
from opformer.errors import DataError

GRADIENT_CHUNK = 64  #: samples whose stored-grid target gradients are computed at once

SPLITS = ("train", "val", "test", "all")


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
        """The sample indices of each mini-batch; shuffled when a generator is given, in order otherwise."""
        n = len(self)
        order = torch.randperm(n, generator=generator) if generator is not None else torch.arange(n)
        return list(order.split(batch_size))

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


def load_split(path: str | os.PathLike, split: str, *, n_train: int, n_val: int, n_test: int,
               resolution: int | None = None, target_resolution: int | None = None,
               direction: str = "forward") -> OperatorSplit:
    """Load one split of an operator data set, sub-sampled to ``resolution`` points per axis.

    ``direction="inverse"`` learns the inverse map: the stored target becomes the input and the stored input
    the target (the inverse Darcy problem: solution -> coefficient). ``target_resolution`` puts the target on a
    coarser closed grid by block averages of the stored (finest) target (:func:`block_average`).
    """
    info = read_info(path)
    if not info.has_target:
        raise DataError(f"{info.path}: holds inputs only (no '/target'); training and evaluation need targets")
    if direction not in ("forward", "inverse"):
        raise DataError(f"direction {direction!r}: expected forward or inverse")
    samples = split_range(split, n_train, n_val, n_test, info.n_samples, info.path)
    kinds = axis_kinds(info.domain)
    lengths = tuple(float(v) for v in info.domain["lengths"])
    strides = [stride_for(n, resolution or n, k, str(info.path)) for n, k in zip(info.spatial_shape, kinds)]
    if len(set(strides)) != 1:
        raise DataError(f"{info.path}: resolution {resolution} needs one stride on every axis of "
                        f"{info.spatial_shape}")
    x, y = read_arrays(info.path, samples)
    channels = [info.input_channels, info.target_channels]
    if direction == "inverse":
        x, y = y, x
        channels.reverse()
    stride = strides[0]
    targets = torch.from_numpy(np.ascontiguousarray(y))
    if target_resolution is not None:
        if set(kinds) != {NODES} or info.ndim != 2 or len(set(info.spatial_shape)) != 1:
            raise DataError(f"{info.path}: data.target_resolution needs a square 2D grid of nodes (a closed grid "
                            "holding both ends)")
        stride_for(info.spatial_shape[0], target_resolution, NODES, f"{info.path}: data.target_resolution")
        targets = block_average(targets, target_resolution)
        grad = central_difference(targets, lengths, kinds)
    else:
        # on the stored grid, then sub-sampled; a few samples at a time, so no fine-grid gradient of the
        # whole split is held at once
        grad = torch.cat([restrict(central_difference(chunk, lengths, kinds), 1, stride, kinds)
                          for chunk in targets.split(GRADIENT_CHUNK)])
        targets = restrict(targets, 1, stride, kinds)
    inputs = restrict(torch.from_numpy(np.ascontiguousarray(x)), 1, stride, kinds).contiguous()
    return OperatorSplit(
        inputs=inputs,
        targets=targets.contiguous(),
        target_grad=grad.contiguous(),
        info=info,
        resolution=tuple(inputs.shape[1:-1]),
        input_channels=list(channels[0]),
        target_channels=list(channels[1]),
    )


def split_options(data: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`load_split` that a run's data config (as a mapping) fixes."""
    keys = ("n_train", "n_val", "n_test", "target_resolution", "direction")
    defaults = {"target_resolution": None, "direction": "forward"}
    return {k: data.get(k, defaults.get(k)) for k in keys}
