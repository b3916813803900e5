"""Geo-FNO's published mesh benchmarks (Li et al. 2022, the files of neuraloperator/Geo-FNO that Transolver's
Table 1 uses), read as their authors' loaders read them (docs/data-format.md, "Geo-FNO's mesh benchmarks"):

- **elasticity**: ``Random_UnitCell_XY_10.npy`` (points, 2, N), ``Random_UnitCell_sigma_10.npy`` (points, N) and
  optionally ``Random_UnitCell_rr_10.npy`` (42, N): a point cloud (weights estimated), the coordinates alone as
  the input, the stress as the target, the void's radius parameters as per-sample settings ``rr_00``...;
- **airfoil**: ``NACA_Cylinder_X.npy``, ``_Y.npy`` (N, 221, 51) and ``_Q.npy`` (N, 5, 221, 51): a structured
  C-grid, the target channel 4 (the Mach number);
- **pipe**: ``Pipe_X.npy``, ``Pipe_Y.npy`` (N, 129, 129) and ``Pipe_Q.npy`` (N, C, 129, 129): a structured mesh,
  the target channel 0 (the horizontal velocity);
- **plasticity**: ``plas_N987_T20.mat`` with ``input`` (N, 101), the die's profile, and ``output``
  (N, 101, 31, 20, 4), the mesh's position (channels 0, 1) and displacement (2, 3) at 20 times: trajectories on
  the 101 x 31 index grid of the unit square, as both publishers' loaders place it.

Structured meshes keep their (i, j) shape (points in C order) and get the quads of their index grid, so their
weights are lumped, not estimated. The published sizes are not required (tiny files of the same layout convert
too); the axis orders are.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import h5py
import numpy as np

from opformer.data.readers.matv5 import load_v5
from opformer.data.readers.source import MeshSource
from opformer.errors import DataError
from opformer.meshes import MeshSample, structured_quads

#: The file names of each layout (the part that identifies them) and what the layout holds, for messages.
FILES = {
    "elasticity": ("Random_UnitCell_XY", "Random_UnitCell_sigma", "Random_UnitCell_rr"),
    "airfoil": ("NACA_Cylinder_X", "NACA_Cylinder_Y", "NACA_Cylinder_Q"),
    "pipe": ("Pipe_X", "Pipe_Y", "Pipe_Q"),
    "plasticity": ("plas_",),
}
#: The target channel of ``_Q`` that the publishers' loaders take, and its name here.
TARGET_CHANNEL = {"airfoil": (4, "mach"), "pipe": (0, "velocity_x")}
#: Published splits (train range, test range) by layout; ``N`` is the file's sample count.
SPLITS = {"elasticity": ((0, 1000), (-200, None)), "airfoil": ((0, 1000), (1000, 1200)),
          "pipe": ((0, 1000), (-200, None)), "plasticity": ((0, 900), (-80, None))}
EXPECTED = ("elasticity Random_UnitCell_XY_10.npy + _sigma_10.npy [+ _rr_10.npy], airfoil NACA_Cylinder_X/Y/Q.npy, "
            "pipe Pipe_X/Y/Q.npy, or plasticity plas_N987_T20.mat")


def _layout(paths: Sequence[Path]) -> tuple[str, dict[str, Path]]:
    """Which layout the files are, and each file by its identifying name."""
    for layout, stems in FILES.items():
        found = {stem: p for stem in stems for p in paths if p.name.startswith(stem)}
        if found:
            if len(found) != len(paths):
                extra = [p.name for p in paths if p not in found.values()]
                raise DataError(f"{extra[0]}: not a file of Geo-FNO's {layout} layout (expected {EXPECTED})")
            return layout, found
    raise DataError(f"{paths[0]}: not a Geo-FNO file name (expected {EXPECTED})")


def _npy(path: Path, rank: int, what: str) -> np.ndarray:
    """A ``.npy`` array of ``rank`` axes, memory-mapped (no pickle); else a one-line DataError."""
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise DataError(f"{path}: not a readable .npy file ({exc.__class__.__name__})") from None
    if not isinstance(array, np.ndarray) or array.ndim != rank or array.dtype.kind not in "fiu":
        raise DataError(f"{path}: has shape {getattr(array, 'shape', '?')}, expected {what}")
    return array


def _needed(found: dict[str, Path], stem: str, layout: str) -> Path:
    if stem not in found:
        raise DataError(f"Geo-FNO's {layout} layout needs a file {stem}*.npy beside "
                        f"{next(iter(found.values())).name}")
    return found[stem]


def _finite(path: Path, array: np.ndarray, sample: int) -> np.ndarray:
    array = np.asarray(array, dtype=np.float64)
    if not np.isfinite(array).all():
        raise DataError(f"{path}: holds NaN or Inf (first in sample {sample})")
    return array


def _splits(layout: str, samples: int) -> dict[str, list[int]]:
    """The publisher's train and test sample ranges, within the file's ``samples``."""
    out = {}
    for name, (start, stop) in zip(("train", "test"), SPLITS[layout]):
        first, last, _ = slice(start, stop).indices(samples)
        out[name] = [first, last]
    return out


def _elasticity(found: dict[str, Path]) -> MeshSource:
    xy_path, sigma_path = _needed(found, "Random_UnitCell_XY", "elasticity"), \
        _needed(found, "Random_UnitCell_sigma", "elasticity")
    xy = _npy(xy_path, 3, "(points, 2, samples): exp_elas.py's permute(2, 0, 1) makes (samples, points, 2)")
    if xy.shape[1] != 2:
        raise DataError(f"{xy_path}: has shape {xy.shape}, expected (points, 2, samples)")
    points, _, samples = xy.shape
    sigma = _npy(sigma_path, 2, f"({points}, {samples}): one stress per point of {xy_path.name}, samples last")
    if sigma.shape != (points, samples):
        raise DataError(f"{sigma_path}: has shape {sigma.shape}, expected ({points}, {samples}) (points, samples) "
                        f"as {xy_path.name}")
    rr_path = found.get("Random_UnitCell_rr")
    rr = None if rr_path is None else _npy(rr_path, 2, f"(parameters, {samples})")
    if rr is not None and rr.shape[1] != samples:
        raise DataError(f"{rr_path}: has shape {rr.shape}, expected (parameters, {samples})")
    xy, sigma = np.asarray(xy), np.asarray(sigma)  # small (15 MB published): read once, not per strided sample

    def read(count: int) -> Iterator[MeshSample]:
        for s in range(count):
            settings = {} if rr is None else {f"rr_{k:02d}": float(v) for k, v in
                                                enumerate(_finite(rr_path, rr[:, s], s))}
            yield MeshSample(points=_finite(xy_path, xy[:, :, s], s),
                             fields={"stress": _finite(sigma_path, sigma[:, s], s)[:, None]}, settings=settings)

    return MeshSource(samples=samples, read=read, inputs=[], targets=["stress"], pde="geo-fno-elasticity",
                      settings={"published_splits": _splits("elasticity", samples)},
                      solver={"files": sorted(p.name for p in found.values())})


def _structured(found: dict[str, Path], layout: str, prefix: str) -> MeshSource:
    paths = [_needed(found, f"{prefix}{axis}", layout) for axis in "XYQ"]
    x = _npy(paths[0], 3, "(samples, i, j)")
    y = _npy(paths[1], 3, f"{x.shape} as {paths[0].name}")
    channel, name = TARGET_CHANNEL[layout]
    q = _npy(paths[2], 4, f"(samples, channels, i, j), channels > {channel}")
    samples, rows, cols = x.shape
    if y.shape != x.shape:
        raise DataError(f"{paths[1]}: has shape {y.shape}, expected {x.shape} as {paths[0].name}")
    if q.shape[0] != samples or q.shape[2:] != (rows, cols) or q.shape[1] <= channel:
        raise DataError(f"{paths[2]}: has shape {q.shape}, expected ({samples}, channels > {channel}, {rows}, {cols})")
    cells = structured_quads((rows, cols))

    def read(count: int) -> Iterator[MeshSample]:
        for s in range(count):
            points = np.stack([_finite(paths[0], x[s], s), _finite(paths[1], y[s], s)], -1).reshape(-1, 2)
            target = _finite(paths[2], q[s, channel], s).reshape(-1, 1)
            yield MeshSample(points=points, fields={name: target}, cells=cells, cell_kind="quad", shape=(rows, cols))

    return MeshSource(samples=samples, read=read, inputs=[], targets=[name], pde=f"geo-fno-{layout}",
                      settings={"published_splits": _splits(layout, samples), "target_channel": channel},
                      solver={"files": [p.name for p in paths]})


def _mat(path: Path) -> dict[str, np.ndarray]:
    """``input`` and ``output`` of a ``.mat`` file: v5 through scipy in a child process, v7.3 (HDF5, axes stored
    reversed) through h5py."""
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    if not h5py.is_hdf5(path):
        return load_v5(path, ("input", "output"), "Geo-FNO's plasticity: input (N, 101), output (N, 101, 31, 20, 4)")
    try:
        with h5py.File(path, "r") as f:
            return {key: np.asarray(f[key]).transpose() for key in ("input", "output") if key in f}
    except (OSError, RuntimeError, ValueError) as exc:
        raise DataError(f"{path}: not a readable MATLAB v7.3 file ({exc.__class__.__name__})") from None


def _plasticity(path: Path) -> MeshSource:
    variables = _mat(path)
    for key, rank in (("input", 2), ("output", 5)):
        if key not in variables or variables[key].ndim != rank:
            raise DataError(f"{path}: variable '{key}' missing or not of {rank} axes (expected input (N, 101), "
                            "output (N, 101, 31, 20, 4))")
    die, output = variables["input"], variables["output"]
    samples, rows, cols, frames, channels = output.shape
    if die.shape != (samples, rows) or channels != 4:
        raise DataError(f"{path}: input {die.shape} and output {output.shape}: expected input (N, I) and output "
                        "(N, I, J, T, 4)")
    i, j = np.meshgrid(np.linspace(0, 1, rows), np.linspace(0, 1, cols), indexing="ij")
    points, cells = np.stack([i, j], -1).reshape(-1, 2), structured_quads((rows, cols))

    def read(count: int) -> Iterator[MeshSample]:
        for s in range(count):
            frames_of = _finite(path, output[s], s).transpose(2, 0, 1, 3).reshape(frames, rows * cols, 4)
            profile = np.repeat(_finite(path, die[s], s), cols)[None, :, None].repeat(frames, axis=0)
            yield MeshSample(points=points, fields={"die": profile, "position": frames_of[..., :2],
                                                    "displacement": frames_of[..., 2:]},
                             cells=cells, cell_kind="quad", shape=(rows, cols))

    return MeshSource(samples=samples, read=read, inputs=["die"], targets=["position", "displacement"],
                      pde="geo-fno-plasticity", settings={"published_splits": _splits("plasticity", samples)},
                      solver={"files": [path.name]}, times=np.linspace(0.0, 1.0, frames))


def read_geo_fno(paths: Sequence[Path]) -> MeshSource:
    """The files of one Geo-FNO benchmark (the layout is told by their names) as mesh samples."""
    layout, found = _layout(list(paths))
    if layout == "elasticity":
        return _elasticity(found)
    if layout == "plasticity":
        return _plasticity(found["plas_"])
    return _structured(found, layout, "NACA_Cylinder_" if layout == "airfoil" else "Pipe_")
