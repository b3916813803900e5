"""Running a solver on several threads so that it stops when asked: :func:`thread_map` hands every call a
``stop`` event, which the time-stepping loops poll once a step (:func:`check_stop`); when the caller is
interrupted (Ctrl-C, SIGTERM) the running calls stop within one step, instead of the pool waiting for whole
chunks (minutes to hours at default sizes). Worker processes that end with their parent:
:mod:`opformer.processes`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Stopped(Exception):
    """A solver call was told to stop (its caller was interrupted)."""


def check_stop(stop: threading.Event | None) -> None:
    """Raise :class:`Stopped` if ``stop`` is set (called once per time step)."""
    if stop is not None and stop.is_set():
        raise Stopped


def thread_imap(function: Callable[[Item, threading.Event], Result], items: Sequence[Item], workers: int,
                stop: threading.Event | None = None) -> Iterator[Result]:
    """``function(item, stop)`` for each item on ``workers`` threads, yielded in order as they finish.

    If the caller is interrupted while it waits (or a call raises), ``stop`` is set and the pool is shut down
    once the running calls have noticed it; queued calls never start. A ``stop`` given by the caller (an
    enclosing pool's) is passed on, so nested calls stop too.
    """
    stop = stop or threading.Event()
    if workers <= 1 or len(items) <= 1:
        yield from (function(item, stop) for item in items)
        return
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(function, item, stop) for item in items]
        for future in futures:
            yield future.result()
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def thread_map(function: Callable[[Item, threading.Event], Result], items: Sequence[Item], workers: int,
               stop: threading.Event | None = None) -> list[Result]:
    """The results of :func:`thread_imap` as a list."""
    return list(thread_imap(function, items, workers, stop))

