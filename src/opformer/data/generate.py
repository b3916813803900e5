"""Generate a data set with a built-in solver (an entry of ``opformer.pde.registry``) and store it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from opformer.data.generation_chunks import GenerationChunks
from opformer.data.store import write_mesh_dataset, write_operator_dataset, write_trajectory_dataset
from opformer.errors import ConfigError
from opformer.grids import PERIODIC
from opformer.kinds import MESH, OPERATOR
from opformer.pde.registry import PDE, lookup
from opformer.runtime import retain_freed_memory


def generate_file(pde: str, out: str | os.PathLike, samples: int, *, seed: int = 0, chunk: int | None = None,
                  progress: Callable[[int], None] | None = None, **flags: Any) -> Path:
    """Solve ``samples`` samples of the registered PDE ``pde`` and write them to ``out``; returns the path.

    ``flags`` are the PDE's settings (``resolution`` and those its registry entry names; ``None`` or absent:
    the generator's default); any other flag is a ``ConfigError``. ``progress`` is called with the number of
    samples each step finished. Trajectories are solved ``chunk`` samples at a time (default: the entry's) and
    each finished chunk is kept in :class:`GenerationChunks` beside ``out``, so an interrupted run started again
    with the same arguments resumes; sample ``i`` is the same whatever the chunking.
    """
    entry = lookup(pde)
    if samples < 1:
        raise ConfigError(f"--samples {samples}: expected a positive number of samples")
    settings = entry.settings(pde, flags)
    # The solvers' numpy temporaries are above glibc's trim threshold: without this each step maps them anew and
    # page-faults them in (compressible-ns at 64^2: 2.5-3.5x the time of a step).
    retain_freed_memory()
    if entry.kind == OPERATOR:
        inputs, targets, meta = entry.generator(samples, seed=seed, progress=progress, **settings)
        return write_operator_dataset(out, inputs[..., None], targets[..., None], pde=meta["pde"],
                                      solver=meta["solver"], domain=_domain(entry, meta, inputs.ndim - 1),
                                      seed=seed, input_channels=entry.channels[0], target_channels=entry.channels[1])
    if chunk is not None and chunk < 1:
        raise ConfigError(f"chunk {chunk}: expected a positive number of samples per chunk")
    chunk = chunk or entry.chunk
    parts = GenerationChunks(out, {"pde": pde, "samples": samples, "chunk": chunk, **settings, "seed": seed})
    firsts = range(0, samples, chunk)
    if entry.kind == MESH:
        return _generate_mesh(entry, pde, out, samples, firsts, chunk, parts, seed, progress, settings)
    for first in firsts:
        count = min(chunk, samples - first)
        if not parts.exists(first):
            block, meta = entry.generator(count, first=first, seed=seed, progress=progress, **settings)
            parts.save(first, block, meta)
            del block
        elif progress is not None:
            progress(count)
    # the file is written from memory maps of the chunks, a piece at a time: memory never holds the data set
    blocks, meta = [parts.load(first, mmap=True) for first in firsts], parts.meta()
    path = write_trajectory_dataset(out, blocks, np.asarray(meta["pde"]["times"]), pde=meta["pde"],
                                    solver=meta["solver"], domain=_domain(entry, meta, blocks[0].ndim - 3),
                                    seed=seed, channels=list(meta["pde"]["channels"]))
    del blocks
    parts.remove()
    return path


def _generate_mesh(entry: PDE, pde: str, out: str | os.PathLike, samples: int, firsts: range, chunk: int,
                   parts: GenerationChunks, seed: int, progress: Callable[[int], None] | None,
                   settings: dict[str, Any]) -> Path:
    """A mesh generator's samples solved a chunk at a time (each kept as a mesh file until all are done), then
    written to ``out`` a sample at a time: operator pairs, or trajectories where the settings hold ``times``."""
    inputs, targets = entry.channels
    for first in firsts:
        count = min(chunk, samples - first)
        if not parts.exists(first):
            block, meta = entry.generator(count, first=first, seed=seed, progress=progress, **settings)
            parts.save_samples(first, block, meta, inputs + targets)
            del block
        elif progress is not None:
            progress(count)
    meta = parts.meta()
    times = meta["pde"].get("times")
    path = write_mesh_dataset(out, (sample for first in firsts for sample in parts.samples(first)), inputs=inputs,
                              targets=targets, pde=pde, times=times, solver=meta["solver"], seed=seed, force=True,
                              settings={key: value for key, value in meta["pde"].items()
                                        if key not in ("name", "times")})
    parts.remove()
    return path


def _domain(entry: PDE, meta: dict[str, Any], ndim: int) -> dict[str, list]:
    """The stored domain: ``ndim`` axes of the length in the settings (default 1), of the entry's grid kind."""
    length = float(meta["pde"].get("length", 1.0))
    return {"lengths": [length] * ndim, "periodic": [entry.grid == PERIODIC] * ndim, "grid": [entry.grid] * ndim}
