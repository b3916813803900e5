import math

import pytest
import torch

from opformer.config import RolloutConfig
from opformer.data.trajectories import load_trajectories
from opformer.errors import ConfigError
from opformer.train.losses import relative_l2_per_sample
from opformer.train.rollout import (add_relative_noise, advance, curriculum_steps, persistence, pushforward_calls,
                                    rollout, rollout_errors, strategy_loss, window_loss)


def frames(*values):
    """A (1, 1, t, 1) window holding the given frame values."""
    return torch.tensor(values, dtype=torch.float64).reshape(1, 1, -1, 1)


def test_advance_keeps_the_last_t_in_frames():
    assert advance(frames(0, 1, 2), frames(3)).flatten().tolist() == [1, 2, 3]
    assert advance(frames(0, 1, 2), frames(3, 4)).flatten().tolist() == [2, 3, 4]


def test_rollout_feeds_predictions_back_and_truncates_the_last_call():
    def step(context):  # the next two frames: last + 1, last + 2
        last = context[..., -1:, :]
        return torch.cat([last + 1, last + 2], dim=-2)

    assert rollout(step, frames(0, 1), 5).flatten().tolist() == [2, 3, 4, 5, 6]


def test_exact_step_gives_zero_rollout_error_and_given_frames_are_not_counted(heat_file):
    data = load_trajectories(heat_file, "all", n_train=0, n_val=0, n_test=0)
    dt, nu = float(data.times[1] - data.times[0]), 0.02
    k = torch.fft.fftfreq(16, 1 / 16)
    decay = torch.exp(-nu * (2 * math.pi) ** 2 * (k[:, None] ** 2 + k[None, :] ** 2) * dt)

    def exact(context):  # the heat equation's exact one-step propagator applied to the last frame
        last = context[..., -1, 0].double()
        new = torch.fft.ifft2(torch.fft.fft2(last) * decay).real
        return new[..., None, None].to(context.dtype)

    preds, errors = rollout_errors(exact, data.fields, t_in=3, n_frames=9, batch_size=4, device=torch.device("cpu"))
    assert preds.shape == (10, 9, 16, 16, 1) and errors.shape == (10, 9)
    assert errors.max() < 1e-5
    _, none_given = rollout_errors(persistence, data.fields, 3, 9, 4, torch.device("cpu"))
    # persistence: the first predicted frame is frame 2 again, so its error is that of one decay step
    one_step = relative_l2_per_sample(data.fields[:, 2], data.fields[:, 3])
    torch.testing.assert_close(none_given[:, 0], one_step)


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
    with pytest.raises(ConfigError, match="rollout.t_in: expected a positive integer, got 0"):
        RolloutConfig(t_in=0)


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
