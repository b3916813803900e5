"""Decoders that map latent fields to the output channels."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from opformer.nn.dropout import Dropout
from opformer.nn.mlp import FeedForward, make_activation
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


class PointwiseRegressor(nn.Module):
    """Point-wise MLP decoder (the inverse problem's regressor, Cao 2021 Example 5.3).

    ``Linear(in, width) -> act -> dropout`` followed by ``n_layers - 1`` blocks ``Linear(width, width) -> act
    -> dropout`` and ``Linear(width, out_channels)``, applied at every grid point. Channel-last input.
    """

    def __init__(self, in_channels: int, out_channels: int, width: int, n_layers: int = 2,
                 activation: str = "silu", dropout: float = 0.0) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for c_in in [in_channels] + [width] * (n_layers - 1):
            layers += [nn.Linear(c_in, width), make_activation(activation), Dropout(dropout)]
        layers.append(nn.Linear(width, out_channels))
        self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        """Decode ``x`` ``(batch, *spatial, in_channels)`` to ``(batch, *spatial, out_channels)``."""
        return self.net(x)
