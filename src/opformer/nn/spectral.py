"""Spectral convolution (Li et al., FNO) on channel-last grids in 1, 2 or 3 dimensions."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.nn.dft import exporting, rfft_bases, truncated_irfftn, truncated_rfftn, two_sided_bases
from opformer.nn.mlp import make_activation

_AXIS_LETTERS = "xyz"


def complex_blocks(weight: Tensor) -> Tensor:
    """Complex weights ``(in, out, modes, 2)`` as real blocks ``(modes, 2 in, 2 out)``.

    ``[Re x, Im x] @ [[Re w, Im w], [-Im w, Re w]]`` is ``[Re, Im]`` of the complex product ``x w`` per mode.
    """
    w_re, w_im = weight.permute(3, 2, 0, 1).unbind(0)
    return torch.cat([torch.cat([w_re, w_im], dim=-1), torch.cat([-w_im, w_re], dim=-1)], dim=-2)


def axis_mode_product(x: Tensor, blocks: Tensor) -> Tensor:
    """``irfft(W rfft(x))`` along axis 1 of a real ``x`` ``(outer, n, inner, c_in)`` ("ortho" norm), keeping
    the lowest ``kept`` modes, as three matrix products.

    ``blocks`` ``(kept, 2 c_in, 2 c_out)`` holds the per-mode complex weights as real blocks
    (:func:`complex_blocks`). The kept modes' DFT and its inverse are cached real bases; for the few modes
    of a long axis, matrix products over the grid beat full FFTs and keep the data channel-last. Returns
    ``(outer, n, inner, c_out)``.
    """
    outer, n, inner, c_in = x.shape
    kept, c_out = blocks.shape[0], blocks.shape[-1] // 2
    forward, inverse = rfft_bases(n, kept, x.dtype, x.device)
    # (outer, [re, im], kept, inner, c_in) -> (kept, outer * inner, [re, im] * c_in)
    x_ft = (forward @ x.reshape(outer, n, inner * c_in)).view(outer, 2, kept, inner, c_in)
    x_ft = x_ft.permute(2, 0, 3, 1, 4).reshape(kept, outer * inner, 2 * c_in)
    out_ft = torch.bmm(x_ft, blocks).view(kept, outer, inner, 2, c_out).permute(1, 3, 0, 2, 4)
    return (inverse @ out_ft.reshape(outer, 2 * kept, inner * c_out)).view(outer, n, inner, c_out)


class SpectralConv(nn.Module):
    """Multiply the lowest Fourier modes of a field by learned complex matrices.

    Input and output are channel-last, ``(batch, *spatial, channels)`` with ``ndim`` spatial axes.
    The field is transformed with ``rfftn(norm="ortho")``; ``modes[a]`` frequencies are kept per axis:
    on the last axis the non-negative ones ``0..m-1``, on every other axis both signs
    (``0..m-1`` and ``-m..-1``), i.e. the ``2**(ndim-1)`` corner blocks of the rfft spectrum, each
    with its own weights. All other modes are set to zero. If the grid is too small, the modes are
    truncated to the lowest ones the grid holds (``n // 2`` on the two-sided axes, ``n // 2 + 1`` on
    the last one). With the "ortho" norm, a band-limited field gives the same function at any grid size.

    Complex weights are stored as real tensors ``(blocks, in, out, *modes, 2)`` so that ``numel``
    counts a complex entry twice, as the papers do; initialised like FNO, real and imaginary parts
    uniform in ``[0, 1 / (in * out))``. The transforms and the mode products run in float32 (or float64
    for float64 inputs) even under autocast; the result is in that precision. In 1D and 2D the transforms
    of the kept modes are matrix products with cached DFT bases (same result as the FFTs; faster for few
    modes on channel-last data); 3D too on a CPU and in an ONNX graph (:meth:`_forward_matrices`), else
    ``rfftn``/``irfftn`` (:meth:`_forward_fft`).
    """

    def __init__(self, in_channels: int, out_channels: int, modes: int | Sequence[int], ndim: int = 1) -> None:
        super().__init__()
        if ndim not in (1, 2, 3):
            raise ConfigError(f"spectral convolution supports 1, 2 or 3 dimensions, got {ndim}")
        modes_ = [modes] * ndim if isinstance(modes, int) else list(modes)
        if len(modes_) != ndim or any(m < 1 for m in modes_):
            raise ConfigError(f"modes must be {ndim} positive integers, got {modes!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.modes = tuple(modes_)
        self.ndim = ndim
        scale = 1.0 / (in_channels * out_channels)
        shape = (2 ** (ndim - 1), in_channels, out_channels, *self.modes, 2)
        self.weight = nn.Parameter(scale * torch.rand(shape))
        axes = _AXIS_LETTERS[:ndim]
        self._equation = f"b{axes}i,io{axes}->b{axes}o"

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, modes={self.modes}"

    def forward(self, x: Tensor) -> Tensor:
        """Apply the spectral convolution to ``x`` ``(batch, *spatial, in_channels)``."""
        spatial = tuple(x.shape[1:-1])
        if len(spatial) != self.ndim or x.shape[-1] != self.in_channels:
            raise ValueError(
                f"expected (batch, {self.ndim} spatial axes, {self.in_channels}), got {tuple(x.shape)}"
            )
        real_dtype = torch.promote_types(x.dtype, torch.float32)
        with torch.autocast(device_type=x.device.type, enabled=False):
            if self.ndim == 1:
                return self._forward_1d(x.to(real_dtype))
            if self.ndim == 2:
                return self._forward_2d(x.to(real_dtype))
            # 3D: the matrix form on a CPU (faster at the papers' sizes: benchmarks/results/systems/spectral_forms.md)
            # and in an ONNX graph; the FFTs elsewhere
            if exporting() or x.device.type == "cpu":
                return self._forward_matrices(x.to(real_dtype))
            return self._forward_fft(x.to(real_dtype))

    def _forward_fft(self, x: Tensor) -> Tensor:
        """Any dimension with ``rfftn``/``irfftn``: the kept corner blocks of the spectrum times their weights."""
        spatial = tuple(x.shape[1:-1])
        dims = tuple(range(1, self.ndim + 1))
        x_ft = torch.fft.rfftn(x, dim=dims, norm="ortho")
        weight = torch.view_as_complex(self.weight.to(x.dtype))
        out_ft = x_ft.new_zeros((*x_ft.shape[:-1], self.out_channels))
        kept = self._kept(spatial)
        for block, signs in enumerate(itertools.product((1, -1), repeat=self.ndim - 1)):
            grid_index = [slice(None)]
            weight_index = [block, slice(None), slice(None)]
            for sign, k, m, n in zip(signs, kept, self.modes, spatial):
                # the weight block of negative frequencies holds -m..-1; keep its last k
                grid_index.append(slice(0, k) if sign > 0 else slice(n - k, n))
                weight_index.append(slice(0, k) if sign > 0 else slice(m - k, m))
            grid_index.append(slice(0, kept[-1]))
            weight_index.append(slice(0, kept[-1]))
            out_ft[tuple(grid_index)] = torch.einsum(
                self._equation, x_ft[tuple(grid_index)], weight[tuple(weight_index)]
            )
        return torch.fft.irfftn(out_ft, s=spatial, dim=dims, norm="ortho")

    def _kept(self, spatial: Sequence[int]) -> list[int]:
        """The modes kept per axis on a grid of ``spatial`` points (both signs but on the last axis)."""
        kept = [min(m, n // 2) for m, n in zip(self.modes[:-1], spatial[:-1])]
        return kept + [min(self.modes[-1], spatial[-1] // 2 + 1)]

    def _forward_matrices(self, x: Tensor) -> Tensor:
        """Any dimension as truncated DFT matrix products (:mod:`opformer.nn.dft`): the kept corner blocks of the
        spectrum, the per-mode complex weights, the inverse; the same function as the FFT form."""
        spatial = tuple(x.shape[1:-1])
        kept = self._kept(spatial)
        rows = [tuple(range(k)) + tuple(range(n - k, n)) for k, n in zip(kept[:-1], spatial[:-1])]
        re, im = truncated_rfftn(x, rows, kept[-1])
        blocks = []
        for block, signs in enumerate(itertools.product((1, -1), repeat=self.ndim - 1)):
            weight = self.weight[block]  # (in, out, *modes, 2)
            for axis, (sign, k, m) in enumerate(zip(signs, kept, self.modes), start=2):
                # the weight block of negative frequencies holds -m..-1; keep its last k
                weight = weight.narrow(axis, 0 if sign > 0 else m - k, k)
            blocks.append(weight.narrow(self.ndim + 1, 0, kept[-1]))
        for axis in range(self.ndim + 1, 2, -1):  # the corner blocks side by side, the innermost axis first
            blocks = [torch.cat(blocks[i:i + 2], dim=axis - 1) for i in range(0, len(blocks), 2)]
        weight = blocks[0].to(x.dtype).flatten(2, self.ndim + 1)  # (in, out, kept modes, 2)
        modes_shape = re.shape[1:-1]
        # (batch, *kept, [re, im] * c_in) -> (kept modes, batch, 2 c_in)
        x_ft = torch.cat([re, im], dim=-1).flatten(1, self.ndim).transpose(0, 1)
        out = torch.bmm(x_ft, complex_blocks(weight)).transpose(0, 1)
        out = out.unflatten(1, modes_shape)
        return truncated_irfftn(out[..., :self.out_channels], out[..., self.out_channels:], rows, spatial)

    def _forward_1d(self, x: Tensor) -> Tensor:
        """1D case: :func:`axis_mode_product` on ``(batch, n, 1, c_in)``."""
        kept = min(self.modes[0], x.shape[1] // 2 + 1)
        blocks = complex_blocks(self.weight[0, :, :, :kept].to(x.dtype))
        return axis_mode_product(x.unsqueeze(2), blocks).squeeze(2)

    def _forward_2d(self, x: Tensor) -> Tensor:
        """2D case as matrix products on the channel-last grid: the kept rows of the DFT along the first axis
        (both signs), the kept modes of the rfft along the second, the per-mode complex weights, and the two
        inverses.

        Same result as ``irfft2(W rfft2(x))`` with the ortho norm; for the few kept modes, matrix products are
        faster than full FFTs of the strided channel-last data.
        """
        batch, n1, n2, c_in = x.shape
        c_out, m1 = self.out_channels, self.modes[0]
        k1, k2 = min(m1, n1 // 2), min(self.modes[1], n2 // 2 + 1)
        rows = 2 * k1
        forward1, inverse1 = two_sided_bases(n1, k1, x.dtype, x.device)
        forward2, inverse2 = rfft_bases(n2, k2, x.dtype, x.device)
        # first axis, real -> complex: (batch, [re, im], rows, n2 * c_in)
        y = forward1 @ x.reshape(batch, n1, n2 * c_in)
        # second axis, applied to the real and the imaginary part: (batch, [re, im], rows, [cos, -sin], k2, c_in)
        y = (forward2 @ y.view(batch * 2 * rows, n2, c_in)).view(batch, 2, rows, 2, k2, c_in)
        x_re, x_im = y[:, 0, :, 0] - y[:, 1, :, 1], y[:, 1, :, 0] + y[:, 0, :, 1]
        x_ft = torch.stack([x_re, x_im], dim=3).permute(1, 2, 0, 3, 4).reshape(rows * k2, batch, 2 * c_in)
        weight = self.weight[:, :, :, :, :k2].to(x.dtype)
        # the negative-frequency block holds -m1..-1; keep its last k1 rows
        weight = torch.cat([weight[0, :, :, :k1], weight[1, :, :, m1 - k1:]], dim=2).flatten(2, 3)
        out_ft = torch.bmm(x_ft, complex_blocks(weight)).view(rows, k2, batch, 2, c_out)
        # inverse along the first axis: (batch, [re, im], n1, k2, c_out)
        z = inverse1 @ out_ft.permute(2, 3, 0, 1, 4).reshape(batch, 2 * rows, k2 * c_out)
        # real inverse along the second axis
        z = z.view(batch, 2, n1, k2, c_out).transpose(1, 2).reshape(batch * n1, 2 * k2, c_out)
        return (inverse2 @ z).view(batch, n1, n2, c_out)


class FourierLayer(nn.Module):
    """FNO layer ``act(spectral(x) + Linear(x))`` on channel-last fields; ``activation=None`` skips act."""

    def __init__(self, in_channels: int, out_channels: int, modes: int | Sequence[int], ndim: int = 1,
                 activation: str | None = "relu") -> None:
        super().__init__()
        self.spectral = SpectralConv(in_channels, out_channels, modes, ndim)
        self.linear = nn.Linear(in_channels, out_channels)
        self.activation = make_activation(activation) if activation else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        """Apply the layer to ``x`` ``(batch, *spatial, in_channels)``."""
        y = self.spectral(x) + self.linear(x)
        return self.activation(y)
