"""One training step on the device, eager or replayed as a captured CUDA graph, and the device-side record of
the losses that the loop reads only at its log points.

A step is forward, loss, backward, gradient clipping and the optimiser's update. It reads nothing back to the
host: the batch's loss is added to a sum kept on the device (:class:`LossMeter`), beside the first step whose
loss was not finite, and the trainer reads that record at its log points (every ``train.log_every`` steps and
at the end of an epoch) in one transfer. A divergence between two reads is caught at the next read: the run
stops there with the epoch, step and value of the first non-finite loss; the updates made after it are never
saved, since checkpoints are written only after a read that found every loss finite.

With ``train.cuda_graphs`` the step is captured once per shape of step (:attr:`StepDraws.key` and the batch's
rows) as a CUDA graph and replayed: one launch in place of about a thousand. The optimiser then runs
capturable (its learning rate and betas live in device tensors that the schedule writes into between steps), a
step of another batch size (the last, partial batch of an epoch) runs eagerly, and the first
:data:`WARMUP_STEPS` steps of every shape run eagerly on a side stream before it is captured, as PyTorch's
whole-network capture requires (they are ordinary training steps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from opformer.errors import ConfigError
from opformer.runtime import autocast
from opformer.train.strategies import StepDraws

#: eager steps of each shape before it is captured (CUDA graphs)
WARMUP_STEPS = 2

LossFunction = Callable[[tuple[torch.Tensor, ...], StepDraws], torch.Tensor]


class LossMeter:
    """The sum of ``loss x samples`` of an epoch's steps and the first non-finite loss (its step and value), kept
    on the device: adding is a few device operations and no host read."""

    def __init__(self, device: torch.device) -> None:
        self.total = torch.zeros((), dtype=torch.float64, device=device)
        self.first_bad = torch.full((), -1, dtype=torch.int64, device=device)
        self.bad_value = torch.zeros((), dtype=torch.float64, device=device)
        self.steps = torch.zeros((), dtype=torch.int64, device=device)

    def reset(self) -> None:
        """Start an epoch (in place: captured steps keep adding to the same tensors)."""
        self.total.zero_()
        self.first_bad.fill_(-1)
        self.bad_value.zero_()
        self.steps.zero_()

    def add(self, loss: torch.Tensor, samples: float) -> None:
        """Record one step's loss (a 0-d tensor) of ``samples`` samples."""
        value = loss.detach().double()
        bad = ~torch.isfinite(value) & (self.first_bad < 0)
        self.first_bad.copy_(torch.where(bad, self.steps, self.first_bad))
        self.bad_value.copy_(torch.where(bad, value, self.bad_value))
        self.total.add_(value * samples)
        self.steps.add_(1)

    def values(self) -> torch.Tensor:
        """``(total, first bad step or -1, its value)`` as one float64 tensor on the device."""
        return torch.stack([self.total, self.first_bad.double(), self.bad_value])


@torch.no_grad()
def capturable_adam_update(optimizer: torch.optim.Optimizer, hyper: list[tuple[torch.Tensor, ...]]) -> None:
    """Adam's (or AdamW's) update of ``optimizer``'s parameters with the learning rate and betas read from device
    tensors (``hyper``: per group ``(lr, beta1, beta2)``), so that a captured graph follows the schedule.

    PyTorch's capturable Adam takes a tensor learning rate but not (in 2.11) a tensor beta1, which OneCycle's
    momentum cycling changes every step. The state is PyTorch's own (``step``, ``exp_avg``, ``exp_avg_sq``, the step
    a device tensor as in its capturable mode), so checkpoints load into :class:`torch.optim.Adam` as before.
    """
    for group, (lr, beta1, beta2) in zip(optimizer.param_groups, hyper):
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            continue
        grads = [p.grad for p in params]
        for p in params:
            state = optimizer.state[p]
            if not state:
                state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        steps = [optimizer.state[p]["step"] for p in params]
        exp_avgs = [optimizer.state[p]["exp_avg"] for p in params]
        exp_avg_sqs = [optimizer.state[p]["exp_avg_sq"] for p in params]
        torch._foreach_add_(steps, 1)
        decay = group["weight_decay"]
        if decay and isinstance(optimizer, torch.optim.AdamW):
            torch._foreach_mul_(params, 1 - lr * decay)
        elif decay:
            grads = torch._foreach_add(grads, params, alpha=decay)
        torch._foreach_mul_(exp_avgs, beta1)
        torch._foreach_add_(exp_avgs, torch._foreach_mul(grads, 1 - beta1))
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_add_(exp_avg_sqs, torch._foreach_mul(torch._foreach_mul(grads, grads), 1 - beta2))
        step = steps[0]  # every parameter with a gradient is updated at every step
        denominator = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_mul_(denominator, (1 - beta2 ** step).rsqrt())
        torch._foreach_add_(denominator, group["eps"])
        update = torch._foreach_div(exp_avgs, denominator)
        torch._foreach_mul_(update, -lr / (1 - beta1 ** step))
        torch._foreach_add_(params, update)


