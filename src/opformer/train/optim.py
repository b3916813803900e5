"""Optimisers and learning-rate schedules built from the run config."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from opformer.config import OptimConfig, ScheduleConfig


def build_optimizer(params: Iterable[torch.nn.Parameter], config: OptimConfig) -> torch.optim.Optimizer:
    """Adam or AdamW with the configured learning rate, betas and weight decay."""
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[config.name]
    return cls(params, lr=config.lr, betas=tuple(config.betas), weight_decay=config.weight_decay)


def build_scheduler(optimizer: torch.optim.Optimizer, config: ScheduleConfig,
                    total_steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    """A per-batch schedule: OneCycle (peak at ``pct_start``) or constant.

    OneCycle's momentum cycling, which rewrites Adam's beta1 between 0.85 and 0.95, only happens with
    ``cycle_momentum: true`` (PyTorch turns it on silently by default).
    """
    if config.name == "constant":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    return torch.optim.lr_scheduler.OneCycleLR(
        optimizer,
        max_lr=[group["lr"] for group in optimizer.param_groups],
        total_steps=total_steps,
        pct_start=config.pct_start,
        anneal_strategy=config.anneal,
        div_factor=config.div_factor,
        final_div_factor=config.final_div_factor,
        cycle_momentum=config.cycle_momentum,
    )
