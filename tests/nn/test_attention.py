"""SimpleAttention against explicit per-head matrix computations (float64, tiny sizes)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial import Delaunay

from opformer.errors import ConfigError
from opformer.meshes import lumped_weights
from opformer.nn.attention import SimpleAttention, galerkin_gram


def _layer_norm(t: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    mean = t.mean(-1, keepdim=True)
    var = ((t - mean) ** 2).mean(-1, keepdim=True)
    return (t - mean) / torch.sqrt(var + eps) * weight + bias


def _head(attn: SimpleAttention, x: torch.Tensor, pos: torch.Tensor, i: int,
          eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Head ``i``'s query, key and value of one sample ``x`` (n, d): projected, layer-normalised where the
    attention normalises them, the positions ``pos`` (n, p) concatenated in front."""
    rows = slice(i * attn.d_head, (i + 1) * attn.d_head)
    mats = []
    for name in ("query", "key", "value"):
        lin = getattr(attn, name)
        t = x @ lin.weight[rows].T + lin.bias[rows]
        if name in attn.norms:
            norm = attn.norms[name]
            t = _layer_norm(t, norm.weight[i, 0], norm.bias[i, 0], eps)
        mats.append(torch.cat([pos, t], dim=1))
    return mats[0], mats[1], mats[2]


def reference(attn: SimpleAttention, x: torch.Tensor, pos: torch.Tensor, eps: float) -> torch.Tensor:
    """Head by head, sample by sample, with explicit matrices."""
    outputs = []
    for b in range(x.shape[0]):
        n = x.shape[1]
        pos_b = pos if pos.dim() == 2 else pos[b]
        merged = []
        for i in range(attn.n_head):
            q, k, v = _head(attn, x[b], pos_b, i, eps)
            kind = attn.attention_type
            if kind == "galerkin":
                z = q @ (k.T @ v) / n
            elif kind == "fourier":
                z = (q @ k.T) @ v / n
            elif kind == "softmax":
                s = q @ k.T / math.sqrt(q.shape[1])
                p = torch.exp(s - s.max(1, keepdim=True).values)
                z = (p / p.sum(1, keepdim=True)) @ v
            else:
                qs = torch.exp(q) / torch.exp(q).sum(1, keepdim=True)
                ks = torch.exp(k) / torch.exp(k).sum(0, keepdim=True)
                z = qs @ (ks.T @ v)
            merged.append(z)
        merged = torch.cat(merged, dim=1)
        outputs.append(merged @ attn.out.weight.T + attn.out.bias)
    return torch.stack(outputs)


def _randomise(attn: SimpleAttention) -> None:
    """Give every parameter (incl. LN affine and biases) a non-trivial value."""
    with torch.no_grad():
        for p in attn.parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if p.dim() == 3 else 0.0))


@pytest.mark.slow
@pytest.mark.parametrize("attention_type", ["galerkin", "fourier", "softmax", "linear"])
@pytest.mark.parametrize("norm_scheme", ["galerkin", "regular"])
@pytest.mark.parametrize("batched_pos", [False, True])
def test_matches_explicit_computation(attention_type, norm_scheme, batched_pos):
    torch.manual_seed(0)
    d, h, n, pos_dim, eps = 12, 3, 7, 2, 1e-7
    attn = SimpleAttention(d, h, attention_type, norm_scheme, pos_dim=pos_dim, eps=eps).double()
    _randomise(attn)
    x = torch.randn(2, n, d, dtype=torch.float64)
    pos = torch.rand(2, n, pos_dim, dtype=torch.float64) if batched_pos else torch.rand(n, pos_dim).double()
    torch.testing.assert_close(attn(x, pos), reference(attn, x, pos, eps), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    ("attention_type", "normed"),
    [("galerkin", {"key", "value"}), ("linear", {"key", "value"}),
     ("fourier", {"query", "key"}), ("softmax", {"query", "key"})],
)
def test_norm_placement_and_parameter_count(attention_type, normed):
    d, h, pos_dim = 8, 2, 1
    attn = SimpleAttention(d, h, attention_type, "galerkin", pos_dim=pos_dim)
    assert set(attn.norms.keys()) == normed
    qkv = 3 * (d * d + d)
    out = (d + h * pos_dim) * d + d
    assert sum(p.numel() for p in attn.parameters()) == qkv + 2 * 2 * d + out
    regular = SimpleAttention(d, h, attention_type, "regular", pos_dim=pos_dim)
    assert len(regular.norms) == 0
    assert sum(p.numel() for p in regular.parameters()) == qkv + out


