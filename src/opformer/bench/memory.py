"""Peak bytes of live tensors on the host: the CPU counterpart of ``torch.cuda.max_memory_allocated``.

A process's peak resident set depends on the C allocator (glibc keeps or returns freed blocks; the trainer
asks it to keep them, :mod:`opformer.runtime`), so it is an upper bound on what a model needs. This
module counts what the model itself holds: every tensor allocation and free that torch's CPU allocator
reports to the profiler (``profile_memory``), summed in time order; the peak of that sum is the most tensor
memory alive at once. Allocations made before tracking started are not counted.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from types import TracebackType

from torch.profiler import ProfilerActivity, profile


class TensorMemoryTracker:
    """Context manager; after it exits, ``peak_bytes`` holds the peak of tensor bytes allocated inside it.

    >>> with TensorMemoryTracker() as tracker:
    ...     x = torch.empty(1000)          # 4000 bytes
    ...     del x
    >>> tracker.peak_bytes
    4000

    Profiling slows the tracked code down: track untimed steps, and time others.
    """

    def __init__(self) -> None:
        self._profile = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        self.peak_bytes = 0

    def __enter__(self) -> TensorMemoryTracker:
        self._profile.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._profile.__exit__(kind, value, traceback)
        if kind is None:
            self.peak_bytes = peak_of_changes(
                (event.start_ns(), event.nbytes()) for event in self._profile.profiler.kineto_results.events()
                if event.name() == "[memory]" and event.device_type().name == "CPU")


def peak_of_changes(changes: Iterable[tuple[int, int]]) -> int:
    """The largest running total of ``(time, signed bytes)`` changes taken in time order (0 if never above)."""
    ordered = sorted(changes)
    return max(itertools.accumulate((nbytes for _, nbytes in ordered), initial=0))
