"""The batch pipeline of the trainer: an epoch's plan of global batches made into this process's batches on the
training device, with the step's random numbers.

Where the training data live:
- on the CPU, batches are indexed from the split as before;
- on CUDA, a split that fits the device budget (``data.device_memory_gb``; by default a quarter of the
  device's memory) is put on the device once and batches are indexed there (no copy per step);
- otherwise each batch is made on the host, pinned, and copied to the device on a side stream one batch ahead
  of the step that uses it (``non_blocking``), so the copy overlaps the previous step;
- a training split larger than ``data.memory_gb`` is read from disk a batch at a time
  (:mod:`opformer.data.streaming`), by ``data.workers`` worker processes (torch's ``DataLoader``, batches made
  ahead and in order, pinned for CUDA), each process of a data-parallel run reading only its rows.

The plan (the epoch's order, windows and mixture draws) and every step's noise come from the epoch's CPU
generator in the same order on any device and in any number of processes, so the same seed gives the same
batches on CPU and CUDA, and a process builds only its own rows of each global batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset

from opformer.data.streaming import worker_count
from opformer.processes import exit_with_parent
from opformer.train.distributed import Context, Part
from opformer.train.strategies import StepDraws
from opformer.train.tasks import Task

#: the share of a CUDA device's memory a training split may take when ``data.device_memory_gb`` is not set
DEVICE_SHARE = 0.25
#: batches each loader worker prepares ahead of the step
PREFETCH = 2


def _exit_with_trainer(worker: int) -> None:
    """In a loader worker: end the process within a second of its trainer's death (torch's own check takes up
    to 5 s, and a worker blocked on a full queue never makes it)."""
    exit_with_parent()


class _Batches(Dataset):
    """An epoch's batches of a streamed split, as a map-style data set of batches (one per index tensor)."""

    def __init__(self, task: Task, indices: list[torch.Tensor]) -> None:
        self.task, self.indices = task, indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: int) -> tuple[torch.Tensor, ...]:
        return self.task.fetch(self.indices[k])


@dataclass
class Batch:
    """One step's work for this process: its rows of a global batch (on the device), the step's random numbers,
    where the rows lie in the global batch and its size."""

    tensors: tuple[torch.Tensor, ...]
    draws: StepDraws
    part: Part
    size: int


def device_budget(device: torch.device, gigabytes: float | None) -> int:
    """Bytes of training data that may live on ``device`` (0 on the CPU, where the data stay as they are)."""
    if device.type != "cuda":
        return 0
    if gigabytes is not None:
        return int(gigabytes * 2**30)
    return int(DEVICE_SHARE * torch.cuda.get_device_properties(device).total_memory)


class Pipeline:
    """This process's batches of every epoch of ``task`` on ``context.device``."""

    def __init__(self, task: Task, context: Context, device_memory_gb: float | None = None, workers: int = 0) -> None:
        self.task, self.context, self.device = task, context, context.device
        self.workers = worker_count(workers) if task.streamed else 0
        self.resident = self.device.type == "cpu" or (
            not task.streamed and task.train_nbytes() <= device_budget(self.device, device_memory_gb))
        if self.resident and self.device.type != "cpu":
            task.train_to(self.device)
        self.stream = None if self.resident else torch.cuda.Stream(self.device)

    @property
    def where(self) -> str:
        """Where the batches come from, for the log ("" on the CPU, where nothing changed)."""
        streamed = f"training data read from disk per batch by {self.workers or 'no'} worker processes"
        if self.device.type == "cpu":
            return streamed if self.task.streamed else ""
        if self.task.streamed:
            return f"{streamed}, copied ahead on a side stream"
        if self.resident:
            return f"training data on {self.device} ({self.task.train_nbytes() / 2**20:.0f} MiB)"
        return "training data on the host, batches copied ahead on a side stream"

    def epoch(self, epoch: int, generator: torch.Generator) -> Iterator[Batch]:
        """The epoch's batches in order; the plan is drawn first, then each step's random numbers as it comes."""
        plan = self.task.plan(epoch, generator)
        shares = [self.context.share(len(index)) for index in plan]
        fetched = self._fetched(self._made([index[rows] for index, (rows, _) in zip(plan, shares)]))
        first = epoch * self.task.steps_per_epoch()  # the run's optimiser steps before this epoch
        for k, (index, (_, part), tensors) in enumerate(zip(plan, shares, fetched)):
            draws = self.task.draw(part, epoch, generator, first + k)
            yield Batch(tensors, draws if self.device.type == "cpu" else draws.to(self.device), part, len(index))

    def _made(self, indices: list[torch.Tensor]) -> Iterator[tuple[torch.Tensor, ...]]:
        """The batches of ``indices`` where the data are (in this process), or from a streamed split by worker
        processes, a few batches ahead and in order (torch's ``DataLoader``; pinned for a CUDA device)."""
        if not self.workers:
            return (self.task.fetch(index) for index in indices)
        # its own generator: the workers' seeds are not drawn from the global RNG, which dropout uses
        loader = DataLoader(_Batches(self.task, indices), batch_size=None, num_workers=self.workers,
                            pin_memory=self.device.type == "cuda", prefetch_factor=PREFETCH,
                            generator=torch.Generator(), worker_init_fn=_exit_with_trainer)
        return iter(loader)

    def _fetched(self, batches: Iterator[tuple[torch.Tensor, ...]]) -> Iterator[tuple[torch.Tensor, ...]]:
        """The batches on the device, the next one's copy issued before this one is handed out."""
        if self.stream is None:
            yield from batches
            return
        ahead = None
        for batch in batches:
            copied = self._copy(batch)
            if ahead is not None:
                yield self._ready(*ahead)
            ahead = copied
        if ahead is not None:
            yield self._ready(*ahead)

    def _copy(self, host: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], torch.cuda.Event]:
        """Pin a host batch and copy it to the device on the side stream; the event marks the copy's end."""
        with torch.cuda.stream(self.stream):
            tensors = tuple((t if t.is_pinned() else t.pin_memory()).to(self.device, non_blocking=True) for t in host)
            event = torch.cuda.Event()
            event.record(self.stream)
        return tensors, event

    def _ready(self, tensors: tuple[torch.Tensor, ...], event: torch.cuda.Event) -> tuple[torch.Tensor, ...]:
        """The copied batch, once the step's stream has waited for its copy (and the allocator knows that
        stream uses it)."""
        current = torch.cuda.current_stream(self.device)
        current.wait_event(event)
        for t in tensors:
            t.record_stream(current)
        return tensors
