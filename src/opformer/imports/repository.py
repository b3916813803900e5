"""``opformer import opformer DIR|hf://OWNER/NAME[@REV] --out RUN``: a model repository that ``opformer export``
wrote (the format: :mod:`opformer.imports.export`) read back as a run directory.

Loading reads JSON and safetensors only (no code runs), refuses a newer ``format_version`` in one line, checks
the weights' SHA-256 and that they fit the model the spec builds, and writes the run directory a training run
writes (``config.yaml``: the original run config, ``best.pt``, ``metrics.csv``, ``summary.json``, ``run.json``:
the original sessions and a record of the import), so ``evaluate``, ``predict``, ``plot``, fine-tuning ``init``
and :func:`opformer.load_surrogate` take it; its predictions are the original run's, bit for bit. The run
directory is written atomically (a temporary sibling renamed into place).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from opformer.config import config_from_dict
from opformer.errors import CheckpointError, ConfigError
from opformer.imports import hub
from opformer.imports.export import (CALIBRATION_TENSORS, CONFIG_JSON, FORMAT, FORMAT_VERSION, WEIGHTS,
                                     safetensors_module)
from opformer.imports.export import export_run  # noqa: F401  (importable from here too)
from opformer.io import atomic_folder, sha256_file
from opformer.models.surrogate import Surrogate
from opformer.runs import (CALIBRATION, CALIBRATION_FORMAT, CALIBRATION_VERSION, check_fresh, load_checkpoint,
                           record_import, save_calibration_record, save_checkpoint, write_metrics, write_run_config,
                           write_summary)


@dataclass
class Repository:
    """A model repository read back: its ``config.json``, its tensors, where it came from (``source``, the
    Hub ``commit`` if any) and the SHA-256 of its weights file."""

    config: dict[str, Any]
    state: dict[str, Tensor]
    source: str
    sha256: str
    commit: str = ""
    calibration: dict[str, Tensor] | None = None  # the tensors of calibration.safetensors, where it has one


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _check_config(config: Any, where: str) -> dict[str, Any]:
    """``config.json`` of a repository, checked: this format, a version this opformer reads, its entries."""
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise CheckpointError(f"{where}: not an opformer model repository's config (expected format {FORMAT!r})")
    version = config.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"{where}: format_version {version!r}: expected a positive integer")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"{where}: format version {version} is newer than this opformer reads (up to "
                              f"{FORMAT_VERSION}); upgrade opformer")
    for key, kind in (("spec", dict), ("run_config", dict), ("training", dict), ("weights_sha256", str)):
        if not isinstance(config.get(key), kind):
            raise CheckpointError(f"{where}: {key} is missing or not a {kind.__name__}")
    return config


def _check_present(folder: Path, path: Path) -> None:
    """A one-line error where a repository folder lacks one of its files."""
    if not path.is_file():
        raise CheckpointError(f"{folder}: no {path.name} (not a model repository written by opformer export)")


def read_repository(source: str | os.PathLike, revision: str | None = None) -> Repository:
    """Read a model repository: a local folder, or ``hf://OWNER/NAME[@REV]`` through huggingface_hub's cache
    (both files at the commit that ``config.json`` resolved to)."""
    commit = ""
    where = hub.source_of(source, revision)
    if where is not None:
        if where.path:
            raise ConfigError(f"{source}: an opformer model is a whole repository: hf://OWNER/NAME[@REVISION]")
        config_path, where = hub.download(where, CONFIG_JSON)  # the weights after it is checked: no large
        source, commit = str(where), where.commit            # download for a repository refused anyway
    else:
        folder = Path(source)
        if not folder.is_dir():
            raise CheckpointError(f"{folder}: no such folder (expected a model repository written by opformer "
                                  "export, or hf://OWNER/NAME)")
        config_path, source = folder / CONFIG_JSON, str(folder.absolute())
        _check_present(folder, config_path)
    try:
        config = json.loads(config_path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{source}/{CONFIG_JSON}: not readable JSON ({str(exc).splitlines()[0][:120]})"
                              ) from None
    config = _check_config(config, f"{source}/{CONFIG_JSON}")
    if where is not None:
        weights_path, _ = hub.download(where, WEIGHTS)  # at the commit config.json resolved to
    else:
        weights_path = folder / WEIGHTS
        _check_present(folder, weights_path)
    sha256 = sha256_file(weights_path)
    state = _read_tensors(weights_path, config["weights_sha256"], str(source))
    calibration = None
    if isinstance(config.get("calibration"), dict) and config["calibration"].get("included"):
        if where is not None:
            calibration_path, _ = hub.download(where, CALIBRATION_TENSORS)
        else:
            calibration_path = folder / CALIBRATION_TENSORS
            _check_present(folder, calibration_path)
        calibration = _read_tensors(calibration_path, config["calibration"].get("sha256"), source)
    return Repository(config, state, str(source), sha256, commit, calibration)


def _read_tensors(path: Path, expected: Any, source: str) -> dict[str, Tensor]:
    """A safetensors file of a repository, its SHA-256 checked against ``expected`` (config.json's)."""
    if sha256_file(path) != expected:
        raise CheckpointError(f"{source}/{path.name}: corrupt or replaced (its SHA-256 is not the one config.json "
                              "records)")
    try:
        return safetensors_module().torch.load_file(str(path))
    except Exception as exc:  # safetensors' own error type for a damaged header or data
        raise CheckpointError(f"{source}/{path.name}: not a readable safetensors file "
                              f"({str(exc).splitlines()[0][:120]})") from None


def surrogate_of(repository: Repository) -> Surrogate:
    """The surrogate a repository holds (eval mode); a one-line error naming the first tensor that its spec's
    model does not have, lacks, or has in another shape."""
    where = f"{repository.source}/{WEIGHTS}"
    try:
        surrogate = Surrogate.from_spec(repository.config["spec"])
    except (ConfigError, KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{repository.source}/{CONFIG_JSON}: spec does not build a model "
                              f"({str(exc).strip().splitlines()[0][:160]})") from None
    expected, state = surrogate.state_dict(), repository.state
    for key, tensor in state.items():
        if key not in expected:
            raise CheckpointError(f"{where}: weights do not fit the model config: unexpected tensor {key!r}")
        if tensor.shape != expected[key].shape or tensor.dtype != expected[key].dtype:
            raise CheckpointError(f"{where}: weights do not fit the model config: {key} is {tensor.dtype} "
                                  f"{tuple(tensor.shape)}, expected {expected[key].dtype} {tuple(expected[key].shape)}")
    absent = [key for key in expected if key not in state]
    if absent:
        raise CheckpointError(f"{where}: weights do not fit the model config: missing tensor {absent[0]!r}")
    surrogate.load_state_dict(state)
    return surrogate.eval()


def import_repository(source: str | os.PathLike, out: str | os.PathLike, revision: str | None = None
                      ) -> tuple[Path, Repository]:
    """Read the model repository ``source`` and write it as the run directory ``out`` (absent or empty)."""
    out = Path(out)
    check_fresh(out)
    repository = read_repository(source, revision)
    config, training = repository.config, repository.config["training"]
    try:  # checked; the checkpoint keeps the mapping as the original's did
        run_config = config_from_dict(config["run_config"])
    except ConfigError as exc:
        raise CheckpointError(f"{repository.source}/{CONFIG_JSON}: run_config: {exc}") from None
    surrogate = surrogate_of(repository)
    history = [h for h in _list(training.get("history")) if isinstance(h, dict)]
    best_val, epoch = training.get("best_val_relative_l2"), training.get("epoch")
    summary = training.get("summary") if isinstance(training.get("summary"), dict) else {}
    record = {"format": "opformer", "source": repository.source, "sha256": repository.sha256,
              "revision": repository.commit, "format_version": config["format_version"]}
    sessions = [s for s in _list(training.get("sessions")) if isinstance(s, dict)]
    with atomic_folder(out) as tmp:
        write_run_config(tmp, run_config)
        save_checkpoint(tmp / "best.pt", surrogate, run_config=config["run_config"],
                        epoch=epoch if isinstance(epoch, int) else 0, history=history,
                        best_val=float(best_val) if isinstance(best_val, (int, float)) else math.nan)
        if history:
            write_metrics(tmp, history)
        write_summary(tmp, {**summary, "imported": record})
        record_import(tmp, record, sessions)
        if repository.calibration is not None:
            _write_calibration(tmp, repository)
    return out, repository


def _write_calibration(run_dir: Path, repository: Repository) -> None:
    """The repository's calibration as the run's ``calibration.pt``, bound to the checkpoint just written: the
    exported one calibrated the very weights the repository holds (export checked it against them, and their
    SHA-256 is checked on reading); ``source.imported`` records where it came from and the original checkpoint's
    checksum."""
    entry = repository.config["calibration"]
    where = f"{repository.source}/{CONFIG_JSON}: calibration"
    meta, names, values = entry.get("meta"), entry.get("groups"), entry.get("values")
    if (not isinstance(meta, dict) or not isinstance(meta.get("source"), dict) or not isinstance(names, list)
            or not isinstance(values, list) or len(values) != len(names)
            or not all(isinstance(value, dict) for value in values)):
        raise CheckpointError(f"{where}: meta, groups or values missing or malformed")
    if entry.get("format") != CALIBRATION_FORMAT or not isinstance(entry.get("version"), int) \
            or entry["version"] > CALIBRATION_VERSION:
        raise CheckpointError(f"{where}: format {entry.get('format')!r} version {entry.get('version')!r}: expected "
                              f"{CALIBRATION_FORMAT!r} up to version {CALIBRATION_VERSION}; upgrade opformer")
    groups: dict[str, dict[str, Any]] = {str(name): dict(value) for name, value in zip(names, values)}
    for key, tensor in repository.calibration.items():
        index, _, field = key.partition("/")
        if not index.isdigit() or int(index) >= len(names) or not field:
            raise CheckpointError(f"{repository.source}/{CALIBRATION_TENSORS}: unexpected tensor {key!r}")
        groups[str(names[int(index)])][field] = tensor
    original = meta.get("checkpoint_checksum")
    imported = {"repository": repository.source, "checkpoint_checksum": original}
    meta = {**meta, "checkpoint_checksum": load_checkpoint(run_dir / "best.pt")["checksum"],
            "source": {**meta["source"], "imported": imported}}
    save_calibration_record(run_dir / CALIBRATION, meta, groups)
