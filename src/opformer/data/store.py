"""The opformer HDF5 data-set format: atomic writing (:mod:`opformer.io`), validated reading.

An *operator* data set holds input/target pairs on one grid (see docs/data-format.md)::

    /input   (sample, *spatial, in_channels)   float32, chunked one sample per chunk
    /target  (sample, *spatial, out_channels)  float32, chunked one sample per chunk (absent in a
                                               file of inputs awaiting prediction)
    attrs: format, format_version, kind, pde (JSON), solver (JSON), domain (JSON), seed,
           opformer_version, created, input_channels (JSON), target_channels (JSON)

A *trajectory* data set holds solutions of a time-dependent PDE, frame by frame::

    /fields  (sample, time, *spatial, channels)  float32, chunked one frame per chunk
    /times   (time,)                             float64, strictly increasing
    attrs: as above, with channels (JSON) in place of input_channels/target_channels
"""

from __future__ import annotations

import hashlib
import json
import os
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
KINDS = ("operator", "trajectory")
JSON_ATTRS = ("pde", "solver", "domain", "input_channels", "target_channels", "channels")
COMMON_ATTRS = ("format", "format_version", "kind", "seed", "opformer_version", "created", "pde", "solver",
                "domain")
REQUIRED_ATTRS = COMMON_ATTRS + ("input_channels", "target_channels")  # of an operator data set
TRAJECTORY_ATTRS = COMMON_ATTRS + ("channels",)


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


def _write(path: Path, arrays: dict[str, np.ndarray], chunks: dict[str, tuple[int, ...]],
           attrs: dict[str, Any]) -> Path:
    """Write datasets and attributes to a temporary file, then rename it to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # the space is checked first: HDF5 fails on a full disk at close time, in ways that can crash the process
    with atomic_replace(path, size=sum(a.nbytes for a in arrays.values())) as tmp:
        with h5py.File(tmp, "w", userblock_size=USERBLOCK) as f:
            for name, array in arrays.items():
                f.create_dataset(name, data=array, chunks=chunks.get(name))
            stamp = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "opformer_version": __version__,
                     "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            for key, value in {**stamp, **attrs}.items():
                f.attrs[key] = json.dumps(value) if isinstance(value, (dict, list)) else value
        with open(tmp, "r+b") as f:
            f.write(CHECKSUM_MAGIC + _file_digest(tmp).encode())
    return path


def _file_digest(path: Path) -> str:
    """SHA-256 of everything after the user block (the whole HDF5 image), hex."""
    hasher = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(USERBLOCK)
        for block in iter(lambda: f.read(1 << 22), b""):
            hasher.update(block)
    return hasher.hexdigest()


_VERIFIED: set[tuple[str, int, int]] = set()


def verify_checksum(path: Path) -> None:
    """Compare a file's stored SHA-256 with its contents before HDF5 reads it (once per process and version of
    the file): a flipped, zeroed or truncated byte anywhere is a one-line error, where HDF5 could read wrong
    values or hang on a damaged index. Files without a checksum (written before it existed) are not checked."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key in _VERIFIED:
        return
    with open(path, "rb") as f:
        head = f.read(len(CHECKSUM_MAGIC) + 64)
    if head.startswith(CHECKSUM_MAGIC):
        if head[len(CHECKSUM_MAGIC):].decode(errors="replace") != _file_digest(path):
            raise DataError(f"{path}: corrupt or changed since it was written (its contents do not match its "
                            "checksum); regenerate or re-copy it")
    _VERIFIED.add(key)


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
    inputs: np.ndarray,
    targets: np.ndarray | None,
    *,
    pde: dict[str, Any],
    solver: dict[str, Any],
    domain: dict[str, Any],
    seed: int,
    input_channels: list[str],
    target_channels: list[str],
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write an operator data set atomically (temporary file, then rename).

    ``inputs``/``targets`` are channel-last ``(sample, *spatial, channels)``; ``targets=None`` writes a
    file of inputs only (for ``opformer predict``). ``domain`` is ``{"lengths": [...], "periodic": [...]}``
    with one entry per spatial axis, and optionally ``"grid"``: each axis's kind (:data:`opformer.grids.GRID_KINDS`;
    without it periodic axes are periodic and the others nodes).
    """
    path = Path(path)
    if targets is not None and inputs.shape[:-1] != targets.shape[:-1]:
        raise DataError(f"{path}: input grid {inputs.shape[:-1]} differs from target grid {targets.shape[:-1]}")
    if inputs.shape[-1] != len(input_channels) or (targets is not None and targets.shape[-1] != len(target_channels)):
        raise DataError(f"{path}: channel names do not match the channel dimension of the arrays")
    _check_domain(path, domain, inputs.ndim - 2)
    arrays = {name: np.asarray(a, dtype=np.float32) for name, a in (("input", inputs), ("target", targets))
              if a is not None}
    attrs = {"kind": "operator", "seed": int(seed), "pde": pde, "solver": solver, "domain": domain,
             "input_channels": input_channels, "target_channels": target_channels, **(extra or {})}
    return _write(path, arrays, {k: (1, *a.shape[1:]) for k, a in arrays.items()}, attrs)


def write_trajectory_dataset(
    path: str | os.PathLike,
    fields: np.ndarray,
    times: np.ndarray,
    *,
    pde: dict[str, Any],
    solver: dict[str, Any],
    domain: dict[str, Any],
    seed: int,
    channels: list[str],
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write a trajectory data set atomically: ``fields`` ``(sample, time, *spatial, channels)`` at ``times``."""
    path = Path(path)
    times = np.asarray(times, dtype=np.float64)
    if fields.ndim < 4 or times.shape != (fields.shape[1],):
        raise DataError(f"{path}: fields {fields.shape} must be (sample, time, *spatial, channels) with one time "
                        f"stamp per frame (got {times.shape[0] if times.ndim else 0} stamps)")
    if fields.shape[-1] != len(channels):
        raise DataError(f"{path}: channel names do not match the channel dimension of the fields")
    if times.size > 1 and not np.all(np.diff(times) > 0):
        raise DataError(f"{path}: time stamps must increase strictly")
    _check_domain(path, domain, fields.ndim - 3)
    attrs = {"kind": "trajectory", "seed": int(seed), "pde": pde, "solver": solver, "domain": domain,
             "channels": channels, **(extra or {})}
    arrays = {"fields": np.asarray(fields, dtype=np.float32), "times": times}
    return _write(path, arrays, {"fields": (1, 1, *fields.shape[2:])}, attrs)


