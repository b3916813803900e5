"""The Well's HDF5 files (Ohana et al. 2024, PolymathicAI: 16 physics data sets, ``data/{train,valid,test}/*.hdf5``).

A file holds ``n_trajectories`` trajectories of one data set (its root attributes: ``dataset_name``,
``grid_type``, ``n_spatial_dims``, ``simulation_parameters`` and each parameter's value) in groups:

- ``dimensions`` (attribute ``spatial_dims``, e.g. ``['x', 'y']``): ``time`` (T) and one coordinate array per
  spatial axis; each may be ``sample_varying`` ((B, n): accepted where every trajectory has the same values);
- ``t0_fields``, ``t1_fields``, ``t2_fields`` (attribute ``field_names``): scalar, vector and rank-2 tensor
  fields, each ``[B][T] *axes [D]^order`` where its ``sample_varying``, ``time_varying`` and ``dim_varying``
  (one flag per axis) say which of those axes it has. A vector becomes D channels ``NAME_x, NAME_y``, a tensor
  D^2 channels ``NAME_xx, NAME_xy, NAME_yx, NAME_yy`` (row-major, the order of ``the_well``'s
  ``WellDataset``); a field without an axis is repeated along it, as ``WellDataset`` tiles it. The time-varying
  fields come first (t0, t1, t2 in ``field_names`` order: ``WellDataset``'s ``input_fields``), then the fields
  constant in time, repeated on every frame (its ``constant_fields``; listed in ``pde["constant_fields"]``);
- ``boundary_conditions``: groups with ``bc_type`` (``PERIODIC``, ``WALL``, ``OPEN``), ``associated_dims`` and
  a boolean ``mask`` over those axes, true where the condition holds. A side of an axis takes the type whose mask
  holds at that end (a wall: on the whole face; periodic or open: anywhere on it, ``WellDataset``'s rule), else
  open. Both sides periodic: the axis is stored ``periodic``; otherwise a closed axis, ``cells`` by default (the
  coordinates are the centres of the simulations' cells; ``--grid nodes`` if they include both ends). The types
  are kept per axis and side in ``domain["boundaries"]``;
- ``scalars`` (attribute ``field_names``): constants become settings in ``pde`` (by name, with the
  ``simulation_parameters``), time-varying ones a list per frame; a value that differs between trajectories
  (a sample-varying scalar, or a parameter that differs between files) is kept per sample.

Several files of one data set (the files of a split, or of every split) become one file: their trajectories in
the order given, train files first, then valid, then test (told by the folder each file is in), the sample
range of each split in ``pde["the_well"]["splits"]``. Every file must hold the same fields on the same grid
and times. What opformer cannot store is a one-line error naming it: coordinates that vary over time or between
trajectories, non-uniform coordinates, a ``grid_type`` other than cartesian, tensors beyond rank 2, boundary
conditions that vary over time or between trajectories, scalars that vary over both. Read in chunks of samples.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from opformer.errors import ConfigError, DataError
from opformer.grids import CELLS, NODES, PERIODIC
from opformer.data.readers.source import (
    Source, dataset, domain, finite, frame_times, open_hdf5, read_slice, tidy, uniform_spacing)
from opformer.kinds import TRAJECTORY

#: The Well's split folders, in the order their trajectories are stored.
SPLITS = ("train", "valid", "test")
#: The Well's ``bc_type`` -> the boundary kind stored in ``domain["boundaries"]``.
BOUNDARIES = {"PERIODIC": "periodic", "WALL": "wall", "OPEN": "open"}
FIELD_GROUPS = ("t0_fields", "t1_fields", "t2_fields")
#: Keys of ``pde`` that a simulation parameter may not take.
RESERVED = ("name", "times", "channels", "length", "origin", "constant_fields", "the_well")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _names(value: Any) -> list[str]:
    """An attribute holding names (a string, or an array/list of them) as a list of str."""
    if isinstance(value, (str, bytes)):
        return [_text(value)]
    return [_text(v) for v in np.asarray(value).reshape(-1)]


def _attr(path: Path, item: h5py.HLObject, key: str) -> Any:
    if key not in item.attrs:
        raise DataError(f"{path}: '{item.name}' has no attribute '{key}' (The Well's layout)")
    return item.attrs[key]


def _flag(path: Path, item: h5py.HLObject, key: str, default: bool | None = None) -> bool:
    if key not in item.attrs and default is not None:
        return default
    return bool(_attr(path, item, key))


def _group(path: Path, f: h5py.File, key: str) -> h5py.Group:
    if key not in f or not isinstance(f[key], h5py.Group):
        raise DataError(f"{path}: missing group '/{key}' (The Well's layout)")
    return f[key]


def _value(value: Any) -> Any:
    """An HDF5 value as JSON: numbers as float/int/bool, text as str, arrays as (nested) lists."""
    array = np.asarray(value)
    if array.dtype.kind in "SUO":
        return _text(array.reshape(-1)[0]) if array.size == 1 else [_text(v) for v in array.reshape(-1)]
    if array.size == 1:
        return array.reshape(-1)[0].item()
    return array.tolist()


@dataclass(frozen=True)
class Field:
    """One field of a Well file: its group's tensor order, its flags and its channel names."""

    name: str
    order: int
    sample_varying: bool
    time_varying: bool
    dim_varying: tuple[bool, ...]
    channels: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{FIELD_GROUPS[self.order]}/{self.name}"


