"""The tasks the trainer trains on: their data, sizes, spec, fit checks and validation metric."""

import copy

import pytest
import torch

from opformer.config import config_from_dict
from opformer.errors import ConfigError
from opformer.eval.metrics import split_errors
from opformer.models.surrogate import Surrogate
from opformer.train.tasks import OperatorTask, TrajectoryTask, make_task


def heat_config(path, **rollout):
    return config_from_dict({
        "model": {"name": "fno2d_time", "t_in": 3, "t_out": 2, "width": 4, "modes": 2, "n_layers": 1},
        "data": {"path": str(path), "n_train": 6, "n_val": 2, "n_test": 2, "normalize_input": "channel",
                 "normalize_target": "channel"},
        "rollout": {"t_in": 3, "t_out": 2, **rollout},
        "train": {"batch_size": 4, "eval_batch_size": 2},
    })


def surrogate_for(task, model):
    spec = {"model": model, "normalize_input": "none", "normalize_target": "none", "data": task.spec_data()}
    torch.manual_seed(0)
    return Surrogate(spec)


def test_make_task_follows_the_kind_of_the_data_file(toy_file, heat_file, tiny_config):
    assert isinstance(make_task(config_from_dict(tiny_config(toy_file))), OperatorTask)
    assert isinstance(make_task(heat_config(heat_file)), TrajectoryTask)
    with pytest.raises(ConfigError, match="data.path: required"):
        make_task(config_from_dict({**tiny_config(toy_file), "data": {}}))


def test_operator_task_sizes_spec_and_validation_metric(darcy_file, darcy_config):
    raw = darcy_config(darcy_file, inverse=True)
    raw["train"]["batch_size"] = 3
    task = OperatorTask(config_from_dict(raw))
    assert task.steps_per_epoch() == 3  # ceil(8 / 3)
    spec = task.spec_data()
    assert spec["stored_shape"] == [17, 17] and spec["target_shape"] == [5, 5]  # the coarse inverse target
    assert (spec["input_channels"], spec["target_channels"]) == (["u"], ["a"])
    x, y, dy = task.fetch(task.plan(0, torch.Generator().manual_seed(0))[0])
    assert x.shape == (3, 9, 9, 1) and y.shape == (3, 5, 5, 1)
    # the point-wise normalizers see the stored grid, not the training one
    inputs, targets = next(iter(task.normalizer_chunks()))
    assert inputs.shape[1:3] == (17, 17) and targets.shape[1:3] == (5, 5)
    surrogate = surrogate_for(task, raw["model"])
    expected = split_errors(surrogate, task.val, 32, torch.device("cpu"), noise_level=0.01, seed=raw["seed"] + 2)
    assert task.validate(surrogate, torch.device("cpu")) == pytest.approx(float(expected.mean()))


def test_trajectory_task_counts_windows_and_rolls_out_the_validation_frames(heat_file):
    every = TrajectoryTask(heat_config(heat_file))
    random = TrajectoryTask(heat_config(heat_file, windows="random"))
    unrolled = TrajectoryTask(heat_config(heat_file, strategy="unroll", unroll_steps=2))
    # 6 trajectories of 12 frames: 12 - 3 - 2 + 1 = 8 window starts each
    assert every.steps_per_epoch() == 12 and random.steps_per_epoch() == 2
    assert unrolled.span == 4 and unrolled.steps_per_epoch() == 9  # 6 starts each: ceil(36 / 4)
    assert every.eval_frames == 9 and every.spec_data()["t_in"] == 3 and every.spec_data()["t_out"] == 2
    context, future = every.fetch(every.plan(0, torch.Generator().manual_seed(0))[0])
    assert context.shape == (4, 16, 16, 3, 1) and future.shape == (4, 16, 16, 2, 1)


def test_trajectory_task_refuses_operator_settings(heat_file):
    base = heat_config(heat_file)
    cases = [({"normalize_input": "pointwise"}, "trajectory data take 'channel' or 'none'"),
             ({"direction": "inverse"}, "are for operator data; trajectories use rollout.noise"),
             ({"input_noise": 0.1}, "are for operator data")]
    for change, message in cases:
        config = copy.deepcopy(base)
        for key, value in change.items():
            setattr(config.data, key, value)
        with pytest.raises(ConfigError, match=message):
            TrajectoryTask(config)
    config = copy.deepcopy(base)
    config.loss.name = "h1_relative"
    with pytest.raises(ConfigError, match="trajectories use relative_l2"):
        TrajectoryTask(config)


def test_channel_weights_fit_the_channels_of_trajectory_data(heat_file, toy_file, tiny_config):
    config = heat_config(heat_file)
    config.loss.channel_weights = [2.0]
    task = TrajectoryTask(config)
    context, future = torch.ones(1, 2, 2, 3, 1), torch.full((1, 2, 2, 2, 1), 2.0)
    assert task.metric(context[..., :2, :], future).item() == pytest.approx(1.0)  # 2 x |1 - 2| / 2
    config.loss.channel_weights = [1.0, 1.0]
    message = r"^loss.channel_weights: \[1.0, 1.0\] does not fit one weight per channel \(1\)$"
    with pytest.raises(ConfigError, match=message):
        TrajectoryTask(config)
    pairs = config_from_dict({**tiny_config(toy_file), "loss": {"channel_weights": [1.0]}})
    with pytest.raises(ConfigError, match="does not fit trajectory data"):
        OperatorTask(pairs)


def test_normalized_loss_is_taken_on_the_normalizer_encodings(heat_file, toy_file, tiny_config):
    """loss.normalized: the relative L2 between (x - mean) / (std + eps) of prediction and truth, so a mean moves
    it; trajectory data of one file only."""
    config = heat_config(heat_file)
    config.loss.normalized = True
    task = TrajectoryTask(config)
    normalizer = torch.nn.Module()
    normalizer.encode = lambda x: (x - 1.5) / 2.0
    plain = task.metric
    task.normalize_loss(normalizer)
    pred, truth = torch.full((1, 2, 2, 1), 2.0), torch.full((1, 2, 2, 1), 3.0)
    assert plain(pred, truth).item() == pytest.approx(1 / 3)  # |2 - 3| / |3|
    assert task.metric(pred, truth).item() == pytest.approx(1 / 3 * 2)  # |0.25 - 0.75| / |0.75|
    pairs = config_from_dict({**tiny_config(toy_file), "loss": {"normalized": True}})
    with pytest.raises(ConfigError, match="^loss.normalized: true is for trajectory data of one file"):
        OperatorTask(pairs)


def test_trajectory_task_checks_the_models_window_sizes(heat_file):
    task = TrajectoryTask(heat_config(heat_file))
    wrong = surrogate_for(task, {"name": "fno2d_time", "t_in": 4, "t_out": 2, "width": 4, "modes": 2,
                                 "n_layers": 1})
    with pytest.raises(ConfigError, match="rollout.t_in: is 3 but the model was built for t_in=4"):
        task.check_fit(wrong.model)
