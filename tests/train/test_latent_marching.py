"""The latent-marching (LM) strategy of the one trainer: the curriculum on marched frames, pushforward after a
set epoch or step and every few steps, its loss by hand, config errors, and a run of the trainer with it."""

import csv

import pytest
import torch

from opformer.config import RolloutConfig, config_from_dict
from opformer.errors import ConfigError
from opformer.eval.metrics import relative_l2_per_sample
from opformer.train.strategies import latent_marching_loss, marched_frames, pushforward_active, window_loss
from opformer.train.trainer import train


def lm(**keys) -> RolloutConfig:
    return RolloutConfig(strategy="latent_marching", **keys)


def test_schedule_of_marched_frames_and_pushforward_by_hand():
    config = lm(t_out=4, march_curriculum_epochs=6, pushforward_epoch=5, unroll_steps=2)
    # j = 1 + (4 - 1) * epoch // 6, at most 4
    assert [marched_frames(config, e) for e in range(9)] == [1, 1, 2, 2, 3, 3, 4, 4, 4]
    assert [pushforward_active(config, e) for e in range(7)] == [False] * 5 + [True] * 2
    assert marched_frames(lm(t_out=4), 0) == 4  # no curriculum: every frame from the start
    assert not any(pushforward_active(lm(t_out=4), e) for e in range(100))


