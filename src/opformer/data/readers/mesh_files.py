"""Users' own meshes with point data (what FE and CFD codes write: VTU, XDMF, Gmsh MSH, and any other format
meshio reads), read through meshio (the ``mesh`` extra, imported here only) as mesh samples.

- **Operator pairs** (``--kind operator``, the default): each file is one sample, its point fields named by
  ``--inputs`` (may be left out: the coordinates alone) and ``--targets``; samples may have different meshes.
- **Trajectories** (``--kind trajectory``): the files of one folder are the frames of one trajectory, in the
  order of their names (``run_1/step_000.vtu``, ...; frame times 0, 1, 2, ...), or an XDMF time series
  (``meshio.xdmf.TimeSeriesWriter``'s file) is one trajectory with its own times. The frames of a trajectory
  share its mesh, and all trajectories share their times.

2D meshes are stored with two coordinates (a third that is 0 everywhere, as VTU and MSH store 2D points, is
dropped). Cells: triangles, quads (a mesh of both has its quads cut into two triangles each) or tetrahedra;
lower-dimensional cells (a Gmsh file's boundary lines and points) are ignored; a mesh without cells gets
estimated weights. Anything else, a missing field, NaN/Inf or a frame on another mesh is a one-line DataError
naming the file and the field.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from opformer.data.readers.source import MeshSource
from opformer.errors import ConfigError, DataError
from opformer.extras import require
from opformer.kinds import OPERATOR, TRAJECTORY
from opformer.meshes import MeshSample

#: Cell kinds kept, by the mesh's dimension (meshio's names); others of the same dimension are refused.
SOLID = {2: ("triangle", "quad"), 3: ("tetra",)}
#: meshio's cell kinds of each dimension (the ones below a mesh's own dimension are its boundary, ignored).
CELL_DIMENSION = {"vertex": 0, "line": 1, "line3": 1, "triangle": 2, "quad": 2, "triangle6": 2, "quad8": 2,
                  "quad9": 2, "polygon": 2, "tetra": 3, "hexahedron": 3, "wedge": 3, "pyramid": 3, "tetra10": 3,
                  "hexahedron20": 3, "hexahedron27": 3}


def _meshio() -> Any:
    return require("meshio", "mesh", "convert mesh")


def _read(path: Path) -> Any:
    """One mesh file through meshio; a missing or unreadable one is a one-line DataError."""
    meshio = _meshio()
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    said = io.StringIO()
    try:  # meshio prints its parsers' complaints and exits the process where none reads the file
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            return meshio.read(path)
    except (Exception, SystemExit) as exc:  # ReadError, ValueError, KeyError... from its many parsers
        text = (str(exc) if not isinstance(exc, SystemExit) else said.getvalue()).strip()
        text = (text.splitlines() or [exc.__class__.__name__])[0][:120]
        raise DataError(f"{path}: not a mesh meshio can read ({text})") from None


def _points(path: Path, raw: np.ndarray) -> np.ndarray:
    points = np.asarray(raw, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] not in (2, 3) or len(points) < 2:
        raise DataError(f"{path}: points of shape {points.shape}: expected (points, 2 or 3)")
    if not np.isfinite(points).all():
        raise DataError(f"{path}: its points hold NaN or Inf")
    return points[:, :2] if points.shape[1] == 3 and not points[:, 2].any() else points


def _cells(path: Path, mesh: Any, dim: int) -> tuple[np.ndarray | None, str | None]:
    """The cells of the mesh's own dimension as one kind (triangles and quads together: the quads cut in two)."""
    blocks = [(block.type, np.asarray(block.data)) for block in mesh.cells]
    top = [(kind, data) for kind, data in blocks if CELL_DIMENSION.get(kind, -1) == dim]
    if not top:
        return None, None
    refused = sorted({kind for kind, _ in top} - set(SOLID[dim]))
    if refused:
        raise DataError(f"{path}: cells of kind {refused[0]}: expected {' and '.join(SOLID[dim])} in {dim}D")
    kinds = {kind for kind, _ in top}
    if len(kinds) == 1:
        return np.concatenate([data for _, data in top]).astype(np.int64), kinds.pop()
    parts = [data if kind == "triangle" else np.concatenate([data[:, [0, 1, 2]], data[:, [0, 2, 3]]])
             for kind, data in top]
    return np.concatenate(parts).astype(np.int64), "triangle"


def _field(path: Path, data: dict[str, np.ndarray], name: str, n: int) -> np.ndarray:
    if name not in data:
        raise DataError(f"{path}: no point field '{name}' (it has {', '.join(sorted(data)) or 'none'})")
    value = np.asarray(data[name], dtype=np.float64)
    value = value[:, None] if value.ndim == 1 else value.reshape(len(value), -1)
    if len(value) != n:
        raise DataError(f"{path}: point field '{name}' has {len(value)} values for {n} points")
    if not np.isfinite(value).all():
        raise DataError(f"{path}: point field '{name}' holds NaN or Inf")
    return value


