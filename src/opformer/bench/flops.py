"""FLOP counts of a step (``torch.utils.flop_counter``) and the machine's measured matmul peak."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode


def count_flops(step: Callable[[], object]) -> int:
    """Floating-point operations of one call of ``step``, as counted by ``FlopCounterMode``.

    Counts matrix products (mm, bmm, addmm, baddbmm, einsum/matmul lowered to them), convolutions and
    attention kernels, forward and backward, with a multiply-add as 2 FLOPs; FFTs and element-wise
    operations are not counted.
    """
    with FlopCounterMode(display=False) as counter:
        step()
    return int(counter.get_total_flops())


def matmul_peak(threads: int, size: int = 2048, repeats: int = 5, device: str = "cpu") -> float:
    """FLOP/s of the fastest of ``repeats`` float32 ``size x size`` matrix products on ``threads`` threads.

    The thread count of the process is restored afterwards.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a = torch.randn(size, size, device=device)
        b = torch.randn(size, size, device=device)
        best = float("inf")
        for _ in range(repeats + 1):  # the first product warms up the allocator and BLAS
            if device != "cpu":
                torch.cuda.synchronize()
            start = time.perf_counter()
            torch.mm(a, b)
            if device != "cpu":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
        return 2.0 * size**3 / best
    finally:
        torch.set_num_threads(previous)
