"""Interpolation-based CNNs (CiNN) of the Galerkin Transformer (Cao 2021, appendix B, Figures 6-7).

They move 2D fields between the fine grid of the data (``n_f x n_f``) and the coarse grid of the attention
tokens (``n_c x n_c``) by bilinear interpolation (``align_corners=True``: both grids hold the two ends of
the closed domain) through an intermediate grid of ``round(sqrt(n_f n_c))`` points per axis
(141 -> 78 -> 43, 211 -> 113 -> 61, 141 -> 71 -> 36, 85 -> 50 -> 29). Tensors are channel-last.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from opformer.nn.dropout import Dropout


def intermediate_size(fine: int, coarse: int) -> int:
    """The grid between a fine and a coarse grid: ``round(sqrt(fine * coarse))`` points per axis."""
    return round(math.sqrt(fine * coarse))


def _conv3x3(c_in: int, c_out: int) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False)


def split_channels(total: int, parts: int = 3) -> list[int]:
    """Split ``total`` channels into ``parts`` near-equal groups, the remainder in the last (128 -> 42, 42, 44)."""
    base = total // parts
    return [base] * (parts - 1) + [total - base * (parts - 1)]


class DownsampleCiNN(nn.Module):
    """Fine grid -> coarse grid with a channel expansion to ``channels``.

    ``Conv3x3(in -> channels) -> ReLU -> bilinear to the intermediate grid -> three chained Conv3x3
    (channels -> c1 -> c2 -> c3, with c1 + c2 + c3 = channels) whose outputs are stacked -> dropout ->
    bilinear to the coarse grid -> ReLU``. No convolution has a bias (the paper's parameter count).
    """

    def __init__(self, in_channels: int, channels: int, coarse_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.coarse_size = coarse_size
        self.lift = _conv3x3(in_channels, channels)
        widths = split_channels(channels)
        self.convs = nn.ModuleList(_conv3x3(c_in, c_out) for c_in, c_out in zip([channels] + widths[:-1], widths))
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """``(batch, n_f, n_f, in_channels)`` -> ``(batch, n_c, n_c, channels)``."""
        fine = x.shape[1]
        mid = intermediate_size(fine, self.coarse_size)
        h = F.relu(self.lift(x.permute(0, 3, 1, 2)))
        h = F.interpolate(h, size=(mid, mid), mode="bilinear", align_corners=True)
        stacked = []
        for conv in self.convs:
            h = conv(h)
            stacked.append(h)
        h = self.dropout(torch.cat(stacked, dim=1))
        h = F.interpolate(h, size=(self.coarse_size,) * 2, mode="bilinear", align_corners=True)
        return F.relu(h).permute(0, 2, 3, 1)


class UpsampleCiNN(nn.Module):
    """Coarse grid -> fine grid: bilinear to the intermediate grid, ``Conv3x3 -> SiLU``, bilinear to fine."""

    def __init__(self, channels: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.conv = _conv3x3(channels, channels)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, fine: tuple[int, int]) -> Tensor:
        """``(batch, n_c, n_c, channels)`` -> ``(batch, *fine, channels)``."""
        mid = intermediate_size(fine[0], x.shape[1])
        h = F.interpolate(x.permute(0, 3, 1, 2), size=(mid, mid), mode="bilinear", align_corners=True)
        h = self.dropout(F.silu(self.conv(h)))
        h = F.interpolate(h, size=fine, mode="bilinear", align_corners=True)
        return h.permute(0, 2, 3, 1)
