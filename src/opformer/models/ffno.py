"""F-FNO (Tran et al. 2023, "Factorized Fourier Neural Operators") for time-dependent PDEs, channel-last."""

from __future__ import annotations

from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.models.time_layout import channels_to_frames, check_time_sizes, frames_to_channels
from opformer.nn.domain_padding import Padding, axis_periodicity, crop_domain, pad_domain
from opformer.nn.factorized_spectral import FactorizedSpectralConv
from opformer.nn.mlp import FeedForward
from opformer.nn.positional import append_coordinates, grid_coordinates
from opformer.validate import PositiveFloat, PositiveInt


class FFNOLayer(nn.Module):
    """The improved residual layer ``x + FFN(sum_axes K_axis(x))``; ``spectral`` may be shared across layers."""

    def __init__(self, spectral: FactorizedSpectralConv, width: int, ffn_width: int, activation: str) -> None:
        super().__init__()
        self.spectral = spectral
        self.ffn = FeedForward(width, ffn_width, width, activation=activation)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the layer to ``x`` ``(batch, *spatial, width)``."""
        return x + self.ffn(self.spectral(x))


class FFNO(nn.Module):
    """Lift ``Linear(t_in*c + ndim coords, width)`` -> F-FNO layers -> ``Linear(width, p) -> act -> Linear``.

    Input ``(batch, *spatial, t_in, in_channels)`` on a grid of ``ndim`` axes (``ffno2d``, ``ffno3d``), output
    ``(batch, *spatial, t_out, out_channels)``. With ``share_weights`` one factorised spectral operator serves
    every layer (the FFNs stay per layer). ``periodic`` (one bool, or one per axis) and ``padding`` (zeros
    appended to the non-periodic axes after the lifting, cropped before the projection) as
    :class:`~opformer.models.fno.FNO`'s.
    """

    def __init__(self, ndim: int, t_in: PositiveInt = 10, t_out: PositiveInt = 1, in_channels: PositiveInt = 1,
                 out_channels: PositiveInt | None = None, width: PositiveInt = 64, modes: PositiveInt = 16,
                 n_layers: PositiveInt = 8, ffn_width: PositiveInt | None = None, projection_width: PositiveInt = 128,
                 activation: str = "gelu", share_weights: bool = False, length: PositiveFloat = 1.0,
                 periodic: bool | list[bool] = True, padding: Padding = 0) -> None:
        super().__init__()
        out_channels = out_channels or in_channels
        check_time_sizes(t_in, t_out, in_channels, out_channels)
        ffn_width = ffn_width or 4 * width
        if min(width, modes, n_layers, ffn_width, projection_width) < 1:
            raise ConfigError("F-FNO sizes (width, modes, n_layers, ffn_width, projection_width) must be >= 1")
        self.ndim, self.t_in, self.t_out, self.in_channels = ndim, t_in, t_out, in_channels
        self.length, self.padding = length, padding
        self.axis_periodic = axis_periodicity(periodic, ndim)
        self.lift = nn.Linear(t_in * in_channels + ndim, width)
        shared = FactorizedSpectralConv(width, width, modes, ndim) if share_weights else None
        self.layers = nn.ModuleList(
            FFNOLayer(shared or FactorizedSpectralConv(width, width, modes, ndim), width, ffn_width, activation)
            for _ in range(n_layers)
        )
        self.projection = FeedForward(width, projection_width, t_out * out_channels, activation=activation)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, *spatial, t_in, in_channels)`` to ``(batch, *spatial, t_out, out_channels)``."""
        h = frames_to_channels(x, self.ndim, self.t_in, self.in_channels)
        spatial = tuple(h.shape[1:-1])
        pos = grid_coordinates(spatial, lengths=self.length, periodic=self.axis_periodic, device=x.device,
                               dtype=x.dtype)
        h = pad_domain(self.lift(append_coordinates(h, pos)), self.axis_periodic, self.padding)
        for layer in self.layers:
            h = layer(h)
        return channels_to_frames(self.projection(crop_domain(h, spatial)), self.t_out)
