"""Generate a data set with a built-in solver and store it (one entry per PDE)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from opformer.data.parts import SampleParts
from opformer.data.store import write_operator_dataset, write_trajectory_dataset
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


def generate_darcy_file(out: str | os.PathLike, samples: int, resolution: int = 421, seed: int = 0,
                        workers: int | None = None, progress: Callable[[int], None] | None = None) -> Path:
    """Solve ``samples`` Darcy problems (coefficient ``a`` -> solution ``u``, Cao 2021 Ex. 5.2) and write them to ``out``.

    ``resolution`` is the number of nodes per axis, boundary included; ``workers`` processes
    (default: the available cores) solve the samples.
    """
    from opformer.pde.darcy import generate_darcy

    if samples < 1:
        raise ConfigError(f"--samples {samples}: expected a positive number of samples")
    if resolution < 3:
        raise ConfigError(f"--resolution {resolution}: expected at least 3 grid nodes per axis (boundary included)")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers {workers}: expected a positive number of worker processes")
    a, u, meta = generate_darcy(samples, resolution=resolution, seed=seed, workers=workers, progress=progress)
    return write_operator_dataset(out, a[..., None], u[..., None], pde=meta["pde"], solver=meta["solver"],
                                  domain={"lengths": [1.0, 1.0], "periodic": [False, False]}, seed=seed,
                                  input_channels=["a"], target_channels=["u"])


#: The time-dependent presets: ``opformer generate NAME`` -> (module, generator, default resolution, samples
#: per resumable chunk). A chunk is a multiple of the generator's own batch (batch_size x workers), so chunking
#: adds no solver calls: FNO-nu solves 100 at a time (4 calls of 16 took 1.1-1.2x one call of 64).
TRAJECTORY_PRESETS = {
    "navier-stokes": ("opformer.pde.navier_stokes", "generate_fno_nu", 64, 100),
    "kolmogorov": ("opformer.pde.kolmogorov", "generate_kolmogorov", 64, 16),
    "turbulence3d": ("opformer.pde.navier_stokes3d", "generate_turbulence3d", 32, 16),
}


def generate_trajectory_file(pde: str, out: str | os.PathLike, samples: int, resolution: int | None = None,
                             seed: int = 0, t_final: float | None = None, nu: float | None = None,
                             solve_resolution: int | None = None, chunk: int | None = None,
                             progress: Callable[[int], None] | None = None) -> Path:
    """Solve ``samples`` trajectories of a time-dependent preset and write a trajectory data set.

    ``navier-stokes``: the FNO-nu benchmark (vorticity on (0, 1)^2, ``nu`` default 1e-3, 50 time units);
    ``kolmogorov``: Kolmogorov flow at Re = 1000 on [0, 2 pi]^2; ``turbulence3d``: forced isotropic
    turbulence (velocity u, v, w) in [0, 2 pi]^3. Frames are stored with their time stamps. ``solve_resolution``
    (2D presets) sets the solver's grid; frames are its point values on the storage grid.

    Samples are solved ``chunk`` at a time (default: the preset's) and each finished chunk is kept in
    :class:`SampleParts` beside ``out``, so an interrupted run started again with the same arguments resumes;
    sample ``i`` is the same trajectory whatever the chunking.
    """
    import importlib

    if pde not in TRAJECTORY_PRESETS:
        raise ConfigError(f"pde {pde!r}: expected one of {', '.join(TRAJECTORY_PRESETS)}")
    if samples < 1:
        raise ConfigError(f"--samples {samples}: expected a positive number of samples")
    if chunk is not None and chunk < 1:
        raise ConfigError(f"chunk {chunk}: expected a positive number of samples per chunk")
    if nu is not None and pde != "navier-stokes":
        raise ConfigError(f"--nu: only used by navier-stokes (the {pde} preset fixes its viscosity)")
    if solve_resolution is not None and pde == "turbulence3d":
        raise ConfigError("--solve-resolution: only used by navier-stokes and kolmogorov (turbulence3d solves on "
                          "the storage grid)")
    module, name, default, default_chunk = TRAJECTORY_PRESETS[pde]
    chunk = chunk or default_chunk
    generator = getattr(importlib.import_module(module), name)
    kwargs: dict = {"resolution": resolution or default, "seed": seed}
    if t_final is not None:
        kwargs["t_final"] = t_final
    if pde == "navier-stokes":
        kwargs["nu"] = 1e-3 if nu is None else nu
    if solve_resolution is not None:
        if solve_resolution % kwargs["resolution"]:
            raise ConfigError(f"--solve-resolution {solve_resolution}: expected a multiple of the stored "
                              f"resolution {kwargs['resolution']}")
        kwargs["solve_resolution"] = solve_resolution
    parts = SampleParts(out, {"pde": pde, "samples": samples, "chunk": chunk, **kwargs})
    blocks = []
    for first in range(0, samples, chunk):
        count = min(chunk, samples - first)
        block = parts.load(first)
        if block is None:
            block, meta = generator(count, first=first, progress=progress, **kwargs)
            parts.save(first, block, meta)
        elif progress is not None:
            progress(count)
        blocks.append(block)
    fields, meta = np.concatenate(blocks), parts.meta()
    ndim = fields.ndim - 3
    length = float(meta["pde"]["length"])
    path = write_trajectory_dataset(out, fields, np.asarray(meta["pde"]["times"]), pde=meta["pde"],
                                    solver=meta["solver"], domain={"lengths": [length] * ndim,
                                                                    "periodic": [True] * ndim},
                                    seed=seed, channels=list(meta["pde"]["channels"]))
    parts.remove()
    return path
