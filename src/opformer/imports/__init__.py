"""``opformer import FORMAT SRC --out RUN``: weights trained by another code base as an opformer run directory.

Formats (one module each) of one weights file, local or ``hf://OWNER/NAME[@REV]/PATH`` on the Hugging Face
Hub (:mod:`opformer.imports.hub`: huggingface_hub's cache, the commit recorded): ``dpot``
(:mod:`opformer.imports.dpot`, the DPOT authors' checkpoints), ``factformer`` (:mod:`opformer.imports.factformer`,
the FactFormer authors' checkpoints with their YAML config), ``galerkin-transformer``
(:mod:`opformer.imports.galerkin`, the Galerkin Transformer package's ``SimpleTransformer``), ``neuraloperator``
(:mod:`opformer.imports.neuraloperator`, FNO 1D/2D). Each reads the file without unpickling code, infers (or is
given) the model's configuration, and maps the tensors key by key onto opformer's model; any unknown or missing
key or wrong shape is a one-line error naming the first, and then nothing is written. ``opformer``
(:mod:`opformer.imports.repository`) reads back a model repository that ``opformer export``
(:mod:`opformer.imports.export`) wrote.

The run directory (:func:`write_run`) is the one training writes, so ``evaluate``, ``predict``, ``plot``,
``bench --models RUN`` and fine-tuning (``init: {checkpoint: RUN}``) take it: ``config.yaml`` (the model, its
``rollout`` window, and ``imported``: format, source file, its SHA-256, the preset the shapes match and, for a
Hub file, the commit), ``best.pt`` (a checksummed checkpoint with the surrogate's spec: no normalization, the
model's channels), ``summary.json`` (parameters, no epochs) and ``run.json`` (one record: the command, versions,
and the source). It is written into a temporary sibling folder and renamed into place, so a failed import leaves
nothing.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from opformer.config import ImportedConfig, RolloutConfig, RunConfig, config_to_dict
from opformer.errors import CheckpointError, ConfigError
from opformer.imports import dpot, factformer, galerkin, hub, neuraloperator
from opformer.io import atomic_folder, sha256_file
from opformer.models.surrogate import Surrogate
from opformer.runs import check_fresh, record_import, save_checkpoint, write_run_config, write_summary

#: the formats of one weights file (:func:`convert_file`)
FILE_FORMATS = ("dpot", "factformer", "galerkin-transformer", "neuraloperator")
#: every format ``opformer import`` reads: the file formats and ``opformer`` (:mod:`opformer.imports.repository`)
FORMATS = (*FILE_FORMATS, "opformer")


@dataclass
class Imported:
    """A converted file: opformer's model config and state dict, the surrogate's data signature, the size's
    name (``preset``) and notes on what was inferred."""

    config: dict[str, Any]
    state: dict[str, Tensor]
    data: dict[str, Any]
    preset: str = ""
    notes: list[str] = field(default_factory=list)


def _channels(n: int) -> list[str]:
    return [f"c{i}" for i in range(n)]


def _signature(ndim: int, size: int, in_channels: int, out_channels: int, imported: str,
               frames: dict[str, int] | None = None) -> dict[str, Any]:
    """The data signature of an imported model: any data with its channel counts (``imported``: the channels'
    names are not checked, their number is), ``stored_shape`` the grid it was built for (DPOT) or a nominal one."""
    return {"stored_shape": [size] * ndim, "periodic": [True] * ndim, "lengths": [1.0] * ndim,
            "input_channels": _channels(in_channels), "target_channels": _channels(out_channels),
            **(frames or {}), "imported": imported}


def check_options(fmt: str, config: str | None = None, modes: int | None = None, grid: str = "nodes") -> None:
    """Refuse, in one line, an option that format ``fmt`` does not use (``opformer`` uses none of them)."""
    unused = {"--config": (config, ("galerkin-transformer", "factformer")), "--modes": (modes, ("dpot",))}
    for option, (value, owners) in unused.items():
        if value is not None and fmt not in owners:
            raise ConfigError(f"{option}: only used with format {' or '.join(owners)}")
    if grid != "nodes" and fmt != "galerkin-transformer":
        raise ConfigError("--grid: only used with format galerkin-transformer")


def convert_file(fmt: str, path: str | os.PathLike, *, config: str | None = None, modes: int | None = None,
                 grid: str = "nodes") -> Imported:
    """Read and convert ``path`` of format ``fmt`` (``config``: the GT package's model config file, or the
    FactFormer authors' YAML; ``modes``: DPOT's Fourier modes if not the file's; ``grid``: the GT model's
    coordinates, ``nodes`` or ``periodic``)."""
    path = Path(path)
    where = str(path)
    check_options(fmt, config, modes, grid)
    if fmt == "dpot":
        if modes is not None and modes < 1:
            raise ConfigError(f"--modes {modes}: expected a positive number of modes")
        state, args = dpot.read_dpot(path)
        model, preset, notes = dpot.infer_config(state, args, where, modes)
        ndim = 3 if model["name"] == "dpot3d" else 2
        data = _signature(ndim, model["grid_size"], model["in_channels"], model["out_channels"], fmt,
                          {"t_in": model["t_in"], "t_out": model["t_out"]})
        return Imported(model, dpot.convert(state, model, where), data, preset, notes)
    if fmt == "factformer":
        state, their_config = factformer.read_factformer(path, config)
        model, notes = factformer.infer_config(state, their_config, config or where)
        ndim = 3 if model["name"] == "factformer3d" else 2
        size = their_config.get("resolution")
        frames = {"t_in": model["t_in"], "t_out": model["t_out"]} if "t_in" in model else None
        data = _signature(ndim, size if isinstance(size, int) and size > 0 else 64, model["in_channels"],
                          model["out_channels"], fmt, frames)
        return Imported(model, factformer.convert(state, model, where), data, "", notes)
    if fmt == "galerkin-transformer":
        state, package_config = galerkin.read_galerkin(path, config)
        model, notes = galerkin.model_config(package_config, config or where, grid)
        preset = "burgers" if all(model[k] == v for k, v in (("in_channels", 1), ("out_channels", 1), ("d_model", 96),
                                                               ("n_layers", 4), ("n_head", 1), ("dim_ff", 192),
                                                               ("decoder_width", 48), ("decoder_modes", 16))) else ""
        data = _signature(1, 512, model["in_channels"], model["out_channels"], fmt)
        return Imported(model, galerkin.convert(state, model, where), data, preset, notes)
    if fmt == "neuraloperator":
        state, metadata = neuraloperator.read_neuraloperator_weights(path)
        model, notes = neuraloperator.infer_config(state, metadata, where)
        ndim = int(model["name"][3])
        data = _signature(ndim, 512 if ndim == 1 else 64, model["in_channels"], model["out_channels"], fmt)
        return Imported(model, neuraloperator.convert(state, model, where), data, "", notes)
    raise ConfigError(f"format {fmt!r}: expected one of {', '.join(FILE_FORMATS)}")


def build_surrogate(imported: Imported) -> Surrogate:
    """The surrogate (identity normalizers) holding the converted weights, in eval mode."""
    spec = {"model": dict(imported.config), "normalize_input": "none", "normalize_target": "none",
            "data": imported.data, "boundary": "none"}
    with torch.device("meta"):  # no random initialisation of weights that are replaced at once
        surrogate = Surrogate(spec)
    spec["model"] = surrogate.model.config
    state = {f"model.{k}": (v.float() if v.is_floating_point() else v).contiguous()
             for k, v in imported.state.items()}
    for name, normalizer in (("input_normalizer", surrogate.input_normalizer),
                             ("target_normalizer", surrogate.target_normalizer)):
        state[f"{name}.mean"] = torch.zeros(normalizer.mean.shape)
        state[f"{name}.std"] = torch.ones(normalizer.std.shape)
    surrogate.load_state_dict(state, assign=True)
    for parameter in surrogate.parameters():
        parameter.requires_grad_(True)
    return surrogate.eval()


def run_config(imported: Imported, record: ImportedConfig) -> RunConfig:
    """The run config of an imported model: its model section, its window (time models), ``imported``."""
    frames = {k: imported.config[k] for k in ("t_in", "t_out") if k in imported.config}
    return RunConfig(model=dict(imported.config), rollout=RolloutConfig(**frames), imported=record)


def write_run(out: str | os.PathLike, imported: Imported, record: ImportedConfig) -> Path:
    """Write the run directory ``out`` (absent or empty) of a converted file; see the module docstring."""
    out = Path(out)
    check_fresh(out)
    config = run_config(imported, record)
    surrogate = build_surrogate(imported)
    with atomic_folder(out) as tmp:
        write_run_config(tmp, config)
        save_checkpoint(tmp / "best.pt", surrogate, run_config=config_to_dict(config), epoch=0, history=[],
                        best_val=math.nan)
        parameters = sum(p.numel() for p in surrogate.model.parameters())
        write_summary(tmp, {"epochs": 0, "best_epoch": None, "best_val_relative_l2": None, "parameters": parameters,
                            "imported": config_to_dict(config)["imported"]})
        record_import(tmp, config_to_dict(config)["imported"])
    return out


def import_run(fmt: str, source: str | os.PathLike, out: str | os.PathLike, revision: str | None = None,
               **options: Any) -> tuple[Path, Imported]:
    """Convert ``source`` (a file, or ``hf://OWNER/NAME[@REV]/PATH`` fetched through :mod:`opformer.imports.hub`
    at ``revision``; :func:`convert_file`) and write it as the run ``out`` (:func:`write_run`)."""
    out = Path(out)
    check_fresh(out)  # before the (possibly long) download and conversion
    where = hub.source_of(source, revision)
    if where is not None:
        if not where.path:
            raise ConfigError(f"{source}: name the weights file: hf://OWNER/NAME[@REVISION]/PATH")
        path, where = hub.download(where)
        recorded, commit = f"{hub.PREFIX}{where.repo}/{where.path}", where.commit
    else:
        path = Path(source)
        if path.is_dir():
            raise CheckpointError(f"{source}: is a directory, expected a weights file")
        recorded, commit = str(path.absolute()), ""
    imported = convert_file(fmt, path, **options)
    record = ImportedConfig(format=fmt, source=recorded, sha256=sha256_file(path), preset=imported.preset,
                            revision=commit)
    return write_run(out, imported, record), imported
