"""What every evaluation measures, and what training validates with: relative L2 errors of predictions and
of auto-regressive rollouts, with fixed, seeded input-noise realisations.

Steps, rollouts and batched prediction are :mod:`opformer.models.inference`'s.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from opformer.data.pairs import OperatorSplit
from opformer.models.inference import Step, rollout
from opformer.models.surrogate import Surrogate


#: Offsets added to the run's seed for the fixed input-noise realisation of each evaluated split.
NOISE_SEED_OFFSETS = {"train": 1, "val": 2, "test": 3, "all": 4}


def relative_l2_per_sample(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``||pred - target|| / ||target||`` over grid and channels, one value per sample.

    The mesh weight ``h`` of the discrete norm cancels in the ratio.
    """
    diff = (pred - target).flatten(1).pow(2).sum(dim=1)
    norm = target.flatten(1).pow(2).sum(dim=1)
    return torch.sqrt(diff / norm)


def masked_relative_l2_per_sample(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """DPOT's L2RE: ``||pred - target|| / ||target||`` per sample and channel over every other axis (space and
    time), averaged over the sample's real channels (``mask`` ``(batch, channels)``, True where real).

    Padded channels never enter the value or its gradient, whatever they hold (NaN included).
    """
    keep = mask.reshape(mask.shape[0], *[1] * (pred.dim() - 2), mask.shape[1])
    diff = torch.where(keep, pred - target, 0).pow(2).flatten(1, -2).sum(dim=1)
    norm = torch.where(keep, target, 0).pow(2).flatten(1, -2).sum(dim=1)
    ratio = torch.where(mask, diff / torch.where(mask, norm, 1), 1)  # 1, not 0: sqrt's gradient at 0 is inf
    return (ratio.sqrt() * mask).sum(dim=1) / mask.sum(dim=1)


def weighted_relative_l2_per_sample(pred: torch.Tensor, target: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The relative L2 on a mesh, ``sqrt(sum_i w_i |u_i - v_i|^2 / sum_i w_i |v_i|^2)`` over the points ``i`` and
    every channel, one value per sample: ``pred``, ``target`` ``(batch, N, channels)``, ``weights`` ``(batch, N)``
    the quadrature weights (0 on padding). With ``weights`` the mask (1 on every real point) it is the plain
    relative L2 of the real points."""
    w = weights.to(pred.dtype).unsqueeze(-1)
    diff = (w * (pred - target).square()).flatten(1).sum(dim=1)
    norm = (w * target.square()).flatten(1).sum(dim=1)
    return torch.sqrt(diff / norm)


def noise_sample(shape: tuple[int, ...], level: float, seed: int) -> torch.Tensor | None:
    """``level * N(0, 1)`` of ``shape`` from a seeded CPU generator (the same on every device); None if 0."""
    if level == 0:
        return None
    return level * torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def split_errors(surrogate: Surrogate, split: OperatorSplit, batch_size: int, device: torch.device,
                 noise_level: float = 0.0, seed: int = 0, rows: slice = slice(None)) -> torch.Tensor:
    """Per-sample relative L2 errors of the surrogate on a split, with a seeded input-noise realisation.

    ``rows`` (one process's shard in data-parallel validation) selects samples; their noise is their rows of
    the whole split's realisation, so a sample's error does not depend on how the split is sharded.
    """
    noise = noise_sample(tuple(split.inputs.shape), noise_level, seed)
    inputs, targets = split.inputs[rows], split.targets[rows]
    noise = None if noise is None else noise[rows]
    surrogate.eval()
    errors = [targets.new_zeros((0,), device=device)]
    with torch.no_grad():  # the errors stay on the device until all batches are done: one read at the end
        for start in range(0, inputs.shape[0], batch_size):
            batch = slice(start, start + batch_size)
            pred = surrogate(inputs[batch].to(device, non_blocking=True),
                             None if noise is None else noise[batch].to(device, non_blocking=True))
            errors.append(relative_l2_per_sample(pred, targets[batch].to(device, non_blocking=True)))
    return torch.cat(errors).cpu()


def persistence(context: torch.Tensor) -> torch.Tensor:
    """The trivial forecast, the last given frame repeated: the baseline a learned rollout has to beat."""
    return context[..., -1:, :]


class RolloutErrors(NamedTuple):
    """What :func:`rollout_errors` returns: the predicted frames ``(sample, frame, *spatial, channels)`` (on the
    CPU), opformer's relative L2 of every predicted frame ``(sample, frame)`` (over grid and real channels) and
    DPOT's L2RE ``(sample,)`` (per real channel over the whole space-time rollout, mean over the channels)."""

    predictions: torch.Tensor
    per_frame: torch.Tensor
    l2re: torch.Tensor


@torch.no_grad()
def rollout_errors(step: Step, fields: torch.Tensor, t_in: int, n_frames: int, batch_size: int,
                   device: torch.device, mask: torch.Tensor | None = None,
                   keep_predictions: bool = True) -> RolloutErrors:
    """Roll out every trajectory of ``fields`` ``(sample, time, *spatial, channels)`` from its first ``t_in``
    frames and measure the ``n_frames`` predicted frames (the given frames are never counted).

    ``mask`` ``(channels,)`` (True where real; default all) marks a mixture member's padded channels: the step's
    outputs there are zeroed before they are fed back, and no error counts them (the truth is zero there, so the
    per-frame error is over the real channels too). The errors are computed on the device and read once at the
    end; without ``keep_predictions`` (validation) the predicted frames never leave the device (an empty
    ``predictions``).
    """
    keep = torch.ones(fields.shape[-1], dtype=torch.bool) if mask is None else mask.cpu()
    on_device = keep.to(device)
    masked = step if mask is None else (lambda x: step(x) * on_device)
    preds, per_frame = [], [fields.new_zeros((0, n_frames), device=device)]
    l2re = [fields.new_zeros((0,), device=device)]
    for start in range(0, fields.shape[0], batch_size):  # none for no trajectories (a process's empty shard)
        chunk = fields[start:start + batch_size]
        context = chunk[:, :t_in].movedim(1, -2).to(device, non_blocking=True)
        pred = rollout(masked, context, n_frames).movedim(-2, 1)
        truth = chunk[:, t_in:t_in + n_frames].to(device, non_blocking=True)
        frame_errors = relative_l2_per_sample(pred.flatten(0, 1), truth.flatten(0, 1))
        per_frame.append(frame_errors.reshape(len(chunk), n_frames))
        l2re.append(masked_relative_l2_per_sample(pred, truth, on_device.expand(len(chunk), -1)))
        if keep_predictions:
            preds.append(pred.cpu())
    predictions = torch.cat(preds) if preds else fields.new_zeros((0, n_frames, *fields.shape[2:]))
    return RolloutErrors(predictions, torch.cat(per_frame).cpu(), torch.cat(l2re).cpu())


#: The Well's rollout windows (Ohana et al. 2024, its tables of VRMSE): predicted frames 6..11 and 13..29, counted
#: from 0 at the first predicted frame, as its trainer's ``T=6:12`` and ``T=13:30`` (half-open slices).
WELL_WINDOWS = ((6, 12), (13, 30))
#: What The Well adds to a denominator (its metrics' ``eps``).
WELL_EPS = 1e-7


def well_errors(pred: torch.Tensor, target: torch.Tensor, ndim: int, eps: float = WELL_EPS
                ) -> dict[str, torch.Tensor]:
    """The Well's VRMSE and NRMSE of ``pred`` against ``target`` (``(..., *spatial, channels)``, ``ndim`` spatial
    axes), one value per leading index and channel: ``sqrt(mean((p - t)^2) / (var(t) + eps))`` with the unbiased
    variance over space (VRMSE: 1 is as good as predicting the field's mean), and ``sqrt(mean((p - t)^2) /
    (mean(t^2) + eps))`` (NRMSE). Computed in float64."""
    axes = tuple(range(-ndim - 1, -1))
    pred, target = pred.double(), target.double()
    mse = (pred - target).pow(2).mean(dim=axes)
    return {"vrmse": torch.sqrt(mse / (target.var(dim=axes) + eps)),
            "nrmse": torch.sqrt(mse / (target.pow(2).mean(dim=axes) + eps))}


def parse_windows(text: str) -> tuple[tuple[int, int], ...]:
    """``"6:12,13:30"`` -> ((6, 12), (13, 30)): half-open ranges of predicted frames; ValueError if malformed."""
    windows = []
    for part in text.split(","):
        start, _, stop = part.strip().partition(":")
        first, last = int(start), int(stop)
        if not 0 <= first < last:
            raise ValueError(part)
        windows.append((first, last))
    return tuple(windows)


def window_means(values: torch.Tensor, windows: tuple[tuple[int, int], ...]) -> dict[str, torch.Tensor]:
    """Per-(sample, frame, channel) ``values`` averaged over the samples and the frames of each window (``"a:b"``:
    frames a..b-1) and over every frame (``"all"``): one value per channel each, as The Well's trainer averages its
    per-frame metrics (over the batch, then the window's frames)."""
    means = {f"{a}:{b}": values[:, a:b].mean(dim=(0, 1)) for a, b in windows}
    return {**means, "all": values.mean(dim=(0, 1))}
