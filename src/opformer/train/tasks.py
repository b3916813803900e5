"""What the one trainer trains on: the data of a run, its batches, its loss and its validation metric.

``OperatorTask``: input -> target pairs of a steady operator (Burgers, Darcy, inverse Darcy).
``TrajectoryTask``: windows of trajectories, trained with a rollout strategy and validated by rollouts.
``MixtureTask``: windows drawn from a mixture of trajectory files (DPOT's pre-training), channels masked.
``MeshTask``: input -> target pairs on meshes, padded batches, the quadrature-weighted relative L2.
:func:`make_task` picks one from the data section and the kind of the data file.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import torch

from opformer.config import RolloutConfig, RunConfig
from opformer.data.mesh_splits import StreamedMeshSplit, load_mesh_split
from opformer.data.mixture import Mixture, MixtureSpec
from opformer.data.normalize import NORMALIZER_CHUNK
from opformer.data.pairs import OperatorSplit, PairLayout, load_split, split_options, split_range
from opformer.data.store import DatasetInfo, read_info
from opformer.data.streaming import StreamedPairs, StreamedTrajectories, cache_share, fits
from opformer.data.trajectories import TrajectorySplit, load_trajectories, trajectory_layout
from opformer.errors import ConfigError
from opformer.grids import CELLS, PERIODIC, axis_kinds
from opformer.eval.metrics import (NOISE_SEED_OFFSETS, masked_relative_l2_per_sample, relative_l2_per_sample,
                                   rollout_errors, split_errors, weighted_relative_l2_per_sample)
from opformer.kinds import MESH, TRAJECTORY
from opformer.models.mesh_surrogate import MESH_LAYOUT, MeshSurrogate
from opformer.models.surrogate import Surrogate
from opformer.train.distributed import Context, Part
from opformer.train.losses import H1RelativeLoss, channel_relative_l2_per_sample, normalized_metric, relative_l2
from opformer.train.strategies import (Metric, StepDraws, add_relative_noise, draw_noise, draw_windows,
                                       drawn_window_loss)


class Task(Protocol):
    """The interface :class:`opformer.train.trainer.Trainer` uses.

    A training epoch is a :meth:`plan` (the global batches' indices, drawn first from the epoch's generator);
    :meth:`fetch` makes a batch of indices (one process's share of a global batch) into tensors; :meth:`draw`
    makes a step's random numbers (noise, pushforward's calls) from the same generator, in the order of the
    steps, and what depends on the step's index over the run (``iteration``); :meth:`drawn_loss` is the step's
    loss on the device, with no random draw and no host read, so that it can be captured as a CUDA graph.
    """

    info: DatasetInfo
    input_channels: list[str]
    target_channels: list[str]

    def spec_data(self) -> dict[str, Any]: ...
    def check_fit(self, model: torch.nn.Module) -> None: ...
    def normalizer_chunks(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]: ...
    streamed: bool
    def steps_per_epoch(self) -> int: ...
    def plan(self, epoch: int, generator: torch.Generator) -> list[torch.Tensor]: ...
    def fetch(self, index: torch.Tensor) -> tuple[torch.Tensor, ...]: ...
    def draw(self, part: Part, epoch: int, generator: torch.Generator, iteration: int = 0) -> StepDraws: ...
    def drawn_loss(self, surrogate: torch.nn.Module, batch: tuple[torch.Tensor, ...], epoch: int,
                   draws: StepDraws) -> torch.Tensor: ...
    def train_nbytes(self) -> int: ...
    def train_to(self, device: torch.device) -> None: ...
    def validate(self, surrogate: Surrogate, device: torch.device, context: Context | None = None) -> float: ...
    def validation_columns(self) -> dict[str, float]: ...


#: the metrics column of the selection metric, which a member's column must not take
SELECTION_COLUMN = "val_relative_l2"


def member_columns(names: list[str]) -> dict[str, str]:
    """The metrics column of each mixture member, ``val_<name>`` with every character other than letters, digits
    and ``_.+-`` replaced by ``_`` (CSV- and TensorBoard-safe); two members with one column, or a member whose
    column is the selection metric's, are a one-line :class:`ConfigError`."""
    columns: dict[str, str] = {}
    for index, name in enumerate(names):
        column = "val_" + re.sub(r"[^A-Za-z0-9_.+-]", "_", name)
        taken = [i for i, other in enumerate(columns.values()) if other == column]
        if taken or column == SELECTION_COLUMN:
            owner = f"member {taken[0]}'s" if taken else "the selection metric's"
            raise ConfigError(f"data.mixture[{index}].name: {name!r} would record its validation error as {column}, "
                              f"{owner} column; give the member another name")
        columns[name] = column
    return columns