def _sample(path: Path, mesh: Any, names: list[str]) -> MeshSample:
    """One file as a sample of operator pairs."""
    points = _points(path, mesh.points)
    cells, kind = _cells(path, mesh, points.shape[1])
    fields = {name: _field(path, mesh.point_data, name, len(points)) for name in names}
    return MeshSample(points=points, fields=fields, cells=cells, cell_kind=kind)


def _same_mesh(path: Path, first: Path, points: np.ndarray, reference: np.ndarray) -> None:
    if points.shape != reference.shape or not np.allclose(points, reference, rtol=0, atol=1e-12 * (
            1 + np.abs(reference).max())):
        raise DataError(f"{path}: its mesh differs from {first.name}'s ({points.shape[0]} points against "
                        f"{reference.shape[0]}); the frames of one trajectory share their mesh")


def _natural(path: Path) -> list[Any]:
    """A sort key in which step_10 follows step_9."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def _trajectory_files(paths: Sequence[Path]) -> list[list[Path]]:
    """The frames' files of each trajectory: one XDMF time series each, or the files of one folder."""
    groups: dict[Path, list[Path]] = {}
    singles = []
    for path in paths:
        if path.suffix.lower() == ".xdmf":
            singles.append([path])
        else:
            groups.setdefault(path.parent, []).append(path)
    return singles + [sorted(files, key=_natural) for files in groups.values()]


def _time_series(path: Path, names: list[str]) -> tuple[MeshSample, np.ndarray]:
    """An XDMF time series (one trajectory): its mesh and every step's point fields, and its times."""
    meshio = _meshio()
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        with meshio.xdmf.TimeSeriesReader(path) as reader:
            points, cells = reader.read_points_cells()
            steps = [reader.read_data(k) for k in range(reader.num_steps)]
    except Exception as exc:  # meshio's XDMF parser raises many kinds
        text = (str(exc).splitlines() or [exc.__class__.__name__])[0][:120]
        raise DataError(f"{path}: not an XDMF time series meshio can read ({text})") from None
    mesh = meshio.Mesh(points, cells)
    base = _sample(path, mesh, [])
    frames = {name: np.stack([_field(path, data, name, len(base.points)) for _, data, _ in steps])
              for name in names}
    return MeshSample(points=base.points, fields=frames, cells=base.cells, cell_kind=base.cell_kind), \
        np.asarray([t for t, _, _ in steps], dtype=np.float64)


def _folder_series(files: list[Path], names: list[str]) -> tuple[MeshSample, np.ndarray]:
    """The files of one folder, frame by frame, as one trajectory at times 0, 1, 2, ..."""
    first = _sample(files[0], _read(files[0]), names)
    frames = {name: [value] for name, value in first.fields.items()}
    for path in files[1:]:
        mesh = _read(path)
        _same_mesh(path, files[0], _points(path, mesh.points), first.points)
        for name in names:
            frames[name].append(_field(path, mesh.point_data, name, len(first.points)))
    fields = {name: np.stack(values) for name, values in frames.items()}
    return MeshSample(points=first.points, fields=fields, cells=first.cells, cell_kind=first.cell_kind), \
        np.arange(len(files), dtype=np.float64)


def read_mesh_files(paths: Sequence[Path], kind: str | None = None, inputs: list[str] | None = None,
                    targets: list[str] | None = None) -> MeshSource:
    """Users' mesh files as operator samples (one file each) or trajectories (see the module's docstring)."""
    _meshio()
    kind = kind or OPERATOR
    if not targets:
        raise ConfigError("convert mesh needs --targets: the point fields to predict, comma-separated")
    inputs = list(inputs or [])
    names = inputs + list(targets)
    if kind == OPERATOR:
        def read(count: int) -> Iterator[MeshSample]:
            for path in paths[:count]:
                yield _sample(path, _read(path), names)

        return MeshSource(samples=len(paths), read=read, inputs=inputs, targets=list(targets), pde="mesh-files",
                          settings={}, solver={"reader": "meshio"})
    if kind != TRAJECTORY:
        raise ConfigError(f"--kind {kind}: expected {OPERATOR} or {TRAJECTORY}")
    groups = _trajectory_files(paths)
    first, times = (_time_series(groups[0][0], names) if groups[0][0].suffix.lower() == ".xdmf"
                    else _folder_series(groups[0], names))

    def read_trajectories(count: int) -> Iterator[MeshSample]:
        for k, files in enumerate(groups[:count]):
            sample, stamps = (first, times) if k == 0 else (
                _time_series(files[0], names) if files[0].suffix.lower() == ".xdmf" else _folder_series(files, names))
            if stamps.shape != times.shape or not np.allclose(stamps, times):
                raise DataError(f"{files[0]}: its {len(stamps)} frames' times differ from those of "
                                f"{groups[0][0].name} ({len(times)} frames); trajectories share their times")
            yield sample

    return MeshSource(samples=len(groups), read=read_trajectories, inputs=inputs, targets=list(targets),
                      pde="mesh-files", settings={}, solver={"reader": "meshio"}, times=times)
