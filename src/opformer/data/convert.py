"""Convert a published data set (a layout of :mod:`opformer.data.readers.registry`) to opformer's format.

The reader is asked for samples in chunks of about ``READ_BYTES`` (time-major files: a frame of every sample
at a time); they go to a scratch file beside the output (a memory map, removed afterwards), which the store's
writer then writes atomically. Memory therefore holds about one chunk (plus, for formats that cannot be read in
parts — v5 ``.mat``, ``.pt``, ``.npz`` — the reader's whole file), and the disk needs room for the output twice
while converting.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from opformer.data.readers.registry import open_source
from opformer.data.readers.source import Source
from opformer.data.store import write_operator_dataset, write_trajectory_dataset
from opformer.errors import ConfigError, DataError
from opformer.io import atomic_path
from opformer.kinds import OPERATOR

#: The seed of a converted file: unknown (the data were drawn by someone else's code).
UNKNOWN_SEED = -1


def convert_file(layout: str, src: str | os.PathLike | Sequence[str | os.PathLike], out: str | os.PathLike, *,
                 samples: int | None = None, channels: Sequence[str] | None = None, **options: Any
                 ) -> tuple[Path, int]:
    """Read ``src`` (a file, or several for a layout that reads them as one data set) in the published ``layout``
    and write its first ``samples`` samples (default all) to ``out``; returns the path and the number of samples
    written. ``channels``: the channels' names (operator pairs: the inputs', then the targets'; default the
    layout's). ``options``: the layout's options (``None``: not given). A wrong or truncated file is a one-line
    DataError and nothing is written."""
    paths = [Path(p) for p in ([src] if isinstance(src, (str, os.PathLike)) else src)]
    source = open_source(layout, paths, options)  # no file, or too many for the layout: a one-line error first
    if channels is not None:
        source.channels = renamed(source.channels, channels)
    names = [p.name for p in paths]
    label = str(paths[0]) if len(paths) == 1 else f"{len(paths)} files ({names[0]}, ...)"
    if samples is not None and not 1 <= samples <= source.samples:
        raise ConfigError(f"--samples {samples}: expected 1 to {source.samples} (the samples in {label})")
    if samples is not None and samples != source.samples and source.every_sample:
        raise ConfigError(f"--samples {samples}: format {layout} takes every sample of {label} (its settings may "
                          "hold values per sample)")
    count = source.samples if samples is None else samples
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = [atomic_path(out, ".scratch") for _ in source.shapes]
    try:
        arrays = [np.memmap(path, np.float32, "w+", shape=(count, *shape))
                  for path, shape in zip(scratch, source.shapes)]
        if source.read_frame is not None:
            _copy_frames(source, arrays[0])
        else:
            _copy_samples(source, arrays, label)
        pde = {**(source.pde if source.pde_of is None else source.pde_of(count)),
               **{key: values[:count].tolist() for key, values in source.per_sample.items()}}
        solver = {"name": "not recorded: converted from a published file",
                  "converted_from": names[0] if len(names) == 1 else names,
                  "layout": layout, **source.solver}
        common = {"pde": pde, "solver": solver, "domain": source.domain, "extra": source.extra,
                  "seed": UNKNOWN_SEED if source.seed is None else source.seed}
        if source.kind == OPERATOR:  # an inputs-only file has one array
            path = write_operator_dataset(out, arrays[0], arrays[1] if len(arrays) > 1 else None,
                                          input_channels=source.channels[0],
                                          target_channels=source.channels[1], **common)
        else:
            path = write_trajectory_dataset(out, arrays[0], source.times, channels=source.channels[0], **common)
    finally:
        for tmp in scratch:
            tmp.unlink(missing_ok=True)
    return path, count


def renamed(channels: tuple[list[str], ...], names: Sequence[str]) -> tuple[list[str], ...]:
    """``names`` in place of ``channels`` (each stored array's, in order): a one-line ConfigError unless there is
    one distinct name per channel."""
    counts = [len(group) for group in channels]
    names = list(names)
    if len(names) != sum(counts) or len(set(names)) != len(names) or not all(names):
        what = " then ".join(f"{n} for {', '.join(group)}" for n, group in zip(counts, channels))
        raise ConfigError(f"--channels {','.join(names)}: expected {sum(counts)} distinct names ({what})")
    return tuple(names[sum(counts[:i]):sum(counts[:i + 1])] for i in range(len(counts)))


def _copy_samples(source: Source, arrays: list[np.ndarray], src: str) -> None:
    """Fill ``arrays`` (the first ``len(arrays[0])`` samples) with the reader's samples, a chunk at a time."""
    count, step = len(arrays[0]), source.chunk()
    for start in range(0, count, step):
        stop = min(count, start + step)
        for array, block in zip(arrays, source.read(start, stop)):
            if block.shape != array[start:stop].shape:
                raise DataError(f"{src}: samples {start}..{stop - 1} have shape {block.shape[1:]}, expected "
                                f"{array.shape[1:]}")
            array[start:stop] = block


def _copy_frames(source: Source, fields: np.ndarray) -> None:
    """Fill ``fields`` ``(count, time, ...)`` a frame of every sample at a time (time-major files)."""
    for t in range(fields.shape[1]):
        fields[:, t] = source.read_frame(t, len(fields))
