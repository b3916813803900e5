"""A run others can load: ``opformer export RUN DIR`` writes a Hub-style model repository, ``opformer import
opformer DIR|hf://OWNER/NAME[@REV] --out RUN`` reads one back as a run directory.

The repository (format ``opformer-model``, :data:`FORMAT_VERSION`)::

    DIR/model.safetensors  the surrogate's tensors: the model's weights and the normalisers' mean and std
                           (safetensors: raw tensors and a JSON header, nothing to unpickle)
    DIR/config.json        format and format_version, the opformer version that wrote it, the surrogate's
                           spec (model config, normalisation, data signature: channels, grid, boundary), the
                           run config, the data file's description (PDE, solver, domain), training (epoch,
                           best validation error, history, summary, sessions), test metrics if given, and the
                           SHA-256 of model.safetensors
    DIR/README.md          a model card (Hub metadata, model, data, training command, metrics, how to load it)

Loading reads JSON and safetensors only (no code runs), refuses a newer ``format_version`` in one line, checks
the weights' SHA-256 and that they fit the model the spec builds, and writes the run directory a training run
writes (``config.yaml``: the original run config, ``best.pt``, ``metrics.csv``, ``summary.json``, ``run.json``:
the original sessions and a record of the import), so ``evaluate``, ``predict``, ``plot``, fine-tuning ``init``
and :func:`opformer.load_surrogate` take it; its predictions are the original run's, bit for bit. Both
folders are written atomically (a temporary sibling renamed into place).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from torch import Tensor

from opformer import __version__
from opformer.config import config_from_dict
from opformer.data.store import read_info
from opformer.errors import CheckpointError, ConfigError, OpformerError
from opformer.imports import hub
from opformer.io import atomic_folder, atomic_replace, read_json, sha256_file, write_atomic
from opformer.models.surrogate import Surrogate
from opformer.runs import (SUMMARY, Run, check_fresh, finite_json, record_import, recorded_sessions, save_checkpoint,
                           write_metrics, write_run_config, write_summary)

FORMAT = "opformer-model"
#: the version this opformer writes; it reads every version up to it
FORMAT_VERSION = 1
WEIGHTS, CONFIG_JSON, CARD = "model.safetensors", "config.json", "README.md"


@dataclass
class Repository:
    """A model repository read back: its ``config.json``, its tensors, where it came from (``source``, the
    Hub ``commit`` if any) and the SHA-256 of its weights file."""

    config: dict[str, Any]
    state: dict[str, Tensor]
    source: str
    sha256: str
    commit: str = ""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _safetensors() -> ModuleType:
    try:
        import safetensors.torch
    except ImportError:
        raise ConfigError("model repositories need the safetensors package: pip install safetensors") from None
    return safetensors


def _unshared(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """The tensors contiguous on the CPU, each owning its storage (safetensors refuses shared memory)."""
    out, seen = {}, set()
    for key, tensor in state.items():
        tensor = tensor.detach().cpu().contiguous()
        storage = tensor.untyped_storage()
        if storage.data_ptr() in seen or storage.nbytes() != tensor.numel() * tensor.element_size():
            tensor = tensor.clone()
        seen.add(tensor.untyped_storage().data_ptr())
        out[key] = tensor
    return out


def data_description(run_config: dict[str, Any]) -> dict[str, Any]:
    """The training data file's self-description (kind, samples, PDE, solver, domain) where it can be read;
    else only its path (a mixture: its members' paths)."""
    data = run_config.get("data", {})
    path = data.get("path")
    described: dict[str, Any] = {"path": path}
    if data.get("mixture"):
        described["mixture"] = [member.get("path") for member in data["mixture"]]
    if path and Path(path).is_file():
        try:
            info = read_info(path)
        except OpformerError:
            return described
        described.update(kind=info.kind, samples=info.n_samples, stored_shape=list(info.spatial_shape),
                         pde=info.pde, solver=info.solver, domain=info.domain)
    return described


def export_run(run_dir: str | os.PathLike, out: str | os.PathLike, metrics: str | os.PathLike | None = None
               ) -> Path:
    """Write the best checkpoint of ``run_dir`` as the model repository ``out`` (absent or empty; see the
    module docstring); ``metrics``: an ``opformer evaluate --json`` file whose results go into the card."""
    run_dir, out = Path(run_dir), Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CheckpointError(f"{out}: exists and is not an empty folder; choose a new or empty one")
    run = Run(run_dir)
    surrogate, payload = run.surrogate, run.payload
    results = None
    if metrics is not None:
        evaluated = read_json(Path(metrics))
        if not isinstance(evaluated, dict) or not isinstance(evaluated.get("results"), list):
            raise ConfigError(f"--metrics {metrics}: expected the JSON file of opformer evaluate --json")
        results = {k: evaluated.get(k) for k in ("data", "split")} | {"results": evaluated["results"]}
    summary = read_json(run_dir / SUMMARY)
    config = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "opformer_version": __version__,
        "spec": surrogate.spec, "run_config": payload["run_config"],
        "data": data_description(payload["run_config"]),
        "training": {"epoch": payload["epoch"], "best_val_relative_l2": payload["best_val"],
                     "history": payload["history"], "summary": summary if isinstance(summary, dict) else None,
                     "sessions": recorded_sessions(run_dir)},
        "metrics": results,
    }
    state = _unshared(surrogate.state_dict())
    with atomic_folder(out) as tmp:
        size = sum(t.numel() * t.element_size() for t in state.values())
        with atomic_replace(tmp / WEIGHTS, size=size) as weights:
            mode = weights.stat().st_mode  # ordinary permissions, which safetensors' own file lacks
            _safetensors().torch.save_file(state, str(weights), metadata={
                "format": FORMAT, "format_version": str(FORMAT_VERSION)})
            weights.chmod(mode)
        config["weights_sha256"] = sha256_file(tmp / WEIGHTS)
        write_atomic(tmp / CONFIG_JSON, json.dumps(finite_json(config), indent=2, allow_nan=False) + "\n")
        write_atomic(tmp / CARD, model_card(config, sum(p.numel() for p in surrogate.model.parameters())))
    return out