def _base_spec(info: DatasetInfo, input_channels: list[str], target_channels: list[str]) -> dict[str, Any]:
    kinds = axis_kinds(info.domain)
    # "grid" only where a kind is not said by "periodic", so the specs of runs on other data stay as they were
    return {"stored_shape": list(info.spatial_shape), "periodic": list(info.domain["periodic"]),
            **({"grid": list(kinds)} if CELLS in kinds else {}),
            "lengths": list(info.domain["lengths"]), "input_channels": input_channels,
            "target_channels": target_channels}


def _check_output(model: torch.nn.Module, x: torch.Tensor, expected: tuple[int, ...], info: DatasetInfo,
                  hint: str) -> None:
    """One sample through the model (eval mode, no gradient): its output must have the target's shape."""
    with torch.no_grad():
        out = model.eval()(x)
    if tuple(out.shape[1:]) != tuple(expected):
        raise ConfigError(f"model: outputs {tuple(out.shape[1:])} per sample but the targets of {info.path} are "
                          f"{tuple(expected)} ({hint})")


def _check_time_sizes(model: torch.nn.Module, rollout: RolloutConfig) -> None:
    """A model built for other ``t_in``/``t_out`` than the rollout section's is a one-line error."""
    for key in ("t_in", "t_out"):
        built = getattr(model, "config", {}).get(key)
        if built is not None and built != getattr(rollout, key):
            raise ConfigError(f"rollout.{key}: is {getattr(rollout, key)} but the model was built for {key}={built}")


def _check_channel_weights(config: RunConfig, channels: int | None) -> None:
    """``loss.channel_weights``: one weight per channel of trajectory data (``channels``), nothing else (None)."""
    weights = config.loss.channel_weights
    if weights is not None and (channels is None or len(weights) != channels):
        wanted = f"one weight per channel ({channels})" if channels else "trajectory data (a file, not a mixture)"
        raise ConfigError(f"loss.channel_weights: {weights} does not fit {wanted}")


def _check_no_normalized_loss(config: RunConfig) -> None:
    """``loss.normalized`` is for trajectory data of one file."""
    if config.loss.normalized:
        raise ConfigError("loss.normalized: true is for trajectory data of one file (rollout training); "
                          "set it to false")


def _check_trajectory_config(config: RunConfig) -> None:
    """Keys of operator data are errors with trajectory data (a file or a mixture)."""
    data = config.data
    if data.direction != "forward" or data.target_resolution or data.input_noise:
        raise ConfigError("data.direction, data.target_resolution and data.input_noise are for operator data; "
                          "trajectories use rollout.noise")
    if config.loss.name != "relative_l2":
        raise ConfigError(f"loss.name: {config.loss.name!r} is for operator data; trajectories use relative_l2")


