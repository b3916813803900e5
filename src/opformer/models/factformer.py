"""FactFormer (Li, Shu & Barati Farimani 2023, "Scalable Transformer for PDE Surrogate Modeling").

Time-dependent (``factformer2d``, ``factformer3d``): the ``t_in`` input frames as channels -> ``Linear`` to ``d``
-> layers (random Fourier features of the coordinates added before each, then a factorised-attention block)
-> ``Linear`` to the latent width -> ``t_out`` latent-marching steps ``z <- z + e_j; z <- z + MLP(LN(z))`` (a
learned embedding ``e_j`` per step) -> every latent state decoded by the shared ``GroupNorm + 1x1`` head:
``(batch, *spatial, t_in, c) -> (batch, *spatial, t_out, c)``.

Steady (``factformer2d_steady``, Darcy): ``Linear`` lift -> layers -> ``GroupNorm`` -> a small CNN of 3x3
convolutions with zero padding (for the Dirichlet boundary) -> ``1x1``: ``(batch, n, n, c) -> (batch, n, n, c)``.

``attention="linear"`` swaps every factorised attention for the full-grid softmax-free linear attention of
:class:`opformer.nn.oformer_attention.OFormerAttention` with the same heads (the paper's section 4.3).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from opformer.errors import ConfigError, DataError
from opformer.models.time_layout import check_time_sizes, frames_to_channels
from opformer.nn.attention import check_choice
from opformer.nn.factorized_attention import GaussianFourierFeatures, MixerBlock, factorized_block, group_norm_last
from opformer.nn.oformer_attention import OFormerAttention
from opformer.nn.positional import grid_coordinates
from opformer.validate import NonNegativeInt, PositiveFloat, PositiveInt

ATTENTIONS = ("factorized", "linear")


class FactFormerEncoder(nn.Module):
    """``n_layers`` of ``u <- u + Linear(GFF(x)); u <- block(u)`` on ``(batch, *spatial, d)``.

    The coordinates are built from the grid's shape (``length``, ``periodic`` as in
    :func:`opformer.nn.positional.grid_coordinates`); each layer has its own frozen Fourier-feature matrix.
    """

    def __init__(self, ndim: int, d_model: int, n_head: int, head_dim: int, n_layers: int, kernel_multiplier: int,
                 block_latent: int | None, fourier_scale: float, rope_scale: float, attention: str, length: float,
                 periodic: bool) -> None:
        super().__init__()
        check_choice("attention", attention, ATTENTIONS)
        if min(d_model, n_head, head_dim, n_layers, kernel_multiplier) < 1:
            raise ConfigError("FactFormer sizes (d_model, n_head, head_dim, n_layers, kernel_multiplier) must be >= 1")
        self.ndim, self.length, self.periodic = ndim, length, periodic
        self.features = nn.ModuleList(GaussianFourierFeatures(ndim, d_model, fourier_scale) for _ in range(n_layers))
        self.positional = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_layers))
        if attention == "factorized":
            blocks = (factorized_block(d_model, n_head, head_dim, ndim, block_latent, kernel_multiplier, rope_scale)
                      for _ in range(n_layers))
        else:
            blocks = (MixerBlock(d_model, OFormerAttention(d_model, n_head, head_dim, ndim, rope_scale),
                                 n_head * head_dim, n_head) for _ in range(n_layers))
        self.blocks = nn.ModuleList(blocks)

    def forward(self, u: Tensor) -> Tensor:
        """Apply the layers to ``u`` ``(batch, *spatial, d)``."""
        shape = tuple(u.shape[1:-1])
        pos = grid_coordinates(shape, lengths=self.length, periodic=self.periodic, device=u.device, dtype=u.dtype)
        axes = [grid_coordinates((n,), lengths=self.length, periodic=self.periodic, device=u.device,
                                 dtype=u.dtype)[:, 0] for n in shape]
        for features, positional, block in zip(self.features, self.positional, self.blocks):
            u = block(u + positional(features(pos)), axes)
        return u


class LatentMarcher(nn.Module):
    """``steps`` latent steps ``z <- z + e_j; z <- z + MLP(LN(z))`` with ``MLP = Linear -> GELU -> Linear``;
    returns the ``steps`` latent states, each ``(batch, *spatial, latent)``."""

    def __init__(self, latent_dim: int, steps: int) -> None:
        super().__init__()
        self.step_embedding = nn.Parameter(torch.randn(steps, latent_dim) * 0.02)
        self.norm = nn.LayerNorm(latent_dim)
        self.mlp = nn.Sequential(nn.Linear(latent_dim, latent_dim), nn.GELU(), nn.Linear(latent_dim, latent_dim))

    def forward(self, z: Tensor) -> list[Tensor]:
        """March ``z`` ``(batch, *spatial, latent)``."""
        states = []
        for embedding in self.step_embedding:
            z = z + embedding
            z = z + self.mlp(self.norm(z))
            states.append(z)
        return states


class FactFormerTime(nn.Module):
    """FactFormer with latent marching on a periodic grid of ``ndim`` axes (``factformer2d``, ``factformer3d``):
    ``(batch, *spatial, t_in, in_channels) -> (batch, *spatial, t_out, out_channels)``, ``t_out`` latent steps
    per call. The defaults are the paper's Kolmogorov model; ``factformer3d`` defaults to its 3D turbulence model
    (``t_out`` 2, 3 channels, 6 heads, kernel multiplier 3). See the module docstring."""

    def __init__(self, ndim: int, t_in: PositiveInt = 10, t_out: PositiveInt = 4, in_channels: PositiveInt = 1,
                 out_channels: PositiveInt | None = None, d_model: PositiveInt = 128, n_head: PositiveInt = 8,
                 head_dim: PositiveInt = 64, kernel_multiplier: PositiveInt = 2, n_layers: PositiveInt = 4,
                 latent_dim: PositiveInt = 256, block_latent: PositiveInt | None = None,
                 decoder_groups: PositiveInt = 8, fourier_scale: PositiveFloat = 8.0, rope_scale: PositiveFloat = 64.0,
                 attention: str = "factorized", length: PositiveFloat = 1.0, periodic: bool = True) -> None:
        super().__init__()
        out_channels = out_channels or in_channels
        check_time_sizes(t_in, t_out, in_channels, out_channels)
        if latent_dim < 1 or decoder_groups < 1 or latent_dim % decoder_groups:
            raise ConfigError(f"latent_dim ({latent_dim}) must be a positive multiple of decoder_groups "
                              f"({decoder_groups})")
        self.ndim, self.t_in, self.t_out, self.in_channels = ndim, t_in, t_out, in_channels
        self.decoder_groups = decoder_groups
        self.lift = nn.Linear(t_in * in_channels, d_model)
        self.encoder = FactFormerEncoder(ndim, d_model, n_head, head_dim, n_layers, kernel_multiplier,
                                         block_latent, fourier_scale, rope_scale, attention, length, periodic)
        self.expand = nn.Linear(d_model, latent_dim, bias=False)
        self.marcher = LatentMarcher(latent_dim, t_out)
        self.decoder_norm = nn.GroupNorm(decoder_groups, latent_dim)
        self.head = nn.Linear(latent_dim, out_channels)

    def forward(self, x: Tensor) -> Tensor:
        """Predict the next ``t_out`` frames of ``x`` ``(batch, *spatial, t_in, in_channels)``."""
        h = self.encoder(self.lift(frames_to_channels(x, self.ndim, self.t_in, self.in_channels)))
        # the shared decoder normalises each latent state on its own; decoding the states one by one (rather
        # than stacked, steps on the batch axis) saves two copies of all of them: 8% of a training step
        frames = [self.head(group_norm_last(z, self.decoder_groups, self.decoder_norm))
                  for z in self.marcher(self.expand(h))]
        return torch.stack(frames, dim=-2)


class FactFormer2dSteady(nn.Module):
    """FactFormer for a steady 2D operator (Darcy): ``(batch, n, n, in_channels) -> (batch, n, n, out_channels)``.

    ``Linear(in_channels, d)`` -> layers -> ``GroupNorm(decoder_groups, d)`` -> ``cnn_layers`` x (3x3 convolution
    ``d -> d`` with zero padding, GELU) -> ``1x1`` convolution to ``out_channels``. The domain is the closed
    square (``periodic=False``: both ends of each axis are grid points).
    """

    ndim = 2

    def __init__(self, in_channels: PositiveInt = 1, out_channels: PositiveInt = 1, d_model: PositiveInt = 128,
                 n_head: PositiveInt = 12, head_dim: PositiveInt = 64, kernel_multiplier: PositiveInt = 2,
                 n_layers: PositiveInt = 3, block_latent: PositiveInt | None = None, cnn_layers: NonNegativeInt = 2,
                 decoder_groups: PositiveInt = 8, fourier_scale: PositiveFloat = 1.0, rope_scale: PositiveFloat = 64.0,
                 attention: str = "factorized", length: PositiveFloat = 1.0, periodic: bool = False) -> None:
        super().__init__()
        if min(in_channels, out_channels) < 1 or cnn_layers < 0:
            raise ConfigError("in_channels, out_channels must be >= 1 and cnn_layers >= 0")
        if decoder_groups < 1 or d_model % decoder_groups:
            raise ConfigError(f"d_model ({d_model}) must be a multiple of decoder_groups ({decoder_groups})")
        self.decoder_groups = decoder_groups
        self.lift = nn.Linear(in_channels, d_model)
        self.encoder = FactFormerEncoder(2, d_model, n_head, head_dim, n_layers, kernel_multiplier, block_latent,
                                         fourier_scale, rope_scale, attention, length, periodic)
        self.decoder_norm = nn.GroupNorm(decoder_groups, d_model)
        layers: list[nn.Module] = []
        for _ in range(cnn_layers):
            layers += [nn.Conv2d(d_model, d_model, 3, padding=1), nn.GELU()]
        self.cnn = nn.Sequential(*layers, nn.Conv2d(d_model, out_channels, 1))

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, n_1, n_2, in_channels)`` to ``(batch, n_1, n_2, out_channels)``."""
        if x.dim() != 4:
            raise DataError(f"FactFormer2dSteady: expected (batch, n_1, n_2, channels), got {tuple(x.shape)}")
        h = self.encoder(self.lift(x))
        h = self.decoder_norm(h.movedim(-1, 1))
        return self.cnn(h).movedim(1, -1)
