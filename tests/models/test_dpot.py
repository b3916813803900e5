"""DPOT: the authors' parameter counts (meta device), the forward pass against the paper's formula written frame
by frame, the positional embedding on other grids, shapes in 2D and 3D, float64, errors, and training."""

from __future__ import annotations

import csv

import pytest
import torch
import torch.nn.functional as F

from opformer.config import config_from_dict
from opformer.errors import ConfigError, DataError
from opformer.models import build_model, preset
from opformer.models.dpot import DPOT
from opformer.nn.resample import linear_resample
from opformer.train.trainer import train


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# the authors' models built (docs/models.md): with the 12-class data-set classifier, and without it
AUTHORS = {"dpot_ti": (7_534_643, 7_003_175), "dpot_s": (30_801_459, 28_689_959),
           "dpot_m": (122_125_875, 120_014_375), "dpot_l": (509_018_739, 504_278_631)}


@pytest.mark.parametrize("name", sorted(AUTHORS))
def test_parameter_counts_are_the_authors(name):
    with torch.device("meta"):  # no memory: L has half a billion parameters
        with_classifier = build_model(preset(name))
        without = build_model({**preset(name), "n_classes": None})
    assert (_count(with_classifier), _count(without)) == AUTHORS[name]
    assert without.classifier is None


def _formula(ndim, t_in, t_out, c, p, grid, e, depth, heads, r, d, n_classes=None) -> int:
    k, coords = p**ndim, ndim + 1
    hidden = c * p + coords
    embed = (c + coords) * hidden * k + hidden + hidden * e + e
    pos = e * (grid // p) ** ndim
    time_agg = t_in * e * e + e
    block = 4 * e + 2 * heads * (e // heads) ** 2 * 2 + 2 * e * 2 + 2 * (r * e * e) + r * e + e
    head = e * d * k + d + d * d + d + d * t_out * c + t_out * c
    classifier = 0 if n_classes is None else 2 * (e * e + e) + e * n_classes + n_classes
    return embed + pos + time_agg + depth * block + head + classifier


def test_cpu_presets_and_small_models_by_formula():
    assert _count(build_model(preset("dpot_micro"))) == _formula(2, 10, 1, 4, 4, 64, 256, 4, 4, 1, 32) == 1_657_383
    assert _count(build_model(preset("dpot_nano"))) == _formula(2, 10, 1, 4, 4, 64, 128, 4, 4, 1, 32) == 469_927
    micro_p8 = build_model({**preset("dpot_micro"), "patch_size": 8})
    assert _count(micro_p8) == 2_019_111  # the spec's measured "micro P 8 2.02M"
    small3d = DPOT(3, t_in=3, t_out=2, in_channels=2, patch_size=2, grid_size=8, width=16, depth=2, n_heads=2,
                   mlp_ratio=2, head_width=8, n_classes=5)
    assert _count(small3d) == _formula(3, 3, 2, 2, 2, 8, 16, 2, 2, 2, 8, n_classes=5)


def _reference_forward(model: DPOT, x: torch.Tensor) -> torch.Tensor:
    """The 2D model written out from the paper and the authors' code, one frame at a time."""
    batch, h, w, frames, c = x.shape
    p = model.patch_size
    conv1, _, conv2 = model.patch_embed
    latent = []
    for t in range(frames):
        xs = torch.linspace(0, 1, h, dtype=x.dtype)[:, None].expand(h, w)
        ys = torch.linspace(0, 1, w, dtype=x.dtype)[None, :].expand(h, w)
        ts = torch.full((h, w), t / (frames - 1), dtype=x.dtype)
        frame = torch.cat([x[..., t, :], torch.stack([xs, ys, ts], -1).expand(batch, h, w, 3)], -1)
        z = F.conv2d(F.gelu(F.conv2d(frame.permute(0, 3, 1, 2), conv1.weight, conv1.bias, stride=p)),
                     conv2.weight, conv2.bias)
        latent.append(z + linear_resample(model.pos_embed, z.shape[2:], periodic=True))
    agg = model.time_agg
    z = sum((latent[t].permute(0, 2, 3, 1) * torch.cos(agg.gamma * t / (frames - 1))) @ agg.weight[t]
            for t in range(frames))
    for block in model.blocks:
        zh = F.group_norm(z.permute(0, 3, 1, 2), 8, block.norm1.weight, block.norm1.bias).permute(0, 2, 3, 1)
        y = zh + block.mixer(zh)
        yh = F.group_norm(y.permute(0, 3, 1, 2), 8, block.norm2.weight, block.norm2.bias).permute(0, 2, 3, 1)
        z = z + block.mlp.linear2(F.gelu(block.mlp.linear1(yh)))
    up, _, mid, _, out = model.head
    y = F.conv_transpose2d(z.permute(0, 3, 1, 2), up.weight, up.bias, stride=p)
    y = F.conv2d(F.gelu(F.conv2d(F.gelu(y), mid.weight, mid.bias)), out.weight, out.bias)
    return y.permute(0, 2, 3, 1).unflatten(-1, (model.t_out, model.out_channels))


@pytest.mark.parametrize("grid", [(8, 12), (16, 16)])
def test_forward_is_the_formula_frame_by_frame(grid):
    """Built for 16 x 16 (a 4 x 4 latent grid); on 8 x 12 the positional embedding is resampled to 2 x 3."""
    torch.manual_seed(0)
    model = DPOT(2, t_in=3, t_out=2, in_channels=2, patch_size=4, grid_size=16, width=16, depth=2, n_heads=2,
                 mlp_ratio=2, head_width=8, modes=1).double()
    x = torch.randn(2, *grid, 3, 2, dtype=torch.float64)
    torch.testing.assert_close(model(x), _reference_forward(model, x), rtol=1e-10, atol=1e-10)


def test_positional_embedding_on_another_grid_is_the_resampled_one():
    torch.manual_seed(0)
    small = DPOT(2, t_in=2, in_channels=1, patch_size=2, grid_size=8, width=16, depth=1, n_heads=2)
    large = DPOT(2, t_in=2, in_channels=1, patch_size=2, grid_size=16, width=16, depth=1, n_heads=2)
    state = small.state_dict()
    state["pos_embed"] = linear_resample(small.pos_embed.detach(), (8, 8), periodic=True)
    large.load_state_dict(state)
    x = torch.randn(2, 16, 16, 2, 1)
    torch.testing.assert_close(small(x), large(x))
    assert small.pos_embed.std().item() == pytest.approx(0.02, rel=0.2)  # trunc_normal_ cut at +-2: a normal


SMALL = {"t_in": 3, "t_out": 2, "in_channels": 2, "patch_size": 2, "grid_size": 8, "width": 16, "depth": 1,
         "n_heads": 2, "head_width": 8, "modes": 2}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "spatial"), [("dpot2d", (8, 6)), ("dpot3d", (4, 6, 8))])
