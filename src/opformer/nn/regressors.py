"""Decoders that map latent fields to the output channels."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from opformer.nn.mlp import FeedForward
from opformer.nn.spectral import FourierLayer


class SpectralRegressor(nn.Module):
    """Spectral-convolution decoder of the Galerkin Transformer (Cao 2021, appendix B).

    ``n_layers`` FNO layers ``act(spectral(x) + Linear(x))`` (``in_channels -> width -> ... -> width``,
    activation after every layer), then the point-wise head ``Linear(width, head_width) -> act ->
    Linear(head_width, out_channels)``. Channel-last input ``(batch, *spatial, in_channels)``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        width: int = 48,
        modes: int | Sequence[int] = 16,
        n_layers: int = 2,
        head_width: int = 48,
        activation: str = "silu",
        ndim: int = 1,
    ) -> None:
        super().__init__()
        channels = [in_channels] + [width] * n_layers
        self.layers = nn.ModuleList(
            FourierLayer(c_in, c_out, modes, ndim, activation)
            for c_in, c_out in zip(channels[:-1], channels[1:])
        )
        self.head = FeedForward(width, head_width, out_channels, activation=activation)

    def forward(self, x: Tensor) -> Tensor:
        """Decode ``x`` ``(batch, *spatial, in_channels)`` to ``(batch, *spatial, out_channels)``."""
        for layer in self.layers:
            x = layer(x)
        return self.head(x)
