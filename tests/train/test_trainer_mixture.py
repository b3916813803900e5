"""The one trainer on a mixture of trajectory files: masked loss, per-member validation, exact resume."""

import csv
from pathlib import Path

import pytest
import torch

from opformer.cli import main
from opformer.config import config_from_dict, config_to_dict, load_config
from opformer.errors import ConfigError
from opformer.eval.metrics import masked_relative_l2_per_sample
from opformer.models.inference import rollout
from opformer.models.surrogate import Surrogate
from opformer.runs import load_checkpoint
from opformer.train.distributed import Part
from opformer.train.tasks import MixtureTask, make_task, member_columns
from opformer.train.trainer import Trainer, train


def metrics(run):
    with open(run / "metrics.csv") as f:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


def test_mixture_task_sizes_spec_loss_and_per_member_validation(toy_mixture, mixture_config):
    task = make_task(config_from_dict(mixture_config(toy_mixture, noise=0.2)))
    assert isinstance(task, MixtureTask) and task.steps_per_epoch() == 3  # ceil(10 / 4)
    assert task.input_channels == ["c0", "c1"] and task.eval_frames == [4, 4]
    spec = task.spec_data()
    assert spec["mixture"] == ["a", "b"] and spec["stored_shape"] == [16, 16] and spec["periodic"] == [False, False]
    torch.manual_seed(0)
    surrogate = Surrogate({"model": config_from_dict(mixture_config(toy_mixture)).model, "normalize_input": "none",
                           "normalize_target": "none", "data": spec})
    batches = [task.fetch(index) for index in task.plan(0, torch.Generator().manual_seed(0))]
    assert [len(b[0]) for b in batches] == [4, 4, 2] and batches[0][0].shape == (4, 16, 16, 3, 2)
    # the loss counts the real channels only, and padded channels get no noise
    context, future, mask, _ = batches[0]
    draws = task.draw(Part(0, 4, 4), 0, torch.Generator().manual_seed(1))
    loss = task.drawn_loss(surrogate, batches[0], 0, draws)
    noised = context + 0.2 * context.pow(2).mean(dim=(1, 2, 3), keepdim=True).sqrt() * torch.randn(
        context.shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = masked_relative_l2_per_sample(surrogate(noised), future, mask).mean()
    assert loss.item() == pytest.approx(float(expected), rel=1e-6)
    # validation: each member's rollouts on its stored grid (32^2 cells for b), the mean over members
    value = task.validate(surrogate, torch.device("cpu"))
    errors = []
    for k, frames in enumerate([4, 4]):
        fields, mask = task.mixture.stored_split(k, "val")
        with torch.no_grad():
            pred = rollout(lambda x: surrogate(x) * mask, fields[:, :3].movedim(1, -2), frames)
        errors.append(float(masked_relative_l2_per_sample(pred, fields[:, 3:].movedim(1, -2), mask[None]).mean()))
    assert task.mixture.stored_split(1, "val")[0].shape[2:4] == (32, 32)
    assert task.member_errors == pytest.approx({"a": errors[0], "b": errors[1]})
    assert value == pytest.approx(sum(errors) / 2)


def test_a_mixture_trains_two_epochs_and_resumes_exactly(tmp_path, toy_mixture, mixture_config, capsys):
    reference = tmp_path / "reference"
    summary = train(config_from_dict(mixture_config(toy_mixture, epochs=3)), reference)
    assert summary["epochs"] == 3
    run = tmp_path / "resumed"
    train(config_from_dict(mixture_config(toy_mixture, epochs=2)), run)
    train(config_from_dict(mixture_config(toy_mixture, epochs=3)), run, resume=True)
    assert metrics(run) == metrics(reference)
    ref, res = load_checkpoint(reference / "last.pt"), load_checkpoint(run / "last.pt")
    for key, value in ref["state_dict"].items():
        torch.testing.assert_close(res["state_dict"][key], value, rtol=0, atol=0)
    stored = ref["run_config"]["data"]["mixture"]
    assert [m["path"] for m in stored] == [str(p.absolute()) for p in toy_mixture]
    # evaluate / plot given a data file take runs of one data file: refused in one line, naming it
    given = ["--data", str(toy_mixture[0])]
    for argv in (["evaluate", str(run), *given], ["plot", str(run), *given]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{run}: trained on a mixture of 2 data sets" in err, err
    # predict forecasts a member's file (issue 45): the frames after its given ones, on the member's grid
    assert main(["predict", str(run), "--input", str(toy_mixture[0]), "--output", str(tmp_path / "p.h5")]) == 0


def test_each_members_validation_error_is_a_column_of_the_metrics(tmp_path, toy_mixture, mixture_config):
    """metrics.csv, train.log and the checkpoint's history carry val_<member> (CSV-safe) beside the selection
    metric, with the values the task's validation held at each epoch; the selection metric is their mean."""
    config = mixture_config(toy_mixture, epochs=2)
    config["data"]["mixture"][0]["name"] = "fno_nu1e-3"
    quoted = 'cns, m1"q"'
    config["data"]["mixture"][1]["name"] = quoted
    run = tmp_path / "run"
    trainer = Trainer(config_from_dict(config), run)
    held, validate = [], trainer.task.validate

    def recording(*args):
        value = validate(*args)
        held.append(dict(trainer.task.member_errors))
        return value

    trainer.task.validate = recording
    trainer.fit()
    with open(run / "metrics.csv") as f:
        header = f.readline().strip().split(",")
    assert header == ["epoch", "train_loss", "val_relative_l2", "val_fno_nu1e-3", "val_cns__m1_q_", "lr", "seconds"]
    rows = metrics(run)
    assert len(held) == len(rows) == 2
    for row, errors in zip(rows, held):
        assert float(row["val_fno_nu1e-3"]) == errors["fno_nu1e-3"] and float(row["val_cns__m1_q_"]) == errors[quoted]
        assert float(row["val_relative_l2"]) == pytest.approx((errors["fno_nu1e-3"] + errors[quoted]) / 2, rel=1e-15)
    history = load_checkpoint(run / "last.pt")["history"]
    assert [r["val_cns__m1_q_"] for r in history] == [e[quoted] for e in held]
    log = (run / "train.log").read_text()
    last = held[1]
    assert f"val_fno_nu1e-3 {last['fno_nu1e-3']:.4e} val_cns__m1_q_ {last[quoted]:.4e} lr " in log


def test_member_columns_are_csv_safe_and_distinct():
    assert member_columns(["fno_nu1e-3", "cns_m1_eta0.1", "a b,c"]) == {
        "fno_nu1e-3": "val_fno_nu1e-3", "cns_m1_eta0.1": "val_cns_m1_eta0.1", "a b,c": "val_a_b_c"}
    with pytest.raises(ConfigError, match=r"^data.mixture\[2\].name: 'a b' would record its validation error as "
                                          r"val_a_b, member 1's column; give the member another name$"):
        member_columns(["x", "a_b", "a b"])
    with pytest.raises(ConfigError, match=r"^data.mixture\[0\].name: 'relative_l2' would record its validation "
                                          r"error as val_relative_l2, the selection metric's column"):
        member_columns(["relative_l2"])


def test_mixture_settings_that_do_not_apply_are_one_line_errors(toy_mixture, mixture_config):
    base = mixture_config(toy_mixture)
    cases = [
        ({"data": {**base["data"], "normalize_input": "channel"}}, "a mixture trains on raw values"),
        ({"rollout": {"t_in": 3, "t_out": 1, "strategy": "unroll", "unroll_steps": 2}},
         "a mixture trains one_step on data.windows_per_epoch random windows, not unroll"),
        ({"rollout": {"t_in": 3, "t_out": 1, "eval_frames": 5}}, r"rollout.eval_frames: 5 is more than the 4 frames"),
        ({"model": {**base["model"], "in_channels": 1}}, r"model.in_channels: is 1 but data.mixture has 2 \(c0, c1\)"),
    ]
    for change, message in cases:
        with pytest.raises(ConfigError, match=message):
            train(config_from_dict({**base, **change}), toy_mixture[0].parent / "run")


def test_the_mixture_configs_train_dpot_and_its_baseline_alike():
    """configs/mixture: dpot_micro and the FNO2d-time baseline share the members, the recipe (the authors' coupled
    Adam, OneCycle, noise) and the 10,000 steps of issue 29, section 4.1; only the model differs."""
    folder = Path(__file__).resolve().parents[2] / "configs" / "mixture"
    dpot, fno = (config_to_dict(load_config(folder / name)) for name in ("dpot_micro.yaml", "fno2d_time.yaml"))
    assert {k: v for k, v in dpot.items() if k != "model"} == {k: v for k, v in fno.items() if k != "model"}
    data = dpot["data"]
    assert [m["path"] for m in data["mixture"]] == [f"data/mixture/{name}.h5" for name in (
        "fno_nu1e-3", "fno_nu1e-4", "fno_nu1e-5", "dr", "swe", "cns_m1_eta0.1", "smoke", "smoke_conditioned")]
    assert (data["resolution"], data["n_val"], dpot["rollout"]["noise"]) == (64, 20, 0.2)
    assert dpot["optim"] == {"name": "adam", "lr": 1e-3, "weight_decay": 1e-6, "betas": [0.9, 0.9]}
    assert data["windows_per_epoch"] // dpot["train"]["batch_size"] * dpot["train"]["epochs"] == 10_000
    assert dpot["model"]["name"] == "dpot2d" and dpot["model"]["width"] == 256 and fno["model"]["in_channels"] == 4