def test_schedule_counted_in_steps_as_the_authors_code():
    # their CurriculumSampler(1, 4, 6): 1 + int(3 * min(n, 6) / 6) at step n; pushforward where n > 5 and n % 3 == 0
    config = lm(t_out=4, march_curriculum_steps=6, pushforward_after_steps=5, pushforward_every=3, unroll_steps=3)
    assert [marched_frames(config, 0, n) for n in range(9)] == [1, 1, 2, 2, 3, 3, 4, 4, 4]
    assert [n for n in range(16) if pushforward_active(config, 0, n)] == [6, 9, 12, 15]
    by_epoch = lm(t_out=4, pushforward_epoch=1, pushforward_every=2, unroll_steps=2)  # 3 steps an epoch
    assert [n for n in range(9) if pushforward_active(by_epoch, n // 3, n)] == [4, 6, 8]


def frames(*values):
    """A (1, 1, t, 1) window holding the given frame values."""
    return torch.tensor(values, dtype=torch.float64).reshape(1, 1, -1, 1)


def _scalar(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(1, 1)


def test_loss_covers_the_first_marched_frames_only():
    w = torch.tensor(0.9, dtype=torch.float64, requires_grad=True)

    def step(context):  # two bundled frames: w x and w^2 x of the last context frame
        last = context[..., -1:, :]
        return torch.cat([w * last, w * w * last], dim=-2)

    config = lm(t_out=2, march_curriculum_epochs=2)
    context = frames(1.0)
    early = latent_marching_loss(step, context, frames(1.0, 5.0), config, calls=1, frames=1)
    assert early.item() == pytest.approx(0.1)  # |0.9 - 1| / 1; the second frame is not trained
    late = latent_marching_loss(step, context, frames(1.0, 0.5), config, calls=1, frames=2)
    expected = relative_l2_per_sample(frames(0.9, 0.81).flatten(1), frames(1.0, 0.5).flatten(1)).mean()
    assert late.item() == pytest.approx(expected.item())


def test_pushforward_trains_the_last_call_on_detached_inputs():
    w = torch.tensor(0.9, dtype=torch.float64, requires_grad=True)
    inputs = []

    def step(context):  # two bundled frames: w x and 2 w x of the last context frame
        inputs.append(context)
        last = context[..., -1:, :]
        return torch.cat([w * last, 2 * w * last], dim=-2)

    config = lm(t_out=2, pushforward_epoch=1, unroll_steps=3)
    future = frames(1.0, 0.5, 0.4, 7.0, 7.0, 7.0)  # at t_out = 2 apart the targets would be 1.0, 0.4, 7.0
    before = latent_marching_loss(step, frames(1.0), future, config, calls=1, frames=1)
    assert len(inputs) == 1 and before.item() == pytest.approx(0.1)  # one teacher-forced call
    inputs.clear()
    loss = latent_marching_loss(step, frames(1.0), future, config, calls=3, frames=1)
    assert len(inputs) == 3 and not any(t.requires_grad for t in inputs)  # fed detached predictions
    # each call advanced by its first frame only (w x, not 2 w x): the last input is w^2 = 0.81, its target the
    # window's third frame (frames apart: 1.0, 0.5, 0.4)
    assert inputs[2].item() == pytest.approx(0.81)
    (grad,) = torch.autograd.grad(loss, w)
    expected = relative_l2_per_sample(_scalar(w * 0.81), _scalar(torch.tensor(0.4))).mean()
    assert loss.item() == pytest.approx(expected.item())
    assert grad.item() == pytest.approx(torch.autograd.grad(expected, w)[0].item())
    # the other strategies go through window_loss unchanged
    assert window_loss(step, frames(1.0), future, lm(t_out=1), 0).item() == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("keys", "message"),
    [({"strategy": "latent_marching", "march_curriculum_epochs": -1},
      "rollout.march_curriculum_epochs: expected an integer >= 0, got -1"),
     ({"strategy": "latent_marching", "pushforward_epoch": -2, "unroll_steps": 2},
      "rollout.pushforward_epoch: expected an integer >= 0 or null, got -2"),
     ({"strategy": "unroll", "unroll_steps": 2, "march_curriculum_epochs": 3},
      "rollout.march_curriculum_epochs: only used by strategy latent_marching, not unroll"),
     ({"strategy": "one_step", "pushforward_epoch": 3}, "rollout.pushforward_epoch: only used by strategy"),
     ({"strategy": "latent_marching", "pushforward_epoch": 3}, "rollout.pushforward_epoch: pushforward needs "
                                                                 "rollout.unroll_steps >= 2, got 1"),
     ({"strategy": "latent_marching", "unroll_steps": 2}, "rollout.unroll_steps: is 2 but latent_marching without"),
     ({"strategy": "latent_marching", "pushforward_after_steps": 3},
      "rollout.pushforward_after_steps: pushforward needs rollout.unroll_steps >= 2, got 1"),
     ({"strategy": "latent_marching", "pushforward_epoch": 1, "pushforward_after_steps": 3, "unroll_steps": 2},
      "rollout.pushforward_after_steps: give pushforward_epoch or pushforward_after_steps, not both"),
     ({"strategy": "latent_marching", "march_curriculum_epochs": 1, "march_curriculum_steps": 3},
      "rollout.march_curriculum_steps: give march_curriculum_epochs or _steps, not both"),
     ({"strategy": "latent_marching", "pushforward_every": 3}, "rollout.pushforward_every: only used with"),
     ({"strategy": "unroll", "unroll_steps": 2, "pushforward_every": 2},
      "rollout.pushforward_every: only used by strategy latent_marching, not unroll"),
     ({"strategy": "latent_marching", "curriculum_epochs": 4}, "rollout.curriculum_epochs: latent_marching grows")],
)
def test_config_errors_name_the_key(keys, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(")) as info:
        config_from_dict({"rollout": keys})
    assert "\n" not in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "epochs"), [({"name": "time_mix", "t_in": 3, "t_out": 2}, 6),
                                               ({"name": "factformer2d", "t_in": 3, "t_out": 2, "d_model": 8,
                                                 "n_head": 1, "head_dim": 4, "n_layers": 1, "latent_dim": 8,
                                                 "decoder_groups": 8}, 3)])
def test_trainer_runs_the_lm_strategy(tmp_path, heat_file, time_mix, model, epochs):
    config = {"seed": 0, "model": model,
              "data": {"path": str(heat_file), "n_train": 6, "n_val": 2, "n_test": 2, "normalize_input": "channel",
                       "normalize_target": "channel"},
              "optim": {"lr": 3e-2 if model["name"] == "time_mix" else 3e-3}, "schedule": {"name": "constant"},
              "train": {"epochs": epochs, "batch_size": 8, "num_threads": 1},
              "rollout": {"t_in": 3, "t_out": 2, "strategy": "latent_marching", "march_curriculum_epochs": 2,
                          "pushforward_epoch": 2, "unroll_steps": 2}}
    train(config_from_dict(config), tmp_path / "run")
    with open(tmp_path / "run" / "metrics.csv") as f:
        vals = [float(r["val_relative_l2"]) for r in csv.DictReader(f)]
    assert len(vals) == epochs and all(v == v for v in vals)
    if model["name"] == "time_mix":
        assert vals[-1] < 0.5 * vals[0]
