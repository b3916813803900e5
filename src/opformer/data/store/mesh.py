"""Mesh data files (``kind = "mesh"``): samples on meshes or point clouds whose point counts differ, stored as
the rows of all samples one after another with per-sample offsets (see docs/data-format.md, "Mesh data sets").

Written a sample at a time (:func:`write_mesh_dataset`, atomic, checksummed and read back as the grid files are)
and read a sample at a time (:class:`MeshFile`, :func:`read_mesh_samples`), every read checked: a corrupt chunk
or NaN/Inf is a one-line DataError naming the file, the dataset and the sample.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from opformer import __version__
from opformer.data.store.integrity import USERBLOCK, reason
from opformer.data.store.read import DataFile
from opformer.data.store.schema import (CELL_OFFSETS, CELLS, FIELDS, FORMAT_NAME, FORMAT_VERSION, INDEX_SHAPE,
                                        INPUT, LIBVER, MAX_CHUNK_BYTES, OFFSETS, POINTS, SETTINGS, TARGET, WEIGHTS,
                                        DatasetInfo, attr_value)
from opformer.data.store.write import WRITE_BYTES, seal, store_attrs
from opformer.errors import ConfigError, DataError
from opformer.io import atomic_replace
from opformer.kinds import MESH, OPERATOR, TRAJECTORY
from opformer.meshes import CELL_VERTICES, MeshSample, cell_kind_of, structured_quads

#: The fewest rows of a stored chunk of per-point data (a chunk is about one sample of the first's size).
MIN_CHUNK_ROWS = 256


def channel_names(fields: Sequence[tuple[str, int]]) -> list[str]:
    """The channels of ``(field, channels)`` pairs: a field's own name, or ``name_0``, ``name_1``, ... where it
    has several."""
    return [name if count == 1 else f"{name}_{k}" for name, count in fields for k in range(count)]


class _Columns:
    """A growing per-row dataset, written a block of buffered rows at a time."""

    def __init__(self, f: h5py.File, name: str, row: tuple[int, ...], dtype: type, rows: int,
                 frame_chunks: bool = False) -> None:
        per_row = row if not frame_chunks else (1, *row[1:])  # a chunk's row: whole, or one frame of it
        chunk_rows = max(1, min(rows, MAX_CHUNK_BYTES // max(1, np.dtype(dtype).itemsize * math.prod(per_row))))
        chunks = (chunk_rows, *per_row)
        self.dataset = f.create_dataset(name, shape=(0, *row), maxshape=(None, *row), dtype=dtype, chunks=chunks,
                                        fletcher32=True)
        self.pending: list[np.ndarray] = []
        self.size = 0

    def add(self, rows: np.ndarray) -> None:
        self.pending.append(np.asarray(rows, dtype=self.dataset.dtype))

    def flush(self) -> None:
        if self.pending:
            block = np.concatenate(self.pending)
            self.dataset.resize(self.size + len(block), axis=0)
            self.dataset[self.size:] = block
            self.size += len(block)
            self.pending = []


class _MeshWriter:
    """Checks each sample against the first and appends its rows (see :func:`write_mesh_dataset`)."""

    def __init__(self, f: h5py.File, path: Path, inputs: list[str], targets: list[str],
                 times: np.ndarray | None) -> None:
        self.f, self.path, self.inputs, self.targets, self.times = f, path, inputs, targets, times
        self.columns: dict[str, _Columns] = {}
        self.offsets, self.cell_offsets = [0], [0]
        self.shapes: list[tuple[int, ...]] = []
        self.settings: list[list[float]] = []
        self.first: MeshSample | None = None
        self.channels: dict[str, int] = {}
        self.low = self.high = None
        self.buffered = 0
        self.implicit = False  # the cells are the quads of each sample's index grid: stored as the shape alone

    def _fail(self, i: int, what: str) -> DataError:
        return DataError(f"{self.path}: sample {i}: {what}")

    def _field(self, i: int, sample: MeshSample, name: str, n: int) -> np.ndarray:
        """Field ``name`` of sample ``i`` as ``(n, channels)`` (operator) or ``(n, time, channels)``."""
        if name not in sample.fields:
            raise self._fail(i, f"no field {name!r} (it has {', '.join(sample.fields) or 'none'})")
        value = np.asarray(sample.fields[name], dtype=np.float64)
        if self.times is None:
            value = value[:, None] if value.ndim == 1 else value
            if value.ndim != 2 or value.shape[0] != n:
                raise self._fail(i, f"field {name!r} has shape {value.shape}, expected ({n}, channels)")
        else:
            value = value[..., None] if value.ndim == 2 else value
            if value.ndim != 3 or value.shape[:2] != (len(self.times), n):
                raise self._fail(i, f"field {name!r} has shape {value.shape}, expected ({len(self.times)}, {n}, "
                                 "channels): one frame per time")
            value = value.transpose(1, 0, 2)
        if self.channels.setdefault(name, value.shape[-1]) != value.shape[-1]:
            raise self._fail(i, f"field {name!r} has {value.shape[-1]} channels, the first sample "
                             f"{self.channels[name]}")
        if not np.isfinite(value).all():
            raise self._fail(i, f"field {name!r} holds NaN or Inf")
        return value

    def add(self, i: int, sample: MeshSample) -> None:
        points = np.asarray(sample.points, dtype=np.float64)
        if points.ndim != 2 or points.shape[1] not in (2, 3) or len(points) < 1:
            raise self._fail(i, f"points of shape {points.shape}: expected (points, 2 or 3)")
        if not np.isfinite(points).all():
            raise self._fail(i, "points hold NaN or Inf")
        n, first = len(points), self.first or sample
        if points.shape[1] != np.asarray(first.points).shape[1]:
            raise self._fail(i, f"{points.shape[1]}D points, the first sample's are "
                             f"{np.asarray(first.points).shape[1]}D")
        weights = np.asarray(sample.weights, dtype=np.float64)
        if weights.shape != (n,) or not np.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
            raise self._fail(i, f"weights of shape {weights.shape}: expected {n} finite values >= 0, not all 0")
        if sample.weights_from != first.weights_from:
            raise self._fail(i, f"weights {sample.weights_from}, the first sample's {first.weights_from} (a file "
                             "holds one kind)")
        values = [self._field(i, sample, name, n) for name in self.inputs + self.targets]
        if sample.cells is not None and sample.cell_kind is None:  # weights given with the cells, kind not
            sample.cell_kind = cell_kind_of(np.asarray(sample.cells), points.shape[1])
        if (sample.cells is None) != (first.cells is None) or sample.cell_kind != first.cell_kind:
            raise self._fail(i, f"cells {sample.cell_kind}, the first sample's {first.cell_kind} (a file holds one "
                             "kind, in every sample or none)")
        if sample.cells is not None:
            cells = np.asarray(sample.cells)
            if (cells.ndim != 2 or cells.shape[1] != CELL_VERTICES[sample.cell_kind] or len(cells) < 1
                    or cells.min() < 0 or cells.max() >= n):
                raise self._fail(i, f"cells of shape {cells.shape}: expected (cells, "
                                 f"{CELL_VERTICES[sample.cell_kind]}) indices of its {n} points")
        if (sample.shape is None) != (first.shape is None) or (
                sample.shape is not None and (len(sample.shape) != len(first.shape) or math.prod(sample.shape) != n)):
            raise self._fail(i, f"index shape {sample.shape}: expected one of {n} points, of the first sample's rank, "
                             "in every sample or none")
        if sorted(sample.settings) != sorted(first.settings):
            raise self._fail(i, f"settings {sorted(sample.settings)}, the first sample's {sorted(first.settings)}")
        try:
            settings = [float(sample.settings[k]) for k in sorted(first.settings)]
        except (TypeError, ValueError):
            raise self._fail(i, f"settings {sample.settings}: expected numbers") from None
        if self.first is None:
            self.implicit = _index_quads(sample)
            self._create(sample, n)
        elif self.implicit and not _index_quads(sample):
            raise self._fail(i, "cells are not the quads of its index shape, as the first sample's are")
        self.columns[POINTS].add(points)
        self.columns[WEIGHTS].add(weights)
        self.low = points.min(0) if self.low is None else np.minimum(self.low, points.min(0))
        self.high = points.max(0) if self.high is None else np.maximum(self.high, points.max(0))
        split = len(self.inputs)
        for name, parts in ((INPUT, values[:split]), (TARGET, values[split:])) if self.times is None else (
                (FIELDS, values),):
            if name in self.columns:
                self.columns[name].add(np.concatenate(parts, axis=-1))
        if sample.cells is not None and not self.implicit:
            self.columns[CELLS].add(np.asarray(sample.cells))
            self.cell_offsets.append(self.cell_offsets[-1] + len(sample.cells))
        if sample.shape is not None:
            self.shapes.append(tuple(int(s) for s in sample.shape))
        self.settings.append(settings)
        self.offsets.append(self.offsets[-1] + n)
        self.buffered += n * (8 * points.shape[1] + 8 + 4 * sum(v[0].size for v in values))
        if self.buffered >= WRITE_BYTES:
            self.flush()

    def _create(self, sample: MeshSample, n: int) -> None:
        """The per-row datasets, their chunks about the first sample's size."""
        self.first = sample
        rows = max(n, MIN_CHUNK_ROWS)
        d = np.asarray(sample.points).shape[1]
        self.columns[POINTS] = _Columns(self.f, POINTS, (d,), np.float64, rows)
        self.columns[WEIGHTS] = _Columns(self.f, WEIGHTS, (), np.float64, rows)
        c_in = sum(self.channels[name] for name in self.inputs)
        c_out = sum(self.channels[name] for name in self.targets)
        if self.times is not None:
            self.columns[FIELDS] = _Columns(self.f, FIELDS, (len(self.times), c_in + c_out), np.float32, rows, True)
        else:
            if c_in:
                self.columns[INPUT] = _Columns(self.f, INPUT, (c_in,), np.float32, rows)
            if c_out:
                self.columns[TARGET] = _Columns(self.f, TARGET, (c_out,), np.float32, rows)
        if sample.cells is not None and not self.implicit:
            k = CELL_VERTICES[sample.cell_kind]
            self.columns[CELLS] = _Columns(self.f, CELLS, (k,), np.int64, max(len(sample.cells), MIN_CHUNK_ROWS))

    def flush(self) -> None:
        for column in self.columns.values():
            column.flush()
        self.buffered = 0

    def finish(self) -> dict[str, Any]:
        """Write the per-sample datasets; returns the ``mesh`` and ``domain`` attributes."""
        if self.first is None:
            raise DataError(f"{self.path}: no samples to write")
        self.flush()
        samples = len(self.offsets) - 1
        small = {OFFSETS: np.asarray(self.offsets, np.int64)}
        if self.first.cells is not None and not self.implicit:
            small[CELL_OFFSETS] = np.asarray(self.cell_offsets, np.int64)
        if self.shapes:
            small[INDEX_SHAPE] = np.asarray(self.shapes, np.int64)
        if self.first.settings:
            small[SETTINGS] = np.asarray(self.settings, np.float64)
        if self.times is not None:
            small["times"] = np.asarray(self.times, np.float64)
        for name, array in small.items():
            chunks = (min(len(array), 2**16), *array.shape[1:])
            self.f.create_dataset(name, data=array, chunks=chunks, fletcher32=True)
        d = int(np.asarray(self.first.points).shape[1])
        mesh = {"task": OPERATOR if self.times is None else TRAJECTORY, "dim": d,
                "inputs": [[name, self.channels[name]] for name in self.inputs],
                "targets": [[name, self.channels[name]] for name in self.targets],
                "cell_kind": self.first.cell_kind if self.first.cells is not None else None,
                "weights_from": self.first.weights_from, "structured": bool(self.shapes),
                "cells_from_shape": self.implicit,
                "settings": sorted(self.first.settings), "samples": samples, "points": int(self.offsets[-1])}
        domain = {"lengths": (self.high - self.low).tolist(), "periodic": [False] * d, "origin": self.low.tolist()}
        return {"mesh": mesh, "domain": domain}


