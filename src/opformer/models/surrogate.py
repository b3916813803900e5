"""A trained surrogate: input normalizer -> model -> target de-normalizer, rebuilt from plain config."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from opformer.data.normalize import UnitGaussianNormalizer
from opformer.models.mesh_surrogate import MESH_LAYOUT, MeshSurrogate
from opformer.models.registry import build_model


def zero_boundary(y: torch.Tensor) -> torch.Tensor:
    """``y`` ``(batch, *spatial, channels)`` with every boundary point of every spatial axis set to zero."""
    mask = torch.ones(y.shape[1:-1], dtype=y.dtype, device=y.device)
    for axis in range(mask.dim()):
        mask.narrow(axis, 0, 1).zero_()
        mask.narrow(axis, mask.shape[axis] - 1, 1).zero_()
    return y * mask.unsqueeze(-1)


def channel_padding(model_config: dict[str, Any], data: dict[str, Any]) -> int:
    """Zero channels appended to the data's to make the model's ``in_channels`` (DPOT pads every data set to
    the pre-trained count, so a fine-tuned model keeps it): where the inputs and targets are the same fields
    (trajectories, mixtures) and the model returns as many channels as it takes; 0 elsewhere."""
    built, out = model_config.get("in_channels"), model_config.get("out_channels")
    if built is None or data["input_channels"] != data["target_channels"] or out not in (None, built):
        return 0
    return max(built - len(data["input_channels"]), 0)


class Surrogate(nn.Module):
    """What is trained, checkpointed and applied: ``decode(model(encode(x)))`` in physical units.

    ``spec`` is a JSON-serialisable description (model config, normalizer settings, data signature, output
    boundary condition) from which :meth:`from_spec` rebuilds an identical module without the original YAML.
    With ``spec["boundary"] == "dirichlet"`` the de-normalized output is set to zero on the boundary. A model
    with more channels than the data (:func:`channel_padding`) gets the normalized input with zero channels
    appended, and its output's first channels (the data's) are the prediction. A time model (one that takes
    ``t_in`` frames: DPOT, FNO2d-time) on operator data (input -> target pairs, no ``t_in`` in the data
    signature) sees each input as one frame and returns one: the steady transfer of DPOT (Hao et al. 2024).
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self.spec = spec
        self.model = build_model(spec["model"])
        data = spec["data"]
        periodic = tuple(data.get("grid", data["periodic"]))  # grid kinds (bools in older specs)
        shape = tuple(data["stored_shape"])
        self.input_normalizer = UnitGaussianNormalizer(spec["normalize_input"], shape, len(data["input_channels"]),
                                                       periodic)
        self.target_normalizer = UnitGaussianNormalizer(spec["normalize_target"],
                                                        tuple(data.get("target_shape", shape)),
                                                        len(data["target_channels"]), periodic)
        self.dirichlet = spec.get("boundary", "none") == "dirichlet"
        self.padding = channel_padding(self.model.config, data)
        self.one_frame = "t_in" in self.model.config and "t_in" not in data

    @property
    def fixed_grid(self) -> bool:
        """Whether the model's weights fix its grid (a class attribute ``fixed_grid``: DPOT's learned positional
        embedding), so that inputs on another grid are resized to the recorded one; other models run on any grid."""
        return bool(getattr(self.model, "fixed_grid", False))

    @property
    def config(self) -> dict[str, Any]:
        """The model's config (defaults filled in), read by the checks of a model against the data."""
        return self.model.config

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Surrogate | MeshSurrogate:
        """Rebuild from :attr:`spec` (e.g. as stored in a checkpoint): a :class:`MeshSurrogate` for mesh data."""
        return MeshSurrogate(spec) if spec["data"].get("layout") == MESH_LAYOUT else cls(spec)

    def forward(self, x: torch.Tensor, input_noise: torch.Tensor | None = None) -> torch.Tensor:
        """Predict targets in physical units from inputs in physical units (channel-last).

        ``input_noise`` (the shape of ``x``) is added to the *normalized* input: with a point-wise normalizer,
        ``eps * N(0, 1)`` there is noise of ``eps`` times the training data's per-point standard deviation.
        """
        z = self.input_normalizer.encode(x)
        if input_noise is not None:
            z = z + input_noise
        if self.one_frame:
            z = z.unsqueeze(-2)
        if self.padding:
            z = torch.cat([z, z.new_zeros((*z.shape[:-1], self.padding))], dim=-1)
            y = self.model(z)[..., :-self.padding]
        else:
            y = self.model(z)
        if self.one_frame:
            y = y.squeeze(-2)
        y = self.target_normalizer.decode(y)
        return zero_boundary(y) if self.dirichlet else y
