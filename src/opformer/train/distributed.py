"""Data-parallel training across processes started by ``torchrun``: which process this is, its slice of every
global batch, sums over all processes, and a one-line stop of the whole job when one process fails.

A run started by ``torchrun`` (``WORLD_SIZE > 1`` in the environment) joins a process group (gloo on the CPU,
NCCL on CUDA); any other run is a world of one, where every method here does nothing, so a plain run is
exactly what it was before data parallelism existed.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from opformer.errors import ConfigError, OpformerError
from opformer.runtime import resolve_device

#: How long a collective waits for the other processes before the job fails (instead of hanging).
TIMEOUT = timedelta(minutes=10)

#: What a collective says when another process has gone.
BROKEN = re.compile(r"[Cc]onnection (reset|closed)|[Bb]roken pipe|gloo|NCCL")


def rows(n: int, rank: int, world: int) -> slice:
    """The contiguous rows of ``rank`` among ``n``: sizes differ by at most one, the first ranks get the extra."""
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (rank < extra))


def check_batch(batch_size: int, world: int) -> None:
    """A global batch must split evenly over ``world`` processes (a one-line :class:`ConfigError`)."""
    if batch_size % world:
        raise ConfigError(f"train.batch_size: {batch_size} does not split over {world} processes; give a "
                          f"multiple of {world} (it is the global batch, the same for any number of processes)")


@dataclass(frozen=True)
class Part:
    """This process's rows ``[start, stop)`` of a global batch of ``size`` samples. A ``dummy`` part stands in
    for a process without rows in an uneven last batch: it computes the first row with weight 0, so that
    every process takes part in the gradient's all-reduce."""

    start: int
    stop: int
    size: int
    dummy: bool = False

    @property
    def share(self) -> float:
        """Fraction of the global batch this part carries (0 for a dummy)."""
        return 0.0 if self.dummy else (self.stop - self.start) / self.size


def normal(shape: torch.Size | tuple[int, ...], generator: torch.Generator | None,
           part: Part | None = None) -> torch.Tensor:
    """``N(0, 1)`` of ``shape`` (a batch's); with ``part``, its rows of the draw for the whole global batch, so
    every process draws the same numbers and a sample's noise does not depend on the number of processes."""
    if part is None:
        return torch.randn(shape, generator=generator)
    return torch.randn((part.size, *shape[1:]), generator=generator)[part.start:part.stop]


@dataclass
class Context:
    """Where this process stands in the job: ``rank`` of ``world`` processes, its ``device``."""

    device: torch.device
    rank: int = 0
    world: int = 1

    @classmethod
    def local(cls, device: str = "auto") -> Context:
        """A world of this process alone on ``device`` (``auto | cpu | cuda | cuda:N``)."""
        return cls(resolve_device(device))

    @property
    def is_main(self) -> bool:
        """Whether this process writes the run directory (rank 0)."""
        return self.rank == 0

    def barrier(self) -> None:
        """Wait for every process."""
        if self.world > 1:
            dist.barrier()

    def sum(self, *values: float) -> list[float]:
        """Each value summed over all processes (float64)."""
        if self.world == 1:
            return [float(v) for v in values]
        total = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(total)
        return total.tolist()

    def mean(self, values: torch.Tensor) -> float:
        """Mean of ``values`` over every process's elements (each process holds its own shard)."""
        if self.world == 1:
            return float(values.mean())
        total, count = self.sum(values.double().sum().item(), values.numel())
        return total / count

    def rows(self, n: int) -> slice:
        """This process's rows of ``n`` (a validation split)."""
        return rows(n, self.rank, self.world)

    def share(self, size: int) -> tuple[slice, Part]:
        """This process's contiguous rows of a global batch of ``size`` (a process without rows takes the first
        row as a dummy part of weight 0), and where they lie in it."""
        mine = self.rows(size)
        if mine.start == mine.stop:
            return slice(0, 1), Part(0, 1, size, dummy=True)
        return mine, Part(mine.start, mine.stop, size)

    def shard(self, batch: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], Part]:
        """This process's contiguous rows of a global batch, and where they lie in it."""
        mine, part = self.share(batch[0].shape[0])
        return (batch if self.world == 1 else tuple(t[mine] for t in batch)), part

    def reduce_tensor(self, values: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """``values`` (on this process's device) reduced over all processes (``sum`` or ``min``), in place."""
        if self.world > 1:
            dist.all_reduce(values, op={"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN}[op])
        return values

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        """``module`` in DistributedDataParallel (itself in a world of one)."""
        if self.world == 1:
            return module
        ids = [self.device.index] if self.device.type == "cuda" else None
        # the buffers (normalizers) are fitted alike in every process: no broadcast before each forward
        options = inspect.signature(DistributedDataParallel).parameters
        quiet = {"forward_sync_buffers": False} if "forward_sync_buffers" in options else {"broadcast_buffers": False}
        return DistributedDataParallel(module, device_ids=ids, **quiet)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [exc.__class__.__name__])[0][:200]


@contextmanager
def session(device: str) -> Iterator[Context]:
    """The :class:`Context` of this process on ``device`` (``auto | cpu | cuda | cuda:N``).

    Under ``torchrun`` (``WORLD_SIZE > 1``) this joins the process group from the environment (``RANK``,
    ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), each process on CUDA device
    ``LOCAL_RANK`` when ``device`` names no index. An exception in a process prints ``rank R: <error>`` and
    ends the process at once with a non-zero code, which makes ``torchrun`` stop the others; collectives
    time out after :data:`TIMEOUT`, so a lost process never hangs the job.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        yield Context.local(device)
        return
    rank = int(os.environ.get("RANK", "0"))
    try:
        where = resolve_device(device)
        if where.type == "cuda" and where.index is None:
            where = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        if where.type == "cuda":
            torch.cuda.set_device(where)
        dist.init_process_group("nccl" if where.type == "cuda" else "gloo", timeout=TIMEOUT)
        yield Context(where, rank, world)
        dist.barrier()
        dist.destroy_process_group()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        broken = isinstance(exc, dist.DistError) or BROKEN.search(str(exc)) is not None
        reason = "stopped: another process failed" if broken else _first_line(exc)
        print(f"opformer train: error: rank {rank}: {reason}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(2 if isinstance(exc, OpformerError) else 1)
