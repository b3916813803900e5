"""A trained surrogate on meshes: input normalizer -> mesh model -> target de-normalizer, rebuilt from plain config."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from opformer.data.normalize import UnitGaussianNormalizer
from opformer.errors import ConfigError
from opformer.models.registry import build_model

#: ``spec["data"]["layout"]`` of a surrogate on mesh data
MESH_LAYOUT = "mesh"


class MeshSurrogate(nn.Module):
    """What a mesh run trains and checkpoints: ``decode(model(encode(x), pos, weights, mask))`` in physical units,
    zero on padding.

    ``spec`` as :class:`~opformer.models.surrogate.Surrogate`'s, with ``data`` ``{"layout": "mesh", "space_dim",
    "input_channels", "target_channels", "input_fields", "target_fields"}`` (the fields as ``[name, channels]``
    pairs); the normalizers keep one mean and standard deviation per channel
    (``channel``) or none (``none``): a mesh has no grid for point-wise statistics. The model is a mesh model
    (``model(x, pos, weights, mask)``, :mod:`opformer.models.mesh_batch`).
    """

    padding = 0  # no channels appended to the data's
    fixed_grid = False

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self.spec = spec
        self.model = build_model(spec["model"])
        if not getattr(self.model, "mesh", False):
            raise ConfigError(f"model.name: {spec['model']['name']!r} is a grid model; mesh data needs a mesh model "
                              "(galerkin_transformer_mesh, transolver, mesh_mlp)")
        data = spec["data"]
        for key in ("normalize_input", "normalize_target"):
            if spec[key] == "pointwise":
                raise ConfigError(f"data.{key}: 'pointwise' needs a grid; on a mesh use 'channel' or 'none'")
        self.input_normalizer = UnitGaussianNormalizer(spec["normalize_input"], (), len(data["input_channels"]), ())
        self.target_normalizer = UnitGaussianNormalizer(spec["normalize_target"], (), len(data["target_channels"]),
                                                        ())

    @property
    def config(self) -> dict[str, Any]:
        """The model's config (defaults filled in)."""
        return self.model.config

    def forward(self, x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Predict the targets ``(B, N, c_out)`` in physical units from a padded batch of mesh samples."""
        y = self.model(self.input_normalizer.encode(x), pos, weights, mask)
        return self.target_normalizer.decode(y) * mask.unsqueeze(-1).to(y.dtype)
