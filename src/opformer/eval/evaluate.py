"""Evaluation of trained surrogates: relative L2 on a split, at one or many resolutions."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import torch

from opformer.data.pairs import OperatorSplit, load_split, split_options
from opformer.data.store import read_info
from opformer.data.trajectories import TrajectorySplit, load_trajectories
from opformer.errors import ConfigError
from opformer.eval.metrics import (
    NOISE_SEED_OFFSETS, WELL_WINDOWS, noise_sample, persistence, rollout_errors, split_errors, well_errors,
    window_means)
from opformer.kinds import TRAJECTORY
from opformer.models.inference import Step, check_compatible
from opformer.models.surrogate import Surrogate
from opformer.runs import Run
from opformer.runtime import resolve_device


def trained_resolution(surrogate: Surrogate, run_config: dict[str, Any]) -> int | None:
    """Grid points per axis the run trained at: its ``data.resolution``, or else its data file's stored grid;
    None for imported weights (trained elsewhere, at a grid opformer does not know)."""
    if run_config.get("imported"):
        return None
    return run_config["data"]["resolution"] or surrogate.spec["data"]["stored_shape"][0]


def scaled_batch_size(eval_batch_size: int, trained: int | None, resolution: tuple[int, ...]) -> int:
    """The run's evaluation batch size, shrunk in proportion to the grid points beyond the training grid
    (``trained``; None: not shrunk).

    Keeps the memory of an evaluation at a finer grid near that at the training grid (a fourier-type
    attention at n = 8192 holds a ``batch x n x n`` matrix per layer).
    """
    if trained is None:
        return eval_batch_size
    ratio = (resolution[0] / trained) ** len(resolution)
    return max(1, int(eval_batch_size / max(ratio, 1.0)))


def single_file_run(source: str | os.PathLike | Run) -> Run:
    """A run opened for evaluation on one data file.

    Runs trained on a mixture of data sets are refused in one line (their members have other channel counts and
    grids than the padded training batches; :mod:`opformer.eval.mixture` evaluates and plots them per member)."""
    run = Run.open(source)
    mixture = run.run_config["data"].get("mixture")
    if mixture:
        raise ConfigError(f"{run.path}: trained on a mixture of {len(mixture)} data sets; evaluate and plot take it "
                          "without --data (a row per member)")
    return run


def first_test_samples(run: Run, data_path: str | os.PathLike | None,
                       samples: int) -> tuple[OperatorSplit, torch.Tensor | None]:
    """A run's first ``samples`` test pairs at its training resolution, checked against the run, and their input
    noise: their rows of the whole test split's seeded realisation, as evaluation draws it
    (:func:`opformer.eval.metrics.split_errors`), so a drawn sample is the one evaluation scores."""
    cfg = run.payload["run_config"]
    options = {**split_options(cfg["data"]), "n_test": min(samples, cfg["data"]["n_test"])}
    data = load_split(data_path or cfg["data"]["path"], "test", resolution=cfg["data"]["resolution"], **options)
    check_compatible(run.surrogate, data.info, str(run.checkpoint()), (data.input_channels, data.target_channels))
    noise = noise_sample((cfg["data"]["n_test"], *data.inputs.shape[1:]), cfg["data"].get("input_noise", 0.0),
                         cfg["seed"] + NOISE_SEED_OFFSETS["test"])
    return data, None if noise is None else noise[:len(data)]


def evaluate_run(run_dir: str | os.PathLike | Run, data_path: str | os.PathLike, resolutions: Sequence[int | None],
                 split: str = "test", device: str = "auto", batch_size: int | None = None,
                 frames: int | None = None,
                 well_windows: Sequence[tuple[int, int]] | None = None,
                 input_noise: float | None = None, per_sample: bool = False) -> list[dict[str, Any]]:
    """Relative L2 of a run's best checkpoint on ``split`` of a data file at each resolution.

    ``split`` uses the run's n_train/n_val/n_test (``all`` takes every sample, for a separate test file).
    Resolutions not seen in training are zero-shot. A run trained with input noise is evaluated with a fixed
    noise realisation of the same level (seeded by the run's seed and the split); ``input_noise`` evaluates at
    another level with the same seed (Cao 2021's Figure 12: training and evaluation noise apart). Trajectory data
    are rolled out (:func:`rollout_row`; ``frames``: how many frames, default the run's ``eval_frames`` or all);
    ``well_windows`` adds The Well's metrics over those windows of the rollout (:func:`well_metrics`).

    Parameters
    ----------
    run_dir
        A run directory of one data set (a mixture run is refused: :mod:`opformer.eval.mixture`).
    data_path
        An opformer HDF5 file of the run's data kind and channels.
    resolutions
        The grid sizes to evaluate at; ``None`` is the file's own.
    split
        ``train``, ``val``, ``test`` or ``all``.
    device
        ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    batch_size
        Samples per batch; default the run's ``eval_batch_size``, scaled to the resolution.
    frames
        Trajectories only: the length of the rollout.
    well_windows
        Trajectories only: ``(a, b)`` windows of predicted frames (0 the first) for The Well's metrics.
    input_noise
        Operator pairs only: the eps of the noise added to the normalized inputs (default the run's
        ``data.input_noise``).
    per_sample
        Operator pairs only: add each sample's error, in the split's order (``per_sample_relative_l2``).

    Returns
    -------
    list[dict[str, Any]]
        A row per resolution: ``resolution``, ``trained_at``, ``samples``, ``relative_l2`` and
        ``relative_l2_std`` (and ``per_sample_relative_l2`` with ``per_sample``); for trajectories also
        ``final_relative_l2``, ``frames``, ``per_frame_relative_l2``, ``l2re`` and ``l2re_std``
        (:func:`rollout_row`), persistence's on the same frames (:func:`persistence_columns`), and ``well`` with
        ``well_windows``.

    Raises
    ------
    ConfigError
        A mixture run, ``well_windows`` with operator pairs, ``input_noise`` with trajectories or below 0, or
        windows beyond the rollout.
    DataError
        The data's dimensions or channels do not fit the run.
    """
    if input_noise is not None and not (input_noise >= 0 and math.isfinite(input_noise)):
        raise ConfigError(f"--input-noise {input_noise}: expected a finite eps >= 0")
    run = single_file_run(run_dir)
    checkpoint, surrogate, payload = str(run.checkpoint()), run.surrogate, run.payload
    cfg = payload["run_config"]
    dev = resolve_device(device)
    surrogate.to(dev)
    if read_info(data_path).kind == TRAJECTORY:
        if input_noise is not None:
            raise ConfigError(f"--input-noise: {data_path} holds trajectories; input noise is for operator pairs")
        rows = []
        for resolution in resolutions:
            row, data, preds = rollout_row(surrogate, payload, checkpoint, data_path, resolution, split, dev,
                                           batch_size, frames=frames, windows=well_windows)
            row.update(persistence_columns(data, surrogate.spec["data"]["t_in"], row["frames"],
                                           batch_size or cfg["train"]["eval_batch_size"]))
            if well_windows is not None:
                row["well"] = well_metrics(preds, data, surrogate.spec["data"]["t_in"], well_windows)
            rows.append(row)
        return rows
    if well_windows is not None:
        raise ConfigError(f"--metrics well: {data_path} holds operator pairs; The Well's metrics are over rollout "
                          "windows of trajectories")
    rows = []
    noise_level = cfg["data"].get("input_noise", 0.0) if input_noise is None else input_noise
    for resolution in resolutions:
        data = load_split(data_path, split, resolution=resolution, **split_options(cfg["data"]))
        check_compatible(surrogate, data.info, checkpoint, (data.input_channels, data.target_channels))
        trained = trained_resolution(surrogate, cfg)
        batch = batch_size or scaled_batch_size(cfg["train"]["eval_batch_size"], trained, data.resolution)
        errors = split_errors(surrogate, data, batch, dev,
                              noise_level=noise_level, seed=cfg["seed"] + NOISE_SEED_OFFSETS[split])
        rows.append({
            "resolution": data.resolution[0],
            "trained_at": trained,
            "samples": len(data),
            "relative_l2": float(errors.mean()),
            "relative_l2_std": float(errors.std()) if len(errors) > 1 else 0.0,
            **({"per_sample_relative_l2": errors.tolist()} if per_sample else {}),
        })
    return rows


def rollout_row(surrogate: Surrogate, payload: dict[str, Any], source: str, data_path: str | os.PathLike,
                resolution: int | None, split: str, device: torch.device, batch_size: int | None = None,
                step: Step | None = None, frames: int | None = None,
                windows: Sequence[tuple[int, int]] | None = None
                ) -> tuple[dict[str, Any], TrajectorySplit, torch.Tensor]:
    """Roll out every trajectory of ``split`` from its first ``t_in`` frames at one resolution.

    Returns the metrics row (trajectory-averaged and final-frame relative L2, the mean error of every
    predicted frame, and DPOT's space-time L2RE ``l2re``), the split and the predictions
    ``(sample, frame, *spatial, channels)``. ``step`` replaces the surrogate's predictions (a baseline on the
    same frames and metric); ``frames`` (default: the run's ``eval_frames``, else every frame after ``t_in``)
    is the length of the rollout. ``windows`` (The Well's, :func:`well_metrics`) beyond it are a one-line
    ConfigError before anything is rolled out.
    """
    cfg = payload["run_config"]
    rollout = cfg.get("rollout", {})
    t_in = surrogate.spec["data"]["t_in"]
    data = load_trajectories(data_path, split, n_train=cfg["data"]["n_train"], n_val=cfg["data"]["n_val"],
                             n_test=cfg["data"]["n_test"], resolution=resolution,
                             time_stride=rollout.get("time_stride", 1))
    check_compatible(surrogate, data.info, source)
    frames = frames or rollout.get("eval_frames") or data.n_times - t_in
    trained = trained_resolution(surrogate, cfg)
    data.check_window(t_in, frames, "rollout")
    beyond = [f"{a}:{b}" for a, b in windows or () if b > frames]
    if beyond:
        raise ConfigError(f"--windows {beyond[0]}: the rollout has {frames} predicted frames; roll out at least "
                          f"{max(b for _, b in windows)} (--frames)")
    preds, errors, l2re = rollout_errors(step or surrogate.eval(), data.fields, t_in, frames,
                                         batch_size or scaled_batch_size(cfg["train"]["eval_batch_size"], trained,
                                                                         data.resolution), device)
    per_frame = errors.mean(dim=0)
    row = {
        "resolution": data.resolution[0],
        "trained_at": trained,
        "samples": len(data),
        "relative_l2": float(errors.mean()),
        "relative_l2_std": float(errors.mean(dim=1).std()) if len(data) > 1 else 0.0,
        "final_relative_l2": float(per_frame[-1]),
        "frames": frames,
        "per_frame_relative_l2": [float(e) for e in per_frame],
        "l2re": float(l2re.mean()),
        "l2re_std": spread(l2re),
    }
    return row, data, preds


def persistence_columns(data: TrajectorySplit, t_in: int, frames: int, batch_size: int) -> dict[str, float]:
    """Persistence (the last given frame repeated) on the trajectories and frames of a rollout row:
    ``persistence_relative_l2`` (averaged over the frames), ``persistence_final_relative_l2``, ``persistence_l2re``."""
    _, errors, l2re = rollout_errors(persistence, data.fields, t_in, frames, batch_size, torch.device("cpu"),
                                     keep_predictions=False)
    return {"persistence_relative_l2": float(errors.mean()),
            "persistence_final_relative_l2": float(errors.mean(dim=0)[-1]),
            "persistence_l2re": float(l2re.mean())}


def well_metrics(preds: torch.Tensor, data: TrajectorySplit, t_in: int,
                 windows: Sequence[tuple[int, int]] = WELL_WINDOWS) -> dict[str, Any]:
    """The Well's VRMSE and NRMSE of a rollout's predictions ``(sample, frame, *spatial, channels)`` (the frames
    after the first ``t_in`` of ``data``), per channel over each window of predicted frames (``(a, b)``: frames
    a..b-1, 0 the first predicted) and over all, with their mean over the channels that vary in time (a converted
    Well file's ``pde["constant_fields"]`` are reported but not averaged, as The Well's ``full`` averages its
    ``field_names``). Windows beyond the rollout are refused by :func:`rollout_row`, before it rolls out."""
    frames = preds.shape[1]
    channels = data.info.input_channels
    constant = set(data.info.pde.get("constant_fields", []))
    varying = [i for i, name in enumerate(channels) if name not in constant]
    result: dict[str, Any] = {"windows": [f"{a}:{b}" for a, b in windows], "constant_fields": sorted(constant)}
    for name, values in well_errors(preds, data.fields[:, t_in:t_in + frames], data.info.ndim).items():
        result[name] = {window: {"mean": float(means[varying].mean()),
                                 **{channel: float(v) for channel, v in zip(channels, means)}}
                        for window, means in window_means(values, tuple(windows)).items()}
    return result


def format_well_table(rows: list[dict[str, Any]]) -> str:
    """The Well's metrics of evaluation rows: a line per resolution and channel (then the mean), a column per
    metric and window."""
    lines = []
    for row in rows:
        well = row["well"]
        windows = [*well["windows"], "all"]
        columns = [(metric, window) for metric in ("vrmse", "nrmse") for window in windows]
        lines.append(f"The Well's metrics at resolution {row['resolution']} (frames a:b of the rollout, 0 the first "
                     "predicted)")
        lines.append(f"{'channel':>16}" + "".join(f"  {f'{m.upper()} {w}':>13}" for m, w in columns))
        for channel in [*[c for c in well["vrmse"]["all"] if c != "mean"], "mean"]:
            note = "  (constant in time: not in the mean)" if channel in well["constant_fields"] else ""
            lines.append(f"{channel:>16}" + "".join(f"  {well[m][w][channel]:>13.4e}" for m, w in columns) + note)
    return "\n".join(lines)


def spread(values: torch.Tensor) -> float:
    """The standard deviation of per-sample values (0 for one sample)."""
    return float(values.std()) if len(values) > 1 else 0.0


def run_rollout(run_dir: str | os.PathLike | Run, data_path: str | os.PathLike, split: str = "test",
                step: Step | None = None, frames: int | None = None, batch_size: int | None = None
                ) -> tuple[dict[str, Any], TrajectorySplit, torch.Tensor, Run]:
    """A run's best checkpoint rolled out over ``split`` on the CPU at the stored grid (or ``step``, a baseline,
    on the same frames): :func:`rollout_row`'s metrics row, split and predictions, and the opened run."""
    run = single_file_run(run_dir)
    row, data, preds = rollout_row(run.surrogate, run.payload, str(run.checkpoint()), data_path, None, split,
                                   torch.device("cpu"), batch_size, step=step, frames=frames)
    return row, data, preds, run


def persistence_row(run_dir: str | os.PathLike | Run, data_path: str | os.PathLike, split: str = "test",
                    frames: int | None = None) -> dict[str, Any]:
    """The rollout metrics of repeating the last given frame, on the trajectories and frames a run is
    evaluated on (:func:`evaluate_run`)."""
    return run_rollout(run_dir, data_path, split, step=persistence, frames=frames)[0]


def format_table(rows: list[dict[str, Any]], title: str = "") -> str:
    """A plain-text table of evaluation rows (rollouts: persistence's errors beside the model's, where the rows
    have them)."""
    lines = [title] if title else []
    rollout = bool(rows) and "final_relative_l2" in rows[0]
    baseline = rollout and "persistence_relative_l2" in rows[0]
    extra = f"  {'final frame':>11}  {'frames':>6}  {'L2RE':>10}" if rollout else ""
    extra += f"  {'persistence':>11}  {'pers. final':>11}  {'pers. L2RE':>10}" if baseline else ""
    lines.append(f"{'resolution':>10}  {'samples':>7}  {'rel. L2':>10}  {'std':>9}{extra}  note")
    for row in rows:
        note = ("imported weights" if row["trained_at"] is None else
                "trained here" if row["resolution"] == row["trained_at"] else "zero-shot")
        extra = (f"  {row['final_relative_l2']:>11.3e}  {row['frames']:>6}  {row['l2re']:>10.3e}" if rollout
                 else "")
        extra += (f"  {row['persistence_relative_l2']:>11.3e}  {row['persistence_final_relative_l2']:>11.3e}  "
                  f"{row['persistence_l2re']:>10.3e}" if baseline else "")
        lines.append(f"{row['resolution']:>10}  {row['samples']:>7}  {row['relative_l2']:>10.3e}  "
                     f"{row['relative_l2_std']:>9.2e}{extra}  {note}")
    return "\n".join(lines)
