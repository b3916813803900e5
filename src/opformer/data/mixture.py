"""A mixture of trajectory data sets (DPOT's pre-training data): members of different physics, channel counts
and grids, each resized once to one training grid, channels zero-padded to the largest count with a
per-sample channel mask, and windows drawn member by member with seeded probabilities.

A draw picks a member (probability proportional to its weight, or to weight x training windows as in the
DPOT authors' code), then a trajectory and a window start uniformly; an epoch is a fixed number of draws from
a generator seeded with ``seed + epoch``, so a run, a resumed run and every process of a data-parallel run
derive the same windows. Validation and test data stay on each member's stored grid.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from opformer.data.pairs import split_range
from opformer.data.resize import resize
from opformer.data.store import DataFile, DatasetInfo, read_fields, read_info
from opformer.data.streaming import cache_share, fits
from opformer.data.trajectories import frames_last
from opformer.errors import ConfigError, DataError
from opformer.grids import PERIODIC, axis_kinds
from opformer.kinds import TRAJECTORY
from opformer.validate import GridSize, NonNegativeInt, PositiveFloat, PositiveInt

#: How members are drawn: ``weight`` (probability proportional to the weight, the DPOT paper) or
#: ``weight_x_size`` (the weight times the member's number of training windows, the DPOT authors' code).
Sampling = Literal["weight", "weight_x_size"]

RESIZE_CHUNK = 16  #: trajectories resized at once (the Fourier resize works in float64)


@dataclass
class MixtureMember:
    """One trajectory data file of a mixture; split sizes not given are the mixture's."""

    path: str
    weight: PositiveFloat = 1.0
    name: str = ""  # default: the file's stem
    n_train: PositiveInt | None = None
    n_val: PositiveInt | None = None
    n_test: PositiveInt | None = None
    time_stride: PositiveInt | None = None  # every time_stride-th stored frame (default: the mixture's)


@dataclass
class MixtureSpec:
    """Which files, which training grid, which windows, how many per epoch and how they are drawn."""

    members: list[MixtureMember]
    resolution: GridSize | list[GridSize]  # training grid points per axis (one number: every axis)
    t_in: PositiveInt = 10
    t_out: PositiveInt = 1  # future frames of a window (all frames a training strategy uses)
    windows_per_epoch: PositiveInt | None = None  # None: the members' training trajectories together
    sampling: Sampling = "weight"
    seed: NonNegativeInt = 0
    n_train: PositiveInt = 1024
    n_val: PositiveInt = 100
    n_test: PositiveInt = 100
    time_stride: PositiveInt = 1

    def sizes(self, member: MixtureMember) -> dict[str, int]:
        """The member's split sizes (its own, else the mixture's)."""
        return {key: getattr(member, key) or getattr(self, key) for key in ("n_train", "n_val", "n_test")}

    def stride(self, member: MixtureMember) -> int:
        """The member's time stride (its own, else the mixture's): members stored at different frame spacings
        can each be sub-sampled so that one model step covers a comparable change of the field."""
        return member.time_stride or self.time_stride


def member_name(member: MixtureMember) -> str:
    """The member's name, or its file's stem."""
    return member.name or Path(member.path).stem


