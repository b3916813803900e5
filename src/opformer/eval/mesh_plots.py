"""PNG plots of mesh samples (matplotlib, imported lazily): fields on the mesh's triangulation, a sample's mesh with
its quadrature weights, and truth, prediction and error side by side where predictions are given."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from opformer.data.store import MeshFile
from opformer.errors import ConfigError
from opformer.eval.plots import _pyplot, _save
from opformer.meshes import MeshSample


def triangles(sample: MeshSample) -> np.ndarray | None:
    """The sample's cells as triangles (each quad cut in two); None for a point cloud or a 3D mesh."""
    if sample.cells is None or sample.points.shape[1] != 2:
        return None
    cells = np.asarray(sample.cells)
    if sample.cell_kind == "quad":
        return np.concatenate([cells[:, [0, 1, 2]], cells[:, [0, 2, 3]]])
    return cells


def draw_field(ax, sample: MeshSample, values: np.ndarray, title: str, **style) -> None:
    """``values`` (one per point) on the triangulation (Gouraud shading), or as coloured points without cells."""
    x, y = sample.points[:, 0], sample.points[:, 1]
    tris = triangles(sample)
    if tris is not None:
        image = ax.tripcolor(x, y, tris, values, shading="gouraud", **style)
    else:
        image = ax.scatter(x, y, c=values, s=8, **style)
    ax.figure.colorbar(image, ax=ax, shrink=0.8)
    ax.set_title(title, fontsize=9)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def draw_weights(ax, sample: MeshSample) -> None:
    """The mesh's edges and each point coloured by its quadrature weight (and how the weights were found)."""
    tris = triangles(sample)
    if tris is not None:
        ax.triplot(sample.points[:, 0], sample.points[:, 1], tris, lw=0.3, color="0.6")
    image = ax.scatter(sample.points[:, 0], sample.points[:, 1], c=sample.weights, s=6, cmap="viridis")
    ax.figure.colorbar(image, ax=ax, shrink=0.8)
    ax.set_title(f"{len(sample.points)} points, weights {sample.weights_from}\n(sum {sample.weights.sum():.4g})",
                 fontsize=9)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def _channels(sample: MeshSample, names: Sequence[str], frame: int) -> list[tuple[str, np.ndarray]]:
    """``(label, values)`` of every channel of the fields ``names`` (a trajectory's at ``frame``)."""
    found = []
    for name in names:
        value = np.asarray(sample.fields[name])
        value = value[frame] if value.ndim == 3 else value
        for k in range(value.shape[-1]):
            found.append((name if value.shape[-1] == 1 else f"{name}[{k}]", value[:, k]))
    return found


def plot_mesh_samples(samples: Sequence[MeshSample], names: Sequence[str], out: str | os.PathLike, *,
                      frame: int = -1, title: str = "") -> Path:
    """A row per sample: its mesh with the quadrature weights, then each channel of the fields ``names`` on the
    triangulation (a trajectory's frame ``frame``)."""
    plt = _pyplot()
    columns = 1 + len(_channels(samples[0], names, frame))
    fig, axes = plt.subplots(len(samples), columns, figsize=(3.2 * columns, 3 * len(samples)), squeeze=False,
                             layout="constrained")
    for row, sample in zip(axes, samples):
        draw_weights(row[0], sample)
        for ax, (label, values) in zip(row[1:], _channels(sample, names, frame)):
            draw_field(ax, sample, values, label, cmap="RdBu_r")
    return _save(fig, out, title)


def plot_mesh_predictions(samples: Sequence[MeshSample], predictions: Sequence[np.ndarray], names: Sequence[str],
                          out: str | os.PathLike, title: str = "") -> Path:
    """A row per sample and target channel: truth, prediction (one colour scale) and the error prediction - truth,
    on the triangulation; each row titled with the channel's quadrature-weighted relative L2. ``predictions``:
    ``(points, channels)`` per sample, the channels of the fields ``names`` in order."""
    plt = _pyplot()
    rows = [(sample, label, truth, np.asarray(pred)[:, k])
            for sample, pred in zip(samples, predictions)
            for k, (label, truth) in enumerate(_channels(sample, names, -1))]
    fig, axes = plt.subplots(len(rows), 3, figsize=(10, 3 * len(rows)), squeeze=False, layout="constrained")
    for (ax_t, ax_p, ax_e), (sample, label, truth, pred) in zip(axes, rows):
        w = sample.weights / sample.weights.sum()
        error = float(np.sqrt(np.sum(w * (pred - truth) ** 2) / max(np.sum(w * truth**2), 1e-30)))
        scale = {"vmin": float(min(truth.min(), pred.min())), "vmax": float(max(truth.max(), pred.max())),
                 "cmap": "RdBu_r"}
        draw_field(ax_t, sample, truth, f"{label}: truth", **scale)
        draw_field(ax_p, sample, pred, f"prediction (relative L2 {error:.3g})", **scale)
        draw_field(ax_e, sample, pred - truth, "error", cmap="coolwarm")
    return _save(fig, out, title)


def plot_mesh_file(path: str | os.PathLike, out_dir: str | os.PathLike, samples: int = 4) -> list[Path]:
    """``opformer plot FILE.h5`` on a mesh data file: ``mesh_samples.png``, its first ``samples`` samples (their
    meshes and weights, and every field; a trajectory's last frame)."""
    with MeshFile(path) as data:
        if samples < 1:
            raise ConfigError(f"--samples {samples}: expected at least 1")
        info = data.info
        chosen = [data.sample(i) for i in range(min(samples, len(data)))]
    names = [name for name, _ in info.mesh["inputs"] + (info.mesh["targets"] if info.has_target else [])]
    when = f", t = {info.times[-1]:g}" if info.times else ""
    title = f"{Path(path).name}: {info.pde.get('name', '')} ({info.mesh['task']}{when})"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [plot_mesh_samples(chosen, names, out / "mesh_samples.png", title=title)]