@dataclass
class WellFile:
    """What one file says: its layout (compared between files) and its settings."""

    path: Path
    samples: int
    name: str
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    coords: tuple[np.ndarray, ...]
    times: np.ndarray
    fields: tuple[Field, ...]
    boundaries: tuple[tuple[str, str], ...]
    settings: dict[str, Any]
    per_sample: dict[str, np.ndarray]
    split: str | None

    def layout(self) -> tuple:
        return (self.name, self.axes, self.shape, self.fields, self.boundaries)


def _same_rows(path: Path, key: str, values: np.ndarray, what: str) -> np.ndarray:
    """Row 0 of a sample-varying array, which every row must equal; else a DataError naming it."""
    if not np.array_equal(values, np.broadcast_to(values[:1], values.shape)):
        raise DataError(f"{path}: '{key}' differs between trajectories (sample-varying {what}); opformer stores "
                        "one grid and one set of frame times per file")
    return values[0]


def _dimension(path: Path, dims: h5py.Group, name: str, samples: int, what: str) -> np.ndarray:
    data = dataset(path, dims, name, expected=f"the {what} of the Well's 'dimensions'")
    if _flag(path, data, "time_varying", False):
        raise DataError(f"{path}: '{data.name}' is time-varying (moving coordinates); opformer stores fixed grids")
    values = read_slice(path, data, ())
    if _flag(path, data, "sample_varying", False):
        if values.ndim != 2 or values.shape[0] != samples:
            raise DataError(f"{path}: '{data.name}' has shape {values.shape}, expected ({samples}, n) "
                            "(sample-varying)")
        values = _same_rows(path, data.name, values, what)
    if values.ndim != 1:
        raise DataError(f"{path}: '{data.name}' has shape {values.shape}, expected one value per point")
    return np.asarray(values, dtype=np.float64)


def _fields(path: Path, f: h5py.File, axes: tuple[str, ...], shape: tuple[int, ...], samples: int,
            frames: int) -> tuple[Field, ...]:
    ndim = len(axes)
    beyond = [key for key in f if key.endswith("_fields") and key not in FIELD_GROUPS]
    if beyond:
        raise DataError(f"{path}: group '/{beyond[0]}': opformer reads scalar, vector and rank-2 tensor fields "
                        f"({', '.join(FIELD_GROUPS)})")
    found = []
    for order, key in enumerate(FIELD_GROUPS):
        if key not in f:
            continue
        group = f[key]
        for name in _names(group.attrs.get("field_names", [])):
            data = dataset(path, group, name, expected=f"a field listed in '{group.name}' field_names")
            dim_varying = tuple(bool(v) for v in np.asarray(_attr(path, data, "dim_varying")).reshape(-1))
            if len(dim_varying) != ndim:
                raise DataError(f"{path}: '{data.name}' dim_varying {list(dim_varying)} needs one entry per axis "
                                f"{list(axes)}")
            field = Field(name, order, _flag(path, data, "sample_varying"), _flag(path, data, "time_varying"),
                          dim_varying, tuple(f"{name}_{''.join(d)}" if d else name
                                             for d in itertools.product(axes, repeat=order)))
            lead = ((samples,) if field.sample_varying else ()) + ((frames,) if field.time_varying else ())
            expected = lead + tuple(n for n, used in zip(shape, dim_varying) if used) + (ndim,) * order
            kept = lead + tuple(n if used else 1 for n, used in zip(shape, dim_varying)) + (ndim,) * order
            if data.shape not in (expected, kept):  # an axis it does not vary along: left out, or of size 1
                raise DataError(f"{path}: '{data.name}' has shape {data.shape}, expected {expected} (its "
                                f"sample_varying, time_varying, dim_varying and tensor order {order})")
            found.append(field)
    if not any(field.time_varying for field in found):
        raise DataError(f"{path}: no time-varying field in t0_fields, t1_fields or t2_fields (nothing to predict)")
    return tuple(sorted(found, key=lambda field: not field.time_varying))


