"""A mesh run trains through the one trainer from the command line: the mesh task, the mesh surrogate, the
quadrature-weighted relative L2 as loss and selection metric with the plain one beside it."""

import csv

import pytest
import torch
import yaml

from opformer.cli import main
from opformer.eval.metrics import weighted_relative_l2_per_sample
from opformer.runs.checkpoint import load_checkpoint
from opformer.models.surrogate import Surrogate
from tests.data.test_store_mesh import mesh_samples, write


def config(data, model, **train):
    return {"data": {"path": str(data), "n_train": 4, "n_val": 2, "n_test": 1, "normalize_input": "channel",
                     "normalize_target": "channel"},
            "model": model, "optim": {"lr": 1e-3}, "train": {"epochs": 2, "batch_size": 2, **train}, "seed": 0}


@pytest.mark.slow
@pytest.mark.parametrize("model", [
    {"name": "mesh_mlp", "in_channels": 1, "out_channels": 2, "width": 8, "n_layers": 1},
    {"name": "transolver", "in_channels": 1, "out_channels": 2, "n_hidden": 8, "n_layers": 1, "n_head": 2,
     "slice_num": 3, "weighting": "quadrature"},
])
def test_a_mesh_run_trains_from_the_command_line(tmp_path, model, capsys):
    data = write(tmp_path / "m.h5", mesh_samples((20, 31, 25, 18, 27, 22, 19)))
    path = tmp_path / "mesh.yaml"
    path.write_text(yaml.safe_dump(config(data, model)))
    assert main(["train", str(path), "--out", str(tmp_path / "run")]) == 0
    assert "best validation relative L2" in capsys.readouterr().out
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and float(rows[-1]["val_relative_l2_uniform"]) > 0
    payload = load_checkpoint(tmp_path / "run" / "best.pt")
    surrogate = Surrogate.from_spec(payload["spec"])
    surrogate.load_state_dict(payload["state_dict"])
    assert payload["spec"]["data"]["layout"] == "mesh"
    assert surrogate.target_normalizer.std.shape == (2,)  # per-channel statistics of the two target channels


def test_grid_options_and_grid_models_are_refused_on_mesh_data(tmp_path, capsys):
    data = write(tmp_path / "m.h5", mesh_samples((20, 21, 22, 23, 24, 25, 26)))
    mlp = {"name": "mesh_mlp", "in_channels": 1, "out_channels": 2, "width": 8, "n_layers": 1}
    cases = [(config(data, {"name": "fno1d", "in_channels": 1, "out_channels": 2}), "is a grid model"),
             ({**config(data, mlp), "loss": {"name": "h1_relative"}}, "loss.name: 'h1_relative' is for grid data"),
             ({**config(data, mlp), "data": {**config(data, mlp)["data"], "normalize_input": "pointwise"}},
              "'pointwise' needs a grid")]
    for i, (section, needle) in enumerate(cases):
        path = tmp_path / f"bad{i}.yaml"
        path.write_text(yaml.safe_dump(section))
        code = main(["train", str(path), "--out", str(tmp_path / f"run{i}")])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


def test_weighted_relative_l2_formula():
    pred = torch.tensor([[[1.0], [2.0], [5.0]]])
    target = torch.tensor([[[1.0], [1.0], [0.0]]])
    w = torch.tensor([[0.5, 0.5, 0.0]])  # the third point is padding
    assert torch.allclose(weighted_relative_l2_per_sample(pred, target, w), torch.tensor([(0.5 / 1.0) ** 0.5]))
    w2 = torch.tensor([[0.2, 0.8, 0.0]])
    assert torch.allclose(weighted_relative_l2_per_sample(pred, target, w2), torch.tensor([0.8 ** 0.5]))


@pytest.mark.slow
def test_a_streamed_mesh_run_trains_as_a_held_one(tmp_path):
    """A training split beyond data.memory_gb is read per batch by a worker process: the same errors."""
    data = write(tmp_path / "m.h5", mesh_samples((20, 31, 25, 18, 27, 22, 19)))
    model = {"name": "mesh_mlp", "in_channels": 1, "out_channels": 2, "width": 8, "n_layers": 1}
    columns = []
    for name, memory in (("held", 8.0), ("streamed", 1e-7)):
        section = config(data, model)
        section["data"].update(memory_gb=memory, workers=1)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(section))
        assert main(["train", str(path), "--out", str(tmp_path / name)]) == 0
        with open(tmp_path / name / "metrics.csv") as f:
            columns.append([(r["train_loss"], r["val_relative_l2"]) for r in csv.DictReader(f)])
    assert columns[0] == columns[1]
