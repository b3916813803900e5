"""neuraloperator's small shipped data sets (``darcy_train_16.pt``, ...): a torch file holding a dict with
tensors ``x`` (inputs) and ``y`` (targets), ``(N, *spatial)`` or channel-first ``(N, C, *spatial)``, loaded with
``torch.load(..., weights_only=True)`` (no code runs from the file) and whole.

The files do not say where their points lie. neuraloperator's own grid embedding (``regular_grid_2d``) puts
point ``i`` of ``n`` at ``i / n`` on [0, 1) — the formula of opformer's ``periodic`` kind — but Darcy flow has
a boundary, so the default here is ``nodes`` on the unit square (FNO's 421-point Darcy grid, boundary included);
``--grid periodic`` reproduces neuraloperator's coordinates.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from opformer.errors import DataError
from opformer.grids import NODES
from opformer.data.readers.arrays import pairs_source
from opformer.data.readers.source import Source


def read_neuraloperator_data(path: Path, lengths: Sequence[float] | None = None,
                             grid: Sequence[str] | None = None) -> Source:
    """A neuraloperator ``.pt`` file as operator pairs: input ``a`` from ``x``, target ``u`` from ``y``."""
    import pickle

    import torch

    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        raise DataError(f"{path}: not a readable torch file of tensors ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: holds a {type(data).__name__}, expected a dict with tensors 'x' and 'y'")
    arrays = []
    for key in ("x", "y"):
        if not isinstance(data.get(key), torch.Tensor):
            raise DataError(f"{path}: missing tensor '{key}' (expected a dict with tensors 'x' and 'y')")
        arrays.append(data[key].detach().float().numpy())
    pde = {"name": "unknown (neuraloperator data set)"}
    return pairs_source(path, arrays[0], arrays[1], ("x", "y"), ("a", "u"), lengths, grid, NODES, True, pde)
