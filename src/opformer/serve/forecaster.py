"""Forecasts from any trained run: the surrogate in place of its solver, in physical units, with its bounds.

:func:`load_surrogate` (``opformer.load_surrogate``) opens a run directory's best checkpoint as a
:class:`Forecaster`, with the run's calibration when it has one. An operator run maps inputs to targets
(:meth:`Forecaster.predict`); a trajectory run rolls out ``n`` frames after the last ``t_in`` given ones
(:meth:`Forecaster.rollout`) with exactly the step its evaluation uses: repeated calls of the surrogate
(:func:`opformer.models.inference.rollout`), each giving the model's ``t_out`` bundled frames (a latent-marching model's
``k`` marched frames per call), whatever strategy trained it. A run trained on a mixture of data sets, and imported
trajectory weights, take any number of channels up to the model's: they are zero-padded and the padded outputs
zeroed before they are fed back. A model whose weights fix its grid (an imported DPOT) sees frames resized to the
grid it was built for and its predictions back, as :mod:`opformer.eval.mixture` evaluates it; every other model runs
on the input's grid. The forecast has the input's grid and channels.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from opformer.data.mixture import MixtureMember, member_name, pad_channels
from opformer.data.readers.source import OPERATOR, TRAJECTORY
from opformer.data.store import read_info
from opformer.errors import CheckpointError, ConfigError, DataError
from opformer.grids import axis_kinds
from opformer.kinds import MESH
from opformer.models.inference import ResizedStep, Step, predict, rollout
from opformer.runs import Run
from opformer.runtime import resolve_device
from opformer.trust.bounds import Bounds, BoundsAt, Calibration
from opformer.trust.estimates import backtest_errors
from opformer.trust.storage import load_calibration

if TYPE_CHECKING:
    from opformer.serve.mesh_predict import MeshForecaster


class Forecaster:
    """A run's surrogate applied to new data: CPU tensors (or numpy arrays) in and the same out, in physical units,
    batched on ``device``.

    ``kind`` is ``"operator"`` or ``"trajectory"``. Operator runs: :meth:`predict` maps ``(batch, *grid,
    in_channels)`` to ``(batch, *grid, out_channels)``. Trajectory runs: :meth:`rollout` maps given frames
    ``(batch, time, *grid, channels)`` (at the run's frame spacing; the last ``t_in`` are used) to the next ``n``
    ``(batch, n, *grid, channels)``, and :meth:`predict` is one call (the next ``t_out`` frames). One channel may
    leave out its channel axis (``(batch, *grid)``, ``(batch, time, *grid)``), as ``opformer predict``'s arrays
    and the data writers may: the predictions have it. ``padded``: a mixture run or imported trajectory weights,
    which take 1 to ``len(input_channels)`` channels on any grid. :meth:`bounds` gives calibrated error bounds of
    their predictions (:mod:`opformer.trust`).
    """

    def __init__(self, run: Run, device: torch.device, batch_size: int, calibration: Calibration | None = None
                 ) -> None:
        self.run = run
        self.surrogate = run.surrogate.to(device).eval()
        self.payload, self.source = run.payload, str(run.checkpoint())
        self.device, self.batch_size = device, batch_size
        data = self.surrogate.spec["data"]
        self.kind = TRAJECTORY if "t_in" in data else OPERATOR
        self.t_in: int | None = data.get("t_in")
        self.t_out: int | None = data.get("t_out")
        self.grid = tuple(data["stored_shape"])
        self.kinds = axis_kinds(data)
        self.input_channels, self.target_channels = list(data["input_channels"]), list(data["target_channels"])
        self.padded = run.is_mixture or run.as_member
        # a mixture run was validated on its members' stored grids; other weights that fix their grid see it
        self.resized = run.as_member and self.surrogate.fixed_grid
        if self.padded and len(self.target_channels) != len(self.input_channels):
            raise ConfigError(f"{self.source}: a model of {len(self.input_channels)} input and "
                              f"{len(self.target_channels)} output channels cannot roll out")
        self.dtype = next(self.surrogate.parameters()).dtype
        #: the run's calibration (:func:`load_surrogate` attaches it when the run has one); :meth:`bounds` uses it
        self.calibration = calibration

    @property
    def ndim(self) -> int:
        """Spatial dimensions of the run's data."""
        return len(self.grid)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """The surrogate's prediction for ``x``, in physical units.

        Parameters
        ----------
        x
            Operator runs: inputs ``(batch, *grid, in_channels)`` on any grid of the run's domain (one channel:
            ``(batch, *grid)`` too). Trajectory runs: given frames ``(batch, time, *grid, channels)``, ``time >=
            t_in`` (the last ``t_in`` are the context). A torch tensor or a numpy array.

        Returns
        -------
        torch.Tensor or numpy.ndarray
            Operator runs: the predicted targets ``(batch, *grid, out_channels)``. Trajectory runs: the next
            ``t_out`` frames ``(batch, t_out, *grid, channels)`` (one call of the model). On the CPU; a numpy
            array for a numpy array.

        Raises
        ------
        opformer.errors.DataError
            ``x`` is neither a tensor nor a numpy array of numbers, or does not have the shape the run takes.
        """
        if self.kind == TRAJECTORY:
            return self.rollout(x, self.t_out)
        expected = f"(batch, {self.ndim} grid axes, {len(self.input_channels)} channels {self.input_channels})"
        x, array = self._tensor(x, "inputs", expected, leading=1)
        if x.dim() != self.ndim + 2 or x.shape[-1] != len(self.input_channels):
            raise DataError(f"inputs of shape {tuple(x.shape)}: {self.source} takes {expected}"
                            + self._one_channel_text(1))
        out = predict(self.surrogate, x.to(self.dtype), self.batch_size, self.device)
        return out.numpy() if array else out

    def _tensor(self, x: Any, name: str, expected: str, leading: int | None) -> tuple[torch.Tensor, bool]:
        """``x`` as a tensor (a numpy array's values shared where they can be), and whether it was a numpy array;
        one channel's axis added where ``x`` leaves it out (``leading`` axes before the grid's; None: never); a
        one-line error for anything else."""
        array = isinstance(x, np.ndarray)
        if array:
            try:
                x = torch.from_numpy(np.ascontiguousarray(x))
            except TypeError:
                raise DataError(f"{name} of dtype {x.dtype}: expected numbers {expected}") from None
        elif not isinstance(x, torch.Tensor):
            raise DataError(f"{name} of type {type(x).__name__}: expected a torch.Tensor or a numpy array {expected}")
        if (leading is not None and x.dim() == leading + self.ndim
                and (self.padded or len(self.input_channels) == 1)):
            x = x.unsqueeze(-1)  # one channel, its axis left out
        return x, array

    def _one_channel_text(self, leading: int) -> str:
        """What a run of one channel takes besides, as text."""
        if self.padded or len(self.input_channels) == 1:
            axes = ["batch", *(["time"] if leading == 2 else []), f"{self.ndim} grid axes"]
            return f" or ({', '.join(axes)}) for one channel"
        return ""

    def rollout(self, frames: torch.Tensor, n: int, kinds: Sequence[str] | None = None) -> torch.Tensor:
        """A trajectory run's forecast: ``n`` frames after the given ones, each call's predictions fed back.

        Parameters
        ----------
        frames
            Given frames ``(batch, time, *grid, channels)`` at the run's frame spacing, ``time >= t_in``; the last
            ``t_in`` are the context. A mixture run or imported weights take 1 to ``len(input_channels)`` channels;
            one channel may leave out its axis. A torch tensor or a numpy array.
        n
            Frames to forecast (at least 1).
        kinds
            The grid kinds of the frames' axes, where a model whose weights fix its grid resizes them (default
            the run's).

        Returns
        -------
        torch.Tensor or numpy.ndarray
            ``(batch, n, *grid, channels)`` on the CPU: the input's grid and channels (a numpy array for a numpy
            array).

        Raises
        ------
        opformer.errors.ConfigError
            An operator run, or ``n < 1``.
        opformer.errors.DataError
            ``frames`` are neither a tensor nor a numpy array of numbers, or do not have the shape the run takes.
        """
        if self.kind != TRAJECTORY:
            raise ConfigError(f"{self.source}: an operator run has no rollout; use predict(x)")
        if n < 1:
            raise ConfigError(f"frames {n}: expected at least 1 frame to roll out")
        expected = f"(batch, time >= {self.t_in}, {self.ndim} grid axes, {self._channel_text()})"
        frames, array = self._tensor(frames, "frames", expected, leading=2)
        own = frames.shape[-1] if frames.dim() else 0
        channels = len(self.input_channels)
        if (frames.dim() != self.ndim + 3 or frames.shape[1] < self.t_in or
                not (1 <= own <= channels if self.padded else own == channels)):
            raise DataError(f"frames of shape {tuple(frames.shape)}: {self.source} takes {expected}"
                            + self._one_channel_text(2))
        context = frames[:, -self.t_in:].to(self.dtype)
        step: Step = self.surrogate
        if self.padded:
            context = pad_channels(context, channels)
            if self.resized and tuple(frames.shape[2:-1]) != self.grid:  # the grid its weights fix
                step = ResizedStep(self.surrogate, self.grid, tuple(kinds or self.kinds))
            step = _masked(step, (torch.arange(channels) < own).to(self.device))
        out = [frames.new_zeros((0, n, *frames.shape[2:-1], own), dtype=self.dtype)]
        with torch.no_grad():
            for start in range(0, len(context), self.batch_size):
                window = context[start:start + self.batch_size].movedim(1, -2).to(self.device)
                out.append(rollout(step, window, n).movedim(-2, 1)[..., :own].cpu())
        return torch.cat(out).numpy() if array else torch.cat(out)

    def bounds(self, inputs: torch.Tensor, predictions: torch.Tensor, coverage: float = 0.9,
               member: str | None = None, joint: bool = False, score: str | None = None) -> Bounds:
        """Calibrated error bounds of predictions made by :meth:`predict` or :meth:`rollout`.

        Parameters
        ----------
        inputs
            The inputs of the predictions (operator runs), or the given frames (trajectory runs): the last ``t_in``
            are the context; frames before them serve the ``backtest`` score where the calibration has one. A
            torch tensor or a numpy array, as given to :meth:`predict` or :meth:`rollout`.
        predictions
            What :meth:`predict` or :meth:`rollout` returned for them. The bounds are tensors either way.
        coverage
            The probability, strictly between 0 and 1, with which each bound holds for inputs like the
            calibration data.
        member
            A mixture run: the member the inputs belong to (its calibration).
        joint
            A rollout: bounds on each forecast's relative L2 error that hold for all its calibrated frames at once.
        score
            The per-sample score (one the calibration offers; default its choice on the validation split).

        Returns
        -------
        opformer.trust.Bounds
            ``relative_l2``: the bound on each sample's relative L2 error (rollouts: per sample and frame);
            ``lower``/``upper``: the pointwise band (the predictions' shape); ``flagged``: True where the input is
            unlike the calibration data (the bounds are not guaranteed there); ``coverage``.

        Raises
        ------
        opformer.errors.CheckpointError
            The run has no calibration (run ``opformer calibrate RUN``).
        opformer.errors.ConfigError
            A coverage outside (0, 1), an unknown member, or predictions that do not fit the calibration.
        """
        leading = 2 if self.kind == TRAJECTORY else 1
        inputs = self._tensor(inputs, "inputs", "of the predictions' inputs", leading)[0]
        predictions = self._tensor(predictions, "predictions", "as predict or rollout returned them", None)[0]
        return self.bounded(self.bounds_at(coverage, member, joint, score), inputs, predictions)

    def bounds_at(self, coverage: float, member: str | None = None, joint: bool = False, score: str | None = None
                  ) -> BoundsAt:
        """The calibration's bounds at ``coverage`` for ``member`` (see :meth:`bounds`), their quantiles computed
        once: apply the result to each batch with :meth:`bounded`. ``joint`` is ignored for an operator run (its
        one bound holds jointly already)."""
        if self.calibration is None:
            raise CheckpointError(f"{self.source}: no calibration loaded; calibrate the run (`opformer calibrate RUN`) "
                                  "and load it with opformer.load_surrogate(RUN)")
        return self.calibration.at(coverage, member, score=score, joint=joint and self.kind == TRAJECTORY)

    def bounded(self, bounds: BoundsAt, inputs: torch.Tensor, predictions: torch.Tensor,
                kinds: Sequence[str] | None = None) -> Bounds:
        """``bounds`` applied to predictions of ``inputs``: a trajectory's last ``t_in`` given frames are the
        context the statistics and estimates see; frames given before them, where the calibration has a backtest
        of that many, are forecast from the ``t_in`` before them for the backtest's error."""
        if self.kind != TRAJECTORY:
            return bounds(inputs, predictions)
        extra, t_in = bounds.group.backtest, self.t_in
        backtest = None
        if extra and inputs.shape[1] >= t_in + extra:
            given = inputs[:, -(t_in + extra):]
            backtest = backtest_errors(self.rollout(given[:, :t_in], extra, kinds), given[:, t_in:])
        return bounds(inputs[:, -t_in:], predictions, backtest)

    def given_frames(self) -> dict[str, int]:
        """Where the calibration's given frames start (``start``: a stored frame index) and how many come before
        its context for the backtest (``backtest``), else 0 and 0 (a mixture's members are calibrated from their
        first frames): a forecast's bounds hold for a context at the same frame; ``opformer predict`` gives each
        input that many frames before its context where it holds them."""
        if self.calibration is None or self.kind != TRAJECTORY or len(self.calibration.groups) != 1:
            return {"start": 0, "backtest": 0}
        group = self.calibration.group()
        return {"start": int(self.calibration.source.get("start", 0)), "backtest": group.backtest}

    def calibrated_member(self, path: str | os.PathLike, name: str | None = None) -> str | None:
        """The calibrated data set an input file belongs to: None for a run of one data file, else the mixture
        member ``name`` (``predict --member``) or the one stored in ``path`` (a one-line error for another file: a
        mixture's bounds hold per member)."""
        groups = self.calibration.groups if self.calibration is not None else {}
        if len(groups) <= 1:
            return None
        found = self.member(path, name)
        if found is None:
            raise ConfigError(f"--coverage: {self.source} is calibrated per member of its mixture "
                              f"({', '.join(groups)}); {path} is none of their files (name its member with --member)")
        return member_name(found)

    def _channel_text(self) -> str:
        count = len(self.input_channels)
        return f"1 to {count} channels" if self.padded else f"{count} channels {self.input_channels}"

    def time_stride(self, path: str | os.PathLike | None = None, name: str | None = None) -> int:
        """Stored frames between two frames the model sees: the run's ``rollout.time_stride`` (for a mixture
        member's file, or the member ``name``, the member's own)."""
        cfg = self.payload["run_config"]
        stride = cfg["rollout"].get("time_stride", 1)
        member = self.member(path, name)
        return (member.time_stride or stride) if member else stride

    def member(self, path: str | os.PathLike | None, name: str | None = None) -> MixtureMember | None:
        """The mixture member named ``name`` (``opformer predict --member``; a one-line error for another name or a
        run of one data set), else the one stored in ``path``, if it is one."""
        members = self.run.members
        if name is not None:
            names = [member_name(m) for m in members]
            if name not in names:
                raise ConfigError(f"--member {name}: " + (f"expected one of {', '.join(names)}, the members of "
                                                          f"{self.source}'s mixture" if names else
                                                          f"{self.source} was not trained on a mixture"))
            return members[names.index(name)]
        if path is None:
            return None
        return next((m for m in members if Path(m.path).resolve() == Path(path).resolve()), None)

    def validated_frames(self, path: str | os.PathLike | None = None, name: str | None = None) -> int:
        """The rollout length the run was validated on: its ``rollout.eval_frames``, else the frames after
        ``t_in`` of its data file (of ``path``'s member, or the member ``name``, for a mixture run); a one-line
        error where unknown."""
        cfg = self.payload["run_config"]
        if cfg["rollout"].get("eval_frames"):
            return cfg["rollout"]["eval_frames"]
        member = self.member(path, name)
        data_path = member.path if member else None if self.padded else cfg["data"]["path"]
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


def open_forecaster(run_dir: str | os.PathLike | Run, device: str = "auto", batch_size: int | None = None,
                    calibrated: bool = False) -> Forecaster:
    """A run's :class:`Forecaster` on ``device`` (``batch_size``: samples per model call, default the run's
    ``train.eval_batch_size``), with its calibration where ``calibrated`` (a one-line error where it has none)."""
    run = Run.open(run_dir)
    calibration = load_calibration(run) if calibrated else None
    return Forecaster(run, resolve_device(device), run.eval_batch_size(batch_size), calibration)


def load_surrogate(run_dir: str | os.PathLike | Run, device: str = "auto", batch_size: int | None = None
                   ) -> Forecaster | MeshForecaster:
    """Open a trained (or imported) run for predictions: ``opformer.load_surrogate``.

    Parameters
    ----------
    run_dir
        The run directory (or an opened :class:`~opformer.runs.Run`); its best checkpoint is used.
    device
        ``"auto"`` (CUDA where available), ``"cpu"`` or ``"cuda[:N]"``: where the model runs.
    batch_size
        Samples per model call; default the run's ``train.eval_batch_size``.

    Returns
    -------
    Forecaster
        The run's surrogate in physical units, with the run's calibration attached when it has one (checked
        against the checkpoint), so that :meth:`Forecaster.bounds` answers. A mesh run's is a
        :class:`~opformer.serve.mesh_predict.MeshForecaster` (mesh samples in, their predicted fields out).

    Raises
    ------
    opformer.errors.CheckpointError
        The folder holds no run, its checkpoint is missing or damaged, or its calibration calibrates another
        checkpoint.
    """
    run = Run.open(run_dir)
    if run.kind == MESH:  # mesh samples in, each sample's predicted fields out
        from opformer.serve.mesh_predict import open_mesh_forecaster

        return open_mesh_forecaster(run, device, batch_size, calibrated=run.calibrated)
    return open_forecaster(run, device, batch_size, calibrated=run.calibrated)
