"""Evaluation of a run trained on a mixture of trajectory files (DPOT's pre-training): a row per member; and of
imported trajectory weights (DPOT's, FactFormer's) on one file, as a member of such a mixture.

Each member's split is read on its stored grid, channels zero-padded to the run's count, and rolled out from
its first ``t_in`` frames exactly as the run's validation does (:func:`opformer.eval.metrics.rollout_errors`
with the member's channel mask: padded output channels zeroed before they are fed back). A row gives DPOT's
L2RE (per sample and real channel over the whole space-time rollout, mean over channels, then samples) beside
opformer's per-frame relative L2, and the same two numbers for persistence (the last given frame repeated).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from opformer.data.mixture import MixtureSpec, member_name, pad_channels
from opformer.data.trajectories import TrajectorySplit, load_trajectories
from opformer.errors import ConfigError, DataError
from opformer.grids import axis_kinds
from opformer.eval.evaluate import spread
from opformer.eval.metrics import RolloutErrors, persistence, rollout_errors
from opformer.models.inference import ResizedStep, Step
from opformer.models.surrogate import Surrogate
from opformer.runs import Run
from opformer.runtime import resolve_device

#: Frames rolled out after the 10 given ones in the DPOT paper's evaluation, by member name (``cns`` stands for
#: every ``cns_*`` member).
PAPER_FRAMES = {"fno_nu1e-5": 10, "fno_nu1e-4": 20, "fno_nu1e-3": 20, "cns": 11, "dr": 91, "swe": 91, "smoke": 4,
                "smoke_conditioned": 46}


@dataclass
class MemberSplit:
    """One member's trajectories of a split on its stored grid, channels padded, its mask and rollout length."""

    name: str
    data: TrajectorySplit
    fields: torch.Tensor  # (sample, time, *stored, C), channels zero-padded to the run's C
    mask: torch.Tensor  # (C,): True where the channel is one of the member's own
    frames: int
    time_stride: int  # stored frames per step of the model


def paper_frames(name: str) -> int:
    """The DPOT paper's rollout length of a member, by its name (a one-line error for other names)."""
    key = name if name in PAPER_FRAMES else name.split("_")[0]
    if key not in PAPER_FRAMES:
        raise ConfigError(f"--paper-lengths: member {name!r} has no rollout length in the DPOT paper "
                          f"(known: {', '.join(PAPER_FRAMES)}, cns_*)")
    return PAPER_FRAMES[key]


def member_splits(run: Run, split: str = "test", frames: int | None = None,
                  paper_lengths: bool = False, samples: int | None = None) -> list[MemberSplit]:
    """Every member's ``split`` (its own split sizes, else the mixture's; the first ``samples`` if given) on its
    stored grid, and its rollout length: ``frames``, the paper's (``paper_lengths``), else every frame after
    ``t_in`` (a one-line error when a member has fewer)."""
    cfg, data_spec = run.run_config, run.surrogate.spec["data"]
    data_cfg, t_in, channels = cfg["data"], data_spec["t_in"], len(data_spec["input_channels"])
    spec = MixtureSpec(members=run.members, resolution=data_cfg["resolution"],
                       n_train=data_cfg["n_train"], n_val=data_cfg["n_val"], n_test=data_cfg["n_test"],
                       time_stride=cfg["rollout"].get("time_stride", 1))
    out = []
    for member in spec.members:
        name, sizes = member_name(member), spec.sizes(member)
        if samples is not None and f"n_{split}" in sizes:
            sizes[f"n_{split}"] = min(samples, sizes[f"n_{split}"])
        stride = spec.stride(member)
        data = load_trajectories(member.path, split, **sizes, time_stride=stride)
        out.append(_member_split(name, data, channels, t_in, frames, paper_lengths, "the run's model",
                                 f"member {name!r} ({data.info.path})", stride))
    return out


def _member_split(name: str, data: TrajectorySplit, channels: int, t_in: int, frames: int | None,
                  paper_lengths: bool, model: str, where: str, time_stride: int) -> MemberSplit:
    """A member's split (read at ``time_stride``) padded to the model's ``channels``, rolled out for ``frames`` (or
    the paper's length, or every frame after ``t_in``); too many channels or too few frames are one-line errors
    naming ``where``."""
    own = data.fields.shape[-1]
    if own > channels:
        raise DataError(f"{data.info.path}: {own} channels but {model} takes {channels}")
    length = frames or (paper_frames(name) if paper_lengths else data.n_times - t_in)
    if t_in + length > data.n_times:
        raise ConfigError(f"{'--frames' if frames else '--paper-lengths'}: {length} frames after t_in {t_in} need "
                          f"{t_in + length} but {where} has {data.n_times}")
    return MemberSplit(name, data, pad_channels(data.fields, channels), torch.arange(channels) < own, length,
                       time_stride)


