"""DPOT's "Fourier attention" (Hao et al. 2024, eq. 7-8): a per-head complex two-layer MLP on the kept Fourier
modes of a channel-last field. (Not the Fourier-type attention of Cao 2021 in :mod:`opformer.nn.attention`.)"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.nn.dft import exporting, truncated_irfftn, truncated_rfftn
from opformer.nn.spectral import complex_blocks

FFT_NORMS = ("ortho", "forward")


def kept_rows(n: int, modes: int | None, device: torch.device, both_signs: bool = True) -> Tensor | None:
    """Spectrum rows of a two-sided (non-last) axis of ``n`` points that keep the frequencies ``0..m-1`` and
    ``-m..-1`` (``both_signs``; else ``0..m-1`` only, the DPOT authors' ``[:m]``); ``None`` when that is every
    row (``modes`` ``None``, or ``2 * modes >= n``, or ``modes >= n`` without ``both_signs``)."""
    if modes is None or (2 * modes if both_signs else modes) >= n:
        return None
    if not both_signs:
        return torch.arange(modes, device=device)
    return torch.cat([torch.arange(modes, device=device), torch.arange(n - modes, n, device=device)])


class FourierMixer(nn.Module):
    """DPOT's Fourier attention on ``(batch, *spatial, width)``: ``irfftn(K(rfftn(x)))`` over the ``ndim``
    spatial axes.

    ``K`` splits the ``width`` channels of every kept mode into ``n_heads`` heads of ``b = width / n_heads`` and
    applies per head ``o = W2 sigma(W1 z + b1) + b2`` with complex ``W1, W2`` (``b x b``) and complex biases,
    ``sigma`` = GELU on the real and the imaginary part separately; with ``shrink > 0``, ``o`` is soft-shrunk
    (real and imaginary parts; AFNO's sparsity, the paper's Table 7 ablation). The weights are shared by all
    modes. Modes kept: ``0..m-1`` on the last (half-spectrum) axis (``0..last_modes-1`` if given) and both
    ``0..m-1`` and ``-m..-1`` on every other axis; ``modes=None`` keeps all; the others are set to zero. The
    authors keep only the positive corner ``[:m, :m]`` (an asymmetry once ``m`` is below the grid's size):
    ``both_signs=False`` does that too, to compute their function with their weights (their 3D mixer keeps
    ``last_modes=8`` on its last axis). ``norm="ortho"`` is the authors' transform; ``"forward"`` makes the
    kept coefficients, hence the output, independent of the grid size for a band-limited input.

    Complex parameters are stored as real pairs (last axis 2): ``w1``, ``w2`` ``(n_heads, b_in, b_out, 2)``
    (``z @ W``), ``b1``, ``b2`` ``(n_heads, b, 2)``, all initialised uniform on ``[0, 1 / b^2)``. The transforms
    and the MLP run in float32 (float64 for float64 inputs) even under autocast.
    """

    def __init__(self, width: int, n_heads: int, ndim: int, modes: int | None = None, shrink: float = 0.0,
                 norm: Literal["ortho", "forward"] = "ortho", both_signs: bool = True,
                 last_modes: int | None = None) -> None:
        super().__init__()
        if ndim not in (1, 2, 3):
            raise ConfigError(f"Fourier mixer supports 1, 2 or 3 dimensions, got {ndim}")
        if n_heads < 1 or width % n_heads:
            raise ConfigError(f"width ({width}) must be a multiple of n_heads ({n_heads})")
        for name, value in (("modes", modes), ("last_modes", last_modes)):
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be a positive integer or null, got {value}")
        if norm not in FFT_NORMS:
            raise ConfigError(f"fft norm must be one of {', '.join(FFT_NORMS)}, got {norm!r}")
        self.width, self.n_heads, self.ndim, self.modes, self.shrink, self.norm = width, n_heads, ndim, modes, \
            shrink, norm
        self.both_signs, self.last_modes = both_signs, last_modes
        b = width // n_heads
        scale = 1.0 / b**2
        self.w1 = nn.Parameter(scale * torch.rand(n_heads, b, b, 2))
        self.b1 = nn.Parameter(scale * torch.rand(n_heads, b, 2))
        self.w2 = nn.Parameter(scale * torch.rand(n_heads, b, b, 2))
        self.b2 = nn.Parameter(scale * torch.rand(n_heads, b, 2))

    def extra_repr(self) -> str:
        extra = ("" if self.both_signs else ", both_signs=False") + \
            ("" if self.last_modes is None else f", last_modes={self.last_modes}")
        return (f"{self.width}, n_heads={self.n_heads}, ndim={self.ndim}, modes={self.modes}, "
                f"shrink={self.shrink}, norm={self.norm!r}{extra}")

    def forward(self, x: Tensor) -> Tensor:
        """Mix ``x`` ``(batch, *spatial, width)``; returns the same shape (float32 or float64)."""
        spatial = tuple(x.shape[1:-1])
        if len(spatial) != self.ndim or x.shape[-1] != self.width:
            raise ValueError(f"expected (batch, {self.ndim} spatial axes, {self.width}), got {tuple(x.shape)}")
        real_dtype = torch.promote_types(x.dtype, torch.float32)
        with torch.autocast(device_type=x.device.type, enabled=False):
            # the FFTs in torch (the matrix form is not faster at DPOT's sizes on a CPU:
            # benchmarks/results/systems/spectral_forms.md); the matrix form in an ONNX graph
            if exporting():
                return self._forward_matrices(x.to(real_dtype))
            return self._forward_fft(x.to(real_dtype))

    def _forward_fft(self, x: Tensor) -> Tensor:
        """The mixer with ``rfftn``/``irfftn``."""
        spatial = tuple(x.shape[1:-1])
        dims = tuple(range(1, self.ndim + 1))
        spectrum = torch.view_as_real(torch.fft.rfftn(x, dim=dims, norm=self.norm))
        rows = [kept_rows(n, self.modes, x.device, self.both_signs) for n in spatial[:-1]]
        half = spectrum.shape[self.ndim]
        last_modes = self.modes if self.last_modes is None else self.last_modes
        last = half if last_modes is None else min(last_modes, half)
        kept = spectrum.narrow(self.ndim, 0, last)
        for axis, index in enumerate(rows, start=1):
            if index is not None:
                kept = kept.index_select(axis, index)
        mixed = self._mlp(kept)
        if last < half:
            mixed = torch.cat([mixed, mixed.new_zeros((*mixed.shape[:self.ndim], half - last,
                                                      *mixed.shape[self.ndim + 1:]))], dim=self.ndim)
        for axis, (index, n) in enumerate(zip(rows, spatial), start=1):
            if index is not None:
                full = list(mixed.shape)
                full[axis] = n
                mixed = mixed.new_zeros(full).index_copy(axis, index, mixed)
        return torch.fft.irfftn(torch.view_as_complex(mixed.contiguous()), s=spatial, dim=dims, norm=self.norm)

    def _forward_matrices(self, x: Tensor) -> Tensor:
        """The same function with truncated DFT matrix products (:mod:`opformer.nn.dft`) in place of the FFTs."""
        spatial = tuple(x.shape[1:-1])
        rows = []
        for n in spatial[:-1]:
            index = kept_rows(n, self.modes, x.device, self.both_signs)
            rows.append(tuple(range(n)) if index is None else tuple(index.tolist()))
        half = spatial[-1] // 2 + 1
        last_modes = self.modes if self.last_modes is None else self.last_modes
        last = half if last_modes is None else min(last_modes, half)
        re, im = truncated_rfftn(x, rows, last, self.norm)
        mixed = self._mlp(torch.stack([re, im], dim=-1))
        return truncated_irfftn(mixed[..., 0], mixed[..., 1], rows, spatial, self.norm)

    def _mlp(self, z: Tensor) -> Tensor:
        """The per-head complex MLP on modes ``z`` ``(..., width, 2)`` (real pairs) as real block products."""
        heads, b = self.n_heads, self.width // self.n_heads
        # (..., width, [re, im]) -> (..., heads, [re..., im...]) of 2b real numbers per head
        h = z.unflatten(-2, (heads, b)).transpose(-1, -2).flatten(-2)
        for weight, bias, activate in ((self.w1, self.b1, True), (self.w2, self.b2, False)):
            blocks = complex_blocks(weight.to(z.dtype).permute(1, 2, 0, 3))  # (heads, 2b, 2b)
            h = torch.einsum("...hi,hio->...ho", h, blocks) + bias.to(z.dtype).transpose(-1, -2).flatten(-2)
            if activate:
                h = F.gelu(h)  # on the real and the imaginary parts separately
        if self.shrink > 0:
            h = F.softshrink(h, self.shrink)
        return h.unflatten(-1, (2, b)).transpose(-1, -2).flatten(-3, -2)
