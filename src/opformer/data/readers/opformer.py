"""opformer's own data files, read to be written again in the current layout (``opformer convert opformer OLD.h5
--out NEW.h5``): a file written before chunk checksums (hashed whole on every first open in a process) becomes
one that reads check chunk by chunk. Samples, times, domain, settings, seed and extra attributes are kept; the
samples are read about :data:`~opformer.data.readers.source.READ_BYTES` at a time, like any reader's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from opformer.data.readers.source import Source
from opformer.data.store import open_dataset_file, read_block
from opformer.kinds import OPERATOR


def read_opformer(path: Path) -> Source:
    """An opformer data file (any version this opformer reads) as a source of all its samples and settings."""
    with open_dataset_file(path) as data:
        info = data.info()
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
