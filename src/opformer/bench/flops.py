"""FLOP counts of a step (``torch.utils.flop_counter``), the time its matrix products take, and the machine's
measured matmul peak."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

#: the ATen matrix-product kernels (what ``matmul``, ``einsum`` and ``Linear`` lower to, forward and backward)
PRODUCT_OPS = frozenset(f"aten::{name}" for name in (
    "mm", "bmm", "addmm", "addmm_", "baddbmm", "baddbmm_", "addbmm", "addbmm_", "mv", "addmv", "addmv_", "dot",
    "vdot", "addr"))


def count_flops(step: Callable[[], object]) -> int:
    """Floating-point operations of one call of ``step``, as counted by ``FlopCounterMode``.

    Counts matrix products (mm, bmm, addmm, baddbmm, einsum/matmul lowered to them), convolutions and
    attention kernels, forward and backward, with a multiply-add as 2 FLOPs; FFTs and element-wise
    operations are not counted.
    """
    with FlopCounterMode(display=False) as counter:
        step()
    return int(counter.get_total_flops())


def product_share(step: Callable[[], object], repeats: int = 5) -> float:
    """The fraction of one call of ``step`` spent inside matrix-product kernels on the CPU: the self time of the
    :data:`PRODUCT_OPS` under ``torch.profiler`` over the wall time of the same profiled call (the median of
    ``repeats`` calls; a share of one call, so a change of the machine's load between calls cancels).

    Times the step's median, this is its floor for a given formulation and BLAS: the rest (element-wise work,
    copies, the optimizer, Python) could in principle be fused away, the products could not. The profiler adds
    a few microseconds per operator outside the products, so the share is, if anything, too low.
    """
    shares = []
    for _ in range(repeats):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            step()
            wall = time.perf_counter() - start
        products = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in PRODUCT_OPS) / 1e6
        shares.append(products / wall)
    return statistics.median(shares)


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
