"""Training strategies on trajectory windows: one-step, unrolled, pushforward and latent marching losses,
curricula and relative input noise. Rollouts themselves (:func:`opformer.models.inference.rollout`) are shared
with evaluation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from opformer.config import RolloutConfig
from opformer.eval.metrics import relative_l2_per_sample
from opformer.models.inference import Step, advance
from opformer.train.distributed import Part, normal

#: a per-sample error of a prediction against its target, ``(batch,)``: the relative L2, or its channel-weighted form
Metric = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def add_relative_noise(x: torch.Tensor, scale: float, generator: torch.Generator | None = None,
                       part: Part | None = None, noise: torch.Tensor | None = None) -> torch.Tensor:
    """``x + scale * rms(x) * N(0, 1)``, the RMS per sample and channel over grid and time.

    The convention of this library (documented in docs/training.md): ``scale`` is relative to the field's
    root-mean-square, so the noise level does not depend on the grid size (DPOT's ``||x||`` is a sum over
    the grid, whose per-point size grows with the number of points). With ``part`` (data-parallel training)
    the noise is this process's rows of the draw for the whole global batch. ``noise`` is a draw made
    beforehand (:func:`draw_windows`); without it the ``N(0, 1)`` is drawn here from ``generator``.
    """
    if scale == 0:
        return x
    dims = tuple(range(1, x.dim() - 1))
    rms = x.pow(2).mean(dim=dims, keepdim=True).sqrt()
    if noise is None:
        noise = normal(x.shape, generator, part)
    return x + scale * rms * noise.to(device=x.device, dtype=x.dtype)


@dataclass
class StepDraws:
    """The random numbers of one training step, drawn on the CPU before the step runs (so that a step can run
    as a captured CUDA graph, and every device sees the same numbers): the number of model ``calls`` and, per
    call, the ``N(0, 1)`` input noise (None without noise). ``key`` says which shapes of step these draws make
    (steps of one key run the same operations)."""

    calls: int = 1
    noise: list[torch.Tensor | None] = field(default_factory=list)
    key: tuple[int, ...] = ()

    def to(self, device: torch.device) -> StepDraws:
        """The draws on ``device`` (copied without waiting where the source is pinned)."""
        noise = [None if n is None else n.to(device, non_blocking=True) for n in self.noise]
        return StepDraws(self.calls, noise, self.key)


def draw_noise(shape: torch.Size | tuple[int, ...], scale: float, generator: torch.Generator | None,
               part: Part | None) -> torch.Tensor | None:
    """The ``N(0, 1)`` draw of :func:`add_relative_noise` for an input of ``shape`` (None when ``scale`` is 0,
    which draws nothing)."""
    return normal(shape, generator, part) if scale else None


def rms_fraction_of_norm_scale(scale: float, points: int) -> float:
    """The RMS fraction (this library's ``noise``) equal to DPOT's convention ``x + scale * ||x||_2 * N(0, 1)``
    with the 2-norm over ``points`` values per sample and channel: ``||x||_2 = sqrt(points) * rms(x)``.

    DPOT's ``scale = 5e-4`` at 128^2 with 10 frames is ``5e-4 * sqrt(163840) = 0.202``.
    """
    return scale * points ** 0.5


def curriculum_steps(config: RolloutConfig, epoch: int) -> int:
    """Model calls per training window at ``epoch`` (0-based): 1 growing linearly to ``unroll_steps``."""
    if config.curriculum_epochs == 0:
        return config.unroll_steps
    grown = 1 + (config.unroll_steps - 1) * epoch // config.curriculum_epochs
    return min(config.unroll_steps, grown)


def strategy_loss(step: Step, context: torch.Tensor, future: torch.Tensor, config: RolloutConfig, calls: int,
                  generator: torch.Generator | None = None, part: Part | None = None,
                  noise: list[torch.Tensor | None] | None = None, metric: Metric = relative_l2_per_sample
                  ) -> torch.Tensor:
    """Training loss of a batch of windows under the configured strategy.

    ``future`` holds at least ``calls * t_out`` frames. ``one_step``/``unroll``: the mean over the ``calls``
    steps of each step's relative L2 (``metric``, per sample; gradients through every step); ``pushforward``: the
    first ``calls - 1`` steps run without gradient, the loss is the last step's. Input noise acts on every model
    input (``noise``: each call's draw, made beforehand; else drawn here).
    """
    t_out = config.t_out
    noise = noise or [None] * calls
    losses = []
    for call in range(calls):
        target = future[..., call * t_out:(call + 1) * t_out, :]
        last = call == calls - 1
        if config.strategy == "pushforward" and not last:
            with torch.no_grad():
                new = step(add_relative_noise(context, config.noise, generator, part, noise[call]))
        else:
            new = step(add_relative_noise(context, config.noise, generator, part, noise[call]))
            losses.append(metric(new, target).mean())  # over grid, frames, channels
        context = advance(context, new)
    return torch.stack(losses).mean()


def marched_frames(config: RolloutConfig, epoch: int, iteration: int = 0) -> int:
    """latent_marching: bundled frames in each call's loss at ``epoch`` and optimiser step ``iteration`` (both from
    0), 1 growing linearly to ``t_out``: over ``march_curriculum_epochs`` epochs (``1 + (t_out - 1) * epoch // E``),
    or over ``march_curriculum_steps`` steps S as the authors' ``CurriculumSampler`` counts
    (``1 + (t_out - 1) * min(iteration, S) // S``); ``t_out`` from the start without either."""
    if config.march_curriculum_steps:
        done, length = min(iteration, config.march_curriculum_steps), config.march_curriculum_steps
    elif config.march_curriculum_epochs:
        done, length = epoch, config.march_curriculum_epochs
    else:
        return config.t_out
    return min(config.t_out, 1 + (config.t_out - 1) * done // length)


def pushforward_active(config: RolloutConfig, epoch: int, iteration: int = 0) -> bool:
    """latent_marching: whether optimiser step ``iteration`` (from 0 over the run, in ``epoch``) pushes forward: a
    step past the start (``epoch >= pushforward_epoch``, or ``iteration > pushforward_after_steps`` as the authors'
    ``n_iter > pushforward_after``) whose index is a multiple of ``pushforward_every``."""
    if config.pushforward_epoch is not None:
        started = epoch >= config.pushforward_epoch
    elif config.pushforward_after_steps is not None:
        started = iteration > config.pushforward_after_steps
    else:
        return False
    return started and iteration % config.pushforward_every == 0


def latent_marching_loss(step: Step, context: torch.Tensor, future: torch.Tensor, config: RolloutConfig,
                         calls: int, frames: int, generator: torch.Generator | None = None, part: Part | None = None,
                         noise: list[torch.Tensor | None] | None = None, metric: Metric = relative_l2_per_sample
                         ) -> torch.Tensor:
    """FactFormer's LM step as the authors' code makes it: the relative L2 (``metric``, per sample) of the first
    ``frames`` marched frames of the last of ``calls`` calls.

    One call is teacher forcing. A pushforward step makes ``calls`` (``unroll_steps``): the first ``calls - 1``
    without gradient, each fed the previous input advanced by its predecessor's first ``frames`` frames, then the
    trained call on the last such input, against the window's frames ``(calls - 1) * frames`` to
    ``calls * frames``. Input noise acts on every input.
    """
    noise = noise or [None] * calls
    for call in range(calls - 1):
        with torch.no_grad():
            new = step(add_relative_noise(context, config.noise, generator, part, noise[call]))
        context = advance(context, new[..., :frames, :])
    new = step(add_relative_noise(context, config.noise, generator, part, noise[calls - 1]))
    target = future[..., (calls - 1) * frames:calls * frames, :]
    return metric(new[..., :frames, :], target).mean()


def pushforward_calls(calls: int, generator: torch.Generator | None = None) -> int:
    """``pushforward``: the calls of one batch, drawn uniformly from ``1..calls`` (Brandstetter et al. 2022 draw
    the number of pushed-forward steps from ``0..calls-1`` per batch, so plain teacher forcing, 1 call, stays in
    the mix and the model also learns from true inputs)."""
    return 1 + int(torch.randint(calls, (1,), generator=generator))


def draw_windows(config: RolloutConfig, epoch: int, shape: torch.Size | tuple[int, ...],
                 generator: torch.Generator | None = None, part: Part | None = None, iteration: int = 0) -> StepDraws:
    """The random numbers of a batch of windows whose context has ``shape`` at ``epoch`` and optimiser step
    ``iteration`` (from 0 over the run), in the order the strategy uses them: pushforward's number of calls, then
    each call's input noise. Latent marching's key is ``(calls, marched frames)``."""
    if config.strategy == "latent_marching":
        calls = config.unroll_steps if pushforward_active(config, epoch, iteration) else 1
        key = (calls, marched_frames(config, epoch, iteration))
    else:
        calls = curriculum_steps(config, epoch)
        if config.strategy == "pushforward":
            calls = pushforward_calls(calls, generator)
        key = (calls,)
    return StepDraws(calls, [draw_noise(shape, config.noise, generator, part) for _ in range(calls)], key)


def drawn_window_loss(step: Step, context: torch.Tensor, future: torch.Tensor, config: RolloutConfig,
                      draws: StepDraws, metric: Metric = relative_l2_per_sample) -> torch.Tensor:
    """The training loss of a batch of windows with the step's random numbers drawn beforehand."""
    if config.strategy == "latent_marching":
        calls, frames = draws.key
        return latent_marching_loss(step, context, future, config, calls, frames, noise=draws.noise, metric=metric)
    return strategy_loss(step, context, future, config, draws.calls, noise=draws.noise, metric=metric)


def window_loss(step: Step, context: torch.Tensor, future: torch.Tensor, config: RolloutConfig, epoch: int,
                generator: torch.Generator | None = None, part: Part | None = None, iteration: int = 0
                ) -> torch.Tensor:
    """The training loss of a batch of windows at ``epoch`` and optimiser step ``iteration`` under the configured
    strategy (its random numbers drawn from ``generator`` first, :func:`draw_windows`)."""
    draws = draw_windows(config, epoch, context.shape, generator, part, iteration)
    return drawn_window_loss(step, context, future, config, draws)
