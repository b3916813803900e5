"""Calibrating a run (``opformer calibrate``): split conformal scores on data that training and model selection
never saw, per rolled-out frame and mixture member; the sharper score and scale chosen on validation
(:func:`select`); stored in the run directory (:mod:`opformer.trust.storage`)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from opformer.data.pairs import load_split, split_options
from opformer.data.store import read_info
from opformer.data.trajectories import load_trajectories
from opformer.errors import ConfigError
from opformer.eval.metrics import rollout_errors
from opformer.eval.mixture import imported_member, member_splits
from opformer.kinds import TRAJECTORY
from opformer.models.inference import Step, check_compatible, predict
from opformer.runs import Run
from opformer.runtime import resolve_device
from opformer.trust.bounds import Calibration, Group
from opformer.trust.conformal import conformal_quantile, conformal_rank
from opformer.trust.estimates import backtest_errors, history_of, physics_settings, residual_estimates
from opformer.trust.physics import normalized_scores
from opformer.trust.scores import (DEFAULT_SCALE, DEFAULT_SCORE, PLAIN_SCORES, SCALES, local_scale, point_level,
                                   pointwise_scores, relative_l2)
from opformer.trust.shift import input_statistics, roughness_of
from opformer.trust.storage import ESTIMATES, save_calibration

#: The level at which the scores are compared on the validation split (:func:`select`), and the ratio of median
#: bounds by which the normalized per-sample score must beat the plain one to be chosen (a few validation samples
#: rank two close scores by chance).
SELECTION_COVERAGE, SELECTION_MARGIN = 0.9, 0.9
#: The physics scores, chosen for robustness to shift whenever their bounds are at most ``ROBUSTNESS_MARGIN`` times
#: the sharpest score's (:func:`choose_score`): their difficulty is an estimate of this prediction's own error, so
#: they widen where the physics moves, where the plain score's one number per frame does not.
ROBUST_SCORES, ROBUSTNESS_MARGIN = ("residual",), 1.1


def _file_record(path: str | os.PathLike) -> dict[str, Any]:
    """What identifies a data file cheaply: its resolved path, size and modification time."""
    stat = Path(path).stat()
    return {"path": str(Path(path).resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


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
    (:func:`select`) or sorted into a :class:`Group` (:meth:`group`). ``physics``: the data file's PDE settings
    (:func:`opformer.trust.estimates.physics_settings`) where the ``residual`` score applies; ``backtest``: the
    frames given before each input's context where the ``backtest`` score applies (0: not)."""

    def __init__(self, physics: dict[str, Any] | None = None, backtest: int = 0) -> None:
        self.parts: dict[str, list[torch.Tensor]] = {}
        self.grid: tuple[int, ...] = ()
        self.channels = 0
        self.physics, self.backtest = physics, backtest

    def add(self, inputs: torch.Tensor, preds: torch.Tensor, truth: torch.Tensor, ndim: int,
            backtest: torch.Tensor | None = None) -> None:
        """Score a batch: inputs ``(b, *spatial, c_in)`` or the ``t_in`` context frames ``(b, t, *spatial, c)``,
        predictions and truth ``(b, frames, *spatial, c)`` (``ndim`` spatial axes); ``backtest`` ``(b,)``: the
        surrogate's error on the frames given before the context (where :attr:`backtest`)."""
        b, frames = preds.shape[:2]
        self.grid, self.channels = tuple(preds.shape[2:-1]), preds.shape[-1]
        flat_pred, flat_truth = preds.flatten(0, 1), truth.flatten(0, 1)
        statistics = input_statistics(inputs, ndim)
        parts = {"relative_l2": relative_l2(flat_pred, flat_truth).reshape(b, frames), "statistics": statistics,
                 "difficulty": roughness_of(statistics, inputs.shape[-1])}
        if self.physics is not None:
            parts["residual"] = residual_estimates(self.physics, inputs, preds)
            history = history_of(self.physics, inputs)
            if history is not None:
                parts["history"] = history
        if self.backtest:
            assert backtest is not None
            parts["backtest"] = backtest.double()
        for scale in SCALES:
            local = local_scale(flat_pred, scale)
            parts[scale] = pointwise_scores(flat_pred, flat_truth, scale, local).reshape(b, frames, -1)
            parts[f"width_{scale}"] = local.flatten(1).mean(dim=1).reshape(b, frames)
        for key, value in parts.items():
            self.parts.setdefault(key, []).append(value)

    def joined(self) -> dict[str, torch.Tensor]:
        """Every score of every sample, in sample order."""
        return {key: torch.cat(value) for key, value in self.parts.items()}

    def difficulties(self) -> dict[str, torch.Tensor]:
        """What each normalized per-sample score divides the error by, ``(n, 1)`` or ``(n, frames)``."""
        cat = self.joined()
        found = {"roughness": cat["difficulty"][:, None]}
        if "residual" in cat:
            found["residual"] = cat["residual"]
        if "backtest" in cat:
            found["backtest"] = cat["backtest"][:, None]
        return found

    def sample_scores(self) -> dict[str, torch.Tensor]:
        """Each per-sample score offered (:data:`SAMPLE_SCORES`), ``(n, frames)`` in sample order."""
        errors = self.joined()["relative_l2"]
        return {"relative_l2": errors, **{name: normalized_scores(errors, estimate.expand_as(errors))
                                          for name, estimate in self.difficulties().items()}}

    def frame_scales(self) -> dict[str, torch.Tensor]:
        """Each per-sample score's median over the samples at each frame, ``(frames,)``: the scale by which the
        joint score divides that frame (:meth:`group`)."""
        return {name: values.median(dim=0).values.clamp_min(torch.finfo(values.dtype).tiny)
                for name, values in self.sample_scores().items()}

    def group(self, selection: dict[str, Any] | None = None, frame_scale: dict[str, torch.Tensor] | None = None
              ) -> Group:
        """The gathered scores sorted per frame (the inputs' statistics and estimates in sample order), using the
        score and scale of ``selection`` (:func:`select`; default :data:`DEFAULT_SCORE`, :data:`DEFAULT_SCALE`), and
        the joint scores over ``frame_scale`` (:meth:`frame_scales` of held-out samples; default these samples'
        own)."""
        cat, per_sample = self.joined(), self.sample_scores()
        ordered = {key: cat[key].sort(dim=0).values for key in ("relative_l2", *SCALES)}
        own = self.frame_scales()
        frame_scale = {name: (frame_scale or {}).get(name, own[name]) for name in per_sample}
        joint = {name: (values / frame_scale[name]).max(dim=1).values.sort().values
                 for name, values in per_sample.items()}
        chosen = selection or {}
        return Group(ordered["relative_l2"], per_sample["roughness"].sort(dim=0).values,
                     {scale: ordered[scale] for scale in SCALES}, cat["statistics"], cat["difficulty"], self.grid,
                     self.channels, chosen.get("score", DEFAULT_SCORE), chosen.get("scale", DEFAULT_SCALE), joint,
                     frame_scale,
                     normalized_by={name: per_sample[name].sort(dim=0).values for name in per_sample
                                    if name not in PLAIN_SCORES},
                     estimates={key: cat[key] for key in ESTIMATES if key in cat},
                     physics=self.physics, backtest=self.backtest)


