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

The checkpoint format is :mod:`opformer.runs.checkpoint`; :class:`opformer.runs.Run` reads a run back.
"""

from __future__ import annotations

import csv
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
from opformer.config import RunConfig, config_to_dict
from opformer.errors import CheckpointError
from opformer.io import read_json, write_atomic

CONFIG, METRICS, SUMMARY, SESSIONS = "config.yaml", "metrics.csv", "summary.json", "run.json"
#: A run's stored calibration (:mod:`opformer.trust`).
CALIBRATION = "calibration.pt"


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


