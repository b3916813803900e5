"""FactFormer's factorised attention: the contraction equals the Kronecker-product kernel, RoPE makes the axis
kernels depend on coordinate differences only, no N x N tensor at a large grid, and the block's pieces."""

from __future__ import annotations

import math

import pytest
import torch

from opformer.errors import ConfigError
from opformer.bench.memory import TensorMemoryTracker
from opformer.nn.factorized_attention import (
    AxisKernel,
    FactorizedAttention,
    GaussianFourierFeatures,
    factorized_block,
    factorized_contraction,
)
from opformer.nn.rope import AxisRotaryEmbedding, rotate_half


def _explicit(values: torch.Tensor, kernels: list[torch.Tensor]) -> torch.Tensor:
    """The full kernel ``A_1 (x) A_2 (x) ...`` ``(N, N)`` per sample and head applied to the flattened values."""
    batch, *spatial, n_head, c = values.shape
    flat = values.reshape(batch, -1, n_head, c)
    out = torch.empty_like(flat)
    for b in range(batch):
        for h in range(n_head):
            full = kernels[0][b, h]
            for kernel in kernels[1:]:
                full = torch.kron(full, kernel[b, h])
            out[b, :, h] = full @ flat[b, :, h]
    return out.reshape(values.shape)


@pytest.mark.parametrize("spatial", [(5, 7), (3, 4, 5)])
def test_contraction_equals_kronecker_kernel(spatial):
    torch.manual_seed(0)
    values = torch.randn(2, *spatial, 3, 4, dtype=torch.float64)
    kernels = [torch.randn(2, 3, s, s, dtype=torch.float64) for s in spatial]
    torch.testing.assert_close(factorized_contraction(values, kernels), _explicit(values, kernels))
    # the order of the kernels matters: A_1 acts on axis 1 (a transposed kernel gives another result)
    swapped = [kernels[0].transpose(-2, -1), *kernels[1:]]
    assert not torch.allclose(factorized_contraction(values, swapped), _explicit(values, kernels))


@pytest.mark.parametrize("spatial", [(6, 5), (4, 3, 5)])
def test_attention_module_equals_kronecker_kernel_on_its_values(spatial):
    torch.manual_seed(0)
    ndim = len(spatial)
    attention = FactorizedAttention(8, n_head=2, head_dim=3, ndim=ndim, latent_dim=6, kernel_multiplier=2).double()
    u = torch.randn(2, *spatial, 8, dtype=torch.float64)
    axes = [torch.arange(s, dtype=torch.float64) / s for s in spatial]
    kernels = attention.axis_kernels(u, axes)
    assert [tuple(k.shape) for k in kernels] == [(2, 2, s, s) for s in spatial]
    values = attention.value(u).unflatten(-1, (2, 3))
    torch.testing.assert_close(attention(u, axes), _explicit(values, kernels).flatten(-2))


def test_axis_projection_is_mean_over_the_other_axes_then_mlp():
    torch.manual_seed(0)
    attention = FactorizedAttention(4, n_head=1, head_dim=2, ndim=3, latent_dim=5).double()
    projection = attention.projections[1]
    u = torch.randn(2, 3, 4, 5, 4, dtype=torch.float64)
    axes = [torch.arange(s, dtype=torch.float64) / s for s in (3, 4, 5)]
    # the authors' order: the shared to_in and gamma point-wise on the full grid, then the mean, then h
    phi = projection.mlp(projection.norm(projection.gamma(attention.shared(u)).mean(dim=(1, 3))))
    assert phi.shape == (2, 4, 5)
    torch.testing.assert_close(attention.axis_kernels(u, axes)[1], attention.kernels[1](phi, axes[1]))
    assert projection.gamma.bias is None and attention.shared.bias is None


def test_rope_kernel_depends_only_on_coordinate_differences():
    torch.manual_seed(0)
    kernel = AxisKernel(latent_dim=6, n_head=2, width=8, scale=1.0, rope_scale=64.0).double()
    phi = torch.randn(3, 10, 6, dtype=torch.float64)
    x = torch.rand(10, dtype=torch.float64)
    torch.testing.assert_close(kernel(phi, x + 0.37), kernel(phi, x))
    assert not torch.allclose(kernel(phi, 2 * x), kernel(phi, x))  # differences do matter
    # the same function at every point (constant phi) on a uniform grid: A_ij = a(x_i - x_j) is Toeplitz
    toeplitz = kernel(phi[:, :1].expand(3, 10, 6), torch.arange(10, dtype=torch.float64) / 10)
    torch.testing.assert_close(toeplitz[..., 1:, 1:], toeplitz[..., :-1, :-1])
    assert not torch.allclose(toeplitz[..., 0, 1], toeplitz[..., 0, 2])


