"""The formats ``opformer import`` reads: one entry per format, the only place the CLI and
:func:`opformer.imports.convert.convert_file` learn of them.

An entry names the module of this package that converts the format (a file format's module has
``import_file(path, where, *, config, modes, grid) -> Imported``), a one-line summary, the import options it takes
and the CLI's examples. This module imports no torch and no models, so the CLI's parser reads it. Adding a format
is one module with its ``import_file`` and one entry in ``FORMATS``; the CLI's choices, examples and the "only used
with" errors follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opformer.errors import ConfigError

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True)
class ImportFormat:
    """A format of ``opformer import``: the module converting it, what it is, the options it takes (of
    :data:`OPTIONS`), the CLI's examples and whether it is a model repository (``opformer import opformer``) rather
    than one weights file."""

    module: str
    summary: str
    options: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    repository: bool = False


#: The options of ``opformer import`` that some formats take.
OPTIONS = ("config", "modes", "grid")

#: ``opformer import FORMAT``: every format.
FORMATS = {
    "dpot": ImportFormat("dpot", "the DPOT authors' checkpoints", ("modes",),
                         ("opformer import dpot model_Ti.pth --out runs/dpot_ti",
                          "opformer import dpot hf://hzk17/DPOT/model_Ti.pth --out runs/dpot_ti")),
    "factformer": ImportFormat("factformer", "the FactFormer authors' checkpoints with their YAML config", ("config",),
                               ("opformer import factformer checkpoint_final.pth --config ns2d_fact_lm.yml "
                                "--out runs/ff_imported",)),
    "galerkin-transformer": ImportFormat(
        "galerkin", "the Galerkin Transformer package's SimpleTransformer", ("config", "grid"),
        ("opformer import galerkin-transformer burgers_gt.pt --config burgers.yaml --out runs/gt_imported",)),
    "neuraloperator": ImportFormat("neuraloperator", "neuraloperator's FNO 1D/2D", (),
                                   ("opformer import neuraloperator fno1d_state_dict.pt --out runs/fno_imported",)),
    "opformer": ImportFormat("repository", "a model repository that opformer export wrote", (),
                             ("opformer import opformer hf://OWNER/NAME --revision v1 --out runs/shared",),
                             repository=True),
}
#: The formats of one weights file (:func:`opformer.imports.convert.convert_file`).
FILE_FORMATS = tuple(name for name, entry in FORMATS.items() if not entry.repository)


@dataclass
class Imported:
    """A converted file: opformer's model config and state dict, the surrogate's data signature, the size's
    name (``preset``) and notes on what was inferred."""

    config: dict[str, Any]
    state: dict[str, Tensor]
    data: dict[str, Any]
    preset: str = ""
    notes: list[str] = field(default_factory=list)


def data_signature(ndim: int, size: int, in_channels: int, out_channels: int, imported: str,
                   frames: dict[str, int] | None = None) -> dict[str, Any]:
    """The data signature of an imported model: any data with its channel counts (``imported``: the channels'
    names are not checked, their number is), ``stored_shape`` the grid it was built for (DPOT) or a nominal one."""
    channels = [f"c{i}" for i in range(in_channels)], [f"c{i}" for i in range(out_channels)]
    return {"stored_shape": [size] * ndim, "periodic": [True] * ndim, "lengths": [1.0] * ndim,
            "input_channels": channels[0], "target_channels": channels[1], **(frames or {}), "imported": imported}


def check_options(fmt: str, config: str | None = None, modes: int | None = None, grid: str = "nodes") -> None:
    """Refuse, in one line, an option that format ``fmt`` does not use (``grid``'s default ``nodes`` is none)."""
    if fmt not in FORMATS:
        raise ConfigError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    given = {"config": config is not None, "modes": modes is not None, "grid": grid != "nodes"}
    for option in OPTIONS:
        if given[option] and option not in FORMATS[fmt].options:
            owners = [name for name, entry in FORMATS.items() if option in entry.options]
            raise ConfigError(f"--{option}: only used with format {' or '.join(owners)}")
