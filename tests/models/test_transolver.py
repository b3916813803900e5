"""Transolver against the authors' code (fixtures of tests/fixtures/transolver_fixture.py), its physics attention
against the formulas, the quadrature-weighted slice tokens, and padding."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from opformer.errors import ConfigError, DataError
from opformer.models.transolver import Transolver
from opformer.nn.physics_attention import PhysicsAttention

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transolver"
RECORD = json.loads((FIXTURES / "transolver_fixture.json").read_text())

#: their parameter names -> ours (the last block's head moves to the model)
RENAMES = [
    (r"^preprocess\.linear_pre\.0\.", "lift.linear1."), (r"^preprocess\.linear_post\.", "lift.linear2."),
    (r"\.ln_1\.", ".norm1."), (r"\.ln_2\.", ".norm2."), (r"\.Attn\.in_project_x\.", ".attention.project_x."),
    (r"\.Attn\.in_project_fx\.", ".attention.project_f."), (r"\.Attn\.in_project_slice\.", ".attention.slice."),
    (r"\.Attn\.to_q\.", ".attention.query."), (r"\.Attn\.to_k\.", ".attention.key."),
    (r"\.Attn\.to_v\.", ".attention.value."), (r"\.Attn\.to_out\.0\.", ".attention.out."),
    (r"\.Attn\.temperature$", ".attention.temperature"), (r"\.mlp\.linear_pre\.0\.", ".ffn.linear1."),
    (r"\.mlp\.linear_post\.", ".ffn.linear2."), (r"^blocks\.\d+\.ln_3\.", "head_norm."),
    (r"^blocks\.\d+\.mlp2\.", "head."),
]


def ours(config: dict) -> Transolver:
    """Our model in the configuration of one of the authors'."""
    grid = [config["H"], config["W"]] if "H" in config else None
    return Transolver(in_channels=config["fun_dim"], out_channels=config["out_dim"], space_dim=2,
                      n_hidden=config["n_hidden"], n_layers=config["n_layers"], n_head=config["n_head"],
                      slice_num=config["slice_num"], mlp_ratio=config["mlp_ratio"], grid_shape=grid)


