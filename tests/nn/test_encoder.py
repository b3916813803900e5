"""SimpleEncoderLayer: residual structure of the galerkin scheme and post-LN of the regular one."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from opformer.nn.encoder import SimpleEncoderLayer
from opformer.nn.mlp import FeedForward


def test_galerkin_scheme_is_two_plain_residuals():
    torch.manual_seed(0)
    layer = SimpleEncoderLayer(8, 2, 16, "galerkin", "galerkin", pos_dim=1).double()
    x, pos = torch.randn(2, 9, 8, dtype=torch.float64), torch.rand(9, 1, dtype=torch.float64)
    y = x + layer.attention(x, pos)
    torch.testing.assert_close(layer(x, pos), y + layer.ffn(y))
    assert not hasattr(layer, "norm1")


def test_regular_scheme_post_layer_norm():
    torch.manual_seed(0)
    layer = SimpleEncoderLayer(8, 2, 16, "galerkin", "regular", pos_dim=1, eps=1e-5).double()
    with torch.no_grad():
        for norm in (layer.norm1, layer.norm2):
            norm.weight.normal_()
            norm.bias.normal_()
    assert len(layer.attention.norms) == 0
    x, pos = torch.randn(2, 9, 8, dtype=torch.float64), torch.rand(9, 1, dtype=torch.float64)
    n1, n2 = layer.norm1, layer.norm2
    y = F.layer_norm(x + layer.attention(x, pos), (8,), n1.weight, n1.bias, 1e-5)
    expected = F.layer_norm(y + layer.ffn(y), (8,), n2.weight, n2.bias, 1e-5)
    torch.testing.assert_close(layer(x, pos), expected)


def test_regular_scheme_output_is_normalized_per_token():
    layer = SimpleEncoderLayer(8, 1, 16, "galerkin", "regular")
    out = layer(torch.randn(2, 9, 8) * 10 + 3, torch.rand(9, 1))
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 9), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(2, 9), atol=1e-3, rtol=0)


def test_dropouts_inactive_in_eval():
    torch.manual_seed(0)
    layer = SimpleEncoderLayer(8, 2, 16, dropout=0.5, ffn_dropout=0.5, attention_dropout=0.5)
    x, pos = torch.randn(2, 9, 8), torch.rand(9, 1)
    layer.eval()
    assert torch.equal(layer(x, pos), layer(x, pos))
    layer.train()
    assert not torch.equal(layer(x, pos), layer(x, pos))


def test_feed_forward_structure():
    ffn = FeedForward(4, 10, activation="silu")
    x = torch.randn(3, 4)
    expected = ffn.linear2(F.silu(ffn.linear1(x)))
    torch.testing.assert_close(ffn(x), expected)
    assert ffn.linear2.out_features == 4
