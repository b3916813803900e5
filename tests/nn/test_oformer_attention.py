"""Full-grid linear attention with RoPE (FactFormer's section 4.3 comparison): the explicit N x N kernel formula,
dependence on coordinate differences only, and input errors."""

from __future__ import annotations

import math

import pytest
import torch

from opformer.errors import ConfigError
from opformer.nn.oformer_attention import GridRotaryEmbedding, OFormerAttention


def _rotate(vector: torch.Tensor, coords: list[float], scale: float) -> torch.Tensor:
    """RoPE by hand: group m of the features (rotate-half layout) turned by coordinate m, plane by plane."""
    groups = vector.chunk(len(coords))
    out = []
    for group, x in zip(groups, coords):
        half = group.numel() // 2
        rotated = group.clone()
        for j in range(half):
            angle = x * scale * 10000.0 ** (-2 * j / group.numel())
            c, s = math.cos(angle), math.sin(angle)
            rotated[j] = c * group[j] - s * group[j + half]
            rotated[j + half] = s * group[j] + c * group[j + half]
        out.append(rotated)
    return torch.cat(out)


def test_matches_explicit_kernel_formula():
    torch.manual_seed(0)
    shape, heads, width, scale = (4, 3), 2, 8, 2.0
    layer = OFormerAttention(5, heads, width, ndim=2, rope_scale=scale).double()
    u = torch.randn(2, *shape, 5, dtype=torch.float64)
    axes = [torch.linspace(0, 1, n, dtype=torch.float64) for n in shape]
    points = [[axes[0][i].item(), axes[1][j].item()] for i in range(shape[0]) for j in range(shape[1])]
    n = len(points)
    wq, wk, wv = layer.qkv.weight.chunk(3)
    out = layer(u, axes).reshape(2, n, heads, width)
    for b in range(2):
        x = u[b].reshape(n, 5)
        for h in range(heads):
            rows = slice(h * width, (h + 1) * width)
            q, k, v = x @ wq[rows].T, x @ wk[rows].T, x @ wv[rows].T
            k = (k - k.mean(0)) / torch.sqrt(k.var(0, unbiased=False) + 1e-5)  # column-wise instance norm
            v = (v - v.mean(0)) / torch.sqrt(v.var(0, unbiased=False) + 1e-5)
            qr = torch.stack([_rotate(q[i], points[i], scale) for i in range(n)])
            kr = torch.stack([_rotate(k[i], points[i], scale) for i in range(n)])
            kernel = qr @ kr.T  # the N x N kernel, formed explicitly
            torch.testing.assert_close(out[b, :, h], kernel @ v / n, rtol=1e-10, atol=1e-12)


def test_depends_on_coordinate_differences_only():
    torch.manual_seed(1)
    layer = OFormerAttention(6, 2, 12, ndim=3).double()
    u = torch.randn(1, 3, 4, 2, 6, dtype=torch.float64)
    axes = [torch.rand(n, dtype=torch.float64) for n in (3, 4, 2)]
    shifted = [a + shift for a, shift in zip(axes, (0.3, -1.7, 5.0))]
    torch.testing.assert_close(layer(u, shifted), layer(u, axes), rtol=1e-9, atol=1e-11)
    moved = [axes[0] * 2, axes[1], axes[2]]  # a change of the differences changes the output
    assert not torch.allclose(layer(u, moved), layer(u, axes))


def test_rope_groups_need_an_even_share_of_the_head_width():
    with pytest.raises(ConfigError, match="multiple of 6"):
        GridRotaryEmbedding(8, ndim=3)
    with pytest.raises(ValueError, match="expected \\(batch, 2 spatial axes, d\\)"):
        OFormerAttention(4, 1, 4, ndim=2)(torch.randn(1, 3, 4), [torch.rand(3)])