class TrainStep:
    """Runs training steps of ``loss_fn`` on ``model``'s parameters: eagerly, or as CUDA graphs (``graphs``).

    ``loss_fn(batch, draws)`` is the task's loss on device tensors; ``weight`` scales it (a process's share
    of a data-parallel batch); ``samples`` is what the loss counts for in the epoch's mean.
    """

    def __init__(self, parameters: list[torch.nn.Parameter], optimizer: torch.optim.Optimizer,
                 scaler: torch.amp.GradScaler, precision: str, grad_clip: float | None, device: torch.device,
                 graphs: bool = False, batch_size: int = 0, name: str = "model") -> None:
        self.parameters, self.optimizer, self.scaler = parameters, optimizer, scaler
        self.precision, self.grad_clip, self.device = precision, grad_clip, device
        self.meter = LossMeter(device)
        self.graphs, self.batch_size, self.name = graphs, batch_size, name
        self.seen: dict[tuple[Any, ...], int] = {}
        self.captured: dict[tuple[Any, ...], tuple[torch.cuda.CUDAGraph, tuple[torch.Tensor, ...], StepDraws,
                                                   list[torch.Tensor | None]]] = {}
        if graphs:
            check_graphs(device, precision)
            self.hyperparameters = [tuple(torch.zeros((), dtype=torch.float32, device=device) for _ in range(3))
                                    for _ in optimizer.param_groups]
            self.sync_hyperparameters()
            self.side = torch.cuda.Stream(device)

    def sync_hyperparameters(self) -> None:
        """Write the groups' learning rate and betas (as the schedule left them) into the device tensors that the
        captured update reads: three small fills, no host read. Nothing to do without CUDA graphs."""
        if not self.graphs:
            return
        for group, tensors in zip(self.optimizer.param_groups, self.hyperparameters):
            for tensor, value in zip(tensors, (group["lr"], *group["betas"])):
                tensor.fill_(float(value))

    def eager(self, loss_fn: LossFunction, batch: tuple[torch.Tensor, ...], draws: StepDraws, weight: float,
              samples: float) -> None:
        """One step as ordinary PyTorch calls."""
        with autocast(self.precision, self.device):
            loss = loss_fn(batch, draws)
        if weight != 1:
            loss = loss * weight
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()  # DDP has averaged the gradients over the processes on return
        if self.grad_clip:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.parameters, self.grad_clip)
        if self.graphs:
            capturable_adam_update(self.optimizer, self.hyperparameters)
        else:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.meter.add(loss, samples)

    def __call__(self, loss_fn: LossFunction, batch: tuple[torch.Tensor, ...], draws: StepDraws,
                 weight: float = 1.0, samples: float = 1.0) -> None:
        """One training step of ``batch``: replayed if its shape was captured, else eager (and captured once
        warmed up, with CUDA graphs on, for full batches)."""
        if not self.graphs or batch[0].shape[0] != self.batch_size:
            self.eager(loss_fn, batch, draws, weight, samples)
            return
        key = (draws.calls, draws.key, tuple(n is None for n in draws.noise))
        if key in self.captured:
            graph, static_batch, static_draws, _ = self.captured[key]
            for static, new in zip(static_batch, batch):
                static.copy_(new, non_blocking=True)
            for static, new in zip(static_draws.noise, draws.noise):
                if static is not None:
                    static.copy_(new, non_blocking=True)
            graph.replay()
            return
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.seen[key] <= WARMUP_STEPS:
            self.side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.side):
                self.eager(loss_fn, batch, draws, weight, samples)
            torch.cuda.current_stream(self.device).wait_stream(self.side)
            return
        self._capture(key, loss_fn, batch, draws, weight, samples)

    def _capture(self, key: tuple[Any, ...], loss_fn: LossFunction, batch: tuple[torch.Tensor, ...],
                 draws: StepDraws, weight: float, samples: float) -> None:
        """Capture the step of this shape on static copies of ``batch`` and ``draws``, then replay it (capturing
        runs nothing)."""
        static_batch = tuple(t.clone() for t in batch)
        static_draws = StepDraws(draws.calls, [None if n is None else n.clone() for n in draws.noise], draws.key)
        graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        try:
            with torch.cuda.graph(graph):  # a private memory pool per graph: replays come in any order
                self.eager(loss_fn, static_batch, static_draws, weight, samples)
        except (RuntimeError, AssertionError) as exc:
            while exc.__context__ is not None:  # the error inside the capture, not capture_end's consequence
                exc = exc.__context__
            first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0][:160]
            raise ConfigError(f"train.cuda_graphs: the training step of {self.name} cannot be captured as a CUDA "
                              f"graph ({first}); set train.cuda_graphs: false") from None
        # the captured gradients stay referenced, so the memory the graph writes them to is never handed out
        self.captured[key] = (graph, static_batch, static_draws, [p.grad for p in self.parameters])
        graph.replay()


def check_graphs(device: torch.device, precision: str, option: str = "train.cuda_graphs") -> None:
    """CUDA graphs (``option``) need a CUDA device and no loss scaling (fp16's scaler decides on the host whether
    a step is skipped): a one-line :class:`ConfigError` otherwise."""
    if device.type != "cuda":
        raise ConfigError(f"{option}: CUDA only (this run is on {device})")
    if precision == "fp16":
        raise ConfigError(f"{option}: not with precision fp16 (its loss scaling decides on the host whether to "
                          "skip a step); use bf16 or fp32")