def mapped(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Their state dict under our names."""
    out = {}
    for name, value in state.items():
        for pattern, replacement in RENAMES:
            name = re.sub(pattern, replacement, name)
        out[name] = value
    return out


@pytest.mark.parametrize("name", ["elasticity", "airfoil", "pipe"])
def test_parameter_counts_equal_the_authors(name):
    config = RECORD["published_configs"][name]
    with torch.device("meta"):
        model = ours(config)
    assert sum(p.numel() for p in model.parameters()) == RECORD["parameter_counts"][name]
    assert {"elasticity": 713_665, "airfoil": 2_810_817, "pipe": 3_073_985}[name] == RECORD["parameter_counts"][name]


@pytest.mark.parametrize("case", ["irregular", "structured", "structured_no_fields"])
@pytest.mark.parametrize("weighting", ["uniform", "quadrature"])
def test_forward_equals_the_authors_in_float64(case, weighting):
    """With mapped weights, on their inputs; ``quadrature`` with equal weights is the same model."""
    tensors = load_file(FIXTURES / "transolver_small.safetensors")
    prefix = f"{case}/state/"
    state = mapped({k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)})
    model = ours(RECORD["cases"][case]).double().eval()
    model.weighting = weighting
    model.load_state_dict(state)  # strict: every parameter mapped, none left over
    pos, fx = tensors[f"{case}/pos"], tensors[f"{case}/fx"]
    batch, n = pos.shape[:2]
    weights = torch.full((batch, n), 0.7, dtype=torch.float64)
    with torch.no_grad():
        out = model(fx, pos, weights, torch.ones(batch, n, dtype=torch.bool))
    torch.testing.assert_close(out, tensors[f"{case}/out"], rtol=1e-10, atol=1e-10)


def _attention(grid=None) -> PhysicsAttention:
    torch.manual_seed(0)
    attn = PhysicsAttention(6, n_head=2, slice_num=3, grid_shape=grid).double()
    with torch.no_grad():
        for p in attn.parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (0.8 if p.dim() == 4 and p.shape[-1] == 1 else 0.0))
    return attn


def test_weighted_slice_tokens_match_the_formula():
    """z_g = sum_n w_n s_ng f_n / (sum_n w_n s_ng + eps mean(w)), softmax among tokens, y_n = sum_g s_ng z'_g."""
    attn = _attention()
    x = torch.randn(1, 5, 6, dtype=torch.float64)
    w = torch.tensor([[0.1, 0.3, 0.2, 0.25, 0.15]], dtype=torch.float64)
    heads = []
    for h in range(2):
        rows = slice(3 * h, 3 * h + 3)
        f = x[0] @ attn.project_f.weight[rows].T + attn.project_f.bias[rows]
        xm = x[0] @ attn.project_x.weight[rows].T + attn.project_x.bias[rows]
        s = torch.softmax((xm @ attn.slice.weight.T + attn.slice.bias) / attn.temperature[0, h, 0, 0], dim=1)
        z = (s * w[0, :, None]).T @ f / ((s * w[0, :, None]).sum(0) + 1e-5 * 0.2)[:, None]
        q, k, v = z @ attn.query.weight.T, z @ attn.key.weight.T, z @ attn.value.weight.T
        heads.append(s @ (torch.softmax(q @ k.T / 3 ** 0.5, dim=1) @ v))
    expected = torch.cat(heads, dim=1) @ attn.out.weight.T + attn.out.bias
    got = attn(x, w, torch.ones(1, 5, dtype=torch.bool))
    torch.testing.assert_close(got[0], expected, rtol=1e-12, atol=1e-12)


def test_eps_is_relative_to_the_weights_scale():
    """Weights scaled by any factor give the same layer (the authors' absolute eps would not)."""
    attn = _attention()
    x, mask = torch.randn(2, 7, 6, dtype=torch.float64), torch.ones(2, 7, dtype=torch.bool)
    w = torch.rand(2, 7, dtype=torch.float64)
    attn.eps = 1e-1  # large, so that an absolute eps would show
    torch.testing.assert_close(attn(x, 1e-4 * w, mask), attn(x, w, mask), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("weighting", ["uniform", "quadrature"])
def test_padded_batch_equals_each_sample_alone(weighting):
    torch.manual_seed(1)
    model = Transolver(in_channels=2, out_channels=3, n_hidden=16, n_layers=2, n_head=2, slice_num=4,
                       weighting=weighting).double().eval()
    sizes, n = (9, 5), 9
    x, pos = torch.randn(2, n, 2, dtype=torch.float64), torch.rand(2, n, 2, dtype=torch.float64)
    w = torch.rand(2, n, dtype=torch.float64)
    mask = torch.arange(n) < torch.tensor(sizes)[:, None]
    w = torch.where(mask, w, torch.zeros_like(w))
    x[1, 5:], pos[1, 5:] = 1e3, 7.0  # padding holds anything finite
    batched = model(x, pos, w / w.sum(1, keepdim=True), mask)
    for b, size in enumerate(sizes):
        alone = model(x[b:b + 1, :size], pos[b:b + 1, :size], w[b:b + 1, :size] / w[b, :size].sum(),
                      mask[b:b + 1, :size])
        torch.testing.assert_close(batched[b:b + 1, :size], alone, rtol=1e-12, atol=1e-12)
        assert torch.all(batched[b, size:] == 0)


def test_quadrature_weighting_uses_the_weights_and_uniform_ignores_them():
    torch.manual_seed(2)
    model = Transolver(in_channels=1, n_hidden=16, n_layers=1, n_head=2, slice_num=4).double().eval()
    x, pos, mask = torch.randn(1, 6, 1).double(), torch.rand(1, 6, 2).double(), torch.ones(1, 6, dtype=torch.bool)
    w1, w2 = torch.rand(1, 6).double(), torch.rand(1, 6).double()
    torch.testing.assert_close(model(x, pos, w1, mask), model(x, pos, w2, mask), rtol=0, atol=0)
    model.weighting = "quadrature"
    assert not torch.allclose(model(x, pos, w1, mask), model(x, pos, w2, mask))
    uniform = torch.full((1, 6), 1 / 6, dtype=torch.float64)
    model_u = Transolver(in_channels=1, n_hidden=16, n_layers=1, n_head=2, slice_num=4).double().eval()
    model_u.load_state_dict(model.state_dict())
    torch.testing.assert_close(model(x, pos, uniform, mask), model_u(x, pos, w1, mask), rtol=1e-12, atol=1e-12)


def test_structured_mesh_clamps_the_temperature_and_refuses_padding():
    attn = _attention(grid=[2, 3])
    x, w, mask = torch.randn(1, 6, 6).double(), torch.full((1, 6), 1 / 6).double(), torch.ones(1, 6, dtype=torch.bool)
    with torch.no_grad():
        attn.temperature.fill_(0.01)
        low = attn(x, w, mask)
        attn.temperature.fill_(0.1)
        torch.testing.assert_close(attn(x, w, mask), low, rtol=0, atol=0)
    with pytest.raises(ValueError, match="6 nodes"):
        attn(x[:, :5], w[:, :5], mask[:, :5])
    model = Transolver(n_hidden=8, n_layers=1, n_head=2, slice_num=2, grid_shape=[2, 3])
    with pytest.raises(ValueError, match="no padding"):
        model(torch.zeros(1, 6, 0), torch.rand(1, 6, 2), w.float(), torch.tensor([[True] * 5 + [False]]))


def test_reference_grid_features_are_distances_to_the_grid_nodes():
    model = Transolver(n_hidden=8, n_layers=1, n_head=2, slice_num=2, reference_grid=3).double()
    assert model.lift.linear1.in_features == 9
    pos = torch.tensor([[[0.25, 1.0]]], dtype=torch.float64)
    nodes = [(a, b) for a in (0, 0.5, 1) for b in (0, 0.5, 1)]
    expected = torch.tensor([((0.25 - a) ** 2 + (1 - b) ** 2) ** 0.5 for a, b in nodes], dtype=torch.float64)
    torch.testing.assert_close(model._position_features(pos)[0, 0], expected, rtol=1e-14, atol=1e-14)


def test_bad_configs_and_batches_are_refused():
    with pytest.raises(ConfigError, match="multiple of n_head"):
        Transolver(n_hidden=10, n_head=3)
    with pytest.raises(ConfigError, match="weighting"):
        Transolver(weighting="voronoi")
    with pytest.raises(ConfigError, match="grid_shape"):
        Transolver(grid_shape=[4, 4, 4])
    model = Transolver(n_hidden=8, n_layers=1, n_head=2, slice_num=2)
    with pytest.raises(DataError, match=r"Transolver: expected x of shape \(1, 4, 0\)"):
        model(torch.zeros(1, 4, 1), torch.rand(1, 4, 2), torch.rand(1, 4), torch.ones(1, 4, dtype=torch.bool))
