"""The layouts ``opformer convert`` reads: one entry per family, the only place the CLI learns of them.

An entry names the reader (a function ``read(path, **options) -> Source`` of a module in this package), a
one-line summary, the options it takes and an example; the CLI's ``opformer convert FORMAT`` with its own
``--help`` and the "only used by" errors follow. Adding a layout is one module with its reader and one entry in
``READERS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opformer.errors import ConfigError
from opformer.grids import GRID_KINDS
from opformer.data.readers.arrays import read_arrays
from opformer.data.readers.fno_mat import read_fno_mat
from opformer.data.readers.neuraloperator import read_neuraloperator_data
from opformer.data.readers.opformer import read_opformer
from opformer.data.readers.pdearena import SPLITS, read_pdearena_ns
from opformer.data.readers.pdebench import read_pdebench_2d, read_pdebench_cfd
from opformer.data.readers.source import Source
from opformer.data.readers.the_well import read_the_well
from opformer.kinds import OPERATOR, TRAJECTORY


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _lengths(text: str) -> list[float]:
    try:
        values = [float(part) for part in _names(text)]
    except ValueError:
        raise ConfigError(f"--lengths {text}: expected comma-separated numbers, one per spatial axis") from None
    if not values:
        raise ConfigError(f"--lengths {text}: expected one length per spatial axis")
    return values


def _grid(text: str) -> list[str]:
    kinds = _names(text)
    if not kinds or any(kind not in GRID_KINDS for kind in kinds):
        raise ConfigError(f"--grid {text}: expected {'|'.join(GRID_KINDS)}, one for every axis or one per axis")
    return kinds


def _choice(option: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ConfigError(f"--{option} {text}: expected one of {', '.join(choices)}")
        return text
    return parse


@dataclass(frozen=True)
class Option:
    """A setting ``opformer convert FORMAT`` takes as ``--name``: what it sets (the help of the layouts taking it)
    and how its text becomes the reader's value."""

    help: str
    parse: Callable[[str], Any] = str


#: Every reader-specific option, in the order of the CLI's help.
OPTIONS = {
    "split": Option(f"the file's split group, {'|'.join(SPLITS)} (default: the one it holds)",
                    _choice("split", SPLITS)),
    "kind": Option(f"{OPERATOR} (input/target pairs, default) or {TRAJECTORY}",
                   _choice("kind", (OPERATOR, TRAJECTORY))),
    "keys": Option("the .npz arrays, INPUT,TARGET (default x,y or input,target) or FIELDS[,TIMES] "
                   "(default fields or u; times or t if present)", _names),
    "target": Option("the .npy file of targets when SRC is a .npy of inputs", Path),
    "lengths": Option("the domain's length along each spatial axis, comma-separated; their number is the number "
                      "of spatial axes (default: each axis of length 1, their number from the arrays' shapes where "
                      "they say it, else 2)", _lengths),
    "grid": Option(f"{'|'.join(GRID_KINDS)}, one kind or one per axis (default: arrays "
                   "periodic, neuraloperator nodes, the-well periodic where its boundary is, else cells)", _grid),
}


@dataclass(frozen=True)
class Reader:
    """One layout of ``opformer convert``: ``read(path, **options)`` and the options it takes; ``many``: it reads
    several files as one data set, ``read(paths, **options)``; ``example``: the command lines of its ``--help``."""

    read: Callable[..., Source]
    summary: str
    options: tuple[str, ...] = ()
    many: bool = False
    example: str = ""


#: ``opformer convert FORMAT``: every layout.
READERS = {
    "fno-mat": Reader(read_fno_mat, "FNO's Navier-Stokes .mat (v5 or v7.3): a, u, t -> vorticity at 0 and t (1..T)",
                      example="opformer convert fno-mat ns_V1e-3_N5000_T50.mat --out data/ns_1e-3.h5 --samples 1200"),
    "pdebench-cfd": Reader(read_pdebench_cfd, "PDEBench 2D CFD .hdf5: Vx, Vy, density, pressure (periodic)",
                           example="opformer convert pdebench-cfd 2D_CFD_Rand_M0.1_Eta0.01_Zeta0.01_periodic_128_Train"
                                   ".hdf5 --out data/cfd.h5"),
    "pdebench-2d": Reader(read_pdebench_2d, "PDEBench 2D diffusion-reaction (u, v) or shallow-water (h) .h5, "
                          "groups 0000.. (cell centres)",
                          example="opformer convert pdebench-2d 2D_diff-react_NA_NA.h5 --out data/dr.h5"),
    "pdearena-ns": Reader(read_pdearena_ns, "PDEArena NavierStokes2D .h5: smoke, vx, vy on [0, 32]^2 (cells)",
                          ("split",), example="opformer convert pdearena-ns NavierStokes2D_train_1_0.h5 --split train "
                                              "--out data/smoke.h5"),
    "neuraloperator": Reader(read_neuraloperator_data, "neuraloperator .pt dict of tensors x, y (e.g. Darcy 16x16)",
                             ("lengths", "grid"), example="opformer convert neuraloperator darcy_train_16.pt --grid "
                                                          "nodes --out data/darcy16.h5"),
    "arrays": Reader(read_arrays, ".npz or .npy input/target arrays or trajectories, domain from --lengths/--grid",
                     ("kind", "keys", "target", "lengths", "grid"),
                     example="opformer convert arrays pairs.npz --out data/pairs.h5   # x, y; the axes from the shapes"
                             "\n  opformer convert arrays heat.npz --kind trajectory --channels T --out data/heat.h5"
                             "\n  opformer convert arrays in.npy --target out.npy --lengths 2,1 --grid nodes "
                             "--out data/pairs2.h5"),
    "opformer": Reader(read_opformer, "an opformer data file, rewritten in the current layout (chunk checksums: "
                       "files written before them are hashed whole on every first open)",
                       example="opformer convert opformer data/old.h5 --out data/new.h5"),
    "the-well": Reader(read_the_well, "The Well's .hdf5 files of one data set (its train, valid and test files in "
                       "one go: train first): t0/t1/t2 fields as channels, boundaries as grid kinds", ("grid",),
                       many=True, example="opformer convert the-well shear_flow/data/{train,valid,test}/*.hdf5 "
                                          "--out data/shear_flow.h5"),
}


def users(option: str) -> list[str]:
    """The layouts that take ``option``, in registry order."""
    return [name for name, reader in READERS.items() if option in reader.options]


def open_source(name: str, paths: Sequence[Path], options: dict[str, Any]) -> Source:
    """The reader ``name`` applied to ``paths`` (several: a layout that reads ``many``) with ``options``
    (``None``: not given; text is parsed); an unknown layout, several files for a layout of one, or an option the
    layout does not take is a one-line ConfigError."""
    if name not in READERS:
        raise ConfigError(f"format {name!r}: expected one of {', '.join(READERS)}")
    reader = READERS[name]
    if not paths:
        raise ConfigError(f"format {name}: no file given")
    if len(paths) != 1 and not reader.many:
        many = ", ".join(key for key, entry in READERS.items() if entry.many)
        raise ConfigError(f"{len(paths)} files given: format {name} reads one file ({many} reads several)")
    values = {}
    for key, value in options.items():
        if value is None:
            continue
        if key not in OPTIONS:
            raise ConfigError(f"{key}: not an option of opformer convert (expected one of {', '.join(OPTIONS)})")
        if key not in reader.options:
            raise ConfigError(f"--{key}: only used by {', '.join(users(key))} (not by {name})")
        values[key] = OPTIONS[key].parse(value) if isinstance(value, str) else value
    return reader.read(paths if reader.many else paths[0], **values)