def test_diagonal_init_without_xavier_is_exactly_delta_identity():
    attn = SimpleAttention(6, 2, xavier_gain=0.0, diagonal_weight=0.25)
    for lin in (attn.query, attn.key, attn.value):
        assert torch.equal(lin.weight, 0.25 * torch.eye(6))
        assert torch.equal(lin.bias, torch.zeros(6))


def test_xavier_init_without_diagonal_is_bounded_by_gain():
    torch.manual_seed(0)
    d, eta = 32, 0.01
    attn = SimpleAttention(d, 4, xavier_gain=eta, diagonal_weight=0.0)
    bound = eta * math.sqrt(6 / (2 * d))
    for lin in (attn.query, attn.key, attn.value):
        assert lin.weight.abs().max() <= bound
        assert lin.weight.abs().max() > 0.9 * bound  # actually uniform on the full range, not tiny
        assert torch.equal(lin.bias, torch.zeros(d))


def test_default_init_is_diagonally_dominant():
    attn = SimpleAttention(16, 1)
    w = attn.query.weight
    off_diagonal = w - torch.diag(w.diagonal())
    assert torch.allclose(w.diagonal(), torch.full((16,), 0.01), atol=0.01 * math.sqrt(6 / 32))
    assert off_diagonal.abs().max() <= 0.01 * math.sqrt(6 / 32)


@pytest.mark.parametrize("attention_type", ["galerkin", "fourier", "softmax", "linear"])
def test_dropout_only_in_training(attention_type):
    torch.manual_seed(0)
    attn = SimpleAttention(8, 2, attention_type, dropout=0.5, xavier_gain=1.0)
    plain = SimpleAttention(8, 2, attention_type, dropout=0.0)
    plain.load_state_dict(attn.state_dict())
    x, pos = torch.randn(2, 10, 8), torch.rand(10, 1)
    attn.eval()
    first, second = attn(x, pos), attn(x, pos)
    assert torch.equal(first, second)
    torch.testing.assert_close(first, plain(x, pos))
    attn.train()
    assert not torch.allclose(attn(x, pos), first)


def test_output_shape_and_pos_dim_zero():
    attn = SimpleAttention(8, 2, pos_dim=0)
    assert attn.out.in_features == 8
    assert attn(torch.randn(3, 5, 8)).shape == (3, 5, 8)
    with pytest.raises(ValueError, match="coordinates"):
        SimpleAttention(8, 2, pos_dim=2)(torch.randn(3, 5, 8), torch.rand(5, 1))


def test_config_errors():
    with pytest.raises(ConfigError, match="attention_type.*galerkin, fourier, softmax, linear"):
        SimpleAttention(8, 2, "cosine")
    with pytest.raises(ConfigError, match="norm_scheme"):
        SimpleAttention(8, 2, norm_scheme="pre")
    with pytest.raises(ConfigError, match="multiple of n_head"):
        SimpleAttention(10, 3)


