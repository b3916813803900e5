"""One stored input solved again, with the settings its data file records (no seed): the solver in place of a
surrogate where the surrogate's error bound is too large (``opformer predict --tolerance``).

A data file made by ``opformer generate`` records the PDE and the solver in its ``pde`` and ``solver`` attributes.
For the PDEs below those settings determine the solution of a given input: an operator data set's target from
its input (Burgers ``u0 -> u(., t_final)``, Darcy ``a -> u``), a trajectory's later frames from one frame (the
FNO-nu vorticity, whose forcing does not depend on time). Re-solving a generated input gives the generator's
output: the same solver, grid, time steps and tolerance (a trajectory restarted from a stored frame: up to that
frame's float32 rounding, and to the modes the storage grid drops when the solve grid is finer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opformer.errors import DataError
from opformer.pde.burgers import solve_burgers
from opformer.pde.darcy import solve_darcy
from opformer.pde.navier_stokes import FNO_FORCING, fno_forcing, solve_navier_stokes_2d

#: The ``pde.name`` attributes of the data sets that can be solved again from an input.
RESOLVABLE = ("burgers", "darcy", "navier_stokes_2d_fno")


def resolvable(pde: dict[str, Any]) -> bool:
    """Whether a data file with these ``pde`` settings can be solved again from its inputs."""
    name = pde.get("name")
    if name == "navier_stokes_2d_fno":
        return pde.get("forcing") == FNO_FORCING and float(pde.get("drag", 0.0)) == 0.0
    return name in RESOLVABLE


def _setting(settings: dict[str, Any], key: str, where: str) -> Any:
    if key not in settings:
        raise DataError(f"{where} settings lack {key!r}: cannot solve the input again")
    return settings[key]


def resolve_operator(pde: dict[str, Any], solver: dict[str, Any], inputs: np.ndarray) -> np.ndarray:
    """Targets ``(batch, *grid, 1)`` float32 of operator inputs ``(batch, *grid, 1)`` with the recorded settings."""
    name = pde.get("name")
    x = np.asarray(inputs, dtype=np.float32)[..., 0]
    if name == "burgers":
        u = solve_burgers(x.reshape(len(x), -1), float(_setting(pde, "viscosity", "pde")),
                          float(_setting(pde, "t_final", "pde")), float(pde.get("length", 1.0)),
                          int(_setting(solver, "solve_resolution", "solver")), float(_setting(solver, "dt", "solver")),
                          workers=1)
        return u.astype(np.float32)[..., None]
    if name == "darcy":
        method = "amg" if "multigrid" in str(solver.get("linear_solver", "")) else "direct"
        tol = solver.get("tolerance")
        options = {} if tol is None else {"tol": float(tol)}
        return np.stack([solve_darcy(a, float(pde.get("forcing", 1.0)), method, **options) for a in x]
                        ).astype(np.float32)[..., None]
    raise DataError(f"pde {name!r}: no solver for its operator inputs (expected one of burgers, darcy)")


def resolve_trajectory(pde: dict[str, Any], solver: dict[str, Any], last: np.ndarray,
                       times: Sequence[float]) -> np.ndarray:
    """The frames ``(batch, len(times) - 1, *grid, channels)`` float32 at ``times[1:]`` after the frames ``last``
    ``(batch, *grid, channels)`` at ``times[0]``, with the recorded settings."""
    if not resolvable(pde) or pde.get("name") != "navier_stokes_2d_fno":
        raise DataError(f"pde {pde.get('name')!r}: no solver for its trajectories from a given frame (expected "
                        "navier_stokes_2d_fno with its own forcing)")
    times = np.asarray(times, dtype=np.float64)
    w = np.asarray(last, dtype=np.float32)[..., 0]
    frames, _ = solve_navier_stokes_2d(
        w, nu=float(_setting(pde, "nu", "pde")), times=times - times[0], dt=float(_setting(solver, "dt_max", "solver")),
        forcing=fno_forcing(w.shape[-1]), length=float(pde.get("length", 1.0)),
        solve_resolution=int(_setting(solver, "solve_resolution", "solver")), workers=1)
    return frames[:, 1:, ..., None].astype(np.float32)
