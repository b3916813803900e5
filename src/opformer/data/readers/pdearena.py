"""PDEArena's ``NavierStokes2D_{train,valid,test}_*.h5`` (Gupta & Brandstetter 2022): buoyancy-driven smoke.

A group per split (``train``, ``valid`` or ``test``) holds ``u`` (the smoke density), ``vx``, ``vy``, each
``(N, T, X, Y)`` (axes x then y, as phiflow's ``groups=("x", "y", ...)`` writes them), and per sample ``t``
``(N, T)``, ``x`` ``(N, X)``, ``y`` ``(N, Y)``, ``buo_y`` ``(N,)``. The frames' times are copied from ``t``
(``linspace(tmin, tmax, T)``, a step of (tmax - tmin) / (T - 1)); the file's ``dt`` (``pde.dt * sample_rate``,
(tmax - tmin) / T times the sample rate) disagrees with it and is not read. The smoke lives at the cell centres of the
closed box [0, 32]^2 (stored as ``cells``); ``x`` holds ``linspace(0, 32, X)``, so the length is its span.
``vx`` and ``vy`` are not at the cell centres: they are phiflow's staggered face values, cropped to the
``X x Y`` grid (the last face of each axis and the padding dropped). Each sample's ``buo_y`` is kept in
``pde["buoyancy_y"]``. Read in chunks of samples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from opformer.errors import ConfigError, DataError
from opformer.grids import CELLS
from opformer.data.readers.source import (
    Source, dataset, domain, finite, frame_times, open_hdf5, read_slice, tidy, uniform_spacing)
from opformer.kinds import TRAJECTORY

SPLITS = ("train", "valid", "test")
KEYS = ("u", "vx", "vy")
CHANNELS = ["smoke", "vx", "vy"]
VELOCITY_NOTE = ("vx, vy are phiflow's staggered face values (vx on x faces, vy on y faces) cropped to the "
                 "stored grid, not values at the smoke's cell centres")


def _split(path: Path, present: list[str], split: str | None) -> str:
    if split is not None:
        if split not in present:
            raise ConfigError(f"--split {split}: {path} has no such group (it has {', '.join(present) or 'none'})")
        return split
    splits = [name for name in SPLITS if name in present]
    if len(splits) != 1:
        raise DataError(f"{path}: expected one split group of {', '.join(SPLITS)} (found "
                        f"{', '.join(present) or 'none'}); choose one with --split")
    return splits[0]


def read_pdearena_ns(path: Path, split: str | None = None) -> Source:
    """A PDEArena NavierStokes2D file as trajectories ``(N, T, X, Y, 3)``: smoke, vx, vy on cells of [0, 32]^2."""
    with open_hdf5(path) as f:
        group = f[_split(path, list(f.keys()), split)]
        shape = dataset(path, group, "u", 4, expected="(N, T, X, Y)").shape
        for key in KEYS[1:]:
            dataset(path, group, key, shape=shape, expected=f"{shape} like 'u'")
        n, frames, nx, ny = shape
        t = dataset(path, group, "t", shape=(n, frames), expected=f"(N, T) = {(n, frames)}")[()]
        if not np.allclose(t, t[:1]):
            raise DataError(f"{path}: '{group.name}/t' differs between samples (one set of frame times expected)")
        times = frame_times(path, f"{group.name}/t", t[0], frames)
        lengths = []
        for key, count in (("x", nx), ("y", ny)):
            coords = dataset(path, group, key, shape=(n, count), expected=f"(N, {key.upper()}) = {(n, count)}")[0]
            lengths.append(tidy(uniform_spacing(path, f"{group.name}/{key}", coords, count) * (count - 1)))
        buoyancy = dataset(path, group, "buo_y", shape=(n,), expected=f"(N,) = ({n},)")[()]
        name = group.name

    def read(start: int, stop: int) -> tuple[np.ndarray]:
        with open_hdf5(path) as f:
            blocks = [finite(path, f"{name}/{key}", read_slice(path, f[name][key], slice(start, stop)), start)
                      for key in KEYS]
        return (np.stack(blocks, axis=-1),)

    pde = {"name": "smoke_2d_buoyancy", "length": lengths[0], "split": name.strip("/"), "times": times.tolist(),
           "channels": CHANNELS, "velocity": VELOCITY_NOTE,
           "grid": "smoke at cell centres x_i = (i + 1/2) L / n of the closed box (PDEArena's 'x' is linspace(0, L, n))"}
    return Source(TRAJECTORY, n, ((frames, nx, ny, 3),), (CHANNELS,), read, domain(lengths, [CELLS, CELLS]), pde,
                  {}, times=times, per_sample={"buoyancy_y": np.asarray(buoyancy, dtype=np.float64)})