def test_rope_rotates_pairs_by_lambda_x_theta():
    rope = AxisRotaryEmbedding(4, scale=64.0).double()
    x = torch.tensor([0.01], dtype=torch.float64)
    t = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    theta = torch.tensor([1.0, 10000 ** (-2 / 4)], dtype=torch.float64)
    a = 64 * 0.01 * theta
    expected = torch.cat([t[:, :2] * a.cos() - t[:, 2:] * a.sin(), t[:, 2:] * a.cos() + t[:, :2] * a.sin()], -1)
    torch.testing.assert_close(rope(t, x), expected)
    assert rotate_half(t).tolist() == [[-3.0, -4.0, 1.0, 2.0]]
    with pytest.raises(ConfigError, match="even"):
        AxisRotaryEmbedding(5)


def test_kernel_scale_and_init_gain():
    torch.manual_seed(0)
    attention = FactorizedAttention(16, n_head=2, head_dim=4, ndim=2, kernel_multiplier=5)
    assert attention.kernels[0].scale == pytest.approx(1 / math.sqrt(20))
    assert FactorizedAttention(16, n_head=2, head_dim=4, ndim=2, kernel_multiplier=2).kernels[0].scale == 1.0
    weight = attention.kernels[0].query.weight  # xavier uniform, gain 0.02: bound 0.02 sqrt(6 / (in + out))
    assert weight.abs().max() <= 0.02 * math.sqrt(6 / (16 + 40))
    assert attention.kernels[0].query.bias is None and attention.value.bias is None


def test_block_is_residual_with_headwise_norm():
    """The authors' GroupNorm(domain_wise=True): each head over its features and the grid, unbiased variance,
    eps 1e-8, no affine; the output network has no biases."""
    torch.manual_seed(0)
    block = factorized_block(8, n_head=2, head_dim=4, ndim=2).double()
    u = torch.randn(2, 5, 6, 8, dtype=torch.float64)
    axes = [torch.arange(5, dtype=torch.float64) / 5, torch.arange(6, dtype=torch.float64) / 6]
    z = block.mixer(block.norm(u), axes).reshape(2, 30, 2, 4)
    mean = z.mean(dim=(1, 3), keepdim=True)
    var = ((z - mean) ** 2).sum(dim=(1, 3), keepdim=True) / (30 * 4 - 1)
    normed = ((z - mean) / torch.sqrt(var + 1e-8)).reshape(2, 5, 6, 8)
    torch.testing.assert_close(block(u, axes), u + block.out(normed))
    assert all(m.bias is None for m in block.out if isinstance(m, torch.nn.Linear))


def test_fourier_features_are_frozen_and_saved():
    features = GaussianFourierFeatures(2, 8, scale=8.0)
    assert list(features.parameters()) == [] and "matrix" in features.state_dict()
    pos = torch.rand(5, 2)
    proj = 2 * math.pi * pos @ features.matrix
    torch.testing.assert_close(features(pos), torch.cat([proj.sin(), proj.cos()], -1))
    assert features.matrix.std() > 4  # N(0, 8^2) entries


@pytest.mark.slow
@pytest.mark.parametrize("spatial", [(128, 128), (32, 32, 32)])
def test_memory_grows_with_the_grid_not_its_square(spatial, largest_output):
    torch.manual_seed(0)
    dim, n_head, head_dim, n_points = 8, 2, 4, math.prod(spatial)
    block = factorized_block(dim, n_head, head_dim, ndim=len(spatial), kernel_multiplier=2)
    u = torch.randn(1, *spatial, dim, requires_grad=True)
    axes = [torch.arange(n) / n for n in spatial]
    with largest_output() as mode:
        block(u, axes).square().mean().backward()
    # the largest tensors are the grid's features, N x max(d, heads x head_dim); N^2 is 2.7e8 or 1.1e9
    assert mode.largest <= n_points * max(dim, n_head * head_dim) < n_points**2
    small = torch.randn(1, 8, 8, 2, 1)
    kernels = [torch.randn(1, 2, 8, 8)] * 2
    with largest_output() as naive:  # the recorder does catch an N x N kernel
        _explicit(small, kernels)
    assert naive.largest >= 64 * 64


@pytest.mark.slow
def test_peak_tensor_memory_is_linear_in_the_grid():
    torch.manual_seed(0)
    block = factorized_block(8, 2, 4, ndim=2, kernel_multiplier=2)
    peaks = []
    for n in (64, 128):
        u = torch.randn(1, n, n, 8, requires_grad=True)
        axes = [torch.arange(n) / n] * 2
        with TensorMemoryTracker() as tracker:
            block(u, axes).square().mean().backward()
        peaks.append(tracker.peak_bytes)
    # 4x the points, 4x the memory (an N x N kernel: 16x); forward and backward together hold about 13 copies
    # of the (N, d) features alive at once (one N x N float kernel per head would be 128^2 / 8 = 2048 copies)
    assert 3.8 < peaks[1] / peaks[0] < 4.2
    assert peaks[1] < 16 * (128 * 128 * 8 * 4)
