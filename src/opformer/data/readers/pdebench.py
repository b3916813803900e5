"""PDEBench's 2D files (Takamoto et al. 2022).

- **CFD** (``2D_CFD_*_periodic_*_Train.hdf5``): top-level ``Vx``, ``Vy``, ``density``, ``pressure``, each
  ``(N, T, X, Y)``, and ``t-coordinate``, ``x-coordinate``, ``y-coordinate``. The coordinates are cell centres
  of a periodic box: a periodic axis has no ends, so the grid is stored as periodic (``x_i = L i / n``, the
  offset of half a cell kept in ``pde["origin"]``), its length ``n`` times the spacing.
- **DR / SWE** (``2D_diff-react_NA_NA.h5``, ``2D_rdb_NA_NA.h5``): groups ``0000``, ``0001``, ... each holding
  ``data`` ``(T, X, Y, C)`` and ``grid/x``, ``grid/y``, ``grid/t``; finite-volume cell centres of a closed box,
  stored as ``cells`` with lengths ``n`` times the spacing (DR (-1, 1)^2: 2; SWE (-2.5, 2.5)^2: 5).

A ``t-coordinate`` with one entry more than the frames (as PDEBench writes it) gives the frames its first ones.
Both are read in chunks of samples.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from opformer.errors import DataError
from opformer.grids import CELLS, PERIODIC
from opformer.data.readers.source import (
    TRAJECTORY, Source, channel_names, dataset, domain, finite, frame_times, open_hdf5, read_slice, tidy,
    uniform_spacing)

CFD_KEYS = ("Vx", "Vy", "density", "pressure")
CFD_CHANNELS = ["vx", "vy", "density", "pressure"]
#: Channel count -> (pde name, channel names) of the DR and SWE files.
FAMILIES = {2: ("diffusion_reaction_2d", ["u", "v"]), 1: ("shallow_water_2d_radial_dam_break", ["h"])}


def _axis(path: Path, key: str, coords: np.ndarray, count: int) -> tuple[float, float]:
    """(length, origin) of a grid of ``count`` cell centres ``coords``: ``count`` cells of the spacing."""
    step = uniform_spacing(path, key, coords, count)
    return tidy(count * step), tidy(float(np.asarray(coords).reshape(-1)[0]) - step / 2)


def read_pdebench_cfd(path: Path) -> Source:
    """A PDEBench 2D CFD file as trajectories ``(N, T, X, Y, 4)``: vx, vy, density, pressure."""
    expected = "(N, T, X, Y) like the other fields"
    with open_hdf5(path) as f:
        first = dataset(path, f, CFD_KEYS[0], 4, expected="(N, T, X, Y)")
        shape = first.shape
        for key in CFD_KEYS[1:]:
            dataset(path, f, key, shape=shape, expected=f"{shape}, {expected}")
        n, frames, nx, ny = shape
        times = frame_times(path, "t-coordinate", dataset(path, f, "t-coordinate", 1)[()], frames)
        (lx, x0), (ly, y0) = (_axis(path, key, dataset(path, f, key, 1)[()], count)
                              for key, count in (("x-coordinate", nx), ("y-coordinate", ny)))

    def read(start: int, stop: int) -> tuple[np.ndarray]:
        with open_hdf5(path) as f:
            blocks = [finite(path, key, read_slice(path, f[key], slice(start, stop)), start) for key in CFD_KEYS]
        return (np.stack(blocks, axis=-1),)

    pde = {"name": "compressible_navier_stokes_2d", "length": lx, "origin": [x0, y0], "times": times.tolist(),
           "channels": CFD_CHANNELS,
           "grid": "PDEBench's cell centres x_i = origin + (i + 1/2) L / n of a periodic box, stored as periodic"}
    return Source(TRAJECTORY, n, ((frames, nx, ny, 4),), (CFD_CHANNELS,), read,
                  domain([lx, ly], [PERIODIC, PERIODIC]), pde, {}, times=times)


def _sample_groups(path: Path, f: h5py.File) -> list[str]:
    names = sorted(name for name, item in f.items() if isinstance(item, h5py.Group))
    if not names:
        raise DataError(f"{path}: no sample groups ('0000', '0001', ... each with 'data' (T, X, Y, C) and "
                        "'grid/x', 'grid/y', 'grid/t')")
    return names


def read_pdebench_2d(path: Path) -> Source:
    """A PDEBench 2D diffusion-reaction or shallow-water file as trajectories ``(N, T, X, Y, C)`` on cells."""
    with open_hdf5(path) as f:
        groups = _sample_groups(path, f)
        group = f[groups[0]]
        shape = dataset(path, group, "data", 4, expected="(T, X, Y, C)").shape
        frames, nx, ny, channels = shape
        times = frame_times(path, f"{group.name}/grid/t", dataset(path, group, "grid/t", 1)[()], frames)
        coords = {key: dataset(path, group, f"grid/{key}", 1)[()] for key in ("x", "y")}
        (lx, x0), (ly, y0) = (_axis(path, f"{group.name}/grid/{key}", coords[key], count)
                              for key, count in (("x", nx), ("y", ny)))

    def read(start: int, stop: int) -> tuple[np.ndarray]:
        with open_hdf5(path) as f:
            blocks = []
            for index, name in enumerate(groups[start:stop], start=start):
                data = dataset(path, f[name], "data", shape=shape, expected=f"{shape} like '{groups[0]}/data'")
                for key in ("x", "y"):
                    if not np.allclose(dataset(path, f[name], f"grid/{key}", 1)[()], coords[key]):
                        raise DataError(f"{path}: '/{name}/grid/{key}' differs from '/{groups[0]}/grid/{key}' "
                                        "(every sample must share one grid)")
                blocks.append(finite(path, f"/{name}/data", read_slice(path, data, ())[None], index))
        return (np.concatenate(blocks),)

    name, names = FAMILIES.get(channels, ("pdebench_2d", channel_names("c", channels)))
    pde = {"name": name, "length": lx, "origin": [x0, y0], "times": times.tolist(), "channels": names,
           "grid": "cell-centred: x_i = origin + (i + 1/2) L / n on both axes (x, y)"}
    return Source(TRAJECTORY, len(groups), ((frames, nx, ny, channels),), (names,), read,
                  domain([lx, ly], [CELLS, CELLS]), pde, {}, times=times)
