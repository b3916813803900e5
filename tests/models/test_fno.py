"""FNO (fno1d): the baseline's parameter count, layer structure and resolution handling; the domain padding of
the FNO family (FNO, FNO-time, F-FNO) on non-periodic axes."""

from __future__ import annotations

import math

import pytest
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


def _spectral_inputs(model: torch.nn.Module, x: torch.Tensor) -> list[tuple[int, ...]]:
    """The spatial shape every spectral layer of ``model`` sees when it maps ``x`` (the output keeps x's grid)."""
    seen = []
    spectral = [m for m in model.modules() if type(m).__name__ in ("SpectralConv", "FactorizedSpectralConv")]
    hooks = [m.register_forward_pre_hook(lambda _, args: seen.append(tuple(args[0].shape[1:-1]))) for m in spectral]
    with torch.no_grad():
        y = model(x)
    for hook in hooks:
        hook.remove()
    assert y.shape[1:1 + len(seen[0])] == x.shape[1:1 + len(seen[0])]
    return seen


@pytest.mark.parametrize(("config", "spatial", "padded"), [
    ({"name": "fno1d", "periodic": False, "padding": 0.25}, (20,), (25,)),
    ({"name": "fno2d", "periodic": [True, False], "padding": 3}, (12, 10), (12, 13)),
    ({"name": "fno2d", "periodic": False, "padding": 0.1}, (12, 10), (13, 11)),
    ({"name": "fno2d", "periodic": True, "padding": 0.1}, (12, 10), (12, 10)),
    ({"name": "fno2d_time", "t_in": 2, "periodic": [False, True], "padding": 2}, (12, 10), (14, 10)),
    ({"name": "fno3d_time", "t_in": 2, "periodic": False, "padding": 0.25}, (8, 8, 12), (10, 10, 15)),
    ({"name": "ffno2d", "t_in": 2, "periodic": False, "padding": 4}, (9, 10), (13, 14)),
    ({"name": "ffno3d", "t_in": 2, "periodic": [False, True, False], "padding": 0.5}, (6, 8, 10), (9, 8, 15)),
])
def test_padding_widens_exactly_the_closed_axes_seen_by_the_spectral_layers(config, spatial, padded):
    sizes = {"width": 6, "modes": 3, "n_layers": 2, "projection_width": 8}
    torch.manual_seed(0)
    model = build_model({**config, **sizes})
    torch.manual_seed(0)
    plain = build_model({**config, **sizes, "padding": 0})
    x = torch.randn(2, *spatial, *((2, 1) if "t_in" in config else (1,)))
    assert set(_spectral_inputs(model, x)) == {padded}
    assert set(_spectral_inputs(plain, x)) == {spatial}
    # padding adds no parameters: the same weights serve both
    shapes = [(k, v.shape) for k, v in model.state_dict().items()]
    assert shapes == [(k, v.shape) for k, v in plain.state_dict().items()]
    torch.testing.assert_close(model.state_dict(), plain.state_dict(), rtol=0, atol=0)


def test_padded_forward_is_lift_pad_layers_crop_projection():
    torch.manual_seed(0)
    model = FNO(2, width=8, modes=3, n_layers=2, projection_width=16, periodic=[True, False], padding=3).double()
    x = torch.randn(2, 10, 12, 1, dtype=torch.float64)
    s0, s1 = torch.arange(10, dtype=torch.float64) / 10, torch.linspace(0, 1, 12, dtype=torch.float64)
    pos = torch.stack(torch.meshgrid(s0, s1, indexing="ij"), dim=-1).expand(2, 10, 12, 2)
    h = torch.cat([model.lift(torch.cat([x, pos], dim=-1)), torch.zeros(2, 10, 3, 8, dtype=torch.float64)], dim=2)
    for layer in model.layers:
        h = layer(h)
    torch.testing.assert_close(model(x), model.projection(h[:, :, :12]), rtol=1e-12, atol=1e-14)
    unpadded = FNO(2, width=8, modes=3, n_layers=2, projection_width=16, periodic=[True, False]).double()
    unpadded.load_state_dict(model.state_dict())
    assert not torch.allclose(unpadded(x), model(x))


def _smooth_on_nodes(n: int, coeffs: torch.Tensor) -> torch.Tensor:
    """sum_kl Re(c_kl e^{i pi (k x + l y)}) at the n x n nodes of the closed unit square; ``coeffs`` (b, K, K, c)."""
    s = torch.linspace(0, 1, n, dtype=torch.float64)
    e = torch.exp(1j * math.pi * torch.outer(s, torch.arange(coeffs.shape[1], dtype=torch.float64)))
    return torch.einsum("xk,yl,bklc->bxyc", e, e, coeffs).real


@pytest.mark.parametrize("name", ["fno2d", "fno2d_time", "ffno2d"])
def test_fractional_padding_keeps_the_padded_model_resolution_invariant(name):
    """The same weights at 33^2 and 65^2 nodes (the coarse nodes are every other fine one): a fraction pads the
    same share of the domain at both grids, as close as the unpadded model; a fixed cell count pads half the
    share at the fine grid and is several times farther off."""
    coeffs = torch.randn(2, 3, 3, 1, dtype=torch.complex128, generator=torch.Generator().manual_seed(0))
    errors = {}
    for padding in (0, 0.25, 8):  # 0.25: 8 cells at 33 points, 16 at 65
        torch.manual_seed(1)
        config = {"name": name, "width": 8, "modes": 4, "n_layers": 2, "projection_width": 16, "periodic": False,
                  "padding": padding, **({"t_in": 1} if name != "fno2d" else {})}
        model = build_model(config).double()
        frame = (lambda u: u.unsqueeze(-2)) if name != "fno2d" else (lambda u: u)
        with torch.no_grad():
            coarse, fine = model(frame(_smooth_on_nodes(33, coeffs))), model(frame(_smooth_on_nodes(65, coeffs)))
        errors[padding] = float(torch.linalg.norm(fine[:, ::2, ::2] - coarse) / torch.linalg.norm(coarse))
    assert errors[0.25] < 1e-2 and errors[0.25] < 1.5 * errors[0]
    assert errors[8] > 3 * errors[0.25]
