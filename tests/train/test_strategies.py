
import pytest
import torch

from opformer.config import RolloutConfig, config_from_dict
from opformer.errors import ConfigError
from opformer.eval.metrics import relative_l2_per_sample
from opformer.train.strategies import (
    add_relative_noise, curriculum_steps, pushforward_calls, rms_fraction_of_norm_scale, strategy_loss, window_loss,
)


def frames(*values):
    """A (1, 1, t, 1) window holding the given frame values."""
    return torch.tensor(values, dtype=torch.float64).reshape(1, 1, -1, 1)


def test_curriculum_grows_linearly_to_the_unroll_length():
    config = RolloutConfig(strategy="unroll", unroll_steps=4, curriculum_epochs=6)
    assert [curriculum_steps(config, e) for e in range(8)] == [1, 1, 2, 2, 3, 3, 4, 4]
    assert curriculum_steps(RolloutConfig(strategy="pushforward", unroll_steps=3), 0) == 3


def test_pushforward_trains_only_the_last_call_and_unroll_all_of_them():
    w = torch.tensor(0.9, requires_grad=True)

    def step(context):
        return w * context[..., -1:, :]

    context, future = frames(1.0), frames(1.0, 0.5)
    push = strategy_loss(step, context, future, RolloutConfig(strategy="pushforward", unroll_steps=2), 2)
    (grad_push,) = torch.autograd.grad(push, w)
    z1 = (w * 1.0).detach()
    expected = relative_l2_per_sample((w * z1).reshape(1, 1), torch.tensor([[0.5]])).mean()
    assert push.item() == pytest.approx(expected.item())
    (grad_expected,) = torch.autograd.grad(expected, w)
    assert grad_push.item() == pytest.approx(grad_expected.item())
    unroll = strategy_loss(step, context, future, RolloutConfig(strategy="unroll", unroll_steps=2), 2)
    # unroll: the mean of both steps' errors, |0.9 - 1| / 1 and |0.81 - 0.5| / 0.5
    assert unroll.item() == pytest.approx((0.1 + 0.31 / 0.5) / 2)


def test_relative_noise_scales_with_each_samples_rms():
    x = torch.randn(2, 64, 64, 3, 2)
    x[1] *= 10
    noisy = add_relative_noise(x, 0.1, torch.Generator().manual_seed(0))
    rel = (noisy - x) / x.pow(2).mean(dim=(1, 2, 3), keepdim=True).sqrt()
    assert rel.std().item() == pytest.approx(0.1, rel=0.02)
    assert rel[0].std().item() == pytest.approx(rel[1].std().item(), rel=0.05)
    assert torch.equal(add_relative_noise(x, 0.0), x)


def test_rollout_config_errors():
    with pytest.raises(ConfigError, match="rollout.unroll_steps: is 3 but strategy one_step makes one call"):
        RolloutConfig(unroll_steps=3)
    with pytest.raises(ConfigError, match="rollout.t_in: expected an integer >= 1, got 0"):
        config_from_dict({"rollout": {"t_in": 0}})


def test_pushforward_draws_its_calls_per_batch_teacher_forcing_included():
    generator = torch.Generator().manual_seed(0)
    draws = [pushforward_calls(3, generator) for _ in range(600)]
    assert set(draws) == {1, 2, 3}
    assert all(abs(draws.count(c) / 600 - 1 / 3) < 0.08 for c in (1, 2, 3))  # ~6 sigma
    assert pushforward_calls(1, generator) == 1

    # through window_loss: a teacher-forced batch (1 call) and a pushed-forward one (2 calls) both occur
    def step(context):
        return 0.9 * context[..., -1:, :]

    context, future = frames(1.0), frames(1.0, 0.5)
    config = RolloutConfig(strategy="pushforward", unroll_steps=2)
    losses = {round(window_loss(step, context, future, config, 0, generator).item(), 6) for _ in range(40)}
    assert losses == {round(0.1, 6), round(abs(0.81 - 0.5) / 0.5, 6)}


def test_dpot_norm_scale_converts_to_the_rms_fraction_it_adds():
    # DPOT: x + s ||x||_2 N(0, 1), the norm over X Y T points of one sample and channel
    x = torch.randn(1, 128, 128, 10, 1, dtype=torch.float64)
    s = 5e-4
    dpot_noise = s * x.norm() * torch.randn(x.shape, generator=torch.Generator().manual_seed(1), dtype=x.dtype)
    fraction = rms_fraction_of_norm_scale(s, 128 * 128 * 10)
    assert fraction == pytest.approx(0.2024, abs=1e-4)
    assert (dpot_noise.std() / x.pow(2).mean().sqrt()).item() == pytest.approx(fraction, rel=0.01)
