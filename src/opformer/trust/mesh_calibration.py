"""Calibrating a mesh run (``opformer calibrate`` on a run of mesh data): split conformal bounds from scores on a
split that training and model selection never saw.

Two scores per calibration sample:

- ``relative_l2``: its quadrature-weighted relative L2 error (the norm evaluation reports); the bound at coverage
  ``c`` is the ``ceil((n + 1) c)``-th smallest score;
- ``band``: its largest pointwise error over points and channels, ``max_i |u_i - v_i|``, over the prediction's
  quadrature-weighted root mean square ``s = sqrt(sum_i w_i |u_i|^2 / channels)``; a new prediction's band is
  ``u_i +- q s`` at every point, ``q`` that score's conformal quantile: it holds at all points at once.

The flag: each sample's input statistics (its point count, its bounding box, each input channel's weighted mean
and standard deviation); a new input with any of them outside the calibration samples' range is flagged (its
bounds are not guaranteed: it is unlike what the bounds were calibrated on).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from opformer.data.mesh_splits import Rows
from opformer.errors import CheckpointError, ConfigError
from opformer.eval.mesh_evaluation import mesh_errors, mesh_split
from opformer.kinds import MESH
from opformer.runs import Run, save_calibration_record
from opformer.runtime import resolve_device
from opformer.trust.conformal import check_coverage, conformal_quantile, expected_coverage

#: The one group of a mesh run's calibration record.
GROUP = "mesh"


def prediction_scale(pred: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sqrt(sum_i w_i |u_i|^2 / channels)`` of one prediction ``(points, channels)`` (``weights`` summing to 1),
    in float64; the band's unit."""
    pred = pred.double()
    return (weights.double()[:, None] * pred.square()).sum().div(max(pred.shape[-1], 1)).sqrt()


def band_score(pred: torch.Tensor, truth: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``max_i |u_i - v_i|`` over points and channels, over :func:`prediction_scale`."""
    return (pred.double() - truth.double()).abs().max() / prediction_scale(pred, weights)


def input_statistics(rows: Rows) -> torch.Tensor:
    """A sample's statistics for the flag, float64: its point count, its coordinates' smallest and largest value on
    each axis, each input channel's weighted mean and weighted standard deviation."""
    x, pos, w, _ = rows
    w64, x64, pos64 = w.double(), x.double(), pos.double()
    mean = (w64[:, None] * x64).sum(dim=0)
    std = (w64[:, None] * (x64 - mean).square()).sum(dim=0).sqrt()
    return torch.cat([torch.tensor([float(len(pos))], dtype=torch.float64), pos64.min(dim=0).values,
                      pos64.max(dim=0).values, mean, std])


@dataclass
class MeshBounds:
    """The bounds of one prediction: its relative L2 bound, the band's half width (one value for every point
    and channel) and whether its input is unlike the calibration's (the bounds not guaranteed)."""

    relative_l2: float
    band_half_width: float
    flagged: bool


@dataclass
class MeshCalibration:
    """A mesh run's calibration: the sorted ``relative_l2`` and ``band`` scores of its calibration samples and the
    range (``low``, ``high``) of their input statistics; ``source``: what it was calibrated on."""

    run: str
    checkpoint_checksum: str
    source: dict[str, Any]
    relative_l2: torch.Tensor
    band: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor

    @property
    def samples(self) -> int:
        return len(self.relative_l2)

    def quantiles(self, coverage: float) -> tuple[float, float]:
        """The relative-L2 bound and the band's factor ``q`` at ``coverage`` (``inf`` with too few samples)."""
        check_coverage(coverage, "--coverage")
        return (float(conformal_quantile(self.relative_l2, coverage, sorted_=True)),
                float(conformal_quantile(self.band, coverage, sorted_=True)))

    def bounds(self, rows: Rows, pred: torch.Tensor, coverage: float) -> MeshBounds:
        """The bounds at ``coverage`` of the prediction ``pred`` ``(points, channels)`` of one sample (``rows``)."""
        bound, factor = self.quantiles(coverage)
        stats = input_statistics(rows)
        flagged = bool(((stats < self.low) | (stats > self.high)).any())
        return MeshBounds(bound, factor * float(prediction_scale(pred, rows[2])), flagged)

    def rows(self, coverages: tuple[float, ...]) -> list[dict[str, Any]]:
        """A row per coverage: the bound, the band's factor and the probability they hold (``k / (n + 1)``)."""
        return [{"coverage": c, "samples": self.samples, "relative_l2_bound": self.quantiles(c)[0],
                 "band_factor": self.quantiles(c)[1], "expected_coverage": expected_coverage(self.samples, c)}
                for c in coverages]


def calibrate_mesh_run(run: Run, data: str | os.PathLike | None = None, split: str = "test", device: str = "auto",
                       batch_size: int | None = None) -> MeshCalibration:
    """Score the run's best checkpoint on ``split`` of its mesh file (or of ``data``) and store the calibration in
    the run directory (``calibration.pt``, atomically). ``train`` and ``val`` are refused (seen by training and
    model selection), as is ``all`` of the run's own file."""
    if split in ("train", "val"):
        raise ConfigError(f"--split {split}: the run was {'trained' if split == 'train' else 'selected'} on it; "
                          "calibrate on data it never saw (--split test, or --data FILE --split all)")
    own = run.config.data.path
    if split == "all" and (data is None or Path(data).resolve() == Path(own).resolve()):
        raise ConfigError("--split all: takes the run's training samples too; use --split test, or another file "
                          "with --data FILE")
    path = data or own
    held = mesh_split(run, path, split)
    if not len(held):
        raise ConfigError(f"--split {split}: holds no samples of {path}; nothing to calibrate on")
    found = mesh_errors(run, held, resolve_device(device), batch_size)
    band = torch.stack([band_score(p, r[3], r[2]) for p, r in zip(found.predictions, held.rows)])
    stats = torch.stack([input_statistics(r) for r in held.rows])
    stat = Path(path).stat()
    source = {"checkpoint": str(run.checkpoint()), "split": split,
              "data": [{"path": str(Path(path).resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}],
              "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    calibration = MeshCalibration(str(run.path), run.checkpoint_checksum, source, found.weighted.double().sort().values,
                                  band.sort().values, stats.min(dim=0).values, stats.max(dim=0).values)
    save_calibration_record(run.calibration_path, {"kind": MESH, "checkpoint_checksum": calibration.checkpoint_checksum,
                                                   "source": source},
                            {GROUP: {"relative_l2": calibration.relative_l2, "band": calibration.band,
                                     "statistics_low": calibration.low, "statistics_high": calibration.high}})
    return calibration


def load_mesh_calibration(run: Run) -> MeshCalibration:
    """A mesh run's stored calibration, checked against its checksum and the run's best checkpoint."""
    record = run.calibration_record()
    meta = record["meta"]
    group = record["groups"].get(GROUP)
    if meta.get("kind") != MESH or not isinstance(group, dict):
        raise CheckpointError(f"{run.calibration_path}: not a mesh run's calibration; run `opformer calibrate "
                              f"{run.path}` again")
    return MeshCalibration(str(run.path), meta["checkpoint_checksum"], meta["source"], group["relative_l2"],
                           group["band"], group["statistics_low"], group["statistics_high"])