class OperatorTask:
    """Mini-batches of (input, target) pairs; relative L2 with the optional (weighted) H1 term."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        data = config.data
        _check_no_normalized_loss(config)
        self.options = split_options(dataclasses.asdict(data))
        info = read_info(data.path)
        layout = PairLayout.of(info, data.resolution, self.options["target_resolution"], self.options["direction"])
        samples = split_range("train", data.n_train, data.n_val, data.n_test, info.n_samples, info.path)
        self.streamed = not fits(data.n_train * layout.sample_bytes(), data.memory_gb)
        self.train: OperatorSplit | StreamedPairs = (
            StreamedPairs(layout, samples, cache_share(data.memory_gb, data.workers + 1)) if self.streamed
            else load_split(data.path, "train", resolution=data.resolution, **self.options))
        self.val = load_split(data.path, "val", resolution=data.resolution, **self.options)
        self.info = self.train.info
        self.input_channels, self.target_channels = self.val.input_channels, self.val.target_channels
        _check_channel_weights(config, None)
        domain = self.info.domain
        self.h1 = (H1RelativeLoss(config.loss.gamma, domain["lengths"], axis_kinds(domain), config.loss.h1_interior)
                   if config.loss.name == "h1_relative" else None)

    def spec_data(self) -> dict[str, Any]:
        """The data signature stored in the surrogate's spec."""
        n_target = self.config.data.target_resolution
        target_shape = [n_target] * self.info.ndim if n_target else list(self.info.spatial_shape)
        return {**_base_spec(self.info, self.input_channels, self.target_channels), "target_shape": target_shape}

    def check_fit(self, model: torch.nn.Module) -> None:
        """Grid and output shape of the model must fit the data; a time model takes one frame and returns one."""
        built = getattr(model, "config", {})
        if "t_in" in built and (built["t_in"], built["t_out"]) != (1, 1):
            raise ConfigError(f"rollout.t_in/t_out: are {built['t_in']}/{built['t_out']} but {self.info.path} holds "
                              "input -> target pairs, which a time model takes as one frame to one: set both to 1")
        x, y, _ = self.train.fetch(torch.zeros(1, dtype=torch.long))
        _check_output(model, x, tuple(y.shape[1:]), self.info,
                      "check data.resolution, data.target_resolution and the model's grid sizes")

    def normalizer_chunks(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Training inputs and targets, a chunk at a time: on the stored grid (point-wise statistics) or the
        training grid."""
        data = self.config.data
        stored = "pointwise" in (data.normalize_input, data.normalize_target)
        if self.streamed:
            return self.train.chunks(stored=stored)
        split = load_split(data.path, "train", **self.options) if stored else self.train
        return zip(split.inputs.split(NORMALIZER_CHUNK), split.targets.split(NORMALIZER_CHUNK))

    def steps_per_epoch(self) -> int:
        """Optimiser steps per epoch."""
        return math.ceil(len(self.train) / self.config.train.batch_size)

    def plan(self, epoch: int, generator: torch.Generator) -> list[torch.Tensor]:
        """The shuffled samples of each global mini-batch."""
        return self.train.plan(self.config.train.batch_size, generator)

    def fetch(self, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(x, y, dy)`` of the samples ``index``."""
        return self.train.fetch(index)

    def train_nbytes(self) -> int:
        """Bytes of the training split."""
        return self.train.nbytes

    def train_to(self, device: torch.device) -> None:
        """Hold the training split on ``device``."""
        self.train = self.train.to(device)

    def draw(self, part: Part, epoch: int, generator: torch.Generator, iteration: int = 0) -> StepDraws:
        """The step's input noise (``data.input_noise`` times ``N(0, 1)``, this part's rows of the global draw)."""
        level = self.config.data.input_noise
        noise = draw_noise((part.size, *self.val.inputs.shape[1:]), level, generator, part)
        return StepDraws(1, [None if noise is None else level * noise])

    def drawn_loss(self, surrogate: torch.nn.Module, batch: tuple[torch.Tensor, ...], epoch: int,
                   draws: StepDraws) -> torch.Tensor:
        """Mean loss of a batch on the device, with the step's input noise."""
        x, y, dy = batch
        pred = surrogate(x, draws.noise[0])
        if self.h1 is None:
            return relative_l2(pred, y)
        return self.h1(pred, y, dy, x[..., :1] if self.config.loss.weight_by_input else None)

    def validate(self, surrogate: Surrogate, device: torch.device, context: Context | None = None) -> float:
        """Mean relative L2 on the validation split (with the run's fixed validation noise); with a
        ``context`` of several processes, each takes its shard and the sums are all-reduced."""
        context = context or Context(device)
        errors = split_errors(surrogate, self.val, self.config.train.eval_batch_size, device,
                              noise_level=self.config.data.input_noise,
                              seed=self.config.seed + NOISE_SEED_OFFSETS["val"], rows=context.rows(len(self.val)))
        return context.mean(errors)

    def validation_columns(self) -> dict[str, float]:
        """No metrics beside the selection metric."""
        return {}


class TrajectoryTask:
    """Windows of ``t_in`` context frames and the future frames a rollout strategy needs; validated by
    rolling out the validation trajectories."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        data, rollout = config.data, config.rollout
        if "pointwise" in (data.normalize_input, data.normalize_target):
            raise ConfigError("data.normalize_input/normalize_target: trajectory data take 'channel' or 'none'")
        _check_trajectory_config(config)
        sizes = dict(n_train=data.n_train, n_val=data.n_val, n_test=data.n_test, resolution=data.resolution,
                     time_stride=rollout.time_stride)
        layout = trajectory_layout(data.path, "train", **sizes)
        self.streamed = not fits(layout.nbytes, data.memory_gb)
        self.train: TrajectorySplit = (StreamedTrajectories(layout, cache_share(data.memory_gb, data.workers + 1))
                                       if self.streamed else load_trajectories(data.path, "train", **sizes))
        self.val: TrajectorySplit = load_trajectories(data.path, "val", **sizes)
        self.info = self.train.info
        self.input_channels = self.target_channels = list(self.info.input_channels)
        _check_channel_weights(config, len(self.input_channels))
        weights = config.loss.channel_weights
        self.metric: Metric = (relative_l2_per_sample if weights is None
                               else functools.partial(channel_relative_l2_per_sample, weights=weights))
        self.span = rollout.unroll_steps * rollout.t_out
        self.train.check_window(rollout.t_in, self.span, "training window")
        self.eval_frames = rollout.eval_frames or self.val.n_times - rollout.t_in
        self.val.check_window(rollout.t_in, self.eval_frames, "rollout")

    def normalize_loss(self, normalizer: torch.nn.Module) -> None:
        """With ``loss.normalized``: the training loss between ``normalizer``'s encodings of prediction and truth
        (the surrogate's fitted target normalizer)."""
        if self.config.loss.normalized:
            self.metric = normalized_metric(self.metric, normalizer.encode)

    def spec_data(self) -> dict[str, Any]:
        """The data signature stored in the surrogate's spec, with the window sizes."""
        rollout = self.config.rollout
        return {**_base_spec(self.info, self.input_channels, self.target_channels), "t_in": rollout.t_in,
                "t_out": rollout.t_out}

    def check_fit(self, model: torch.nn.Module) -> None:
        """The model must take ``t_in`` frames and return ``t_out`` frames on the data's grid."""
        rollout = self.config.rollout
        _check_time_sizes(model, rollout)
        x, y = self.train.fetch(torch.zeros(1, 2, dtype=torch.long), rollout.t_in, rollout.t_out)
        _check_output(model, x, tuple(y.shape[1:]), self.info, "check rollout.t_in/t_out and the model")

    def normalizer_chunks(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """All training frames (channel statistics), a chunk of trajectories at a time."""
        chunks = self.train.chunks() if self.streamed else self.train.fields.split(NORMALIZER_CHUNK)
        return ((chunk, chunk) for chunk in chunks)

    def steps_per_epoch(self) -> int:
        """Optimiser steps per epoch."""
        rollout = self.config.rollout
        windows = len(self.train) * (1 if rollout.windows == "random"
                                     else self.train.n_times - rollout.t_in - self.span + 1)
        return math.ceil(windows / self.config.train.batch_size)

    def plan(self, epoch: int, generator: torch.Generator) -> list[torch.Tensor]:
        """The shuffled (trajectory, first frame) pairs of each global mini-batch."""
        rollout = self.config.rollout
        return self.train.plan(self.config.train.batch_size, rollout.t_in, self.span, rollout.windows, generator)

    def fetch(self, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The (context, future) windows of the pairs ``index``."""
        return self.train.fetch(index, self.config.rollout.t_in, self.span)

    def train_nbytes(self) -> int:
        """Bytes of the training trajectories."""
        return self.train.nbytes

    def train_to(self, device: torch.device) -> None:
        """Hold the training trajectories on ``device``."""
        self.train = self.train.to(device)

    def draw(self, part: Part, epoch: int, generator: torch.Generator, iteration: int = 0) -> StepDraws:
        """The strategy's random numbers for a batch at ``epoch`` and optimiser step ``iteration`` (pushforward's
        calls, latent marching's frames, each call's input noise)."""
        rollout = self.config.rollout
        shape = (part.size, *self.val.fields.shape[2:-1], rollout.t_in, self.val.fields.shape[-1])
        return draw_windows(rollout, epoch, shape, generator, part, iteration)

    def drawn_loss(self, surrogate: torch.nn.Module, batch: tuple[torch.Tensor, ...], epoch: int,
                   draws: StepDraws) -> torch.Tensor:
        """The strategy's loss with the step's draws (the curriculum's number of calls or of marched frames)."""
        context, future = batch
        return drawn_window_loss(surrogate, context, future, self.config.rollout, draws, self.metric)

    def validate(self, surrogate: Surrogate, device: torch.device, context: Context | None = None) -> float:
        """Trajectory-averaged relative L2 of rollouts of the validation trajectories (each process's shard
        with a ``context`` of several processes, the sums all-reduced)."""
        context = context or Context(device)
        surrogate.eval()
        fields = self.val.fields[context.rows(len(self.val))]
        errors = torch.zeros(0)
        if len(fields):
            errors = rollout_errors(surrogate, fields, self.config.rollout.t_in, self.eval_frames,
                                    self.config.train.eval_batch_size, device, keep_predictions=False).per_frame
        return context.mean(errors)

    def validation_columns(self) -> dict[str, float]:
        """No metrics beside the selection metric."""
        return {}


class MixtureTask:
    """Windows drawn from a mixture of trajectory files (:mod:`opformer.data.mixture`), trained one step at a
    time (teacher forcing, DPOT's pre-training) with the masked relative L2 and optional ``rollout.noise``;
    validated per member by rollouts on the member's stored grid, the selection metric the mean over members.

    The mean gives each member (a PDE family) the same weight whatever its number of validation trajectories
    or its error's scale, so selection cannot trade one family's accuracy for another's by counting samples;
    the members' own errors are recorded beside it (:meth:`validation_columns`)."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        data, rollout = config.data, config.rollout
        if (data.normalize_input, data.normalize_target) != ("none", "none"):
            raise ConfigError("data.normalize_input/normalize_target: a mixture trains on raw values ('none'); "
                              "channel statistics would mix members and padding")
        _check_trajectory_config(config)
        _check_channel_weights(config, None)
        _check_no_normalized_loss(config)
        if rollout.strategy != "one_step" or rollout.windows != "all":
            raise ConfigError("rollout.strategy/windows: a mixture trains one_step on data.windows_per_epoch "
                              f"random windows, not {rollout.strategy} with windows {rollout.windows}")
        self.mixture = Mixture(MixtureSpec(
            members=data.mixture, resolution=data.resolution, t_in=rollout.t_in, t_out=rollout.t_out,
            windows_per_epoch=data.windows_per_epoch, sampling=data.sampling, seed=config.seed,
            n_train=data.n_train, n_val=data.n_val, n_test=data.n_test, time_stride=rollout.time_stride),
            where="data.mixture", memory_gb=data.memory_gb)
        self.streamed = self.mixture.streamed
        members = self.mixture.members
        self.info = dataclasses.replace(members[0].info, path=Path("data.mixture"))  # what messages name
        self.input_channels = self.target_channels = [
            "|".join(dict.fromkeys(m.info.input_channels[c] for m in members if c < m.channels))
            for c in range(self.mixture.channels)]
        self.val = [self.mixture.stored_split(k, "val") for k in range(len(members))]
        self.eval_frames = []
        for k, (fields, _) in enumerate(self.val):
            frames = fields.shape[1] - rollout.t_in
            if rollout.eval_frames and rollout.eval_frames > frames:
                raise ConfigError(f"rollout.eval_frames: {rollout.eval_frames} is more than the {frames} frames "
                                  f"after t_in of data.mixture[{k}] ({members[k].info.path})")
            self.eval_frames.append(rollout.eval_frames or frames)
        self.member_errors: dict[str, float] = {}  # the last validation's error of each member
        self.columns = member_columns([m.name for m in members])

    def spec_data(self) -> dict[str, Any]:
        """The data signature stored in the surrogate's spec: members, training grid, channels, windows."""
        members = self.mixture.members
        periodic = [all(axis_kinds(m.info.domain)[axis] == PERIODIC for m in members)
                    for axis in range(len(self.mixture.grid))]
        return {"mixture": [m.name for m in members], "stored_shape": list(self.mixture.grid), "periodic": periodic,
                "input_channels": self.input_channels, "target_channels": self.target_channels,
                "t_in": self.config.rollout.t_in, "t_out": self.config.rollout.t_out}

    def check_fit(self, model: torch.nn.Module) -> None:
        """The model must take ``t_in`` frames of every channel and return ``t_out`` frames on the training grid."""
        rollout = self.config.rollout
        _check_time_sizes(model, rollout)
        context, future, _, _ = self.mixture.fetch(torch.zeros(1, 3, dtype=torch.long))
        _check_output(model, context, tuple(future.shape[1:]), self.info, "check rollout.t_in/t_out and the model")

    def normalizer_chunks(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Nothing to fit (a mixture is not normalized)."""
        return iter(())

    def steps_per_epoch(self) -> int:
        """Optimiser steps per epoch."""
        return self.mixture.steps_per_epoch(self.config.train.batch_size)

    def plan(self, epoch: int, generator: torch.Generator) -> list[torch.Tensor]:
        """The epoch's global batches of (member, trajectory, first frame) draws from ``generator``."""
        return self.mixture.plan(epoch, self.config.train.batch_size, generator)

    def fetch(self, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(context, future, mask, member) of the draws ``index``."""
        return self.mixture.fetch(index)

    def train_nbytes(self) -> int:
        """Bytes of the members' training trajectories."""
        return self.mixture.nbytes

    def train_to(self, device: torch.device) -> None:
        """Hold the members' training trajectories on ``device``."""
        self.mixture.to(device)

    def draw(self, part: Part, epoch: int, generator: torch.Generator, iteration: int = 0) -> StepDraws:
        """The input noise of the one call on the context."""
        shape = (part.size, *self.mixture.grid, self.config.rollout.t_in, self.mixture.channels)
        return StepDraws(1, [draw_noise(shape, self.config.rollout.noise, generator, part)])

    def drawn_loss(self, surrogate: torch.nn.Module, batch: tuple[torch.Tensor, ...], epoch: int,
                   draws: StepDraws) -> torch.Tensor:
        """Masked relative L2 of one call on the noised context (padded channels have no RMS, so no noise)."""
        context, future, mask = batch[:3]
        pred = surrogate(add_relative_noise(context, self.config.rollout.noise, noise=draws.noise[0]))
        return masked_relative_l2_per_sample(pred, future, mask).mean()

    @torch.no_grad()
    def validate(self, surrogate: Surrogate, device: torch.device, context: Context | None = None) -> float:
        """Mean over members of each member's L2RE (space-time, real channels) of rollouts of its validation
        trajectories on its stored grid, padded output channels zeroed before they are fed back."""
        context = context or Context(device)
        surrogate.eval()
        t_in, batch_size = self.config.rollout.t_in, self.config.train.eval_batch_size
        for member, (fields, mask), frames in zip(self.mixture.members, self.val, self.eval_frames):
            mine = fields[context.rows(len(fields))]
            errors = rollout_errors(surrogate, mine, t_in, frames, batch_size, device, mask=mask,
                                    keep_predictions=False).l2re
            self.member_errors[member.name] = context.mean(errors)
        return sum(self.member_errors.values()) / len(self.member_errors)

    def validation_columns(self) -> dict[str, float]:
        """The last validation's error of each member, as the metrics columns ``val_<member name>``."""
        return {self.columns[name]: error for name, error in self.member_errors.items()}


#: the metrics column of the plain relative L2 (uniform over the real points) of a mesh run's validation
UNIFORM_COLUMN = "val_relative_l2_uniform"


class MeshTask:
    """Mini-batches of padded mesh samples (:mod:`opformer.data.mesh_splits`); the loss and the selection metric are
    the quadrature-weighted relative L2 (``sqrt(sum_i w_i |u_i - v_i|^2 / sum_i w_i |v_i|^2)`` per sample), and the
    plain one (uniform over the real points) is logged beside it as ``val_relative_l2_uniform``."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        data = config.data
        grid_keys = {"data.resolution": data.resolution, "data.target_resolution": data.target_resolution,
                     "data.input_noise": data.input_noise or None,
                     "data.direction": None if data.direction == "forward" else data.direction,
                     "data.boundary": None if data.boundary == "none" else data.boundary,
                     "loss.name": None if config.loss.name == "relative_l2" else config.loss.name}
        for key, value in grid_keys.items():
            if value is not None:
                raise ConfigError(f"{key}: {value!r} is for grid data; {data.path} holds mesh data")
        splits = {"n_train": data.n_train, "n_val": data.n_val, "n_test": data.n_test}
        self.train = load_mesh_split(data.path, "train", **splits, memory_gb=data.memory_gb)
        self.val = load_mesh_split(data.path, "val", **splits)
        self.streamed = isinstance(self.train, StreamedMeshSplit)
        self.info = self.val.info
        self.input_channels, self.target_channels = list(self.info.input_channels), list(self.info.target_channels)
        _check_channel_weights(config, None)
        self.uniform_error = math.nan

    def spec_data(self) -> dict[str, Any]:
        """The data signature stored in the surrogate's spec (the fields' names and channel counts too: what
        ``opformer predict`` reads from a user's mesh file and writes)."""
        mesh = self.info.mesh
        return {"layout": MESH_LAYOUT, "space_dim": mesh["dim"], "input_channels": self.input_channels,
                "target_channels": self.target_channels,
                "input_fields": [list(f) for f in mesh["inputs"]], "target_fields": [list(f) for f in mesh["targets"]]}

    def check_fit(self, model: torch.nn.Module) -> None:
        """A mesh surrogate whose output has the targets' channels."""
        if not isinstance(model, MeshSurrogate):
            raise ConfigError(f"model: {self.info.path} holds mesh data, which needs a mesh model")
        batch = self.train.fetch(torch.zeros(1, dtype=torch.long))
        with torch.no_grad():
            out = model.eval()(*batch[:4])
        if out.shape != batch.y.shape:
            raise ConfigError(f"model: outputs {out.shape[-1]} channels but the targets of {self.info.path} have "
                              f"{batch.y.shape[-1]} ({', '.join(self.target_channels)})")

    def normalizer_chunks(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The training samples' real points, ``(points, channels)`` of inputs and targets, a few samples at a time."""
        for start in range(0, len(self.train), NORMALIZER_CHUNK):
            batch = self.train.fetch(torch.arange(start, min(start + NORMALIZER_CHUNK, len(self.train))))
            yield batch.x[batch.mask], batch.y[batch.mask]

    def steps_per_epoch(self) -> int:
        """Optimiser steps per epoch."""
        return math.ceil(len(self.train) / self.config.train.batch_size)

    def plan(self, epoch: int, generator: torch.Generator) -> list[torch.Tensor]:
        """The shuffled samples of each global mini-batch."""
        return self.train.plan(self.config.train.batch_size, generator)

    def fetch(self, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(x, pos, weights, mask, y)`` of the samples ``index``, padded to the largest."""
        return tuple(self.train.fetch(index))

    def train_nbytes(self) -> int:
        """Bytes of the training split."""
        return self.train.nbytes

    def train_to(self, device: torch.device) -> None:
        """Hold the training split on ``device``."""
        self.train = self.train.to(device)

    def draw(self, part: Part, epoch: int, generator: torch.Generator, iteration: int = 0) -> StepDraws:
        """No random numbers in a step."""
        return StepDraws(1, [None])

    def drawn_loss(self, surrogate: torch.nn.Module, batch: tuple[torch.Tensor, ...], epoch: int,
                   draws: StepDraws) -> torch.Tensor:
        """Mean quadrature-weighted relative L2 of a batch."""
        x, pos, weights, mask, y = batch
        return weighted_relative_l2_per_sample(surrogate(x, pos, weights, mask), y, weights).mean()

    def validate(self, surrogate: MeshSurrogate, device: torch.device, context: Context | None = None) -> float:
        """Mean quadrature-weighted relative L2 on the validation split (the plain one kept for
        :meth:`validation_columns`); with a ``context`` of several processes each takes its shard."""
        context = context or Context(device)
        mine = context.rows(len(self.val))
        weighted, uniform = [torch.zeros(0)], [torch.zeros(0)]
        surrogate.eval()
        with torch.no_grad():
            for index in torch.arange(mine.start, mine.stop).split(self.config.train.eval_batch_size):
                x, pos, weights, mask, y = (t.to(device) for t in self.val.fetch(index))
                pred = surrogate(x, pos, weights, mask)
                weighted.append(weighted_relative_l2_per_sample(pred, y, weights).cpu())
                uniform.append(weighted_relative_l2_per_sample(pred, y, mask).cpu())
        self.uniform_error = context.mean(torch.cat(uniform))
        return context.mean(torch.cat(weighted))

    def validation_columns(self) -> dict[str, float]:
        """The plain relative L2 of the last validation."""
        return {UNIFORM_COLUMN: self.uniform_error}


def make_task(config: RunConfig) -> OperatorTask | TrajectoryTask | MixtureTask | MeshTask:
    """The task of a run: a mixture trains on its members' windows, trajectory data sets with rollouts,
    operator data sets with pairs, mesh data sets with padded batches of points."""
    if config.data.mixture:
        return MixtureTask(config)
    if not config.data.path:
        raise ConfigError("data.path: required (an HDF5 file made by `opformer generate`)")
    kind = read_info(config.data.path).kind
    if kind == MESH:
        return MeshTask(config)
    return TrajectoryTask(config) if kind == TRAJECTORY else OperatorTask(config)

