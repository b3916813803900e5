"""DPOT (Hao et al. 2024, "Auto-Regressive Denoising Operator Transformer for Large-Scale PDE Pre-Training").

``(batch, *spatial, t_in, c) -> (batch, *spatial, t_out, c)`` in 2D (``dpot2d``) or 3D (``dpot3d``):

1. coordinates ``(x, y[, z], t)`` appended to every frame, each ``linspace(0, 1)`` with both ends (the authors';
   a periodic grid's points are ``i / n``, so this is slightly off there, kept for their weights);
2. ``patch_embed`` per frame: ``Conv(c + ndim + 1 -> c * P + ndim + 1, kernel P, stride P) -> GELU -> 1x1``
   to the width ``E``; then the learned ``pos_embed`` ``(E, *latent)``, the same for every frame, linearly
   resampled (periodically if ``periodic``) when the latent grid is not the one it was built for
   (``grid_size / P`` per axis);
3. ``time_agg``: :class:`~opformer.nn.temporal_aggregation.TemporalAggregation` of the ``t_in`` frames;
4. ``blocks``: ``depth`` x ``zh = GN1(z); y = zh + FourierMixer(zh); z <- z + MLP(GN2(y))`` (GroupNorm of 8
   groups, MLP ``E -> rE -> GELU -> E``; no skip of ``z`` around the mixer, as the authors);
5. ``head``: ``ConvTranspose(E -> D, kernel P, stride P) -> GELU -> 1x1 D -> D -> GELU -> 1x1 -> t_out * c``;
6. optional ``classifier`` (``n_classes``): mean over the latent grid -> ``Linear E->E, GELU, E->E, GELU,
   -> n_classes``, the data-set classifier the authors train with loss weight 0 (counted in their sizes).

The spatial size must be a multiple of the patch size (a one-line ``DataError`` otherwise; no padding, which
would put a seam into periodic data).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from opformer.errors import ConfigError, DataError
from opformer.models.time_layout import check_frames, check_time_sizes
from opformer.nn.factorized_attention import group_norm_last
from opformer.nn.fourier_mixer import FourierMixer
from opformer.nn.mlp import FeedForward
from opformer.nn.patch import PatchConv, PatchConvTranspose, PointwiseConv
from opformer.nn.resample import linear_resample
from opformer.nn.temporal_aggregation import TemporalAggregation
from opformer.validate import NonNegativeFloat, PositiveInt

GROUPS = 8  # GroupNorm groups of every block


class DPOTBlock(nn.Module):
    """``zh = GN1(z); y = zh + mixer(zh); z + MLP(GN2(y))`` on channel-last ``(batch, *latent, width)``."""

    def __init__(self, width: int, n_heads: int, ndim: int, mlp_width: int, modes: int | None, shrink: float,
                 fft_norm: str, both_signs: bool = True, last_modes: int | None = None) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(GROUPS, width)
        self.mixer = FourierMixer(width, n_heads, ndim, modes, shrink, fft_norm, both_signs, last_modes)
        self.norm2 = nn.GroupNorm(GROUPS, width)
        self.mlp = FeedForward(width, mlp_width, activation="gelu")

    def forward(self, z: Tensor) -> Tensor:
        """Apply the block to ``z`` ``(batch, *latent, width)``."""
        zh = group_norm_last(z, GROUPS, self.norm1)
        y = zh + self.mixer(zh)
        return z + self.mlp(group_norm_last(y, GROUPS, self.norm2))


def frame_coordinates(spatial: tuple[int, ...], frames: int, dtype: torch.dtype,
                      device: torch.device) -> Tensor:
    """``(*spatial, frames, ndim + 1)``: the coordinates ``(x, y[, z], t)``, each ``linspace(0, 1)`` with both
    ends (the authors' convention, also on periodic grids)."""
    axes = [torch.linspace(0, 1, n, dtype=torch.float64, device=device) for n in (*spatial, frames)]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).to(dtype)  # built where used: no copy


