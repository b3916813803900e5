import pytest
import torch

from opformer.config import config_from_dict
from opformer.eval.evaluate import evaluate_run, first_test_samples, format_table, scaled_batch_size
from opformer.eval.metrics import NOISE_SEED_OFFSETS, noise_sample, relative_l2_per_sample
from opformer.models.inference import predict
from opformer.runs import Run
from opformer.train.trainer import train
from tests.trust.trust_runs import heat_run  # noqa: F401 (fixture)


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


def test_evaluate_shows_persistence_beside_a_rollout_in_the_table_and_the_json(capsys, heat_run, tmp_path):
    """``opformer evaluate`` on a run of one trajectory file: persistence's errors (the last given frame repeated)
    on the same test trajectories and frames, each as its formula gives it."""
    import json

    from opformer.cli import main
    from opformer.data.trajectories import load_trajectories

    run, heat = heat_run  # t_in 3, 5 evaluated frames, test trajectories 6..9
    assert main(["evaluate", str(run), "--json", str(tmp_path / "e.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    (row,) = json.loads((tmp_path / "e.json").read_text())["results"]
    fields = load_trajectories(heat, "test", n_train=4, n_val=2, n_test=4).fields.double()
    last, truth = fields[:, 2:3], fields[:, 3:8]
    errors = (truth - last).flatten(2).norm(dim=2) / truth.flatten(2).norm(dim=2)  # (sample, frame)
    l2re = (truth - last).flatten(1).norm(dim=1) / truth.flatten(1).norm(dim=1)  # one channel: space-time
    assert row["persistence_relative_l2"] == pytest.approx(float(errors.mean()), rel=1e-5)
    assert row["persistence_final_relative_l2"] == pytest.approx(float(errors[:, -1].mean()), rel=1e-5)
    assert row["persistence_l2re"] == pytest.approx(float(l2re.mean()), rel=1e-5)
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("resolution"))
    assert lines[head].split()[-6:] == ["persistence", "pers.", "final", "pers.", "L2RE", "note"]
    assert lines[head + 1].split()[7:10] == [f"{row[k]:.3e}" for k in ("persistence_relative_l2",
                                                                 "persistence_final_relative_l2", "persistence_l2re")]
