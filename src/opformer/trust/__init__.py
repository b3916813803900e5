"""Trust in a surrogate's answers: calibrated error bounds (split conformal prediction) and the flag of inputs
unlike the calibration data. Serving them beside predictions, and the solver where they are too wide, is
:mod:`opformer.serve`'s."""

from opformer.trust.bounds import Bounds, BoundsAt, Calibration

__all__ = ["Bounds", "BoundsAt", "Calibration"]
