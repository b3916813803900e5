"""Serving predictions: a run's surrogate as a :class:`Forecaster` (``opformer.load_surrogate``) with its calibrated
bounds, ``opformer predict``'s input and output files, and the solver where a bound fails (``--tolerance``)."""

from opformer.serve.forecaster import Forecaster, load_surrogate
from opformer.serve.predict import predict_file

__all__ = ["Forecaster", "load_surrogate", "predict_file"]
