"""``opformer plot``: the figures of a run (loss curves, predictions, rollouts), drawn by :mod:`opformer.eval.plots`."""

from __future__ import annotations

import copy
from dataclasses import replace
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from opformer.data.pairs import load_split, split_options
from opformer.data.store import read_info, read_mesh_samples
from opformer.errors import ConfigError
from opformer.eval.evaluate import first_test_samples, rollout_row, single_file_run
from opformer.eval.mesh_evaluation import mesh_errors, mesh_split
from opformer.eval.mesh_plots import plot_mesh_predictions
from opformer.eval.mixture import imported_member, member_rollout, member_splits
from opformer.eval.plots import (animate_rollout, plot_losses, plot_predictions_1d, plot_predictions_2d,
                                 plot_rollout_errors, plot_rollout_frames)
from opformer.kinds import MESH, TRAJECTORY
from opformer.models.inference import check_compatible, predict
from opformer.models.surrogate import Surrogate
from opformer.runs import Run
from opformer.runtime import resolve_device

#: ``bounds(inputs, predictions)``: calibrated bounds with ``lower``, ``upper`` (the predictions' shape) and
#: ``relative_l2`` (per sample; rollouts per sample and frame), as :mod:`opformer.trust` gives them.
Bounder = Callable[[torch.Tensor, torch.Tensor], Any]


def check_bands(run: Run) -> None:
    """Calibrated bands are drawn for runs trained on one data file; a one-line error for others."""
    if run.config.data.mixture or run.config.imported:
        raise ConfigError("--coverage: bands are drawn for runs trained on one data file (1D predictions, rollouts)")
    if run.kind == MESH:
        raise ConfigError("--coverage: a mesh run's bounds are per sample; `opformer predict RUN --input FILE "
                          "--coverage C` writes them beside the predictions")


def plot_run(run_dir: str | os.PathLike | Run, data_path: str | os.PathLike | None = None,
             out_dir: str | os.PathLike | None = None, samples: int = 4, device: str = "auto",
             bounds: Bounder | None = None, bound_label: str = "bound") -> list[Path]:
    """Write ``losses.png`` and ``predictions.png`` (test samples at the training resolution).

    1D: input, truth and prediction curves beside the error prediction - truth; 2D: input, truth, prediction
    (one colour scale) and error maps (with the run's input noise, if it was trained with some, as in
    evaluation). Trajectory runs: rollout figures (:func:`plot_rollouts`); a mixture run: a rollout figure per
    member (:func:`plot_mixture_rollouts`; ``data_path`` must be None). ``bounds`` (``opformer plot --coverage``):
    the band around 1D predictions, the bound of each rollout frame's error; other plots refuse it in one line.
    """
    dev = resolve_device(device)
    run = Run.open(run_dir)
    run_dir = run.path
    out = Path(out_dir) if out_dir else run_dir
    run_config = run.config
    if run_config.imported and data_path is None:
        raise ConfigError(f"{run_dir}: holds {run_config.imported.format} weights imported from "
                          f"{run_config.imported.source}; give the data to plot with --data FILE")
    if bounds is not None:
        check_bands(run)
    if run.as_member:
        out.mkdir(parents=True, exist_ok=True)
        return [plot_imported_rollout(run, data_path, out, device)]
    if run.kind == MESH:
        out.mkdir(parents=True, exist_ok=True)
        return [plot_losses(run_dir / "metrics.csv", out / "losses.png"),
                plot_mesh_run(run, data_path, out / "predictions.png", samples, dev)]
    if run_config.data.mixture and data_path is None:
        out.mkdir(parents=True, exist_ok=True)
        return [plot_losses(run_dir / "metrics.csv", out / "losses.png"), *plot_mixture_rollouts(run, out, dev)]
    run = single_file_run(run)
    run.surrogate.to(dev)
    out.mkdir(parents=True, exist_ok=True)
    # imported weights have no training history (no metrics.csv)
    written = [] if run_config.imported else [plot_losses(run_dir / "metrics.csv", out / "losses.png")]
    path = data_path or run.payload["run_config"]["data"]["path"]
    if read_info(path).kind == TRAJECTORY:
        return written + plot_rollouts(run.surrogate, run.payload, str(run.checkpoint()), path, out, samples,
                                       run_dir.name, dev, bounds, bound_label)
    return [*written, plot_test_predictions(run, data_path, out / "predictions.png", samples, dev, bounds,
                                            bound_label)]


def plot_mesh_run(run: Run, data_path: str | os.PathLike | None, path: Path, samples: int, device: torch.device
                  ) -> Path:
    """The first ``samples`` test samples of a mesh run (of its file, or of ``data_path``): truth, prediction and
    error of each target channel on the triangulation, each titled with its weighted relative L2."""
    if samples < 1:
        raise ConfigError(f"--samples {samples}: expected at least 1")
    data = data_path or run.config.data.path
    held = mesh_split(run, data, "test")
    chosen = range(held.samples.start, min(held.samples.stop, held.samples.start + samples))
    predictions = mesh_errors(run, replace(held, rows=held.rows[:len(chosen)]), device).predictions
    names = [name for name, _ in held.info.mesh["targets"]]
    return plot_mesh_predictions(read_mesh_samples(data, chosen), [p.numpy() for p in predictions], names, path,
                                 title=f"{run.path.name}: test samples of {Path(data).name}")


