"""A mesh run evaluated: per sample, the quadrature-weighted relative L2 (``sqrt(sum_i w_i |u_i - v_i|^2 /
sum_i w_i |v_i|^2)``, the norm of the functions on the mesh) beside the plain one (uniform over the points), on one
split of a mesh operator file."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

from opformer.data.mesh_splits import MeshSplit, load_mesh_split
from opformer.eval.metrics import weighted_relative_l2_per_sample
from opformer.models.inference import check_mesh_compatible, predict_mesh
from opformer.runs import Run
from opformer.runtime import resolve_device


@dataclass
class MeshPredictions:
    """A split's samples (rows), the run's predictions of them and the per-sample errors (``weighted``,
    ``uniform``)."""

    split: MeshSplit
    predictions: list[torch.Tensor]
    weighted: torch.Tensor
    uniform: torch.Tensor


def mesh_split(run: Run, data: str | os.PathLike, split: str) -> MeshSplit:
    """Split ``split`` of the mesh file ``data`` (the run's sample counts), held in memory, checked to hold the
    run's input and target fields."""
    stored = run.config.data
    held = load_mesh_split(data, split, n_train=stored.n_train, n_val=stored.n_val, n_test=stored.n_test)
    check_mesh_compatible(run.surrogate, held.info, str(run.checkpoint()))
    return held


def mesh_errors(run: Run, held: MeshSplit, device: torch.device, batch_size: int | None = None) -> MeshPredictions:
    """The run's predictions of every sample of ``held`` and their weighted and plain relative L2."""
    surrogate = run.surrogate.to(device)
    predictions = predict_mesh(surrogate, held.rows, run.eval_batch_size(batch_size), device)
    weighted, uniform = [], []
    for (_, _, w, y), pred in zip(held.rows, predictions):
        target, pred = y.unsqueeze(0).double(), pred.unsqueeze(0).double()
        weighted.append(weighted_relative_l2_per_sample(pred, target, w.unsqueeze(0)))
        uniform.append(weighted_relative_l2_per_sample(pred, target, torch.ones_like(w).unsqueeze(0)))
    return MeshPredictions(held, predictions, torch.cat(weighted), torch.cat(uniform))


def evaluate_mesh_run(run: Run, data: str | os.PathLike, split: str = "test", device: str = "auto"
                      ) -> list[dict[str, Any]]:
    """One row: the split's sample and point counts, and the mean and standard deviation over samples of the
    weighted (``relative_l2``) and plain (``relative_l2_uniform``) relative L2."""
    found = mesh_errors(run, mesh_split(run, data, split), resolve_device(device))
    counts = found.split.point_counts()
    row: dict[str, Any] = {"split": split, "samples": len(counts), "points_min": min(counts),
                           "points_max": max(counts)}
    for key, errors in (("relative_l2", found.weighted), ("relative_l2_uniform", found.uniform)):
        row[key] = float(errors.mean())
        row[f"{key}_std"] = float(errors.std()) if len(errors) > 1 else 0.0
    return [row]


def format_mesh_table(rows: list[dict[str, Any]], title: str = "") -> str:
    """A plain-text table of mesh evaluation rows: the weighted relative L2 beside the plain one."""
    lines = [title] if title else []
    lines.append(f"{'samples':>7}  {'points':>13}  {'rel. L2 (quadrature)':>20}  {'std':>9}  "
                 f"{'rel. L2 (uniform)':>17}  {'std':>9}")
    for row in rows:
        points = f"{row['points_min']}-{row['points_max']}"
        lines.append(f"{row['samples']:>7}  {points:>13}  {row['relative_l2']:>20.3e}  {row['relative_l2_std']:>9.2e}  "
                     f"{row['relative_l2_uniform']:>17.3e}  {row['relative_l2_uniform_std']:>9.2e}")
    return "\n".join(lines)