def _decode(path: Path, attrs: h5py.AttributeManager, key: str) -> Any:
    value = attrs[key]
    if isinstance(value, bytes):
        value = value.decode()
    if key in JSON_ATTRS:
        try:
            return json.loads(value)
        except (TypeError, json.JSONDecodeError):
            raise DataError(f"{path}: attribute '{key}' is not valid JSON") from None
    return value


def _dataset(path: Path, f: h5py.File, name: str) -> h5py.Dataset:
    if name not in f:
        raise DataError(f"{path}: missing dataset '/{name}'")
    if not isinstance(f[name], h5py.Dataset):
        raise DataError(f"{path}: '/{name}' is not a dataset")
    return f[name]


def _operator_shape(path: Path, f: h5py.File, attrs: dict[str, Any]) -> tuple[int, tuple[int, ...], dict[str, Any]]:
    """Samples, spatial shape and kind-specific fields of an operator data set."""
    x = _dataset(path, f, "input")
    y = _dataset(path, f, "target") if "target" in f else x  # an inputs-only file: only the input is checked
    if x.ndim < 3 or x.shape[:-1] != y.shape[:-1]:
        raise DataError(f"{path}: '/input' {x.shape} and '/target' {y.shape} must be "
                        "(sample, *spatial, channels) on the same grid")
    if x.shape[-1] != len(attrs["input_channels"]) or ("target" in f and y.shape[-1] != len(attrs["target_channels"])):
        raise DataError(f"{path}: channel counts do not match 'input_channels'/'target_channels'")
    return int(x.shape[0]), tuple(int(s) for s in x.shape[1:-1]), {
        "input_channels": list(attrs["input_channels"]), "target_channels": list(attrs["target_channels"]),
        "has_target": "target" in f}