def member_rollout(step: Step, member: MemberSplit, t_in: int, batch_size: int,
                   device: torch.device) -> RolloutErrors:
    """A member's rollouts and errors, as the run's validation computes them (padded channels masked)."""
    return rollout_errors(step, member.fields, t_in, member.frames, batch_size, device, mask=member.mask)


def evaluate_mixture(run_dir: str | os.PathLike | Run, split: str = "test", frames: int | None = None,
                     paper_lengths: bool = False, device: str = "auto", batch_size: int | None = None
                     ) -> list[dict[str, Any]]:
    """A row per member of a mixture run on its ``split``: the model's and persistence's L2RE and per-frame
    relative L2 of rollouts of ``frames`` frames (see :func:`member_splits`) on the member's stored grid."""
    run = Run.open(run_dir)
    run.require_mixture()
    surrogate, payload = run.surrogate, run.payload
    dev = resolve_device(device)
    surrogate.to(dev)
    t_in = surrogate.spec["data"]["t_in"]
    batch = batch_size or payload["run_config"]["train"]["eval_batch_size"]
    rows = []
    for member in member_splits(run, split, frames, paper_lengths):
        model = member_rollout(surrogate, member, t_in, batch, dev)
        baseline = member_rollout(persistence, member, t_in, batch, torch.device("cpu"))
        per_frame = model.per_frame.mean(dim=0)
        rows.append({
            "member": member.name,
            "path": str(Path(member.data.info.path)),
            "samples": len(member.fields),
            "stored_shape": list(member.data.resolution),
            "trained_at": list(surrogate.spec["data"]["stored_shape"]),
            "channels": list(member.data.info.input_channels),
            "frames": member.frames,
            "l2re": float(model.l2re.mean()),
            "l2re_std": spread(model.l2re),
            "relative_l2": float(model.per_frame.mean()),
            "final_relative_l2": float(per_frame[-1]),
            "per_frame_relative_l2": [float(e) for e in per_frame],
            "persistence_l2re": float(baseline.l2re.mean()),
            "persistence_relative_l2": float(baseline.per_frame.mean()),
        })
    return rows


def imported_member(run_dir: str | os.PathLike | Run, data_path: str | os.PathLike, split: str = "all",
                    frames: int | None = None, paper_lengths: bool = False, device: str = "auto",
                    samples: int | None = None) -> tuple[Surrogate, dict[str, Any], MemberSplit, Step, list[str]]:
    """An imported trajectory model (``opformer import``; on ``device``) and one trajectory file as a mixture member:
    its channels zero-padded to the model's (as in the authors' pre-training; errors over the real ones), the
    step that applies the model (for a model whose weights fix its grid, :attr:`Surrogate.fixed_grid`: resizing
    each window to the grid its ``pos_embed`` was built for where the file's grid differs, the prediction back to
    the stored grid, where it is measured; any other model runs on the file's grid), and notes on what was padded
    or resized. ``samples``: the first ones of the split only."""
    run = Run.open(run_dir)
    surrogate, payload = run.surrogate, run.payload
    run_dir = run.path
    if not run.as_member:
        raise ConfigError(f"{run_dir}: not a run of imported trajectory weights")
    surrogate.to(resolve_device(device))
    cfg, spec = payload["run_config"], surrogate.spec
    t_in, channels = spec["data"]["t_in"], len(spec["data"]["input_channels"])
    if len(spec["data"]["target_channels"]) != channels:
        raise ConfigError(f"{run_dir}: a model of {channels} input and {len(spec['data']['target_channels'])} output "
                          "channels cannot roll out")
    sizes = {key: cfg["data"][key] for key in ("n_train", "n_val", "n_test")}
    if samples is not None and split != "all":
        sizes[f"n_{split}"] = min(samples, sizes[f"n_{split}"])
    stride = cfg["rollout"].get("time_stride", 1)
    data = load_trajectories(data_path, split, **sizes, time_stride=stride)
    if samples is not None and split == "all":
        data.fields = data.fields[:samples]
    name, own = Path(data_path).stem, data.fields.shape[-1]
    if data.info.ndim != len(spec["data"]["stored_shape"]):
        raise DataError(f"{data.info.path}: {data.info.ndim}D data, but {run_dir} is a model of "
                        f"{len(spec['data']['stored_shape'])}D data")
    member = _member_split(name, data, channels, t_in, frames, paper_lengths, f"the model of {run_dir}",
                           str(data.info.path), stride)
    grid, stored = tuple(spec["data"]["stored_shape"]), tuple(data.resolution)
    notes = [f"channels {', '.join(data.info.input_channels)} padded with {channels - own} zero channels to the "
             f"model's {channels} (errors over the real ones)"] if own < channels else []
    step: Step = surrogate
    if stored != grid and surrogate.fixed_grid:  # a model of any grid runs on the file's
        step = ResizedStep(surrogate, grid, axis_kinds(data.info.domain))
        notes.append(f"frames resized {'x'.join(map(str, stored))} -> {'x'.join(map(str, grid))} for the model (its "
                     f"img_size), predictions back to {'x'.join(map(str, stored))}, where the errors are measured")
    return surrogate, payload, member, step, notes


