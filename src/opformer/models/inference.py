"""A surrogate applied: batched prediction, the steps of a rollout, frames resized for a model whose weights fix
its grid, and the check that a data file fits the model. Evaluation, calibration, training's validation and
serving (``opformer predict``) share these; :func:`predict_mesh` applies a mesh surrogate to samples of
varying point counts.

A step maps ``t_in`` context frames ``(batch, *spatial, t_in, channels)`` to the next ``t_out`` frames
(temporal bundling); a rollout feeds its own predictions back as context.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from opformer.data.mesh_splits import Rows, pad
from opformer.data.resize import resize
from opformer.data.store import DatasetInfo
from opformer.errors import DataError
from opformer.kinds import MESH
from opformer.models.mesh_surrogate import MeshSurrogate
from opformer.models.surrogate import Surrogate

#: A model call on context frames: ``(batch, *spatial, t_in, channels)`` -> the next frames.
Step = Callable[[torch.Tensor], torch.Tensor]


@torch.no_grad()
def predict(surrogate: Surrogate, inputs: torch.Tensor, batch_size: int, device: torch.device,
            progress: Callable[[int], object] | None = None, noise: torch.Tensor | None = None) -> torch.Tensor:
    """Apply the surrogate to ``inputs`` in batches; returns predictions on the CPU.

    ``noise`` (the shape of ``inputs``, optional) is added to the normalized inputs (see :class:`Surrogate`).
    ``progress`` is called with the number of samples of each finished batch.
    """
    surrogate.eval()
    outputs = []
    for start in range(0, inputs.shape[0], batch_size):
        batch = slice(start, start + batch_size)
        extra = None if noise is None else noise[batch].to(device)
        outputs.append(surrogate(inputs[batch].to(device), extra).cpu())
        if progress is not None:
            progress(outputs[-1].shape[0])
    return torch.cat(outputs) if outputs else inputs.new_zeros((0,))


def advance(context: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """The next context: the last ``t_in`` frames of ``context`` followed by ``new`` (time axis -2)."""
    t_in = context.shape[-2]
    return torch.cat([context, new], dim=-2)[..., -t_in:, :]


def rollout(step: Step, context: torch.Tensor, n_frames: int) -> torch.Tensor:
    """Predict ``n_frames`` frames after ``context`` by repeated calls of ``step`` (the last call truncated)."""
    frames = []
    produced = 0
    while produced < n_frames:
        new = step(context)
        frames.append(new)
        produced += new.shape[-2]
        context = advance(context, new)
    return torch.cat(frames, dim=-2)[..., :n_frames, :]


class ResizedStep:
    """A model that runs on one grid (``grid``) applied to frames on another: each input window is resized to
    ``grid`` (by the data's axis kinds: Fourier on periodic axes, else linear or cell means) and the prediction
    back to the input's grid, where it is measured."""

    def __init__(self, step: Step, grid: tuple[int, ...], kinds: tuple[str, ...]) -> None:
        self.step, self.grid, self.kinds = step, grid, kinds

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        stored = tuple(x.shape[1:1 + len(self.grid)])
        y = self.step(resize(x, 1, self.grid, self.kinds))
        return resize(y, 1, stored, self.kinds)


def check_compatible(surrogate: Surrogate, info: DatasetInfo, source: str,
                     channels: tuple[list[str], list[str]] | None = None) -> None:
    """Raise a one-line error if a data file does not fit the model a checkpoint was trained for.

    ``channels`` (input, target) overrides the file's own, for a split read in the inverse direction. A model
    that ``opformer import`` wrote knows how many channels it takes, not their names: only their number counts.
    """
    data = surrogate.spec["data"]
    inputs, targets = channels or (info.input_channels, info.target_channels)
    if data.get("imported"):
        fits = (info.ndim, len(inputs), len(targets)) == (len(data["stored_shape"]), len(data["input_channels"]),
                                                          len(data["target_channels"]))
    else:
        fits = (info.ndim, inputs, targets) == (len(data["stored_shape"]), data["input_channels"],
                                                data["target_channels"])
    if not fits:
        raise DataError(
            f"{info.path}: {info.ndim}D data with channels {inputs} -> {targets} does not "
            f"fit {source}, a model of {len(data['stored_shape'])}D data with channels {data['input_channels']} -> "
            f"{data['target_channels']}")


@torch.no_grad()
def predict_mesh(surrogate: MeshSurrogate, rows: Sequence[Rows], batch_size: int, device: torch.device
                 ) -> list[torch.Tensor]:
    """A mesh surrogate applied to samples' rows (:func:`opformer.data.mesh_splits.sample_rows`), ``batch_size``
    samples padded together per call; each sample's prediction ``(points, out_channels)`` on the CPU, unpadded
    (a padded batch gives each sample what it alone gives)."""
    surrogate.eval()
    dtype = next(surrogate.parameters()).dtype
    outputs: list[torch.Tensor] = []
    for start in range(0, len(rows), batch_size):
        part = rows[start:start + batch_size]
        x, pos, weights, mask, _ = pad(list(part))
        pred = surrogate(x.to(device, dtype), pos.to(device, dtype), weights.to(device, dtype), mask.to(device))
        outputs.extend(pred[b, :len(r[1])].cpu() for b, r in enumerate(part))
    return outputs


def check_mesh_compatible(surrogate: MeshSurrogate, info: DatasetInfo, source: str, targets: bool = True) -> None:
    """Raise a one-line error unless a mesh file holds the fields a mesh run maps (its inputs; with ``targets``,
    its targets too) on points of the run's dimension."""
    data = surrogate.spec["data"]
    if info.kind != MESH:
        raise DataError(f"{info.path}: holds {info.kind} data on a grid; {source} is a model of mesh data")
    fits = info.mesh["dim"] == data["space_dim"] and list(info.input_channels) == data["input_channels"]
    if targets:
        fits = fits and info.has_target and list(info.target_channels) == data["target_channels"]
    if not fits:
        held = list(info.target_channels) if info.has_target else "no targets"
        raise DataError(f"{info.path}: {info.mesh['dim']}D mesh data with channels {list(info.input_channels)} -> "
                        f"{held} does not fit {source}, a model of {data['space_dim']}D mesh data with channels "
                        f"{data['input_channels']} -> {data['target_channels']}")
