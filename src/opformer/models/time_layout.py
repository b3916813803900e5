"""The layout of time-dependent models: ``t_in`` input frames as channels in, ``t_out`` bundled frames out."""

from __future__ import annotations

from torch import Tensor

from opformer.errors import ConfigError, DataError


def check_time_sizes(t_in: int, t_out: int, in_channels: int, out_channels: int) -> None:
    """Raise ``ConfigError`` unless the frame and channel counts of a time model are positive."""
    if min(t_in, t_out, in_channels, out_channels) < 1:
        raise ConfigError(
            f"t_in, t_out, in_channels, out_channels must be >= 1, got {t_in}, {t_out}, {in_channels}, {out_channels}"
        )


def check_frames(x: Tensor, ndim: int, t_in: int, in_channels: int) -> None:
    """Raise ``DataError`` (one line) unless ``x`` is ``(batch, *spatial, t_in, in_channels)`` with ``ndim``
    spatial axes."""
    if x.ndim != ndim + 3:
        raise DataError(
            f"model expects (batch, {ndim} spatial axes, time, channels), got shape {tuple(x.shape)}"
        )
    if x.shape[-2] != t_in:
        raise DataError(f"model built for t_in={t_in}, got {x.shape[-2]} input frames")
    if x.shape[-1] != in_channels:
        raise DataError(f"model built for in_channels={in_channels}, got {x.shape[-1]} channels")


def frames_to_channels(x: Tensor, ndim: int, t_in: int, in_channels: int) -> Tensor:
    """Check ``x`` (:func:`check_frames`) and merge time into channels: ``(batch, *spatial, t_in*c)``."""
    check_frames(x, ndim, t_in, in_channels)
    return x.flatten(-2)


def channels_to_frames(y: Tensor, t_out: int) -> Tensor:
    """Split the channels of ``y`` ``(batch, *spatial, t_out*c)`` into ``(batch, *spatial, t_out, c)``."""
    return y.unflatten(-1, (t_out, y.shape[-1] // t_out))
