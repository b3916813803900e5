"""Writing opformer's data files: atomic (:mod:`opformer.io`), a piece of samples at a time, checksummed and
read back before the file takes its place (see :mod:`opformer.data.store`)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from opformer import __version__
from opformer.data.store.integrity import CHECKSUM_MAGIC, USERBLOCK, file_digest, verify_file
from opformer.data.store.schema import (ATTRS_DIGEST, FORMAT_NAME, FORMAT_VERSION, LIBVER, SAMPLE_DATASETS,
                                        attr_value, attrs_digest, check_domain, chunk_shape)
from opformer.errors import DataError
from opformer.io import atomic_replace
from opformer.kinds import OPERATOR, TRAJECTORY

#: Writers copy at most this many bytes of samples at a time (one sample if a sample is larger).
WRITE_BYTES = 64 * 2**20
#: What writes the :class:`Streamed` datasets of a file being written, given every dataset by name.
Fill = Callable[[dict[str, "h5py.Dataset"]], None]


@dataclass(frozen=True)
class Streamed:
    """A dataset of this ``shape`` that the writer's ``fill`` writes itself, a block at a time (``opformer predict``
    writes each chunk of predictions straight into its output)."""

    shape: tuple[int, ...]


def _blocks(path: Path, name: str, data: Any) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """``data`` (an array, or a list of arrays: consecutive blocks of samples) as blocks, and the whole's shape; a
    :class:`Streamed` dataset has no blocks."""
    if isinstance(data, Streamed):
        return [], tuple(data.shape)
    blocks = [np.asarray(b) for b in data] if isinstance(data, (list, tuple)) else [np.asarray(data)]
    if not blocks or any(b.ndim < 1 or b.shape[1:] != blocks[0].shape[1:] for b in blocks):
        raise DataError(f"{path}: the blocks of '{name}' must be arrays of the same shape but their first axis")
    return blocks, (sum(len(b) for b in blocks), *blocks[0].shape[1:])


def _channel_axis(path: Path, name: str, data: Any, channels: Sequence[str], domain: dict[str, Any],
                  leading: int) -> Any:
    """``data`` (see :func:`_blocks`) with one channel's axis added where it leaves it out (``leading`` axes, then
    as many grid axes as ``domain['lengths']``, then the channels), else as given; a one-line DataError naming the
    expected shape where its last axis does not hold one value per name of ``channels``."""
    lengths = domain.get("lengths") if isinstance(domain, dict) else None
    axes = len(lengths) if isinstance(lengths, list) else None
    blocks, shape = _blocks(path, name, data)
    if axes is None:  # check_domain names the fault
        return data
    if len(shape) == leading + axes and len(channels) == 1 and not isinstance(data, Streamed):
        return [block[..., None] for block in blocks]  # one channel, its axis left out
    if len(shape) != leading + axes + 1 or shape[-1] != len(channels):
        grid = ", ".join(["sample", *(["time"] * (leading - 1)), f"{axes} grid axes"])
        raise DataError(f"{path}: '{name}' has shape {shape}, expected ({grid}, {len(channels)}) for the channels "
                        f"{list(channels)}" + (f" or ({grid}) for one channel" if len(channels) == 1 else ""))
    return data


def _write_blocks(dataset: h5py.Dataset, blocks: list[np.ndarray]) -> None:
    """Store ``blocks`` one after another along the first axis, about :data:`WRITE_BYTES` at a time (whole
    samples, so whole chunks: none is written twice), converted to the dataset's type a piece at a time."""
    step = max(1, WRITE_BYTES // max(1, dataset.dtype.itemsize * math.prod(dataset.shape[1:])))
    start = 0
    for block in blocks:
        for i in range(0, len(block), step):
            piece = np.asarray(block[i:i + step], dtype=dataset.dtype)
            dataset[start + i:start + i + len(piece)] = piece
        start += len(block)


def _set_attr(f: h5py.File, key: str, value: Any) -> None:
    """A fixed-length UTF-8 string (kept in the checksummed object header, not the unchecked global heap) or a
    number."""
    if isinstance(value, str):
        raw = value.encode()
        f.attrs.create(key, np.bytes_(raw), dtype=h5py.string_dtype("utf-8", max(1, len(raw))))
    else:
        f.attrs[key] = value


def _write(path: Path, arrays: dict[str, Any], leading: dict[str, int], attrs: dict[str, Any],
           fill: Fill | None = None) -> Path:
    """Write datasets (arrays or lists of blocks of samples, see :func:`_blocks`) and attributes to a temporary
    file a piece at a time, store its SHA-256 in the user block, read it back against that digest, then rename
    it to ``path``. Memory holds one piece (:data:`WRITE_BYTES`, or a sample), never the file. ``fill`` writes the
    :class:`Streamed` datasets, given every dataset by name, before the attributes are stored."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {name: _blocks(path, name, value) for name, value in arrays.items()}
    dtypes = {name: np.float64 if name == "times" else np.float32 for name in data}
    size = sum(math.prod(shape) * np.dtype(dtypes[name]).itemsize for name, (_, shape) in data.items())
    # the space is checked first: HDF5 fails on a full disk at close time, in ways that can crash the process
    with atomic_replace(path, size=size) as tmp:
        with h5py.File(tmp, "w", userblock_size=USERBLOCK, libver=LIBVER) as f:
            for name, (blocks, shape) in data.items():
                chunks = chunk_shape(shape, leading.get(name, 0), np.dtype(dtypes[name]).itemsize)
                _write_blocks(f.create_dataset(name, shape=shape, dtype=dtypes[name], chunks=chunks,
                                               fletcher32=True), blocks)
            if fill is not None:
                fill({name: f[name] for name in data})
            stamp = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "opformer_version": __version__,
                     "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            values = {key: attr_value(value) for key, value in {**stamp, **attrs}.items()}
            store_attrs(f, values)
        seal(tmp, path)
    return path


def store_attrs(f: h5py.File, values: dict[str, Any]) -> None:
    """Store attributes (as :func:`attr_value` makes them) and their digest ``attrs_sha256``."""
    for key, value in values.items():
        _set_attr(f, key, value)
    _set_attr(f, ATTRS_DIGEST, attrs_digest(values))


def seal(tmp: Path, path: Path) -> None:
    """Store the SHA-256 of the closed temporary file ``tmp`` in its user block and read it back against it
    (a second pass over the file) before it may replace ``path``."""
    with open(tmp, "r+b") as f:
        f.write(CHECKSUM_MAGIC + file_digest(tmp).encode())
    try:  # what is on disk now, against the digest just stored
        verify_file(tmp)
    except DataError as exc:
        raise DataError(f"{path}: the file just written does not read back as written "
                        f"({str(exc).removeprefix(f'{tmp}: ')}); nothing was replaced") from None


def write_operator_dataset(
    path: str | os.PathLike,
    inputs: np.ndarray | Sequence[np.ndarray],
    targets: np.ndarray | Sequence[np.ndarray] | None,
    *,
    pde: dict[str, Any],
    solver: dict[str, Any],
    domain: dict[str, Any],
    seed: int,
    input_channels: list[str],
    target_channels: list[str],
    extra: dict[str, Any] | None = None,
    datasets: dict[str, Any] | None = None,
    fill: Fill | None = None,
) -> Path:
    """Write an operator data set atomically (temporary file, then rename).

    Parameters
    ----------
    path
        The HDF5 file to write (docs/data-format.md).
    inputs, targets
        Channel-last arrays ``(sample, *spatial, channels)`` on one grid, one value per name of ``input_channels``
        / ``target_channels`` (one channel may leave out its axis: ``(sample, *spatial)``), or lists of such blocks
        of consecutive samples, written one after another (e.g. memory maps); stored as float32. ``targets=None``
        writes a file of inputs only (for ``opformer predict``).
    pde, solver
        JSON mappings recorded as the file's ``pde`` and ``solver`` attributes (where the data came from; e.g.
        ``{"name": "heat", "viscosity": 0.01}`` and ``{"name": "exact"}``).
    domain
        ``{"lengths": [...], "periodic": [...]}`` with one entry per spatial axis, and optionally ``"grid"``: each
        axis's kind (:data:`opformer.grids.GRID_KINDS`; without it periodic axes are periodic and the others
        nodes).
    seed
        The seed the data were drawn with (0 if none).
    input_channels, target_channels
        One name per channel of ``inputs`` and of the targets (also for ``targets=None``).
    extra
        Further attributes of the file.
    datasets
        Further arrays with the samples first, stored (float32) beside (:func:`_further`).
    fill
        Writes the arrays given as :class:`Streamed`.

    Returns
    -------
    pathlib.Path
        ``path``, complete and checksummed.

    Raises
    ------
    opformer.errors.DataError
        Shapes, channel names or domain that do not fit together (one line naming the file).
    """
    path = Path(path)
    arrays = {name: _channel_axis(path, name, a, channels, domain, 1)
              for name, a, channels in (("input", inputs, input_channels), ("target", targets, target_channels))
              if a is not None}
    shapes = {name: _blocks(path, name, a)[1] for name, a in arrays.items()}
    x, y = shapes["input"], shapes.get("target")
    if y is not None and x[:-1] != y[:-1]:
        raise DataError(f"{path}: input grid {x[:-1]} differs from target grid {y[:-1]}")
    check_domain(path, domain, len(x) - 2)
    attrs = {"kind": OPERATOR, "seed": int(seed), "pde": pde, "solver": solver, "domain": domain,
             "input_channels": input_channels, "target_channels": target_channels, **(extra or {})}
    return _write(path, {**arrays, **_further(path, datasets, arrays)}, {"input": 1, "target": 1}, attrs, fill)


def write_trajectory_dataset(
    path: str | os.PathLike,
    fields: np.ndarray | Sequence[np.ndarray],
    times: np.ndarray,
    *,
    pde: dict[str, Any],
    solver: dict[str, Any],
    domain: dict[str, Any],
    seed: int,
    channels: list[str],
    extra: dict[str, Any] | None = None,
    datasets: dict[str, Any] | None = None,
    fill: Fill | None = None,
) -> Path:
    """Write a trajectory data set atomically (temporary file, then rename).

    Parameters
    ----------
    path
        The HDF5 file to write (docs/data-format.md).
    fields
        ``(sample, time, *spatial, channels)``, channel-last, one value per name of ``channels`` (one channel may
        leave out its axis), or a list of such blocks of consecutive samples, written one after another (e.g.
        memory maps); stored as float32.
    times
        ``(time,)``: the frames' time stamps, strictly increasing.
    pde, solver, domain, seed, extra, datasets, fill
        As for :func:`write_operator_dataset`.
    channels
        One name per channel of ``fields``.

    Returns
    -------
    pathlib.Path
        ``path``, complete and checksummed.

    Raises
    ------
    opformer.errors.DataError
        Shapes, time stamps, channel names or domain that do not fit together (one line naming the file).
    """
    path = Path(path)
    times = np.asarray(times, dtype=np.float64)
    fields = _channel_axis(path, "fields", fields, channels, domain, 2)
    shape = _blocks(path, "fields", fields)[1]
    if len(shape) < 4 or times.shape != (shape[1],):
        raise DataError(f"{path}: fields {shape} must be (sample, time, *spatial, channels) with one time "
                        f"stamp per frame (got {times.shape[0] if times.ndim else 0} stamps)")
    if times.size > 1 and not np.all(np.diff(times) > 0):
        raise DataError(f"{path}: time stamps must increase strictly")
    check_domain(path, domain, len(shape) - 3)
    attrs = {"kind": TRAJECTORY, "seed": int(seed), "pde": pde, "solver": solver, "domain": domain,
             "channels": channels, **(extra or {})}
    arrays = {"fields": fields, "times": times}
    return _write(path, {**arrays, **_further(path, datasets, arrays)}, {"fields": 2}, attrs, fill)


def _further(path: Path, datasets: dict[str, Any] | None, arrays: dict[str, Any]) -> dict[str, Any]:
    """Further sample-first datasets stored beside a file's own (``opformer predict --coverage``'s error bounds):
    as many samples as ``arrays``' first, under names of their own; chunked as :func:`chunk_shape` cuts a whole
    array (slabs of samples)."""
    samples = _blocks(path, next(iter(arrays)), next(iter(arrays.values())))[1][0]
    for name, value in (datasets or {}).items():
        if name in arrays or name in SAMPLE_DATASETS or _blocks(path, name, value)[1][:1] != (samples,):
            raise DataError(f"{path}: further dataset {name!r} must have a name of its own and {samples} samples first")
    return dict(datasets or {})
