"""A trained surrogate: input normaliser -> model -> target de-normaliser, rebuilt from plain config."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from opformer.data.normalize import UnitGaussianNormalizer
from opformer.models.registry import build_model


class Surrogate(nn.Module):
    """What is trained, checkpointed and applied: ``decode(model(encode(x)))`` in physical units.

    ``spec`` is a JSON-serialisable description (model config, normaliser settings, data signature) from
    which :meth:`from_spec` rebuilds an identical module without the original YAML.
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self.spec = spec
        self.model = build_model(spec["model"])
        data = spec["data"]
        periodic = tuple(data["periodic"])
        shape = tuple(data["stored_shape"])
        self.input_normalizer = UnitGaussianNormalizer(spec["normalize_input"], shape, len(data["input_channels"]),
                                                       periodic)
        self.target_normalizer = UnitGaussianNormalizer(spec["normalize_target"], shape,
                                                        len(data["target_channels"]), periodic)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Surrogate:
        """Rebuild from :attr:`spec` (e.g. as stored in a checkpoint)."""
        return cls(spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Predict targets in physical units from inputs in physical units (channel-last)."""
        return self.target_normalizer.decode(self.model(self.input_normalizer.encode(x)))
