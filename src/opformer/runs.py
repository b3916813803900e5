"""The run directory: what a training run writes, and how every command reads it back.

::

    RUN/config.yaml    the resolved run config (every default filled in)
    RUN/metrics.csv    one row per epoch: epoch, train_loss, val_relative_l2 (a mixture: then val_<member>
                       for each member), lr, seconds
    RUN/best.pt        the checkpoint of the lowest validation error (weights, spec, config, history)
    RUN/last.pt        the latest checkpoint, with optimiser and scheduler state (for ``--resume``)
    RUN/summary.json   epochs, best epoch and validation error, parameters, time
    RUN/run.json       one entry per training session: command line, versions, git commit, device, threads,
                       data-parallel processes,
                       start and end times, epochs trained (an entry without an end is a killed session);
                       a run written by ``opformer import`` has one entry for the import instead (its source)
    RUN/train.log      time-stamped progress lines (opformer.train.progress)
    RUN/tensorboard/   scalars, if the optional tensorboard package is installed

Checkpoints are written atomically and loaded with ``torch.load(weights_only=True)`` (no code unpickled); each
carries a SHA-256 checksum of everything it holds (tensor bytes included), verified on load, so a flipped bit
is an error instead of a silently different model. Checkpoints written before checksums load unverified.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import yaml

from opformer import __version__
from opformer.config import RunConfig, config_from_dict, config_to_dict, safe_load_yaml
from opformer.errors import CheckpointError, ConfigError, StorageError
from opformer.io import atomic_replace, read_json, write_atomic
from opformer.models.factformer import check_layout
from opformer.models.surrogate import Surrogate

CHECKPOINT_FORMAT = "opformer-checkpoint"
CHECKPOINT_VERSION = 1
CONFIG, METRICS, SUMMARY, SESSIONS = "config.yaml", "metrics.csv", "summary.json", "run.json"


def load_run_config(run_dir: str | os.PathLike) -> RunConfig:
    """The resolved config stored in a run directory."""
    path = Path(run_dir) / CONFIG
    if not path.is_file():
        raise CheckpointError(f"{run_dir}: no {CONFIG} (not a run directory)")
    return config_from_dict(safe_load_yaml(path.read_text()))


def write_run_config(run_dir: Path, config: RunConfig) -> None:
    """Store the resolved run config (atomically)."""
    write_atomic(run_dir / CONFIG, yaml.safe_dump(config_to_dict(config), sort_keys=False))


def metrics_csv(history: list[dict[str, float]]) -> str:
    """The per-epoch metrics as CSV text: the columns of the latest epoch, then any only older epochs have; a
    column an epoch lacks (a mixture run's member errors in epochs recorded before they were) is empty."""
    out = io.StringIO()
    if history:
        columns = list(dict.fromkeys(key for record in reversed(history) for key in record))
        writer = csv.DictWriter(out, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(history)
    return out.getvalue()


def write_metrics(run_dir: Path, history: list[dict[str, float]]) -> None:
    """Store the per-epoch metrics (atomically)."""
    write_atomic(run_dir / METRICS, metrics_csv(history))


def finite_json(value: Any) -> Any:
    """``value`` with every non-finite float, at any depth, as ``None`` (for strict JSON: null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    """Store the run summary (atomically) as strict JSON: a NaN or infinite number is written as null."""
    write_atomic(run_dir / SUMMARY, json.dumps(finite_json(summary), indent=2, allow_nan=False) + "\n")


def _git_commit() -> str | None:
    """The commit of the opformer source tree if it is a git checkout (``+dirty`` with local changes)."""
    source = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no", "."],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "") if commit else None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def recorded_sessions(run_dir: Path) -> list[Any]:
    """The sessions recorded in a run's ``run.json``; none where it is absent or damaged (by hand: a damaged record
    is started afresh rather than refusing to train or export)."""
    record = read_json(run_dir / SESSIONS)
    sessions = record.get("sessions") if isinstance(record, dict) else None
    return sessions if isinstance(sessions, list) else []


def start_session(run_dir: Path, device: str, first_epoch: int, processes: int = 1) -> list[dict[str, Any]]:
    """Record a new training session in ``run.json`` (command, versions, commit, device, threads, data-parallel
    processes, start)."""
    path = run_dir / SESSIONS
    sessions = recorded_sessions(run_dir)
    sessions.append({**_provenance(), "device": device, "threads": torch.get_num_threads(), "processes": processes,
                     "started": _now(), "ended": None, "first_epoch": first_epoch + 1, "last_epoch": None})
    write_atomic(path, json.dumps({"sessions": sessions}, indent=2) + "\n")
    return sessions


def _provenance() -> dict[str, Any]:
    """What every record in ``run.json`` says of the process that wrote it: command line and versions."""
    return {"command": shlex.join(sys.argv), "opformer": __version__, "git_commit": _git_commit(),
            "torch": torch.__version__, "python": sys.version.split()[0]}


def record_import(run_dir: Path, imported: dict[str, Any], sessions: list[dict[str, Any]] | None = None) -> None:
    """``run.json`` of a run that ``opformer import`` wrote: ``sessions`` (the training sessions of an exported
    opformer run; none for foreign weights), then one record of the import (command, versions, and
    ``imported``: the format, the source and its SHA-256)."""
    now = _now()
    record = {**_provenance(), "started": now, "ended": now, "imported": imported}
    write_atomic(run_dir / SESSIONS, json.dumps({"sessions": [*(sessions or []), record]}, indent=2) + "\n")


def import_record(run_dir: Path) -> dict[str, Any] | None:
    """The ``imported`` record of a run that ``opformer import`` wrote (in ``summary.json``; an exported opformer
    run keeps its own run config, so this says that its weights were not trained in this folder), else None."""
    summary = read_json(run_dir / SUMMARY)
    record = summary.get("imported") if isinstance(summary, dict) else None
    return record if isinstance(record, dict) else None


def end_session(run_dir: Path, sessions: list[dict[str, Any]], last_epoch: int) -> None:
    """Stamp the end time and the last epoch trained on the current session in ``run.json``."""
    sessions[-1].update(ended=_now(), last_epoch=last_epoch)
    write_atomic(run_dir / SESSIONS, json.dumps({"sessions": sessions}, indent=2) + "\n")


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the run directory (created if absent) while training writes it.

    A second writer is refused with a one-line error. The lock is the kernel's ``flock`` on the folder
    itself: it leaves no file behind and dies with its process, so a killed run never leaves a stale lock.
    Where ``fcntl`` does not exist (Windows) the run is not locked.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CheckpointError(f"{run_dir}: another opformer process is writing this run; wait for it or "
                                  "choose another folder") from None
        _LOCKS.add(fd)
        yield
    finally:
        _LOCKS.discard(fd)
        os.close(fd)  # releases the lock


#: descriptors of the run locks this process holds
_LOCKS: set[int] = set()


def _drop_inherited_locks() -> None:
    """In a forked child (a data-loader worker): close its copies of the parent's lock descriptors, so that the
    lock dies with the process that took it, not with the last of its children."""
    for fd in _LOCKS:
        try:
            os.close(fd)
        except OSError:
            pass
    _LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_inherited_locks)


def check_fresh(run_dir: Path) -> None:
    """A new run goes into an absent or empty folder, never over a run or other files."""
    if (run_dir / CONFIG).exists():
        raise CheckpointError(f"{run_dir}: already holds a run; resume it or choose another folder")
    if run_dir.is_dir() and any(run_dir.iterdir()):
        raise CheckpointError(f"{run_dir}: is not empty and holds no run; choose an empty or new folder")


def run_checkpoint(run_dir: str | os.PathLike, which: str = "best") -> Path:
    """Path of a run directory's ``best`` or ``last`` checkpoint, with a clear error if absent."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"{run_dir}: no such run directory")
    path = run_dir / f"{which}.pt"
    if not path.is_file():
        raise CheckpointError(f"{run_dir}: holds no {which}.pt (did training finish an epoch?)")
    return path


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


def load_checkpoint_surrogate(path: str | os.PathLike) -> tuple[Surrogate, dict[str, Any]]:
    """Rebuild the surrogate stored in a checkpoint (in eval mode) and return it with the checkpoint."""
    payload = load_checkpoint(path)
    try:
        surrogate = Surrogate.from_spec(payload["spec"])
        surrogate.load_state_dict(payload["state_dict"])
    except (ConfigError, RuntimeError, KeyError) as exc:
        raise CheckpointError(f"{path}: weights do not fit the stored model config "
                              f"({str(exc).splitlines()[0]})") from None
    return surrogate.eval(), payload