def _boundaries(path: Path, f: h5py.File, axes: tuple[str, ...], shape: tuple[int, ...]
                ) -> tuple[tuple[str, str], ...]:
    """The boundary kind of each side (low, high) of every axis: The Well's ``_padding_bcs`` rule, open where no
    condition covers a side."""
    sides = [["open", "open"] for _ in axes]
    if "boundary_conditions" not in f:
        return tuple(tuple(s) for s in sides)
    for name, bc in f["boundary_conditions"].items():
        if not isinstance(bc, h5py.Group):
            continue
        kind = _text(_attr(path, bc, "bc_type")).upper()
        if kind not in BOUNDARIES:
            raise DataError(f"{path}: '{bc.name}' bc_type {kind!r}: expected one of {', '.join(BOUNDARIES)}")
        for flag in ("sample_varying", "time_varying"):
            if _flag(path, bc, flag, False):
                raise DataError(f"{path}: '{bc.name}' is {flag.replace('_', '-')}; opformer stores one boundary "
                                "condition per side of an axis")
        dims = _names(_attr(path, bc, "associated_dims"))
        if len(dims) == 1 and dims[0] not in axes and all(c in axes for c in dims[0]):
            dims = list(dims[0])  # written as one string "xy"
        if any(d not in axes for d in dims):
            raise DataError(f"{path}: '{bc.name}' associated_dims {dims}: expected axes of {list(axes)}")
        mask = np.asarray(read_slice(path, dataset(path, bc, "mask"), ()), dtype=bool)
        if mask.shape != tuple(shape[axes.index(d)] for d in dims):
            raise DataError(f"{path}: '{bc.name}/mask' has shape {mask.shape}, expected one entry per point of "
                            f"{dims}")
        for position, dim in enumerate(dims):
            for side, end in ((0, 0), (1, -1)):
                face = np.take(mask, end, axis=position)
                if (face.all() if kind == "WALL" else face.any()):
                    sides[axes.index(dim)][side] = BOUNDARIES[kind]
    for axis, (low, high) in zip(axes, sides):
        if (low == "periodic") != (high == "periodic"):
            raise DataError(f"{path}: axis '{axis}' is periodic on one side only ({low}, {high})")
    return tuple(tuple(s) for s in sides)


