"""FNO baseline for time-dependent PDEs: the input frames as channels (temporal bundling of t_out frames)."""

from __future__ import annotations

from torch import Tensor, nn

from opformer.models.fno import FNO
from opformer.models.time_layout import channels_to_frames, check_time_sizes, frames_to_channels
from opformer.nn.domain_padding import Padding
from opformer.validate import PositiveFloat, PositiveInt


class FNOTime(nn.Module):
    """:class:`~opformer.models.fno.FNO` (coordinates appended inside) on ``t_in*in_channels`` input channels
    and ``t_out*out_channels`` output channels: ``(batch, *spatial, t_in, c) -> (batch, *spatial, t_out, c)``,
    on a grid of ``ndim`` axes (``fno2d_time``; ``fno3d_time`` defaults to width 20, 8 modes); ``periodic`` and
    ``padding`` (non-periodic axes padded with zeros inside) as :class:`~opformer.models.fno.FNO`'s.
    """

    def __init__(self, ndim: int, t_in: PositiveInt = 10, t_out: PositiveInt = 1, in_channels: PositiveInt = 1,
                 out_channels: PositiveInt | None = None, width: PositiveInt = 32, modes: PositiveInt = 12,
                 n_layers: PositiveInt = 4, projection_width: PositiveInt = 128, activation: str = "gelu",
                 length: PositiveFloat = 1.0, periodic: bool | list[bool] = True, padding: Padding = 0) -> None:
        super().__init__()
        out_channels = out_channels or in_channels
        check_time_sizes(t_in, t_out, in_channels, out_channels)
        self.ndim, self.t_in, self.t_out, self.in_channels = ndim, t_in, t_out, in_channels
        self.fno = FNO(ndim, t_in * in_channels, t_out * out_channels, width, modes, n_layers, projection_width,
                       activation, length, periodic, padding=padding)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, *spatial, t_in, in_channels)`` to ``(batch, *spatial, t_out, out_channels)``."""
        h = frames_to_channels(x, self.ndim, self.t_in, self.in_channels)
        return channels_to_frames(self.fno(h), self.t_out)
