"""FNO's Navier–Stokes ``.mat`` files (Li et al. 2020: ``ns_V1e-3_N5000_T50.mat``, ...).

``a`` ``(N, X, Y)`` is the vorticity at t = 0 and ``u`` ``(N, X, Y, T)`` the frames at the times in ``t``, on the
periodic unit square (first axis x, second y, as FNO's solver indexes them). FNO's ``ns_2d.py`` saves ``t`` (the
``record_steps`` record times, ``(1, T)`` in the file) beside them: the published files hold t = 1..T, another
``record_steps`` e.g. 0.25, 0.5, ...; a file without ``t`` is taken to hold 1..T. The frames ``0, t_1, ..., t_T``
must be equally spaced. Version 5 files are read with
``scipy.io.loadmat`` (whole), in a child process (:mod:`opformer.data.readers.matv5`: a damaged file can crash
scipy); version 7.3 files are HDF5, where MATLAB's column-major storage shows every array
with its axes reversed (``u`` as ``(T, Y, X, N)``): they are read in parts and transposed back
(3, 2, 1, 0) — not (3, 1, 2, 0), DPOT's loader, which swaps x and y. There the samples vary fastest on disk,
so :func:`opformer.data.convert.convert_file` reads them a frame of every sample at a time (``read_frame``).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from opformer.errors import DataError
from opformer.grids import PERIODIC
from opformer.data.readers.matv5 import load_v5
from opformer.data.readers.source import Source, dataset, domain, finite, open_hdf5, read_slice, tidy
from opformer.kinds import TRAJECTORY

LAYOUT = "u (N, X, Y, T) and a (N, X, Y)"


def _frames(path: Path, a: np.ndarray, u: np.ndarray, first: int) -> np.ndarray:
    """``a`` ``(n, X, Y)`` and ``u`` ``(n, X, Y, T)`` -> fields ``(n, T + 1, X, Y, 1)``."""
    a, u = finite(path, "a", a, first), finite(path, "u", u, first)
    return np.concatenate([a[:, None], np.moveaxis(u, -1, 1)], axis=1)[..., None]


def _times(path: Path, t: np.ndarray | None, frames: int) -> np.ndarray:
    """The times of ``a`` and the ``frames`` frames of ``u``: 0, then the file's ``t`` (``None``: 1..T, FNO's
    published files); ``t`` must hold one time per frame, finite and increasing from 0 in equal steps."""
    if t is None:
        return np.arange(frames + 1, dtype=np.float64)
    try:
        t = np.asarray(t, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{path}: 't' is not an array of numbers (expected the {frames} frame times of 'u')") from None
    if t.size != frames or sum(n > 1 for n in t.shape) > 1:
        raise DataError(f"{path}: 't' has shape {t.shape}, expected one time per frame of 'u' ({frames} in a row "
                        "or a column)")
    times = np.concatenate([[0.0], t.reshape(-1)])
    steps = np.diff(times)
    if not np.isfinite(times).all() or (steps.size and (steps.min() <= 0 or np.ptp(steps) > 1e-3 * steps.min())):
        raise DataError(f"{path}: 't' is not uniform: the frames 0 ('a'), {_brief(times[1:])} ('t') must be "
                        "increasing in equal steps")
    return np.array([tidy(v) for v in times])


def _brief(values: np.ndarray) -> str:
    """``values`` in a line: all of them, or the first three and the last."""
    shown = [f"{v:.6g}" for v in values]
    return ", ".join(shown if len(shown) <= 5 else [*shown[:3], "...", shown[-1]])


def _source(path: Path, samples: int, grid: tuple[int, int], frames: int, read, layout: str,
            t: np.ndarray | None) -> Source:
    times = _times(path, t, frames)
    pde = {"name": "navier_stokes_2d_fno", "length": 1.0, "times": times.tolist(), "channels": ["vorticity"],
           "axes": "(x, y) as in the file: u[n, i, j, t] is at x = i / X, y = j / Y",
           "time_source": "the file's t" if t is not None else "no t in the file: t = 1..T"}
    return Source(TRAJECTORY, samples, ((frames + 1, *grid, 1),), (["vorticity"],), read,
                  domain([1.0, 1.0], [PERIODIC, PERIODIC]), pde, {"file_layout": layout}, times=times)


def _check(path: Path, u_shape: tuple[int, ...], a_shape: tuple[int, ...]) -> None:
    if len(u_shape) != 4 or a_shape != u_shape[:3]:
        raise DataError(f"{path}: 'u' {u_shape} and 'a' {a_shape} do not match the layout {LAYOUT}")


def _read_v73(path: Path) -> Source:
    with open_hdf5(path) as f:
        u = dataset(path, f, "u", 4, expected="(T, Y, X, N) in a v7.3 file, i.e. " + LAYOUT)
        a = dataset(path, f, "a", 3, expected="(Y, X, N) in a v7.3 file, i.e. " + LAYOUT)
        u_shape, a_shape = u.shape[::-1], a.shape[::-1]
        t = read_slice(path, dataset(path, f, "t"), ()) if "t" in f else None
    _check(path, u_shape, a_shape)

    def read(start: int, stop: int) -> tuple[np.ndarray]:
        with open_hdf5(path) as f:
            u_block = read_slice(path, f["u"], (..., slice(start, stop)))
            a_block = read_slice(path, f["a"], (..., slice(start, stop)))
        return (_frames(path, a_block.transpose(2, 1, 0), u_block.transpose(3, 2, 1, 0), start),)

    def read_frame(t: int, count: int) -> np.ndarray:
        """Frame ``t`` of the first ``count`` samples: ``a`` (t = 0) or ``u[t - 1]``, a (Y, X, N) slab on disk."""
        key, index = ("a", ()) if t == 0 else ("u", t - 1)
        with open_hdf5(path) as f:
            slab = read_slice(path, f[key], index)[..., :count]
        return finite(path, key, slab.transpose(2, 1, 0), 0)[..., None]

    source = _source(path, u_shape[0], u_shape[1:3], u_shape[3], read, "MATLAB v7.3 (HDF5, axes reversed)", t)
    source.read_frame = read_frame
    return source


def _read_v5(path: Path) -> Source:
    variables = load_v5(path, ("a", "u", "t"), LAYOUT)  # in a child process: a damaged file can crash scipy
    for key in ("a", "u"):
        if key not in variables:
            raise DataError(f"{path}: missing variable '{key}' (expected {LAYOUT})")
    u, a = variables["u"], variables["a"]
    _check(path, u.shape, a.shape)

    def read(start: int, stop: int) -> tuple[np.ndarray]:
        return (_frames(path, a[start:stop], u[start:stop], start),)

    return _source(path, u.shape[0], u.shape[1:3], u.shape[3], read, "MATLAB v5", variables.get("t"))


def read_fno_mat(path: Path) -> Source:
    """An FNO ``.mat`` file (v5 or v7.3) as trajectories ``(N, T + 1, X, Y, 1)`` of vorticity at t = 0 and the
    file's ``t`` (1..T without one)."""
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    return _read_v73(path) if h5py.is_hdf5(path) else _read_v5(path)
