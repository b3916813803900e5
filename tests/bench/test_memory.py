"""Tensor memory tracking: the peak of live tensor bytes from the profiler's allocation events."""

from __future__ import annotations

import torch

from opformer.bench.memory import TensorMemoryTracker, peak_of_changes


def test_tensor_memory_tracker_counts_live_bytes_at_the_peak():
    before = torch.ones(10_000)  # allocated before tracking: its free is not counted
    with TensorMemoryTracker() as tracker:
        a = torch.empty(1000, 1000)  # 4e6 bytes
        b = torch.empty(250, 1000)  # 1e6
        del a, before
        c = torch.empty(500, 1000)  # 2e6: the total falls to 1e6, rises to 3e6
    del b, c
    assert tracker.peak_bytes == 5_000_000
    assert peak_of_changes([(3, -5), (1, 4), (2, 3), (4, 1)]) == 7
    assert peak_of_changes([]) == 0
