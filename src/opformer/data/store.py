"""The opformer HDF5 data-set format: atomic writing (:mod:`opformer.io`), validated and checked reading.

An *operator* data set holds input/target pairs on one grid (see docs/data-format.md)::

    /input   (sample, *spatial, in_channels)   float32, one sample per chunk (see :func:`chunk_shape`)
    /target  (sample, *spatial, out_channels)  float32, one sample per chunk (absent in a file of inputs
                                               awaiting prediction)
    attrs: format, format_version, kind, pde (JSON), solver (JSON), domain (JSON), seed,
           opformer_version, created, input_channels (JSON), target_channels (JSON), attrs_sha256

A *trajectory* data set holds solutions of a time-dependent PDE, frame by frame::

    /fields  (sample, time, *spatial, channels)  float32, one frame per chunk (see :func:`chunk_shape`)
    /times   (time,)                             float64, strictly increasing
    attrs: as above, with channels (JSON) in place of input_channels/target_channels

Integrity. Files are written with HDF5's ``fletcher32`` filter on every dataset (each chunk carries a checksum
HDF5 checks whenever it reads the chunk) and in the file format of HDF5 1.10 (``libver`` :data:`LIBVER`), whose
superblock, object headers (they hold the attributes) and chunk indexes carry checksums too. Attributes are
fixed-length strings (a variable-length string lives in HDF5's global heap, which has no checksum) and
``attrs_sha256`` holds a digest of all the others (HDF5 stores an attribute above about 4 KiB outside its
checked metadata). Every byte a read depends on is therefore checked as it is read, at no extra pass; the
whole-file SHA-256 in the user block is checked by :func:`verify_file` (``opformer verify``, and after every
write). Files written before (no ``fletcher32``) are hashed whole on their first open in a process, as before.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from opformer import __version__
from opformer.errors import DataError
from opformer.grids import GRID_KINDS, PERIODIC
from opformer.io import atomic_replace

FORMAT_NAME = "opformer"
FORMAT_VERSION = 1
#: The HDF5 user block (bytes HDF5 leaves to the application) holds ``CHECKSUM_MAGIC`` + the file's SHA-256.
USERBLOCK, CHECKSUM_MAGIC = 512, b"opformer-sha256:"
#: The HDF5 file-format bounds of new files: 1.10's format is the first whose chunk indexes carry checksums
#: (1.8's version-1 B-tree has none); files are readable by HDF5 1.10 and later.
LIBVER = ("v110", "v110")
#: The largest chunk :func:`chunk_shape` makes, in bytes.
CHUNK_BYTES = 4 * 2**20
#: Writers copy at most this many bytes of samples at a time (one sample if a sample is larger).
WRITE_BYTES = 64 * 2**20
#: What writes the :class:`Streamed` datasets of a file being written, given every dataset by name.
Fill = Callable[[dict[str, "h5py.Dataset"]], None]
#: The attribute holding the SHA-256 of all other attributes (see :func:`_attrs_digest`).
ATTRS_DIGEST = "attrs_sha256"
KINDS = ("operator", "trajectory")
JSON_ATTRS = ("pde", "solver", "domain", "input_channels", "target_channels", "channels")
COMMON_ATTRS = ("format", "format_version", "kind", "seed", "opformer_version", "created", "pde", "solver",
                "domain")
REQUIRED_ATTRS = COMMON_ATTRS + ("input_channels", "target_channels")  # of an operator data set
TRAJECTORY_ATTRS = COMMON_ATTRS + ("channels",)
#: Datasets whose first axis is the sample (errors name the sample; ``fields`` also the frame).
SAMPLE_DATASETS = ("input", "target", "fields")
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


@dataclass(frozen=True)
class DatasetInfo:
    """Self-description of a stored data set (the file's attributes, decoded)."""

    path: Path
    kind: str
    n_samples: int
    spatial_shape: tuple[int, ...]
    input_channels: list[str]
    target_channels: list[str]
    has_target: bool
    pde: dict[str, Any]
    solver: dict[str, Any]
    domain: dict[str, Any]
    seed: int
    extra: dict[str, Any] = field(default_factory=dict)
    times: tuple[float, ...] = ()  # the frames' time stamps (trajectory data sets)

    @property
    def ndim(self) -> int:
        """Number of spatial dimensions."""
        return len(self.spatial_shape)


# Writing.

def chunk_shape(shape: Sequence[int], leading: int, itemsize: int = 4, limit: int | None = None) -> tuple[int, ...]:
    """The stored chunk of a dataset of ``shape``: one entry of each of the ``leading`` axes (1: a sample of an
    operator file; 2: a frame of a trajectory file) and all of the others, unless that is over ``limit`` bytes
    (default :data:`CHUNK_BYTES`; values of ``itemsize`` bytes): then the first spatial axis is cut into the
    fewest equal slabs that fit (the last may be thinner), and where a single plane is still too large, the next
    axis as well. The last axis (channels) is never cut.

    Whole frames make a window (``t_in + t_out`` consecutive frames) read exactly the chunks of its frames and a
    strided time read only those it takes. The limit bounds what HDF5 holds per chunk (it reads, checks and
    copies a chunk whole; a chunk above its chunk cache is never cached) and how much a corrupt chunk takes
    away, while a chunk stays a large sequential read. Examples, float32: ``(100, 50, 64, 64, 1)`` ->
    ``(1, 1, 64, 64, 1)`` (16 KiB); ``(10, 20, 128, 128, 128, 3)`` -> ``(1, 1, 19, 128, 128, 3)``
    (3.6 MiB, 7 slabs of a 24 MiB frame).
    """
    limit = CHUNK_BYTES if limit is None else limit
    chunk = [1] * leading + [int(size) for size in shape[leading:]]
    for axis in range(leading, len(chunk) - 1):
        rest = itemsize * math.prod(chunk[axis + 1:])
        if rest * chunk[axis] <= limit:
            break
        pieces = math.ceil(chunk[axis] / max(1, limit // rest))
        chunk[axis] = math.ceil(chunk[axis] / pieces)
    return tuple(max(1, size) for size in chunk)


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


def _attr_value(value: Any) -> Any:
    """An attribute as stored: dicts and lists as JSON text, numpy scalars as Python ones."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value)
    return value.item() if isinstance(value, np.generic) else value


def _attrs_digest(values: dict[str, Any]) -> str:
    """SHA-256 of attributes (text and numbers, as :func:`_attr_value` stores and :func:`_read_attrs` returns)."""
    return hashlib.sha256(json.dumps(sorted(values.items()), default=str).encode()).hexdigest()


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
            values = {key: _attr_value(value) for key, value in {**stamp, **attrs}.items()}
            for key, value in values.items():
                _set_attr(f, key, value)
            _set_attr(f, ATTRS_DIGEST, _attrs_digest(values))
        with open(tmp, "r+b") as f:
            f.write(CHECKSUM_MAGIC + _file_digest(tmp).encode())
        try:  # what is on disk now, against the digest just stored (a second pass over the file)
            verify_file(tmp)
        except DataError as exc:
            raise DataError(f"{path}: the file just written does not read back as written "
                            f"({str(exc).removeprefix(f'{tmp}: ')}); nothing was replaced") from None
    return path


def _file_digest(path: Path) -> str:
    """SHA-256 of everything after the user block (the whole HDF5 image), hex; read 4 MiB at a time."""
    hasher = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(USERBLOCK)
        for block in iter(lambda: f.read(1 << 22), b""):
            hasher.update(block)
    return hasher.hexdigest()


def _check_domain(path: Path, domain: dict[str, Any], ndim: int) -> None:
    for key in ("lengths", "periodic") + (("grid",) if "grid" in domain else ()):
        if not isinstance(domain.get(key), list) or len(domain[key]) != ndim:
            raise DataError(f"{path}: domain['{key}'] must be a list of {ndim} entries (one per axis)")
    if "grid" in domain:
        for kind, periodic in zip(domain["grid"], domain["periodic"]):
            if kind not in GRID_KINDS or (kind == PERIODIC) != bool(periodic):
                raise DataError(f"{path}: domain['grid'] entry {kind!r}: expected one of {', '.join(GRID_KINDS)}, "
                                "periodic exactly where domain['periodic'] says so")


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

    ``inputs``/``targets`` are channel-last ``(sample, *spatial, channels)`` (or lists of such blocks of
    consecutive samples, written one after another, e.g. memory maps); ``targets=None`` writes a file of
    inputs only (for ``opformer predict``). ``domain`` is ``{"lengths": [...], "periodic": [...]}`` with one
    entry per spatial axis, and optionally ``"grid"``: each axis's kind (:data:`opformer.grids.GRID_KINDS`;
    without it periodic axes are periodic and the others nodes). ``datasets``: further arrays with the samples
    first, stored (float32) beside (:func:`_further`). Any of them may be :class:`Streamed`: ``fill`` writes those.
    """
    path = Path(path)
    arrays = {name: a for name, a in (("input", inputs), ("target", targets)) if a is not None}
    shapes = {name: _blocks(path, name, a)[1] for name, a in arrays.items()}
    x, y = shapes["input"], shapes.get("target")
    if y is not None and x[:-1] != y[:-1]:
        raise DataError(f"{path}: input grid {x[:-1]} differs from target grid {y[:-1]}")
    if x[-1] != len(input_channels) or (y is not None and y[-1] != len(target_channels)):
        raise DataError(f"{path}: channel names do not match the channel dimension of the arrays")
    _check_domain(path, domain, len(x) - 2)
    attrs = {"kind": "operator", "seed": int(seed), "pde": pde, "solver": solver, "domain": domain,
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
    """Write a trajectory data set atomically: ``fields`` ``(sample, time, *spatial, channels)`` (or a list of
    such blocks of consecutive samples, written one after another, e.g. memory maps) at ``times``; ``datasets`` as
    :func:`write_operator_dataset`'s."""
    path = Path(path)
    times = np.asarray(times, dtype=np.float64)
    shape = _blocks(path, "fields", fields)[1]
    if len(shape) < 4 or times.shape != (shape[1],):
        raise DataError(f"{path}: fields {shape} must be (sample, time, *spatial, channels) with one time "
                        f"stamp per frame (got {times.shape[0] if times.ndim else 0} stamps)")
    if shape[-1] != len(channels):
        raise DataError(f"{path}: channel names do not match the channel dimension of the fields")
    if times.size > 1 and not np.all(np.diff(times) > 0):
        raise DataError(f"{path}: time stamps must increase strictly")
    _check_domain(path, domain, len(shape) - 3)
    attrs = {"kind": "trajectory", "seed": int(seed), "pde": pde, "solver": solver, "domain": domain,
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


# Integrity.

_VERIFIED: set[tuple[str, int, int]] = set()


def _file_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


def _head(path: Path) -> tuple[bool, int | None]:
    """Whether the file holds an opformer checksum, and the version of its HDF5 superblock (None: no HDF5
    superblock after the user block)."""
    try:
        with open(path, "rb") as f:
            head = f.read(USERBLOCK + len(_HDF5_SIGNATURE) + 1)
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc.__class__.__name__})") from None
    superblock = head[USERBLOCK:USERBLOCK + len(_HDF5_SIGNATURE)] == _HDF5_SIGNATURE
    return head.startswith(CHECKSUM_MAGIC), head[-1] if superblock and len(head) == USERBLOCK + 9 else None


def _check_digest(path: Path) -> None:
    """The stored SHA-256 against the file's contents; a mismatch is a one-line DataError."""
    with open(path, "rb") as f:
        head = f.read(len(CHECKSUM_MAGIC) + 64)
    if head[len(CHECKSUM_MAGIC):].decode(errors="replace") != _file_digest(path):
        raise DataError(f"{path}: corrupt or changed since it was written (its contents do not match its "
                        "checksum); regenerate or re-copy it")


def verify_checksum(path: Path) -> None:
    """The whole-file check of a file written before chunk checksums (once per process and version of the file),
    before HDF5 reads it: a flipped, zeroed or truncated byte anywhere is a one-line error, where HDF5 could read
    wrong values or hang on a damaged index. Files without a checksum are not checked."""
    key = _file_key(path)
    if key in _VERIFIED:
        return
    if _head(path)[0]:
        _check_digest(path)
    _VERIFIED.add(key)


def verify_file(path: str | os.PathLike) -> DatasetInfo:
    """``opformer verify``: the whole-file SHA-256 stored in the user block against the file's bytes, then its
    schema (:func:`read_info`); returns the file's description. A file without a stored checksum (written
    before opformer stored one, or edited by another program) cannot be verified: a DataError says so."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such data file")
    if not _head(path)[0]:
        raise DataError(f"{path}: holds no opformer checksum to verify it against (written before opformer "
                        "stored one, or edited by another program)")
    _check_digest(path)
    _VERIFIED.add(_file_key(path))
    return read_info(path)


def _self_checking(f: h5py.File) -> bool:
    """Whether every dataset of ``f`` is chunked with the fletcher32 filter (HDF5 checks each chunk it reads)."""
    found: list[bool] = []
    f.visititems(lambda name, obj: found.append(obj.chunks is not None and obj.fletcher32)
                 if isinstance(obj, h5py.Dataset) else None)
    return bool(found) and all(found)


def _reason(exc: BaseException) -> str:
    """HDF5's reason in h5py's message (the text in its last parentheses), short."""
    text = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0].strip("'\"")
    if "(" in text and text.endswith(")"):
        text = text[text.index("(") + 1:-1]
    if "filter returned failure" in text:
        text = "its checksum does not match"
    elif "checksum" in text:
        text = "a metadata checksum does not match"
    return text[:160] or exc.__class__.__name__


# Reading.

class DataFile:
    """An opened, checked data file, for many reads: open it once per process and read through :meth:`read`.

    Opening reads no data. A file written with chunk checksums (``fletcher32`` on every dataset, the format of
    :data:`LIBVER`) is checked by HDF5 as each read touches it; an older file holding a whole-file checksum is
    hashed on its first open in a process (as before: its index could otherwise hang HDF5). ``cache_bytes`` is
    HDF5's chunk cache of this handle (``rdcc_nbytes``; default HDF5's 1 MiB): chunks up to that size are kept
    and re-read from memory. A handle moved to another process (pickled, or inherited by a fork) reopens
    the file there on first use. A context manager; :func:`open_dataset_file` makes one.
    """

    def __init__(self, path: str | os.PathLike, cache_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.cache_bytes = cache_bytes
        self._file: h5py.File | None = None
        self._pid = -1
        self._datasets: dict[str, h5py.Dataset] = {}
        self.checksum = False  # whether the file holds a whole-file checksum (it is opformer's)
        self._open()

    def _open(self) -> None:
        path = self.path
        if not path.is_file():
            raise DataError(f"{path}: no such data file")
        checksum, superblock = _head(path)
        if checksum and (superblock is None or superblock < 2):  # the format of old files: no checksums inside
            verify_checksum(path)
        try:
            f = h5py.File(path, "r", **({} if self.cache_bytes is None else {"rdcc_nbytes": int(self.cache_bytes)}))
        except OSError as exc:
            raise _unreadable(path, checksum, exc) from None
        try:
            if checksum and _file_key(path) not in _VERIFIED and not _self_checking(f):
                verify_checksum(path)  # checksummed metadata but unchecked data (not a file opformer writes)
        except (OSError, RuntimeError, KeyError, ValueError) as exc:
            f.close()
            raise _unreadable(path, checksum, exc) from None
        except BaseException:
            f.close()
            raise
        self._file, self._pid, self._datasets, self.checksum = f, os.getpid(), {}, checksum

    @property
    def file(self) -> h5py.File:
        """The h5py file (reopened in a process other than the one that opened it)."""
        if self._file is None or self._pid != os.getpid():
            self._open()
        return self._file

    def close(self) -> None:
        """Close the file (a later read reopens it)."""
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file, self._datasets = None, {}

    def __enter__(self) -> DataFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "cache_bytes": self.cache_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self.cache_bytes = state["path"], state["cache_bytes"]
        self._file, self._pid, self._datasets, self.checksum = None, -1, {}, False

    def __contains__(self, name: str) -> bool:
        try:
            return name in self.file
        except (OSError, RuntimeError, KeyError, ValueError) as exc:
            raise _unreadable(self.path, self.checksum, exc) from None

    def dataset(self, name: str) -> h5py.Dataset:
        """The dataset ``/name``; missing, not a dataset or unreadable: a one-line DataError."""
        f = self.file
        if name not in self._datasets:
            if name not in self:
                raise DataError(f"{self.path}: missing dataset '/{name}'")
            try:
                obj = f[name]
            except (OSError, RuntimeError, KeyError, ValueError) as exc:
                raise DataError(f"{self.path}: '/{name}' is corrupt ({_reason(exc)}); regenerate or re-copy the "
                                "file") from None
            if not isinstance(obj, h5py.Dataset):
                raise DataError(f"{self.path}: '/{name}' is not a dataset")
            self._datasets[name] = obj
        return self._datasets[name]

    def read(self, name: str, index: Any = (), *, finite: bool = True) -> np.ndarray:
        """``/name[index]`` as a numpy array (``index``: what h5py takes, e.g. ``(slice(0, 8),)`` or
        ``(sample, slice(t, t + 11))``; ``()`` the whole dataset). A chunk or index whose checksum does not
        match (or that HDF5 cannot read) is a one-line DataError naming the file, the dataset and the first
        unreadable sample (and frame, in ``/fields``); with ``finite``, NaN or Inf is one naming the first
        sample (and frame) holding it."""
        index = index if isinstance(index, tuple) else (index,)
        dataset = self.dataset(name)
        try:
            array = np.asarray(dataset[index])
        except (OSError, RuntimeError, KeyError) as exc:
            raise DataError(f"{self.path}: '/{name}'{_first_unreadable(dataset, name, index)} is corrupt "
                            f"({_reason(exc)}); regenerate or re-copy the file") from None
        if finite and not np.isfinite(array).all():
            raise DataError(f"{self.path}: '/{name}' holds NaN or Inf{_first_bad(dataset, name, index, array)}")
        return array

    def info(self) -> DatasetInfo:
        """The file's validated description (see :func:`read_info`)."""
        return _info(self)


def open_dataset_file(path: str | os.PathLike, cache_bytes: int | None = None) -> DataFile:
    """Open a data file for many reads (see :class:`DataFile`): ``with open_dataset_file(p) as data: ...``."""
    return DataFile(path, cache_bytes)


def read_block(source: str | os.PathLike | DataFile, name: str, index: Any = (), *, finite: bool = True) -> np.ndarray:
    """``/name[index]`` of a data file (a path, opened for this read, or an open :class:`DataFile`), every read
    error and NaN/Inf a one-line DataError naming the file, the dataset and the sample: see :meth:`DataFile.read`."""
    if isinstance(source, DataFile):
        return source.read(name, index, finite=finite)
    with open_dataset_file(source) as data:
        return data.read(name, index, finite=finite)


def _unreadable(path: Path, checksum: bool, exc: BaseException) -> DataError:
    if checksum:
        return DataError(f"{path}: corrupt or changed since it was written ({_reason(exc)}); regenerate or "
                         "re-copy it")
    return DataError(f"{path}: not a readable HDF5 file ({_reason(exc)})")


def _positions(item: Any, size: int) -> list[int] | None:
    """The positions an index entry selects along an axis of ``size`` (None: not an int, slice or list)."""
    if isinstance(item, (int, np.integer)):
        return [int(item) % size] if size else None
    if isinstance(item, slice):
        return list(range(*item.indices(size)))
    if isinstance(item, (list, np.ndarray)) and np.asarray(item).dtype.kind in "iu":
        return [int(i) % size for i in np.asarray(item).reshape(-1)]
    return None


def _axes(name: str, index: tuple) -> list[tuple[str, Any]]:
    """The named axes of a read: the sample (and the frame of ``/fields``) with their index entries."""
    labels = ("sample", "frame") if name == "fields" else ("sample",)
    return [(label, index[k] if k < len(index) else slice(None)) for k, label in enumerate(labels)]


def _first_unreadable(dataset: h5py.Dataset, name: str, index: tuple) -> str:
    """`` sample S`` (``, frame T``): the first of the read that HDF5 cannot read, found sample by sample, then
    frame by frame (only on this error path); empty for other datasets."""
    if name not in SAMPLE_DATASETS:
        return ""
    where, prefix = "", ()
    for k, (label, item) in enumerate(_axes(name, index)):
        positions = _positions(item, dataset.shape[k])
        if positions is None:
            break
        for position in positions:
            try:
                dataset[(*prefix, position, *index[k + 1:])]
            except (OSError, RuntimeError, KeyError):
                where += f"{',' if where else ''} {label} {position}"
                prefix += (position,)
                break
        else:
            break
    return where


def _first_bad(dataset: h5py.Dataset, name: str, index: tuple, array: np.ndarray) -> str:
    """`` (first in sample S[, frame T])`` of the first NaN/Inf in ``array`` = ``dataset[index]``."""
    if name not in SAMPLE_DATASETS:
        return ""
    coords, axis, parts = np.argwhere(~np.isfinite(array))[0], 0, []
    for k, (label, item) in enumerate(_axes(name, index)):
        positions = _positions(item, dataset.shape[k])
        if positions is None:
            break
        if isinstance(item, (int, np.integer)):
            parts.append(f"{label} {positions[0]}")
        else:
            parts.append(f"{label} {positions[coords[axis]]}")
            axis += 1
    return f" (first in {', '.join(parts)})" if parts else ""


def _read_attrs(path: Path, f: h5py.File) -> dict[str, Any]:
    """The root attributes as text and numbers, checked against ``attrs_sha256`` where the file has one."""
    values = {}
    for key in f.attrs:
        value = f.attrs[key]
        if isinstance(value, bytes):
            try:
                value = value.decode()
            except UnicodeDecodeError:
                raise DataError(f"{path}: attribute '{key}' is not valid UTF-8 text (corrupt)") from None
        values[key] = value.item() if isinstance(value, np.generic) else value
    stored = values.pop(ATTRS_DIGEST, None)
    if stored is not None and stored != _attrs_digest(values):
        raise DataError(f"{path}: its attributes do not match their checksum '{ATTRS_DIGEST}' (corrupt, or edited "
                        f"by a program that kept '{ATTRS_DIGEST}'); regenerate or re-copy it")
    return values


def _parse(path: Path, key: str, value: Any) -> Any:
    if key in JSON_ATTRS:
        try:
            return json.loads(value)
        except (TypeError, json.JSONDecodeError):
            raise DataError(f"{path}: attribute '{key}' is not valid JSON") from None
    return value


def _operator_shape(data: DataFile, attrs: dict[str, Any]) -> tuple[int, tuple[int, ...], dict[str, Any]]:
    """Samples, spatial shape and kind-specific fields of an operator data set."""
    path = data.path
    x = data.dataset("input")
    y = data.dataset("target") if "target" in data else x  # an inputs-only file: only the input is checked
    if x.ndim < 3 or x.shape[:-1] != y.shape[:-1]:
        raise DataError(f"{path}: '/input' {x.shape} and '/target' {y.shape} must be "
                        "(sample, *spatial, channels) on the same grid")
    if x.shape[-1] != len(attrs["input_channels"]) or ("target" in data and y.shape[-1] != len(attrs["target_channels"])):
        raise DataError(f"{path}: channel counts do not match 'input_channels'/'target_channels'")
    return int(x.shape[0]), tuple(int(s) for s in x.shape[1:-1]), {
        "input_channels": list(attrs["input_channels"]), "target_channels": list(attrs["target_channels"]),
        "has_target": "target" in data}


def _trajectory_shape(data: DataFile, attrs: dict[str, Any]) -> tuple[int, tuple[int, ...], dict[str, Any]]:
    """Samples, spatial shape and kind-specific fields of a trajectory data set."""
    path = data.path
    fields = data.dataset("fields")
    times = data.read("times", (), finite=False)
    if fields.ndim < 4 or times.shape != (fields.shape[1],):
        raise DataError(f"{path}: '/fields' {fields.shape} must be (sample, time, *spatial, channels) with "
                        f"one entry of '/times' {times.shape} per frame")
    if fields.shape[-1] != len(attrs["channels"]):
        raise DataError(f"{path}: channel count of '/fields' does not match 'channels'")
    channels = list(attrs["channels"])
    return int(fields.shape[0]), tuple(int(s) for s in fields.shape[2:-1]), {
        "input_channels": channels, "target_channels": channels, "has_target": True,
        "times": tuple(float(t) for t in times)}


def _info(data: DataFile) -> DatasetInfo:
    path = data.path
    try:
        raw = _read_attrs(path, data.file)
        kind = raw.get("kind")
        required = TRAJECTORY_ATTRS if kind == "trajectory" else REQUIRED_ATTRS
        missing = [k for k in required if k not in raw]
        if missing:
            raise DataError(f"{path}: not an opformer data set (missing attributes: {', '.join(missing)})")
        attrs = {key: _parse(path, key, value) for key, value in raw.items()}
        if attrs["format"] != FORMAT_NAME or int(attrs["format_version"]) > FORMAT_VERSION:
            raise DataError(f"{path}: format {attrs['format']!r} v{attrs['format_version']} is not readable "
                            f"by this opformer (expects {FORMAT_NAME!r} v<={FORMAT_VERSION})")
        if attrs["kind"] not in KINDS:
            raise DataError(f"{path}: unknown data-set kind {attrs['kind']!r}; expected one of {', '.join(KINDS)}")
        reader = _trajectory_shape if kind == "trajectory" else _operator_shape
        n_samples, spatial, fields = reader(data, attrs)
        domain = attrs["domain"]
        ndim = len(spatial)
        if not isinstance(domain, dict):
            raise DataError(f"{path}: attribute 'domain' needs 'lengths' and 'periodic' with {ndim} entries each")
        _check_domain(path, domain, ndim)
        known = set(required)
        return DatasetInfo(
            path=path,
            kind=attrs["kind"],
            n_samples=n_samples,
            spatial_shape=spatial,
            pde=attrs["pde"],
            solver=attrs["solver"],
            domain=domain,
            seed=int(attrs["seed"]),
            extra={k: v for k, v in attrs.items() if k not in known},
            **fields,
        )
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as exc:  # h5py's errors for corrupt files
        raise _unreadable(path, data.checksum, exc) from None


def read_info(path: str | os.PathLike) -> DatasetInfo:
    """Open ``path`` and validate its schema (no data are read but ``/times``); raise a one-line
    :class:`DataError` if it is not valid."""
    with open_dataset_file(path) as data:
        return data.info()


def read_fields(path: str | os.PathLike, samples: slice) -> np.ndarray:
    """Read ``/fields`` ``(sample, time, *spatial, channels)`` of the given samples of a validated trajectory
    file; raises :class:`DataError` if they hold NaN or Inf or a chunk is corrupt."""
    return read_block(path, "fields", (samples,))


def read_arrays(path: str | os.PathLike, samples: slice) -> tuple[np.ndarray, np.ndarray | None]:
    """Read ``input``/``target`` (None in an inputs-only file) of the given samples of a validated file.

    Raises :class:`DataError` if the arrays hold NaN or Inf or a chunk is corrupt.
    """
    with open_dataset_file(path) as data:
        x = data.read("input", (samples,))
        y = data.read("target", (samples,)) if "target" in data else None
    return x, y
