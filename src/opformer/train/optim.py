"""Optimisers and learning-rate schedules built from the run config."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from opformer.config import OptimConfig, ScheduleConfig


_FUSED_DEVICES = ("cpu", "cuda")


def build_optimizer(params: Iterable[torch.nn.Parameter], config: OptimConfig) -> torch.optim.Optimizer:
    """Adam or AdamW with the configured learning rate, betas and weight decay.

    The update runs as one fused kernel over all parameters where PyTorch has one (CPU and CUDA): the
    same algorithm as the per-tensor loop, measured 4x faster for the 2.2M-parameter Darcy GT on one core.
    """
    params = list(params)
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[config.name]
    optimizer = cls(params, lr=config.lr, betas=tuple(config.betas), weight_decay=config.weight_decay)
    use_fused_update(optimizer)
    return optimizer


def use_fused_update(optimizer: torch.optim.Optimizer) -> None:
    """Switch every parameter group to the fused update if all its parameters allow it.

    Called again after ``load_state_dict``, which restores the flags a checkpoint was written with.
    """
    for group in optimizer.param_groups:
        fusable = all(p.device.type in _FUSED_DEVICES and p.is_floating_point() for p in group["params"])
        group["fused"] = fusable or None
        group["foreach"] = None if fusable else group.get("foreach")


def build_scheduler(optimizer: torch.optim.Optimizer, config: ScheduleConfig, total_steps: int,
                    steps_per_epoch: int = 1) -> torch.optim.lr_scheduler.LRScheduler:
    """A per-batch schedule: OneCycle (peak at ``pct_start``), constant, or step (the rate times ``gamma`` after
    every ``step_epochs`` epochs of ``steps_per_epoch`` batches: the FNO code's ``StepLR``, stepped per epoch).

    OneCycle's momentum cycling, which rewrites Adam's beta1 between 0.85 and 0.95, only happens with
    ``cycle_momentum: true`` (PyTorch turns it on silently by default).

    PyTorch's warm-up ends at step ``pct_start * total_steps - 1``; a warm-up shorter than one step starts
    the cycle at its peak, but exactly one step (e.g. 5 steps with ``pct_start`` 0.2) is a phase of zero width
    that PyTorch divides by (``ZeroDivisionError``). That case is given the same start at the peak, the limit
    from below, by lowering ``pct_start`` by a few units in the last place.
    """
    if config.name == "constant":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    if config.name == "step":
        period = config.step_epochs * steps_per_epoch
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: config.gamma ** (step // period))
    pct_start = config.pct_start
    while pct_start * total_steps == 1:
        pct_start = math.nextafter(pct_start, 0.0)
    return torch.optim.lr_scheduler.OneCycleLR(
        optimizer,
        max_lr=[group["lr"] for group in optimizer.param_groups],
        total_steps=total_steps,
        pct_start=pct_start,
        anneal_strategy=config.anneal,
        div_factor=config.div_factor,
        final_div_factor=config.final_div_factor,
        cycle_momentum=config.cycle_momentum,
    )
