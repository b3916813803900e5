"""Checkpoints: written atomically, loaded with ``torch.load(weights_only=True)`` (no code unpickled)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from opformer.errors import CheckpointError, ConfigError
from opformer.io import atomic_replace
from opformer.models.surrogate import Surrogate

CHECKPOINT_FORMAT = "opformer-checkpoint"
CHECKPOINT_VERSION = 1


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
    with atomic_replace(path) as tmp:
        torch.save(payload, tmp)
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint safely and decode its JSON fields; one-line :class:`CheckpointError` if invalid."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a corrupt or foreign file
        raise CheckpointError(f"{path}: not a readable checkpoint ({exc.__class__.__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not an opformer checkpoint")
    for key in ("spec", "run_config", "history"):
        payload[key] = json.loads(payload[key])
    return payload


def load_surrogate(path: str | os.PathLike) -> tuple[Surrogate, dict[str, Any]]:
    """Rebuild the surrogate stored in a checkpoint (in eval mode) and return it with the checkpoint."""
    payload = load_checkpoint(path)
    try:
        surrogate = Surrogate.from_spec(payload["spec"])
        surrogate.load_state_dict(payload["state_dict"])
    except (ConfigError, RuntimeError, KeyError) as exc:
        raise CheckpointError(f"{path}: weights do not fit the stored model config "
                              f"({str(exc).splitlines()[0]})") from None
    return surrogate.eval(), payload