@pytest.mark.slow
@pytest.mark.parametrize("n_head", [1, 3])
@pytest.mark.parametrize("pos_kind", ["none", "shared", "batched"])
def test_galerkin_gram_gradients(n_head, pos_kind):
    """The hand-written backward of K'^T V' against finite differences, with contiguous gradients."""
    torch.manual_seed(0)
    batch, n, d, p = 2, 6, 4, 2
    k = torch.randn(batch, n, n_head, d, dtype=torch.float64, requires_grad=True)
    v = torch.randn(batch, n, n_head, d, dtype=torch.float64, requires_grad=True)
    pos = {"none": None, "shared": torch.rand(n, p, dtype=torch.float64),
           "batched": torch.rand(batch, n, p, dtype=torch.float64)}[pos_kind]
    assert torch.autograd.gradcheck(lambda a, b: galerkin_gram(a, b, pos), (k, v))
    out = galerkin_gram(k, v, pos)
    expected_shape = (batch, n_head, d + (0 if pos is None else p), d + (0 if pos is None else p))
    assert out.shape == expected_shape
    grads = torch.autograd.grad(out.square().sum(), (k, v))
    assert all(g.is_contiguous() and g.shape == k.shape for g in grads)


@pytest.mark.parametrize("attention_type", ["galerkin", "fourier"])
@pytest.mark.parametrize("n_head", [1, 3])
def test_gradients_match_explicit_computation(attention_type, n_head):
    torch.manual_seed(0)
    d, n, eps = 12, 7, 1e-7
    attn = SimpleAttention(d, n_head, attention_type, pos_dim=2, eps=eps).double()
    _randomise(attn)
    x = torch.randn(2, n, d, dtype=torch.float64, requires_grad=True)
    pos = torch.rand(n, 2, dtype=torch.float64)
    weight = torch.randn(2, n, d, dtype=torch.float64)
    inputs = (x, *attn.parameters())
    got = torch.autograd.grad((attn(x, pos) * weight).sum(), inputs)
    expected = torch.autograd.grad((reference(attn, x, pos, eps) * weight).sum(), inputs)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("attention_type", ["galerkin", "softmax"])
def test_residual_form_adds_the_input(attention_type):
    torch.manual_seed(0)
    attn = SimpleAttention(8, 2, attention_type, pos_dim=1).double()
    _randomise(attn)
    x, pos = torch.randn(2, 5, 8, dtype=torch.float64), torch.rand(5, 1, dtype=torch.float64)
    torch.testing.assert_close(attn(x, pos, residual=True), x + attn(x, pos), rtol=1e-12, atol=1e-12)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x32 = x.float()
        out = attn.float()(x32, pos.float(), residual=True)
    assert out.dtype == torch.float32  # the residual stream keeps its precision under autocast


def weighted_reference(attn: SimpleAttention, x: torch.Tensor, pos: torch.Tensor, w: torch.Tensor,
                       eps: float) -> torch.Tensor:
    """The quadrature-weighted sums of ``../shared/spec/mesh.md``, head by head with explicit matrices."""
    outputs = []
    for b in range(x.shape[0]):
        merged = []
        for i in range(attn.n_head):
            q, k, v = _head(attn, x[b], pos[b], i, eps)
            kind = attn.attention_type
            if kind == "galerkin":
                z = q @ (k.T @ torch.diag(w[b]) @ v)
            elif kind == "fourier":
                z = (q @ k.T) @ torch.diag(w[b]) @ v
            elif kind == "softmax":
                s = q @ k.T / math.sqrt(q.shape[1])
                a = w[b] * torch.exp(s - s.max(1, keepdim=True).values)  # a_ij = w_j exp(s_ij) / sum_k w_k exp(s_ik)
                z = (a / a.sum(1, keepdim=True)) @ v
            else:
                qs = torch.exp(q) / torch.exp(q).sum(1, keepdim=True)
                ks = w[b, :, None] * torch.exp(k)
                z = qs @ ((ks / ks.sum(0, keepdim=True)).T @ v)
            merged.append(z)
        outputs.append(torch.cat(merged, dim=1) @ attn.out.weight.T + attn.out.bias)
    return torch.stack(outputs)


