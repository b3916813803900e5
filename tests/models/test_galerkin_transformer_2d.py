import pytest
import torch

from opformer.errors import DataError
from opformer.models import build_model, preset
from opformer.models.surrogate import zero_boundary


def count(module):
    return sum(p.numel() for p in module.parameters())


def test_forward_darcy_model_has_the_papers_parameter_count():
    model = build_model(preset("gt_darcy"))
    assert count(model) == 2_220_829
    # the pieces (Cao 2021, Table 5 / appendix B), no convolution has a bias:
    assert count(model.downsample) == 9 * (128 + 128 * 42 + 42 * 42 + 42 * 44)
    layer = 3 * (128 * 128 + 128) + 2 * 4 * 2 * 32 + (136 * 128 + 128) + (128 * 256 + 256) + (256 * 128 + 128)
    assert count(model.encoder) == 6 * layer
    assert count(model.upsample) == 9 * 128 * 128
    spectral_layer = 2 * 32 * 32 * 12 * 12 * 2 + 32 * 32 + 32  # two corner blocks of complex weights + Linear
    assert count(model.lift) + count(model.regressor) == (130 * 32 + 32) + 2 * spectral_layer + (32 * 128 + 128) + 129
    assert count(build_model(preset("ft_darcy"))) == 2_220_829


def test_fno2d_baseline_parameter_count():
    # lift Linear(1 + 2, 32), 4 layers of (2 corner blocks x 32 x 32 x 12 x 12 complex + Linear(32, 32)), projection
    expected = (3 * 32 + 32) + 4 * (2 * 32 * 32 * 144 * 2 + 32 * 32 + 32) + (32 * 128 + 128) + (128 + 1)
    assert count(build_model(preset("fno2d_darcy"))) == expected == 2_368_001


def test_output_grids_forward_any_fine_grid_and_inverse_on_the_coarse_grid():
    small = {"d_model": 8, "n_head": 2, "n_layers": 1, "dim_ff": 8, "decoder_width": 4, "decoder_modes": 3,
             "decoder_head_width": 4}
    forward = build_model({"name": "galerkin_transformer_2d", "coarse_size": 7, **small}).eval()
    for n in (13, 25):  # one set of weights at several fine grids
        assert forward(torch.randn(2, n, n, 1)).shape == (2, n, n, 1)
    inverse = build_model({"name": "galerkin_transformer_2d", "coarse_size": 7, "decoder": "pointwise", **small})
    assert inverse.eval()(torch.randn(2, 25, 25, 1)).shape == (2, 7, 7, 1)
    fno = build_model({"name": "fno2d", "width": 4, "modes": 3, "output_size": 7})
    assert fno(torch.randn(2, 25, 25, 1)).shape == (2, 7, 7, 1)


def test_bad_grids_are_one_line_data_errors():
    model = build_model({"name": "galerkin_transformer_2d", "coarse_size": 9, "d_model": 8, "n_head": 2,
                         "n_layers": 1, "dim_ff": 8})
    with pytest.raises(DataError, match=r"expected a square grid \(batch, n, n, channels\), got \(1, 13, 11, 1\)"):
        model(torch.randn(1, 13, 11, 1))
    with pytest.raises(DataError, match=r"the coarse grid \(9\) is larger than the input grid \(7\)"):
        model(torch.randn(1, 7, 7, 1))


def test_zero_boundary_sets_exactly_the_boundary_to_zero():
    y = torch.ones(2, 4, 5, 3)
    z = zero_boundary(y)
    assert z[:, 1:-1, 1:-1].eq(1).all()
    assert z[:, 0].eq(0).all() and z[:, -1].eq(0).all() and z[:, :, 0].eq(0).all() and z[:, :, -1].eq(0).all()
    assert z.sum() == 2 * 2 * 3 * 3
