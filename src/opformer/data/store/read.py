"""Reading opformer's data files: :class:`DataFile` (open once, read many times, every read checked),
:func:`read_block`, :func:`read_info` and the whole-array reads :func:`read_arrays` / :func:`read_fields`
(see :mod:`opformer.data.store`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from opformer.data.store.integrity import VERIFIED, file_key, head, reason, self_checking, unreadable, verify_checksum
from opformer.data.store.schema import SAMPLE_DATASETS, DatasetInfo, describe
from opformer.errors import DataError


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
        checksum, superblock = head(path)
        if checksum and (superblock is None or superblock < 2):  # the format of old files: no checksums inside
            verify_checksum(path)
        try:
            f = h5py.File(path, "r", **({} if self.cache_bytes is None else {"rdcc_nbytes": int(self.cache_bytes)}))
        except OSError as exc:
            raise unreadable(path, checksum, exc) from None
        try:
            if checksum and file_key(path) not in VERIFIED and not self_checking(f):
                verify_checksum(path)  # checksummed metadata but unchecked data (not a file opformer writes)
        except (OSError, RuntimeError, KeyError, ValueError) as exc:
            f.close()
            raise unreadable(path, checksum, exc) from None
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
            raise unreadable(self.path, self.checksum, exc) from None

    def dataset(self, name: str) -> h5py.Dataset:
        """The dataset ``/name``; missing, not a dataset or unreadable: a one-line DataError."""
        f = self.file
        if name not in self._datasets:
            if name not in self:
                raise DataError(f"{self.path}: missing dataset '/{name}'")
            try:
                obj = f[name]
            except (OSError, RuntimeError, KeyError, ValueError) as exc:
                raise DataError(f"{self.path}: '/{name}' is corrupt ({reason(exc)}); regenerate or re-copy the "
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
                            f"({reason(exc)}); regenerate or re-copy the file") from None
        if finite and not np.isfinite(array).all():
            raise DataError(f"{self.path}: '/{name}' holds NaN or Inf{_first_bad(dataset, name, index, array)}")
        return array

    def info(self) -> DatasetInfo:
        """The file's validated description (see :func:`read_info`)."""
        return describe(self)


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
