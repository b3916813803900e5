"""Resumable generation: the finished chunks of a long ``opformer generate`` run, kept beside the output.

Chunks live in the hidden folder ``.<out name>.parts/`` next to the output file: ``key.json`` (the settings that
produced them), ``meta.json`` (the solver's metadata) and one ``<first sample>.npy`` per chunk, each written to a
temporary name and renamed (a chunk of mesh samples: the mesh file ``<first sample>.h5``, written atomically);
a chunk whose metadata lists values per sample (``meta["pde"]["per_sample"]``) keeps them in
``<first sample>.json``, written before its array. A rerun with the same settings reuses the chunks; with
other settings it starts over. The folder is removed once the output file is written.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import numpy as np

from opformer.data.store import MeshFile, write_mesh_dataset
from opformer.io import atomic_replace, write_atomic
from opformer.meshes import MeshSample

#: The key of ``settings["pde"]`` holding values drawn per sample (``{name: [value per sample]}``).
PER_SAMPLE = "per_sample"


class GenerationChunks:
    """The chunk folder of the output ``out`` for the generation settings ``key`` (JSON-serialisable)."""

    def __init__(self, out: str | os.PathLike, key: dict[str, Any]) -> None:
        out = Path(out)
        self.folder = out.parent / f".{out.name}.parts"
        self.key = json.loads(json.dumps(key))
        key_file = self.folder / "key.json"
        if self.folder.exists() and (not key_file.exists() or json.loads(key_file.read_text()) != self.key):
            shutil.rmtree(self.folder)
        if not self.folder.exists():
            self.folder.mkdir(parents=True)
            write_atomic(key_file, json.dumps(self.key, sort_keys=True))

    def _chunk(self, first: int) -> Path:
        return self.folder / f"{first:08d}.npy"

    def load(self, first: int, mmap: bool = False) -> np.ndarray | None:
        """The stored chunk starting at sample ``first``, or None; with ``mmap`` a read-only memory map of it
        (the writer then reads it from disk a piece at a time)."""
        path = self._chunk(first)
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False) if path.exists() else None

    def exists(self, first: int) -> bool:
        """Whether the chunk starting at sample ``first`` is stored (an array, or mesh samples)."""
        return self._chunk(first).exists() or self._mesh_chunk(first).exists()

    def _mesh_chunk(self, first: int) -> Path:
        return self.folder / f"{first:08d}.h5"

    def save_samples(self, first: int, samples: list[MeshSample], meta: dict[str, Any], fields: list[str]) -> None:
        """Store the mesh samples of the chunk starting at sample ``first`` (their ``fields``) as a mesh file, and
        the solver metadata."""
        write_mesh_dataset(self._mesh_chunk(first), samples, inputs=[], targets=fields, pde="chunk", settings={},
                           times=meta["pde"].get("times"), force=True)
        if not (self.folder / "meta.json").exists():
            write_atomic(self.folder / "meta.json", json.dumps(meta))

    def samples(self, first: int) -> Iterator[MeshSample]:
        """The stored mesh samples of the chunk starting at sample ``first``, read one at a time."""
        with MeshFile(self._mesh_chunk(first)) as chunk:
            for i in range(len(chunk)):
                yield chunk.sample(i)

    def save(self, first: int, array: np.ndarray, meta: dict[str, Any]) -> None:
        """Store the chunk starting at sample ``first`` (and the solver metadata, the same for every chunk but
        its per-sample values)."""
        if PER_SAMPLE in meta["pde"]:
            write_atomic(self._chunk(first).with_suffix(".json"), json.dumps(meta["pde"][PER_SAMPLE]))
        with atomic_replace(self._chunk(first)) as tmp, open(tmp, "wb") as f:
            np.save(f, array, allow_pickle=False)
        if not (self.folder / "meta.json").exists():
            write_atomic(self.folder / "meta.json", json.dumps(meta))

    def meta(self) -> dict[str, Any]:
        """The solver metadata stored with the chunks, per-sample values joined over the chunks in sample order."""
        meta = json.loads((self.folder / "meta.json").read_text())
        if PER_SAMPLE in meta["pde"]:
            chunks = [json.loads(path.with_suffix(".json").read_text()) for path in sorted(self.folder.glob("*.npy"))]
            meta["pde"][PER_SAMPLE] = {key: [value for chunk in chunks for value in chunk[key]]
                                       for key in meta["pde"][PER_SAMPLE]}
        return meta

    def remove(self) -> None:
        """Delete the chunk folder."""
        shutil.rmtree(self.folder, ignore_errors=True)
