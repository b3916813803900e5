"""Fourier Neural Operator baselines (Li et al. 2021), channel-last."""

from __future__ import annotations

from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.grids import block_average
from opformer.nn.domain_padding import Padding, axis_periodicity, crop_domain, pad_domain
from opformer.nn.mlp import FeedForward
from opformer.nn.positional import append_coordinates, grid_coordinates
from opformer.nn.spectral import FourierLayer
from opformer.validate import PositiveFloat, PositiveInt


class FNO(nn.Module):
    """Lift ``Linear(in + ndim coords, width)`` -> FNO layers -> ``Linear(width, p) -> act -> Linear(p, out)``.

    Every FNO layer is ``act(spectral(x) + Linear(x))`` without batch norm; the activation follows
    every layer except the last one (as in the original FNO). Input ``(batch, *spatial, in_channels)`` with
    ``ndim`` spatial axes. The defaults are the Burgers baseline of Cao 2021 (``fno1d``, 549,569 parameters);
    ``fno2d`` is the Darcy baseline (width 32, 12 modes, the closed unit square).

    ``output_size`` (2D, inverse problem) block-averages the output to a coarser closed grid of that many
    points per axis (:func:`opformer.grids.block_average`), the grid of the coarse target.

    ``periodic`` (one bool, or one per axis) says which axes are periodic: their coordinates, and where
    ``padding`` applies. ``padding`` (cells, or a fraction of the axis in (0, 1)) appends zeros at the end of
    every non-periodic axis after the lifting and crops them before the projection, as the FNO authors do on
    non-periodic problems (:mod:`opformer.nn.domain_padding`); 0 (the class's default) pads nothing.
    """

    def __init__(self, ndim: int, in_channels: PositiveInt = 1, out_channels: PositiveInt = 1, width: PositiveInt = 64,
                 modes: PositiveInt = 16, n_layers: PositiveInt = 4, projection_width: PositiveInt = 128,
                 activation: str = "relu", length: PositiveFloat = 1.0, periodic: bool | list[bool] = True,
                 output_size: PositiveInt | None = None, padding: Padding = 0) -> None:
        super().__init__()
        if min(in_channels, out_channels, width, modes, n_layers, projection_width) < 1:
            raise ConfigError("FNO sizes (channels, width, modes, n_layers, projection_width) must be >= 1")
        if output_size is not None and ndim != 2:
            raise ConfigError(f"output_size: block averages are 2D, got a {ndim}D FNO")
        self.ndim, self.length, self.output_size = ndim, length, output_size
        self.axis_periodic, self.padding = axis_periodicity(periodic, ndim), padding
        self.lift = nn.Linear(in_channels + ndim, width)
        self.layers = nn.ModuleList(
            FourierLayer(width, width, modes, ndim, activation if i < n_layers - 1 else None)
            for i in range(n_layers)
        )
        self.projection = FeedForward(width, projection_width, out_channels, activation=activation)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, *spatial, in_channels)`` to ``(batch, *spatial or output_size, out_channels)``."""
        spatial = tuple(x.shape[1:-1])
        if len(spatial) != self.ndim:
            raise ValueError(f"expected (batch, {self.ndim} spatial axes, channels), got {tuple(x.shape)}")
        pos = grid_coordinates(
            spatial, lengths=self.length, periodic=self.axis_periodic, device=x.device, dtype=x.dtype
        )
        h = pad_domain(self.lift(append_coordinates(x, pos)), self.axis_periodic, self.padding)
        for layer in self.layers:
            h = layer(h)
        y = self.projection(crop_domain(h, spatial))
        return block_average(y, self.output_size) if self.output_size else y
