"""A run's calibration, by the names it has always been imported under: the bounds (:mod:`opformer.trust.bounds`),
calibrating (:mod:`opformer.trust.calibrating`) and storage (:mod:`opformer.trust.storage`)."""

from opformer.runs import CALIBRATION
from opformer.trust.bounds import Bounds, BoundsAt, Calibration, Group
from opformer.trust.calibrating import SELECTION_COVERAGE, SELECTION_MARGIN, Scores, calibrate_run, score_split, select
from opformer.trust.storage import load_calibration, save_calibration

__all__ = ["CALIBRATION", "SELECTION_COVERAGE", "SELECTION_MARGIN", "Bounds", "BoundsAt", "Calibration", "Group",
           "Scores", "calibrate_run", "load_calibration", "save_calibration", "score_split", "select"]
