"""A run's calibration on disk: written by :func:`save_calibration`, read back by :func:`load_calibration`.

::

    RUN/calibration.pt   per data set (the run's file, or each member of a mixture): the sorted scores of every
                         calibration sample and rolled-out frame (relative L2; pointwise at each scale and level of
                         opformer.trust.scores), the sorted joint scores (each sample's largest over the frames, a
                         frame's score over its scale) and the frame scales (the validation split's medians),
                         the calibration inputs' statistics (opformer.trust.shift), the grid
                         and channels; where they apply, the scores normalized by the physics estimate and by the
                         backtest (opformer.trust.estimates), the calibration inputs' estimates and the PDE settings
                         they were computed with; and what it was calibrated on: the data files (path, size,
                         modification time), the split, the first frame and the backtest's frames, the samples, the
                         frames, the checkpoint and its checksum

The file is written atomically and read as the checkpoints are (:meth:`opformer.runs.Run.calibration_record`:
``torch.load(weights_only=True)``, no code unpickled); it carries a SHA-256 checksum of
everything it holds (as the checkpoints do, :func:`opformer.runs.checksum`), so a changed byte is an error. Storing
the scores, not quantiles, keeps every coverage level answerable. The stored keys ``normalised`` and
``normalised_<score>`` keep the spelling of the first files written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from opformer.runs import Run, save_calibration_record
from opformer.trust.bounds import Calibration, Group
from opformer.trust.scores import SAMPLE_SCORES, SCALES

#: The calibration inputs' estimates a calibration stores for the flag (:class:`opformer.trust.bounds.Group`).
ESTIMATES = ("residual", "history", "backtest")


def save_calibration(path: str | os.PathLike, calibration: Calibration) -> Path:
    """Write a calibration (atomically) with its checksum."""
    path = Path(path)
    meta = {"kind": calibration.kind, "checkpoint_checksum": calibration.checkpoint_checksum,
            "source": calibration.source,
            "chosen": {name: {"score": g.score, "scale": g.scale} for name, g in calibration.groups.items()},
            "physics": {name: {"settings": g.physics, "backtest": g.backtest}
                        for name, g in calibration.groups.items()}}
    groups = {name: {"relative_l2": g.relative_l2, "normalised": g.normalized, "statistics": g.statistics,
                     "difficulty": g.difficulty, "grid": torch.tensor(g.grid), "channels": g.channels,
                     **{f"pointwise_{scale}": g.pointwise[scale] for scale in SCALES},
                     **({f"joint_{score}": g.joint[score] for score in g.joint} if g.joint else {}),
                     **({f"frame_scale_{score}": g.frame_scale[score] for score in g.frame_scale}
                        if g.frame_scale else {}),
                     **{f"normalised_{score}": values for score, values in g.normalized_by.items()},
                     **{f"estimate_{key}": values for key, values in g.estimates.items()}}
              for name, g in calibration.groups.items()}
    save_calibration_record(path, meta, groups)
    return path


def load_calibration(run: str | os.PathLike | Run) -> Calibration:
    """A run's stored calibration, checked against its contents' checksum and against the run's best checkpoint
    (:meth:`opformer.runs.Run.calibration_record`); one-line :class:`~opformer.errors.CheckpointError` otherwise."""
    run = Run.open(run)
    record = run.calibration_record()
    meta = record["meta"]
    groups = {name: Group(g["relative_l2"], g["normalised"], {scale: g[f"pointwise_{scale}"] for scale in SCALES},
                          g["statistics"], g["difficulty"], tuple(int(n) for n in g["grid"]), int(g["channels"]),
                          **meta["chosen"][name], joint=_optional(g, "joint_"),
                          frame_scale=_optional(g, "frame_scale_"),
                          normalized_by={score: g[f"normalised_{score}"] for score in SAMPLE_SCORES
                                         if f"normalised_{score}" in g},
                          estimates={key: g[f"estimate_{key}"] for key in ESTIMATES if f"estimate_{key}" in g},
                          **_physics(meta, name))
              for name, g in record["groups"].items()}
    return Calibration(str(run.path), meta["kind"], meta["checkpoint_checksum"], meta["source"], groups)


def _physics(meta: dict[str, Any], name: str) -> dict[str, Any]:
    """A group's physics settings and backtest frames (none in a calibration written before them)."""
    found = (meta.get("physics") or {}).get(name) or {}
    return {"physics": found.get("settings"), "backtest": int(found.get("backtest", 0))}


def _optional(group: dict[str, Any], prefix: str) -> dict[str, torch.Tensor] | None:
    """A stored group's ``prefix + score`` entries by score, None where it has none (written before them)."""
    found = {score: group[prefix + score] for score in SAMPLE_SCORES if prefix + score in group}
    return found or None
