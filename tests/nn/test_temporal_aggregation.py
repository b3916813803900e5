"""DPOT's temporal aggregation against its sum formula; initialisation; one frame."""

from __future__ import annotations

import math

import pytest
import torch

from opformer.nn.temporal_aggregation import TemporalAggregation


@pytest.mark.parametrize("frames", [1, 4])
def test_matches_the_sum_formula(frames):
    torch.manual_seed(0)
    layer = TemporalAggregation(frames, 6).double()
    with torch.no_grad():
        layer.gamma.copy_(torch.rand(6, dtype=torch.float64) * 5)  # cosines far from 1
    z = torch.randn(2, 3, 5, frames, 6, dtype=torch.float64)
    expected = torch.zeros(2, 3, 5, 6, dtype=torch.float64)
    for t in range(frames):
        tau = t / (frames - 1) if frames > 1 else 0.0
        expected += (z[..., t, :] * torch.cos(layer.gamma * tau)) @ layer.weight[t]
    torch.testing.assert_close(layer(z), expected, rtol=1e-12, atol=1e-12)


def test_initialisation():
    torch.manual_seed(0)
    layer = TemporalAggregation(10, 256)
    torch.testing.assert_close(layer.gamma, 2.0 ** torch.linspace(-10, 10, 256))
    assert layer.gamma[0] == 2.0**-10 and layer.gamma[-1] == 2.0**10
    assert layer.weight.std().item() == pytest.approx(1 / (10 * math.sqrt(256)), rel=0.01)
    assert sum(p.numel() for p in layer.parameters()) == 10 * 256 * 256 + 256
    with pytest.raises(ValueError, match=r"expected \(\.\.\., 10, 256\)"):
        layer(torch.randn(2, 9, 256))


@pytest.mark.parametrize("bias_shape", [(6,), (5, 1, 6)])  # one bias, or one per position (DPOT's pos_embed)
def test_forward_linear_is_the_aggregation_of_the_projected_frames(bias_shape):
    torch.manual_seed(0)
    layer = TemporalAggregation(4, 6).double()
    with torch.no_grad():
        layer.gamma.copy_(torch.rand(6, dtype=torch.float64) * 5)
    h = torch.randn(2, 5, 3, 4, 7, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(6, 7, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(*bias_shape, dtype=torch.float64, requires_grad=True)
    fused = layer.forward_linear(h, weight, bias)
    plain = layer(h @ weight.T + bias.unsqueeze(-2))
    torch.testing.assert_close(fused, plain, rtol=1e-12, atol=1e-12)
    grads = torch.autograd.grad(fused.square().sum(), [h, weight, bias, layer.weight, layer.gamma])
    expected = torch.autograd.grad(plain.square().sum(), [h, weight, bias, layer.weight, layer.gamma])
    for a, b in zip(grads, expected):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match=r"weight \(6, k\)"):
        layer.forward_linear(h, weight.T, bias)
