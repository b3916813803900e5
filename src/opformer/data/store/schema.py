"""The schema of opformer's data files: the kinds, the attributes each kind requires, the chunk layout
(:func:`chunk_shape`), the attributes as stored (fixed-length text, JSON, a digest of them all) and
:func:`describe`, which validates an opened file against all of it (see :mod:`opformer.data.store`)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from opformer.data.store.integrity import unreadable
from opformer.errors import DataError
from opformer.grids import GRID_KINDS, PERIODIC
from opformer.meshes import CELL_VERTICES
from opformer.kinds import DATA_KINDS, MESH, OPERATOR, TRAJECTORY

if TYPE_CHECKING:
    from opformer.data.store.read import DataFile

FORMAT_NAME = "opformer"
FORMAT_VERSION = 1
#: The HDF5 file-format bounds of new files: 1.10's format is the first whose chunk indexes carry checksums
#: (1.8's version-1 B-tree has none); files are readable by HDF5 1.10 and later.
LIBVER = ("v110", "v110")
#: The largest HDF5 chunk :func:`chunk_shape` makes, in bytes (what HDF5 reads, checks and caches as one piece).
MAX_CHUNK_BYTES = 4 * 2**20
#: The attribute holding the SHA-256 of all other attributes (see :func:`attrs_digest`).
ATTRS_DIGEST = "attrs_sha256"
#: The kinds of data set (the ``kind`` attribute).
KINDS = DATA_KINDS
JSON_ATTRS = ("pde", "solver", "domain", "input_channels", "target_channels", "channels", "mesh")
COMMON_ATTRS = ("format", "format_version", "kind", "seed", "opformer_version", "created", "pde", "solver",
                "domain")
REQUIRED_ATTRS = COMMON_ATTRS + ("input_channels", "target_channels")  # of an operator data set
TRAJECTORY_ATTRS = COMMON_ATTRS + ("channels",)
MESH_ATTRS = REQUIRED_ATTRS + ("mesh",)  # of a mesh data set
#: A mesh file's per-point datasets (the rows of every sample, one after another; ``offsets`` says where each
#: sample's begin) and its per-sample ones (``cells`` has rows of its own, placed by ``cell_offsets``).
POINTS, WEIGHTS, INPUT, TARGET, FIELDS = "points", "weights", "point_input", "point_target", "point_fields"
OFFSETS, CELLS, CELL_OFFSETS, INDEX_SHAPE, SETTINGS = "offsets", "cells", "cell_offsets", "index_shape", "settings"
#: Datasets whose first axis is the sample (errors name the sample; ``fields`` also the frame).
SAMPLE_DATASETS = ("input", "target", "fields")


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
    mesh: dict[str, Any] | None = None  # the ``mesh`` attribute of a mesh data set (spatial_shape is then ())

    @property
    def ndim(self) -> int:
        """Number of spatial dimensions."""
        return len(self.spatial_shape)


def chunk_shape(shape: Sequence[int], leading: int, itemsize: int = 4, limit: int | None = None) -> tuple[int, ...]:
    """The stored chunk of a dataset of ``shape``: one entry of each of the ``leading`` axes (1: a sample of an
    operator file; 2: a frame of a trajectory file) and all of the others, unless that is over ``limit`` bytes
    (default :data:`MAX_CHUNK_BYTES`; values of ``itemsize`` bytes): then the first spatial axis is cut into the
    fewest equal slabs that fit (the last may be thinner), and where a single plane is still too large, the next
    axis as well. The last axis (channels) is never cut.

    Whole frames make a window (``t_in + t_out`` consecutive frames) read exactly the chunks of its frames and a
    strided time read only those it takes. The limit bounds what HDF5 holds per chunk (it reads, checks and
    copies a chunk whole; a chunk above its chunk cache is never cached) and how much a corrupt chunk takes
    away, while a chunk stays a large sequential read. Examples, float32: ``(100, 50, 64, 64, 1)`` ->
    ``(1, 1, 64, 64, 1)`` (16 KiB); ``(10, 20, 128, 128, 128, 3)`` -> ``(1, 1, 19, 128, 128, 3)``
    (3.6 MiB, 7 slabs of a 24 MiB frame).
    """
    limit = MAX_CHUNK_BYTES if limit is None else limit
    chunk = [1] * leading + [int(size) for size in shape[leading:]]
    for axis in range(leading, len(chunk) - 1):
        rest = itemsize * math.prod(chunk[axis + 1:])
        if rest * chunk[axis] <= limit:
            break
        pieces = math.ceil(chunk[axis] / max(1, limit // rest))
        chunk[axis] = math.ceil(chunk[axis] / pieces)
    return tuple(max(1, size) for size in chunk)


def check_domain(path: Path, domain: dict[str, Any], ndim: int) -> None:
    for key in ("lengths", "periodic") + (("grid",) if "grid" in domain else ()):
        if not isinstance(domain.get(key), list) or len(domain[key]) != ndim:
            raise DataError(f"{path}: domain['{key}'] must be a list of {ndim} entries (one per axis)")
    if "grid" in domain:
        for kind, periodic in zip(domain["grid"], domain["periodic"]):
            if kind not in GRID_KINDS or (kind == PERIODIC) != bool(periodic):
                raise DataError(f"{path}: domain['grid'] entry {kind!r}: expected one of {', '.join(GRID_KINDS)}, "
                                "periodic exactly where domain['periodic'] says so")


def attr_value(value: Any) -> Any:
    """An attribute as stored: dicts and lists as JSON text, numpy scalars as Python ones."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value)
    return value.item() if isinstance(value, np.generic) else value


