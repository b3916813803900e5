"""Inputs unlike the calibration data: per-sample statistics of an input, and the flag of those outside the range
the calibration inputs span.

Conformal bounds hold for inputs exchangeable with the calibration inputs. An input whose statistics lie outside
the calibration range cannot be assumed so: its bound is still given, marked as not guaranteed. The statistics,
per channel: the mean, the standard deviation, the roughness (root mean square of the differences between
neighbouring grid points over the standard deviation: finer scales, as at a lower viscosity, raise it) and, for a
trajectory's context frames, the change from its first to its last frame over the standard deviation. Each is
standardised by the calibration inputs' median and median absolute deviation; the flag's threshold is the largest
standardised statistic of any calibration input, so a new input drawn like them is flagged with probability at
most about ``1 / (n + 1)``.
"""

from __future__ import annotations

import torch

#: Relative floor of a statistic's spread (a statistic constant over the calibration inputs).
SPREAD_FLOOR = 1e-6


def _frames(inputs: torch.Tensor, ndim: int) -> torch.Tensor:
    """Inputs as float64 ``(sample, time, *spatial, channels)`` (one frame for an operator input)."""
    x = inputs.double()
    return x.unsqueeze(1) if x.dim() == ndim + 2 else x


def _roughness(x: torch.Tensor, ndim: int) -> torch.Tensor:
    """``(sample, channels)``: root mean square of neighbour differences over the standard deviation."""
    spatial = tuple(range(2, 2 + ndim))
    everything = (1, *spatial)
    rough = torch.stack([x.diff(dim=axis).pow(2).mean(dim=everything) for axis in spatial]).mean(dim=0).sqrt()
    return rough / (x.std(dim=everything, correction=0) + torch.finfo(torch.float64).tiny)


def roughness(inputs: torch.Tensor, ndim: int) -> torch.Tensor:
    """``(sample,)``: the inputs' roughness, mean over channels (the difficulty of the per-sample ``roughness``
    score of :mod:`opformer.trust.scores`)."""
    return _roughness(_frames(inputs, ndim), ndim).mean(dim=1)


def input_statistics(inputs: torch.Tensor, ndim: int) -> torch.Tensor:
    """``(sample, statistics)`` of inputs ``(sample, *spatial, channels)`` or context frames
    ``(sample, time, *spatial, channels)`` (``ndim`` spatial axes), in float64."""
    x = _frames(inputs, ndim)
    everything = tuple(range(1, 2 + ndim))
    mean = x.mean(dim=everything)
    std = x.std(dim=everything, correction=0)
    tiny = torch.finfo(torch.float64).tiny
    stats = [mean, std, _roughness(x, ndim)]
    if x.shape[1] > 1:
        change = (x[:, -1] - x[:, 0]).pow(2).mean(dim=tuple(range(1, 1 + ndim))).sqrt()
        stats.append(change / (std + tiny))
    return torch.cat(stats, dim=1)


def roughness_of(statistics: torch.Tensor, channels: int) -> torch.Tensor:
    """``(sample,)``: :func:`roughness` read off :func:`input_statistics` of inputs of ``channels`` channels (where
    both are needed, the inputs are passed over once)."""
    return statistics[:, 2 * channels:3 * channels].mean(dim=1)


def standardise(statistics: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """The largest absolute statistic of each sample, standardised by the median and median absolute deviation
    of ``reference`` (the calibration inputs' statistics)."""
    centre = reference.median(dim=0).values
    spread = (reference - centre).abs().median(dim=0).values
    spread = torch.maximum(spread, SPREAD_FLOOR * (centre.abs() + 1))
    return ((statistics - centre) / spread).abs().amax(dim=1)


def flag_shifted(statistics: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """True for each sample whose standardised statistics exceed every calibration input's (:func:`standardise`)."""
    threshold = standardise(reference, reference).max()
    return standardise(statistics, reference) > threshold
