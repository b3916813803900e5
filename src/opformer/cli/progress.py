"""Progress of a command that works through a count of items (samples generated, converted): a tqdm bar on a
terminal, else a line on stdout (stderr keeps the one-line errors) at every tenth of the count and every
``interval`` seconds (from a timer, also while one long block of work has reported nothing), so that a log file
(nohup, a batch scheduler) shows the command is alive and when it will end."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

from opformer.train.progress import duration


class CountProgress:
    """Progress through ``total`` items of ``unit``, described by ``desc``; ``update(n)`` after each ``n`` done."""

    def __init__(self, total: int, desc: str, unit: str = "sample", stream: TextIO | None = None,
                 interval: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.desc, self.unit, self.interval, self.clock = total, desc, unit, interval, clock
        self.stream = stream or sys.stdout
        self.done = 0
        self.started = self.last_line = clock()
        self.next_tenth = 1
        self.bar: Any = None
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.timer: threading.Thread | None = None
        if self.stream.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream)

    def update(self, n: int) -> None:
        """Count ``n`` more items done; print a line when a tenth of the count or ``interval`` seconds have passed."""
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            return
        tenth = self.done * 10 // max(self.total, 1)
        if tenth >= self.next_tenth:
            self.next_tenth = tenth + 1
            self.print_line()

    def print_line(self) -> None:
        """Print the progress line now."""
        with self.lock:
            self.last_line = self.clock()
            print(self.line(self.last_line), file=self.stream, flush=True)

    def _tick(self) -> None:
        """The timer: a line whenever ``interval`` seconds have passed since the last one."""
        while not self.finished.wait(max(0.0, self.last_line + self.interval - self.clock())):
            if self.clock() - self.last_line >= self.interval:
                self.print_line()

    def line(self, now: float) -> str:
        """``desc: done/total unit (percent), elapsed, ETA``."""
        elapsed = now - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        eta = f", ETA {duration(left)}" if self.done and self.done < self.total else ""
        return (f"{self.desc}: {self.done}/{self.total} {self.unit}s ({100 * self.done / max(self.total, 1):.0f}%), "
                f"{duration(elapsed)}{eta}")

    def __enter__(self) -> CountProgress:
        if self.bar is None:
            self.timer = threading.Thread(target=self._tick, daemon=True)
            self.timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.finished.set()
        if self.timer is not None:
            self.timer.join()
        if self.bar is not None:
            self.bar.close()
