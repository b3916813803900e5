"""The outputs of ``opformer predict``, by the output's suffix: ``.npy`` (the predictions), ``.npz`` (operator: ``x``
the inputs, ``y`` the predictions; trajectories: ``fields`` the forecast frames, ``times`` their times), else
opformer HDF5 (operator: the inputs and the predictions as ``target``; trajectories: the forecast frames, the
input's attributes, times continued). Arrays computed beside the predictions (``--coverage``: the error bounds;
``truth``: the input's true targets, kept) are ``NAME.npy`` entries of an ``.npz`` and datasets ``/NAME`` of an
HDF5 output (``docs/data-format.md``, "Predictions").

Each writer takes the chunks of samples as they are predicted and writes them straight into the output's
temporary file (an ``.npz``, a zip archive of one array after another, through memory maps beside it); the output
takes its place atomically once complete.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import h5py
import numpy as np

from opformer.data.readers.source import TRAJECTORY, domain
from opformer.data.store import Streamed, write_operator_dataset, write_trajectory_dataset
from opformer.io import atomic_path, atomic_replace, check_free_space
from opformer.serve.forecaster import Forecaster
from opformer.serve.inputs import Inputs


@dataclass
class Chunk:
    """Samples ``start..stop-1``: the given inputs (or context frames), their predictions and the arrays computed
    beside them (each sample first)."""

    start: int
    stop: int
    given: np.ndarray
    predictions: np.ndarray
    extras: dict[str, np.ndarray] = field(default_factory=dict)


def write_output(out: Path, forecaster: Forecaster, inputs: Inputs, shape: tuple[int, ...],
                 times: np.ndarray | None, chunks: Iterable[Chunk], attributes: dict[str, int] | None = None) -> Path:
    """Write the predictions ``shape`` (every sample) of ``chunks`` into ``out`` by its suffix (``times``: a
    forecast's frame times; ``attributes``: numbers about the whole output, attributes of an HDF5 output and, where
    it has bounds, entries of an ``.npz``)."""
    attributes = attributes or {}
    if out.suffix == ".npy":
        with atomic_replace(out, size=4 * math.prod(shape)) as tmp:
            preds = np.lib.format.open_memmap(tmp, "w+", np.float32, shape)
            for chunk in chunks:
                preds[chunk.start:chunk.stop] = chunk.predictions
            preds.flush()
        return out
    # refused before anything is predicted where the predictions alone would not fit (the writers check the whole)
    given = 0 if forecaster.kind == TRAJECTORY else inputs.count * math.prod(inputs.shape)
    check_free_space(out, 4 * (math.prod(shape) + given))
    chunks = iter(chunks)
    first = next(chunks, None)  # its arrays tell the extras' shapes
    every = chain([first], chunks) if first is not None else iter(())
    extras = {name: ((inputs.count, *array.shape[1:]), array.dtype)
              for name, array in (first.extras if first else {}).items()}
    if out.suffix == ".npz":
        constants = {"times": times} if times is not None else {}
        if extras and forecaster.kind == TRAJECTORY:  # with bounds: where the context lies, and the calibration's
            constants.update({name: np.asarray(value) for name, value in attributes.items()})
        return _write_npz(out, forecaster, inputs, shape, constants, extras, every)
    return _write_hdf5(out, forecaster, inputs, shape, times, extras, every, attributes)


#: The extras of an output by name: their shape (every sample) and type.
Extras = dict[str, tuple[tuple[int, ...], np.dtype]]


def _entries(forecaster: Forecaster, inputs: Inputs, shape: tuple[int, ...], extras: Extras
             ) -> dict[str, tuple[tuple[int, ...], np.dtype, str]]:
    """The arrays of an output, by name: their shapes, types and what each chunk holds for them."""
    single = np.dtype(np.float32)
    entries = {"predictions": (shape, single, "predictions")}
    if forecaster.kind != TRAJECTORY:
        entries["input"] = ((inputs.count, *inputs.shape), single, "given")
    return {**entries, **{name: (size, dtype, name) for name, (size, dtype) in extras.items()}}


def _chunk_array(chunk: Chunk, source: str) -> np.ndarray:
    return chunk.predictions if source == "predictions" else chunk.given if source == "given" else chunk.extras[source]


def _write_npz(out: Path, forecaster: Forecaster, inputs: Inputs, shape: tuple[int, ...],
               constants: dict[str, np.ndarray], extras: Extras, chunks: Iterator[Chunk]) -> Path:
    """An ``.npz``: the chunks into memory maps beside ``out`` (a zip archive holds one array after another), then
    each copied into the archive once; ``constants`` (small arrays: a forecast's times) written as they are."""
    entries = _entries(forecaster, inputs, shape, extras)
    names = {"predictions": "fields" if forecaster.kind == TRAJECTORY else "y", "input": "x"}
    # the memory maps and the archive made from them lie side by side; refused before any write if they cannot
    # (a memory map past the disk's room or ulimit -f dies on a page fault or fails half-written)
    check_free_space(out, 2 * sum(math.prod(size) * dtype.itemsize for size, dtype, _ in entries.values()))
    scratch = {name: atomic_path(out, f".{name}.scratch.npy") for name in entries}
    try:
        maps = {name: np.lib.format.open_memmap(scratch[name], "w+", dtype, size)
                for name, (size, dtype, _) in entries.items()}
        for chunk in chunks:
            for name, (_, _, source) in entries.items():
                maps[name][chunk.start:chunk.stop] = _chunk_array(chunk, source)
        for array in maps.values():
            array.flush()
        with atomic_replace(out, size=sum(path.stat().st_size for path in scratch.values())) as tmp:
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
                for name, path in scratch.items():
                    archive.write(path, f"{names.get(name, name)}.npy")
                for name, array in constants.items():
                    with archive.open(f"{name}.npy", "w") as f:
                        np.lib.format.write_array(f, array)
        return out
    finally:
        for path in scratch.values():
            path.unlink(missing_ok=True)


def _write_hdf5(out: Path, forecaster: Forecaster, inputs: Inputs, shape: tuple[int, ...], times: np.ndarray | None,
                extras: Extras, chunks: Iterator[Chunk], attributes: dict[str, int]) -> Path:
    """opformer HDF5 with the input file's attributes (an array's: the run's domain), each chunk written straight
    into the datasets of the file being written (:class:`~opformer.data.store.Streamed`)."""
    entries = _entries(forecaster, inputs, shape, extras)
    dataset = {"predictions": "fields" if forecaster.kind == TRAJECTORY else "target", "input": "input"}

    def fill(datasets: dict[str, h5py.Dataset]) -> None:
        for chunk in chunks:
            for name, (_, _, source) in entries.items():
                datasets[dataset.get(name, name)][chunk.start:chunk.stop] = _chunk_array(chunk, source)

    info, spec, own = inputs.info, forecaster.surrogate.spec, inputs.shape[-1]
    solver = {"name": "opformer surrogate", "checkpoint": forecaster.source, "model": spec["model"]}
    if info is not None:
        common = {"pde": info.pde, "domain": info.domain, "seed": info.seed,
                  "extra": {**info.extra, "prediction_of": str(info.path)}}
        channels = (info.input_channels, info.target_channels)
    else:
        lengths = spec["data"].get("lengths", [1.0] * forecaster.ndim)
        common = {"pde": {"name": "unknown (predicted from an array)"}, "domain": domain(lengths, forecaster.kinds),
                  "seed": -1, "extra": {"prediction_of": str(inputs.path)}}
        channels = (forecaster.input_channels[:own], forecaster.target_channels[:own] if forecaster.padded
                    else forecaster.target_channels)
    further = {name: Streamed(size) for name, (size, _) in extras.items()}
    if forecaster.kind != TRAJECTORY:
        return write_operator_dataset(out, Streamed(entries["input"][0]), Streamed(shape), solver=solver,
                                      input_channels=channels[0], target_channels=channels[1], datasets=further,
                                      fill=fill, **common)
    common["extra"].update({"given_frames": len(inputs.times), "time_stride": inputs.stride, **attributes})
    if "times" in common["pde"]:  # a generated file's settings list its frames' times: the forecast's now
        common["pde"] = {**common["pde"], "times": times.tolist()}
    return write_trajectory_dataset(out, Streamed(shape), times, solver=solver, channels=channels[0],
                                    datasets=further, fill=fill, **common)
