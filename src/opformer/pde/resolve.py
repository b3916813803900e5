"""One stored input solved again, with the settings its data file records (no seed): the solver in place of a
surrogate where the surrogate's error bound is too large (``opformer predict --tolerance``).

A data file made by ``opformer generate`` records the PDE and the solver in its ``pde`` and ``solver`` attributes.
For the PDEs below those settings determine the solution of a given input: an operator data set's target from
its input (Burgers ``u0 -> u(., t_final)``, Darcy ``a -> u``), a trajectory's later frames from one frame (the
FNO-nu vorticity, whose forcing does not depend on time). Re-solving a generated input gives the generator's
output: the same solver, grid, time steps and tolerance (a trajectory restarted from a stored frame: up to that
frame's float32 rounding, and to the modes the storage grid drops when the solve grid is finer).

Which PDEs can be solved again, and how, is their registry entry's (:func:`opformer.pde.registry.stored_pde`: its
``resolver``, next to its solver, and its ``forcing``); this module dispatches on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opformer.errors import DataError
from opformer.kinds import OPERATOR, TRAJECTORY
from opformer.pde.registry import PDE, PDES, stored_pde


def resolvable(pde: dict[str, Any]) -> bool:
    """Whether a data file with these ``pde`` settings can be solved again from its inputs: its PDE has a
    re-solver, and the file records that PDE's own forcing and no drag unless the PDE takes one."""
    entry = stored_pde(pde)
    return (entry is not None and entry.resolver is not None and entry.own_forcing(pde)
            and ("drag" in entry.flags or float(pde.get("drag", 0.0)) == 0.0))


def _resolver(pde: dict[str, Any], kind: str, what: str) -> PDE:
    """The entry that solves ``pde``'s data of ``kind`` again; ``DataError`` (one line) if none does."""
    entry = stored_pde(pde)
    if entry is None or entry.kind != kind or not resolvable(pde):
        expected = [entry.stored[0] + ("" if entry.forcing is None else " with its own forcing")
                    for entry in PDES.values() if entry.kind == kind and entry.resolver is not None]
        raise DataError(f"pde {pde.get('name')!r}: no solver for its {what} (expected "
                        f"{expected[0] if len(expected) == 1 else 'one of ' + ', '.join(expected)})")
    return entry


def resolve_operator(pde: dict[str, Any], solver: dict[str, Any], inputs: np.ndarray) -> np.ndarray:
    """Targets ``(batch, *grid, 1)`` float32 of operator inputs ``(batch, *grid, 1)`` with the recorded settings."""
    return _resolver(pde, OPERATOR, "operator inputs").resolver(pde, solver, inputs)


def resolve_trajectory(pde: dict[str, Any], solver: dict[str, Any], last: np.ndarray,
                       times: Sequence[float]) -> np.ndarray:
    """The frames ``(batch, len(times) - 1, *grid, channels)`` float32 at ``times[1:]`` after the frames ``last``
    ``(batch, *grid, channels)`` at ``times[0]``, with the recorded settings."""
    return _resolver(pde, TRAJECTORY, "trajectories from a given frame").resolver(pde, solver, last, times)
