"""Operator-learning models and the registry that builds them from plain configs."""

from opformer.models.fno import FNO
from opformer.models.galerkin_transformer import GalerkinTransformer1d
from opformer.models.registry import MODELS, PRESETS, build_model, preset

__all__ = ["FNO", "GalerkinTransformer1d", "MODELS", "PRESETS", "build_model", "preset"]
