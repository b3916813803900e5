"""``opformer import FORMAT SRC --out RUN``: a file of a format of :mod:`opformer.imports.formats` converted and
written as an opformer run directory.

Each format's module (its registry entry names it) reads the file without unpickling code, infers (or is given)
the model's configuration, and maps the tensors key by key onto opformer's model; any unknown or missing key or
wrong shape is a one-line error naming the first, and then nothing is written. A file is local or
``hf://OWNER/NAME[@REV]/PATH`` on the Hugging Face Hub (:mod:`opformer.imports.hub`: huggingface_hub's cache, the
commit recorded). ``opformer`` (:mod:`opformer.imports.repository`) reads back a model repository that
``opformer export`` (:mod:`opformer.imports.export`) wrote.

The run directory (:func:`write_run`) is the one training writes, so ``evaluate``, ``predict``, ``plot``,
``bench --models RUN`` and fine-tuning (``init: {checkpoint: RUN}``) take it: ``config.yaml`` (the model, its
``rollout`` window, and ``imported``: format, source file, its SHA-256, the preset the shapes match and, for a
Hub file, the commit), ``best.pt`` (a checksummed checkpoint with the surrogate's spec: no normalization, the
model's channels), ``summary.json`` (parameters, no epochs) and ``run.json`` (one record: the command, versions,
and the source). It is written into a temporary sibling folder and renamed into place, so a failed import leaves
nothing.
"""

from __future__ import annotations

import importlib
import math
import os
from pathlib import Path
from typing import Any

import torch

from opformer.config import ImportedConfig, RolloutConfig, RunConfig, config_to_dict
from opformer.errors import CheckpointError, ConfigError
from opformer.imports import hub
from opformer.imports.formats import FILE_FORMATS, FORMATS, Imported, check_options
from opformer.io import atomic_folder, sha256_file
from opformer.models.surrogate import Surrogate
from opformer.runs import check_fresh, record_import, save_checkpoint, write_run_config, write_summary

def convert_file(fmt: str, path: str | os.PathLike, *, config: str | None = None, modes: int | None = None,
                 grid: str = "nodes") -> Imported:
    """Read and convert ``path`` of the file format ``fmt`` by its module's ``import_file`` (``config``: the GT
    package's model config file, or the FactFormer authors' YAML; ``modes``: DPOT's Fourier modes if not the
    file's; ``grid``: the GT model's coordinates, ``nodes`` or ``periodic``)."""
    path = Path(path)
    check_options(fmt, config, modes, grid)
    if fmt not in FILE_FORMATS:
        raise ConfigError(f"format {fmt!r}: expected one of {', '.join(FILE_FORMATS)}")
    module = importlib.import_module(f"opformer.imports.{FORMATS[fmt].module}")
    return module.import_file(path, str(path), config=config, modes=modes, grid=grid)


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
