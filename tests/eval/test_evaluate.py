import pytest
import torch

from opformer.config import config_from_dict
from opformer.eval.evaluate import evaluate_run, first_test_samples, format_table, scaled_batch_size
from opformer.eval.metrics import NOISE_SEED_OFFSETS, noise_sample, predict, relative_l2_per_sample
from opformer.runs import Run
from opformer.train.trainer import train


def test_evaluation_batches_shrink_with_the_grid():
    assert scaled_batch_size(32, 512, (512,)) == 32
    assert scaled_batch_size(32, 512, (256,)) == 32
    assert scaled_batch_size(32, 512, (2048,)) == 8
    assert scaled_batch_size(32, 512, (8192,)) == 2
    assert scaled_batch_size(4, 43, (211, 211)) == 1


def test_table_marks_zero_shot_rows():
    rows = [{"resolution": 512, "trained_at": 512, "samples": 100, "relative_l2": 1.2e-3, "relative_l2_std": 1e-4},
            {"resolution": 8192, "trained_at": 512, "samples": 100, "relative_l2": 1.0e-3, "relative_l2_std": 1e-4}]
    lines = format_table(rows).splitlines()
    assert lines[1].split() == ["512", "100", "1.200e-03", "1.00e-04", "trained", "here"]
    assert lines[2].endswith("zero-shot")


def test_drawn_test_samples_carry_the_noise_evaluation_scores_them_with(tmp_path, darcy_file, darcy_config):
    config = darcy_config(darcy_file, epochs=1, inverse=True)  # trained and evaluated with eps = 0.01
    train(config_from_dict(config), tmp_path / "inv")
    run = Run(tmp_path / "inv")
    data, noise = first_test_samples(run, None, 1)
    whole = noise_sample((2, *data.inputs.shape[1:]), 0.01, config["seed"] + NOISE_SEED_OFFSETS["test"])
    assert len(data) == 1 and torch.equal(noise, whole[:1])  # the first row of the two-sample split's draw
    (row,) = evaluate_run(run, darcy_file, [9], per_sample=True)
    error = relative_l2_per_sample(predict(run.surrogate, data.inputs, 1, torch.device("cpu"), noise=noise),
                                   data.targets)
    assert float(error[0]) == pytest.approx(row["per_sample_relative_l2"][0], rel=1e-6)
