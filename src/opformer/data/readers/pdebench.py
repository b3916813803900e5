"""PDEBench's 2D files (Takamoto et al. 2022).

- **CFD** (``2D_CFD_*_periodic_*_Train.hdf5``): top-level ``Vx``, ``Vy``, ``density``, ``pressure``, each
  ``(N, T, X, Y)``, and ``t-coordinate``, ``x-coordinate``, ``y-coordinate``. The coordinates are cell centres
  of a periodic box: a periodic axis has no ends, so the grid is stored as periodic (``x_i = L i / n``, the
  offset of half a cell kept in ``pde["origin"]``), its length ``n`` times the spacing.
- **DR / SWE** (``2D_diff-react_NA_NA.h5``, ``2D_rdb_NA_NA.h5``): groups ``0000``, ``0001``, ... each holding
  ``data`` and ``grid/x``, ``grid/y``, ``grid/t``; finite-volume cell centres of a closed box, stored as ``cells``
  with lengths ``n`` times the spacing (DR (-1, 1)^2: 2; SWE (-2.5, 2.5)^2: 5). The family is told by the channel
  count (DR: 2, u and v; SWE: 1, h), and so is the axis order of ``data``:

  - DR is ``(T, Y, X, C)``: ``sim_diff_react.py`` solves a state whose fast index is x (the +-1 neighbours are
    scaled by 1/dx^2) and reshapes it to ``(-1, Ny, Nx)``; it is transposed to opformer's (x, y).
  - SWE is ``(T, X, Y, C)``: pyclaw's ``q[m, i, j]`` is at ``(x_i, y_j)``; stored as it is (so is a file of
    another channel count).

  ``grid/x`` must hold one cell centre per point of the x axis of ``data`` and ``grid/y`` of its y axis; on a
  square grid the coordinates cannot tell the order, the publisher's code does.

A ``t-coordinate`` with one entry more than the frames (as PDEBench writes it) gives the frames its first ones.
Both are read in chunks of samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from opformer.errors import DataError
from opformer.grids import CELLS, PERIODIC
from opformer.data.readers.source import (
    Source, channel_names, dataset, domain, finite, frame_times, open_hdf5, read_slice, tidy, uniform_spacing)
from opformer.kinds import TRAJECTORY

CFD_KEYS = ("Vx", "Vy", "density", "pressure")
CFD_CHANNELS = ["vx", "vy", "density", "pressure"]


@dataclass(frozen=True)
class Family:
    """What a channel count says of a PDEBench 2D file: the pde name, the channel names, whether ``data`` is
    ``(T, Y, X, C)`` (y first) rather than ``(T, X, Y, C)``, and why."""

    name: str
    channels: list[str]
    y_first: bool
    layout: str

    @property
    def axes(self) -> str:
        """The axes of one sample's ``data`` in words."""
        return "(T, Y, X, C)" if self.y_first else "(T, X, Y, C)"


#: Channel count -> the family of the DR and SWE files.
FAMILIES = {
    2: Family("diffusion_reaction_2d", ["u", "v"], True,
              "data (T, Y, X, C): sim_diff_react.py reshapes its x-fastest state to (-1, Ny, Nx); "
              "transposed to (x, y)"),
    1: Family("shallow_water_2d_radial_dam_break", ["h"], False,
              "data (T, X, Y, C): pyclaw's q[m, i, j] is at (x_i, y_j)"),
}


def _family(channels: int) -> Family:
    """The family of a file of ``channels`` channels (another count: x first, channels c0, c1, ...)."""
    return FAMILIES.get(channels) or Family("pdebench_2d", channel_names("c", channels), False,
                                            "data (T, X, Y, C) assumed (neither DR nor SWE)")


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
        raise DataError(f"{path}: no sample groups ('0000', '0001', ... each with 'data' (T, Y, X, C) for DR, "
                        "(T, X, Y, C) for SWE, and 'grid/x', 'grid/y', 'grid/t')")
    return names


def _grid_axis(path: Path, group: h5py.Group, key: str, count: int, family: Family,
               shape: tuple[int, ...]) -> tuple[np.ndarray, float, float]:
    """``grid/key`` of ``group``: its coordinates, (length, origin); it must hold ``count`` uniform cell centres,
    one per point of the ``key`` axis of ``data`` (of ``shape``, in the family's order)."""
    name = f"{group.name}/grid/{key}"
    coords = np.asarray(dataset(path, group, f"grid/{key}", 1)[()])
    if coords.size != count:
        raise DataError(f"{path}: '{name}' holds {coords.size} coordinates, but the {key} axis of "
                        f"'{group.name}/data' {shape} has {count} points ({family.name}: {family.layout})")
    return (coords, *_axis(path, name, coords, count))


def read_pdebench_2d(path: Path) -> Source:
    """A PDEBench 2D diffusion-reaction or shallow-water file as trajectories ``(N, T, X, Y, C)`` on cells
    (diffusion-reaction's ``(T, Y, X, C)`` transposed)."""
    with open_hdf5(path) as f:
        groups = _sample_groups(path, f)
        group = f[groups[0]]
        shape = dataset(path, group, "data", 4, expected="(T, Y, X, C) (DR) or (T, X, Y, C) (SWE)").shape
        family = _family(shape[3])
        frames, channels = shape[0], shape[3]
        nx, ny = (shape[2], shape[1]) if family.y_first else (shape[1], shape[2])
        times = frame_times(path, f"{group.name}/grid/t", dataset(path, group, "grid/t", 1)[()], frames)
        (xs, lx, x0), (ys, ly, y0) = (_grid_axis(path, group, key, count, family, shape)
                                      for key, count in (("x", nx), ("y", ny)))
        coords = {"x": xs, "y": ys}

    def read(start: int, stop: int) -> tuple[np.ndarray]:
        with open_hdf5(path) as f:
            blocks = []
            for index, name in enumerate(groups[start:stop], start=start):
                data = dataset(path, f[name], "data", shape=shape,
                               expected=f"{shape} {family.axes} like '{groups[0]}/data'")
                for key in ("x", "y"):
                    mine = dataset(path, f[name], f"grid/{key}", 1)[()]
                    if mine.shape != coords[key].shape or not np.allclose(mine, coords[key]):
                        raise DataError(f"{path}: '/{name}/grid/{key}' differs from '/{groups[0]}/grid/{key}' "
                                        "(every sample must share one grid)")
                block = finite(path, f"/{name}/data", read_slice(path, data, ())[None], index)
                blocks.append(block.swapaxes(2, 3) if family.y_first else block)
        return (np.concatenate(blocks),)

    pde = {"name": family.name, "length": lx, "origin": [x0, y0], "times": times.tolist(),
           "channels": family.channels,
           "grid": "cell-centred: x_i = origin + (i + 1/2) L / n on both axes (x, y)"}
    return Source(TRAJECTORY, len(groups), ((frames, nx, ny, channels),), (family.channels,), read,
                  domain([lx, ly], [CELLS, CELLS]), pde, {"file_layout": family.layout}, times=times)
