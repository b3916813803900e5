"""Plain numpy arrays (``.npz`` with named arrays, or ``.npy`` files) with the domain given on the command line.

Operator pairs: an input and a target array ``(N, *spatial)`` (one channel) or ``(N, *spatial, C)``
(channel-last); from a ``.npz`` the keys ``x``/``y`` or ``input``/``target`` (or ``--keys IN,OUT``), from a
``.npy`` the file itself and ``--target FILE.npy``. Trajectories: ``(N, T, *spatial[, C])``, the ``.npz`` key
``fields`` or ``u`` (or ``--keys FIELDS[,TIMES]``), frame times from the key ``times`` or ``t`` if present,
else 0, 1, 2, ... The number of spatial axes is the number of ``--lengths`` values; without them it is read
from the arrays' shapes where they say it (:func:`spatial_axes`), each axis of length 1. ``.npy`` files are
memory-mapped and read in chunks; a ``.npz`` member is loaded whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from opformer.errors import ConfigError, DataError
from opformer.grids import PERIODIC
from opformer.data.readers.source import Source, channel_names, domain, finite
from opformer.kinds import OPERATOR, TRAJECTORY

OPERATOR_KEYS = (("x", "y"), ("input", "target"))
FIELD_KEYS, TIME_KEYS = ("fields", "u"), ("times", "t")
#: The fewest points of a side of a plane grid that :func:`spatial_axes` takes for granted (a shorter last axis may
#: hold channels: ``(N, 128, 3)`` is 1D with 3 channels or a 128 x 3 grid, and ``--lengths`` must say which).
MIN_SIDE = 4


def spatial_axes(path: Path, arrays: Sequence[tuple[str, Any]], leading: int, channel_first: bool = False) -> int:
    """The number of spatial axes of sample-first arrays (``leading`` axes first: the sample, and the time of
    trajectories) without ``--lengths``: the rest of an array's axes are its grid (one channel), or its grid and
    then its channels. Their shapes say it where they can: one axis is a 1D grid; a last axis of 1 is a channel
    axis; three axes of one size are a cubic grid (four, the first three of one size: a cubic grid and its
    channels); the arrays that say it must agree. Else two (a plane; the earlier default ``--lengths 1,1``), where
    the rest holds two or three axes and the plane's sides have at least :data:`MIN_SIDE` points. Else a one-line
    ConfigError asking for ``--lengths``. ``channel_first``: the channels come before the grid."""
    said: dict[int, str] = {}
    plane = True
    for key, array in arrays:
        rest = tuple(array.shape[leading:])[::-1 if channel_first else 1]
        axes = (len(rest) if len(rest) == 1 else
                len(rest) - 1 if len(rest) > 1 and rest[-1] == 1 else
                3 if len(rest) in (3, 4) and len(set(rest[:3])) == 1 else None)
        if axes is not None:
            said.setdefault(axes, key)
        plane = plane and len(rest) in (2, 3) and min(rest[:2]) >= MIN_SIDE
    if len(said) == 1:
        return next(iter(said))
    if not said and plane:
        return 2
    key, array = arrays[0]
    rest = len(array.shape) - leading
    told = "; ".join(f"'{k}' says {axes}" for axes, k in said.items())
    raise ConfigError(f"{path}: '{key}' has shape {tuple(array.shape)}: "
                      + (f"its arrays disagree on the spatial axes ({told}); " if said else "")
                      + f"give --lengths, one length per spatial axis ({rest} values: a grid of one channel; "
                      f"{rest - 1}: the {'first' if channel_first else 'last'} axis holds the channels)")


def stored_domain(lengths: Sequence[float] | None, grid: Sequence[str] | None, default_grid: str,
                  axes: int = 2) -> dict[str, list]:
    """The domain of ``--lengths`` (one per spatial axis; default ``axes`` axes of length 1) and ``--grid`` (one
    kind, or one per axis)."""
    lengths = list(lengths or [1.0] * axes)
    grid = list(grid or [default_grid])
    if len(grid) == 1:
        grid *= len(lengths)
    if len(grid) != len(lengths):
        raise ConfigError(f"--grid {','.join(grid)}: give one grid kind, or one per axis of --lengths "
                          f"({len(lengths)} axes)")
    if min(lengths) <= 0:
        raise ConfigError(f"--lengths {','.join(f'{v:g}' for v in lengths)}: expected positive lengths")
    return domain(lengths, grid)


def channel_last(path: Path, key: str, array: Any, leading: int, axes: int, channel_first: bool) -> tuple[int, ...]:
    """The per-sample shape ``(*leading_axes, *spatial, channels)`` that ``array`` (``leading`` axes first: the
    sample, and the time of trajectories) has once channel-last; a DataError if its rank fits neither layout."""
    shape = tuple(array.shape)
    if len(shape) == leading + axes:
        return (*shape[1:], 1)
    if len(shape) == leading + axes + 1:
        if channel_first:
            return (*shape[1:leading], *shape[leading + 1:], shape[leading])
        return shape[1:]
    layout = "(N, C, *spatial)" if channel_first else "(N, " + "T, " * (leading - 1) + "*spatial[, C])"
    raise DataError(f"{path}: '{key}' has shape {shape}, expected {layout} with {axes} spatial axes "
                    f"(the number of --lengths values, or the run's grid)")


def block(path: Path, key: str, array: Any, start: int, stop: int, per_sample: tuple[int, ...],
          channel_first: bool) -> np.ndarray:
    """Samples ``start..stop-1`` of ``array`` as finite float32, channel-last ``(n, *per_sample)``."""
    values = np.asarray(array[start:stop])
    if channel_first and values.ndim == len(per_sample) + 1:  # (n, C, *spatial): an explicit channel axis
        values = np.moveaxis(values, 1, -1)
    return finite(path, key, values.reshape(stop - start, *per_sample), start)


def pairs_source(path: Path, inputs: Any, targets: Any, keys: tuple[str, str], bases: tuple[str, str],
                 lengths: Sequence[float] | None, grid: Sequence[str] | None, default_grid: str,
                 channel_first: bool, pde: dict[str, Any]) -> Source:
    """Operator pairs of two sample-first arrays (indexable by sample ranges: numpy arrays or memory maps) named
    ``keys`` in the file; channel names from ``bases`` (``a`` for one channel, ``a0, a1, ...`` for several); the
    spatial axes from ``lengths``, else from the arrays (:func:`spatial_axes`)."""
    axes = None if lengths else spatial_axes(path, list(zip(keys, (inputs, targets))), 1, channel_first)
    stored = stored_domain(lengths, grid, default_grid, axes or 2)
    axes = len(stored["lengths"])
    shapes = tuple(channel_last(path, key, array, 1, axes, channel_first) for key, array in zip(keys, (inputs, targets)))
    if inputs.shape[0] != targets.shape[0] or shapes[0][:-1] != shapes[1][:-1]:
        raise DataError(f"{path}: '{keys[0]}' {tuple(inputs.shape)} and '{keys[1]}' {tuple(targets.shape)} must hold "
                        "the same samples on the same grid")
    names = (channel_names(bases[0], shapes[0][-1]), channel_names(bases[1], shapes[1][-1]))

    def read(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        return tuple(block(path, key, array, start, stop, shape, channel_first)
                     for key, array, shape in zip(keys, (inputs, targets), shapes))

    return Source(OPERATOR, int(inputs.shape[0]), shapes, names, read, stored, pde, {})


def _load(path: Path) -> Any:
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise DataError(f"{path}: not a readable .npy or .npz file ({exc.__class__.__name__})") from None


def _member(path: Path, archive: Any, key: str) -> np.ndarray:
    if key not in archive.files:
        raise DataError(f"{path}: missing array '{key}' (it holds {', '.join(archive.files) or 'nothing'})")
    try:
        return archive[key]
    except (ValueError, OSError, EOFError) as exc:
        raise DataError(f"{path}: array '{key}' could not be read ({exc.__class__.__name__})") from None


def _keys(path: Path, archive: Any, given: Sequence[str] | None, defaults: Sequence[Sequence[str]],
          hint: str = "; name them with --keys") -> list[str]:
    """The keys ``given``, else the first choice of ``defaults`` whose first key ``archive`` holds; a one-line
    DataError (ending with ``hint``) where it holds none."""
    if given:
        return list(given)
    for choice in defaults:
        if choice[0] in archive.files:
            return list(choice)
    raise DataError(f"{path}: none of the arrays {' / '.join(c[0] for c in defaults)} (it holds "
                    f"{', '.join(archive.files) or 'nothing'}){hint}")


def sample_array(path: Path, kind: str) -> tuple[str, Any]:
    """The one array of samples of a ``.npy`` file, or of a ``.npz`` file's inputs (key ``x`` or ``input``) or
    trajectories (``fields`` or ``u``), with its key, for reading a block of samples at a time (:func:`block`)."""
    loaded = _load(path)
    if isinstance(loaded, np.ndarray):
        return path.stem, loaded
    defaults = OPERATOR_KEYS if kind == OPERATOR else [(name,) for name in FIELD_KEYS]
    key = _keys(path, loaded, None, defaults, hint="")[0]
    array = _member(path, loaded, key)
    loaded.close()
    return key, array


def paired_targets(path: Path, key: str) -> tuple[str, Any] | None:
    """The array stored beside the inputs ``key`` of a ``.npz`` file as their targets (``y`` beside ``x``, ``target``
    beside ``input``) and its key, if the file holds one."""
    partner = dict(OPERATOR_KEYS).get(key)
    if partner is None or path.suffix != ".npz":
        return None
    loaded = _load(path)
    try:
        return (partner, _member(path, loaded, partner)) if partner in loaded.files else None
    finally:
        loaded.close()


def read_arrays(path: Path, kind: str = OPERATOR, keys: Sequence[str] | None = None, target: Path | None = None,
                lengths: Sequence[float] | None = None, grid: Sequence[str] | None = None) -> Source:
    """A ``.npz`` or ``.npy`` file (and ``target``) as operator pairs or trajectories on the given domain."""
    loaded = _load(path)
    archive = not isinstance(loaded, np.ndarray)
    if archive and target is not None:
        raise ConfigError("--target: only for a .npy input (a .npz names its arrays with --keys)")
    if not archive and keys:
        raise ConfigError("--keys: only for a .npz file (a .npy holds one array)")
    pde = {"name": "unknown (converted arrays)"}
    if kind == OPERATOR:
        if archive:
            names = _keys(path, loaded, keys, OPERATOR_KEYS)
            if len(names) != 2:
                raise ConfigError(f"--keys {','.join(names)}: expected INPUT,TARGET")
            inputs, targets = (_member(path, loaded, key) for key in names)
            loaded.close()
        else:
            if target is None:
                raise ConfigError("--target FILE.npy: needed with a .npy input (the targets)")
            names, inputs, targets = ["input", "target"], loaded, _load(target)
            if not isinstance(targets, np.ndarray):
                raise DataError(f"{target}: expected a .npy array of targets")
        return pairs_source(path, inputs, targets, tuple(names), tuple(names), lengths, grid, PERIODIC, False, pde)
    if kind != TRAJECTORY:
        raise ConfigError(f"--kind {kind}: expected {OPERATOR} or {TRAJECTORY}")
    if target is not None:
        raise ConfigError("--target: only for operator pairs (--kind operator)")
    times_key = None
    if archive:
        names = _keys(path, loaded, keys, [(key,) for key in FIELD_KEYS])
        if len(names) > 2:
            raise ConfigError(f"--keys {','.join(names)}: expected FIELDS or FIELDS,TIMES")
        times_key = names[1] if len(names) == 2 else next((k for k in TIME_KEYS if k in loaded.files), None)
        fields, times = _member(path, loaded, names[0]), times_key and _member(path, loaded, times_key)
        loaded.close()
    else:
        names, fields, times = ["fields"], loaded, None
    axes = None if lengths else spatial_axes(path, [(names[0], fields)], 2)
    return _trajectories(path, names[0], fields, times, times_key, stored_domain(lengths, grid, PERIODIC, axes or 2),
                         pde)


def _trajectories(path: Path, key: str, fields: Any, times: Any, times_key: str | None, stored: dict[str, list],
                  pde: dict[str, Any]) -> Source:
    shape = channel_last(path, key, fields, 2, len(stored["lengths"]), False)
    frames = shape[0]
    if times is None:
        times = np.arange(frames, dtype=np.float64)
    else:
        times = np.asarray(times, dtype=np.float64).reshape(-1)
        if times.shape != (frames,) or not np.isfinite(times).all() or np.any(np.diff(times) <= 0):
            raise DataError(f"{path}: '{times_key}' must hold {frames} increasing times (one per frame of '{key}')")
    channels = channel_names(key, shape[-1])

    def read(start: int, stop: int) -> tuple[np.ndarray]:
        return (block(path, key, fields, start, stop, shape, False),)

    return Source(TRAJECTORY, int(fields.shape[0]), (shape,), (channels,), read, stored,
                  {**pde, "times": times.tolist(), "channels": channels}, {}, times=times)