class DPOT(nn.Module):
    """DPOT on ``(batch, *spatial, t_in, in_channels) -> (batch, *spatial, t_out, out_channels)`` with
    ``ndim`` 2 or 3 spatial axes (see the module docstring). ``width`` E, ``depth`` blocks of ``n_heads`` heads,
    ``mlp_ratio`` r, ``head_width`` D, ``patch_size`` P; ``grid_size`` the input size ``pos_embed`` is built
    for; ``modes`` kept per axis (``None``: all); ``shrink`` AFNO's soft-shrink (0: off); ``fft_norm`` the
    mixer's transform (``"ortho"``: the authors'). The defaults are the authors' Ti without the classifier.

    Options that reproduce checkpoints of the authors' code (``opformer import dpot``): ``modes_kept``
    ``"positive"`` keeps only the frequencies ``0..m-1`` of the two-sided axes (their ``[:m, :m]``; the
    default ``"both_signs"`` keeps ``-m..m-1``, the same wherever ``2m`` covers the latent grid, as at the
    released 128^2 with patch 8); ``last_modes`` the modes of the last (half-spectrum) axis if not ``modes``
    (their 3D mixer keeps 8); ``embed_width`` the patch embedding's hidden width if not
    ``in_channels * P + ndim + 1`` (theirs is ``out_channels * P + ndim + 1``); ``mlp_width`` the blocks' MLP
    width if not ``mlp_ratio * width``.
    """

    #: its learned ``pos_embed`` is built for one grid: the weights fix the grid the inputs are resized to
    fixed_grid = True

    def __init__(self, ndim: int, t_in: PositiveInt = 10, t_out: PositiveInt = 1, in_channels: PositiveInt = 4,
                 out_channels: PositiveInt | None = None, patch_size: PositiveInt = 8, grid_size: PositiveInt = 128,
                 width: PositiveInt = 512, depth: PositiveInt = 4, n_heads: PositiveInt = 4,
                 mlp_ratio: PositiveInt = 1, head_width: PositiveInt = 32, modes: PositiveInt | None = 32,
                 shrink: NonNegativeFloat = 0.0, fft_norm: Literal["ortho", "forward"] = "ortho",
                 n_classes: PositiveInt | None = None, periodic: bool = True,
                 modes_kept: Literal["both_signs", "positive"] = "both_signs", last_modes: PositiveInt | None = None,
                 embed_width: PositiveInt | None = None, mlp_width: PositiveInt | None = None) -> None:
        super().__init__()
        if ndim not in (2, 3):
            raise ConfigError(f"DPOT supports 2 or 3 spatial dimensions, got {ndim}")
        out_channels = out_channels or in_channels
        check_time_sizes(t_in, t_out, in_channels, out_channels)
        if width % n_heads or width % GROUPS:
            raise ConfigError(f"model.width: {width} must be a multiple of n_heads ({n_heads}) and of {GROUPS}")
        if grid_size % patch_size:
            raise ConfigError(f"model.grid_size: {grid_size} must be a multiple of patch_size ({patch_size})")
        self.ndim, self.t_in, self.t_out, self.in_channels, self.out_channels = ndim, t_in, t_out, in_channels, \
            out_channels
        self.patch_size, self.periodic = patch_size, periodic
        coords = ndim + 1
        hidden = embed_width or in_channels * patch_size + coords
        self.patch_embed = nn.Sequential(PatchConv(in_channels + coords, hidden, patch_size, ndim),
                                         nn.GELU(), PointwiseConv(hidden, width, ndim))
        self.pos_embed = nn.Parameter(torch.empty(width, *[grid_size // patch_size] * ndim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.time_agg = TemporalAggregation(t_in, width)
        self.blocks = nn.ModuleList(DPOTBlock(width, n_heads, ndim, mlp_width or mlp_ratio * width, modes, shrink,
                                              fft_norm, modes_kept == "both_signs", last_modes)
                                    for _ in range(depth))
        self.head = nn.Sequential(PatchConvTranspose(width, head_width, patch_size, ndim), nn.GELU(),
                                  PointwiseConv(head_width, head_width, ndim), nn.GELU(),
                                  PointwiseConv(head_width, t_out * out_channels, ndim))
        self.classifier = None if n_classes is None else nn.Sequential(
            nn.Linear(width, width), nn.GELU(), nn.Linear(width, width), nn.GELU(), nn.Linear(width, n_classes))

    def encode(self, x: Tensor) -> Tensor:
        """The latent field ``(batch, *latent, width)`` after the blocks, of ``x``
        ``(batch, *spatial, t_in, in_channels)``."""
        check_frames(x, self.ndim, self.t_in, self.in_channels)
        spatial = tuple(x.shape[1:1 + self.ndim])
        if any(n % self.patch_size for n in spatial):
            raise DataError(f"DPOT: grid {'x'.join(map(str, spatial))} is not a multiple of patch_size "
                            f"{self.patch_size}")
        coords = frame_coordinates(spatial, self.t_in, x.dtype, x.device)
        x = torch.cat([x, coords.expand(x.shape[0], *coords.shape)], dim=-1)
        patchify, activation, project = self.patch_embed
        h = activation(patchify(x))  # (batch, *latent, t, hidden): every frame patched alike, channel-last
        pos = linear_resample(self.pos_embed, tuple(h.shape[1:1 + self.ndim]), self.periodic).movedim(0, -1)
        # the last 1x1 layer, pos_embed and the aggregation are linear: aggregated as one product, without the
        # (batch, *latent, t, E) frames (TemporalAggregation.forward_linear)
        z = self.time_agg.forward_linear(h, project.weight.flatten(1), project.bias + pos)
        for block in self.blocks:
            z = block(z)
        return z

    def decode(self, z: Tensor) -> Tensor:
        """The prediction ``(batch, *spatial, t_out, out_channels)`` from the latent ``z``."""
        return self.head(z).unflatten(-1, (self.t_out, self.out_channels))

    def classify(self, z: Tensor) -> Tensor:
        """Logits ``(batch, n_classes)`` of the data-set classifier from the latent ``z``."""
        if self.classifier is None:
            raise ConfigError("DPOT built without a classifier (n_classes null)")
        return self.classifier(z.mean(dim=tuple(range(1, 1 + self.ndim))))

    def forward(self, x: Tensor) -> Tensor:
        """Predict the next ``t_out`` frames of ``x`` ``(batch, *spatial, t_in, in_channels)``."""
        return self.decode(self.encode(x))
