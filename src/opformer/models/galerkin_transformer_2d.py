"""Galerkin / Fourier Transformer operator learner on 2D grids (Cao 2021, Examples 5.2 and 5.3).

Fine grid ``n_f x n_f`` -> down-sampling CiNN -> ``n_c x n_c`` tokens with their 2D coordinates -> simple-
attention encoder -> either (forward problem) up-sampling CiNN back to ``n_f``, fine-grid coordinates,
``Linear(d + 2, width)`` and a 2D spectral regressor, or (inverse problem) a point-wise MLP regressor on the
coarse grid. The domain is the closed unit square (both ends of each axis are grid points).
"""

from __future__ import annotations

from torch import Tensor, nn

from opformer.errors import ConfigError, DataError
from opformer.nn.attention import check_choice
from opformer.nn.encoder import SimpleEncoder
from opformer.nn.interp_cnn import DownsampleCiNN, UpsampleCiNN
from opformer.nn.positional import append_coordinates, grid_coordinates
from opformer.nn.regressors import PointwiseRegressor, SpectralRegressor
from opformer.validate import Fraction, NonNegativeFloat, PositiveFloat, PositiveInt

DECODERS = ("spectral", "pointwise")


class GalerkinTransformer2d(nn.Module):
    """2D simple-attention operator learner; the defaults are the paper's forward Darcy model at
    ``(n_f, n_c) = (141, 43)`` (2,220,829 parameters; any ``n_f`` works, ``coarse_size`` fixes ``n_c``).

    Input ``(batch, n_f, n_f, in_channels)``. Output ``(batch, n_f, n_f, out_channels)`` with the spectral
    decoder, ``(batch, n_c, n_c, out_channels)`` with the point-wise one. Dropouts as in the paper's Table 7:
    ``attention_dropout`` on the attention weights, ``ffn_dropout`` inside the FFN, ``downsample_dropout``
    and ``upsample_dropout`` in the CiNNs, ``decoder_dropout`` in the point-wise regressor.
    """

    ndim = 2  # spatial dimensions of the input

    def __init__(self, in_channels: PositiveInt = 1, out_channels: PositiveInt = 1, coarse_size: PositiveInt = 43,
                 d_model: PositiveInt = 128, n_layers: PositiveInt = 6, n_head: PositiveInt = 4,
                 dim_ff: PositiveInt = 256, attention_type: str = "galerkin", norm_scheme: str = "galerkin",
                 activation: str = "relu", dropout: Fraction = 0.0, ffn_dropout: Fraction = 0.05,
                 attention_dropout: Fraction = 0.1, downsample_dropout: Fraction = 0.05,
                 upsample_dropout: Fraction = 0.0, layer_norm_eps: PositiveFloat = 1e-7,
                 xavier_gain: NonNegativeFloat = 0.01, diagonal_weight: NonNegativeFloat = 0.01,
                 decoder: str = "spectral", decoder_width: PositiveInt = 32, decoder_modes: PositiveInt = 12,
                 decoder_layers: PositiveInt = 2, decoder_head_width: PositiveInt = 128,
                 decoder_activation: str = "silu", decoder_dropout: Fraction = 0.0,
                 length: PositiveFloat = 1.0) -> None:
        super().__init__()
        check_choice("decoder", decoder, DECODERS)
        if min(in_channels, out_channels, d_model, n_layers, dim_ff, decoder_width, decoder_layers) < 1:
            raise ConfigError("channels, d_model, n_layers, dim_ff, decoder_width and decoder_layers must be >= 1")
        if coarse_size < 2:
            raise ConfigError(f"coarse_size: expected at least 2 grid points, got {coarse_size}")
        self.coarse_size = coarse_size
        self.length = length
        self.decoder_type = decoder
        self.downsample = DownsampleCiNN(in_channels, d_model, coarse_size, dropout=downsample_dropout)
        self.encoder = SimpleEncoder(
            n_layers, d_model, n_head=n_head, dim_ff=dim_ff, attention_type=attention_type, norm_scheme=norm_scheme,
            pos_dim=2, activation=activation, dropout=dropout, ffn_dropout=ffn_dropout,
            attention_dropout=attention_dropout, eps=layer_norm_eps, xavier_gain=xavier_gain,
            diagonal_weight=diagonal_weight,
        )
        if decoder == "spectral":
            self.upsample = UpsampleCiNN(d_model, dropout=upsample_dropout)
            self.lift = nn.Linear(d_model + 2, decoder_width)
            self.regressor = SpectralRegressor(
                decoder_width, out_channels, width=decoder_width, modes=decoder_modes, n_layers=decoder_layers,
                head_width=decoder_head_width, activation=decoder_activation, ndim=2,
            )
        else:
            self.regressor = PointwiseRegressor(d_model + 2, out_channels, decoder_width, n_layers=decoder_layers,
                                                activation=decoder_activation, dropout=decoder_dropout)

    def _coordinates(self, n: int, x: Tensor) -> Tensor:
        return grid_coordinates((n, n), lengths=self.length, periodic=False, device=x.device, dtype=x.dtype)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, n_f, n_f, in_channels)`` to the output field (see the class docstring)."""
        if x.dim() != 4 or x.shape[1] != x.shape[2]:
            raise DataError(f"GalerkinTransformer2d: expected a square grid (batch, n, n, channels), got "
                            f"{tuple(x.shape)}")
        fine = x.shape[1]
        if fine < self.coarse_size:
            raise DataError(f"GalerkinTransformer2d: the coarse grid ({self.coarse_size}) is larger than the "
                            f"input grid ({fine})")
        batch, n_c = x.shape[0], self.coarse_size
        h = self.downsample(x)
        coarse_pos = self._coordinates(n_c, h)
        h = h.reshape(batch, n_c * n_c, -1)
        h = self.encoder(h, coarse_pos.reshape(n_c * n_c, 2)).reshape(batch, n_c, n_c, -1)
        if self.decoder_type == "pointwise":
            return self.regressor(append_coordinates(h, coarse_pos))
        h = self.upsample(h, (fine, fine))
        return self.regressor(self.lift(append_coordinates(h, self._coordinates(fine, h))))
