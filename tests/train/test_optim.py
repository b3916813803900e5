import copy

import pytest
import torch

from opformer.config import OptimConfig, ScheduleConfig
from opformer.train.optim import build_optimizer, build_scheduler, use_fused_update


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))


@pytest.mark.slow
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


def _adam_reference(p, grads, lr, betas, weight_decay, coupled, eps=1e-8):
    """Adam (Kingma & Ba, PyTorch's bias corrections) written out: ``coupled`` adds ``weight_decay * p`` to each
    gradient (L2 decay, PyTorch's Adam); otherwise ``p`` shrinks by ``lr * weight_decay`` first (AdamW)."""
    (b1, b2), m, v = betas, torch.zeros_like(p), torch.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        if coupled:
            g = g + weight_decay * p
        else:
            p = p * (1 - lr * weight_decay)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
    return p


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_adam_decays_coupled_as_l2_and_adamw_decoupled(name):
    """``optim.name: adam`` with ``weight_decay`` w is Adam on ``grad + w * param`` (the DPOT authors' optimiser);
    ``adamw`` shrinks the parameters by ``lr * w`` beside the Adam step on ``grad`` (what the paper says). Two
    steps in float64 (the first Adam step is nearly the gradient's sign whatever its size)."""
    p0 = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)
    grads = [torch.tensor([0.3, 0.1, -0.2, -0.05], dtype=torch.float64),
             torch.tensor([-0.1, 0.4, 0.02, 0.3], dtype=torch.float64)]
    lr, betas, decay = 0.01, (0.9, 0.9), 0.2
    param = torch.nn.Parameter(p0.clone())
    optimizer = build_optimizer([param], OptimConfig(name=name, lr=lr, weight_decay=decay, betas=list(betas)))
    for g in grads:
        param.grad = g.clone()
        optimizer.step()
    coupled = _adam_reference(p0, grads, lr, betas, decay, coupled=True)
    decoupled = _adam_reference(p0, grads, lr, betas, decay, coupled=False)
    assert (coupled - decoupled).abs().min() > 1e-4  # the two rules differ here by far more than rounding
    torch.testing.assert_close(param.detach(), coupled if name == "adam" else decoupled, rtol=0, atol=1e-15)


def test_the_step_schedule_multiplies_the_rate_by_gamma_every_step_epochs_epochs():
    optimizer = build_optimizer(_net().parameters(), OptimConfig(lr=1.0))
    scheduler = build_scheduler(optimizer, ScheduleConfig(name="step", step_epochs=2, gamma=0.5), 15, 3)
    lrs = []
    for _ in range(15):  # 5 epochs of 3 batches: halved after batches 6 and 12
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs == [1.0] * 6 + [0.5] * 6 + [0.25] * 3
