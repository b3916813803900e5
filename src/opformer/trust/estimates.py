"""The difficulty of each per-sample score for new inputs: what a calibration sample's relative L2 error is divided
by, and a new input's bound multiplied by (:mod:`opformer.trust.scores`).

- ``relative_l2``: 1 (the plain error);
- ``roughness``: the input's roughness (:func:`opformer.trust.shift.roughness`);
- ``residual``: the physics estimate of the prediction's error (:mod:`opformer.trust.physics`): a Darcy prediction's
  residual estimate, a vorticity forecast's accumulated step residuals per frame; offered where the calibration
  data file's ``pde`` settings name an equation with an estimate (:func:`physics_settings`);
- ``backtest``: the surrogate's observed relative L2 error on the input's own last given frames, rolled out from the
  ``t_in`` frames before them (a trajectory input given more frames than ``t_in``; computed by the caller, who holds
  the model).

The physics settings a calibration records (:func:`physics_settings`) are JSON: the PDE's name and the settings its
estimate needs, and for trajectories the time between the frames the model sees. A Darcy calibration records the
tolerance its estimates were computed to; one that records none was computed with one Poisson solve, and its new
inputs are estimated so too (the stored estimates and the new ones then come from the same estimator).
"""

from __future__ import annotations

from typing import Any

import torch

from opformer.data.store import DatasetInfo
from opformer.kinds import OPERATOR, TRAJECTORY
from opformer.pde.registry import DARCY_ESTIMATE, VORTICITY_ESTIMATE, stored_pde
from opformer.trust.physics import (DARCY_TOLERANCE, Vorticity, darcy_estimates, forecast_estimates,
                                    history_estimates, vorticity_physics)
from opformer.trust.scores import relative_l2

#: The settings of a vorticity equation the estimate reads (:func:`opformer.trust.physics.vorticity_physics`).
VORTICITY_KEYS = ("name", "nu", "drag", "length", "forcing")


def physics_settings(info: DatasetInfo, time_stride: int = 1) -> dict[str, Any] | None:
    """The PDE settings of a data file that the ``residual`` score needs (JSON), None where it has no estimate: a
    Darcy file with a constant forcing (with the estimate's tolerance,
    :data:`opformer.trust.physics.DARCY_TOLERANCE`), or a 2D FNO-nu or Kolmogorov vorticity file of one channel at
    one viscosity, square and with evenly spaced frames (``spacing``: the file's frame spacing times
    ``time_stride``)."""
    pde = info.pde or {}
    estimate = _estimate(pde)
    if estimate == DARCY_ESTIMATE and info.kind == OPERATOR and isinstance(pde.get("forcing", 1.0), (int, float)):
        return {"name": pde["name"], "forcing": float(pde.get("forcing", 1.0)), "tolerance": DARCY_TOLERANCE}
    if estimate != VORTICITY_ESTIMATE or info.kind != TRAJECTORY or len(info.times) < 2 or "nu" not in pde:
        return None
    shape = tuple(info.spatial_shape)
    if len(shape) != 2 or shape[0] != shape[1] or len(info.input_channels) != 1:
        return None
    steps = torch.tensor(info.times, dtype=torch.float64).diff()
    if not torch.allclose(steps, steps[0].expand_as(steps), rtol=1e-6, atol=0):
        return None
    settings = {key: pde[key] for key in VORTICITY_KEYS if key in pde}
    settings["spacing"] = float(steps[0]) * time_stride
    return settings if vorticity_physics(settings, shape[0], settings["spacing"]) is not None else None


def _estimate(pde: dict[str, Any] | None) -> str:
    """The physics estimate of the PDE these settings name (its registry entry's), "" for none."""
    entry = stored_pde(pde)
    return "" if entry is None else entry.estimate


def _vorticity(settings: dict[str, Any], n: int) -> Vorticity:
    physics = vorticity_physics(settings, n, settings["spacing"])
    assert physics is not None  # checked by physics_settings
    return physics


def residual_estimates(settings: dict[str, Any], inputs: torch.Tensor, predictions: torch.Tensor) -> torch.Tensor:
    """``(sample, frames)``: the physics estimate of each prediction's relative L2 error. Operator runs (Darcy):
    ``inputs`` the coefficients ``(sample, n, n, 1+)`` (channel 0), ``predictions`` ``(sample, 1, n, n, 1)``, to the
    settings' tolerance (none recorded: one Poisson solve).
    Trajectory runs: ``inputs`` the given frames ``(sample, t, n, n, 1)``, ``predictions`` the forecast
    ``(sample, frames, n, n, 1)``."""
    if _estimate(settings) == DARCY_ESTIMATE:
        return darcy_estimates(inputs[..., 0], predictions[:, 0, ..., 0], settings["forcing"],
                               settings.get("tolerance"))[:, None]
    physics = _vorticity(settings, inputs.shape[-2])
    return forecast_estimates(physics, inputs[:, -1, ..., 0], predictions[..., 0])


def history_of(settings: dict[str, Any] | None, inputs: torch.Tensor) -> torch.Tensor | None:
    """``(sample,)``: how far given frames ``(sample, t, n, n, 1)`` (two or more) are from evolving by the recorded
    vorticity equation; None for an operator run, a single given frame or no physics."""
    if _estimate(settings) != VORTICITY_ESTIMATE or inputs.dim() != 5 or inputs.shape[1] < 2:
        return None
    return history_estimates(_vorticity(settings, inputs.shape[-2]), inputs[..., 0])


def backtest_errors(forecast: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """``(sample,)``: the relative L2 error of the backtest, the forecast ``(sample, extra, *grid, c)`` of an input's
    last ``extra`` given frames ``truth`` from the ``t_in`` given before them, over all its frames together."""
    return relative_l2(forecast.flatten(1, 2), truth.flatten(1, 2))
