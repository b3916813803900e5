"""FNO (fno1d): the baseline's parameter count, layer structure and resolution handling."""

from __future__ import annotations

import torch

from opformer.models import FNO, build_model, preset


def test_fno1d_burgers_parameter_count():
    model = build_model(preset("fno1d_burgers"))
    assert sum(p.numel() for p in model.parameters()) == 549_569
    assert model.lift.in_features == 2  # input channel + coordinate


def test_activation_after_all_but_last_layer():
    model = FNO(1, width=8, modes=4, n_layers=3)
    kinds = [type(layer.activation).__name__ for layer in model.layers]
    assert kinds == ["ReLU", "ReLU", "Identity"]


def test_forward_is_lift_layers_projection_with_coordinates():
    torch.manual_seed(0)
    model = FNO(1, in_channels=2, out_channels=3, width=8, modes=4, n_layers=2, projection_width=16).double()
    x = torch.randn(2, 20, 2, dtype=torch.float64)
    pos = (torch.arange(20, dtype=torch.float64) / 20).view(1, 20, 1).expand(2, 20, 1)
    h = model.lift(torch.cat([x, pos], dim=-1))
    for layer in model.layers:
        h = layer(h)
    torch.testing.assert_close(model(x), model.projection(h))


def test_runs_at_several_resolutions():
    model = build_model(preset("fno1d_burgers")).eval()
    with torch.no_grad():
        for n in (64, 512, 2048):
            assert model(torch.randn(2, n, 1)).shape == (2, n, 1)
