"""GalerkinTransformer1d: the paper's parameter count, any resolution, no n x n tensors in GT."""

from __future__ import annotations

import pytest
import torch

from opformer.models import GalerkinTransformer1d, build_model, preset


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("name", ["gt_burgers", "ft_burgers", "st_burgers", "lt_burgers"])
def test_burgers_parameter_count(name):
    model = build_model(preset(name))
    assert _count(model) == 530_305
    assert _count(model.feature_extractor) == 192
    assert all(_count(layer) == 74_880 for layer in model.encoder)
    assert _count(model.decoder) == 230_593


def test_regular_norm_scheme_has_same_count():
    assert _count(GalerkinTransformer1d(norm_scheme="regular")) == 530_305


def test_same_weights_run_at_every_resolution():
    torch.manual_seed(0)
    model = build_model(preset("gt_burgers")).eval()
    with torch.no_grad():
        for n in (512, 2048, 8192):
            assert model(torch.randn(1, n, 1)).shape == (1, n, 1)


def test_channels_dtype_and_coordinates():
    torch.manual_seed(0)
    kwargs = dict(in_channels=2, out_channels=3, d_model=8, n_layers=1, n_head=2, dim_ff=16, decoder_width=4,
                  decoder_modes=3, decoder_head_width=4)
    model = GalerkinTransformer1d(**kwargs).double()
    x = torch.randn(2, 16, 2, dtype=torch.float64)
    y = model(x)
    assert y.shape == (2, 16, 3) and y.dtype == torch.float64
    # the coordinates enter the attention: a different domain length changes the output
    longer = GalerkinTransformer1d(**{**kwargs, "length": 2.0}).double()
    longer.load_state_dict(model.state_dict())
    assert not torch.allclose(longer(x), y)


def test_runs_under_autocast():
    model = GalerkinTransformer1d(d_model=8, dim_ff=16, n_layers=1, decoder_width=4, decoder_modes=3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = model(torch.randn(2, 32, 1))
    assert y.shape == (2, 32, 1) and torch.isfinite(y).all()


def _largest_tensor(largest_output, attention_type: str, n: int) -> int:
    torch.manual_seed(0)
    model = GalerkinTransformer1d(attention_type=attention_type)
    x = torch.randn(1, n, 1)
    with largest_output() as mode:
        model(x).square().mean().backward()
    return mode.largest


def test_galerkin_attention_never_allocates_n_by_n(largest_output):
    n = 8192
    assert _largest_tensor(largest_output, "galerkin", n) < n * n


def test_fourier_attention_does_allocate_n_by_n(largest_output):
    n = 512  # the check above can fail: the quadratic attention is caught
    assert _largest_tensor(largest_output, "fourier", n) >= n * n
