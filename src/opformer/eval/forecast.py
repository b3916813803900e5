"""Forecasts from any trained run: the surrogate in place of its solver, in physical units.

:func:`load_forecaster` reads a run directory's best checkpoint into a :class:`Forecaster`
(``opformer.load_surrogate`` attaches the run's calibration to it, :mod:`opformer.trust`). An operator run maps
inputs to targets (:meth:`Forecaster.predict`); a trajectory run rolls out ``n`` frames after the last ``t_in``
given ones (:meth:`Forecaster.rollout`) with exactly the step its evaluation uses: repeated calls of the
surrogate (:func:`opformer.eval.metrics.rollout`), each giving the model's ``t_out`` bundled frames (a
latent-marching model's ``k`` marched frames per call), whatever strategy trained it. A run trained on a mixture
of data sets, and imported DPOT weights, take any number of channels up to the model's: they are zero-padded and
the padded outputs zeroed before they are fed back, and an imported DPOT's frames are resized to the grid it was
built for and its predictions back, as :mod:`opformer.eval.members` evaluates them; the forecast has the input's
grid and channels.

:func:`predict_file` (``opformer predict``) applies a run to every sample of an opformer HDF5 file or a
``.npy``/``.npz`` array, a chunk of samples at a time (memory holds about one chunk, as ``opformer convert``),
and writes HDF5, ``.npy`` or ``.npz`` by the output's suffix, atomically: a bad input writes nothing.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from opformer.data.mixture import MixtureMember, member_name, pad_channels
from opformer.data.readers.arrays import block, channel_last, sample_array
from opformer.data.readers.source import CHUNK_BYTES, OPERATOR, TRAJECTORY, domain
from opformer.data.store import (DataFile, DatasetInfo, open_dataset_file, read_info, write_operator_dataset,
                                 write_trajectory_dataset)
from opformer.errors import CheckpointError, ConfigError, DataError
from opformer.eval.evaluate import check_compatible
from opformer.eval.members import ResizedStep, is_imported, is_mixture_run
from opformer.eval.metrics import Step, predict, rollout
from opformer.grids import axis_kinds
from opformer.io import atomic_path, atomic_replace, check_free_space
from opformer.models.surrogate import Surrogate
from opformer.runs import load_checkpoint_surrogate, run_checkpoint
from opformer.runtime import resolve_device

#: Suffixes of the array formats; any other output is written as opformer HDF5.
ARRAY_SUFFIXES = (".npy", ".npz")
#: Arrays computed beside each chunk's predictions from ``(given, predictions)`` (sample first), written into the
#: output beside them; :func:`predict_file` builds one from the forecaster and the inputs (``opformer predict
#: --coverage``: the error bounds of :mod:`opformer.trust`); it may replace predictions in place (``--tolerance``:
#: the samples the solver answers), before they are stored.
Annotate = Callable[[torch.Tensor, torch.Tensor], dict[str, np.ndarray]]


class Forecaster:
    """A run's surrogate applied to new data: CPU tensors in and out, in physical units, batched on ``device``.

    ``kind`` is ``"operator"`` or ``"trajectory"``. Operator runs: :meth:`predict` maps ``(batch, *grid,
    in_channels)`` to ``(batch, *grid, out_channels)``. Trajectory runs: :meth:`rollout` maps given frames
    ``(batch, time, *grid, channels)`` (at the run's frame spacing; the last ``t_in`` are used) to the next ``n``
    ``(batch, n, *grid, channels)``, and :meth:`predict` is one call (the next ``t_out`` frames). ``padded``: a
    mixture run or imported DPOT, which takes 1 to ``len(input_channels)`` channels on any grid. Error bounds
    of both come from :meth:`bounds`, with the run's calibration (:mod:`opformer.trust`).
    """

    def __init__(self, surrogate: Surrogate, payload: dict[str, Any], source: str | os.PathLike,
                 device: torch.device, batch_size: int) -> None:
        self.surrogate = surrogate.to(device).eval()
        self.payload, self.source, self.device, self.batch_size = payload, str(source), device, batch_size
        data = surrogate.spec["data"]
        self.kind = TRAJECTORY if "t_in" in data else OPERATOR
        self.t_in: int | None = data.get("t_in")
        self.t_out: int | None = data.get("t_out")
        self.grid = tuple(data["stored_shape"])
        self.kinds = axis_kinds(data)
        self.input_channels, self.target_channels = list(data["input_channels"]), list(data["target_channels"])
        imported_dpot = is_imported(payload) and self.kind == TRAJECTORY
        self.padded = is_mixture_run(payload) or imported_dpot
        self.resized = imported_dpot  # an imported DPOT runs on the grid its pos_embed was built for
        if self.padded and len(self.target_channels) != len(self.input_channels):
            raise ConfigError(f"{self.source}: a model of {len(self.input_channels)} input and "
                              f"{len(self.target_channels)} output channels cannot roll out")
        self.dtype = next(self.surrogate.parameters()).dtype
        #: the run's calibration (an :class:`opformer.trust.calibration.Calibration`), attached by
        #: ``opformer.load_surrogate`` when the run has one; :meth:`bounds` uses it
        self.calibration: Any = None

    @property
    def ndim(self) -> int:
        """Spatial dimensions of the run's data."""
        return len(self.grid)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Operator runs: the predicted targets of inputs ``x`` ``(batch, *grid, in_channels)``; trajectory runs:
        the next ``t_out`` frames after ``x`` ``(batch, time, *grid, channels)`` (one call of the model)."""
        if self.kind == TRAJECTORY:
            return self.rollout(x, self.t_out)
        if x.dim() != self.ndim + 2 or x.shape[-1] != len(self.input_channels):
            raise DataError(f"inputs of shape {tuple(x.shape)}: {self.source} takes (batch, {self.ndim} grid axes, "
                            f"{len(self.input_channels)} channels {self.input_channels})")
        return predict(self.surrogate, x.to(self.dtype), self.batch_size, self.device)

    def rollout(self, frames: torch.Tensor, n: int, kinds: Sequence[str] | None = None) -> torch.Tensor:
        """The ``n`` frames ``(batch, n, *grid, channels)`` after the last ``t_in`` of ``frames`` ``(batch, time,
        *grid, channels)``, each call's predictions fed back as context. ``kinds``: the grid kinds of the frames'
        axes where an imported DPOT resizes them (default the run's)."""
        if self.kind != TRAJECTORY:
            raise ConfigError(f"{self.source}: an operator run has no rollout; use predict(x)")
        if n < 1:
            raise ConfigError(f"frames {n}: expected at least 1 frame to roll out")
        own = frames.shape[-1] if frames.dim() else 0
        channels = len(self.input_channels)
        if (frames.dim() != self.ndim + 3 or frames.shape[1] < self.t_in or
                not (1 <= own <= channels if self.padded else own == channels)):
            raise DataError(f"frames of shape {tuple(frames.shape)}: {self.source} takes (batch, time >= {self.t_in}, "
                            f"{self.ndim} grid axes, {self._channel_text()})")
        context = frames[:, -self.t_in:].to(self.dtype)
        step: Step = self.surrogate
        if self.padded:
            context = pad_channels(context, channels)
            if self.resized and tuple(frames.shape[2:-1]) != self.grid:
                step = ResizedStep(self.surrogate, self.grid, tuple(kinds or self.kinds))
            step = _masked(step, (torch.arange(channels) < own).to(self.device))
        out = [frames.new_zeros((0, n, *frames.shape[2:-1], own), dtype=self.dtype)]
        with torch.no_grad():
            for start in range(0, len(context), self.batch_size):
                window = context[start:start + self.batch_size].movedim(1, -2).to(self.device)
                out.append(rollout(step, window, n).movedim(-2, 1)[..., :own].cpu())
        return torch.cat(out)

    def bounds(self, inputs: torch.Tensor, predictions: torch.Tensor, coverage: float = 0.9,
               member: str | None = None, joint: bool = False) -> Any:
        """Calibrated error bounds of ``predictions`` (from :meth:`predict` or :meth:`rollout`) of ``inputs`` (the
        inputs, or the given frames) at ``coverage``: an :class:`opformer.trust.calibration.Bounds` (the bound on
        each sample's relative L2 error, per frame of a rollout, or with ``joint`` for all its calibrated frames at
        once; the pointwise band; the flag of inputs unlike the calibration data). ``member``: the mixture member
        the inputs belong to."""
        if self.calibration is None:
            raise CheckpointError(f"{self.source}: no calibration loaded; calibrate the run (`opformer calibrate RUN`) "
                                  "and load it with opformer.load_surrogate(RUN)")
        return self.calibration.bounds(inputs, predictions, coverage, member, joint=joint)

    def _channel_text(self) -> str:
        count = len(self.input_channels)
        return f"1 to {count} channels" if self.padded else f"{count} channels {self.input_channels}"

    def time_stride(self, path: str | os.PathLike | None = None, name: str | None = None) -> int:
        """Stored frames between two frames the model sees: the run's ``rollout.time_stride`` (for a mixture
        member's file, or the member ``name``, the member's own)."""
        cfg = self.payload["run_config"]
        stride = cfg["rollout"].get("time_stride", 1)
        member = self.member(path, name)
        return (member.get("time_stride") or stride) if member else stride

    def member(self, path: str | os.PathLike | None, name: str | None = None) -> dict[str, Any] | None:
        """The mixture member named ``name`` (``opformer predict --member``; a one-line error for another name or a
        run of one data set), else the one stored in ``path``, if it is one."""
        members = self.payload["run_config"]["data"].get("mixture") or []
        if name is not None:
            names = [member_name(MixtureMember(**m)) for m in members]
            if name not in names:
                raise ConfigError(f"--member {name}: " + (f"expected one of {', '.join(names)}, the members of "
                                                          f"{self.source}'s mixture" if names else
                                                          f"{self.source} was not trained on a mixture"))
            return members[names.index(name)]
        if path is None:
            return None
        return next((m for m in members if Path(m["path"]).resolve() == Path(path).resolve()), None)

    def validated_frames(self, path: str | os.PathLike | None = None, name: str | None = None) -> int:
        """The rollout length the run was validated on: its ``rollout.eval_frames``, else the frames after
        ``t_in`` of its data file (of ``path``'s member, or the member ``name``, for a mixture run); a one-line
        error where unknown."""
        cfg = self.payload["run_config"]
        if cfg["rollout"].get("eval_frames"):
            return cfg["rollout"]["eval_frames"]
        member = self.member(path, name)
        data_path = member["path"] if member else None if self.padded else cfg["data"]["path"]
        if data_path is not None:
            try:
                frames = len(read_info(data_path).times[::self.time_stride(data_path)]) - self.t_in
            except DataError:
                frames = 0
            if frames > 0:
                return frames
        raise ConfigError(f"--frames: {self.source} records no rollout length for {path or 'this input'} (no "
                          "rollout.eval_frames and its validation data are not at hand); give --frames N")


def _masked(step: Step, mask: torch.Tensor) -> Step:
    """``step`` with the padded channels of its output zeroed before they are fed back (as
    :func:`opformer.eval.metrics.rollout_errors` does for a mixture member)."""
    return lambda x: step(x) * mask


def load_forecaster(run_dir: str | os.PathLike, device: str = "auto", batch_size: int | None = None) -> Forecaster:
    """A run directory's best (else last) checkpoint as a :class:`Forecaster` on ``device`` (``batch_size``:
    samples per model call, default the run's ``train.eval_batch_size``)."""
    checkpoint = run_checkpoint(run_dir)
    surrogate, payload = load_checkpoint_surrogate(checkpoint)
    batch = batch_size or payload["run_config"]["train"]["eval_batch_size"]
    if batch < 1:
        raise ConfigError(f"--batch-size {batch}: expected at least 1")
    return Forecaster(surrogate, payload, checkpoint, resolve_device(device), batch)


@dataclass
class Inputs:
    """The samples of an input file, read a block at a time: ``read(start, stop)`` gives samples
    ``start..stop-1`` as float32 ``(n, *shape)``: the inputs of an operator run, or the ``t_in`` context frames of
    a trajectory run (at the run's time stride, ending with the last stored frame)."""

    path: Path
    count: int
    shape: tuple[int, ...]
    read: Callable[[int, int], np.ndarray]
    info: DatasetInfo | None  # an HDF5 input's description; None for an array
    times: np.ndarray | None = None  # trajectories: the time of every stored frame
    stride: int = 1
    kinds: tuple[str, ...] | None = None  # the grid kinds of the input's axes
    handle: DataFile | None = None  # an HDF5 input's open file, closed by :meth:`close`
    member: str | None = None  # the mixture member the samples belong to, where named (``predict --member``)

    def close(self) -> None:
        """Close the input file (an array's memory map is released with the object)."""
        if self.handle is not None:
            self.handle.close()


def _expected(forecaster: Forecaster, frames: int | None) -> str:
    """The shape an array input must have, as text."""
    grid = [f"{forecaster.ndim} grid axes"] if forecaster.padded else [str(n) for n in forecaster.grid]
    channels = (f"1 to {len(forecaster.input_channels)} channels" if forecaster.padded
                else str(len(forecaster.input_channels)))
    return "(" + ", ".join(["N", *([f"T >= {frames}"] if frames else []), *grid, channels]) + ")"


def open_inputs(path: str | os.PathLike, forecaster: Forecaster, member: str | None = None) -> Inputs:
    """``path`` (opformer HDF5, or ``.npy``/``.npz``: the run's grid and channels assumed) checked against the
    run in one line before anything is read or written. ``member``: the mixture member the samples belong to
    (its time stride; default: the member whose file ``path`` is)."""
    path = Path(path)
    trajectory = forecaster.kind == TRAJECTORY
    stride = forecaster.time_stride(path, member)
    span = 1 + stride * (forecaster.t_in - 1) if trajectory else 0  # stored frames the context covers
    if path.suffix in ARRAY_SUFFIXES:
        return _array_inputs(path, forecaster, stride, span, member)
    info = read_info(path)
    if info.kind != forecaster.kind:
        raise ConfigError(f"--input {path}: holds {info.kind} data but {forecaster.source} was trained on "
                          f"{forecaster.kind} data")
    if forecaster.padded:
        if info.ndim != forecaster.ndim or len(info.input_channels) > len(forecaster.input_channels):
            raise DataError(f"{path}: {info.ndim}D data with {len(info.input_channels)} channels does not fit "
                            f"{forecaster.source}, a model of {forecaster.ndim}D data with up to "
                            f"{len(forecaster.input_channels)} channels")
    else:
        check_compatible(forecaster.surrogate, info, forecaster.source)
    channels = len(info.input_channels)
    if not trajectory:
        data = open_dataset_file(path)
        return Inputs(path, info.n_samples, (*info.spatial_shape, channels),
                      lambda start, stop: data.read("input", (slice(start, stop),)), info,
                      kinds=axis_kinds(info.domain), handle=data, member=member)
    stored = len(info.times)
    if stored < span:
        raise DataError(f"{path}: {stored} frames, but {forecaster.source} rolls out from {forecaster.t_in} frames "
                        f"{stride} stored frames apart ({span} frames)")
    frames, data = slice(stored - span, stored, stride), open_dataset_file(path)
    return Inputs(path, info.n_samples, (forecaster.t_in, *info.spatial_shape, channels),
                  lambda start, stop: data.read("fields", (slice(start, stop), frames)), info,
                  np.asarray(info.times), stride, axis_kinds(info.domain), data, member)


def _array_inputs(path: Path, forecaster: Forecaster, stride: int, span: int, member: str | None) -> Inputs:
    """An array file's samples; its shape must be the run's grid and channels (any grid and up to the model's
    channels for a padded run), trajectories at least ``span`` frames."""
    trajectory = forecaster.kind == TRAJECTORY
    key, array = sample_array(path, forecaster.kind)
    leading = 2 if trajectory else 1
    expected = _expected(forecaster, span)
    fits = array.ndim in (leading + forecaster.ndim, leading + forecaster.ndim + 1)
    if fits:
        shape = channel_last(path, key, array, leading, forecaster.ndim, False)
        grid, own = shape[leading - 1:-1], shape[-1]
        fits = ((1 <= own <= len(forecaster.input_channels)) if forecaster.padded else
                (grid == forecaster.grid and own == len(forecaster.input_channels)))
        fits = fits and (not trajectory or shape[0] >= span)
    if not fits:
        raise DataError(f"{path}: '{key}' has shape {tuple(array.shape)}, expected {expected} (the grid and "
                        f"channels of {forecaster.source})")
    if not trajectory:
        return Inputs(path, int(array.shape[0]), shape,
                      lambda start, stop: block(path, key, array, start, stop, shape, False), None, member=member)
    frames = shape[0]
    window = slice(frames - span, frames, stride)

    def read(start: int, stop: int) -> np.ndarray:
        return block(path, key, array, start, stop, shape, False)[:, window]

    return Inputs(path, int(array.shape[0]), (forecaster.t_in, *shape[1:]), read, None,
                  np.arange(frames, dtype=np.float64), stride, member=member)


def forecast_times(times: np.ndarray, stride: int, n: int) -> np.ndarray:
    """The times of ``n`` frames after the last of ``times``, ``stride`` stored frame steps apart (the last
    step's length; 1 for a single stored frame)."""
    step = float(times[-1] - times[-2]) if len(times) > 1 else 1.0
    return float(times[-1]) + stride * step * np.arange(1, n + 1)


def predict_file(run_dir: str | os.PathLike, input_path: str | os.PathLike, output_path: str | os.PathLike,
                 frames: int | None = None, batch_size: int | None = None, device: str = "auto",
                 annotate: Callable[[Forecaster, Inputs], Annotate] | None = None, member: str | None = None) -> Path:
    """Apply a run's best surrogate to every sample of ``input_path`` and write ``output_path`` atomically.

    Operator runs predict each input (at the file's grid). Trajectory runs roll out ``frames`` frames (default:
    :meth:`Forecaster.validated_frames`) after the last ``t_in`` given frames of each trajectory. The output is by
    its suffix: ``.npy`` (the predictions), ``.npz`` (operator: ``x`` the inputs, ``y`` the predictions;
    trajectories: ``fields`` the forecast frames, ``times`` their times), else opformer HDF5 (operator: the
    inputs and the predictions as ``target``; trajectories: the forecast frames, the input's attributes, times
    continued). Samples are read, predicted and written a chunk at a time into scratch files beside the output.
    ``annotate`` (given the forecaster and the opened inputs) gives each chunk's further arrays, written beside the
    predictions: ``NAME.npy`` entries of an ``.npz``, datasets ``/NAME`` of an HDF5 output (a ``.npy`` output, one
    array, is refused). ``member``: for a mixture run, the member the input's samples belong to (its time stride,
    rollout length and calibration; default: the member whose file the input is).
    """
    src, out = Path(input_path), Path(output_path)
    if out.resolve() == src.resolve():
        raise ConfigError(f"--output {output_path}: would overwrite the input file")
    forecaster = load_forecaster(run_dir, device, batch_size)
    trajectory = forecaster.kind == TRAJECTORY
    if frames is not None and not trajectory:
        raise ConfigError(f"--frames: {run_dir} is an operator run (one prediction per input), not a trajectory run")
    if frames is not None and frames < 1:
        raise ConfigError(f"--frames {frames}: expected at least 1 frame")
    if annotate is not None and out.suffix == ".npy":
        raise ConfigError(f"--output {output_path}: a .npy file holds the predictions only; write .npz or HDF5 to "
                          "keep the error bounds beside them")
    inputs = open_inputs(src, forecaster, member)
    try:
        n = (frames or forecaster.validated_frames(src, member)) if trajectory else 0
        extra = None if annotate is None else annotate(forecaster, inputs)
        out.parent.mkdir(parents=True, exist_ok=True)
        return _write_predictions(out, forecaster, inputs, n, extra)
    finally:
        inputs.close()


def _fill(forecaster: Forecaster, inputs: Inputs, n: int, preds: np.ndarray, copies: np.ndarray | None,
          keep: Callable[[int, int, torch.Tensor, torch.Tensor], None] | None = None) -> None:
    """Predict every sample of ``inputs`` (``n`` frames each for a trajectory run) into ``preds``, about
    :data:`~opformer.data.readers.source.CHUNK_BYTES` of samples at a time; ``copies`` receives the inputs;
    ``keep(start, stop, given, predictions)`` sees each chunk before it is stored and may replace predictions in
    place (``opformer predict --tolerance``: the samples the solver answers)."""
    from tqdm.auto import tqdm

    chunk = max(1, CHUNK_BYTES // (4 * (math.prod(inputs.shape) + math.prod(preds.shape[1:]))))
    with tqdm(total=inputs.count, desc="predict", unit="sample", disable=None) as bar:
        for start in range(0, inputs.count, chunk):
            stop = min(inputs.count, start + chunk)
            given = torch.from_numpy(np.require(inputs.read(start, stop), np.float32, ["C", "W"]))
            pred = forecaster.rollout(given, n, inputs.kinds) if n else forecaster.predict(given)
            if keep is not None:  # before the predictions are stored: it may replace some (the fallback's solves)
                keep(start, stop, given, pred)
            preds[start:stop] = pred.numpy()
            if copies is not None:
                copies[start:stop] = given.numpy()
            bar.update(stop - start)


def _write_predictions(out: Path, forecaster: Forecaster, inputs: Inputs, n: int,
                       annotate: Annotate | None = None) -> Path:
    """Stream the predictions (and ``annotate``'s arrays) into ``out`` (by its suffix, see :func:`predict_file`)
    through scratch files beside it (memory maps, removed afterwards); ``out`` appears only once complete."""
    trajectory = forecaster.kind == TRAJECTORY
    per_sample = ((n, *inputs.shape[1:]) if trajectory else
                  (*inputs.shape[:-1], len(forecaster.target_channels)))
    shape = (inputs.count, *per_sample)
    if out.suffix == ".npy":
        with atomic_replace(out, size=4 * math.prod(shape)) as tmp:
            preds = np.lib.format.open_memmap(tmp, "w+", np.float32, shape)
            _fill(forecaster, inputs, n, preds, None)
            preds.flush()
        return out
    # the scratch files and the file made from them lie side by side; refused before any write if they cannot
    # (a memory map past the disk's room or ulimit -f dies on a page fault or fails half-written)
    check_free_space(out, 8 * (math.prod(shape) + (0 if trajectory else inputs.count * math.prod(inputs.shape))))
    scratch = [atomic_path(out, ".scratch.npy") for _ in range(1 if trajectory else 2)]  # operators: the inputs too
    extras: dict[str, np.ndarray] = {}

    def keep(start: int, stop: int, given: torch.Tensor, pred: torch.Tensor) -> None:
        for name, array in annotate(given, pred).items():  # memory maps made on the first chunk
            if name not in extras:
                scratch.append(atomic_path(out, f".{name}.scratch.npy"))
                extras[name] = np.lib.format.open_memmap(scratch[-1], "w+", array.dtype,
                                                         (inputs.count, *array.shape[1:]))
            extras[name][start:stop] = array

    try:
        preds = np.lib.format.open_memmap(scratch[0], "w+", np.float32, shape)
        copies = None if trajectory else np.lib.format.open_memmap(scratch[1], "w+", np.float32,
                                                                   (inputs.count, *inputs.shape))
        _fill(forecaster, inputs, n, preds, copies, None if annotate is None else keep)
        times = forecast_times(inputs.times, inputs.stride, n) if trajectory else None
        if out.suffix != ".npz":
            return _write_hdf5(out, forecaster, inputs, preds, copies, times, extras)
        for array in (preds, copies, *extras.values()):
            if array is not None:
                array.flush()
        names = ["fields.npy"] if trajectory else ["y.npy", "x.npy"]
        names += [f"{name}.npy" for name in extras]
        with atomic_replace(out, size=sum(path.stat().st_size for path in scratch)) as tmp:
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
                for path, name in zip(scratch, names):
                    archive.write(path, name)
                if trajectory:
                    with archive.open("times.npy", "w") as f:
                        np.lib.format.write_array(f, times)
        return out
    finally:
        for path in scratch:
            path.unlink(missing_ok=True)


def _write_hdf5(out: Path, forecaster: Forecaster, inputs: Inputs, preds: np.ndarray, copies: np.ndarray | None,
                times: np.ndarray | None, extras: dict[str, np.ndarray] | None = None) -> Path:
    """The predictions as opformer HDF5, with the input file's attributes (an array's: the run's domain) and
    ``extras`` as further datasets."""
    info, spec, own = inputs.info, forecaster.surrogate.spec, inputs.shape[-1]
    solver = {"name": "opformer surrogate", "checkpoint": forecaster.source, "model": spec["model"]}
    if info is not None:
        common = {"pde": info.pde, "domain": info.domain, "seed": info.seed,
                  "extra": {**info.extra, "prediction_of": str(info.path)}}
        channels = (info.input_channels, info.target_channels)
    else:
        lengths = spec["data"].get("lengths", [1.0] * forecaster.ndim)
        common = {"pde": {"name": "unknown (predicted from an array)"}, "domain": domain(lengths, forecaster.kinds),
                  "seed": -1, "extra": {"prediction_of": str(inputs.path)}}
        channels = (forecaster.input_channels[:own], forecaster.target_channels[:own] if forecaster.padded
                    else forecaster.target_channels)
    if copies is not None:
        return write_operator_dataset(out, copies, preds, solver=solver, input_channels=channels[0],
                                      target_channels=channels[1], datasets=extras, **common)
    common["extra"].update({"given_frames": len(inputs.times), "time_stride": inputs.stride})
    if "times" in common["pde"]:  # a generated file's settings list its frames' times: the forecast's now
        common["pde"] = {**common["pde"], "times": times.tolist()}
    return write_trajectory_dataset(out, preds, times, solver=solver, channels=channels[0], datasets=extras,
                                    **common)
