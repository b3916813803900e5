"""Worker processes that die with their parent: :func:`exit_with_parent` makes a worker end itself once the
process that started it is gone (however it died, even by ``kill -9``), so no solver, loader or training
process is left running with nobody to read its results."""

from __future__ import annotations

import os
import threading


def _watch_parent(parent: int, interval: float) -> None:
    while os.getppid() == parent:
        threading.Event().wait(interval)
    os._exit(1)  # the parent died (its children are re-parented): nobody will read our results


def exit_with_parent(interval: float = 1.0, parent: int | None = None) -> threading.Thread:
    """Start a daemon thread in this worker process that ends the process once its parent has gone.

    ``interval``: seconds between checks. ``parent``: the process id to outlive no longer (default: this
    process's parent now; give the starter's id when it may already be gone by the time the worker runs).
    Returns the watching thread.
    """
    parent = os.getppid() if parent is None else parent
    watcher = threading.Thread(target=_watch_parent, args=(parent, interval), daemon=True)
    watcher.start()
    return watcher