def select(scores: Scores) -> dict[str, Any]:
    """The per-sample score and pointwise scale measured on held-out samples (the run's validation split, never the
    calibration samples, so the calibration's guarantee is untouched, whichever is chosen), each at
    :data:`SELECTION_COVERAGE` within those samples: the per-sample score by :func:`choose_score` from each score's
    median ratio of bound to true error, the scale with the narrower mean band; the defaults where too few samples
    are held out."""
    cat, c = scores.joined(), SELECTION_COVERAGE
    errors = cat["relative_l2"]
    record: dict[str, Any] = {"samples": len(errors), "score": DEFAULT_SCORE, "scale": DEFAULT_SCALE}
    if conformal_rank(len(errors), c) is None:
        return record
    difficulties = scores.difficulties()  # the scores as the calibration stores them, their bounds over the errors
    ratios = {name: conformal_quantile(values, c) * difficulties.get(name, 1.0) / errors
              for name, values in scores.sample_scores().items()}
    level = point_level(c)
    widths = {scale: conformal_quantile(cat[scale][:, :, level], c) * cat[f"width_{scale}"] for scale in SCALES}
    record["median_bound_over_error"] = {k: float(v.median()) for k, v in ratios.items()}
    record["mean_half_width"] = {k: float(v.mean()) for k, v in widths.items()}
    record["score"] = choose_score(record["median_bound_over_error"])
    record["scale"] = min(record["mean_half_width"], key=record["mean_half_width"].get)
    return record


def choose_score(sharpness: dict[str, float]) -> str:
    """The per-sample score calibration uses, from each offered score's sharpness on held-out samples (the median
    ratio of bound to true error; ``relative_l2`` always among them): a physics score (:data:`ROBUST_SCORES`, the
    first offered) whenever it is at most :data:`ROBUSTNESS_MARGIN` times the sharpest, for robustness under
    shift; else the sharpest normalized score where it beats ``relative_l2`` by the factor
    :data:`SELECTION_MARGIN`; else ``relative_l2``."""
    sharpest = min(sharpness.values())
    robust = next((name for name in ROBUST_SCORES if name in sharpness
                   and sharpness[name] <= ROBUSTNESS_MARGIN * sharpest), None)
    if robust is not None:
        return robust
    best = min((name for name in sharpness if name != "relative_l2"), key=sharpness.get)
    return best if sharpness[best] < SELECTION_MARGIN * sharpness["relative_l2"] else "relative_l2"


