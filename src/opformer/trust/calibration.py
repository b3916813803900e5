"""Calibrating a run: split conformal scores on data that training and model selection never saw, stored in the
run directory, and the bounds they give every new prediction.

::

    RUN/calibration.pt   per data set (the run's file, or each member of a mixture): the sorted scores of every
                         calibration sample and rolled-out frame (relative L2; pointwise at each scale and level of
                         opformer.trust.scores), the sorted joint scores (each sample's largest over the frames, a
                         frame's score over its scale) and the frame scales (the validation split's medians),
                         the calibration inputs' statistics (opformer.trust.shift), the grid
                         and channels; and what it was calibrated on: the data files (path, size, modification
                         time), the split, the samples, the frames, the checkpoint and its checksum

The file is written atomically and read with ``torch.load(weights_only=True)``; it carries a SHA-256 checksum of
everything it holds (as the checkpoints do, :func:`opformer.runs.checksum`), so a changed byte is an error. Storing
the scores, not quantiles, keeps every coverage level answerable.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from opformer.data.mixture import MixtureMember, member_name
from opformer.data.pairs import load_split, split_options
from opformer.data.store import read_info
from opformer.data.trajectories import load_trajectories
from opformer.errors import CheckpointError, ConfigError, StorageError
from opformer.eval.evaluate import check_compatible
from opformer.eval.forecast import Annotate, Forecaster, Inputs, load_forecaster
from opformer.eval.members import imported_member, is_imported, is_mixture_run, member_splits
from opformer.eval.metrics import Step, predict, rollout_errors
from opformer.imports.weights import sha256_file
from opformer.io import atomic_replace
from opformer.models.surrogate import Surrogate
from opformer.runs import checksum, load_checkpoint, run_checkpoint
from opformer.runtime import resolve_device
from opformer.trust.conformal import check_coverage, conformal_quantile, conformal_rank, expected_coverage
from opformer.trust.scores import (DEFAULT_SCALE, DEFAULT_SCORE, SAMPLE_SCORES, SCALES, local_scale, point_level,
                                   pointwise_scores, relative_l2)
from opformer.trust.shift import flag_shifted, input_statistics, roughness_of

CALIBRATION = "calibration.pt"
FORMAT, VERSION = "opformer-calibration", 1
#: The coverage levels ``opformer calibrate`` prints by default.
DEFAULT_COVERAGES = (0.8, 0.9, 0.95)
#: The level at which the scores are compared on the validation split (:func:`select`), and the ratio of median
#: bounds by which the normalised per-sample score must beat the plain one to be chosen (a few validation samples
#: rank two close scores by chance).
SELECTION_COVERAGE, SELECTION_MARGIN = 0.9, 0.9


@dataclass
class Group:
    """The calibration of one data set (the run's file, or one mixture member): scores sorted along the sample
    axis, one column per rolled-out frame (one for operator runs)."""

    relative_l2: torch.Tensor  # (n, frames)
    normalised: torch.Tensor  # (n, frames): relative L2 over the input's roughness
    pointwise: dict[str, torch.Tensor]  # scale -> (n, frames, len(POINT_LEVELS))
    statistics: torch.Tensor  # (n, statistics) of the calibration inputs (in sample order)
    difficulty: torch.Tensor  # (n,): the calibration inputs' roughness (in sample order)
    grid: tuple[int, ...]
    channels: int
    score: str = DEFAULT_SCORE  # the per-sample score bounds use (selected on validation, :func:`select`)
    scale: str = DEFAULT_SCALE  # the pointwise scale bounds use
    #: per-sample score -> (n,) sorted: each calibration sample's largest score over the frames, each frame's
    #: divided by ``frame_scale`` (the joint score of bounds that hold for every frame at once); None in a
    #: calibration written before joint bounds
    joint: dict[str, torch.Tensor] | None = None
    frame_scale: dict[str, torch.Tensor] | None = None  # per-sample score -> (frames,)

    @property
    def samples(self) -> int:
        """Calibration samples."""
        return self.relative_l2.shape[0]


class Bounds(NamedTuple):
    """What :meth:`Calibration.bounds` returns for predictions at a coverage ``c``.

    ``relative_l2``: the bound on each sample's relative L2 error, ``(sample,)`` (rollouts ``(sample, frame)``): it
    holds with probability at least ``c`` for inputs like the calibration data (a rollout's: for each frame, or,
    ``joint``, for every calibrated frame at once; ``+inf`` where too few samples were calibrated or a frame lies
    beyond the calibrated horizon). ``lower``/``upper``: the pointwise band, the
    predictions' shape; with probability at least ``c`` at least a fraction ``c`` of a sample's points lie in it.
    ``flagged`` ``(sample,)``: True where the input is unlike the calibration inputs (or on another grid): there the
    bounds are written but not guaranteed."""

    relative_l2: torch.Tensor
    lower: torch.Tensor
    upper: torch.Tensor
    flagged: torch.Tensor
    coverage: float


@dataclass
class Calibration:
    """A run's stored calibration (:func:`load_calibration`)."""

    run: str
    kind: str  # "operator" or "trajectory"
    checkpoint_checksum: str
    source: dict[str, Any]  # data files, split, frames, checkpoint, created
    groups: dict[str, Group]  # "" for a run of one data file, else member names

    @property
    def frames(self) -> int:
        """Calibrated frames of the horizon (1 for an operator run)."""
        return next(iter(self.groups.values())).relative_l2.shape[1]

    def group(self, member: str | None = None) -> Group:
        """The calibration of ``member`` (None: the only data set); a one-line error for other names."""
        if member is None and len(self.groups) == 1:
            return next(iter(self.groups.values()))
        if member not in self.groups:
            raise ConfigError(f"member {member!r}: {self.run} is calibrated per member of its mixture; expected one "
                              f"of {', '.join(self.groups)}")
        return self.groups[member]

    def quantiles(self, coverage: float, member: str | None = None, score: str = "relative_l2") -> torch.Tensor:
        """``(frames,)``: the conformal quantile of a per-sample score at ``coverage`` for each calibrated frame:
        for ``relative_l2`` the bound on the relative L2 error itself, for ``roughness`` its factor (the bound is
        it times the input's roughness)."""
        group = self.group(member)
        return conformal_quantile(group.normalised if score == "roughness" else group.relative_l2, coverage,
                                  sorted_=True)

    def joint_quantiles(self, coverage: float, member: str | None = None, score: str = "relative_l2"
                        ) -> torch.Tensor:
        """``(frames,)``: as :meth:`quantiles`, but bounds that hold for every calibrated frame at once at
        ``coverage``: the conformal quantile of the joint score (each sample's largest over the frames of its score
        over the frame's scale) times each frame's scale."""
        group = self.group(member)
        if group.joint is None or group.frame_scale is None:
            raise CheckpointError(f"{self.run}: its calibration predates joint bounds; run `opformer calibrate "
                                  f"{self.run}` again")
        return conformal_quantile(group.joint[score][:, None], coverage, sorted_=True) * group.frame_scale[score]

    def sample_bounds(self, coverage: float, difficulty: torch.Tensor, member: str | None = None,
                      score: str | None = None, joint: bool = False) -> torch.Tensor:
        """``(sample, frames)``: the relative-L2 bound of inputs of roughness ``difficulty`` ``(sample,)``, for each
        frame or (``joint``) for all frames at once."""
        score = score or self.group(member).score
        if score not in SAMPLE_SCORES:
            raise ConfigError(f"score {score!r}: expected one of {', '.join(SAMPLE_SCORES)}")
        quantile = (self.joint_quantiles if joint else self.quantiles)(coverage, member, score)
        factor = difficulty.double()[:, None] if score == "roughness" else torch.ones(len(difficulty), 1,
                                                                                       dtype=torch.float64)
        return factor * quantile

    def bounds(self, inputs: torch.Tensor, predictions: torch.Tensor, coverage: float = 0.9,
               member: str | None = None, scale: str | None = None, score: str | None = None,
               joint: bool = False) -> Bounds:
        """Bounds on ``predictions`` of ``inputs`` at ``coverage`` (see :class:`Bounds`), by the calibration's
        per-sample ``score`` and pointwise ``scale`` (default: those selected on the run's validation split);
        ``joint``: the relative-L2 bounds of a rollout hold for every calibrated frame at once (the band stays per
        frame).

        Operator runs: ``inputs`` ``(sample, *spatial, c_in)``, ``predictions`` ``(sample, *spatial, c)``.
        Trajectory runs: ``inputs`` the given frames ``(sample, t, *spatial, c)``, ``predictions`` the forecast
        frames ``(sample, frame, *spatial, c)``, frame ``f`` the ``f``-th after the given ones; frames beyond the
        calibrated horizon get infinite bounds.
        """
        check_coverage(coverage, "--coverage")
        group = self.group(member)
        scale = scale or group.scale
        if scale not in SCALES:
            raise ConfigError(f"scale {scale!r}: expected one of {', '.join(SCALES)}")
        rollout = self.kind == "trajectory"
        preds = predictions if rollout else predictions.unsqueeze(1)
        ndim = len(group.grid)
        if preds.dim() != ndim + 3 or preds.shape[-1] != group.channels or len(inputs) != len(preds):
            raise ConfigError(f"{self.run}: predictions of shape {tuple(predictions.shape)} for {len(inputs)} inputs "
                              f"do not fit its calibration ({ndim}D, {group.channels} channels"
                              f"{', (sample, frame, *grid, channels)' if rollout else ''})")
        frames = preds.shape[1]
        known = min(frames, self.frames)
        statistics = input_statistics(inputs, ndim)
        difficulty = roughness_of(statistics, inputs.shape[-1])
        bound = torch.full((len(preds), frames), math.inf, dtype=torch.float64)
        bound[:, :known] = self.sample_bounds(coverage, difficulty, member, score, joint)[:, :known]
        width = torch.full((frames,), math.inf, dtype=torch.float64)
        level = point_level(coverage)
        width[:known] = conformal_quantile(group.pointwise[scale][:, :known, level], coverage, sorted_=True)
        scales = local_scale(preds.flatten(0, 1), scale).unflatten(0, preds.shape[:2])  # every frame at once
        half = (scales * width.view(1, frames, *[1] * (preds.dim() - 2))).to(preds.dtype)
        lower, upper = preds - half, preds + half
        flagged = flag_shifted(statistics, group.statistics)
        if tuple(preds.shape[2:-1]) != group.grid:
            flagged = torch.ones_like(flagged)
        if not rollout:
            bound, lower, upper = bound[:, 0], lower[:, 0], upper[:, 0]
        return Bounds(bound, lower, upper, flagged, float(coverage))


def _file_record(path: str | os.PathLike) -> dict[str, Any]:
    """What identifies a data file cheaply: its resolved path, size and modification time."""
    stat = Path(path).stat()
    return {"path": str(Path(path).resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _checkpoint_checksum(payload: dict[str, Any], path: Path) -> str:
    """A checkpoint's identity: its stored checksum, else (a checkpoint written before checksums) its file's."""
    if payload.get("checksum"):
        return str(payload["checksum"])
    return sha256_file(path)


def _check_split(split: str, data: str | os.PathLike | None, cfg: dict[str, Any], imported: bool) -> None:
    """Calibration data must be unseen by training (``train``) and by model selection (``val``)."""
    if split in ("train", "val"):
        raise ConfigError(f"--split {split}: the run was {'trained' if split == 'train' else 'selected'} on it; "
                          "calibrate on data it never saw (--split test, or --data FILE --split all)")
    if split == "all" and not imported:
        seen = [m["path"] for m in cfg["data"].get("mixture") or []] + [cfg["data"].get("path")]
        if data is None or any(p and Path(p).resolve() == Path(data).resolve() for p in seen):
            raise ConfigError("--split all: takes the run's training samples too; use --split test, or another "
                              "file with --data FILE")


class Scores:
    """The scores of one data set, gathered a batch of samples at a time (:meth:`add`), then compared
    (:func:`select`) or sorted into a :class:`Group` (:meth:`group`)."""

    def __init__(self) -> None:
        self.parts: dict[str, list[torch.Tensor]] = {}
        self.grid: tuple[int, ...] = ()
        self.channels = 0

    def add(self, inputs: torch.Tensor, preds: torch.Tensor, truth: torch.Tensor, ndim: int) -> None:
        """Score a batch: inputs ``(b, *spatial, c_in)`` or the given frames ``(b, t, *spatial, c)``, predictions and
        truth ``(b, frames, *spatial, c)`` (``ndim`` spatial axes)."""
        b, frames = preds.shape[:2]
        self.grid, self.channels = tuple(preds.shape[2:-1]), preds.shape[-1]
        flat_pred, flat_truth = preds.flatten(0, 1), truth.flatten(0, 1)
        statistics = input_statistics(inputs, ndim)
        parts = {"relative_l2": relative_l2(flat_pred, flat_truth).reshape(b, frames), "statistics": statistics,
                 "difficulty": roughness_of(statistics, inputs.shape[-1])}
        for scale in SCALES:
            local = local_scale(flat_pred, scale)
            parts[scale] = pointwise_scores(flat_pred, flat_truth, scale, local).reshape(b, frames, -1)
            parts[f"width_{scale}"] = local.flatten(1).mean(dim=1).reshape(b, frames)
        for key, value in parts.items():
            self.parts.setdefault(key, []).append(value)

    def joined(self) -> dict[str, torch.Tensor]:
        """Every score of every sample, in sample order."""
        return {key: torch.cat(value) for key, value in self.parts.items()}

    def sample_scores(self) -> dict[str, torch.Tensor]:
        """Each per-sample score of :data:`SAMPLE_SCORES`, ``(n, frames)`` in sample order."""
        cat = self.joined()
        return {"relative_l2": cat["relative_l2"], "roughness": cat["relative_l2"] / cat["difficulty"][:, None]}

    def frame_scales(self) -> dict[str, torch.Tensor]:
        """Each per-sample score's median over the samples at each frame, ``(frames,)``: the scale by which the
        joint score divides that frame (:meth:`group`)."""
        return {name: values.median(dim=0).values.clamp_min(torch.finfo(values.dtype).tiny)
                for name, values in self.sample_scores().items()}

    def group(self, selection: dict[str, Any] | None = None, frame_scale: dict[str, torch.Tensor] | None = None
              ) -> Group:
        """The gathered scores sorted per frame (the inputs' statistics in sample order), using the score and scale
        of ``selection`` (:func:`select`; default :data:`DEFAULT_SCORE`, :data:`DEFAULT_SCALE`), and the joint
        scores over ``frame_scale`` (:meth:`frame_scales` of held-out samples; default these samples' own)."""
        cat, per_sample = self.joined(), self.sample_scores()
        ordered = {key: cat[key].sort(dim=0).values for key in ("relative_l2", *SCALES)}
        frame_scale = frame_scale or self.frame_scales()
        joint = {name: (values / frame_scale[name]).max(dim=1).values.sort().values
                 for name, values in per_sample.items()}
        chosen = selection or {}
        return Group(ordered["relative_l2"], per_sample["roughness"].sort(dim=0).values,
                     {scale: ordered[scale] for scale in SCALES}, cat["statistics"], cat["difficulty"], self.grid,
                     self.channels, chosen.get("score", DEFAULT_SCORE), chosen.get("scale", DEFAULT_SCALE), joint,
                     frame_scale)


def select(scores: Scores) -> dict[str, Any]:
    """The sharper per-sample score and pointwise scale on held-out samples (the run's validation split, never the
    calibration samples, so the calibration's guarantee is untouched), each at :data:`SELECTION_COVERAGE` within
    those samples: the per-sample score with the smaller median ratio of bound to true error (the normalised one
    only by the factor :data:`SELECTION_MARGIN`), the scale with the narrower mean band; the defaults where too
    few samples are held out."""
    cat, c = scores.joined(), SELECTION_COVERAGE
    errors = cat["relative_l2"]
    record: dict[str, Any] = {"samples": len(errors), "score": DEFAULT_SCORE, "scale": DEFAULT_SCALE}
    if conformal_rank(len(errors), c) is None:
        return record
    sigma = cat["difficulty"][:, None]
    ratios = {"relative_l2": conformal_quantile(errors, c) / errors,
              "roughness": conformal_quantile(errors / sigma, c) * sigma / errors}
    level = point_level(c)
    widths = {scale: conformal_quantile(cat[scale][:, :, level], c) * cat[f"width_{scale}"] for scale in SCALES}
    record["median_bound_over_error"] = {k: float(v.median()) for k, v in ratios.items()}
    record["mean_half_width"] = {k: float(v.mean()) for k, v in widths.items()}
    sharpness = record["median_bound_over_error"]
    normalised_wins = sharpness["roughness"] < SELECTION_MARGIN * sharpness["relative_l2"]
    record["score"] = "roughness" if normalised_wins else "relative_l2"
    record["scale"] = min(record["mean_half_width"], key=record["mean_half_width"].get)
    return record


def _rollout_scores(step: Step, fields: torch.Tensor, own: int, t_in: int, frames: int, mask: torch.Tensor | None,
                    batch: int, device: torch.device) -> Scores:
    """Roll out every trajectory of ``fields`` ``(sample, time, *spatial, C)`` (channels beyond ``own`` padded) and
    score the ``frames`` frames after the first ``t_in`` on the real channels."""
    scores, ndim = Scores(), fields.dim() - 3
    for start in range(0, len(fields), batch):
        chunk = fields[start:start + batch]
        preds = rollout_errors(step, chunk, t_in, frames, batch, device, mask=mask).predictions
        scores.add(chunk[:, :t_in, ..., :own], preds[..., :own], chunk[:, t_in:t_in + frames, ..., :own], ndim)
    return scores


def score_split(run_dir: Path, surrogate: Surrogate, payload: dict[str, Any], data: str | os.PathLike | None,
                 split: str, frames: int | None, resolution: int | None, batch: int, device: str
                 ) -> tuple[dict[str, Scores], list[str | os.PathLike]]:
    """The scores of every data set of a run (its file, or each mixture member) on ``split``, and the files."""
    cfg, dev = payload["run_config"], resolve_device(device)
    t_in = surrogate.spec["data"].get("t_in")
    if is_mixture_run(payload):
        if data is not None or resolution is not None:
            raise ConfigError(f"--{'data' if data is not None else 'resolution'}: {run_dir} was trained on a mixture; "
                              "it is calibrated on each member's test split on its stored grid")
        members = member_splits(surrogate, payload, split, frames=frames or cfg["rollout"].get("eval_frames"))
        return ({m.name: _rollout_scores(surrogate, m.fields, int(m.mask.sum()), t_in, m.frames, m.mask, batch, dev)
                 for m in members}, [m.data.info.path for m in members])
    if is_imported(payload) and t_in is not None:
        if data is None or resolution is not None:
            raise ConfigError(f"{run_dir}: holds imported weights; give the data to calibrate them on with --data FILE "
                              "(on its stored grid: no --resolution)")
        _, _, member, step, _ = imported_member(run_dir, data, split, frames, device=device,
                                                loaded=(surrogate, payload))
        return {"": _rollout_scores(step, member.fields, int(member.mask.sum()), t_in, member.frames, member.mask,
                                    batch, dev)}, [data]
    path = data or cfg["data"]["path"]
    if path is None:
        raise ConfigError(f"{run_dir}: give the data to calibrate on with --data FILE")
    info, sizes = read_info(path), {key: cfg["data"][key] for key in ("n_train", "n_val", "n_test")}
    if info.kind == "trajectory":
        rollout = cfg.get("rollout", {})
        traj = load_trajectories(path, split, **sizes, resolution=resolution, time_stride=rollout.get("time_stride", 1))
        check_compatible(surrogate, traj.info, str(run_dir))
        frames = frames or rollout.get("eval_frames") or traj.n_times - t_in
        traj.check_window(t_in, frames, "rollout")
        scores = _rollout_scores(surrogate, traj.fields, traj.fields.shape[-1], t_in, frames, None, batch, dev)
        return {"": scores}, [path]
    if frames is not None:
        raise ConfigError("--frames: only for runs on trajectory data (an operator run predicts one output)")
    pairs = load_split(path, split, resolution=resolution, **split_options(cfg["data"]))
    check_compatible(surrogate, pairs.info, str(run_dir), (pairs.input_channels, pairs.target_channels))
    scores = Scores()
    for start in range(0, len(pairs), batch):
        x, y = pairs.inputs[start:start + batch], pairs.targets[start:start + batch]
        scores.add(x, predict(surrogate, x, batch, dev).unsqueeze(1), y.unsqueeze(1), info.ndim)
    return {"": scores}, [path]


def calibrate_run(run_dir: str | os.PathLike, data: str | os.PathLike | None = None, split: str | None = None,
                  frames: int | None = None, device: str = "auto", batch_size: int | None = None,
                  resolution: int | None = None) -> Calibration:
    """Calibrate a run's best checkpoint on ``split`` (default ``test``; ``all`` for a run of imported weights) of
    its data file or of ``data``, and store it in the run directory (``calibration.pt``, atomically).

    The predictions are made on the file's stored grid, where ``opformer predict`` makes them (``resolution``:
    on a sub-grid of it with that many points per axis instead); bounds for predictions on another grid are
    flagged as not guaranteed. Trajectory runs are rolled out from each trajectory's first ``t_in`` frames for
    ``frames`` frames (default: the run's ``eval_frames``, else every frame after ``t_in``) and calibrated per
    frame; a mixture run per member (on each member's own test split, on its stored grid). Calibrating on
    ``train`` or ``val`` is refused. The per-sample score and the pointwise scale are chosen on the run's
    validation split (:func:`select`) where it has one.
    """
    run_dir = Path(run_dir)
    forecaster = load_forecaster(run_dir, device, batch_size)
    surrogate, payload, checkpoint, batch = (forecaster.surrogate, forecaster.payload, Path(forecaster.source),
                                             forecaster.batch_size)
    cfg = payload["run_config"]
    imported = is_imported(payload)
    split = split or ("all" if imported else "test")
    _check_split(split, data, cfg, imported)
    if frames is not None and frames < 1:
        raise ConfigError(f"--frames {frames}: expected at least 1 frame")
    scores, files = score_split(run_dir, surrogate, payload, data, split, frames, resolution, batch, device)
    empty = [name or str(files[0]) for name, part in scores.items() if not part.parts]
    if empty:
        raise ConfigError(f"--split {split}: holds no samples of {', '.join(empty)}; nothing to calibrate on")
    calibrated = {name: part.joined()["relative_l2"].shape[1] for name, part in scores.items()}
    selection: dict[str, dict[str, Any]] = {}
    frame_scales: dict[str, dict[str, torch.Tensor]] = {}
    if not imported and cfg["data"]["n_val"]:  # the run's own validation split, at the calibrated grid and frames
        held_out, _ = score_split(run_dir, surrogate, payload, None, "val", frames, resolution, batch, device)
        matching = {name: part for name, part in held_out.items()
                    if part.parts and part.joined()["relative_l2"].shape[1] == calibrated[name]}
        selection = {name: select(part) for name, part in matching.items()}
        frame_scales = {name: part.frame_scales() for name, part in matching.items()}
    groups = {name: part.group(selection.get(name), frame_scales.get(name)) for name, part in scores.items()}
    source_record = {"checkpoint": str(checkpoint), "data": [_file_record(f) for f in files], "split": split,
                     "resolution": resolution, "selection": selection,
                     "joint_frame_scales": "validation" if frame_scales else "calibration",
                     "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    calibration = Calibration(str(run_dir), "operator" if surrogate.spec["data"].get("t_in") is None else "trajectory",
                              _checkpoint_checksum(payload, checkpoint), source_record, groups)
    save_calibration(run_dir / CALIBRATION, calibration)
    return calibration


def save_calibration(path: str | os.PathLike, calibration: Calibration) -> Path:
    """Write a calibration (atomically) with its checksum."""
    path = Path(path)
    meta = {"kind": calibration.kind, "checkpoint_checksum": calibration.checkpoint_checksum,
            "source": calibration.source,
            "chosen": {name: {"score": g.score, "scale": g.scale} for name, g in calibration.groups.items()}}
    payload: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "meta": json.dumps(meta),
        "groups": {name: {"relative_l2": g.relative_l2, "normalised": g.normalised, "statistics": g.statistics,
                          "difficulty": g.difficulty, "grid": torch.tensor(g.grid), "channels": g.channels,
                          **{f"pointwise_{scale}": g.pointwise[scale] for scale in SCALES},
                          **({f"joint_{score}": g.joint[score] for score in SAMPLE_SCORES} if g.joint else {}),
                          **({f"frame_scale_{score}": g.frame_scale[score] for score in SAMPLE_SCORES}
                             if g.frame_scale else {})}
                   for name, g in calibration.groups.items()},
    }
    payload["checksum"] = checksum(payload)
    with atomic_replace(path) as tmp:
        try:
            torch.save(payload, tmp)
        except RuntimeError as exc:
            raise StorageError(f"{path}: could not be written ({str(exc).splitlines()[0][:120]})") from None
    return path


def load_calibration(run_dir: str | os.PathLike, checkpoint_payload: dict[str, Any] | None = None) -> Calibration:
    """A run's stored calibration, checked against its contents' checksum and against the run's best checkpoint
    (``checkpoint_payload``: that checkpoint, already loaded); one-line :class:`CheckpointError` otherwise."""
    run_dir = Path(run_dir)
    path = run_dir / CALIBRATION
    if not path.is_file():
        raise CheckpointError(f"{run_dir}: not calibrated (no {CALIBRATION}); run `opformer calibrate {run_dir}` "
                              "first")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a corrupt or foreign file
        raise CheckpointError(f"{path}: not a readable calibration ({exc.__class__.__name__}); run `opformer "
                              "calibrate` again") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an opformer calibration")
    if payload.get("checksum") != checksum(payload):
        raise CheckpointError(f"{path}: corrupt (its checksum does not match its contents); run `opformer "
                              "calibrate` again")
    meta = json.loads(payload["meta"])
    groups = {name: Group(g["relative_l2"], g["normalised"], {scale: g[f"pointwise_{scale}"] for scale in SCALES},
                          g["statistics"], g["difficulty"], tuple(int(n) for n in g["grid"]), int(g["channels"]),
                          **meta["chosen"][name], joint=_optional(g, "joint_"),
                          frame_scale=_optional(g, "frame_scale_"))
              for name, g in payload["groups"].items()}
    checkpoint = run_checkpoint(run_dir)
    current = _checkpoint_checksum(checkpoint_payload or load_checkpoint(checkpoint), checkpoint)
    if current != meta["checkpoint_checksum"]:
        raise CheckpointError(f"{path}: calibrates another checkpoint (checksum {meta['checkpoint_checksum'][:12]}), "
                              f"not {checkpoint} ({current[:12]}); run `opformer calibrate {run_dir}` again")
    return Calibration(str(run_dir), meta["kind"], meta["checkpoint_checksum"], meta["source"], groups)


def _optional(group: dict[str, Any], prefix: str) -> dict[str, torch.Tensor] | None:
    """A stored group's ``prefix + score`` entries by score, None where it has none (written before them)."""
    found = {score: group[prefix + score] for score in SAMPLE_SCORES if prefix + score in group}
    return found or None


def calibration_rows(calibration: Calibration, coverages: tuple[float, ...] = DEFAULT_COVERAGES
                     ) -> list[dict[str, Any]]:
    """A row per data set and frame: samples, and at each coverage the relative-L2 bound (with the ``roughness``
    score, the median of the calibration inputs' bounds) and the probability it holds (``k / (n + 1)``); a rollout's
    rows also the joint bound (holding for every frame at once)."""
    rows = []
    joint = calibration.kind == "trajectory"
    for name, group in calibration.groups.items():
        quantiles = {c: calibration.sample_bounds(c, group.difficulty, name).median(dim=0).values for c in coverages}
        joints = {c: calibration.sample_bounds(c, group.difficulty, name, joint=True).median(dim=0).values
                  for c in coverages} if joint else {}
        for frame in range(calibration.frames):
            rows.append({"member": name, "frame": frame + 1, "samples": group.samples,
                         "bounds": {str(c): float(quantiles[c][frame]) for c in coverages},
                         "expected_coverage": {str(c): expected_coverage(group.samples, c) for c in coverages},
                         **({"joint_bounds": {str(c): float(joints[c][frame]) for c in coverages}} if joint else {})})
    return rows


def format_calibration(calibration: Calibration, coverages: tuple[float, ...] = DEFAULT_COVERAGES) -> str:
    """A plain-text table of :func:`calibration_rows`."""
    rows = calibration_rows(calibration, coverages)
    member = any(row["member"] for row in rows)
    frame = calibration.kind == "trajectory"
    head = (f"{'member':<20}  " if member else "") + (f"{'frame':>5}  " if frame else "") + f"{'samples':>7}"
    lines = [f"{name or 'scores'}: per-sample {group.score}, pointwise scale {group.scale}"
             for name, group in calibration.groups.items()]
    lines.append(head + "".join(f"  {f'bound@{c:g}':>11}" for c in coverages)
                 + "".join(f"  {f'joint@{c:g}':>11}" for c in coverages if frame))
    for row in rows:
        line = (f"{row['member']:<20}  " if member else "") + (f"{row['frame']:>5}  " if frame else "")
        lines.append(line + f"{row['samples']:>7}" + "".join(f"  {row['bounds'][str(c)]:>11.3e}" for c in coverages)
                     + "".join(f"  {row['joint_bounds'][str(c)]:>11.3e}" for c in coverages if frame))
    too_few = [c for c in coverages if any(conformal_rank(g.samples, c) is None for g in calibration.groups.values())]
    if too_few:
        lines.append(f"note: too few calibration samples for coverage {', '.join(f'{c:g}' for c in too_few)} "
                     "(the bound is inf): need at least ceil(c / (1 - c)) samples")
    if frame:
        lines.append("joint: bounds that hold for every frame at once (`opformer predict --joint`, and --tolerance)")
    return "\n".join(lines)


def load_surrogate(run_dir: str | os.PathLike, device: str = "auto", batch_size: int | None = None) -> Forecaster:
    """``opformer.load_surrogate``: a run's :class:`~opformer.eval.forecast.Forecaster` with the run's calibration
    attached when it has one (checked: :func:`load_calibration`), so that ``forecaster.bounds(...)`` answers."""
    forecaster = load_forecaster(run_dir, device, batch_size)
    if (Path(run_dir) / CALIBRATION).is_file():
        forecaster.calibration = load_calibration(run_dir, forecaster.payload)
    return forecaster


def input_member(forecaster: Forecaster, calibration: Calibration, path: str | os.PathLike,
                 name: str | None = None) -> str | None:
    """The calibrated data set an input file belongs to: None for a run of one data file, else the mixture member
    ``name`` (``predict --member``) or the one stored in ``path`` (a one-line error for another file: a mixture's
    bounds hold per member)."""
    if len(calibration.groups) == 1:
        return None
    found = forecaster.member(path, name)
    if found is None:
        raise ConfigError(f"--coverage: {forecaster.source} is calibrated per member of its mixture "
                          f"({', '.join(calibration.groups)}); {path} is none of their files (name its member "
                          "with --member)")
    return member_name(MixtureMember(**found))


def bounds_annotation(run_dir: str | os.PathLike, coverage: float, joint: bool = False
                      ) -> Callable[[Forecaster, Inputs], Annotate]:
    """What ``opformer predict --coverage`` adds to each chunk of predictions (``opformer.eval.forecast``'s
    ``annotate``): ``bound_relative_l2`` (per sample; rollouts per sample and frame, ``joint``: holding for every
    calibrated frame at once), ``band_half_width`` (the predictions' shape: the band is the prediction plus or minus
    it) and ``flagged`` (1 where the input is unlike the calibration data: the bounds there are not guaranteed). The
    calibration is loaded and checked before anything is predicted."""
    check_coverage(coverage, "--coverage")

    def annotate(forecaster: Forecaster, inputs: Inputs) -> Annotate:
        calibration = load_calibration(run_dir, forecaster.payload)
        member = input_member(forecaster, calibration, inputs.path, inputs.member)
        frames_joint = joint and calibration.kind == "trajectory"  # an operator run's one bound is joint already
        if frames_joint:
            calibration.joint_quantiles(coverage, member)  # a calibration without joint scores: refused now

        def arrays(given: torch.Tensor, preds: torch.Tensor) -> dict[str, np.ndarray]:
            bounds = calibration.bounds(given, preds, coverage, member, joint=frames_joint)
            return {"bound_relative_l2": bounds.relative_l2.float().numpy(),
                    "band_half_width": (bounds.upper - preds).float().numpy(),
                    "flagged": bounds.flagged.to(torch.uint8).numpy()}
        return arrays
    return annotate
