"""What every reader returns (:class:`Source`) and the checks they share: present datasets of the right rank,
finite values, uniform coordinates; each failure a one-line :class:`~opformer.errors.DataError` naming the file
and the key."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from opformer.errors import DataError
from opformer.grids import PERIODIC
from opformer.kinds import MESH, OPERATOR, TRAJECTORY  # noqa: F401  (importable from here too)
from opformer.meshes import MeshSample

#: Bytes of converted samples a reader is asked for at a time (the memory a conversion holds beyond the
#: reader's own file: formats that cannot be read in parts are loaded whole). Not the HDF5 chunk of a stored
#: file (:data:`opformer.data.store.MAX_CHUNK_BYTES`).
READ_BYTES = 64 * 2**20
#: :data:`READ_BYTES` under the name this module has always exported.
CHUNK_BYTES = READ_BYTES


@dataclass
class Source:
    """A published file, ready to be written in opformer's format.

    ``read(start, stop)`` returns samples ``start..stop-1`` as float32 channel-last arrays, one per stored array:
    ``(fields,)`` of shape ``(n, time, *spatial, channels)`` for trajectories, ``(inputs, targets)`` of shape
    ``(n, *spatial, channels)`` for operator pairs; ``shapes`` is each array's shape without the sample axis and
    ``channels`` each array's channel names. ``per_sample`` holds per-sample settings (e.g. PDEArena's
    buoyancy), stored in ``pde`` for the samples taken; ``seed`` and ``extra`` (attributes) are kept where the
    file records them (opformer's own files); ``every_sample``: the settings may describe every sample, so all
    must be taken; ``pde_of(count)``, where given, is ``pde`` for the first ``count`` samples (settings that
    describe ranges of samples, such as The Well's splits). ``read_frame(t, count)``, where given, returns frame ``t``
    of the first ``count`` samples ``(count, *spatial, channels)`` of a trajectory file stored time-major (MATLAB
    v7.3: samples vary fastest on disk, so a range of samples is a strided read of the whole file, a frame of
    every sample one contiguous read).
    """

    kind: str
    samples: int
    shapes: tuple[tuple[int, ...], ...]
    channels: tuple[list[str], ...]
    read: Callable[[int, int], tuple[np.ndarray, ...]]
    domain: dict[str, list]
    pde: dict[str, Any]
    solver: dict[str, Any]
    times: np.ndarray | None = None
    per_sample: dict[str, np.ndarray] = field(default_factory=dict)
    read_frame: Callable[[int, int], np.ndarray] | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    every_sample: bool = False
    pde_of: Callable[[int], dict[str, Any]] | None = None

    def chunk(self) -> int:
        """Samples per read: about :data:`READ_BYTES` of converted float32 values, at least one sample."""
        per_sample = sum(4 * int(np.prod(shape)) for shape in self.shapes)
        return max(1, READ_BYTES // max(per_sample, 1))


@dataclass
class MeshSource:
    """A published mesh data set (or users' mesh files), ready to be written as a mesh data file
    (:func:`opformer.data.store.write_mesh_dataset`): ``read(count)`` yields its first ``count`` samples one at a
    time (a :class:`~opformer.meshes.MeshSample` each, fields named by ``inputs`` and ``targets``); ``times`` the
    frames' times of a trajectory set (None: operator pairs); ``pde`` the problem's name and ``settings`` its
    parameters (e.g. the publisher's splits)."""

    samples: int
    read: Callable[[int], Iterator[MeshSample]]
    inputs: list[str]
    targets: list[str]
    pde: str
    settings: dict[str, Any]
    solver: dict[str, Any]
    times: np.ndarray | None = None
    kind: str = MESH
    every_sample: bool = False


def domain(lengths: Sequence[float], kinds: Sequence[str]) -> dict[str, list]:
    """The stored domain of axes of the given lengths and grid kinds."""
    return {"lengths": [float(v) for v in lengths], "periodic": [k == PERIODIC for k in kinds], "grid": list(kinds)}


def channel_names(base: str, count: int) -> list[str]:
    """``[base]`` for one channel, else ``base0, base1, ...``."""
    return [base] if count == 1 else [f"{base}{i}" for i in range(count)]


@contextmanager
def open_hdf5(path: Path) -> Iterator[h5py.File]:
    """Open a published HDF5 file for reading; a missing or non-HDF5 file is a one-line DataError."""
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({exc.__class__.__name__})") from None
    with f:
        yield f


def dataset(path: Path, group: h5py.Group, key: str, ndim: int | None = None,
            shape: tuple[int, ...] | None = None, expected: str = "") -> h5py.Dataset:
    """``group[key]``, a dataset of rank ``ndim`` (or exactly ``shape``); else a DataError naming the key and
    ``expected`` (the layout in words)."""
    name = f"{group.name.rstrip('/')}/{key}"
    if key not in group or not isinstance(group[key], h5py.Dataset):
        raise DataError(f"{path}: missing dataset '{name}'" + (f" (expected {expected})" if expected else ""))
    data = group[key]
    if (ndim is not None and data.ndim != ndim) or (shape is not None and data.shape != tuple(shape)):
        want = expected or (f"shape {tuple(shape)}" if shape is not None else f"{ndim} axes")
        raise DataError(f"{path}: '{name}' has shape {data.shape}, expected {want}")
    return data


def read_slice(path: Path, data: h5py.Dataset, index: Any) -> np.ndarray:
    """``data[index]``; a damaged or truncated file is a one-line DataError naming the dataset."""
    try:
        return data[index]
    except (OSError, RuntimeError, ValueError) as exc:
        raise DataError(f"{path}: '{data.name}' could not be read ({exc.__class__.__name__}); is the file "
                        "truncated?") from None


def finite(path: Path, key: str, array: np.ndarray, first: int) -> np.ndarray:
    """``array`` (samples first, the first being sample ``first``) as float32; NaN or Inf is a DataError."""
    array = np.asarray(array, dtype=np.float32)
    bad = ~np.isfinite(array.reshape(array.shape[0], -1)).all(axis=1)
    if bad.any():
        raise DataError(f"{path}: '{key}' holds NaN or Inf (first in sample {first + int(np.argmax(bad))})")
    return array


def uniform_spacing(path: Path, key: str, coords: np.ndarray, count: int) -> float:
    """The spacing of the ``count`` equally spaced (to 0.1% of a step: float32 files round), increasing
    coordinates ``coords``; else a DataError."""
    coords = np.asarray(coords, dtype=np.float64).reshape(-1)
    if coords.size != count or count < 2:
        raise DataError(f"{path}: '{key}' holds {coords.size} coordinates, expected {count} (one per grid point)")
    steps = np.diff(coords)
    if not np.isfinite(coords).all() or steps[0] <= 0 or np.ptp(steps) > 1e-3 * steps[0]:
        raise DataError(f"{path}: '{key}' is not uniformly spaced and increasing (steps {steps.min():.6g} to "
                        f"{steps.max():.6g}); only uniform grids can be stored")
    return float((coords[-1] - coords[0]) / (count - 1))


def tidy(value: float) -> float:
    """``value`` to 6 significant digits where that moves it by float32 rounding at most (a length of 1.0000000209
    computed from float32 coordinates is 1), else unchanged (2 pi stays 2 pi)."""
    rounded = float(f"{value:.6g}")
    return rounded if abs(rounded - value) <= 4e-7 * abs(value) else float(value)


def frame_times(path: Path, key: str, times: np.ndarray, frames: int) -> np.ndarray:
    """The time stamps of ``frames`` frames: ``times`` (``frames`` entries, or one more, as PDEBench stores, whose
    first ``frames`` are the frames' times), increasing."""
    times = np.asarray(times, dtype=np.float64).reshape(-1)
    if times.size not in (frames, frames + 1):
        raise DataError(f"{path}: '{key}' holds {times.size} times for {frames} frames")
    times = times[:frames]
    if not np.isfinite(times).all() or (frames > 1 and not np.all(np.diff(times) > 0)):
        raise DataError(f"{path}: '{key}' must hold increasing, finite times")
    return times