def plot_test_predictions(run: Run, data_path: str | os.PathLike | None, path: Path, samples: int = 4,
                          device: torch.device = torch.device("cpu"), bounds: Bounder | None = None,
                          bound_label: str = "bound") -> Path:
    """``path``: a run of operator pairs on its first test samples at the training resolution (an imported run:
    the file's first samples on its stored grid), with the input noise evaluation gives them. 1D: input, truth
    and prediction curves beside the error (``bounds``: the calibrated band); 2D: input, truth, prediction and
    error maps."""
    surrogate = run.surrogate
    if run.config.imported:  # none of the file was seen: its first samples, on its stored grid
        data = load_split(data_path, "all", resolution=None, **split_options(run.payload["run_config"]["data"]))
        data.inputs, data.targets = data.inputs[:samples], data.targets[:samples]
        check_compatible(surrogate, data.info, str(run.checkpoint()), (data.input_channels, data.target_channels))
        noise = None
    else:
        data, noise = first_test_samples(run, data_path, samples)
    if data.info.ndim > 2:
        raise ConfigError(f"plot: predictions of {data.info.ndim}D data are not supported yet")
    if bounds is not None and data.info.ndim != 1:
        raise ConfigError("--coverage: bands are drawn around 1D predictions and rollout errors; 2D maps have none")
    preds = predict(surrogate, data.inputs, len(data), device, noise=noise)
    title = f"{run.path.name}: test samples, n = {data.resolution[0]}"
    names = (", ".join(data.input_channels), ", ".join(data.target_channels))
    if data.info.ndim == 1:
        band = None if bounds is None else bounds(data.inputs, preds)
        return plot_predictions_1d(data.inputs, data.targets, preds, data.info.domain["lengths"], path, names, title,
                                   band=None if band is None else (band.lower, band.upper), band_label=bound_label)
    return plot_predictions_2d(data.inputs, data.targets, preds, path, names, title)


def plot_rollouts(surrogate: Surrogate, payload: dict, source: str, data_path: str | os.PathLike, out: Path,
                  samples: int, name: str, device: torch.device, bounds: Bounder | None = None,
                  bound_label: str = "bound") -> list[Path]:
    """Rollouts of the first test trajectories: error versus time (with ``bounds``: each frame's bound on the
    first trajectory's error), true versus predicted frames, a GIF."""
    payload = copy.deepcopy(payload)
    data_cfg = payload["run_config"]["data"]
    data_cfg["n_test"] = min(samples, data_cfg["n_test"])
    row, data, preds = rollout_row(surrogate, payload, source, data_path, data_cfg["resolution"], "test", device)
    t_in = surrogate.spec["data"]["t_in"]
    times = [float(t) for t in data.times[t_in:t_in + row["frames"]]]
    truth = data.fields[0, t_in:t_in + row["frames"]]
    title = f"{name}: rollout of {row['samples']} test trajectories from {t_in} frames, n = {row['resolution']}"
    bound = None if bounds is None else [float(b) for b in bounds(data.fields[:, :t_in], preds).relative_l2[0]]
    return [plot_rollout_errors(times, row["per_frame_relative_l2"], out / "rollout_errors.png", title, bound,
                                bound_label),
            plot_rollout_frames(truth, preds[0], times, out / "rollout_frames.png", name=data.info.target_channels[0],
                                title=f"{name}: test trajectory 0"),
            animate_rollout(truth, preds[0], times, out / "rollout.gif", name=data.info.target_channels[0])]


def plot_mixture_rollouts(run_dir: str | os.PathLike | Run, out: Path, device: torch.device) -> list[Path]:
    """``rollout_MEMBER.png`` per member of a mixture run: the first test trajectory's true, predicted and
    error frames (first channel) on the member's stored grid, rolled out as in validation: the run's
    ``rollout.eval_frames`` frames (else every frame after ``t_in``)."""
    run = Run.open(run_dir)
    run.require_mixture()
    surrogate, payload = run.surrogate, run.payload
    surrogate.to(device)
    t_in = surrogate.spec["data"]["t_in"]
    frames = payload["run_config"]["rollout"].get("eval_frames")
    written = []
    for member in member_splits(run, "test", frames=frames, samples=1):
        result = member_rollout(surrogate, member, t_in, 1, device)
        times = [float(t) for t in member.data.times[t_in:t_in + member.frames]]
        truth = member.data.fields[0, t_in:t_in + member.frames]
        pred = result.predictions[0, ..., :truth.shape[-1]]
        title = (f"{run.path.name}: {member.name}, test trajectory 0 from {t_in} frames, "
                 f"L2RE {float(result.l2re[0]):.3e}")
        written.append(plot_rollout_frames(truth, pred, times, out / f"rollout_{member.name.replace(os.sep, '_')}.png",
                                           name=member.data.info.input_channels[0], title=title, error=True))
    return written


def plot_imported_rollout(run_dir: str | os.PathLike | Run, data_path: str | os.PathLike, out: Path,
                          device: str = "auto") -> Path:
    """``rollout_MEMBER.png`` of an imported DPOT on a trajectory file: the first trajectory's true, predicted and
    error frames (first channel) on the stored grid, rolled out as :func:`opformer.eval.mixture.evaluate_file`
    does (channels padded, frames resized to the model's grid if needed)."""
    run = Run.open(run_dir)
    surrogate, _, member, step, notes = imported_member(run, data_path, "all", device=device, samples=1)
    t_in = surrogate.spec["data"]["t_in"]
    result = member_rollout(step, member, t_in, 1, resolve_device(device))
    times = [float(t) for t in member.data.times[t_in:t_in + member.frames]]
    truth = member.data.fields[0, t_in:t_in + member.frames]
    pred = result.predictions[0, ..., :truth.shape[-1]]
    title = (f"{run.path.name}: {member.name}, trajectory 0 from {t_in} frames, L2RE {float(result.l2re[0]):.3e}"
             + (" (resized to the model's grid)" if any("resized" in note for note in notes) else ""))
    return plot_rollout_frames(truth, pred, times, out / f"rollout_{member.name.replace(os.sep, '_')}.png",
                               name=member.data.info.input_channels[0], title=title, error=True)

