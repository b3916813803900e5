"""The solver where the bound fails (``opformer predict --tolerance``): samples whose calibrated error bound
exceeds the tolerance, or whose bound is not guaranteed (an input unlike the calibration data), are answered by the
built-in solver; the surrogate answers the rest.

A data file made by a registry PDE records its settings (:mod:`opformer.pde.resolve`): those samples are solved
again from their input (a trajectory from its last given frame) and merged into the output chunk by chunk. For any
other data (an array, a converted file) nothing is solved: the report lists the samples to solve with one's own
solver. The report, printed and written beside the output as ``OUTPUT.fallback.json``, says how many samples went
to the solver, the wall time against solving every sample as the fallback solves them (a chunk of samples at a
time; measured when every sample was solved or one chunk holds them all, else the measured time of one whole chunk
times the number of chunks) and, where the file holds the true targets, the largest true relative L2 error among the
surrogate's answers.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from opformer.data.readers.source import TRAJECTORY
from opformer.errors import ConfigError
from opformer.io import write_atomic
from opformer.pde.resolve import resolvable, resolve_operator, resolve_trajectory
from opformer.runs import Run
from opformer.serve.forecaster import open_forecaster
from opformer.serve.inputs import Inputs, forecast_times
from opformer.serve.predict import BoundArrays, prediction
from opformer.trust.scores import relative_l2

#: The suffix of the report written beside the output.
REPORT_SUFFIX = ".fallback.json"


def check_tolerance(tolerance: float) -> None:
    """A tolerance is a positive relative L2 error; a one-line error otherwise."""
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise ConfigError(f"--tolerance {tolerance:g}: expected a positive relative L2 error, e.g. 0.01")


def to_solver(bound: np.ndarray, flagged: np.ndarray, tolerance: float) -> np.ndarray:
    """``(sample,)`` bool: the samples whose bound ``(sample,)`` (a rollout's ``(sample, frame)``: any frame)
    exceeds ``tolerance``, or whose bound is not guaranteed (``flagged``)."""
    bound = np.asarray(bound, dtype=np.float64)
    worst = bound.reshape(len(bound), -1).max(axis=1) if bound.size else np.zeros(len(bound))
    return (worst > tolerance) | np.asarray(flagged, dtype=bool)


@dataclass
class FallbackReport:
    """What ``--tolerance`` did: the samples sent to the solver and the time it took."""

    tolerance: float
    coverage: float
    samples: int = 0
    indices: list[int] = field(default_factory=list)  # the samples over the tolerance (or not guaranteed)
    flagged: int = 0  # of those, inputs unlike the calibration data
    solved: bool = False  # whether the built-in solver answered them (else: the user's solver should)
    reason: str = ""  # why they were not solved
    seconds: float = 0.0  # the whole prediction, solves included
    solver_seconds: float = 0.0  # the solves
    all_solver_seconds: float | None = None  # solving every sample chunk by chunk: measured or estimated
    all_solver_measured: bool = False
    timed_batch: int = 0  # when estimated: the samples of the one chunk solved whole to time it
    timed_batch_seconds: float = 0.0  # and its time
    max_true_error: float | None = None  # largest true relative L2 among the surrogate's answers (known truth)
    true_errors_known: bool = False

    @property
    def to_solver(self) -> int:
        """Samples over the tolerance."""
        return len(self.indices)

    def text(self) -> str:
        """The report as a few lines."""
        share = f"{self.to_solver} of {self.samples} samples" + (f" ({self.to_solver / self.samples:.1%})"
                                                                if self.samples else "")
        lines = [f"tolerance {self.tolerance:g} at coverage {self.coverage:g}: {share} over the tolerance"
                 + (f", {self.flagged} of them flagged as unlike the calibration data" if self.flagged else "")]
        if self.solved:
            lines.append(f"solved again by the built-in solver: {self.solver_seconds:.3g} s of {self.seconds:.3g} s")
            if self.all_solver_seconds is not None:
                how = ("measured" if self.all_solver_measured else
                       f"estimated from one chunk of {self.timed_batch} samples solved whole in "
                       f"{self.timed_batch_seconds:.3g} s")
                speedup = f"; speed-up {self.all_solver_seconds / self.seconds:.3g}x" if self.seconds > 0 else ""
                lines.append(f"solving every sample: {self.all_solver_seconds:.3g} s ({how}){speedup}")
        elif self.to_solver:
            lines.append(f"not solved ({self.reason}): their indices are in the report")
        if self.true_errors_known:
            worst = "none" if self.max_true_error is None else f"{self.max_true_error:.3g}"
            lines.append(f"largest true relative L2 error among the surrogate's answers: {worst}")
        return "\n".join(lines)


class FallbackArrays:
    """What ``--tolerance`` writes beside each chunk: the bounds (``bounds``, joint over a rollout's frames),
    ``to_solver`` (1: over the tolerance; where solved, the output holds the solver's answer and the bounds of the
    surrogate's prediction it replaced) and, for a registry PDE's data, those samples solved again in place of the
    predictions. ``report`` is filled as the chunks pass; ``probe`` keeps the first chunk, and its solve time when
    every one of its samples went to the solver, to time solving every sample (:func:`predict_with_fallback`)."""

    def __init__(self, bounds: BoundArrays, inputs: Inputs, trajectory: bool, tolerance: float,
                 report: FallbackReport, probe: dict[str, Any]) -> None:
        self.bounds, self.inputs, self.trajectory, self.tolerance = bounds, inputs, trajectory, tolerance
        self.report, self.probe = report, probe
        info = inputs.info
        report.solved = info is not None and resolvable(info.pde)
        if not report.solved:
            report.reason = ("an array records no PDE" if info is None else
                             f"{inputs.path} records pde {info.pde.get('name')!r}, which opformer cannot solve "
                             "again from an input")
        self.truth = inputs.truth
        report.true_errors_known = self.truth is not None

    def __call__(self, given: torch.Tensor, preds: torch.Tensor) -> dict[str, np.ndarray]:
        report, truth = self.report, self.truth
        out = self.bounds(given, preds)
        start = report.samples
        chosen = to_solver(out["bound_relative_l2"], out["flagged"], self.tolerance)
        picked = np.flatnonzero(chosen)
        report.samples += len(given)
        report.indices += (start + picked).tolist()
        report.flagged += int(out["flagged"][picked].astype(bool).sum())
        if truth is not None:
            kept = relative_l2(preds, torch.from_numpy(truth(start, start + len(given))))[~torch.from_numpy(chosen)]
            if len(kept):
                report.max_true_error = max(float(kept.max()), report.max_true_error or 0.0)
        frames = preds.shape[1] if self.trajectory else 0
        seconds = None
        if report.solved and len(picked):
            began = time.perf_counter()
            solved = solve_samples(self.inputs, given[torch.from_numpy(picked)], frames)
            seconds = time.perf_counter() - began
            report.solver_seconds += seconds
            preds[torch.from_numpy(picked)] = torch.from_numpy(solved).to(preds.dtype)
        if not self.probe:
            whole = seconds if len(picked) == len(given) else None
            self.probe.update(inputs=self.inputs, given=given.clone(), frames=frames, seconds=whole)
        return {**out, "to_solver": chosen.astype(np.uint8)}


def solve_samples(inputs: Inputs, given: torch.Tensor, frames: int) -> np.ndarray:
    """The built-in solver's answers for samples of a registry PDE's file: of the inputs ``given`` (operator data,
    ``frames`` = 0), or the ``frames`` frames after the given frames ``given`` ``(sample, t, *grid, c)``."""
    info = inputs.info
    if not frames:
        return resolve_operator(info.pde, info.solver, given.numpy())
    times = np.concatenate([[inputs.times[-1]], forecast_times(inputs.times, inputs.stride, frames)])
    return resolve_trajectory(info.pde, info.solver, given[:, -1].numpy(), times)


def predict_with_fallback(run_dir: str | os.PathLike | Run, input_path: str | os.PathLike,
                          output_path: str | os.PathLike,
                          tolerance: float, coverage: float = 0.9, frames: int | None = None,
                          batch_size: int | None = None, device: str = "auto", member: str | None = None,
                          score: str | None = None, start: int | None = None) -> FallbackReport:
    """``opformer predict RUN --input X --output Y --tolerance T``: :func:`predict_file` with the bounds at
    ``coverage`` and the samples over ``tolerance`` answered by the solver (registry data) or listed; the report is
    written atomically beside the output (``Y.fallback.json``) and returned. ``member``: as for
    :func:`~opformer.serve.predict.predict_file`; ``score``: the per-sample score of the bounds (default, and always
    on the command line: the calibration's choice); ``start``: as for :func:`~opformer.serve.predict.predict_file`
    (a forecast whose context lies at another frame than the calibration's is flagged whole: every sample goes to
    the solver).

    Solving every sample is timed as the fallback solves them, a chunk at a time: measured when every sample was
    solved, else the time of the first chunk solved whole (for timing alone unless all its samples went to the
    solver) times the number of chunks; never extrapolated from the time of a single sample, since the solvers
    answer a chunk in far less than its size times one sample's time."""
    check_tolerance(tolerance)
    report = FallbackReport(float(tolerance), float(coverage))
    probe: dict[str, Any] = {}
    began = time.perf_counter()
    forecaster = open_forecaster(run_dir, device, batch_size, calibrated=True)
    with prediction(forecaster, input_path, output_path, frames, member, extras=True, start=start) as job:
        # a forecast is answered whole: every frame bound at once
        fallback = FallbackArrays(job.bounds(coverage, joint=True, score=score), job.inputs,
                                  forecaster.kind == TRAJECTORY, tolerance, report, probe)
        path = job.write(fallback)
    report.seconds = time.perf_counter() - began
    if report.solved and report.samples:
        if report.to_solver == report.samples:
            report.all_solver_seconds, report.all_solver_measured = report.solver_seconds, True
        else:
            time_all_solves(report, probe)
    write_atomic(Path(str(path) + REPORT_SUFFIX), json.dumps(report_dict(report), indent=2) + "\n")
    return report


def time_all_solves(report: FallbackReport, probe: dict[str, Any]) -> None:
    """Fill ``report.all_solver_seconds`` from the first chunk ``probe`` solved whole (its recorded time, else
    solved now): measured when that chunk holds every sample, else its time times the number of chunks."""
    seconds = probe["seconds"]
    if seconds is None:
        began = time.perf_counter()
        solve_samples(probe["inputs"], probe["given"], probe["frames"])
        seconds = time.perf_counter() - began
    batch = len(probe["given"])
    report.all_solver_measured = batch == report.samples
    report.all_solver_seconds = seconds * report.samples / batch
    if not report.all_solver_measured:
        report.timed_batch, report.timed_batch_seconds = batch, seconds


def report_dict(report: FallbackReport) -> dict[str, Any]:
    """The report as JSON-ready values (``to_solver`` counted beside the indices)."""
    return {**asdict(report), "to_solver": report.to_solver}
