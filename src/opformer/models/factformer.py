"""FactFormer (Li, Shu & Barati Farimani 2023, "Scalable Transformer for PDE Surrogate Modeling"), laid out as the
authors' code (BaratiLab/FactFormer) builds it, module for module, so that its weights map one to one
(:mod:`opformer.imports.factformer`; equality in float64 in tests/imports/test_factformer_import.py).

Time-dependent (``factformer2d``, ``factformer3d``): the ``t_in`` input frames -> the lift to ``d`` (``linear``:
one ``Linear`` of the frames as channels, their 2D model; ``channelwise``: their 3D models' per-channel affine map
to ``d/2`` features, GELU, a linear map of those features over the frames) -> ``padding`` zero cells appended at
the end of every axis -> layers (random Fourier features of the coordinates added before each, then a
factorised-attention block) -> the padding cropped -> with ``cnn_layers``, the closed-domain CNN's output
concatenated before the encoder's -> ``Linear`` to the latent width -> ``t_out`` latent-marching steps
``z <- z + e_j; z <- z + MLP(LN(z))`` (``MLP = latent -> d -> latent``, a learned embedding ``e_j`` per step) ->
every latent state decoded by the shared head ``GroupNorm -> grouped 1x1 (8 groups) -> GELU -> 1x1 to d/2 ->
GELU -> 1x1``: ``(batch, *spatial, t_in, c) -> (batch, *spatial, t_out, c)``.

Steady (``factformer2d_steady``, Darcy): ``Linear`` lift -> layers -> the closed-domain CNN concatenated before
the encoder's output -> ``GroupNorm -> 1x1 to d -> GELU -> 1x1``: ``(batch, n, n, c) -> (batch, n, n, c)``.

The closed-domain CNN (``cnn_layers`` = L >= 1; the authors' smoke and Darcy models have L = 2): a small U of
3x3(x3) convolutions with zero padding: instance norm, a stride-2 convolution to ``d/2`` and L - 1 more,
nearest-neighbour upsampling to the input's grid, L convolutions back to ``d`` (GELU between convolutions).

``attention="linear"`` swaps every factorised attention for the full-grid softmax-free linear attention of
:class:`opformer.nn.oformer_attention.OFormerAttention` with the same heads (the paper's section 4.3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from opformer.errors import CheckpointError, ConfigError, DataError
from opformer.grids import axis_points
from opformer.models.time_layout import check_frames, check_time_sizes, frames_to_channels
from opformer.nn.attention import check_choice
from opformer.nn.factorized_attention import GaussianFourierFeatures, MixerBlock, factorized_block, group_norm_last
from opformer.nn.domain_padding import crop_domain, pad_domain
from opformer.nn.oformer_attention import OFormerAttention
from opformer.validate import NonNegativeInt, PositiveFloat, PositiveInt

ATTENTIONS = ("factorized", "linear")
DECODER_CONV_GROUPS = 8  # the groups of the time models' first decoder convolution (the authors' constant)
#: a tensor that only FactFormers of opformer's earlier layout hold: biases in every block's output network (the
#: authors' layout, which opformer builds, has none)
OLD_LAYOUT_KEY = "encoder.blocks.0.out.0.bias"


def check_layout(name: str, state: Mapping[str, Tensor], prefix: str, where: str) -> None:
    """A one-line ``CheckpointError`` if ``state`` (keys under ``prefix``) holds a FactFormer (``name``) of the
    earlier layout, which does not load."""
    if name.startswith("factformer") and prefix + OLD_LAYOUT_KEY in state:
        raise CheckpointError(f"{where}: a FactFormer of opformer's earlier layout (biases in every block's output "
                              f"network: it has {prefix + OLD_LAYOUT_KEY}), which does not load; retrain it with this "
                              "version, or import the authors' weights with 'opformer import factformer'")


def grid_axes(shape: Sequence[int], length: float, periodic: bool, padding: int, device: torch.device,
              dtype: torch.dtype) -> list[Tensor]:
    """The coordinates of each axis of a grid of ``shape`` (:func:`opformer.grids.axis_points`), each extended by
    ``padding`` points at the grid's spacing past its end."""
    axes = []
    for n in shape:
        points = axis_points(n, length, periodic, device=device)
        if padding:
            step = points[1] - points[0] if n > 1 else torch.tensor(length, dtype=points.dtype, device=device)
            points = torch.cat([points, points[-1] + step * torch.arange(1, padding + 1, device=device)])
        axes.append(points.to(dtype))
    return axes


