"""Generate a data set with a built-in solver and store it (one entry per PDE)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from opformer.data.store import write_operator_dataset
from opformer.errors import ConfigError
from opformer.pde.burgers import generate_burgers


def generate_burgers_file(out: str | os.PathLike, samples: int, resolution: int = 8192,
                          viscosity: float = 0.1 / (2 * np.pi), seed: int = 0,
                          progress: Callable[[int], None] | None = None) -> Path:
    """Solve ``samples`` Burgers problems (GRF initial data -> u(., 1)) and write them to ``out``."""
    if samples < 1:
        raise ConfigError(f"--samples {samples}: expected a positive number of samples")
    if resolution < 16 or resolution % 2:
        raise ConfigError(f"--resolution {resolution}: expected an even number of grid points >= 16")
    if viscosity <= 0:
        raise ConfigError(f"--viscosity {viscosity}: expected a positive viscosity")
    u0, u1, meta = generate_burgers(samples, resolution=resolution, viscosity=viscosity, seed=seed,
                                    progress=progress)
    length = float(meta["pde"].get("length", 1.0))
    return write_operator_dataset(out, u0[..., None], u1[..., None], pde=meta["pde"], solver=meta["solver"],
                                  domain={"lengths": [length], "periodic": [True]}, seed=seed,
                                  input_channels=["u0"], target_channels=["u"])