def _rollout_scores(step: Step, fields: torch.Tensor, own: int, t_in: int, frames: int, mask: torch.Tensor | None,
                    batch: int, device: torch.device, physics: dict[str, Any] | None = None, start: int = 0,
                    backtest: int = 0) -> Scores:
    """Roll out every trajectory of ``fields`` ``(sample, time, *spatial, C)`` (channels beyond ``own`` padded) from
    its ``t_in`` frames after the first ``start + backtest`` and score the ``frames`` frames after them on the real
    channels; ``backtest``: the surrogate's error on the last ``backtest`` of those given frames from the ``t_in``
    before them, per trajectory (:func:`opformer.trust.estimates.backtest_errors`)."""
    scores, ndim = Scores(physics, backtest), fields.dim() - 3

    def forecast(given: torch.Tensor, n: int) -> torch.Tensor:  # the n frames after the first t_in of given
        return rollout_errors(step, given, t_in, n, batch, device, mask=mask).predictions[..., :own]

    for first in range(0, len(fields), batch):
        chunk = fields[first:first + batch, start:]
        errors = backtest_errors(forecast(chunk, backtest), chunk[:, t_in:t_in + backtest, ..., :own]) \
            if backtest else None
        preds = forecast(chunk[:, backtest:], frames)
        truth = chunk[:, backtest + t_in:backtest + t_in + frames, ..., :own]
        scores.add(chunk[:, backtest:backtest + t_in, ..., :own], preds, truth, ndim, errors)
    return scores