def attrs_digest(values: dict[str, Any]) -> str:
    """SHA-256 of attributes (text and numbers, as :func:`attr_value` stores and :func:`read_attrs` returns)."""
    return hashlib.sha256(json.dumps(sorted(values.items()), default=str).encode()).hexdigest()


def read_attrs(path: Path, f: h5py.File) -> dict[str, Any]:
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
    if stored is not None and stored != attrs_digest(values):
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


def _mesh_shape(data: DataFile, attrs: dict[str, Any]) -> tuple[int, tuple[int, ...], dict[str, Any]]:
    """Samples and kind-specific fields of a mesh data set (docs/data-format.md, "Mesh data sets")."""
    path, mesh = data.path, attrs["mesh"]
    try:
        task, dim, cell_kind = mesh["task"], int(mesh["dim"]), mesh["cell_kind"]
        rows, samples = int(mesh["points"]), int(mesh["samples"])
        inputs, targets = [(str(n), int(c)) for n, c in mesh["inputs"]], [(str(n), int(c)) for n, c in mesh["targets"]]
        mesh["weights_from"], mesh["structured"], mesh["cells_from_shape"], list(mesh["settings"])
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{path}: attribute 'mesh' lacks task, dim, points, samples, inputs, targets, cell_kind, "
                        "weights_from, structured, cells_from_shape or settings") from None
    c_in, c_out = sum(c for _, c in inputs), sum(c for _, c in targets)
    expected = {POINTS: (rows, dim), WEIGHTS: (rows,), OFFSETS: (samples + 1,)}
    if task == TRAJECTORY:
        times = data.read("times", (), finite=False)
        expected.update({FIELDS: (rows, len(times), c_in + c_out), "times": (len(times),)})
    elif task == OPERATOR:
        expected.update({INPUT: (rows, c_in)} if c_in else {})
        expected.update({TARGET: (rows, c_out)} if TARGET in data else {})
    else:
        raise DataError(f"{path}: mesh task {task!r}: expected {OPERATOR} or {TRAJECTORY}")
    if cell_kind is not None and not mesh["cells_from_shape"]:
        expected.update({CELLS: (data.dataset(CELLS).shape[0], CELL_VERTICES.get(cell_kind, -1)),
                         CELL_OFFSETS: (samples + 1,)})
    if mesh["structured"]:
        expected[INDEX_SHAPE] = (samples, data.dataset(INDEX_SHAPE).shape[-1])
    if mesh["settings"]:
        expected[SETTINGS] = (samples, len(mesh["settings"]))
    for name, shape in expected.items():
        if data.dataset(name).shape != shape:
            raise DataError(f"{path}: '/{name}' has shape {data.dataset(name).shape}, expected {shape}")
    if len(attrs["input_channels"]) != c_in or len(attrs["target_channels"]) != c_out:
        raise DataError(f"{path}: channel counts do not match 'input_channels'/'target_channels'")
    info = {"input_channels": list(attrs["input_channels"]), "target_channels": list(attrs["target_channels"]),
            "has_target": task == TRAJECTORY or TARGET in data, "mesh": mesh}
    if task == TRAJECTORY:
        info["times"] = tuple(float(t) for t in times)
    return samples, (), info


def describe(data: DataFile) -> DatasetInfo:
    """The validated description of an opened file: its attributes (checked against their digest), format,
    kind, shapes and domain; anything missing, unreadable or inconsistent is a one-line DataError."""
    path = data.path
    try:
        raw = read_attrs(path, data.file)
        kind = raw.get("kind")
        required = {TRAJECTORY: TRAJECTORY_ATTRS, MESH: MESH_ATTRS}.get(kind, REQUIRED_ATTRS)
        missing = [k for k in required if k not in raw]
        if missing:
            raise DataError(f"{path}: not an opformer data set (missing attributes: {', '.join(missing)})")
        attrs = {key: _parse(path, key, value) for key, value in raw.items()}
        if attrs["format"] != FORMAT_NAME or int(attrs["format_version"]) > FORMAT_VERSION:
            raise DataError(f"{path}: format {attrs['format']!r} v{attrs['format_version']} is not readable "
                            f"by this opformer (expects {FORMAT_NAME!r} v<={FORMAT_VERSION})")
        if attrs["kind"] not in KINDS:
            raise DataError(f"{path}: unknown data-set kind {attrs['kind']!r}; expected one of {', '.join(KINDS)}")
        reader = {TRAJECTORY: _trajectory_shape, MESH: _mesh_shape}.get(kind, _operator_shape)
        n_samples, spatial, fields = reader(data, attrs)
        domain = attrs["domain"]
        ndim = fields["mesh"]["dim"] if kind == MESH else len(spatial)
        if not isinstance(domain, dict):
            raise DataError(f"{path}: attribute 'domain' needs 'lengths' and 'periodic' with {ndim} entries each")
        check_domain(path, domain, ndim)
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
        raise unreadable(path, data.checksum, exc) from None