def _trajectory_shape(path: Path, f: h5py.File, attrs: dict[str, Any]) -> tuple[int, tuple[int, ...], dict[str, Any]]:
    """Samples, spatial shape and kind-specific fields of a trajectory data set."""
    fields = _dataset(path, f, "fields")
    times = _dataset(path, f, "times")[()]
    if fields.ndim < 4 or times.shape != (fields.shape[1],):
        raise DataError(f"{path}: '/fields' {fields.shape} must be (sample, time, *spatial, channels) with "
                        f"one entry of '/times' {times.shape} per frame")
    if fields.shape[-1] != len(attrs["channels"]):
        raise DataError(f"{path}: channel count of '/fields' does not match 'channels'")
    channels = list(attrs["channels"])
    return int(fields.shape[0]), tuple(int(s) for s in fields.shape[2:-1]), {
        "input_channels": channels, "target_channels": channels, "has_target": True,
        "times": tuple(float(t) for t in times)}


def read_info(path: str | os.PathLike) -> DatasetInfo:
    """Open ``path`` and validate its schema; raise a one-line :class:`DataError` if it is not valid."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such data file")
    verify_checksum(path)
    try:
        with h5py.File(path, "r") as f:
            kind = _decode(path, f.attrs, "kind") if "kind" in f.attrs else None
            required = TRAJECTORY_ATTRS if kind == "trajectory" else REQUIRED_ATTRS
            missing = [k for k in required if k not in f.attrs]
            if missing:
                raise DataError(f"{path}: not an opformer data set (missing attributes: {', '.join(missing)})")
            attrs = {k: _decode(path, f.attrs, k) for k in f.attrs}
            if attrs["format"] != FORMAT_NAME or int(attrs["format_version"]) > FORMAT_VERSION:
                raise DataError(f"{path}: format {attrs['format']!r} v{attrs['format_version']} is not readable "
                                f"by this opformer (expects {FORMAT_NAME!r} v<={FORMAT_VERSION})")
            if attrs["kind"] not in KINDS:
                raise DataError(f"{path}: unknown data-set kind {attrs['kind']!r}; expected one of {', '.join(KINDS)}")
            reader = _trajectory_shape if kind == "trajectory" else _operator_shape
            n_samples, spatial, fields = reader(path, f, attrs)
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
        raise DataError(f"{path}: not a readable HDF5 file ({exc.__class__.__name__})") from None


def _check_finite(path: Path, name: str, array: np.ndarray, first_sample: int) -> None:
    if not np.isfinite(array).all():
        bad = int(np.argwhere(~np.isfinite(array).reshape(array.shape[0], -1).all(axis=1))[0, 0])
        raise DataError(f"{path}: '/{name}' holds NaN or Inf (first in sample {first_sample + bad})")


def _read(path: Path, f: h5py.File, name: str, samples: slice) -> np.ndarray:
    """``f[name][samples]``, an unreadable file a one-line :class:`DataError`."""
    try:
        return f[name][samples]
    except (OSError, RuntimeError) as exc:
        raise DataError(f"{path}: '/{name}' could not be read ({exc.__class__.__name__})") from None


def _open(path: Path) -> h5py.File:
    """Open a data file for reading; a file that became unreadable since it was validated is a DataError."""
    verify_checksum(path)
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({exc.__class__.__name__})") from None


def read_fields(path: str | os.PathLike, samples: slice) -> np.ndarray:
    """Read ``/fields`` ``(sample, time, *spatial, channels)`` of the given samples of a validated trajectory
    file; raises :class:`DataError` if they hold NaN or Inf or a chunk is corrupt."""
    path = Path(path)
    with _open(path) as f:
        fields = _read(path, f, "fields", samples)
    _check_finite(path, "fields", fields, samples.start or 0)
    return fields


def read_arrays(path: str | os.PathLike, samples: slice) -> tuple[np.ndarray, np.ndarray | None]:
    """Read ``input``/``target`` (None in an inputs-only file) of the given samples of a validated file.

    Raises :class:`DataError` if the arrays hold NaN or Inf or a chunk is corrupt.
    """
    path = Path(path)
    with _open(path) as f:
        x = _read(path, f, "input", samples)
        y = _read(path, f, "target", samples) if "target" in f else None
    for name, array in (("input", x), ("target", y)):
        if array is not None:
            _check_finite(path, name, array, samples.start or 0)
    return x, y
