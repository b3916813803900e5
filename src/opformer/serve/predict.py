"""``opformer predict``: a run applied to every sample of a file, a chunk of samples at a time (memory holds about
one chunk, as ``opformer convert``), written atomically by :mod:`opformer.serve.outputs`: a bad input writes nothing.

With ``--coverage`` the run's calibration is loaded once, its quantiles computed once for the call
(:meth:`opformer.trust.Calibration.at`), and each chunk's bounds written beside its predictions.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from opformer.data.readers.source import CHUNK_BYTES, TRAJECTORY
from opformer.errors import ConfigError
from opformer.runs import Run
from opformer.serve.forecaster import Forecaster, open_forecaster
from opformer.serve.inputs import Inputs, forecast_times, open_inputs
from opformer.serve.outputs import Chunk, write_output
from opformer.trust.bounds import BoundsAt
from opformer.trust.conformal import check_coverage

#: Arrays computed beside each chunk's predictions from ``(given, predictions)`` (sample first) and written into
#: the output beside them; it may replace predictions in place (``--tolerance``: the samples the solver answers)
#: before they are stored.
Extras = Callable[[torch.Tensor, torch.Tensor], dict[str, np.ndarray]]


class PositionWarning(UserWarning):
    """A forecast's context lies at another stored frame than the calibration's: its bounds are not guaranteed
    (every sample is flagged). ``opformer predict`` prints it as a note."""


class BoundArrays:
    """What ``opformer predict --coverage`` writes beside each chunk: ``bound_relative_l2`` (per sample; rollouts
    per sample and frame), ``band_half_width`` (the predictions' shape: the band is the prediction plus or minus
    it) and ``flagged`` (1 where the input is unlike the calibration data, or, ``moved``, a forecast whose context
    lies at another frame than the calibration's: the bounds there are not guaranteed)."""

    def __init__(self, forecaster: Forecaster, bounds: BoundsAt, moved: bool = False) -> None:
        self.forecaster, self.bounds, self.moved = forecaster, bounds, moved

    def __call__(self, given: torch.Tensor, predictions: torch.Tensor) -> dict[str, np.ndarray]:
        bounds = self.forecaster.bounded(self.bounds, given, predictions)
        return {"bound_relative_l2": bounds.relative_l2.float().numpy(),
                "band_half_width": (bounds.upper - predictions).float().numpy(),
                "flagged": (bounds.flagged | self.moved).to(torch.uint8).numpy()}


@dataclass
class Prediction:
    """One ``opformer predict`` call: the forecaster, the opened input, the output and the frames to forecast (0
    for an operator run). A context manager: the input is closed on leaving."""

    forecaster: Forecaster
    inputs: Inputs
    out: Path
    frames: int
    #: what the output records beside the arrays (a forecast's context position; its calibrated one, with bounds)
    attributes: dict[str, int] = field(default_factory=dict)

    def __enter__(self) -> Prediction:
        return self

    def __exit__(self, *exc: object) -> None:
        self.inputs.close()

    def bounds(self, coverage: float, joint: bool = False, score: str | None = None) -> BoundArrays:
        """The bounds at ``coverage`` of the input's data set (its mixture member), their quantiles computed now
        (``score``: the per-sample score, default the calibration's choice). Errors name the command line's
        flags (``--coverage``, ``--score``): this is ``opformer predict``'s door."""
        forecaster, inputs = self.forecaster, self.inputs
        check_coverage(coverage, "--coverage")
        member = forecaster.calibrated_member(inputs.path, inputs.member)
        if score is not None and forecaster.calibration is not None:
            forecaster.calibration.group(member).check_score(score, forecaster.calibration.run, "--score")
        at = forecaster.bounds_at(coverage, member, joint, score)
        moved = False
        if forecaster.kind == TRAJECTORY:
            given = forecaster.given_frames()
            calibrated = given["start"] + inputs.stride * given["backtest"]  # the calibration's first context frame
            self.attributes["calibrated_context_start"] = calibrated
            moved = inputs.context_start != calibrated
            if moved:
                warnings.warn(f"{inputs.path}: the forecast's context starts at stored frame {inputs.context_start}, "
                              f"the calibration's at frame {calibrated}: its bounds are not guaranteed there and every "
                              f"sample is flagged (give --start {given['start']} to forecast where it was calibrated, "
                              "or calibrate at this position with `opformer calibrate --start`)", PositionWarning,
                              stacklevel=2)
        return BoundArrays(forecaster, at, moved)

    def chunks(self, extras: Extras | None = None) -> Iterator[Chunk]:
        """Every sample predicted, about :data:`~opformer.data.readers.source.CHUNK_BYTES` of samples at a time;
        ``extras`` sees each chunk before it is stored and may replace predictions in place."""
        from tqdm.auto import tqdm

        inputs, forecaster, n = self.inputs, self.forecaster, self.frames
        chunk = max(1, CHUNK_BYTES // (4 * (math.prod(inputs.shape) + math.prod(self.shape[1:]))))
        with tqdm(total=inputs.count, desc="predict", unit="sample", disable=None) as bar:
            for start in range(0, inputs.count, chunk):
                stop = min(inputs.count, start + chunk)
                given = torch.from_numpy(np.require(inputs.read(start, stop), np.float32, ["C", "W"]))
                pred = forecaster.rollout(given, n, inputs.kinds) if n else forecaster.predict(given)
                arrays = {} if extras is None else extras(given, pred)  # may replace predictions (the solver's)
                if inputs.truth is not None and self.out.suffix != ".npy":  # the input's true targets, kept
                    arrays["truth"] = inputs.truth(start, stop)
                yield Chunk(start, stop, given.numpy(), pred.numpy(), arrays)
                bar.update(stop - start)

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of every sample's predictions together."""
        inputs = self.inputs
        per_sample = ((self.frames, *inputs.shape[1:]) if self.forecaster.kind == TRAJECTORY else
                      (*inputs.shape[:-1], len(self.forecaster.target_channels)))
        return (inputs.count, *per_sample)

    def times(self) -> np.ndarray | None:
        """A forecast's frame times (None for an operator run)."""
        return forecast_times(self.inputs.times, self.inputs.stride, self.frames) if self.frames else None

    def write(self, extras: Extras | None = None) -> Path:
        """Predict every sample and write the output (with ``extras``' arrays beside the predictions)."""
        self.out.parent.mkdir(parents=True, exist_ok=True)
        return write_output(self.out, self.forecaster, self.inputs, self.shape, self.times(), self.chunks(extras),
                            self.attributes)


def prediction(forecaster: Forecaster, input_path: str | os.PathLike, output_path: str | os.PathLike,
               frames: int | None = None, member: str | None = None, extras: bool = False, start: int | None = None
               ) -> Prediction:
    """Check a prediction's options and open its input (see :func:`predict_file`), before anything is written."""
    src, out = Path(input_path), Path(output_path)
    if out.resolve() == src.resolve():
        raise ConfigError(f"--output {output_path}: would overwrite the input file")
    trajectory = forecaster.kind == TRAJECTORY
    if frames is not None and not trajectory:
        raise ConfigError(f"--frames: {forecaster.run.path} is an operator run (one prediction per input), not a "
                          "trajectory run")
    if frames is not None and frames < 1:
        raise ConfigError(f"--frames {frames}: expected at least 1 frame")
    if extras and out.suffix == ".npy":
        raise ConfigError(f"--output {output_path}: a .npy file holds the predictions only; write .npz or HDF5 to "
                          "keep the error bounds beside them")
    if start is not None and not trajectory:
        raise ConfigError(f"--start: {forecaster.run.path} is an operator run (no frames to start from)")
    inputs = open_inputs(src, forecaster, member, start, forecaster.given_frames()["backtest"])
    try:
        n = (frames or forecaster.validated_frames(src, member)) if trajectory else 0
    except BaseException:
        inputs.close()
        raise
    return Prediction(forecaster, inputs, out, n, {"context_start": inputs.context_start} if trajectory else {})


def predict_file(run_dir: str | os.PathLike | Run, input_path: str | os.PathLike, output_path: str | os.PathLike,
                 frames: int | None = None, batch_size: int | None = None, device: str = "auto",
                 member: str | None = None, coverage: float | None = None, joint: bool = False,
                 start: int | None = None, score: str | None = None) -> Path:
    """Apply a run's best surrogate to every sample of ``input_path`` and write ``output_path`` atomically.

    Operator runs predict each input (at the file's grid). Trajectory runs roll out ``frames`` frames (default:
    :meth:`Forecaster.validated_frames`) after the last ``t_in`` frames of each trajectory (at the run's time
    stride), as :meth:`Forecaster.rollout` does: the forecast continues after the frames given; ``start``: after the
    ``t_in`` frames from that stored frame instead. The output is by its suffix (:mod:`opformer.serve.outputs`).
    ``coverage``: the calibrated error bounds at that level beside the predictions (:class:`BoundArrays`; ``joint``:
    a rollout's bounds for all its frames at once); a ``.npy`` output, one array, is refused. A forecast whose
    context starts at another stored frame than the calibration's has every sample flagged (its bounds are not
    guaranteed there), the output records both frames (``context_start``, ``calibrated_context_start``) and a
    :class:`PositionWarning` says so. ``member``: for a mixture run, the member the input's samples belong to (its
    time stride, rollout length and calibration; default: the member whose file the input is). ``score``: the
    per-sample score of the bounds (default: the calibration's choice).
    """
    forecaster = open_forecaster(run_dir, device, batch_size, calibrated=coverage is not None)
    if score is not None and coverage is None:
        raise ConfigError(f"--score {score}: the score of the bounds; give --coverage C too")
    with prediction(forecaster, input_path, output_path, frames, member, extras=coverage is not None,
                    start=start) as job:
        return job.write(None if coverage is None else job.bounds(coverage, joint, score))
