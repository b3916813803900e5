"""The one trainer on 2D data: Darcy-like forward and inverse problems (Cao 2021, Examples 5.2-5.3)."""

import csv

import pytest
import torch

from opformer.config import config_from_dict
from opformer.data.pairs import load_split
from opformer.errors import ConfigError, DataError
from opformer.eval.evaluate import evaluate_run
from opformer.eval.metrics import NOISE_SEED_OFFSETS, split_errors
from opformer.models.inference import predict
from opformer.runs import Run
from opformer.train.trainer import Trainer, train


def best_val(run):
    with open(run / "metrics.csv") as f:
        return min(float(r["val_relative_l2"]) for r in csv.DictReader(f))


def test_forward_problem_imposes_the_dirichlet_boundary_and_selects_on_validation(tmp_path, darcy_file,
                                                                                   darcy_config):
    run = tmp_path / "fwd"
    train(config_from_dict(darcy_config(darcy_file, epochs=2)), run)
    surrogate, _ = Run(run).model("best")
    test = load_split(darcy_file, "test", n_train=8, n_val=2, n_test=2, resolution=9)
    pred = predict(surrogate, test.inputs, 2, torch.device("cpu"))
    assert pred.shape == (2, 9, 9, 1)
    assert pred[:, 0].abs().max() == 0 and pred[:, -1].abs().max() == 0
    assert pred[:, :, 0].abs().max() == 0 and pred[:, :, -1].abs().max() == 0
    assert pred[:, 1:-1, 1:-1].abs().min() > 0
    (row,) = evaluate_run(run, darcy_file, [9], split="val")
    assert row["relative_l2"] == pytest.approx(best_val(run), rel=1e-5)
    rows = evaluate_run(run, darcy_file, [9, 17])  # zero-shot on the stored grid
    assert [r["resolution"] for r in rows] == [9, 17]


def test_inverse_problem_evaluates_with_a_fixed_noise_realisation(tmp_path, darcy_file, darcy_config):
    run = tmp_path / "inv"
    train(config_from_dict(darcy_config(darcy_file, epochs=2, inverse=True)), run)
    (first,) = evaluate_run(run, darcy_file, [9], split="val")
    (again,) = evaluate_run(run, darcy_file, [9], split="val")
    assert first == again
    assert first["relative_l2"] == pytest.approx(best_val(run), rel=1e-5)  # the noise validation used
    surrogate, _ = Run(run).model("best")
    val = load_split(darcy_file, "val", n_train=8, n_val=2, n_test=2, resolution=9, target_resolution=5,
                     direction="inverse")
    clean = float(split_errors(surrogate, val, 2, torch.device("cpu")).mean())
    assert clean != pytest.approx(first["relative_l2"], rel=1e-6)
    # evaluation noise apart from training's (Cao 2021, Figure 12): the run's own level is the default, 0 is the
    # clean error, another level is the same seeded draw scaled
    level = Run(run).config.data.input_noise
    assert evaluate_run(run, darcy_file, [9], split="val", input_noise=level) == [first]
    (none,) = evaluate_run(run, darcy_file, [9], split="val", input_noise=0.0)
    assert none["relative_l2"] == pytest.approx(clean, rel=1e-6)
    (louder,) = evaluate_run(run, darcy_file, [9], split="val", input_noise=5 * level)
    expected = split_errors(surrogate, val, 2, torch.device("cpu"), noise_level=5 * level,
                            seed=Run(run).config.seed + NOISE_SEED_OFFSETS["val"])
    assert louder["relative_l2"] == pytest.approx(float(expected.mean()), rel=1e-6)
    assert louder["relative_l2"] != pytest.approx(first["relative_l2"], rel=1e-6)
    with pytest.raises(ConfigError, match=r"--input-noise -0.1: expected a finite eps >= 0"):
        evaluate_run(run, darcy_file, [9], input_noise=-0.1)


def test_model_grid_that_does_not_fit_the_targets_is_a_config_error(tmp_path, darcy_file, darcy_config):
    config = darcy_config(darcy_file, inverse=True)
    config["model"]["coarse_size"] = 3
    with pytest.raises(ConfigError, match=r"model: outputs \(3, 3, 1\) per sample but the targets of .* are "
                                          r"\(5, 5, 1\)"):
        Trainer(config_from_dict(config), tmp_path / "run")


