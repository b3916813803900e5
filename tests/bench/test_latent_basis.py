"""GT Figure 13: the Dirichlet energy of each encoder layer's latent channels, from hooks on a trained run."""

import statistics

import pytest
import torch

from benchmarks.papers.galerkin.latent_basis import dirichlet_energy, layer_outputs, markdown, measure
from opformer.config import config_from_dict
from opformer.train.trainer import train


def test_the_energy_is_zero_for_a_constant_and_exact_for_a_ramp_and_a_checkerboard():
    i, j = torch.meshgrid(torch.arange(4.0), torch.arange(4.0), indexing="ij")
    fields = torch.stack([torch.full((4, 4), 3.0), i, (-1.0) ** (i + j)], dim=-1)
    # ramp: 12 unit differences over 4 * (2.25 + 0.25 + 0.25 + 2.25); checkerboard: 24 differences of 2 over 16
    assert dirichlet_energy(fields).tolist() == pytest.approx([0.0, 12 / 20, 96 / 16])


def test_each_layer_of_a_run_is_measured_on_its_first_test_sample(tmp_path, darcy_file, darcy_config):
    config = darcy_config(darcy_file, epochs=1, inverse=True)
    config["model"]["n_layers"] = 4
    run = tmp_path / "inv"
    train(config_from_dict(config), run)
    outputs, facts = layer_outputs(str(run), str(darcy_file))
    assert [tuple(out.shape) for out in outputs] == [(5, 5, 12)] * 4 and facts == {"coarse": 5, "input_noise": 0.01}
    row = measure(str(run), str(darcy_file), tmp_path / "results")
    assert [layer["channels"] for layer in row["layers"]] == [12] * 4
    assert [layer["median"] for layer in row["layers"]] == pytest.approx(
        [statistics.median(dirichlet_energy(out).tolist()) for out in outputs])  # the same sample and noise
    assert all(layer["q1"] <= layer["median"] <= layer["q3"] for layer in row["layers"])
    assert row["curve"] == "too short" and row["best_epoch"] == 1
    assert (tmp_path / "results" / "latent_basis_inv.png").stat().st_size > 0
    text = markdown({"runs": [row]})
    smoother = row["layers"][3]["median"] < row["layers"][0]["median"]
    assert text.rstrip().endswith(f"inv: layer 4 {'smoother' if smoother else 'not smoother'} than layer 1.")
