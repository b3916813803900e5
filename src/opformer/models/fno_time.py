"""FNO baselines for time-dependent PDEs: the input frames as channels (temporal bundling of t_out frames)."""

from __future__ import annotations

from torch import Tensor, nn

from opformer.errors import ConfigError, DataError
from opformer.models.fno import FNO


def check_time_sizes(t_in: int, t_out: int, in_channels: int, out_channels: int) -> None:
    """Raise ``ConfigError`` unless the frame and channel counts of a time model are positive."""
    if min(t_in, t_out, in_channels, out_channels) < 1:
        raise ConfigError(
            f"t_in, t_out, in_channels, out_channels must be >= 1, got {t_in}, {t_out}, {in_channels}, {out_channels}"
        )


def frames_to_channels(x: Tensor, ndim: int, t_in: int, in_channels: int) -> Tensor:
    """Check ``x`` ``(batch, *spatial, t_in, channels)`` and merge time into channels: ``(batch, *spatial, t_in*c)``.

    Raises ``DataError`` (one line) for a wrong number of axes, frames or channels.
    """
    if x.ndim != ndim + 3:
        raise DataError(
            f"model expects (batch, {ndim} spatial axes, time, channels), got shape {tuple(x.shape)}"
        )
    if x.shape[-2] != t_in:
        raise DataError(f"model built for t_in={t_in}, got {x.shape[-2]} input frames")
    if x.shape[-1] != in_channels:
        raise DataError(f"model built for in_channels={in_channels}, got {x.shape[-1]} channels")
    return x.flatten(-2)


def channels_to_frames(y: Tensor, t_out: int) -> Tensor:
    """Split the channels of ``y`` ``(batch, *spatial, t_out*c)`` into ``(batch, *spatial, t_out, c)``."""
    return y.unflatten(-1, (t_out, y.shape[-1] // t_out))


class FNOTime(nn.Module):
    """:class:`~opformer.models.fno.FNO` (coordinates appended inside) on ``t_in*in_channels`` input channels
    and ``t_out*out_channels`` output channels: ``(batch, *spatial, t_in, c) -> (batch, *spatial, t_out, c)``.
    """

    ndim: int

    def __init__(
        self,
        t_in: int,
        t_out: int,
        in_channels: int,
        out_channels: int | None,
        width: int,
        modes: int,
        n_layers: int,
        projection_width: int,
        activation: str,
        length: float,
        periodic: bool,
    ) -> None:
        super().__init__()
        out_channels = out_channels or in_channels
        check_time_sizes(t_in, t_out, in_channels, out_channels)
        self.t_in, self.t_out, self.in_channels = t_in, t_out, in_channels
        self.fno = FNO(
            self.ndim, t_in * in_channels, t_out * out_channels, width, modes, n_layers, projection_width,
            activation, length, periodic,
        )

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, *spatial, t_in, in_channels)`` to ``(batch, *spatial, t_out, out_channels)``."""
        h = frames_to_channels(x, self.ndim, self.t_in, self.in_channels)
        return channels_to_frames(self.fno(h), self.t_out)


class FNO2dTime(FNOTime):
    """FNO with time as channels on a periodic 2D grid (``fno2d_time``)."""

    ndim = 2

    def __init__(
        self,
        t_in: int = 10,
        t_out: int = 1,
        in_channels: int = 1,
        out_channels: int | None = None,
        width: int = 32,
        modes: int = 12,
        n_layers: int = 4,
        projection_width: int = 128,
        activation: str = "gelu",
        length: float = 1.0,
        periodic: bool = True,
    ) -> None:
        super().__init__(
            t_in, t_out, in_channels, out_channels, width, modes, n_layers, projection_width, activation,
            length, periodic,
        )


class FNO3dTime(FNOTime):
    """FNO with time as channels on a periodic 3D grid (``fno3d_time``)."""

    ndim = 3

    def __init__(
        self,
        t_in: int = 10,
        t_out: int = 1,
        in_channels: int = 1,
        out_channels: int | None = None,
        width: int = 20,
        modes: int = 8,
        n_layers: int = 4,
        projection_width: int = 128,
        activation: str = "gelu",
        length: float = 1.0,
        periodic: bool = True,
    ) -> None:
        super().__init__(
            t_in, t_out, in_channels, out_channels, width, modes, n_layers, projection_width, activation,
            length, periodic,
        )
