"""Patch convolutions on channel-last data, computed as matrix products.

``PatchConv`` (a convolution whose kernel equals its stride ``P``: patchify and project), ``PointwiseConv``
(kernel 1) and ``PatchConvTranspose`` (the transposed convolution with kernel = stride ``P``: every token to a
``P^d`` patch) hold exactly the parameters of torch's ``ConvNd`` / ``ConvTransposeNd`` (same names, shapes and
initialisation, so checkpoints of either load into the other), but take and return ``(batch, *spatial, ...,
channels)`` tensors. On channel-last data the convolution is one matrix product over the flattened patches, which
on a CPU is several times faster than oneDNN's convolution for the few channels these layers have, and no
channel-first copy of the field is made.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn import functional as F

from opformer.errors import ConfigError


class _ConvParameters(nn.Module):
    """The ``weight`` and ``bias`` of torch's ``{kind}{ndim}d(in, out, patch, stride=patch)`` (its
    initialisation, names and shapes), for a layer that computes on channel-last data."""

    def __init__(self, kind: str, in_channels: int, out_channels: int, patch: int, ndim: int) -> None:
        super().__init__()
        if ndim not in (1, 2, 3) or patch < 1:
            raise ConfigError(f"patch convolutions need 1-3 dimensions and a patch size >= 1, got {ndim}, {patch}")
        self.in_channels, self.out_channels, self.patch, self.ndim = in_channels, out_channels, patch, ndim
        conv = getattr(nn, f"{kind}{ndim}d")(in_channels, out_channels, patch, stride=patch)
        self.weight, self.bias = conv.weight, conv.bias

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, patch={self.patch}, ndim={self.ndim}"


class PatchConv(_ConvParameters):
    """``ConvNd(in, out, kernel_size=P, stride=P)`` on ``(batch, *spatial, *rest, in) -> (batch, *spatial / P,
    *rest, out)``: the ``ndim`` axes after the batch are convolved, the ``rest`` axes (e.g. frames) are carried.
    Every spatial size must be a multiple of ``P``."""

    def __init__(self, in_channels: int, out_channels: int, patch: int, ndim: int) -> None:
        super().__init__("Conv", in_channels, out_channels, patch, ndim)

    def forward(self, x: Tensor) -> Tensor:
        """Patchify and project ``x`` (see the class docstring)."""
        nd, p = self.ndim, self.patch
        spatial, rest = x.shape[1:1 + nd], x.shape[1 + nd:-1]
        latent = [n // p for n in spatial]
        # (batch, l1, p, l2, p, ..., *rest, c) -> (batch, l1, l2, ..., *rest, c, p, p, ...): the weight's order
        x = x.reshape(x.shape[0], *[v for n in latent for v in (n, p)], *rest, x.shape[-1])
        order = [0, *range(1, 2 * nd, 2), *range(1 + 2 * nd, x.dim()), *range(2, 2 * nd + 1, 2)]
        x = x.permute(order).reshape(x.shape[0], *latent, *rest, -1)
        return F.linear(x, self.weight.flatten(1), self.bias)


class PointwiseConv(_ConvParameters):
    """``ConvNd(in, out, kernel_size=1)`` on channel-last ``(..., in) -> (..., out)``."""

    def __init__(self, in_channels: int, out_channels: int, ndim: int) -> None:
        super().__init__("Conv", in_channels, out_channels, 1, ndim)

    def forward(self, x: Tensor) -> Tensor:
        """Project the channels of ``x``."""
        return F.linear(x, self.weight.flatten(1), self.bias)


class PatchConvTranspose(_ConvParameters):
    """``ConvTransposeNd(in, out, kernel_size=P, stride=P)`` on ``(batch, *latent, in) -> (batch, *latent * P,
    out)``: every token becomes a ``P^ndim`` patch."""

    def __init__(self, in_channels: int, out_channels: int, patch: int, ndim: int) -> None:
        super().__init__("ConvTranspose", in_channels, out_channels, patch, ndim)

    def forward(self, z: Tensor) -> Tensor:
        """Expand every token of ``z`` (see the class docstring)."""
        nd, p = self.ndim, self.patch
        latent = z.shape[1:1 + nd]
        y = (z @ self.weight.flatten(1)).unflatten(-1, (self.out_channels, *[p] * nd))  # (b, *latent, out, p..)
        # -> (batch, l1, p, l2, p, ..., out)
        order = [0, *[v for i in range(nd) for v in (1 + i, 2 + nd + i)], 1 + nd]
        return y.permute(order).reshape(z.shape[0], *[n * p for n in latent], self.out_channels) + self.bias