def evaluate_file(run_dir: str | os.PathLike | Run, data_path: str | os.PathLike, split: str = "all",
                  frames: int | None = None, paper_lengths: bool = False, device: str = "auto",
                  batch_size: int | None = None) -> list[dict[str, Any]]:
    """Imported trajectory weights on one trajectory file (:func:`imported_member`), rolled out beside persistence: one row
    with the columns of :func:`evaluate_mixture` and ``notes`` (what was padded or resized)."""
    surrogate, payload, member, step, notes = imported_member(run_dir, data_path, split, frames, paper_lengths,
                                                              device)
    t_in = surrogate.spec["data"]["t_in"]
    batch = batch_size or payload["run_config"]["train"]["eval_batch_size"]
    model = member_rollout(step, member, t_in, batch, resolve_device(device))
    baseline = member_rollout(persistence, member, t_in, batch, torch.device("cpu"))
    per_frame = model.per_frame.mean(dim=0)
    return [{"member": member.name, "path": str(Path(member.data.info.path)), "samples": len(member.fields),
             "stored_shape": list(member.data.resolution), "trained_at": list(surrogate.spec["data"]["stored_shape"]),
             "channels": list(member.data.info.input_channels), "frames": member.frames,
             "l2re": float(model.l2re.mean()), "l2re_std": spread(model.l2re),
             "relative_l2": float(model.per_frame.mean()), "final_relative_l2": float(per_frame[-1]),
             "per_frame_relative_l2": [float(e) for e in per_frame],
             "persistence_l2re": float(baseline.l2re.mean()),
             "persistence_relative_l2": float(baseline.per_frame.mean()), "notes": notes}]


def format_mixture_table(rows: list[dict[str, Any]], title: str = "") -> str:
    """A plain-text table of :func:`evaluate_mixture` rows, the mean over members last."""
    lines = [title] if title else []
    lines.append(f"{'member':<20}  {'samples':>7}  {'grid':>9}  {'frames':>6}  {'L2RE':>10}  {'std':>9}  "
                 f"{'rel. L2':>10}  {'final':>10}  {'persist. L2RE':>13}  {'persist. L2':>11}")
    for row in rows:
        grid = "x".join(str(n) for n in row["stored_shape"])
        lines.append(f"{row['member']:<20}  {row['samples']:>7}  {grid:>9}  {row['frames']:>6}  {row['l2re']:>10.3e}  "
                     f"{row['l2re_std']:>9.2e}  {row['relative_l2']:>10.3e}  {row['final_relative_l2']:>10.3e}  "
                     f"{row['persistence_l2re']:>13.3e}  {row['persistence_relative_l2']:>11.3e}")
    if rows:
        mean = {key: sum(r[key] for r in rows) / len(rows)
                for key in ("l2re", "relative_l2", "final_relative_l2", "persistence_l2re", "persistence_relative_l2")}
        lines.append(f"{'mean over members':<20}  {'':>7}  {'':>9}  {'':>6}  {mean['l2re']:>10.3e}  {'':>9}  "
                     f"{mean['relative_l2']:>10.3e}  {mean['final_relative_l2']:>10.3e}  "
                     f"{mean['persistence_l2re']:>13.3e}  {mean['persistence_relative_l2']:>11.3e}")
    return "\n".join(lines)