class StreamedMember:
    """A member's training trajectories read per window from disk and resized to the training grid as read:
    the interface of the tensor ``(n_train, time, *grid, channels)`` that :class:`LoadedMember` holds otherwise
    (its shape, and indexing by (trajectory, frame) index tensors)."""

    def __init__(self, info: DatasetInfo, samples: slice, time_stride: int, grid: tuple[int, ...],
                 cache_bytes: int | None) -> None:
        self.info, self.samples, self.time_stride, self.grid = info, samples, time_stride, grid
        self.file = DataFile(info.path, cache_bytes)
        frames = len(info.times[::time_stride])
        self.shape = (samples.stop - samples.start, frames, *grid, len(info.input_channels))
        self.device = torch.device("cpu")

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes the resized trajectories would take in memory."""
        return 4 * math.prod(self.shape)

    def __getitem__(self, index: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """``train[trajectory (k, 1), frame (k, span)]``: the windows' frames, each read at the time stride
        (consecutive frames of the window) and resized."""
        trajectories, frames = index
        step = self.time_stride
        windows = []
        for trajectory, row in zip(trajectories[:, 0].tolist(), frames.tolist()):
            stored = slice(row[0] * step, row[-1] * step + 1, step)
            block = self.file.read("fields", (self.samples.start + trajectory, stored))[None]
            windows.append(resize(torch.from_numpy(block), 2, self.grid, axis_kinds(self.info.domain))[0])
        return torch.stack(windows)

    def to(self, device: torch.device) -> StreamedMember:
        """Read on the host: itself."""
        return self


@dataclass
class LoadedMember:
    """A member's training trajectories on the training grid ``(n_train, time, *grid, channels)`` (its own
    channels, padded when a batch is built; a :class:`StreamedMember` where the mixture streams) and its
    validation trajectories on the stored grid."""

    name: str
    info: DatasetInfo
    weight: float
    sizes: dict[str, int]
    time_stride: int
    train: torch.Tensor | StreamedMember
    val: torch.Tensor

    @property
    def channels(self) -> int:
        """Real channels of the member."""
        return self.train.shape[-1]

    def starts(self, span: int) -> int:
        """Window starts per trajectory for windows of ``span`` frames."""
        return self.train.shape[1] - span + 1


def _load_member(spec: MixtureSpec, index: int, ndim: int | None, where: str,
                 stream: int | None = None) -> LoadedMember:
    """Read, check and resize one member; errors name the member (``where``) and key. With ``stream`` (the
    bytes of its chunk cache) its training trajectories are read per window instead (:class:`StreamedMember`)."""
    member = spec.members[index]
    try:
        info = read_info(member.path)
    except DataError as exc:
        raise DataError(f"{where}.path: {exc}") from None
    if info.kind != TRAJECTORY:
        raise DataError(f"{where}.path: {info.path} is an {info.kind} data set; a mixture takes trajectory data sets")
    if ndim is not None and info.ndim != ndim:
        raise DataError(f"{where}.path: {info.path} is {info.ndim}D but the first member is {ndim}D; a mixture's "
                        "members share the spatial dimension")
    grid = training_grid(spec, info.ndim)
    kinds = axis_kinds(info.domain)
    for n, kind in zip(info.spatial_shape, kinds):
        if kind != PERIODIC and n < 2:
            raise DataError(f"{where}.path: a {kind} axis of {n} point in {info.spatial_shape} of {info.path} cannot "
                            f"be resized to {grid}")
    stride = spec.stride(member)
    frames = len(info.times[::stride])
    if frames < spec.t_in + spec.t_out:
        raise DataError(f"{where}.path: {info.path} has {frames} frames per trajectory (time stride "
                        f"{stride}) but a window needs t_in {spec.t_in} + t_out {spec.t_out}")
    sizes = spec.sizes(member)
    try:
        train, val = (split_range(split, **sizes, n_samples=info.n_samples, path=info.path)
                      for split in ("train", "val"))
    except DataError as exc:
        raise DataError(f"{where}: {exc}") from None
    windows = (StreamedMember(info, train, stride, grid, stream) if stream is not None
               else _read_resized(info, train, stride, grid))
    return LoadedMember(member_name(member), info, member.weight, sizes, stride, windows, _read(info, val, stride))


def _read_resized(info: DatasetInfo, samples: slice, stride: int, grid: tuple[int, ...]) -> torch.Tensor:
    """Trajectories of a sample range, every ``stride``-th frame, resized to ``grid``, read and resized
    :data:`RESIZE_CHUNK` at a time (the stored grid of the whole split is never in memory at once)."""
    kinds = axis_kinds(info.domain)
    frames = len(info.times[::stride])
    out = torch.empty(samples.stop - samples.start, frames, *grid, len(info.input_channels))
    for start in range(samples.start, samples.stop, RESIZE_CHUNK):
        chunk = slice(start, min(start + RESIZE_CHUNK, samples.stop))
        out[chunk.start - samples.start:chunk.stop - samples.start] = resize(
            _read(info, chunk, stride), 2, grid, kinds)
    return out


def _read(info: DatasetInfo, samples: slice, time_stride: int) -> torch.Tensor:
    """Stored trajectories ``(sample, time, *stored, channels)`` of a sample range, strided in time."""
    fields = read_fields(info.path, samples)[:, ::time_stride]
    return torch.from_numpy(np.ascontiguousarray(fields))


def training_bytes(spec: MixtureSpec) -> int:
    """Bytes of every member's training trajectories on the training grid (float32), from the files'
    descriptions (nothing read)."""
    total = 0
    for member in spec.members:
        try:
            info = read_info(member.path)
        except DataError:
            continue  # loading the member says what is wrong, naming it
        n_train = spec.sizes(member)["n_train"]
        grid = training_grid(spec, info.ndim)
        total += 4 * n_train * len(info.times[::spec.stride(member)]) * math.prod(grid) * len(info.input_channels)
    return total


def training_grid(spec: MixtureSpec, ndim: int) -> tuple[int, ...]:
    """The training grid of ``ndim`` axes (a one-line error if the spec gives another number of sizes)."""
    if isinstance(spec.resolution, int):
        return (spec.resolution,) * ndim
    if len(spec.resolution) != ndim:
        raise ConfigError(f"resolution: {spec.resolution} gives {len(spec.resolution)} sizes but the members "
                          f"have {ndim} spatial axes")
    return tuple(spec.resolution)


def pad_channels(fields: torch.Tensor, channels: int) -> torch.Tensor:
    """``fields`` (channel-last) with zero channels appended up to ``channels``."""
    missing = channels - fields.shape[-1]
    return torch.cat([fields, fields.new_zeros((*fields.shape[:-1], missing))], dim=-1) if missing else fields


class Mixture:
    """The loaded members of a :class:`MixtureSpec`, their sampling probabilities and the epoch's batches
    ``(context (b, *grid, t_in, C), future (b, *grid, t_out, C), mask (b, C), member (b,))``."""

    def __init__(self, spec: MixtureSpec, where: str = "mixture.members", memory_gb: float | None = None) -> None:
        self.spec = spec
        if not spec.members:
            raise ConfigError(f"{where}: a mixture needs at least one member")
        names = [member_name(m) for m in spec.members]
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise ConfigError(f"{where}[{i}].name: {name!r} is the name of member {names.index(name)} too; "
                                  "give each member its own name")
        self.members: list[LoadedMember] = []
        stream = None
        if memory_gb is not None and not fits(training_bytes(spec), memory_gb):
            stream = cache_share(memory_gb, len(spec.members))  # each member's chunk cache
        for index in range(len(spec.members)):
            ndim = self.members[0].info.ndim if self.members else None
            self.members.append(_load_member(spec, index, ndim, f"{where}[{index}]", stream))
        self.streamed = stream is not None
        self.grid = training_grid(spec, self.members[0].info.ndim)
        self.channels = max(m.channels for m in self.members)
        #: (member, channel): whether the channel is one of the member's own
        self.channel_mask = torch.arange(self.channels) < torch.tensor([m.channels for m in self.members])[:, None]
        self.span = spec.t_in + spec.t_out
        self.windows_per_epoch = spec.windows_per_epoch or sum(len(m.train) for m in self.members)

    def __len__(self) -> int:
        return len(self.members)

    def probabilities(self) -> torch.Tensor:
        """The probability of drawing each member (float64), by the spec's sampling rule."""
        weights = torch.tensor([m.weight for m in self.members], dtype=torch.float64)
        if self.spec.sampling == "weight_x_size":
            weights = weights * torch.tensor([len(m.train) * m.starts(self.span) for m in self.members],
                                             dtype=torch.float64)
        return weights / weights.sum()

    def draws(self, epoch: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """The epoch's windows ``(windows per epoch, 3)``: (member, trajectory, first frame) from ``generator``
        (default: a new one seeded with ``seed + epoch``)."""
        if generator is None:
            generator = torch.Generator().manual_seed(self.spec.seed + epoch)
        count = self.windows_per_epoch
        member = torch.multinomial(self.probabilities(), count, replacement=True, generator=generator)
        n_traj = torch.tensor([len(m.train) for m in self.members], dtype=torch.float64)
        n_start = torch.tensor([m.starts(self.span) for m in self.members], dtype=torch.float64)
        uniform = torch.rand(count, 2, generator=generator, dtype=torch.float64)
        trajectory = (uniform[:, 0] * n_traj[member]).long()
        start = (uniform[:, 1] * n_start[member]).long()
        return torch.stack([member, trajectory, start], dim=1)

    def fetch(self, draws: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The windows of ``draws`` (rows of :meth:`draws`), channels padded: (context, future, mask, member)."""
        device = self.members[0].train.device
        draws = draws.cpu()  # which rows come from which member is decided on the host: no device read
        member = draws[:, 0]
        frames = torch.zeros(len(draws), self.span, *self.grid, self.channels, device=device)
        offsets = torch.arange(self.span, device=device)
        for k, loaded in enumerate(self.members):
            rows = (member == k).nonzero().flatten()
            if len(rows):
                picked = draws[rows].to(device, non_blocking=True)
                windows = loaded.train[picked[:, 1:2], picked[:, 2:3] + offsets]
                frames[rows.to(device, non_blocking=True), ..., :loaded.channels] = windows.to(device)
        frames = frames_last(frames)
        t_in = self.spec.t_in
        return (frames[..., :t_in, :], frames[..., t_in:, :], self.channel_mask[member].to(device, non_blocking=True),
                member.to(device, non_blocking=True))

    def to(self, device: torch.device) -> None:
        """Move the members' training trajectories to ``device`` (batches are then built there)."""
        for loaded in self.members:
            loaded.train = loaded.train.to(device)

    @property
    def nbytes(self) -> int:
        """Bytes of the members' training trajectories."""
        return sum(m.train.nbytes for m in self.members)

    def plan(self, epoch: int, batch_size: int, generator: torch.Generator | None = None) -> list[torch.Tensor]:
        """The epoch's draws (:meth:`draws`) split into global batches."""
        return list(self.draws(epoch, generator).split(batch_size))

    def steps_per_epoch(self, batch_size: int) -> int:
        """Batches per epoch."""
        return math.ceil(self.windows_per_epoch / batch_size)

    def batches(self, epoch: int, batch_size: int, generator: torch.Generator | None = None
                ) -> Iterator[tuple[torch.Tensor, ...]]:
        """The epoch's global batches of windows (see :meth:`draws` for the generator)."""
        for draws in self.plan(epoch, batch_size, generator):
            yield self.fetch(draws)

    def stored_split(self, index: int, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        """A member's ``val`` or ``test`` trajectories on its stored grid ``(sample, time, *stored, C)``, channels
        zero-padded, and its channel mask ``(C,)``."""
        loaded = self.members[index]
        if split == "val":
            fields = loaded.val
        else:
            samples = split_range(split, **loaded.sizes, n_samples=loaded.info.n_samples, path=loaded.info.path)
            fields = _read(loaded.info, samples, loaded.time_stride)
        return pad_channels(fields, self.channels), self.channel_mask[index]