def _value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _kind(kind: Any) -> str:
    """A grid kind of a data signature (older signatures: periodic or not)."""
    return ("periodic" if kind else "closed") if isinstance(kind, bool) else str(kind)


def _settings(mapping: Any) -> str:
    if not isinstance(mapping, dict) or not mapping:
        return "not recorded"
    return ", ".join(f"{k} = {_value(v)}" for k, v in mapping.items() if not isinstance(v, (dict, list)))


def model_card(config: dict[str, Any], parameters: int) -> str:
    """The README.md of a model repository: Hub metadata, then the model, data, training, metrics and use."""
    spec, run, data, training = config["spec"], config["run_config"], config["data"], config["training"]
    model = spec["model"]["name"]
    signature = spec["data"]
    summary = training.get("summary") or {}
    command = next((s.get("command") for s in training.get("sessions", []) if s.get("command")), None)
    imported = run.get("imported")
    lines = ["---", "library_name: opformer", f"tags: [opformer, neural-operator, pde, {model}]", "---", "",
             f"# {model} surrogate (opformer)", "",
             f"Written by `opformer export` (opformer {config['opformer_version']}, format {FORMAT} version "
             f"{config['format_version']}). Load it with `opformer import opformer hf://OWNER/NAME --out RUN` "
             "(or a local copy of this folder), then `opformer evaluate RUN --data FILE` or "
             "`opformer predict RUN ...`.", "",
             "## Model", "",
             f"- `{model}`, {parameters:,} parameters; its full configuration is `spec.model` in config.json",
             f"- normalisation: input `{spec['normalize_input']}`, target `{spec['normalize_target']}` (the "
             "statistics are in model.safetensors); output boundary condition: "
             f"`{spec.get('boundary', 'none')}`", "",
             "## Data", "",
             f"- inputs: {', '.join(signature['input_channels'])}; targets: {', '.join(signature['target_channels'])}",
             f"- grid: {' x '.join(map(str, signature['stored_shape']))}, kinds "
             f"{', '.join(_kind(k) for k in signature.get('grid', signature['periodic']))}, lengths "
             f"{', '.join(_value(v) for v in signature.get('lengths', []))}",
             f"- mixture of {len(data['mixture'])} files: " + ", ".join(f"`{p}`" for p in data["mixture"])
             if data.get("mixture") else
             f"- file: `{data.get('path')}`" + (f" ({data['kind']}, {data['samples']} samples)" if "kind" in data
                                                 else " (not readable at export: no PDE settings recorded)")]
    if "pde" in data:
        lines += [f"- PDE: {_settings(data['pde'])}", f"- solver: {_settings(data['solver'])}"]
    lines += ["", "## Training", ""]
    if imported:
        lines.append(f"- weights imported from {imported['format']} file {imported['source']} "
                     f"(SHA-256 {imported['sha256']}), not trained by opformer")
    else:
        lines += [f"- command: `{command}`" if command else "- command: not recorded",
                  f"- epochs: {summary.get('epochs', training['epoch'] + 1)}, best epoch {summary.get('best_epoch')}, "
                  f"best validation relative L2 {_value(training['best_val_relative_l2'])}",
                  f"- seed {run.get('seed')}; the whole run config is `run_config` in config.json"]
    lines += ["", "## Test metrics", ""]
    metrics = config.get("metrics")
    if metrics:
        rows = [r for r in metrics["results"] if isinstance(r, dict)]
        columns = [k for k in dict.fromkeys(k for r in rows for k in r)
                   if all(not isinstance(r.get(k), (dict, list)) for r in rows)]
        lines += [f"On `{metrics.get('data')}`, split {metrics.get('split')}:", "",
                  "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(_value(r.get(k, "")) for k in columns) + " |" for r in rows]
    else:
        lines.append("Not given at export (`opformer export RUN DIR --metrics EVAL.json`, EVAL.json written by "
                     "`opformer evaluate RUN --json EVAL.json`).")
    return "\n".join(lines) + "\n"


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
    if sha256 != config["weights_sha256"]:
        raise CheckpointError(f"{source}/{WEIGHTS}: corrupt or replaced (its SHA-256 is not the one config.json "
                              "records)")
    try:
        state = _safetensors().torch.load_file(str(weights_path))
    except Exception as exc:  # safetensors' own error type for a damaged header or data
        raise CheckpointError(f"{source}/{WEIGHTS}: not a readable safetensors file "
                              f"({str(exc).splitlines()[0][:120]})") from None
    return Repository(config, state, str(source), sha256, commit)


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
    return out, repository