def _settings(path: Path, f: h5py.File, samples: int, frames: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The simulation parameters and constant scalars (name -> value), and those that vary per sample."""
    settings = {name: _value(_attr(path, f, name)) for name in _names(f.attrs.get("simulation_parameters", []))}
    per_sample = {}
    if "scalars" in f:
        group = f["scalars"]
        for name in _names(group.attrs.get("field_names", [])):
            data = dataset(path, group, name, expected=f"a scalar listed in '{group.name}' field_names")
            sample, time = _flag(path, data, "sample_varying"), _flag(path, data, "time_varying")
            values = read_slice(path, data, ())
            if sample and time:
                raise DataError(f"{path}: scalar '{data.name}' varies over both trajectories and time; opformer "
                                "keeps scalars per file, per sample or per frame")
            if sample:
                if np.asarray(values).shape != (samples,):
                    raise DataError(f"{path}: '{data.name}' has shape {np.shape(values)}, expected ({samples},)")
                per_sample[name] = np.asarray(values, dtype=np.float64)
                settings.pop(name, None)
            elif time:
                if np.asarray(values).shape != (frames,):
                    raise DataError(f"{path}: '{data.name}' has shape {np.shape(values)}, expected ({frames},)")
                settings[name] = np.asarray(values, dtype=np.float64).tolist()
            else:
                settings[name] = _value(values)
    clash = [name for name in [*settings, *per_sample] if name in RESERVED]
    if clash:
        raise DataError(f"{path}: parameter '{clash[0]}' has the name of a setting opformer writes "
                        f"({', '.join(RESERVED)})")
    return settings, per_sample


def _split(path: Path) -> str | None:
    return path.parent.name if path.parent.name in SPLITS else None


def read_file_layout(path: Path) -> WellFile:
    """The layout and settings of one Well file, checked; a one-line DataError naming what does not fit."""
    with open_hdf5(path) as f:
        grid_type = _text(f.attrs.get("grid_type", "cartesian"))
        if grid_type != "cartesian":
            raise DataError(f"{path}: grid_type {grid_type!r}; opformer stores cartesian grids only")
        samples = int(_attr(path, f, "n_trajectories"))
        dims = _group(path, f, "dimensions")
        axes = tuple(_names(_attr(path, dims, "spatial_dims")))
        if len(axes) != int(f.attrs.get("n_spatial_dims", len(axes))) or not 1 <= len(axes) <= 3:
            raise DataError(f"{path}: spatial_dims {list(axes)} do not match n_spatial_dims "
                            f"{f.attrs.get('n_spatial_dims')} (1 to 3 axes)")
        times = _dimension(path, dims, "time", samples, "frame times")
        coords = tuple(_dimension(path, dims, axis, samples, "coordinates") for axis in axes)
        shape = tuple(len(c) for c in coords)
        times = frame_times(path, f"{dims.name}/time", times, len(times))
        fields = _fields(path, f, axes, shape, samples, len(times))
        boundaries = _boundaries(path, f, axes, shape)
        settings, per_sample = _settings(path, f, samples, len(times))
        name = _text(f.attrs.get("dataset_name", path.stem))
    return WellFile(path, samples, name, axes, shape, coords, times, fields, boundaries, settings, per_sample,
                    _split(path))


def _check_same(first: WellFile, other: WellFile) -> None:
    what = next((label for label, a, b in zip(
        ("dataset_name", "spatial_dims", "grid shape", "fields (names, orders, flags)", "boundary conditions"),
        first.layout(), other.layout()) if a != b), None)
    if what is None and not all(np.allclose(a, b) for a, b in zip(first.coords, other.coords)):
        what = "coordinates"
    if what is None and (first.times.shape != other.times.shape or not np.allclose(first.times, other.times)):
        what = "frame times"
    if what is not None:
        raise DataError(f"{other.path}: its {what} differ from {first.path.name}'s (the files of one conversion must "
                        "hold one data set on one grid)")


def _kinds(first: WellFile, grid: list[str] | None) -> list[str]:
    """The grid kind of every axis: periodic where the boundary is, else ``cells`` (or ``grid``'s choice)."""
    ndim = len(first.axes)
    if grid is not None and len(grid) not in (1, ndim):
        raise ConfigError(f"--grid {','.join(grid)}: expected one kind or {ndim} (one per axis {list(first.axes)})")
    chosen = (grid * ndim if len(grid) == 1 else grid) if grid else [None] * ndim
    kinds = []
    for axis, (low, _), kind in zip(first.axes, first.boundaries, chosen):
        periodic = low == "periodic"
        if kind is None:
            kind = PERIODIC if periodic else CELLS
        if (kind == PERIODIC) != periodic:
            raise ConfigError(f"--grid {kind} for axis '{axis}': its boundary is {low}; periodic axes are stored "
                              "periodic, closed ones cells or nodes")
        kinds.append(kind)
    return kinds


def _axis(path: Path, key: str, coords: np.ndarray, kind: str) -> tuple[float, float]:
    """(length, origin) of an axis of the given kind through the uniform ``coords``."""
    step = uniform_spacing(path, key, coords, len(coords))
    n = len(coords)
    if kind == NODES:
        return tidy((n - 1) * step), tidy(float(coords[0]))
    return tidy(n * step), tidy(float(coords[0]) - (step / 2 if kind == CELLS else 0.0))


def _merge_settings(files: list[WellFile]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Settings equal in every file, and per-sample arrays of the others (numbers, or numbers per frame)."""
    names = list(dict.fromkeys(name for wf in files for name in [*wf.settings, *wf.per_sample]))
    shared, per_sample = {}, {}
    for name in names:
        uniform = all(name in wf.settings for wf in files) and all(
            wf.settings[name] == files[0].settings[name] for wf in files)
        if uniform:
            shared[name] = files[0].settings[name]
            continue
        parts = []
        for wf in files:
            if name in wf.per_sample:
                parts.append(wf.per_sample[name])
                continue
            try:
                value = np.asarray(wf.settings[name], dtype=np.float64)
            except (KeyError, TypeError, ValueError):
                raise DataError(f"{wf.path}: setting '{name}' differs between the files and is not numbers in every "
                                "file (opformer keeps such settings per sample)") from None
            parts.append(np.broadcast_to(value, (wf.samples, *value.shape)))
        if len({part.shape[1:] for part in parts}) != 1:
            raise DataError(f"{files[0].path}: setting '{name}' has other shapes in other files")
        per_sample[name] = np.concatenate(parts)
    return shared, per_sample


def read_the_well(paths: Sequence[Path], grid: list[str] | None = None) -> Source:
    """Well files (one data set, any of its splits) as trajectories ``(N, T, *spatial, C)``: every field's
    components as channels, train files' trajectories first, then valid, then test."""
    paths = [Path(p) for p in paths]
    files = [read_file_layout(p) for p in paths]
    files.sort(key=lambda wf: SPLITS.index(wf.split) if wf.split else len(SPLITS))  # stable: given order kept
    first = files[0]
    for other in files[1:]:
        _check_same(first, other)
    kinds = _kinds(first, grid)
    lengths, origins = zip(*(_axis(first.path, f"/dimensions/{axis}", coords, kind)
                             for axis, coords, kind in zip(first.axes, first.coords, kinds)))
    channels = [name for field in first.fields for name in field.channels]
    starts = np.cumsum([0] + [wf.samples for wf in files])
    splits: dict[str, list[int]] = {}  # sorted by split: each split's files are consecutive
    for wf, start, stop in zip(files, starts[:-1], starts[1:]):
        label = wf.split or "other"  # a file outside a train, valid or test folder: stored last
        splits[label] = [int(splits.get(label, [start])[0]), int(stop)]
    shared, per_sample = _merge_settings(files)
    frames = len(first.times)
    constants: dict[tuple[Path, str], np.ndarray] = {}  # the fields no sample varies, read once for every chunk

    def read(start: int, stop: int) -> tuple[np.ndarray]:
        out = np.empty((stop - start, frames, *first.shape, len(channels)), dtype=np.float32)
        for wf, begin, end in zip(files, starts[:-1], starts[1:]):
            a, b = max(start, begin), min(stop, end)
            if a < b:
                _read_block(wf, a - begin, b - begin, out[a - start:b - start], constants)
        return (out,)

    pde = {"name": first.name, **shared, "length": lengths[0], "origin": list(origins), "times": first.times.tolist(),
           "channels": channels,
           "constant_fields": [c for field in first.fields if not field.time_varying for c in field.channels],
           "the_well": {"files": [wf.path.name for wf in files], "splits": splits, "axes": list(first.axes),
                        "field_orders": {field.name: field.order for field in first.fields}}}
    stored = domain(lengths, kinds)
    stored["boundaries"] = [list(sides) for sides in first.boundaries]
    def pde_of(count: int) -> dict[str, Any]:
        """The settings of the first ``count`` trajectories: the splits cut to them."""
        kept = {label: [a, min(b, count)] for label, (a, b) in splits.items() if a < count}
        return {**pde, "the_well": {**pde["the_well"], "splits": kept}}

    return Source(TRAJECTORY, int(starts[-1]), ((frames, *first.shape, len(channels)),), (channels,), read,
                  stored, pde, {"file_layout": "The Well (t0/t1/t2_fields, dimensions, boundary_conditions)"},
                  times=first.times, per_sample=per_sample, pde_of=pde_of)


def _read_block(wf: WellFile, start: int, stop: int, block: np.ndarray,
                constants: dict[tuple[Path, str], np.ndarray]) -> None:
    """Trajectories ``start..stop-1`` of one file into ``block`` ``(n, T, *spatial, C)``: every field read once for
    the range and broadcast over the axes it lacks; one that does not vary per sample is read whole the first time
    and kept in ``constants`` for later chunks."""
    n, frames, ndim = stop - start, block.shape[1], len(wf.axes)
    column = 0
    with open_hdf5(wf.path) as f:
        for field in wf.fields:
            data = f[field.key]
            if field.sample_varying:
                values = finite(wf.path, data.name, read_slice(wf.path, data, slice(start, stop)), start)
            else:
                if (wf.path, field.key) not in constants:
                    constants[wf.path, field.key] = finite(wf.path, data.name, read_slice(wf.path, data, ())[None], 0)
                values = constants[wf.path, field.key]
            shape = ((n if field.sample_varying else 1,) + ((frames,) if field.time_varying else (1,))
                     + tuple(size if used else 1 for size, used in zip(wf.shape, field.dim_varying))
                     + (ndim ** field.order,))
            width_here = len(field.channels)
            block[..., column:column + width_here] = values.reshape(shape)
            column += width_here
