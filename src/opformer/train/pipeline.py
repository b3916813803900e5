"""The batch pipeline of the trainer: an epoch's plan of global batches made into this process's batches on the
training device, with the step's random numbers.

Where the training data live:
- on the CPU, batches are indexed from the split as before;
- on CUDA, a split that fits the device budget (``data.device_memory_gb``; by default a quarter of the
  device's memory) is put on the device once and batches are indexed there (no copy per step);
- otherwise each batch is made on the host, pinned, and copied to the device on a side stream one batch ahead
  of the step that uses it (``non_blocking``), so the copy overlaps the previous step.

The plan (the epoch's order, windows and mixture draws) and every step's noise come from the epoch's CPU
generator in the same order on any device and in any number of processes, so the same seed gives the same
batches on CPU and CUDA, and a process builds only its own rows of each global batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from opformer.train.distributed import Context, Part
from opformer.train.strategies import StepDraws
from opformer.train.tasks import Task

#: the share of a CUDA device's memory a training split may take when ``data.device_memory_gb`` is not set
DEVICE_SHARE = 0.25


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

    def __init__(self, task: Task, context: Context, device_memory_gb: float | None = None) -> None:
        self.task, self.context, self.device = task, context, context.device
        self.resident = self.device.type == "cpu" or task.train_nbytes() <= device_budget(self.device,
                                                                                            device_memory_gb)
        if self.resident and self.device.type != "cpu":
            task.train_to(self.device)
        self.stream = None if self.resident else torch.cuda.Stream(self.device)

    @property
    def where(self) -> str:
        """Where the batches come from, for the log ("" on the CPU, where nothing changed)."""
        if self.device.type == "cpu":
            return ""
        if self.resident:
            return f"training data on {self.device} ({self.task.train_nbytes() / 2**20:.0f} MiB)"
        return "training data on the host, batches copied ahead on a side stream"

    def epoch(self, epoch: int, generator: torch.Generator) -> Iterator[Batch]:
        """The epoch's batches in order; the plan is drawn first, then each step's random numbers as it comes."""
        plan = self.task.plan(epoch, generator)
        shares = [self.context.share(len(index)) for index in plan]
        fetched = self._fetched(index[rows] for index, (rows, _) in zip(plan, shares))
        for index, (_, part), tensors in zip(plan, shares, fetched):
            draws = self.task.draw(part, epoch, generator)
            yield Batch(tensors, draws if self.device.type == "cpu" else draws.to(self.device), part, len(index))

    def _fetched(self, indices: Iterator[torch.Tensor]) -> Iterator[tuple[torch.Tensor, ...]]:
        """The batches of ``indices`` on the device, the next one's copy issued before this one is handed out."""
        if self.stream is None:
            yield from (self.task.fetch(index) for index in indices)
            return
        ahead = None
        for index in indices:
            copied = self._copy(self.task.fetch(index))
            if ahead is not None:
                yield self._ready(*ahead)
            ahead = copied
        if ahead is not None:
            yield self._ready(*ahead)

    def _copy(self, host: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], torch.cuda.Event]:
        """Pin a host batch and copy it to the device on the side stream; the event marks the copy's end."""
        with torch.cuda.stream(self.stream):
            tensors = tuple(t.pin_memory().to(self.device, non_blocking=True) for t in host)
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
