"""opformer's own data files, read to be written again in the current layout (``opformer convert opformer OLD.h5
--out NEW.h5``): a file written before chunk checksums (hashed whole on every first open in a process) becomes
one that reads check chunk by chunk. Samples, times, domain, settings, seed and extra attributes are kept; the
samples are read about :data:`~opformer.data.readers.source.READ_BYTES` at a time, like any reader's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from opformer.data.readers.source import MeshSource, Source
from opformer.data.store import DatasetInfo, MeshFile, open_dataset_file, read_block
from opformer.kinds import MESH, OPERATOR
from opformer.meshes import MeshSample


def _mesh(path: Path, info: DatasetInfo) -> MeshSource:
    """A mesh data file as a source of its samples, read one at a time."""
    def read(count: int) -> Iterator[MeshSample]:
        with MeshFile(path) as data:
            for i in range(count):
                yield data.sample(i)

    settings = {key: value for key, value in info.pde.items() if key != "name"}
    return MeshSource(samples=info.n_samples, read=read, inputs=[name for name, _ in info.mesh["inputs"]],
                      targets=[name for name, _ in info.mesh["targets"]] if info.has_target else [],
                      pde=info.pde.get("name", ""), settings=settings, solver=info.solver,
                      times=np.asarray(info.times) if info.times else None, every_sample=True, seed=info.seed)


def read_opformer(path: Path) -> Source | MeshSource:
    """An opformer data file (any version this opformer reads) as a source of all its samples and settings."""
    with open_dataset_file(path) as data:
        info = data.info()
    if info.kind == MESH:
        return _mesh(path, info)
    with open_dataset_file(path) as data:
        names = ("input", "target") if info.kind == OPERATOR and info.has_target else \
            ("input",) if info.kind == OPERATOR else ("fields",)
        shapes = tuple(tuple(int(s) for s in data.dataset(name).shape[1:]) for name in names)
    channels = (info.input_channels, info.target_channels) if info.kind == OPERATOR else (info.input_channels,)

    def read(start: int, stop: int) -> tuple:
        return tuple(read_block(path, name, (slice(start, stop),)) for name in names)

    return Source(kind=info.kind, samples=info.n_samples, shapes=shapes, channels=channels, read=read,
                  domain=info.domain, pde=info.pde, solver=info.solver,
                  times=None if info.kind == OPERATOR else np.asarray(info.times), seed=info.seed, extra=info.extra,
                  every_sample=True)