def _index_quads(sample: MeshSample) -> bool:
    """Whether a sample's cells are the quads of its 2D index grid (:func:`structured_quads`)."""
    shape, cells = sample.shape, sample.cells
    return (cells is not None and shape is not None and len(shape) == 2 and sample.cell_kind == "quad"
            and np.shape(cells) == ((shape[0] - 1) * (shape[1] - 1), 4)
            and np.array_equal(cells, structured_quads(tuple(shape))))


def write_mesh_dataset(path: str | os.PathLike, samples: Iterable[MeshSample], *, inputs: list[str],
                       targets: list[str], pde: str, settings: dict[str, Any], force: bool = False,
                       times: Sequence[float] | None = None, solver: dict[str, Any] | None = None, seed: int = -1,
                       extra: dict[str, Any] | None = None) -> Path:
    """Write mesh samples atomically, one at a time (memory holds about :data:`WRITE_BYTES` of rows).

    ``inputs``/``targets``: the names of the samples' fields that are the operator's inputs and targets (an empty
    ``inputs``: the coordinates alone are the input; an empty ``targets``: a file of inputs for ``predict``).
    ``times``: the frames' times of a trajectory set (every field then ``(time, n, channels)``); None: operator
    pairs (``(n, channels)``; a 1D field is one channel). ``pde`` names the problem and ``settings`` its
    parameters (the ``pde`` attribute ``{"name": pde, **settings}``); ``solver`` and ``seed`` are recorded as
    the grid files record them. Samples must agree with the first on dimension, fields and channel counts,
    weight kind, cell kind, index-shape rank and setting names; a sample that does not, or holds NaN/Inf, is a
    one-line DataError naming it, and nothing is written. An existing ``path`` is replaced only with ``force``.
    """
    path = Path(path)
    if path.exists() and not force:
        raise ConfigError(f"{path}: already exists; add --force to replace it")
    inputs, targets = list(inputs), list(targets)
    if len(set(inputs + targets)) != len(inputs + targets) or not inputs + targets:
        raise DataError(f"{path}: inputs {inputs} and targets {targets} must name distinct fields, at least one")
    stamps = None if times is None else np.asarray(times, dtype=np.float64)
    if stamps is not None and (stamps.ndim != 1 or len(stamps) < 1 or not np.all(np.diff(stamps) > 0)):
        raise DataError(f"{path}: times must increase strictly (one per frame)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_replace(path) as tmp:
        with h5py.File(tmp, "w", userblock_size=USERBLOCK, libver=LIBVER) as f:
            writer = _MeshWriter(f, path, inputs, targets, stamps)
            for i, sample in enumerate(samples):
                writer.add(i, sample)
            layout = writer.finish()
            fields = layout["mesh"]
            attrs = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "opformer_version": __version__,
                     "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "kind": MESH,
                     "seed": int(seed), "pde": {"name": pde, **settings}, "solver": solver or {},
                     "input_channels": channel_names(fields["inputs"]),
                     "target_channels": channel_names(fields["targets"]), **layout, **(extra or {})}
            store_attrs(f, {key: attr_value(value) for key, value in attrs.items()})
        seal(tmp, path)
    return path