class FactFormerEncoder(nn.Module):
    """``n_layers`` of ``u <- u + Linear(GFF(x)); u <- block(u)`` on ``(batch, *spatial, d)``; each layer has its
    own frozen Fourier-feature matrix."""

    def __init__(self, ndim: int, d_model: int, n_head: int, head_dim: int, n_layers: int, kernel_multiplier: int,
                 block_latent: int | None, fourier_scale: float, rope_scale: float, attention: str) -> None:
        super().__init__()
        check_choice("attention", attention, ATTENTIONS)
        if min(d_model, n_head, head_dim, n_layers, kernel_multiplier) < 1:
            raise ConfigError("FactFormer sizes (d_model, n_head, head_dim, n_layers, kernel_multiplier) must be >= 1")
        self.ndim = ndim
        self.features = nn.ModuleList(GaussianFourierFeatures(ndim, d_model, fourier_scale) for _ in range(n_layers))
        self.positional = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_layers))
        if attention == "factorized":
            blocks = (factorized_block(d_model, n_head, head_dim, ndim, block_latent, kernel_multiplier, rope_scale)
                      for _ in range(n_layers))
        else:
            blocks = (MixerBlock(d_model, OFormerAttention(d_model, n_head, head_dim, ndim, rope_scale),
                                 n_head * head_dim, n_head) for _ in range(n_layers))
        self.blocks = nn.ModuleList(blocks)

    def forward(self, u: Tensor, axes: Sequence[Tensor]) -> Tensor:
        """Apply the layers to ``u`` ``(batch, *spatial, d)`` whose axis ``m`` has the coordinates ``axes[m]``."""
        pos = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)
        for features, positional, block in zip(self.features, self.positional, self.blocks):
            u = block(u + positional(features(pos)), axes)
        return u


