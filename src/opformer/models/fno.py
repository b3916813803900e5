"""Fourier Neural Operator baselines (Li et al. 2021), channel-last."""

from __future__ import annotations

from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.grids import block_average
from opformer.nn.mlp import FeedForward
from opformer.nn.positional import append_coordinates, grid_coordinates
from opformer.nn.spectral import FourierLayer


class FNO(nn.Module):
    """Lift ``Linear(in + ndim coords, width)`` -> FNO layers -> ``Linear(width, p) -> act -> Linear(p, out)``.

    Every FNO layer is ``act(spectral(x) + Linear(x))`` without batch norm; the activation follows
    every layer except the last one (as in the original FNO). Input ``(batch, *spatial, in_channels)``.
    """

    def __init__(
        self,
        ndim: int,
        in_channels: int,
        out_channels: int,
        width: int,
        modes: int,
        n_layers: int,
        projection_width: int,
        activation: str,
        length: float,
        periodic: bool,
    ) -> None:
        super().__init__()
        if min(in_channels, out_channels, width, modes, n_layers, projection_width) < 1:
            raise ConfigError("FNO sizes (channels, width, modes, n_layers, projection_width) must be >= 1")
        self.ndim = ndim
        self.length = length
        self.periodic = periodic
        self.lift = nn.Linear(in_channels + ndim, width)
        self.layers = nn.ModuleList(
            FourierLayer(width, width, modes, ndim, activation if i < n_layers - 1 else None)
            for i in range(n_layers)
        )
        self.projection = FeedForward(width, projection_width, out_channels, activation=activation)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, *spatial, in_channels)`` to ``(batch, *spatial, out_channels)``."""
        spatial = tuple(x.shape[1:-1])
        if len(spatial) != self.ndim:
            raise ValueError(f"expected (batch, {self.ndim} spatial axes, channels), got {tuple(x.shape)}")
        pos = grid_coordinates(
            spatial, lengths=self.length, periodic=self.periodic, device=x.device, dtype=x.dtype
        )
        h = self.lift(append_coordinates(x, pos))
        for layer in self.layers:
            h = layer(h)
        return self.projection(h)


class FNO1d(FNO):
    """FNO on a 1D grid; the defaults are the Burgers baseline of Cao 2021 (549,569 parameters)."""

    def __init__(
        self,
        in_channels: int = 1,
        out_channels: int = 1,
        width: int = 64,
        modes: int = 16,
        n_layers: int = 4,
        projection_width: int = 128,
        activation: str = "relu",
        length: float = 1.0,
        periodic: bool = True,
    ) -> None:
        super().__init__(
            1, in_channels, out_channels, width, modes, n_layers, projection_width, activation, length, periodic
        )


class FNO2d(FNO):
    """FNO on a 2D grid; the defaults are the Darcy baseline of Cao 2021 (4 layers, width 32, 12 modes, no
    batch norm) on the closed unit square.

    ``output_size`` (inverse problem) block-averages the output to a coarser closed grid of that many points
    per axis (:func:`opformer.nn.interp_cnn.block_average`), the grid of the coarse target.
    """

    def __init__(
        self,
        in_channels: int = 1,
        out_channels: int = 1,
        width: int = 32,
        modes: int = 12,
        n_layers: int = 4,
        projection_width: int = 128,
        activation: str = "relu",
        length: float = 1.0,
        periodic: bool = False,
        output_size: int | None = None,
    ) -> None:
        super().__init__(
            2, in_channels, out_channels, width, modes, n_layers, projection_width, activation, length, periodic
        )
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, n, n, in_channels)`` to ``(batch, n or output_size, ..., out_channels)``."""
        y = super().forward(x)
        return block_average(y, self.output_size) if self.output_size else y
