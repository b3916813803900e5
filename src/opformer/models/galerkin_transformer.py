"""Galerkin / Fourier Transformer operator learner for 1D problems (Cao 2021, Example 5.1)."""

from __future__ import annotations

from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.nn.encoder import SimpleEncoder
from opformer.nn.positional import grid_coordinates
from opformer.nn.regressors import SpectralRegressor
from opformer.validate import Fraction, NonNegativeFloat, PositiveFloat, PositiveInt


class GalerkinTransformer1d(nn.Module):
    """Feature extractor -> simple-attention encoder -> spectral regressor, on a 1D grid.

    Input ``(batch, n, in_channels)``, output ``(batch, n, out_channels)``; the grid coordinates
    (``length * i / n`` if periodic, else ``linspace(0, length, n)``) are built from ``n`` and
    concatenated to every head of every encoder layer, so one set of weights runs at any ``n``.
    The defaults are the paper's Burgers model (530,305 parameters). ``attention_type`` selects the
    GT ("galerkin"), FT ("fourier"), ST ("softmax") or LT ("linear") variant.
    """

    ndim = 1  # spatial dimensions of the input

    def __init__(self, in_channels: PositiveInt = 1, out_channels: PositiveInt = 1, d_model: PositiveInt = 96,
                 n_layers: PositiveInt = 4, n_head: PositiveInt = 1, dim_ff: PositiveInt = 192,
                 attention_type: str = "galerkin", norm_scheme: str = "galerkin", activation: str = "relu",
                 dropout: Fraction = 0.0, ffn_dropout: Fraction = 0.0, attention_dropout: Fraction = 0.0,
                 layer_norm_eps: PositiveFloat = 1e-5, xavier_gain: NonNegativeFloat = 0.01,
                 diagonal_weight: NonNegativeFloat = 0.01, decoder_width: PositiveInt = 48,
                 decoder_modes: PositiveInt = 16, decoder_layers: PositiveInt = 2, decoder_head_width: PositiveInt = 48,
                 decoder_activation: str = "silu", length: PositiveFloat = 1.0, periodic: bool = True) -> None:
        super().__init__()
        if min(in_channels, out_channels, d_model, n_layers, dim_ff) < 1:
            raise ConfigError("in_channels, out_channels, d_model, n_layers and dim_ff must be >= 1")
        self.length = length
        self.periodic = periodic
        self.feature_extractor = nn.Linear(in_channels, d_model)
        self.encoder = SimpleEncoder(
            n_layers, d_model, n_head=n_head, dim_ff=dim_ff, attention_type=attention_type, norm_scheme=norm_scheme,
            pos_dim=1, activation=activation, dropout=dropout, ffn_dropout=ffn_dropout,
            attention_dropout=attention_dropout, eps=layer_norm_eps, xavier_gain=xavier_gain,
            diagonal_weight=diagonal_weight,
        )
        self.decoder = SpectralRegressor(
            d_model,
            out_channels,
            width=decoder_width,
            modes=decoder_modes,
            n_layers=decoder_layers,
            head_width=decoder_head_width,
            activation=decoder_activation,
            ndim=1,
        )

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, n, in_channels)`` to ``(batch, n, out_channels)``."""
        if x.dim() != 3:
            raise ValueError(f"expected (batch, n, channels), got {tuple(x.shape)}")
        pos = grid_coordinates(
            (x.shape[1],), lengths=self.length, periodic=self.periodic, device=x.device, dtype=x.dtype
        )
        return self.decoder(self.encoder(self.feature_extractor(x), pos))
