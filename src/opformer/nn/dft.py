"""Truncated real DFTs as dense matrices, one small pair per axis: the kept Fourier modes of a channel-last field
and their inverse as matrix products (exact for the kept modes; O(N m) per axis rather than O(N log N)).

The spectral layers (:mod:`opformer.nn.spectral`, :mod:`opformer.nn.fourier_mixer`) compute their transforms this
way where the FFT does not export (an ONNX graph: :func:`exporting`) and where it is the faster form in torch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

#: the scale of the forward and of the inverse transform of ``n`` points per ``norm`` (torch.fft's names)
_SCALES: dict[str, Callable[[int], tuple[float, float]]] = {
    "ortho": lambda n: (1 / math.sqrt(n), 1 / math.sqrt(n)),
    "forward": lambda n: (1 / n, 1.0),
    "backward": lambda n: (1.0, 1 / n),
}


def exporting() -> bool:
    """Whether torch is tracing the module into an ONNX graph (which has no FFT that runs everywhere)."""
    return torch.onnx.is_in_onnx_export()


def _basis_cache(builder: Callable[..., tuple[Tensor, Tensor]]) -> Callable[..., tuple[Tensor, Tensor]]:
    """Cache the bases ``builder`` returns (16 most recent argument sets); under ``torch.compile`` call ``builder``
    itself, which dynamo traces into the graph (it would skip an ``lru_cache`` anyway, with a warning)."""
    cached = functools.lru_cache(maxsize=16)(builder)

    @functools.wraps(builder)
    def bases(*args: object) -> tuple[Tensor, Tensor]:
        return builder(*args) if torch.compiler.is_compiling() else cached(*args)

    return bases


@_basis_cache
def rfft_bases(n: int, modes: int, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """Real matrices of the "ortho" rfft restricted to modes ``0..modes-1`` and of its inverse.

    ``forward`` ``(2 * modes, n)`` maps a real signal to ``[Re c_k; Im c_k]``; ``inverse`` ``(n, 2 * modes)``
    maps those to ``irfft(c, n, norm="ortho")`` with every other mode zero (the imaginary parts of the
    zero and Nyquist modes are ignored, as ``irfft`` does). Built in float64, then cast.
    """
    j = torch.arange(n, dtype=torch.float64)
    k = torch.arange(modes, dtype=torch.float64)
    angle = 2 * math.pi * torch.remainder(torch.outer(j, k), n) / n  # exact phases for large j * k
    cos, sin = torch.cos(angle) / math.sqrt(n), torch.sin(angle) / math.sqrt(n)
    forward = torch.cat([cos, -sin], dim=1).t()
    weight = torch.full((modes,), 2.0, dtype=torch.float64)
    weight[0] = 1.0
    if n % 2 == 0 and modes == n // 2 + 1:
        weight[-1] = 1.0  # the Nyquist mode appears once in a real signal
    sin_part = -weight * sin
    sin_part[:, 0] = 0.0
    if n % 2 == 0 and modes == n // 2 + 1:
        sin_part[:, -1] = 0.0
    inverse = torch.cat([weight * cos, sin_part], dim=1)
    return forward.to(device=device, dtype=dtype).contiguous(), inverse.to(device=device, dtype=dtype).contiguous()


@_basis_cache
def two_sided_bases(n: int, kept: int, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """Real matrices of the "ortho" DFT restricted to the frequencies ``0..kept-1`` and ``-kept..-1`` (spectrum
    rows ``0..kept-1`` and ``n-kept..n-1``, ``r = 2 * kept`` rows), and of its inverse.

    ``forward`` ``(2r, n)`` maps a real signal to ``[Re c; Im c]`` of the kept rows; ``inverse`` ``(2n, 2r)``
    maps ``[Re c; Im c]`` to ``[Re z; Im z]`` with ``z = ifft(c, n, norm="ortho")`` (every other row zero).
    Built in float64, then cast.
    """
    rows = torch.cat([torch.arange(kept), torch.arange(n - kept, n)]).to(torch.float64)
    j = torch.arange(n, dtype=torch.float64)
    angle = 2 * math.pi * torch.remainder(torch.outer(rows, j), n) / n
    cos, sin = torch.cos(angle) / math.sqrt(n), torch.sin(angle) / math.sqrt(n)
    forward = torch.cat([cos, -sin])
    inverse = torch.cat([torch.cat([cos.t(), -sin.t()], dim=1), torch.cat([sin.t(), cos.t()], dim=1)])
    return forward.to(device=device, dtype=dtype).contiguous(), inverse.to(device=device, dtype=dtype).contiguous()


@_basis_cache
def _row_bases(n: int, rows: tuple[int, ...], scale: float, dtype: torch.dtype, device: torch.device
               ) -> tuple[Tensor, Tensor]:
    """``scale * cos`` and ``scale * sin`` of ``2 pi k j / n`` for the spectrum rows ``k`` in ``rows`` and the
    points ``j``: ``(len(rows), n)`` each, built in float64 (exact phases: ``k j mod n``), then cast."""
    k = torch.tensor(rows, dtype=torch.float64)
    j = torch.arange(n, dtype=torch.float64)
    angle = 2 * math.pi * torch.remainder(torch.outer(k, j), n) / n
    cos, sin = scale * torch.cos(angle), scale * torch.sin(angle)
    return cos.to(device=device, dtype=dtype).contiguous(), sin.to(device=device, dtype=dtype).contiguous()


@_basis_cache
def _real_inverse_bases(n: int, kept: int, scale: float, dtype: torch.dtype, device: torch.device
                        ) -> tuple[Tensor, Tensor]:
    """The inverse real DFT (``irfft``) of the modes ``0..kept-1`` of ``n`` points: ``cos`` and ``sin`` ``(kept,
    n)`` with ``x_j = sum_k Re c_k cos[k, j] - Im c_k sin[k, j]``: the modes but the zero and the Nyquist mode count
    twice (their conjugates), whose imaginary parts are ignored, as ``irfft`` does."""
    cos, sin = _row_bases(n, tuple(range(kept)), scale, torch.float64, torch.device("cpu"))
    weight = torch.full((kept, 1), 2.0, dtype=torch.float64)
    weight[0] = 1.0
    sin = sin.clone()
    sin[0] = 0.0
    if n % 2 == 0 and kept == n // 2 + 1:
        weight[-1] = 1.0
        sin[-1] = 0.0
    return ((weight * cos).to(device=device, dtype=dtype).contiguous(),
            (weight * sin).to(device=device, dtype=dtype).contiguous())


def _along(matrix: Tensor, x: Tensor, axis: int) -> Tensor:
    """``matrix`` ``(r, n)`` applied along ``axis`` (of size ``n``) of a channel-last ``x``: that axis becomes
    ``r`` long."""
    if axis == x.dim() - 2:
        return matrix @ x
    return (matrix @ x.movedim(axis, -2)).movedim(-2, axis)


def kept_modes(sizes: Sequence[int], rows: Sequence[Sequence[int]], last: int) -> tuple[tuple[int, ...], ...]:
    """The kept spectrum rows of every axis as tuples (the bases' cache keys): ``rows`` of the axes but the last,
    then ``0..last-1`` of the last; checked against the axis ``sizes``."""
    if len(rows) != len(sizes) - 1:
        raise ValueError(f"expected kept rows of {len(sizes) - 1} axes, got {len(rows)}")
    kept = tuple(tuple(int(k) for k in r) for r in rows) + (tuple(range(last)),)
    for axis, (n, r) in enumerate(zip(sizes, kept)):
        if not r or min(r) < 0 or max(r) >= (n if axis < len(rows) else n // 2 + 1):
            raise ValueError(f"kept rows {r} out of range for an axis of {n} points")
    return kept


def truncated_rfftn(x: Tensor, rows: Sequence[Sequence[int]], last: int, norm: str = "ortho"
                    ) -> tuple[Tensor, Tensor]:
    """The kept part of ``rfftn(x, dim=spatial axes, norm=norm)`` for a real channel-last ``x`` ``(batch,
    *spatial, c)``, as its real and imaginary parts ``(batch, len(rows[0]), ..., last, c)``: the spectrum rows
    ``rows[a]`` of each spatial axis ``a`` but the last, the modes ``0..last-1`` of the last axis.

    Two matrix products along the last axis (real to complex), four along every other (complex to complex).
    """
    spatial = tuple(x.shape[1:-1])
    kept = kept_modes(spatial, rows, last)
    forward = _SCALES[norm]
    cos, sin = _row_bases(spatial[-1], kept[-1], forward(spatial[-1])[0], x.dtype, x.device)
    re, im = _along(cos, x, len(spatial)), -_along(sin, x, len(spatial))
    for axis in range(len(spatial) - 1, 0, -1):  # (a + ib)(C - iS) along the two-sided axes
        n = spatial[axis - 1]
        cos, sin = _row_bases(n, kept[axis - 1], forward(n)[0], x.dtype, x.device)
        re, im = _along(cos, re, axis) + _along(sin, im, axis), _along(cos, im, axis) - _along(sin, re, axis)
    return re, im


def truncated_irfftn(re: Tensor, im: Tensor, rows: Sequence[Sequence[int]], sizes: Sequence[int],
                     norm: str = "ortho") -> Tensor:
    """``irfftn(c, s=sizes, dim=spatial axes, norm=norm)`` of the spectrum ``c = re + i im`` held only on the kept
    rows (every other one zero), the inverse of :func:`truncated_rfftn`: ``re``, ``im`` ``(batch, len(rows[0]),
    ..., last, c)`` to the real ``(batch, *sizes, c)``."""
    sizes = tuple(sizes)
    last = re.shape[-2]
    kept = kept_modes(sizes, rows, last)
    inverse = _SCALES[norm]
    for axis in range(1, len(sizes)):  # (a + ib)(C + iS)^T along the two-sided axes
        n = sizes[axis - 1]
        cos, sin = _row_bases(n, kept[axis - 1], inverse(n)[1], re.dtype, re.device)
        cos, sin = cos.t(), sin.t()
        re, im = _along(cos, re, axis) - _along(sin, im, axis), _along(cos, im, axis) + _along(sin, re, axis)
    cos, sin = _real_inverse_bases(sizes[-1], last, inverse(sizes[-1])[1], re.dtype, re.device)
    axis = len(sizes)
    return _along(cos.t(), re, axis) - _along(sin.t(), im, axis)
