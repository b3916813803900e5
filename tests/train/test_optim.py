import copy

import pytest
import torch

from opformer.config import OptimConfig, ScheduleConfig
from opformer.train.optim import build_optimizer, build_scheduler, use_fused_update


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_fused_update_matches_the_per_tensor_loop(name):
    model = _net()
    reference = copy.deepcopy(model)
    optimizer = build_optimizer(model.parameters(), OptimConfig(name=name, lr=1e-2, weight_decay=1e-3))
    assert optimizer.param_groups[0]["fused"] is True
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[name]
    loop = cls(reference.parameters(), lr=1e-2, weight_decay=1e-3, foreach=False)
    x = torch.randn(32, 8)
    for _ in range(20):
        for net, opt in ((model, optimizer), (reference, loop)):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
    for a, b in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_fused_flag_survives_loading_an_unfused_state():
    model = _net()
    unfused = torch.optim.Adam(model.parameters(), lr=1e-3)
    optimizer = build_optimizer(model.parameters(), OptimConfig(name="adam", lr=1e-3))
    optimizer.load_state_dict(unfused.state_dict())
    assert optimizer.param_groups[0]["fused"] is None  # load_state_dict restores the saved flags ...
    use_fused_update(optimizer)
    assert optimizer.param_groups[0]["fused"] is True  # ... and the trainer switches them back


def _onecycle_lrs(total_steps, pct_start):
    optimizer = build_optimizer(_net().parameters(), OptimConfig(lr=1.0))
    config = ScheduleConfig(pct_start=pct_start, div_factor=10.0, final_div_factor=10.0, anneal="linear")
    scheduler = build_scheduler(optimizer, config, total_steps)
    lrs = []
    for _ in range(total_steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


@pytest.mark.parametrize(("total_steps", "pct_start"), [(5, 0.2), (2, 0.5), (10, 0.1), (3, 1 / 3)])
def test_onecycle_with_a_one_step_warm_up_starts_at_the_peak(total_steps, pct_start):
    # PyTorch divides by the zero width of a warm-up of exactly one step; it is the limit of shorter ones
    lrs = _onecycle_lrs(total_steps, pct_start)
    shorter = _onecycle_lrs(total_steps, pct_start * 0.999)
    assert lrs[0] == pytest.approx(1.0) and lrs[-1] == pytest.approx(0.01)
    assert lrs == pytest.approx(shorter, rel=1e-2)
    assert lrs == sorted(lrs, reverse=True)
    assert _onecycle_lrs(5, 0.4) == pytest.approx([0.1, 1.0, 0.67, 0.34, 0.01])  # longer warm-ups unchanged