def test_shapes_dtypes_and_input_errors(name, spatial):
    torch.manual_seed(0)
    model = build_model({"name": name, **SMALL, "n_classes": 3})
    x = torch.randn(2, *spatial, 3, 2)
    y = model(x)
    assert y.shape == (2, *spatial, 2, 2) and y.dtype == torch.float32
    assert model.classify(model.encode(x)).shape == (2, 3)
    y64 = model.double()(x.double())
    assert y64.dtype == torch.float64
    torch.testing.assert_close(y64.float(), y, rtol=1e-4, atol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.isfinite(model.float()(x)).all()
    odd = (*spatial[:-1], 7)
    with pytest.raises(DataError, match=rf"^DPOT: grid {'x'.join(map(str, odd))} is not a multiple of patch_size 2$"):
        model(torch.randn(1, *odd, 3, 2))
    with pytest.raises(DataError, match=r"^model built for t_in=3, got 4 input frames$"):
        model(torch.randn(1, *spatial, 4, 2))
    one_channel = build_model({"name": name, **SMALL, "out_channels": 1})
    assert one_channel(x).shape == (2, *spatial, 2, 1)
    with pytest.raises(ConfigError, match="without a classifier"):
        one_channel.classify(one_channel.encode(x))


def test_configuration_errors_are_one_line():
    with pytest.raises(ConfigError, match=r"^model\.width: 20 must be a multiple of n_heads \(8\) and of 8$"):
        build_model({"name": "dpot2d", "width": 20, "n_heads": 8})
    with pytest.raises(ConfigError, match=r"^model\.width: 36 must be a multiple of n_heads \(4\) and of 8$"):
        build_model({"name": "dpot2d", "width": 36})
    with pytest.raises(ConfigError, match=r"^model\.grid_size: 60 must be a multiple of patch_size \(8\)$"):
        build_model({"name": "dpot2d", "grid_size": 60})
    with pytest.raises(ConfigError, match=r"^model\.patch_size: expected an integer >= 1, got 0$"):
        build_model({"name": "dpot2d", "patch_size": 0})
    with pytest.raises(ConfigError, match=r"^model\.shrink: expected a number >= 0, got -0\.1$"):
        build_model({"name": "dpot2d", "shrink": -0.1})
    with pytest.raises(ConfigError, match=r"^model\.fft_norm: expected one of 'ortho', 'forward', got 'backward'$"):
        build_model({"name": "dpot2d", "fft_norm": "backward"})
    with pytest.raises(ConfigError, match=r"^model\.ndim: unknown key"):
        build_model({"name": "dpot2d", "ndim": 3})


def test_submodule_names_for_partial_loading():
    model = build_model({"name": "dpot2d", **SMALL, "n_classes": 3})
    tops = {key.split(".")[0] for key in model.state_dict()}
    assert tops == {"patch_embed", "pos_embed", "time_agg", "blocks", "head", "classifier"}
    blocks_2d = {k: v.shape for k, v in model.state_dict().items() if k.startswith("blocks.")}
    blocks_3d = {k: v.shape for k, v in build_model({"name": "dpot3d", **SMALL}).state_dict().items()
                 if k.startswith("blocks.")}
    assert blocks_2d == blocks_3d  # the blocks are dimension-free: 2D -> 3D transfer copies them


@pytest.mark.slow
def test_a_tiny_dpot_learns_with_the_trainer(tmp_path, heat_file):
    config = {"seed": 0, "model": {"name": "dpot2d", "in_channels": 1, "patch_size": 4, "grid_size": 16,
                                   "width": 16, "depth": 1, "n_heads": 2, "head_width": 8, "modes": 2},
              "data": {"path": str(heat_file), "n_train": 6, "n_val": 2, "n_test": 2,
                       "normalize_input": "channel", "normalize_target": "channel"},
              "optim": {"lr": 3e-3}, "schedule": {"name": "constant"},
              "train": {"epochs": 8, "batch_size": 8, "num_threads": 1},
              "rollout": {"t_in": 3, "t_out": 1}}
    train(config_from_dict(config), tmp_path / "run")
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    losses = [float(r["train_loss"]) for r in rows]
    assert len(losses) == 8 and losses[-1] < 0.5 * losses[0]
