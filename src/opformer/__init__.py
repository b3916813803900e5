"""opformer: transformer neural operators with built-in PDE data generators."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "build_model", "load_surrogate"]


def __getattr__(name: str) -> Any:
    # build_model and load_surrogate import torch; keep `import opformer` (and `opformer --version`) light.
    if name == "build_model":
        from opformer.models.registry import build_model

        return build_model
    if name == "load_surrogate":  # the forecaster with the run's calibration attached (opformer.serve)
        from opformer.serve.forecaster import load_surrogate

        return load_surrogate
    raise AttributeError(f"module 'opformer' has no attribute {name!r}")
