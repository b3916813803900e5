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
