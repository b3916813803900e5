"""Evaluation metrics: relative L2, rollouts and their per-frame errors."""

import math

import pytest
import torch

from opformer.data.trajectories import load_trajectories
from opformer.eval.metrics import masked_relative_l2_per_sample, persistence, relative_l2_per_sample, rollout_errors
from opformer.models.inference import advance, rollout


def col(values):
    return torch.tensor(values, dtype=torch.float64)[None, :, None]


def frames(*values):
    """A (1, 1, t, 1) window holding the given frame values."""
    return torch.tensor(values, dtype=torch.float64).reshape(1, 1, -1, 1)


def test_relative_l2_by_hand():
    pred = torch.cat([col([1, 2, 3, 4]), col([0, 0, 0, 0])])
    target = torch.cat([col([1, 2, 3, 5]), col([3, 0, 0, 4])])
    per_sample = relative_l2_per_sample(pred, target)
    assert per_sample.tolist() == pytest.approx([math.sqrt(1 / 39), 1.0])



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

    preds, errors, l2re = rollout_errors(exact, data.fields, t_in=3, n_frames=9, batch_size=4,
                                         device=torch.device("cpu"))
    assert preds.shape == (10, 9, 16, 16, 1) and errors.shape == (10, 9) and l2re.shape == (10,)
    assert errors.max() < 1e-5 and l2re.max() < 1e-5
    none_given = rollout_errors(persistence, data.fields, 3, 9, 4, torch.device("cpu")).per_frame
    # persistence: the first predicted frame is frame 2 again, so its error is that of one decay step
    one_step = relative_l2_per_sample(data.fields[:, 2], data.fields[:, 3])
    torch.testing.assert_close(none_given[:, 0], one_step)


def test_masked_relative_l2_is_the_mean_over_real_channels():
    target = torch.tensor([[[3.0, 1.0, 5.0], [4.0, 0.0, 5.0]]])  # (1 sample, 2 points, 3 channels)
    pred = torch.tensor([[[0.0, 2.0, 9.0], [4.0, 0.0, 2.0]]])
    both = masked_relative_l2_per_sample(pred, target, torch.tensor([[True, True, False]]))
    assert math.isclose(float(both), (3 / 5 + 1 / 1) / 2, rel_tol=1e-6)
    assert math.isclose(float(masked_relative_l2_per_sample(pred, target, torch.tensor([[True, False, True]]))),
                        (3 / 5 + 5 / math.sqrt(50)) / 2, rel_tol=1e-6)


def test_masked_relative_l2_ignores_whatever_padding_holds():
    pred = torch.randn(2, 4, 3, 2, requires_grad=True)
    target = torch.randn(2, 4, 3, 2)
    mask = torch.tensor([[True, False], [True, True]])
    garbage = target.clone()
    garbage[0, ..., 1] = float("nan")
    value = masked_relative_l2_per_sample(pred, garbage, mask)
    assert torch.allclose(value[0], relative_l2_per_sample(pred[:1, ..., :1], target[:1, ..., :1])[0])
    value.sum().backward()
    assert torch.isfinite(pred.grad).all() and torch.all(pred.grad[0, ..., 1] == 0)


def test_rollout_l2re_by_hand_with_a_padded_channel():
    # 2 samples, 3 frames, 2 points, channel 0 real and channel 1 padded (zero); 1 given frame, 2 predicted
    real = torch.tensor([[[1.0, 2.0], [2.0, 2.0], [3.0, 4.0]],
                         [[0.0, 3.0], [0.0, 4.0], [0.0, 3.0]]], dtype=torch.float64)
    fields = torch.stack([real, torch.zeros_like(real)], dim=-1)
    mask = torch.tensor([True, False])

    def noisy_persistence(context):  # writes 5 into the padded channel, which the rollout must zero
        return persistence(context) + torch.tensor([0.0, 5.0])

    for step in (persistence, noisy_persistence):
        preds, per_frame, l2re = rollout_errors(step, fields, 1, 2, batch_size=1, device=torch.device("cpu"),
                                                mask=mask)
        assert torch.all(preds[..., 1] == 0) and torch.equal(preds[..., 0], real[:, :1].expand(2, 2, 2))
        # sample 0: ||(1, 0, 2, 2)|| / ||(2, 2, 3, 4)|| = 3 / sqrt(33); sample 1: ||(0, 1, 0, 0)|| / ||(0, 4, 0, 3)||
        assert l2re.tolist() == pytest.approx([3 / math.sqrt(33), 1 / 5], rel=1e-12)
        assert per_frame.flatten().tolist() == pytest.approx([math.sqrt(1 / 8), math.sqrt(8 / 25), 1 / 4, 0.0], rel=1e-12)
    # without a mask a channel of zeros is a real one: its ratio is 0 / 0 (NaN) for persistence, and the noisy
    # step is not zeroed
    assert torch.isnan(rollout_errors(persistence, fields, 1, 2, 1, torch.device("cpu")).l2re).all()


def test_a_rollout_of_no_trajectories_calls_no_step():
    def step(context):
        raise AssertionError("called")

    empty = rollout_errors(step, torch.zeros(0, 5, 4, 1), 2, 3, 4, torch.device("cpu"), mask=torch.tensor([True]))
    assert empty.predictions.shape == (0, 3, 4, 1) and empty.per_frame.shape == (0, 3) and empty.l2re.shape == (0,)
