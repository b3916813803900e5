"""Calibrated bounds: a run's calibration (the sorted scores of each data set) and the bounds it gives new
predictions at any coverage (split conformal, :mod:`opformer.trust.conformal`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from opformer.errors import CheckpointError, ConfigError
from opformer.trust.conformal import check_coverage, conformal_quantile
from opformer.trust.scores import DEFAULT_SCALE, DEFAULT_SCORE, SAMPLE_SCORES, SCALES, local_scale, point_level
from opformer.trust.shift import flag_shifted, input_statistics, roughness_of


@dataclass
class Group:
    """The calibration of one data set (the run's file, or one mixture member): scores sorted along the sample
    axis, one column per rolled-out frame (one for operator runs)."""

    relative_l2: torch.Tensor  # (n, frames)
    normalised: torch.Tensor  # (n, frames): relative L2 over the input's roughness
    pointwise: dict[str, torch.Tensor]  # scale -> (n, frames, len(POINT_LEVELS))
    statistics: torch.Tensor  # (n, statistics) of the calibration inputs (in sample order)
    difficulty: torch.Tensor  # (n,): the calibration inputs' roughness (in sample order)
    grid: tuple[int, ...]
    channels: int
    score: str = DEFAULT_SCORE  # the per-sample score bounds use (selected on validation, :func:`select`)
    scale: str = DEFAULT_SCALE  # the pointwise scale bounds use
    #: per-sample score -> (n,) sorted: each calibration sample's largest score over the frames, each frame's
    #: divided by ``frame_scale`` (the joint score of bounds that hold for every frame at once); None in a
    #: calibration written before joint bounds
    joint: dict[str, torch.Tensor] | None = None
    frame_scale: dict[str, torch.Tensor] | None = None  # per-sample score -> (frames,)

    @property
    def samples(self) -> int:
        """Calibration samples."""
        return self.relative_l2.shape[0]


class Bounds(NamedTuple):
    """What :meth:`Calibration.bounds` returns for predictions at a coverage ``c``.

    ``relative_l2``: the bound on each sample's relative L2 error, ``(sample,)`` (rollouts ``(sample, frame)``): it
    holds with probability at least ``c`` for inputs like the calibration data (a rollout's: for each frame, or,
    ``joint``, for every calibrated frame at once; ``+inf`` where too few samples were calibrated or a frame lies
    beyond the calibrated horizon). ``lower``/``upper``: the pointwise band, the
    predictions' shape; with probability at least ``c`` at least a fraction ``c`` of a sample's points lie in it.
    ``flagged`` ``(sample,)``: True where the input is unlike the calibration inputs (or on another grid): there the
    bounds are written but not guaranteed."""

    relative_l2: torch.Tensor
    lower: torch.Tensor
    upper: torch.Tensor
    flagged: torch.Tensor
    coverage: float


@dataclass
class Calibration:
    """A run's stored calibration (:func:`opformer.trust.storage.load_calibration`)."""

    run: str
    kind: str  # "operator" or "trajectory"
    checkpoint_checksum: str
    source: dict[str, Any]  # data files, split, frames, checkpoint, created
    groups: dict[str, Group]  # "" for a run of one data file, else member names

    @property
    def frames(self) -> int:
        """Calibrated frames of the horizon (1 for an operator run)."""
        return next(iter(self.groups.values())).relative_l2.shape[1]

    def group(self, member: str | None = None) -> Group:
        """The calibration of ``member`` (None: the only data set); a one-line error for other names."""
        if member is None and len(self.groups) == 1:
            return next(iter(self.groups.values()))
        if member not in self.groups:
            raise ConfigError(f"member {member!r}: {self.run} is calibrated per member of its mixture; expected one "
                              f"of {', '.join(self.groups)}")
        return self.groups[member]

    def quantiles(self, coverage: float, member: str | None = None, score: str = "relative_l2") -> torch.Tensor:
        """``(frames,)``: the conformal quantile of a per-sample score at ``coverage`` for each calibrated frame:
        for ``relative_l2`` the bound on the relative L2 error itself, for ``roughness`` its factor (the bound is
        it times the input's roughness)."""
        group = self.group(member)
        return conformal_quantile(group.normalised if score == "roughness" else group.relative_l2, coverage,
                                  sorted_=True)

    def joint_quantiles(self, coverage: float, member: str | None = None, score: str = "relative_l2"
                        ) -> torch.Tensor:
        """``(frames,)``: as :meth:`quantiles`, but bounds that hold for every calibrated frame at once at
        ``coverage``: the conformal quantile of the joint score (each sample's largest over the frames of its score
        over the frame's scale) times each frame's scale."""
        group = self.group(member)
        if group.joint is None or group.frame_scale is None:
            raise CheckpointError(f"{self.run}: its calibration predates joint bounds; run `opformer calibrate "
                                  f"{self.run}` again")
        return conformal_quantile(group.joint[score][:, None], coverage, sorted_=True) * group.frame_scale[score]

    def sample_bounds(self, coverage: float, difficulty: torch.Tensor, member: str | None = None,
                      score: str | None = None, joint: bool = False) -> torch.Tensor:
        """``(sample, frames)``: the relative-L2 bound of inputs of roughness ``difficulty`` ``(sample,)``, for each
        frame or (``joint``) for all frames at once."""
        return self.at(coverage, member, score=score, joint=joint).sample_bounds(difficulty)

    def at(self, coverage: float, member: str | None = None, scale: str | None = None, score: str | None = None,
           joint: bool = False) -> BoundsAt:
        """The bounds of ``member``'s predictions at ``coverage``, their quantiles computed once (call the result on
        each batch): by the per-sample ``score`` and pointwise ``scale`` (default: those selected on the run's
        validation split); ``joint``: the relative-L2 bounds of a rollout hold for every calibrated frame at once
        (the band stays per frame)."""
        check_coverage(coverage, "--coverage")
        group = self.group(member)
        scale, score = scale or group.scale, score or group.score
        if scale not in SCALES:
            raise ConfigError(f"scale {scale!r}: expected one of {', '.join(SCALES)}")
        if score not in SAMPLE_SCORES:
            raise ConfigError(f"score {score!r}: expected one of {', '.join(SAMPLE_SCORES)}")
        quantile = (self.joint_quantiles if joint else self.quantiles)(coverage, member, score)
        width = conformal_quantile(group.pointwise[scale][:, :, point_level(coverage)], coverage, sorted_=True)
        return BoundsAt(self.run, self.kind == "trajectory", group, float(coverage), score, scale, quantile, width)

    def bounds(self, inputs: torch.Tensor, predictions: torch.Tensor, coverage: float = 0.9,
               member: str | None = None, scale: str | None = None, score: str | None = None,
               joint: bool = False) -> Bounds:
        """Bounds on ``predictions`` of ``inputs`` at ``coverage`` (see :class:`Bounds` and :meth:`at`).

        Operator runs: ``inputs`` ``(sample, *spatial, c_in)``, ``predictions`` ``(sample, *spatial, c)``.
        Trajectory runs: ``inputs`` the given frames ``(sample, t, *spatial, c)``, ``predictions`` the forecast
        frames ``(sample, frame, *spatial, c)``, frame ``f`` the ``f``-th after the given ones; frames beyond the
        calibrated horizon get infinite bounds.
        """
        return self.at(coverage, member, scale, score, joint)(inputs, predictions)


@dataclass(frozen=True)
class BoundsAt:
    """A calibration's bounds at one coverage for one data set (:meth:`Calibration.at`): the conformal quantiles
    computed once, applied to each batch of predictions by calling it."""

    run: str
    rollout: bool  # a trajectory run: predictions (sample, frame, *spatial, c)
    group: Group
    coverage: float
    score: str
    scale: str
    quantile: torch.Tensor  # (calibrated frames,): the per-sample score's bound (or factor: roughness)
    width: torch.Tensor  # (calibrated frames,): the pointwise band's width over the local scale

    def sample_bounds(self, roughness: torch.Tensor) -> torch.Tensor:
        """``(sample, calibrated frames)``: the relative-L2 bound of inputs of roughness ``roughness`` ``(sample,)``."""
        factor = roughness.double()[:, None] if self.score == "roughness" else torch.ones(len(roughness), 1,
                                                                                          dtype=torch.float64)
        return factor * self.quantile

    def __call__(self, inputs: torch.Tensor, predictions: torch.Tensor) -> Bounds:
        """Bounds on ``predictions`` of ``inputs`` (shapes as :meth:`Calibration.bounds`)."""
        group = self.group
        preds = predictions if self.rollout else predictions.unsqueeze(1)
        ndim = len(group.grid)
        if preds.dim() != ndim + 3 or preds.shape[-1] != group.channels or len(inputs) != len(preds):
            raise ConfigError(f"{self.run}: predictions of shape {tuple(predictions.shape)} for {len(inputs)} inputs "
                              f"do not fit its calibration ({ndim}D, {group.channels} channels"
                              f"{', (sample, frame, *grid, channels)' if self.rollout else ''})")
        frames = preds.shape[1]
        known = min(frames, len(self.quantile))
        statistics = input_statistics(inputs, ndim)
        bound = torch.full((len(preds), frames), math.inf, dtype=torch.float64)
        bound[:, :known] = self.sample_bounds(roughness_of(statistics, inputs.shape[-1]))[:, :known]
        width = torch.full((frames,), math.inf, dtype=torch.float64)
        width[:known] = self.width[:known]
        scales = local_scale(preds.flatten(0, 1), self.scale).unflatten(0, preds.shape[:2])  # every frame at once
        half = (scales * width.view(1, frames, *[1] * (preds.dim() - 2))).to(preds.dtype)
        lower, upper = preds - half, preds + half
        flagged = flag_shifted(statistics, group.statistics)
        if tuple(preds.shape[2:-1]) != group.grid:
            flagged = torch.ones_like(flagged)
        if not self.rollout:
            bound, lower, upper = bound[:, 0], lower[:, 0], upper[:, 0]
        return Bounds(bound, lower, upper, flagged, self.coverage)