@pytest.mark.parametrize("attention_type", ["galerkin", "fourier", "softmax", "linear"])
def test_weighted_sums_match_explicit_formulas(attention_type):
    torch.manual_seed(1)
    d, h, n, pos_dim, eps = 8, 2, 6, 2, 1e-7
    attn = SimpleAttention(d, h, attention_type, pos_dim=pos_dim, eps=eps).double()
    _randomise(attn)
    x, pos = torch.randn(2, n, d, dtype=torch.float64), torch.rand(2, n, pos_dim, dtype=torch.float64)
    w = torch.rand(2, n, dtype=torch.float64) + 0.1
    w = w / w.sum(1, keepdim=True)
    expected = weighted_reference(attn, x, pos, w, eps)
    torch.testing.assert_close(attn(x, pos, weights=w), expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(attn(x, pos, residual=True, weights=w), x + expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("attention_type", ["galerkin", "fourier", "softmax", "linear"])
def test_uniform_weights_equal_the_unweighted_layer(attention_type):
    torch.manual_seed(2)
    attn = SimpleAttention(8, 2, attention_type, pos_dim=1).double()
    _randomise(attn)
    x, pos = torch.randn(3, 5, 8, dtype=torch.float64), torch.rand(5, 1, dtype=torch.float64)
    w = torch.full((3, 5), 1 / 5, dtype=torch.float64)
    torch.testing.assert_close(attn(x, pos, weights=w), attn(x, pos), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attention_type", ["galerkin", "fourier", "softmax", "linear"])
def test_zero_weight_tokens_are_excluded(attention_type):
    """Padded tokens (weight 0, any finite values) change nothing at the real tokens."""
    torch.manual_seed(3)
    attn = SimpleAttention(8, 2, attention_type, pos_dim=2).double()
    _randomise(attn)
    x, pos = torch.randn(1, 4, 8, dtype=torch.float64), torch.rand(1, 4, 2, dtype=torch.float64)
    w = torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    alone = attn(x, pos, weights=w)
    padded = attn(torch.cat([x, 50 * torch.randn(1, 3, 8, dtype=torch.float64)], 1),
                  torch.cat([pos, 9 * torch.rand(1, 3, 2, dtype=torch.float64)], 1),
                  weights=torch.cat([w, torch.zeros(1, 3, dtype=torch.float64)], 1))
    torch.testing.assert_close(padded[:, :4], alone, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="weights"):
        attn(x, pos, weights=w[:, :3])


@pytest.mark.slow
@pytest.mark.parametrize("attention_type", ["galerkin", "fourier", "softmax"])
def test_quadrature_weights_make_the_layer_independent_of_the_mesh(attention_type):
    """The same smooth field on a uniform and on a graded point set of the unit square (density ~ r^(-4/3) near a
    corner): with the lumped weights the outputs at shared points agree to the quadrature's accuracy; with uniform
    weights (a mean over the points) the graded set's density shows (here: 0.1% to 1% against 33% to 118%)."""
    torch.manual_seed(0)
    attn = SimpleAttention(4, 2, attention_type, pos_dim=2).double()
    _randomise(attn)
    shared = np.array([[0.3, 0.7], [0.5, 0.5], [0.8, 0.2], [0, 0], [1, 0], [0, 1], [1, 1.0]])
    outputs = {}
    for graded in (False, True):
        u = np.random.default_rng(1).random((2000, 2))
        points = np.concatenate([shared, u ** 3 if graded else u])
        w = lumped_weights(points, Delaunay(points).simplices, "triangle")
        pos = torch.tensor(points)[None]
        x, y = pos[..., 0], pos[..., 1]
        fields = torch.stack([torch.sin(2 * x), torch.cos(3 * y), x * y, torch.ones_like(x)], -1)
        with torch.no_grad():
            for name, weights in (("lumped", torch.tensor(w / w.sum())),
                                  ("uniform", torch.full((len(w),), 1 / len(w), dtype=torch.float64))):
                outputs[graded, name] = attn(fields, pos, weights=weights[None])[0, :3]
    change = {name: float((outputs[True, name] - outputs[False, name]).norm() / outputs[False, name].norm())
              for name in ("lumped", "uniform")}
    assert change["lumped"] < 0.02 and change["uniform"] > 0.1, change
