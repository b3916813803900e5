"""The Galerkin / Fourier Transformer on meshes: equal to the grid model on a uniform grid, padding, weightings."""

from __future__ import annotations

import pytest
import torch

from opformer.errors import ConfigError, DataError
from opformer.models.galerkin_transformer import GalerkinTransformer1d
from opformer.models.mesh_mlp import PointwiseMLP
from opformer.models.mesh_transformer import MeshGalerkinTransformer
from opformer.nn.positional import grid_coordinates

SMALL = dict(d_model=12, n_layers=2, n_head=2, dim_ff=16)


def _randomise(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))


@pytest.mark.parametrize("attention_type", ["galerkin", "fourier", "softmax"])
def test_equals_the_grid_model_on_a_uniform_grid(attention_type):
    """On a periodic 1D grid with equal weights, lift + encoder equal the grid GT's feature extractor + encoder
    (the same weights copied, float64); the regressor is then the point-wise map of (latent, coordinates)."""
    torch.manual_seed(0)
    grid = GalerkinTransformer1d(in_channels=2, attention_type=attention_type, **SMALL).double()
    _randomise(grid)
    mesh = MeshGalerkinTransformer(in_channels=2, space_dim=1, attention_type=attention_type,
                                   coordinate_encoding="none", **SMALL).double()
    mesh.lift.load_state_dict(grid.feature_extractor.state_dict())
    mesh.encoder.load_state_dict(grid.encoder.state_dict())
    batch, n = 3, 16
    x = torch.randn(batch, n, 2, dtype=torch.float64)
    pos = grid_coordinates((n,), dtype=torch.float64)
    expected = grid.encoder(grid.feature_extractor(x), pos)
    weights = torch.full((batch, n), 0.37, dtype=torch.float64)  # equal weights, any scale
    mask = torch.ones(batch, n, dtype=torch.bool)
    latent = mesh.encode(x, pos.expand(batch, n, 1), weights, mask)
    torch.testing.assert_close(latent, expected, rtol=1e-12, atol=1e-12)
    out = mesh(x, pos.expand(batch, n, 1), weights, mask)
    torch.testing.assert_close(out, mesh.regressor(torch.cat([expected, pos.expand(batch, n, 1)], -1)),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attention_type", ["galerkin", "fourier", "softmax", "linear"])
@pytest.mark.parametrize("weighting", ["quadrature", "uniform"])
def test_padded_batch_equals_each_sample_alone(attention_type, weighting):
    torch.manual_seed(1)
    model = MeshGalerkinTransformer(in_channels=1, out_channels=2, attention_type=attention_type,
                                    weighting=weighting, coordinate_encoding="fourier", fourier_modes=2,
                                    **SMALL).double().eval()
    _randomise(model)
    sizes, n = (8, 3), 8
    x, pos = torch.randn(2, n, 1, dtype=torch.float64), torch.rand(2, n, 2, dtype=torch.float64)
    mask = torch.arange(n) < torch.tensor(sizes)[:, None]
    w = torch.where(mask, torch.rand(2, n, dtype=torch.float64), torch.zeros(2, n, dtype=torch.float64))
    x[1, 3:], pos[1, 3:] = -40.0, 3.0  # padding holds anything finite
    batched = model(x, pos, w, mask)
    for b, size in enumerate(sizes):
        alone = model(x[b:b + 1, :size], pos[b:b + 1, :size], w[b:b + 1, :size], mask[b:b + 1, :size])
        torch.testing.assert_close(batched[b:b + 1, :size], alone, rtol=1e-12, atol=1e-12)
        assert torch.all(batched[b, size:] == 0)


def test_weightings():
    """quadrature: the sums use the given weights (renormalised per sample); uniform: 1/n on the real points."""
    torch.manual_seed(2)
    quad = MeshGalerkinTransformer(in_channels=1, **SMALL).double()
    _randomise(quad)
    uniform = MeshGalerkinTransformer(in_channels=1, weighting="uniform", **SMALL).double()
    uniform.load_state_dict(quad.state_dict())
    x, pos, mask = torch.randn(2, 6, 1).double(), torch.rand(2, 6, 2).double(), torch.ones(2, 6, dtype=torch.bool)
    w = torch.rand(2, 6).double()
    torch.testing.assert_close(quad(x, pos, 5 * w, mask), quad(x, pos, w, mask), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(quad(x, pos, w, mask), uniform(x, pos, w, mask))
    torch.testing.assert_close(uniform(x, pos, w, mask), quad(x, pos, torch.ones_like(w), mask),
                               rtol=1e-12, atol=1e-12)


def test_coordinate_encodings_and_lift_width():
    assert MeshGalerkinTransformer(in_channels=0, space_dim=2, **SMALL).lift.in_features == 2
    fourier = MeshGalerkinTransformer(in_channels=1, space_dim=2, coordinate_encoding="fourier", fourier_modes=3,
                                      **SMALL)
    assert fourier.lift.in_features == 1 + 2 * 7
    assert MeshGalerkinTransformer(in_channels=3, coordinate_encoding="none", **SMALL).lift.in_features == 3
    with pytest.raises(ConfigError, match="sees no input"):
        MeshGalerkinTransformer(in_channels=0, coordinate_encoding="none")
    with pytest.raises(ConfigError, match="coordinate_encoding"):
        MeshGalerkinTransformer(coordinate_encoding="rff")


def test_bad_batches_are_refused_in_one_line():
    model = MeshGalerkinTransformer(in_channels=1, **SMALL)
    x, pos, w, mask = torch.zeros(1, 4, 1), torch.rand(1, 4, 2), torch.rand(1, 4), torch.ones(1, 4, dtype=torch.bool)
    with pytest.raises(DataError, match=r"expected coordinates \(batch, points, 2\), got \(1, 4, 3\)"):
        model(x, torch.rand(1, 4, 3), w, mask)
    with pytest.raises(DataError, match=r"expected weights of shape \(1, 4\)"):
        model(x, pos, w[:, :3], mask)
    with pytest.raises(DataError, match="bool mask"):
        model(x, pos, w, mask.float())


def test_pointwise_mlp_acts_point_by_point():
    torch.manual_seed(3)
    model = PointwiseMLP(in_channels=2, out_channels=1, width=8, n_layers=2).double()
    x, pos = torch.randn(1, 5, 2).double(), torch.rand(1, 5, 2).double()
    mask = torch.tensor([[True, True, True, False, False]])
    out = model(x, pos, torch.rand(1, 5).double(), mask)
    torch.testing.assert_close(out[0, :3], model.net(torch.cat([pos, x], -1))[0, :3], rtol=0, atol=0)
    assert torch.all(out[0, 3:] == 0)
    assert sum(p.numel() for p in model.parameters()) == (4 * 8 + 8) + (8 * 8 + 8) + (8 + 1)