class ChannelwiseLift(nn.Module):
    """The authors' 3D lift: each input channel's value times ``d/(2c)`` weights plus biases (their grouped 1x1
    convolution), GELU, then ``Linear(t_in * d/2, d, bias=False)`` over those features of all frames (their
    ``(t_in, 1)`` convolution): ``(batch, *spatial, t_in, c) -> (batch, *spatial, d)``."""

    def __init__(self, t_in: int, in_channels: int, d_model: int) -> None:
        super().__init__()
        hidden = d_model // 2
        if hidden < 1 or hidden % in_channels:
            raise ConfigError(f"lift 'channelwise': d_model / 2 ({hidden}) must be a multiple of in_channels "
                              f"({in_channels})")
        self.in_channels = in_channels
        self.weight = nn.Parameter(torch.rand(hidden) * 2 - 1)  # a 1x1 convolution's initialisation (fan-in 1)
        self.bias = nn.Parameter(torch.rand(hidden) * 2 - 1)
        self.mix = nn.Linear(t_in * hidden, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """Lift ``x`` ``(batch, *spatial, t_in, c)``."""
        h = x.repeat_interleave(self.weight.numel() // self.in_channels, dim=-1) * self.weight + self.bias
        return self.mix(F.gelu(h).transpose(-2, -1).flatten(-2))  # features of a channel, then frames


class GroupedLinear(nn.Module):
    """A 1x1 convolution of ``groups`` groups on the last axis, no bias: ``weight`` ``(out, in / groups)``."""

    def __init__(self, in_features: int, out_features: int, groups: int) -> None:
        super().__init__()
        if in_features % groups or out_features % groups:
            raise ConfigError(f"grouped layer: {in_features} inputs and {out_features} outputs must be multiples of "
                              f"{groups} groups")
        self.groups = groups
        bound = (groups / in_features) ** 0.5  # a convolution's default initialisation
        self.weight = nn.Parameter((torch.rand(out_features, in_features // groups) * 2 - 1) * bound)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the layer to the last axis of ``x``."""
        w = self.weight.unflatten(0, (self.groups, -1))  # (groups, out / groups, in / groups)
        return torch.einsum("...gi,goi->...go", x.unflatten(-1, (self.groups, -1)), w).flatten(-2)


class ClosedDomainCNN(nn.Module):
    """The authors' small U of 3x3(x3) convolutions with zero padding (see the module docstring) on a channel-last
    ``(batch, *spatial, d)``; the output has the input's shape."""

    def __init__(self, ndim: int, d_model: int, layers: int) -> None:
        super().__init__()
        if layers < 1 or d_model < 2:
            raise ConfigError(f"cnn_layers ({layers}) must be >= 1 and d_model ({d_model}) >= 2")
        conv = nn.Conv2d if ndim == 2 else nn.Conv3d
        norm = nn.InstanceNorm2d if ndim == 2 else nn.InstanceNorm3d
        half = d_model // 2
        down: list[nn.Module] = [norm(d_model), conv(d_model, half, 3, stride=2, padding=1)]
        up: list[nn.Module] = []
        for i in range(layers - 1):
            down += [nn.GELU(), conv(half, half, 3, padding=1)]
            up += [conv(half, half, 3, padding=1), nn.GELU()]
        self.down = nn.Sequential(*down)
        self.up = nn.Sequential(*up, conv(half, d_model, 3, padding=1))

    def forward(self, u: Tensor) -> Tensor:
        """Apply the block to ``u`` ``(batch, *spatial, d)``."""
        h = self.down(u.movedim(-1, 1))
        h = F.interpolate(h, size=tuple(u.shape[1:-1]), mode="nearest")
        return self.up(h).movedim(1, -1)


class LatentMarcher(nn.Module):
    """``steps`` latent steps ``z <- z + e_j; z <- z + MLP(LN(z))`` with ``MLP = Linear(latent, hidden) -> GELU ->
    Linear(hidden, latent)``; returns the ``steps`` latent states, each ``(batch, *spatial, latent)``."""

    def __init__(self, latent_dim: int, hidden: int, steps: int) -> None:
        super().__init__()
        self.step_embedding = nn.Parameter(torch.randn(steps, latent_dim) * 0.02)
        self.norm = nn.LayerNorm(latent_dim)
        self.mlp = nn.Sequential(nn.Linear(latent_dim, hidden), nn.GELU(), nn.Linear(hidden, latent_dim))

    def forward(self, z: Tensor) -> list[Tensor]:
        """March ``z`` ``(batch, *spatial, latent)``."""
        states = []
        for embedding in self.step_embedding:
            z = z + embedding
            z = z + self.mlp(self.norm(z))
            states.append(z)
        return states


class FactFormerTime(nn.Module):
    """FactFormer with latent marching on a grid of ``ndim`` axes (``factformer2d``, ``factformer3d``):
    ``(batch, *spatial, t_in, in_channels) -> (batch, *spatial, t_out, out_channels)``, ``t_out`` latent steps
    per call. The defaults are the paper's Kolmogorov model (authors' ``ns2d_fact_lm.yml``); ``factformer3d``
    defaults to their 3D turbulence model. ``cnn_layers`` > 0 adds the closed-domain CNN, ``padding`` the zero
    cells the authors append for their smoke model. See the module docstring."""

    def __init__(self, ndim: int, t_in: PositiveInt = 10, t_out: PositiveInt = 4, in_channels: PositiveInt = 1,
                 out_channels: PositiveInt | None = None, d_model: PositiveInt = 128, n_head: PositiveInt = 8,
                 head_dim: PositiveInt = 64, kernel_multiplier: PositiveInt = 2, n_layers: PositiveInt = 4,
                 latent_dim: PositiveInt = 256, block_latent: PositiveInt | None = None,
                 decoder_groups: PositiveInt = 16, lift: Literal["linear", "channelwise"] = "linear",
                 cnn_layers: NonNegativeInt = 0, padding: NonNegativeInt = 0, fourier_scale: PositiveFloat = 8.0,
                 rope_scale: PositiveFloat = 64.0, attention: str = "factorized", length: PositiveFloat = 1.0,
                 periodic: bool = True) -> None:
        super().__init__()
        out_channels = out_channels or in_channels
        check_time_sizes(t_in, t_out, in_channels, out_channels)
        if latent_dim < 1 or decoder_groups < 1 or latent_dim % decoder_groups:
            raise ConfigError(f"latent_dim ({latent_dim}) must be a positive multiple of decoder_groups "
                              f"({decoder_groups})")
        if cnn_layers < 0 or padding < 0:
            raise ConfigError(f"cnn_layers ({cnn_layers}) and padding ({padding}) must be >= 0")
        self.ndim, self.t_in, self.t_out, self.in_channels = ndim, t_in, t_out, in_channels
        self.decoder_groups, self.padding, self.length, self.periodic = decoder_groups, padding, length, periodic
        self.lift = nn.Linear(t_in * in_channels, d_model) if lift == "linear" else \
            ChannelwiseLift(t_in, in_channels, d_model)
        self.encoder = FactFormerEncoder(ndim, d_model, n_head, head_dim, n_layers, kernel_multiplier,
                                         block_latent, fourier_scale, rope_scale, attention)
        self.cnn = ClosedDomainCNN(ndim, d_model, cnn_layers) if cnn_layers else None
        self.expand = nn.Linear(d_model * (2 if cnn_layers else 1), latent_dim, bias=False)
        self.marcher = LatentMarcher(latent_dim, d_model, t_out)
        self.decoder_norm = nn.GroupNorm(decoder_groups, latent_dim)
        self.head = nn.Sequential(GroupedLinear(latent_dim, d_model, DECODER_CONV_GROUPS), nn.GELU(),
                                  nn.Linear(d_model, d_model // 2, bias=False), nn.GELU(),
                                  nn.Linear(d_model // 2, out_channels))

    def forward(self, x: Tensor) -> Tensor:
        """Predict the next ``t_out`` frames of ``x`` ``(batch, *spatial, t_in, in_channels)``."""
        if isinstance(self.lift, nn.Linear):
            h = self.lift(frames_to_channels(x, self.ndim, self.t_in, self.in_channels))
        else:
            check_frames(x, self.ndim, self.t_in, self.in_channels)
            h = self.lift(x)
        shape = tuple(h.shape[1:-1])
        axes = grid_axes(shape, self.length, self.periodic, self.padding, h.device, h.dtype)
        h = crop_domain(self.encoder(pad_domain(h, (False,) * self.ndim, self.padding), axes), shape)
        if self.cnn is not None:
            h = torch.cat([self.cnn(h), h], dim=-1)
        # the shared decoder normalizes each latent state on its own; decoding the states one by one (rather
        # than stacked, steps on the batch axis) saves two copies of all of them
        frames = [self.head(group_norm_last(z, self.decoder_groups, self.decoder_norm))
                  for z in self.marcher(self.expand(h))]
        return torch.stack(frames, dim=-2)


class FactFormer2dSteady(nn.Module):
    """FactFormer for a steady 2D operator (Darcy): ``(batch, n, n, in_channels) -> (batch, n, n, out_channels)``.

    ``Linear(in_channels, d)`` -> layers -> the closed-domain CNN (``cnn_layers``, 0 for none) concatenated before
    the encoder's output -> ``GroupNorm(decoder_groups)`` -> ``Linear(2d, d, bias=False)`` -> GELU ->
    ``Linear(d, out_channels)`` (the authors' Darcy model). The domain is the closed square (``periodic=False``:
    both ends of each axis are grid points).
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
        width = d_model * (2 if cnn_layers else 1)
        if decoder_groups < 1 or width % decoder_groups:
            raise ConfigError(f"the decoder's width ({width}) must be a multiple of decoder_groups ({decoder_groups})")
        self.decoder_groups, self.length, self.periodic = decoder_groups, length, periodic
        self.lift = nn.Linear(in_channels, d_model)
        self.encoder = FactFormerEncoder(2, d_model, n_head, head_dim, n_layers, kernel_multiplier, block_latent,
                                         fourier_scale, rope_scale, attention)
        self.cnn = ClosedDomainCNN(2, d_model, cnn_layers) if cnn_layers else None
        self.decoder_norm = nn.GroupNorm(decoder_groups, width)
        self.head = nn.Sequential(nn.Linear(width, d_model, bias=False), nn.GELU(), nn.Linear(d_model, out_channels))

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` ``(batch, n_1, n_2, in_channels)`` to ``(batch, n_1, n_2, out_channels)``."""
        if x.dim() != 4:
            raise DataError(f"FactFormer2dSteady: expected (batch, n_1, n_2, channels), got {tuple(x.shape)}")
        h = self.lift(x)
        h = self.encoder(h, grid_axes(h.shape[1:-1], self.length, self.periodic, 0, h.device, h.dtype))
        if self.cnn is not None:
            h = torch.cat([self.cnn(h), h], dim=-1)
        return self.head(group_norm_last(h, self.decoder_groups, self.decoder_norm))
