"""Plain numpy arrays (``.npz`` with named arrays, or ``.npy`` files) with the domain given on the command line.

Operator pairs: an input and a target array ``(N, *spatial)`` (one channel) or ``(N, *spatial, C)``
(channel-last); from a ``.npz`` the keys ``x``/``y`` or ``input``/``target`` (or ``--keys IN,OUT``), from a
``.npy`` the file itself and ``--target FILE.npy``. Trajectories: ``(N, T, *spatial[, C])``, the ``.npz`` key
``fields`` or ``u`` (or ``--keys FIELDS[,TIMES]``), frame times from the key ``times`` or ``t`` if present,
else 0, 1, 2, ... The number of spatial axes is the number of ``--lengths`` values (default ``1,1``: the unit
square). ``.npy`` files are memory-mapped and read in chunks; a ``.npz`` member is loaded whole.
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


def stored_domain(lengths: Sequence[float] | None, grid: Sequence[str] | None, default_grid: str) -> dict[str, list]:
    """The domain of ``--lengths`` (one per spatial axis, default the unit square) and ``--grid`` (one kind, or
    one per axis)."""
    lengths = list(lengths or [1.0, 1.0])
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
                    f"(the number of --lengths values)")


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
    ``keys`` in the file; channel names from ``bases`` (``a`` for one channel, ``a0, a1, ...`` for several)."""
    stored = stored_domain(lengths, grid, default_grid)
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
    return _trajectories(path, names[0], fields, times, times_key, stored_domain(lengths, grid, PERIODIC), pde)


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
