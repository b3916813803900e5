"""The checkpoint format: what ``best.pt``/``last.pt`` hold, written atomically and read back checked.

Checkpoints are loaded with ``torch.load(weights_only=True)`` (no code unpickled; :func:`load_weights`, which
calibrations share); each carries a SHA-256 checksum of everything it holds (tensor bytes included), verified on
load, so a flipped bit is an error instead of a silently different model. Checkpoints written before checksums load
unverified.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from opformer.errors import CheckpointError, ConfigError, StorageError
from opformer.io import atomic_replace
from opformer.models.factformer import check_layout
from opformer.models.surrogate import Surrogate

CHECKPOINT_FORMAT = "opformer-checkpoint"
CHECKPOINT_VERSION = 1


def _digest(value: Any, hasher: Any) -> None:
    """Feed a checkpoint payload into ``hasher`` in a canonical order (dict keys sorted, tensors by bytes)."""
    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous().reshape(-1)
        hasher.update(f"tensor {data.dtype} {tuple(value.shape)};".encode())
        hasher.update(data.view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        hasher.update(f"dict {len(value)};".encode())
        for key in sorted(value, key=str):
            hasher.update(f"{key!r}:".encode())
            _digest(value[key], hasher)
    elif isinstance(value, (list, tuple)):
        hasher.update(f"{type(value).__name__} {len(value)};".encode())
        for item in value:
            _digest(item, hasher)
    else:
        hasher.update(f"{type(value).__name__} {value!r};".encode())


def checksum(payload: dict[str, Any]) -> str:
    """SHA-256 of a checkpoint payload without its ``checksum`` entry."""
    hasher = hashlib.sha256()
    _digest({k: v for k, v in payload.items() if k != "checksum"}, hasher)
    return hasher.hexdigest()


def save_checkpoint(path: str | os.PathLike, surrogate: Surrogate, *, run_config: dict[str, Any],
                    epoch: int, history: list[dict[str, float]], best_val: float,
                    training_state: dict[str, Any] | None = None) -> Path:
    """Write weights, the surrogate spec, the run config, history and (optionally) optimiser/scheduler state.

    Written to a temporary file and renamed, so a killed process never leaves a partial checkpoint.
    """
    path = Path(path)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "spec": json.dumps(surrogate.spec),
        "run_config": json.dumps(run_config),
        "history": json.dumps(history),
        "epoch": int(epoch),
        "best_val": float(best_val),
        "state_dict": surrogate.state_dict(),
        "training_state": training_state or {},
    }
    payload["checksum"] = checksum(payload)
    size = sum(t.numel() * t.element_size() for t in _tensors(payload))
    with atomic_replace(path, size=size) as tmp:
        try:
            torch.save(payload, tmp)
        except RuntimeError as exc:  # torch's zip writer reports a failed write (e.g. a full disk) so
            raise StorageError(f"{path}: could not be written ({str(exc).splitlines()[0][:120]}); the previous "
                               "checkpoint is kept") from None
    return path


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a nested payload."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def load_weights(path: Path, what: str, hint: str = "") -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU: no code is unpickled, and torch's warnings on a foreign
    pickle are silenced (the one-line :class:`CheckpointError` says it all: ``what`` the file is, then ``hint``)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a corrupt or foreign file
        raise CheckpointError(f"{path}: not a readable {what} ({exc.__class__.__name__}){hint}") from None


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint safely and decode its JSON fields; one-line :class:`CheckpointError` if invalid."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint")
    payload = load_weights(path, "checkpoint")
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not an opformer checkpoint")
    if "checksum" in payload and payload["checksum"] != checksum(payload):
        raise CheckpointError(f"{path}: corrupt (its checksum does not match its contents)")
    try:
        for key in ("spec", "run_config", "history"):
            payload[key] = json.loads(payload[key])
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"{path}: corrupt (the entry {key!r} is missing or unreadable)") from None
    model = payload["spec"].get("model") if isinstance(payload["spec"], dict) else None
    if isinstance(model, dict) and isinstance(payload.get("state_dict"), dict):
        check_layout(str(model.get("name", "")), payload["state_dict"], "model.", str(path))
    return payload


def surrogate_of(payload: dict[str, Any], path: str | os.PathLike) -> Surrogate:
    """The surrogate a loaded checkpoint ``payload`` (read from ``path``) stores, rebuilt in eval mode."""
    try:
        surrogate = Surrogate.from_spec(payload["spec"])
        surrogate.load_state_dict(payload["state_dict"])
    except (ConfigError, RuntimeError, KeyError) as exc:
        raise CheckpointError(f"{path}: weights do not fit the stored model config "
                              f"({str(exc).splitlines()[0]})") from None
    return surrogate.eval()
