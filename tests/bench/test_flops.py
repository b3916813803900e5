"""FLOP counts of a step match the formulas of a linear layer and of galerkin attention; the products' time of a
step counts the products and nothing else."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from opformer.bench.flops import count_flops, product_share
from opformer.nn.attention import SimpleAttention


@pytest.mark.slow
def test_linear_layer_flops_match_formula():
    b, n, c_in, c_out = 3, 17, 5, 7
    layer = nn.Linear(c_in, c_out)
    x = torch.randn(b, n, c_in, requires_grad=True)
    assert count_flops(lambda: layer(x)) == 2 * b * n * c_in * c_out
    # backward: the input and the weight gradients, one product each
    assert count_flops(lambda: layer(x).sum().backward()) == 3 * 2 * b * n * c_in * c_out


@pytest.mark.parametrize("n_head", [1, 2])
def test_galerkin_attention_flops_match_formula(n_head):
    b, n, d, p = 2, 50, 8, 1
    dh, e = d // n_head, d // n_head + p
    attn = SimpleAttention(d, n_head, "galerkin", pos_dim=p)
    x, pos = torch.randn(b, n, d), torch.rand(n, p)
    counted = count_flops(lambda: attn(x, pos))
    # K, V projections; the blocks K^T V (per head), pos^T V, K^T pos, pos^T pos of [pos, K]^T [pos, V];
    # M = A W_o^T per head; G = W_q^T M_q; c = b_q M_q + b_o; out = x G + c and + pos P
    formula = (2 * 2 * b * n * d * d + 2 * b * n_head * n * dh * dh + 2 * b * p * n * d + 2 * b * d * n * p
               + 2 * p * n * p + 2 * b * n_head * e * e * d + 2 * b * d * d * d + 2 * b * d * d
               + 2 * b * n * d * d + 2 * b * n * p * d)
    assert counted == formula
    # the textbook order Q'(K'^T V') on [pos, .] per head, then the output map, costs more per token
    textbook = 3 * 2 * b * n * d * d + 2 * 2 * b * n * n_head * e * e + 2 * b * n * n_head * e * d
    assert counted < textbook
    # and grows linearly in n: no N x N product
    counts = [count_flops(lambda: attn(torch.randn(b, k * n, d), torch.rand(k * n, p))) for k in (1, 2, 3)]
    assert counts[2] - counts[1] == counts[1] - counts[0]


@pytest.mark.slow
def test_product_share_counts_the_products_only():
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    x = torch.randn(2_000_000)

    def products():
        return a @ b, torch.bmm(a[None], b[None]), torch.addmm(a, a, b)

    assert product_share(lambda: (x.exp().sum(), time.sleep(0.05))) == 0  # element-wise work and waiting
    # A share of one call, not a timing: whatever the machine's speed or load, a step of products alone is mostly
    # products, and the same products beside a 0.5 s sleep (~100x their time here) are a small part of the step.
    # Counting the sleep would break the second, missing the products the first (measured at load 3.8: 0.83-0.95
    # and 0.023-0.029).
    alone = product_share(products, repeats=3)
    beside_sleep = product_share(lambda: (products(), time.sleep(0.5)), repeats=3)
    assert alone > 0.5 > beside_sleep > 0
