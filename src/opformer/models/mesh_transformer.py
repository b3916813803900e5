"""The Galerkin / Fourier Transformer on meshes: attention whose sums over points are quadratures.

Cao (2021) reads the Galerkin-type attention as a Petrov-Galerkin projection, ``integral k(x) v(x) dx``; on a mesh
the integral is the quadrature ``sum_i w_i k_i v_i`` with the mesh's weights, so the model is an operator on
functions rather than on point sets: the same field meshed twice gives (to the quadrature's accuracy) the same
answer (``../shared/spec/mesh.md``). With ``weighting="uniform"`` the sums are plain means over the points, as in the
published mesh baselines.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.models.mesh_batch import WEIGHTINGS, check_mesh_batch, sum_weights
from opformer.nn.attention import check_choice
from opformer.nn.encoder import SimpleEncoder
from opformer.nn.positional import fourier_features
from opformer.nn.regressors import PointwiseRegressor
from opformer.validate import Fraction, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

#: What the lift sees of the coordinates besides the input fields (the heads always see the raw coordinates).
COORDINATE_ENCODINGS = ("raw", "fourier", "none")


class MeshGalerkinTransformer(nn.Module):
    """Point-wise lift -> simple-attention encoder weighted by quadrature -> point-wise regressor, on any mesh.

    ``model(x, pos, weights, mask)``: ``x (B, N, in_channels)`` (``in_channels`` may be 0, the input then being the
    coordinates alone), ``pos (B, N, space_dim)``, ``weights (B, N)``, ``mask (B, N)``
    (:mod:`opformer.models.mesh_batch`); returns ``(B, N, out_channels)``, zero on padding.

    - Lift: ``Linear(in_channels + e, d_model)`` of the fields and the coordinate encoding ``e``: the raw coordinates
      (``"raw"``), those and ``sin, cos(2 pi k x_j)`` for ``k <= fourier_modes`` (``"fourier"``), or none (``"none"``).
    - Encoder: the paper's layers (:class:`~opformer.nn.encoder.SimpleEncoder`: its layer-norm scheme, the diagonal
      initialisation ``xavier_gain``, ``diagonal_weight``), the raw coordinates in every head, and every sum over
      points weighted: galerkin ``Q (K^T diag(w) V)``, fourier ``(Q K^T) diag(w) V``, softmax ``softmax(s + log w)``.
      ``weighting``: ``"quadrature"`` (the mesh's weights) or ``"uniform"`` (``1 / n`` on every real point).
    - Regressor: :class:`~opformer.nn.regressors.PointwiseRegressor` of the latent field and the coordinates.
    """

    mesh = True  # called as model(x, pos, weights, mask)

    def __init__(self, in_channels: NonNegativeInt = 0, out_channels: PositiveInt = 1, space_dim: PositiveInt = 2,
                 d_model: PositiveInt = 128, n_layers: PositiveInt = 4, n_head: PositiveInt = 4,
                 dim_ff: PositiveInt = 256, attention_type: str = "galerkin", norm_scheme: str = "galerkin",
                 activation: str = "relu", dropout: Fraction = 0.0, ffn_dropout: Fraction = 0.0,
                 attention_dropout: Fraction = 0.0, layer_norm_eps: PositiveFloat = 1e-5,
                 xavier_gain: NonNegativeFloat = 0.01, diagonal_weight: NonNegativeFloat = 0.01,
                 coordinate_encoding: str = "raw", fourier_modes: NonNegativeInt = 8, weighting: str = "quadrature",
                 decoder_width: PositiveInt = 128, decoder_layers: PositiveInt = 2, decoder_activation: str = "silu",
                 decoder_dropout: Fraction = 0.0) -> None:
        super().__init__()
        check_choice("coordinate_encoding", coordinate_encoding, COORDINATE_ENCODINGS)
        check_choice("weighting", weighting, WEIGHTINGS)
        self.in_channels, self.space_dim, self.weighting = in_channels, space_dim, weighting
        self.fourier_modes = fourier_modes if coordinate_encoding == "fourier" else 0
        self.encodes_coordinates = coordinate_encoding != "none"
        lift_in = in_channels + (space_dim * (1 + 2 * self.fourier_modes) if self.encodes_coordinates else 0)
        if lift_in == 0:
            raise ConfigError("model: in_channels is 0 and coordinate_encoding is 'none': the model sees no input")
        self.lift = nn.Linear(lift_in, d_model)
        self.encoder = SimpleEncoder(
            n_layers, d_model, n_head=n_head, dim_ff=dim_ff, attention_type=attention_type, norm_scheme=norm_scheme,
            pos_dim=space_dim, activation=activation, dropout=dropout, ffn_dropout=ffn_dropout,
            attention_dropout=attention_dropout, eps=layer_norm_eps, xavier_gain=xavier_gain,
            diagonal_weight=diagonal_weight,
        )
        self.regressor = PointwiseRegressor(d_model + space_dim, out_channels, decoder_width, n_layers=decoder_layers,
                                            activation=decoder_activation, dropout=decoder_dropout)

    def encode(self, x: Tensor, pos: Tensor, weights: Tensor, mask: Tensor) -> Tensor:
        """The latent field ``(B, N, d_model)`` after the encoder (padded points zeroed on the way in)."""
        check_mesh_batch(type(self).__name__, x, pos, weights, mask, self.in_channels, self.space_dim)
        keep = mask.unsqueeze(-1).to(pos.dtype)
        pos = pos * keep  # padding holds any finite values; zero weight keeps it out of every sum
        features = [x * keep] if self.in_channels else []
        if self.encodes_coordinates:
            features.append(fourier_features(pos, self.fourier_modes))
        h = self.lift(torch.cat(features, dim=-1))
        return self.encoder(h, pos, sum_weights(weights.to(pos.dtype), mask, self.weighting))

    def forward(self, x: Tensor, pos: Tensor, weights: Tensor, mask: Tensor) -> Tensor:
        """Map the input fields on the mesh to ``(B, N, out_channels)``, zero on padding."""
        h = self.encode(x, pos, weights, mask)
        keep = mask.unsqueeze(-1).to(h.dtype)
        return self.regressor(torch.cat([h, pos * keep], dim=-1)) * keep
