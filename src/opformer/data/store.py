"""The opformer HDF5 data-set format: atomic writing, validated reading.

An *operator* data set holds input/target pairs on one grid (see docs/data-format.md)::

    /input   (sample, *spatial, in_channels)   float32, chunked one sample per chunk
    /target  (sample, *spatial, out_channels)  float32, chunked one sample per chunk (absent in a
                                               file of inputs awaiting prediction)
    attrs: format, format_version, kind, pde (JSON), solver (JSON), domain (JSON), seed,
           opformer_version, created, input_channels (JSON), target_channels (JSON)
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from opformer import __version__
from opformer.errors import DataError

FORMAT_NAME = "opformer"
FORMAT_VERSION = 1
KINDS = ("operator",)
JSON_ATTRS = ("pde", "solver", "domain", "input_channels", "target_channels")
REQUIRED_ATTRS = ("format", "format_version", "kind", "seed", "opformer_version", "created") + JSON_ATTRS


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

    @property
    def ndim(self) -> int:
        """Number of spatial dimensions."""
        return len(self.spatial_shape)


def atomic_path(path: Path) -> Path:
    """A temporary sibling of ``path`` to write to before renaming over ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # the permissions of an ordinary new file, not mkstemp's 0600
    return Path(tmp)


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
    with one entry per spatial axis.
    """
    path = Path(path)
    if targets is not None and inputs.shape[:-1] != targets.shape[:-1]:
        raise DataError(f"{path}: input grid {inputs.shape[:-1]} differs from target grid {targets.shape[:-1]}")
    if inputs.shape[-1] != len(input_channels) or (targets is not None and targets.shape[-1] != len(target_channels)):
        raise DataError(f"{path}: channel names do not match the channel dimension of the arrays")
    ndim = inputs.ndim - 2
    for key in ("lengths", "periodic"):
        if len(domain.get(key, ())) != ndim:
            raise DataError(f"{path}: domain['{key}'] must have {ndim} entries")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic_path(path)
    try:
        with h5py.File(tmp, "w") as f:
            for name, array in (("input", inputs), ("target", targets)):
                if array is None:
                    continue
                f.create_dataset(name, data=np.asarray(array, dtype=np.float32), chunks=(1, *array.shape[1:]))
            attrs = {
                "format": FORMAT_NAME,
                "format_version": FORMAT_VERSION,
                "kind": "operator",
                "seed": int(seed),
                "opformer_version": __version__,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "pde": pde,
                "solver": solver,
                "domain": domain,
                "input_channels": input_channels,
                "target_channels": target_channels,
            }
            for key, value in {**attrs, **(extra or {})}.items():
                f.attrs[key] = json.dumps(value) if isinstance(value, (dict, list)) else value
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


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


def read_info(path: str | os.PathLike) -> DatasetInfo:
    """Open ``path`` and validate its schema; raise a one-line :class:`DataError` if it is not valid."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such data file")
    try:
        with h5py.File(path, "r") as f:
            missing = [k for k in REQUIRED_ATTRS if k not in f.attrs]
            if missing:
                raise DataError(f"{path}: not an opformer data set (missing attributes: {', '.join(missing)})")
            attrs = {k: _decode(path, f.attrs, k) for k in f.attrs}
            if attrs["format"] != FORMAT_NAME or int(attrs["format_version"]) > FORMAT_VERSION:
                raise DataError(f"{path}: format {attrs['format']!r} v{attrs['format_version']} is not readable "
                                f"by this opformer (expects {FORMAT_NAME!r} v<={FORMAT_VERSION})")
            if attrs["kind"] not in KINDS:
                raise DataError(f"{path}: unknown data-set kind {attrs['kind']!r}; expected one of {', '.join(KINDS)}")
            for name in ("input", "target"):
                if name in f and not isinstance(f[name], h5py.Dataset):
                    raise DataError(f"{path}: '/{name}' is not a dataset")
            if "input" not in f:
                raise DataError(f"{path}: missing dataset '/input'")
            x = f["input"]
            y = f["target"] if "target" in f else x  # an inputs-only file: only the input is checked
            if x.ndim < 3 or x.shape[:-1] != y.shape[:-1]:
                raise DataError(f"{path}: '/input' {x.shape} and '/target' {y.shape} must be "
                                "(sample, *spatial, channels) on the same grid")
            if x.shape[-1] != len(attrs["input_channels"]) or (
                    "target" in f and y.shape[-1] != len(attrs["target_channels"])):
                raise DataError(f"{path}: channel counts do not match 'input_channels'/'target_channels'")
            ndim = x.ndim - 2
            domain = attrs["domain"]
            if not isinstance(domain, dict) or any(len(domain.get(k, ())) != ndim for k in ("lengths", "periodic")):
                raise DataError(f"{path}: attribute 'domain' needs 'lengths' and 'periodic' with {ndim} entries each")
            known = set(REQUIRED_ATTRS)
            return DatasetInfo(
                path=path,
                kind=attrs["kind"],
                n_samples=int(x.shape[0]),
                spatial_shape=tuple(int(s) for s in x.shape[1:-1]),
                input_channels=list(attrs["input_channels"]),
                target_channels=list(attrs["target_channels"]),
                has_target="target" in f,
                pde=attrs["pde"],
                solver=attrs["solver"],
                domain=domain,
                seed=int(attrs["seed"]),
                extra={k: v for k, v in attrs.items() if k not in known},
            )
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({exc.__class__.__name__})") from None


def read_arrays(path: str | os.PathLike, samples: slice) -> tuple[np.ndarray, np.ndarray | None]:
    """Read ``input``/``target`` (None in an inputs-only file) of the given samples of a validated file.

    Raises :class:`DataError` if the arrays hold NaN or Inf.
    """
    path = Path(path)
    with h5py.File(path, "r") as f:
        x = f["input"][samples]
        y = f["target"][samples] if "target" in f else None
    for name, array in (("input", x), ("target", y)):
        if array is not None and not np.isfinite(array).all():
            bad = int(np.argwhere(~np.isfinite(array).reshape(array.shape[0], -1).all(axis=1))[0, 0])
            first = (samples.start or 0) + bad
            raise DataError(f"{path}: '/{name}' holds NaN or Inf (first in sample {first})")
    return x, y
