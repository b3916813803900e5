"""Evaluation of trained surrogates: relative L2 on a split, at one or many resolutions."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from opformer.data.datasets import OperatorSplit, load_split
from opformer.data.store import DatasetInfo
from opformer.errors import CheckpointError, DataError
from opformer.models.surrogate import Surrogate
from opformer.train.checkpoint import load_surrogate
from opformer.train.losses import relative_l2_per_sample


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@torch.no_grad()
def predict(surrogate: Surrogate, inputs: torch.Tensor, batch_size: int, device: torch.device,
            progress: Callable[[int], object] | None = None) -> torch.Tensor:
    """Apply the surrogate to ``inputs`` in batches; returns predictions on the CPU.

    ``progress`` is called with the number of samples of each finished batch.
    """
    surrogate.eval()
    outputs = []
    for start in range(0, inputs.shape[0], batch_size):
        outputs.append(surrogate(inputs[start:start + batch_size].to(device)).cpu())
        if progress is not None:
            progress(outputs[-1].shape[0])
    return torch.cat(outputs) if outputs else inputs.new_zeros((0,))


def split_errors(surrogate: Surrogate, split: OperatorSplit, batch_size: int, device: torch.device) -> torch.Tensor:
    """Per-sample relative L2 errors of the surrogate on a split."""
    return relative_l2_per_sample(predict(surrogate, split.inputs, batch_size, device), split.targets)


def check_compatible(surrogate: Surrogate, info: DatasetInfo, source: str) -> None:
    """Raise a one-line error if a data file does not fit the model a checkpoint was trained for."""
    data = surrogate.spec["data"]
    if (info.ndim, info.input_channels, info.target_channels) != (
            len(data["stored_shape"]), data["input_channels"], data["target_channels"]):
        raise DataError(
            f"{info.path}: {info.ndim}D data with channels {info.input_channels} -> {info.target_channels} does not "
            f"fit {source}, a model of {len(data['stored_shape'])}D data with channels {data['input_channels']} -> "
            f"{data['target_channels']}")


def run_checkpoint(run_dir: str | os.PathLike, which: str = "best") -> Path:
    """Path of a run directory's ``best`` or ``last`` checkpoint, with a clear error if absent."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"{run_dir}: no such run directory")
    path = run_dir / f"{which}.pt"
    if not path.is_file():
        raise CheckpointError(f"{run_dir}: holds no {which}.pt (did training finish an epoch?)")
    return path


def scaled_batch_size(run_config: dict[str, Any], resolution: tuple[int, ...]) -> int:
    """The run's evaluation batch size, shrunk in proportion to the grid points beyond the training grid.

    Keeps the memory of an evaluation at a finer grid near that at the training grid (a fourier-type
    attention at n = 8192 holds a ``batch x n x n`` matrix per layer).
    """
    trained = run_config["data"]["resolution"] or resolution[0]
    ratio = (resolution[0] / trained) ** len(resolution)
    return max(1, int(run_config["train"]["eval_batch_size"] / max(ratio, 1.0)))


def evaluate_run(run_dir: str | os.PathLike, data_path: str | os.PathLike, resolutions: Sequence[int | None],
                 split: str = "test", device: str = "auto", batch_size: int | None = None) -> list[dict[str, Any]]:
    """Relative L2 of a run's best checkpoint on ``split`` of a data file at each resolution.

    ``split`` uses the run's n_train/n_val/n_test (``all`` takes every sample, for a separate test file).
    Resolutions not seen in training are zero-shot.
    """
    checkpoint = run_checkpoint(run_dir)
    surrogate, payload = load_surrogate(checkpoint)
    cfg = payload["run_config"]
    dev = resolve_device(device)
    surrogate.to(dev)
    rows = []
    for resolution in resolutions:
        data = load_split(data_path, split, n_train=cfg["data"]["n_train"], n_val=cfg["data"]["n_val"],
                          n_test=cfg["data"]["n_test"], resolution=resolution)
        check_compatible(surrogate, data.info, str(checkpoint))
        errors = split_errors(surrogate, data, batch_size or scaled_batch_size(cfg, data.resolution), dev)
        rows.append({
            "resolution": data.resolution[0],
            "trained_at": cfg["data"]["resolution"] or data.info.spatial_shape[0],
            "samples": len(data),
            "relative_l2": float(errors.mean()),
            "relative_l2_std": float(errors.std()) if len(errors) > 1 else 0.0,
        })
    return rows


def format_table(rows: list[dict[str, Any]], title: str = "") -> str:
    """A plain-text table of evaluation rows."""
    lines = [title] if title else []
    lines.append(f"{'resolution':>10}  {'samples':>7}  {'rel. L2':>10}  {'std':>9}  note")
    for row in rows:
        note = "trained here" if row["resolution"] == row["trained_at"] else "zero-shot"
        lines.append(f"{row['resolution']:>10}  {row['samples']:>7}  {row['relative_l2']:>10.3e}  "
                     f"{row['relative_l2_std']:>9.2e}  {note}")
    return "\n".join(lines)