def test_non_square_data_and_a_coarse_grid_finer_than_the_data_are_errors(tmp_path, darcy_config, darcy_writer):
    narrow = darcy_writer(tmp_path / "narrow.h5", square=False)
    config = darcy_config(narrow)
    config["data"]["resolution"] = None
    with pytest.raises(DataError, match="expected a square grid"):
        Trainer(config_from_dict(config), tmp_path / "a")
    config = darcy_config(darcy_writer(tmp_path / "square.h5"))
    config["model"]["coarse_size"] = 11
    with pytest.raises(DataError, match=r"the coarse grid \(11\) is larger than the input grid \(9\)"):
        Trainer(config_from_dict(config), tmp_path / "b")


@pytest.mark.slow
def test_plot_writes_2d_prediction_maps(tmp_path, darcy_file, darcy_config):
    from opformer.eval.run_plots import plot_run

    run = tmp_path / "inv"
    train(config_from_dict(darcy_config(darcy_file, epochs=1, inverse=True)), run)
    paths = plot_run(run, out_dir=tmp_path / "plots", samples=2)
    assert [p.name for p in paths] == ["losses.png", "predictions.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000 for p in paths)


def test_a_pointwise_normalized_run_is_evaluated_zero_shot_on_a_finer_file(tmp_path, darcy_config, darcy_writer):
    coarse = darcy_writer(tmp_path / "coarse.h5", n=9)
    fine = darcy_writer(tmp_path / "fine.h5", n=17)  # the same fields (same seed) on a grid twice as fine
    config = darcy_config(coarse, epochs=2)
    config["data"]["resolution"] = None
    config["model"]["coarse_size"] = 5
    run = tmp_path / "run"
    train(config_from_dict(config), run)
    at9, at17 = (evaluate_run(run, path, [None], split="all")[0] for path in (coarse, fine))
    assert (at9["resolution"], at17["resolution"], at17["trained_at"]) == (9, 17, 9)
    assert at17["relative_l2"] < 1.5 * at9["relative_l2"], (at9, at17)


FNO = {"name": "fno2d", "width": 6, "modes": 3, "n_layers": 2, "projection_width": 8}


def test_fno_pads_closed_data_by_default_and_a_run_from_before_padding_evaluates_and_resumes_as_it_was(
        tmp_path, darcy_file, darcy_config):
    from opformer.runs import load_checkpoint, save_checkpoint

    config = {**darcy_config(darcy_file, epochs=1), "model": FNO}
    fresh = Trainer(config_from_dict(config), tmp_path / "new")
    assert fresh.surrogate.spec["model"]["padding"] == 0.1 and fresh.surrogate.spec["model"]["periodic"] is False
    assert fresh.config.model["padding"] == 0.1  # so config.yaml holds it and a resume rebuilds the same model
    explicit = Trainer(config_from_dict({**config, "model": {**FNO, "padding": 0}}), tmp_path / "explicit")
    assert explicit.surrogate.spec["model"]["padding"] == 0

    # a run trained before padding existed: neither its checkpoints nor its config.yaml name padding
    run = tmp_path / "old"
    train(config_from_dict({**config, "model": {**FNO, "periodic": False, "padding": 0}}), run)
    (before,) = evaluate_run(run, darcy_file, [9])
    test = load_split(darcy_file, "test", n_train=8, n_val=2, n_test=2, resolution=9)
    trained, _ = Run(run).model("best")
    for name in ("best.pt", "last.pt"):
        surrogate, payload = Run(run).model(name.removesuffix(".pt"))
        del surrogate.spec["model"]["padding"]
        del payload["run_config"]["model"]["padding"]
        save_checkpoint(run / name, surrogate, run_config=payload["run_config"], epoch=payload["epoch"],
                        history=payload["history"], best_val=payload["best_val"],
                        training_state=payload["training_state"])
    (run / "config.yaml").write_text((run / "config.yaml").read_text().replace("  padding: 0\n", ""))
    assert "padding" not in load_checkpoint(run / "best.pt")["spec"]["model"]
    assert "padding" not in Run(run).config.model
    old, _ = Run(run).model("best")
    assert old.model.padding == 0
    with torch.no_grad():
        torch.testing.assert_close(old(test.inputs), trained(test.inputs), rtol=0, atol=0)
    assert evaluate_run(run, darcy_file, [9]) == [before]
    resumed = Run(run).config
    resumed.train.epochs = 2
    train(resumed, run, resume=True)  # the stored spec, with padding 0 filled in, is the model's
    assert load_checkpoint(run / "last.pt")["epoch"] == 1
    assert Run(run).model("last")[0].model.padding == 0
