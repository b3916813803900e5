"""PNG plots of a run: loss curves and predicted versus true solutions (matplotlib, imported lazily)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import torch

from opformer.data.store import atomic_path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    tmp = atomic_path(path)
    try:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def plot_losses(metrics_path: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Training loss and validation relative L2 per epoch (log scale)."""
    plt = _pyplot()
    with open(metrics_path, newline="") as f:
        rows = list(csv.DictReader(f))
    epochs = [int(r["epoch"]) for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogy(epochs, [float(r["train_loss"]) for r in rows], label="training loss")
    ax.semilogy(epochs, [float(r["val_relative_l2"]) for r in rows], label="validation relative L2")
    ax.set_xlabel("epoch")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    path = _save(fig, Path(out))
    plt.close(fig)
    return path


def plot_predictions_1d(inputs: torch.Tensor, targets: torch.Tensor, preds: torch.Tensor,
                        lengths: list[float], out: str | os.PathLike, title: str = "") -> Path:
    """Input, truth and prediction of a few 1D samples, one panel each, with the per-sample error."""
    plt = _pyplot()
    count = inputs.shape[0]
    fig, axes = plt.subplots(count, 1, figsize=(7, 2.2 * count), sharex=True, squeeze=False)
    n = inputs.shape[1]
    x = torch.arange(n) * lengths[0] / n
    for i, ax in enumerate(axes[:, 0]):
        err = float((preds[i] - targets[i]).norm() / targets[i].norm())
        ax.plot(x, inputs[i, :, 0], color="0.6", lw=1, label="input")
        ax.plot(x, targets[i, :, 0], color="C0", lw=2, label="truth")
        ax.plot(x, preds[i, :, 0], color="C3", lw=1, ls="--", label="prediction")
        ax.set_title(f"sample {i}: relative L2 {err:.2e}", fontsize=9)
    axes[0, 0].legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("x")
    if title:
        fig.suptitle(title)
    path = _save(fig, Path(out))
    plt.close(fig)
    return path