class MeshFile:
    """An opened mesh data file, read a sample at a time; every read checked (see :class:`DataFile`). A context
    manager; a handle moved to another process reopens the file there."""

    def __init__(self, path: str | os.PathLike, cache_bytes: int | None = None) -> None:
        self.data = DataFile(path, cache_bytes)
        try:
            self.info: DatasetInfo = self.data.info()
            if self.info.kind != MESH:
                raise DataError(f"{self.data.path}: holds {self.info.kind} data on a grid, not mesh data")
            self.offsets = self._offsets(OFFSETS, self.info.mesh["points"])
            self.cell_offsets = (self._offsets(CELL_OFFSETS, len(self.data.dataset(CELLS)))
                                 if self.info.mesh["cell_kind"] and not self.info.mesh["cells_from_shape"] else None)
            self.index_shape = self.data.read(INDEX_SHAPE) if self.info.mesh["structured"] else None
            self.settings = self.data.read(SETTINGS) if self.info.mesh["settings"] else None
        except BaseException:
            self.data.close()
            raise

    @property
    def path(self) -> Path:
        return self.data.path

    def _offsets(self, name: str, rows: int) -> np.ndarray:
        offsets = self.data.read(name)
        if offsets[0] != 0 or offsets[-1] != rows or (np.diff(offsets) < 1).any():
            raise DataError(f"{self.path}: '/{name}' does not rise from 0 to the {rows} stored rows (corrupt)")
        return offsets

    def __len__(self) -> int:
        return self.info.n_samples

    def __enter__(self) -> MeshFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.data.close()

    def point_counts(self) -> np.ndarray:
        """The number of points of every sample."""
        return np.diff(self.offsets)

    def rows(self, name: str, sample: int, finite: bool = True) -> np.ndarray:
        """Sample ``sample``'s rows of the per-point dataset ``name`` (a corrupt chunk or NaN/Inf: a one-line
        DataError naming the file, the dataset and the sample)."""
        offsets = self.cell_offsets if name == CELLS else self.offsets
        dataset = self.data.dataset(name)
        try:
            array = np.asarray(dataset[int(offsets[sample]):int(offsets[sample + 1])])
        except (OSError, RuntimeError, KeyError) as exc:
            raise DataError(f"{self.path}: '/{name}' sample {sample} is corrupt ({reason(exc)}); regenerate or "
                            "re-copy the file") from None
        if finite and not np.isfinite(array).all():
            raise DataError(f"{self.path}: '/{name}' holds NaN or Inf (first in sample {sample})")
        return array

    def sample(self, i: int) -> MeshSample:
        """Sample ``i`` as it was written (fields float32, points and weights float64)."""
        mesh = self.info.mesh
        if not 0 <= i < len(self):
            raise DataError(f"{self.path}: sample {i}: the file holds samples 0..{len(self) - 1}")
        n = int(self.offsets[i + 1] - self.offsets[i])
        fields: dict[str, np.ndarray] = {}
        if mesh["task"] == TRAJECTORY:
            blocks = [(mesh["inputs"] + mesh["targets"], self.rows(FIELDS, i).transpose(1, 0, 2))]
        else:
            blocks = [(mesh["inputs"], self.rows(INPUT, i) if mesh["inputs"] else None)]
            if self.info.has_target:
                blocks.append((mesh["targets"], self.rows(TARGET, i)))
        for names, values in blocks:
            start = 0
            for name, count in names:
                fields[name] = values[..., start:start + count]
                start += count
        cells = None
        if self.cell_offsets is not None:
            cells = self.rows(CELLS, i)
            if cells.min() < 0 or cells.max() >= n:
                raise DataError(f"{self.path}: '/{CELLS}' of sample {i} index points outside its {n} (corrupt)")
        shape = tuple(int(s) for s in self.index_shape[i]) if self.index_shape is not None else None
        if shape is not None and math.prod(shape) != n:
            raise DataError(f"{self.path}: '/{INDEX_SHAPE}' of sample {i} is {shape}, not of its {n} points (corrupt)")
        if mesh["cells_from_shape"]:
            cells = structured_quads(shape)
        settings = dict(zip(mesh["settings"], self.settings[i].tolist())) if self.settings is not None else {}
        return MeshSample(points=self.rows(POINTS, i), fields=fields, cells=cells, cell_kind=mesh["cell_kind"],
                          weights=self.rows(WEIGHTS, i), weights_from=mesh["weights_from"], shape=shape,
                          settings=settings)


def read_mesh_samples(path: str | os.PathLike, indices: Iterable[int]) -> list[MeshSample]:
    """The samples ``indices`` of a mesh data file (see :class:`MeshFile`)."""
    with MeshFile(path) as data:
        return [data.sample(int(i)) for i in indices]
