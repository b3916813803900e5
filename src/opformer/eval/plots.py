"""PNG plots of a run: loss curves and predicted versus true solutions (matplotlib, imported lazily)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import torch

from opformer.io import atomic_replace


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out: str | os.PathLike, suptitle: str = "") -> Path:
    """Write ``fig`` (titled ``suptitle`` if given) to the PNG ``out`` through a temporary name, and close it."""
    if suptitle:
        fig.suptitle(suptitle)
    path = Path(out)
    try:
        with atomic_replace(path) as tmp:
            fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    finally:
        _pyplot().close(fig)
    return path


def plot_losses(metrics_path: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Training loss and validation relative L2 per epoch (log scale)."""
    plt = _pyplot()
    with open(metrics_path, newline="") as f:
        rows = list(csv.DictReader(f))
    epochs = [int(r["epoch"]) for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    ax.semilogy(epochs, [float(r["train_loss"]) for r in rows], label="training loss")
    ax.semilogy(epochs, [float(r["val_relative_l2"]) for r in rows], label="validation relative L2")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss, relative L2")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _save(fig, out)


def plot_predictions_1d(inputs: torch.Tensor, targets: torch.Tensor, preds: torch.Tensor,
                        lengths: list[float], out: str | os.PathLike, names: tuple[str, str] = ("input", "target"),
                        title: str = "", band: tuple[torch.Tensor, torch.Tensor] | None = None,
                        band_label: str = "band") -> Path:
    """A row per 1D sample: input, truth and prediction (left), the error prediction - truth (right).

    The left panel's title gives the sample's relative L2 error. ``band`` (lower, upper; the predictions' shape):
    shaded around the prediction, and as ``lower - prediction`` to ``upper - prediction`` around the error.
    """
    plt = _pyplot()
    count = inputs.shape[0]
    fig, axes = plt.subplots(count, 2, figsize=(11, 2.4 * count), squeeze=False, width_ratios=(3, 2),
                             layout="constrained")
    n = inputs.shape[1]
    x = torch.arange(n) * lengths[0] / n
    for i, (ax, ax_err) in enumerate(axes):
        err = float((preds[i] - targets[i]).norm() / targets[i].norm())
        ax.plot(x, inputs[i, :, 0], color="0.6", lw=1, label="input")
        ax.plot(x, targets[i, :, 0], color="C0", lw=2, label="truth")
        ax.plot(x, preds[i, :, 0], color="C3", lw=1, ls="--", label="prediction")
        if band is not None:
            lower, upper = band[0][i, :, 0], band[1][i, :, 0]
            ax.fill_between(x, lower, upper, color="C3", alpha=0.2, lw=0, label=band_label)
            ax_err.fill_between(x, lower - preds[i, :, 0], upper - preds[i, :, 0], color="C3", alpha=0.2, lw=0)
        ax.set_title(f"sample {i}: relative L2 {err:.2e}", fontsize=9)
        ax.set_ylabel(f"{names[0]}, {names[1]}")
        ax_err.plot(x, preds[i, :, 0] - targets[i, :, 0], color="C3", lw=1)
        ax_err.axhline(0.0, color="0.6", lw=0.8)
        ax_err.set_title(f"sample {i}: error", fontsize=9)
        ax_err.set_ylabel(f"{names[1]}: prediction - truth")
        for panel in (ax, ax_err):
            panel.set_xlabel("x")
    axes[0, 0].legend(fontsize=8, loc="upper right")
    return _save(fig, out, title)


def plot_predictions_2d(inputs: torch.Tensor, targets: torch.Tensor, preds: torch.Tensor,
                        out: str | os.PathLike, names: tuple[str, str] = ("input", "target"),
                        title: str = "") -> Path:
    """Input (e.g. the coefficient), truth, prediction and error maps of a few 2D samples, a row each.

    Truth and prediction share one colour scale (the joint range of the two) and one colour bar; the input
    and the error have their own. The fields are drawn on the closed unit square; the input and the target
    may be on different grids (the inverse problem's coarse target).
    """
    plt = _pyplot()
    from matplotlib.colors import Normalize

    count = inputs.shape[0]
    fig, axes = plt.subplots(count, 4, figsize=(15, 3.3 * count), squeeze=False, layout="constrained")
    for i, (ax_in, ax_truth, ax_pred, ax_err) in enumerate(axes):
        truth, pred = targets[i, ..., 0], preds[i, ..., 0]
        err = float((preds[i] - targets[i]).norm() / targets[i].norm())
        shared = Normalize(min(float(truth.min()), float(pred.min())), max(float(truth.max()), float(pred.max())))
        image = _map(ax_in, inputs[i, ..., 0], f"sample {i}: {names[0]}", "viridis")
        fig.colorbar(image, ax=ax_in, label=names[0])
        image = _map(ax_truth, truth, f"sample {i}: {names[1]} (truth)", "viridis", shared)
        _map(ax_pred, pred, f"sample {i}: {names[1]} (prediction)", "viridis", shared)
        fig.colorbar(image, ax=[ax_truth, ax_pred], label=f"{names[1]} (truth and prediction)")
        image = _map(ax_err, (pred - truth).abs(), f"sample {i}: |error|, relative L2 {err:.2e}", "magma")
        fig.colorbar(image, ax=ax_err, label=f"|{names[1]} prediction - truth|")
    return _save(fig, out, title)


def _map(ax, field: torch.Tensor, title: str, cmap: str, norm=None):
    """Draw the 2D ``field`` on the closed unit square with labelled x and y axes; returns the image."""
    image = ax.imshow(field.T.numpy(), origin="lower", extent=(0, 1, 0, 1), cmap=cmap, norm=norm)
    ax.set_title(title, fontsize=9)
    ax.set(xticks=[0, 0.5, 1], yticks=[0, 0.5, 1], xlabel="x", ylabel="y")
    return image


def plot_rollout_errors(times: list[float], per_frame: list[float], out: str | os.PathLike,
                        title: str = "", bound: list[float] | None = None, bound_label: str = "bound") -> Path:
    """Relative L2 error of every predicted frame of a rollout (mean over trajectories) versus time; ``bound``:
    a bound on each frame's error (dashed)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    ax.semilogy(times, per_frame, marker="o", ms=3, label="mean error")
    if bound is not None:
        ax.semilogy(times, bound, color="C3", ls="--", label=bound_label)
        ax.legend(fontsize=8)
    ax.set_xlabel("time")
    ax.set_ylabel("relative L2 (mean over trajectories)")
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, out)


def _frame_image(field: torch.Tensor) -> torch.Tensor:
    """A 2D image of a frame ``(*spatial, channels)``: the first channel, the middle slice of a 3D field."""
    image = field[..., 0]
    while image.dim() > 2:
        image = image[..., image.shape[-1] // 2]
    return image


def plot_rollout_frames(truth: torch.Tensor, pred: torch.Tensor, times: list[float], out: str | os.PathLike,
                        columns: int = 5, name: str = "field", title: str = "", error: bool = False) -> Path:
    """True (top row) and predicted (second row) frames of one trajectory at evenly spaced times; with
    ``error``, a third row of ``|prediction - truth|``.

    ``truth``/``pred`` are ``(frame, *spatial, channels)``; 3D fields show their middle slice. Each column
    is drawn on the true frame's range, shown by a colour bar under it (``name`` labels it); the error row has
    one colour scale of its own (0 to the largest error shown); the axes are the grid's x and y (no ticks).
    """
    plt = _pyplot()
    picks = sorted({round(i * (len(times) - 1) / max(columns - 1, 1)) for i in range(columns)})
    rows = 3 if error else 2
    fig, axes = plt.subplots(rows, len(picks), figsize=(2.6 * len(picks), 3.1 * rows), squeeze=False,
                             layout="constrained")
    errors = [(_frame_image(pred[f]) - _frame_image(truth[f])).abs() for f in picks] if error else []
    largest = max((float(e.max()) for e in errors), default=0.0)
    for col, frame in enumerate(picks):
        t_img, p_img = _frame_image(truth[frame]), _frame_image(pred[frame])
        low, high = float(t_img.min()), float(t_img.max())
        for row, (image, label) in enumerate(((t_img, "truth"), (p_img, "prediction"))):
            ax = axes[row, col]
            drawn = ax.imshow(image.T.numpy(), origin="lower", vmin=low, vmax=high, cmap="RdBu_r")
            ax.set_title(f"{label}, t = {times[frame]:g}", fontsize=8)
            ax.set(xticks=[], yticks=[], xlabel="x", ylabel="y")
        fig.colorbar(drawn, ax=axes[:2, col], location="bottom", label=name, shrink=0.9)
        if error:
            ax = axes[2, col]
            shown = ax.imshow(errors[col].T.numpy(), origin="lower", vmin=0, vmax=largest, cmap="magma")
            ax.set_title(f"|error|, t = {times[frame]:g}", fontsize=8)
            ax.set(xticks=[], yticks=[], xlabel="x", ylabel="y")
    if error:
        fig.colorbar(shown, ax=axes[2, :], location="bottom", label=f"|{name} prediction - truth|", shrink=0.5)
    return _save(fig, out, title)


def animate_rollout(truth: torch.Tensor, pred: torch.Tensor, times: list[float], out: str | os.PathLike,
                    name: str = "field") -> Path:
    """An animated GIF of one trajectory: truth, prediction and their difference side by side.

    All three panels are drawn on the whole true trajectory's range, shown by one colour bar (``name``).
    """
    plt = _pyplot()
    from matplotlib.animation import FuncAnimation, PillowWriter

    fig, axes = plt.subplots(1, 3, figsize=(9.6, 3.6), layout="constrained")
    low, high = float(truth.min()), float(truth.max())
    images = []
    for ax, label in zip(axes, ("truth", "prediction", "difference")):
        images.append(ax.imshow(_frame_image(truth[0]).T.numpy(), origin="lower", vmin=low, vmax=high,
                                cmap="RdBu_r"))
        ax.set(xticks=[], yticks=[], xlabel="x", ylabel="y")
        ax.set_title(label, fontsize=9)
    fig.colorbar(images[0], ax=axes, label=name, shrink=0.8)
    caption = fig.suptitle("")

    def draw(frame: int) -> list:
        t_img, p_img = _frame_image(truth[frame]), _frame_image(pred[frame])
        for image, field in zip(images, (t_img, p_img, p_img - t_img)):
            image.set_data(field.T.numpy())
        caption.set_text(f"t = {times[frame]:g}")
        return images

    animation = FuncAnimation(fig, draw, frames=len(times), blit=False)
    path = Path(out)
    try:
        with atomic_replace(path, suffix=".gif") as tmp:  # Pillow picks the format by the suffix
            animation.save(str(tmp), writer=PillowWriter(fps=4))
    finally:
        plt.close(fig)
    return path