def score_split(run: Run, data: str | os.PathLike | None, split: str, frames: int | None, resolution: int | None,
                batch: int, device: str, start: int = 0, backtest: int = 0
                ) -> tuple[dict[str, Scores], list[str | os.PathLike]]:
    """The scores of every data set of a run (its file, or each mixture member) on ``split``, and the files.
    Trajectories of a run of one file are given the frames from ``start`` (stored frames, a multiple of the time
    stride): ``backtest`` frames before the ``t_in`` the forecast starts from (a mixture's members and imported
    weights: the first ``t_in``)."""
    run_dir, surrogate, cfg, dev = run.path, run.surrogate, run.run_config, resolve_device(device)
    t_in = surrogate.spec["data"].get("t_in")
    if run.is_mixture:
        if data is not None or resolution is not None:
            raise ConfigError(f"--{'data' if data is not None else 'resolution'}: {run_dir} was trained on a mixture; "
                              "it is calibrated on each member's test split on its stored grid")
        members = member_splits(run, split, frames=frames or cfg["rollout"].get("eval_frames"))
        return ({m.name: _rollout_scores(surrogate, m.fields, int(m.mask.sum()), t_in, m.frames, m.mask, batch, dev,
                                         physics_settings(m.data.info, m.time_stride))
                 for m in members}, [m.data.info.path for m in members])
    if run.as_member:
        if data is None or resolution is not None:
            raise ConfigError(f"{run_dir}: holds imported weights; give the data to calibrate them on with --data FILE "
                              "(on its stored grid: no --resolution)")
        _, _, member, step, _ = imported_member(run, data, split, frames, device=device)
        return {"": _rollout_scores(step, member.fields, int(member.mask.sum()), t_in, member.frames, member.mask,
                                    batch, dev)}, [data]
    path = data or cfg["data"]["path"]
    if path is None:
        raise ConfigError(f"{run_dir}: give the data to calibrate on with --data FILE")
    info, sizes = read_info(path), {key: cfg["data"][key] for key in ("n_train", "n_val", "n_test")}
    if info.kind == TRAJECTORY:
        rollout = cfg.get("rollout", {})
        stride = rollout.get("time_stride", 1)
        if start % stride:
            raise ConfigError(f"--start {start}: expected a multiple of the run's time stride {stride}")
        traj = load_trajectories(path, split, **sizes, resolution=resolution, time_stride=stride)
        check_compatible(surrogate, traj.info, str(run_dir))
        given = start // stride + backtest  # frames before the context
        frames = frames or rollout.get("eval_frames") or traj.n_times - t_in - given
        if given and given + t_in + frames > traj.n_times:
            raise ConfigError(f"--start {start} --backtest {backtest}: {given} frames before the {t_in} of the context "
                              f"and {frames} to forecast are {given + t_in + frames}; {path} has {traj.n_times} per "
                              "trajectory (after the time stride)")
        traj.check_window(t_in, frames, "rollout")
        scores = _rollout_scores(surrogate, traj.fields, traj.fields.shape[-1], t_in, frames, None, batch, dev,
                                 physics_settings(info, stride), start // stride, backtest)
        return {"": scores}, [path]
    if frames is not None:
        raise ConfigError("--frames: only for runs on trajectory data (an operator run predicts one output)")
    pairs = load_split(path, split, resolution=resolution, **split_options(cfg["data"]))
    check_compatible(surrogate, pairs.info, str(run_dir), (pairs.input_channels, pairs.target_channels))
    scores = Scores(physics_settings(pairs.info))
    for first in range(0, len(pairs), batch):
        x, y = pairs.inputs[first:first + batch], pairs.targets[first:first + batch]
        scores.add(x, predict(surrogate, x, batch, dev).unsqueeze(1), y.unsqueeze(1), info.ndim)
    return {"": scores}, [path]


def calibrate_run(run_dir: str | os.PathLike, data: str | os.PathLike | None = None, split: str | None = None,
                  frames: int | None = None, device: str = "auto", batch_size: int | None = None,
                  resolution: int | None = None, start: int = 0, backtest: int = 0) -> Calibration:
    """Calibrate a run's best checkpoint on ``split`` (default ``test``; ``all`` for a run of imported weights) of
    its data file or of ``data``, and store it in the run directory (``calibration.pt``, atomically).

    The predictions are made on the file's stored grid, where ``opformer predict`` makes them (``resolution``:
    on a sub-grid of it with that many points per axis instead); bounds for predictions on another grid are
    flagged as not guaranteed. Trajectory runs are rolled out from each trajectory's first ``t_in`` frames for
    ``frames`` frames (default: the run's ``eval_frames``, else every frame after ``t_in``) and calibrated per
    frame; a mixture run per member (on each member's own test split, on its stored grid). Calibrating on
    ``train`` or ``val`` is refused. The per-sample score and the pointwise scale are chosen on the run's
    validation split (:func:`select`) where it has one.

    ``start`` (stored frames; the default of ``opformer predict --start`` is the calibration's): the first given frame
    of each trajectory; ``backtest``: how many of the given frames before the ``t_in`` of the forecast the surrogate
    forecasts too, its error there being the ``backtest`` score's difficulty (``predict`` then gives each input the
    same number of frames before its context). The ``residual`` score is offered where the data file's PDE has a
    physics estimate (:func:`opformer.trust.estimates.physics_settings`).
    """
    run = Run.open(run_dir)
    surrogate, cfg, checkpoint = run.surrogate, run.run_config, run.checkpoint()
    batch = run.eval_batch_size(batch_size)
    imported = run.is_imported
    split = split or ("all" if imported else "test")
    _check_split(split, data, cfg, imported)
    if frames is not None and frames < 1:
        raise ConfigError(f"--frames {frames}: expected at least 1 frame")
    if start < 0 or backtest < 0:
        raise ConfigError(f"--{'start' if start < 0 else 'backtest'} {min(start, backtest)}: expected at least 0")
    if (start or backtest) and (run.data_kind != TRAJECTORY or run.is_mixture or imported):
        raise ConfigError(f"--{'start' if start else 'backtest'}: only for a run on one file of trajectories")
    scores, files = score_split(run, data, split, frames, resolution, batch, device, start, backtest)
    empty = [name or str(files[0]) for name, part in scores.items() if not part.parts]
    if empty:
        raise ConfigError(f"--split {split}: holds no samples of {', '.join(empty)}; nothing to calibrate on")
    calibrated = {name: part.joined()["relative_l2"].shape[1] for name, part in scores.items()}
    selection: dict[str, dict[str, Any]] = {}
    frame_scales: dict[str, dict[str, torch.Tensor]] = {}
    if not imported and cfg["data"]["n_val"]:  # the run's own validation split, at the calibrated grid and frames
        held_out, _ = score_split(run, None, "val", frames, resolution, batch, device, start, backtest)
        matching = {name: part for name, part in held_out.items()
                    if part.parts and part.joined()["relative_l2"].shape[1] == calibrated[name]}
        selection = {name: select(part) for name, part in matching.items()}
        frame_scales = {name: part.frame_scales() for name, part in matching.items()}
    groups = {name: part.group(selection.get(name), frame_scales.get(name)) for name, part in scores.items()}
    source_record = {"checkpoint": str(checkpoint), "data": [_file_record(f) for f in files], "split": split,
                     "resolution": resolution, "start": start, "backtest": backtest, "selection": selection,
                     "joint_frame_scales": "validation" if frame_scales else "calibration",
                     "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    calibration = Calibration(str(run.path), run.data_kind, run.checkpoint_checksum, source_record, groups)
    save_calibration(run.calibration_path, calibration)
    return calibration
