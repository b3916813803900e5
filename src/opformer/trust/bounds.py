"""Calibrated bounds: a run's calibration (the sorted scores of each data set) and the bounds it gives new
predictions at any coverage (split conformal, :mod:`opformer.trust.conformal`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from opformer.errors import CheckpointError, ConfigError, given
from opformer.kinds import TRAJECTORY
from opformer.trust.conformal import check_coverage, conformal_quantile
from opformer.trust.estimates import history_of, residual_estimates
from opformer.trust.scores import (DEFAULT_SCALE, DEFAULT_SCORE, PLAIN_SCORES, SAMPLE_SCORES, SCALES, local_scale,
                                   point_level)
from opformer.trust.shift import flag_shifted, input_statistics, roughness_of


@dataclass
class Group:
    """The calibration of one data set (the run's file, or one mixture member): scores sorted along the sample
    axis, one column per rolled-out frame (one for operator runs)."""

    relative_l2: torch.Tensor  # (n, frames)
    normalized: torch.Tensor  # (n, frames): relative L2 over the input's roughness
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
    #: the normalized scores beyond ``roughness`` (``residual``, ``backtest``): score -> (n, frames) sorted
    normalized_by: dict[str, torch.Tensor] = field(default_factory=dict)
    #: the calibration inputs' estimates that the flag screens, in sample order: ``residual`` (n, frames),
    #: ``history`` (n,) (given frames against the physics), ``backtest`` (n,) (the surrogate's error on them)
    estimates: dict[str, torch.Tensor] = field(default_factory=dict)
    physics: dict[str, Any] | None = None  # the PDE settings of the residual (opformer.trust.estimates)
    backtest: int = 0  # frames given before the context for the backtest (0: not offered)

    @property
    def samples(self) -> int:
        """Calibration samples."""
        return self.relative_l2.shape[0]

    @property
    def offered(self) -> tuple[str, ...]:
        """The per-sample scores this data set's calibration answers."""
        return (*PLAIN_SCORES, *(name for name in SAMPLE_SCORES if name in self.normalized_by))

    def check_score(self, score: str, run: str, option: str = "score=") -> str:
        """``score`` if this calibration offers it, else a one-line :class:`ConfigError` naming it as the call did
        (``option``: ``score=`` in Python, ``--score`` on the command line)."""
        if score not in self.offered:
            raise ConfigError(f"{given(option, score)}: expected one of {', '.join(self.offered)} (the scores "
                              f"{run}'s calibration offers)")
        return score

    def difficulty_of(self, score: str) -> torch.Tensor:
        """The calibration inputs' difficulty for the per-sample ``score``, in sample order (see
        :meth:`BoundsAt.sample_bounds`)."""
        return self.estimates.get(score, self.difficulty)

    def sorted_scores(self, score: str) -> torch.Tensor:
        """``(n, frames)``: the sorted calibration scores of the per-sample ``score``."""
        if score == "relative_l2":
            return self.relative_l2
        return self.normalized if score == "roughness" else self.normalized_by[score]


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
    kind: str  # OPERATOR or TRAJECTORY (opformer.kinds)
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
            raise ConfigError(f"{given('member=', member)}: {self.run} is calibrated per member of its mixture; "
                              f"expected one of {', '.join(self.groups)}")
        return self.groups[member]

    def quantiles(self, coverage: float, member: str | None = None, score: str = "relative_l2") -> torch.Tensor:
        """``(frames,)``: the conformal quantile of a per-sample score at ``coverage`` for each calibrated frame:
        for ``relative_l2`` the bound on the relative L2 error itself, for a normalized score its factor (the bound
        is it times the input's difficulty, :meth:`BoundsAt.sample_bounds`)."""
        return conformal_quantile(self.group(member).sorted_scores(score), coverage, sorted_=True)

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
        """``(sample, frames)``: the relative-L2 bound of inputs whose score's difficulty is ``difficulty``
        (:meth:`BoundsAt.sample_bounds`), for each frame or (``joint``) for all frames at once."""
        return self.at(coverage, member, score=score, joint=joint).sample_bounds(difficulty)

    def at(self, coverage: float, member: str | None = None, scale: str | None = None, score: str | None = None,
           joint: bool = False) -> BoundsAt:
        """The bounds of ``member``'s predictions at ``coverage``, their quantiles computed once (call the result on
        each batch): by the per-sample ``score`` and pointwise ``scale`` (default: those selected on the run's
        validation split); ``joint``: the relative-L2 bounds of a rollout hold for every calibrated frame at once
        (the band stays per frame)."""
        check_coverage(coverage, "coverage=")
        group = self.group(member)
        scale, score = scale or group.scale, group.check_score(score or group.score, self.run)
        if scale not in SCALES:
            raise ConfigError(f"{given('scale=', scale)}: expected one of {', '.join(SCALES)}")
        quantile = (self.joint_quantiles if joint else self.quantiles)(coverage, member, score)
        width = conformal_quantile(group.pointwise[scale][:, :, point_level(coverage)], coverage, sorted_=True)
        return BoundsAt(self.run, self.kind == TRAJECTORY, group, float(coverage), score, scale, quantile, width)

    def bounds(self, inputs: torch.Tensor, predictions: torch.Tensor, coverage: float = 0.9,
               member: str | None = None, scale: str | None = None, score: str | None = None,
               joint: bool = False, backtest: torch.Tensor | None = None) -> Bounds:
        """Bounds on ``predictions`` of ``inputs`` at ``coverage`` (see :class:`Bounds` and :meth:`at`).

        Operator runs: ``inputs`` ``(sample, *spatial, c_in)``, ``predictions`` ``(sample, *spatial, c)``.
        Trajectory runs: ``inputs`` the given frames ``(sample, t, *spatial, c)``, ``predictions`` the forecast
        frames ``(sample, frame, *spatial, c)``, frame ``f`` the ``f``-th after the given ones; frames beyond the
        calibrated horizon get infinite bounds; ``inputs`` are the ``t_in`` context frames. ``backtest``: see
        :meth:`BoundsAt.__call__`.
        """
        return self.at(coverage, member, scale, score, joint)(inputs, predictions, backtest)


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

    def sample_bounds(self, difficulty: torch.Tensor) -> torch.Tensor:
        """``(sample, calibrated frames)``: the relative-L2 bound of inputs whose score's difficulty
        (:mod:`opformer.trust.estimates`) is ``difficulty``, ``(sample,)`` or ``(sample, frames)`` (ignored by
        ``relative_l2``)."""
        if self.score == "relative_l2":
            return torch.ones(len(difficulty), 1, dtype=torch.float64) * self.quantile
        factor = difficulty.double()
        factor = factor[:, None] if factor.dim() == 1 else factor
        known = min(factor.shape[1], len(self.quantile)) if factor.shape[1] > 1 else len(self.quantile)
        return factor[:, :known] * self.quantile[:known]

    def difficulty(self, statistics: torch.Tensor, channels: int, residual: torch.Tensor | None,
                   backtest: torch.Tensor | None) -> torch.Tensor:
        """The difficulty of the bounds' score for a batch of inputs (see :meth:`sample_bounds`)."""
        if self.score == "residual":
            if residual is None:
                raise ConfigError(f"score residual: the physics estimate needs a square grid of one channel, as "
                                  f"calibrated ({'x'.join(map(str, self.group.grid))})")
            return residual
        if self.score == "backtest":
            if backtest is None:
                raise ConfigError(f"score backtest: needs {self.group.backtest} given frames before the last t_in of "
                                  "each input (the surrogate's own error on them)")
            return backtest
        return roughness_of(statistics, channels)

    def __call__(self, inputs: torch.Tensor, predictions: torch.Tensor, backtest: torch.Tensor | None = None
                 ) -> Bounds:
        """Bounds on ``predictions`` of ``inputs`` (shapes as :meth:`Calibration.bounds`; a trajectory's inputs are
        the ``t_in`` context frames); ``backtest`` ``(sample,)``: the surrogate's error on each input's frames given
        before them (:func:`opformer.trust.estimates.backtest_errors`), which the ``backtest`` score needs."""
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
        square = len(set(preds.shape[2:-1])) == 1 and preds.shape[-1] == 1
        residual = residual_estimates(group.physics, inputs, preds) if group.physics and square else None
        difficulty = self.difficulty(statistics, inputs.shape[-1], residual, backtest)
        bound = torch.full((len(preds), frames), math.inf, dtype=torch.float64)
        bound[:, :known] = self.sample_bounds(difficulty)[:, :known]
        width = torch.full((frames,), math.inf, dtype=torch.float64)
        width[:known] = self.width[:known]
        scales = local_scale(preds.flatten(0, 1), self.scale).unflatten(0, preds.shape[:2])  # every frame at once
        half = (scales * width.view(1, frames, *[1] * (preds.dim() - 2))).to(preds.dtype)
        lower, upper = preds - half, preds + half
        flagged = flag_shifted(statistics, group.statistics) | flag_estimates(group, residual, inputs, known, backtest)
        if tuple(preds.shape[2:-1]) != group.grid:
            flagged = torch.ones_like(flagged)
        if not self.rollout:
            bound, lower, upper = bound[:, 0], lower[:, 0], upper[:, 0]
        return Bounds(bound, lower, upper, flagged, self.coverage)


def estimate_summary(estimates: dict[str, torch.Tensor], frames: int) -> torch.Tensor | None:
    """``(sample, k)``: the logarithms of an input's estimates that the flag screens, one column each: the residual
    estimate's geometric mean over the first ``frames`` frames, the history estimate, the backtest error; None where
    there are none."""
    tiny = torch.finfo(torch.float64).tiny
    columns = []
    if "residual" in estimates:
        columns.append(estimates["residual"][:, :frames].double().clamp_min(tiny).log().mean(dim=1))
    columns += [estimates[key].double().clamp_min(tiny).log() for key in ("history", "backtest") if key in estimates]
    return torch.stack(columns, dim=1) if columns else None


def flag_estimates(group: Group, residual: torch.Tensor | None, inputs: torch.Tensor, frames: int,
                   backtest: torch.Tensor | None = None) -> torch.Tensor:
    """True for each input whose physics estimates (:func:`estimate_summary`) lie outside the calibration inputs'
    range (:func:`opformer.trust.shift.flag_shifted`: standardised as the statistics are, so that the screen of all
    estimates together flags an input drawn like the calibration inputs with probability about ``1 / (n + 1)``);
    all False for a calibration without estimates."""
    current: dict[str, torch.Tensor] = {}
    if residual is not None and "residual" in group.estimates:
        current["residual"] = residual
    history = history_of(group.physics, inputs) if "history" in group.estimates else None
    if history is not None:
        current["history"] = history
    if backtest is not None and "backtest" in group.estimates:
        current["backtest"] = backtest
    reference = estimate_summary({key: group.estimates[key] for key in current}, frames)
    if reference is None:
        return torch.zeros(len(inputs), dtype=torch.bool)
    return flag_shifted(estimate_summary(current, frames), reference)
