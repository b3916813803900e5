"""Every command on a mesh run, through the command line: evaluate (the quadrature-weighted relative L2 beside the
plain one), predict on a user's mesh file, calibrate and bounds, plot, export and import."""

import json

import numpy as np
import pytest
import torch
import yaml

from opformer.cli import main
from opformer.data.store import read_mesh_samples
from opformer.eval.metrics import weighted_relative_l2_per_sample
from opformer.runs import Run
from tests.cli.test_mesh_train import config
from tests.data.test_store_mesh import mesh_samples, write

pytestmark = pytest.mark.slow  # each test uses a run trained from the command line (a few seconds, once)

COUNTS = (20, 31, 25, 18, 27, 22, 19, 24, 21, 26)


@pytest.fixture(scope="module")
def mesh_run(tmp_path_factory):
    """A tiny Transolver with quadrature weights, trained 2 epochs on 4 samples (2 val, 4 test)."""
    folder = tmp_path_factory.mktemp("mesh_run")
    data = write(folder / "m.h5", mesh_samples(COUNTS))
    model = {"name": "transolver", "in_channels": 1, "out_channels": 2, "n_hidden": 8, "n_layers": 1, "n_head": 2,
             "slice_num": 3, "weighting": "quadrature"}
    section = config(data, model)
    section["data"]["n_test"] = 4
    path = folder / "mesh.yaml"
    path.write_text(yaml.safe_dump(section))
    assert main(["train", str(path), "--out", str(folder / "run")]) == 0
    return folder / "run", data


def test_evaluate_reports_the_weighted_and_the_plain_relative_l2(mesh_run, tmp_path, capsys):
    run, data = mesh_run
    capsys.readouterr()
    assert main(["evaluate", str(run), "--json", str(tmp_path / "e.json")]) == 0
    out = capsys.readouterr().out
    assert "rel. L2 (quadrature)" in out and "rel. L2 (uniform)" in out
    row = json.loads((tmp_path / "e.json").read_text())["results"][0]
    # the figures by hand: each test sample alone through the surrogate, both norms averaged over samples
    surrogate = Run(run).surrogate
    weighted, uniform = [], []
    for sample in read_mesh_samples(data, range(6, 10)):
        w = torch.tensor(sample.weights / sample.weights.sum(), dtype=torch.float32)[None]
        x = torch.tensor(sample.fields["a"])[None]
        pos = torch.tensor(sample.points, dtype=torch.float32)[None]
        y = torch.tensor(sample.fields["u"])[None].double()
        with torch.no_grad():
            pred = surrogate(x, pos, w, torch.ones_like(w, dtype=torch.bool)).double()
        weighted.append(float(weighted_relative_l2_per_sample(pred, y, w)))
        uniform.append(float(weighted_relative_l2_per_sample(pred, y, torch.ones_like(w))))
    assert row["samples"] == 4 and (row["points_min"], row["points_max"]) == (19, 26)
    assert row["relative_l2"] == pytest.approx(np.mean(weighted), rel=1e-5)
    assert row["relative_l2_uniform"] == pytest.approx(np.mean(uniform), rel=1e-5)
    assert row["relative_l2"] != pytest.approx(row["relative_l2_uniform"], rel=1e-6)


def test_grid_options_of_evaluate_are_refused_on_a_mesh_run(mesh_run, capsys):
    run, _ = mesh_run
    capsys.readouterr()
    assert main(["evaluate", str(run), "--resolutions", "64"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--resolutions: for grid runs" in err


def user_file(path, counts=(15, 40, 23), seed=5, targets=True):
    """A user's mesh file: other meshes, other point counts; with or without the true targets."""
    samples = mesh_samples(counts, seed=seed)
    if not targets:
        for s in samples:
            del s.fields["u"]
    return write(path, samples, **({} if targets else {"targets": []}))


def test_predict_writes_a_mesh_file_of_the_predicted_fields_on_the_users_points(mesh_run, tmp_path, capsys):
    from opformer import load_surrogate

    run, _ = mesh_run
    given = user_file(tmp_path / "mine.h5", targets=False)
    assert main(["predict", str(run), "--input", str(given), "--output", str(tmp_path / "out.h5")]) == 0
    assert "wrote predictions" in capsys.readouterr().out
    back, inputs = read_mesh_samples(tmp_path / "out.h5", range(3)), read_mesh_samples(given, range(3))
    forecaster = load_surrogate(run)
    assert forecaster.kind == "mesh"
    for got, sample in zip(back, inputs):
        assert np.array_equal(got.points, sample.points) and np.array_equal(got.cells, sample.cells)
        assert np.array_equal(got.fields["a"], sample.fields["a"])
        alone = forecaster.predict(sample)  # one sample alone, from Python
        assert got.fields["u"].shape == (len(sample.points), 2)
        np.testing.assert_allclose(got.fields["u"], alone, rtol=1e-5, atol=1e-6)
    assert len(forecaster.predict(inputs)) == 3


def test_predict_refuses_a_file_without_the_runs_inputs_and_grid_options(mesh_run, tmp_path, capsys):
    run, _ = mesh_run
    wrong = write(tmp_path / "w.h5", mesh_samples((12, 14)), inputs=["u"], targets=["a"])
    cases = [(["--input", str(wrong)], "does not fit"),
             (["--input", str(user_file(tmp_path / "m.h5")), "--frames", "3"], "--frames: not for a mesh run"),
             (["--input", str(tmp_path / "m.h5"), "--output", str(tmp_path / "o.npy")], "name it .h5")]
    for extra, needle in cases:
        argv = ["predict", str(run), "--output", str(tmp_path / "o.h5"), *extra]
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err
        assert not (tmp_path / "o.h5").exists()


def test_calibrate_and_predict_coverage_give_per_sample_bounds(mesh_run, tmp_path, capsys):
    from opformer.trust.mesh_calibration import band_score, load_mesh_calibration

    run, data = mesh_run
    capsys.readouterr()
    assert main(["calibrate", str(run), "--coverage", "0.6"]) == 0
    out = capsys.readouterr().out
    assert "4 samples" in out and "0.6" in out
    calibration = load_mesh_calibration(Run(run))
    # the bound at 0.6 of 4 scores is the ceil(5 * 0.6) = 3rd smallest weighted relative L2 of the test split
    evaluated = tmp_path / "e.json"
    assert main(["evaluate", str(run), "--json", str(evaluated)]) == 0
    bound, factor = calibration.quantiles(0.6)
    assert bound == pytest.approx(float(calibration.relative_l2[2])) and factor == float(calibration.band[2])
    assert float(calibration.relative_l2.mean()) == pytest.approx(
        json.loads(evaluated.read_text())["results"][0]["relative_l2"], rel=1e-5)
    # the calibration's own test samples as a user's file: bounds per sample, the band covering >= its level there
    test = write(tmp_path / "test.h5", read_mesh_samples(data, range(6, 10)))
    assert main(["predict", str(run), "--input", str(test), "--output", str(tmp_path / "b.h5"),
                 "--coverage", "0.6"]) == 0
    back = read_mesh_samples(tmp_path / "b.h5", range(4))
    assert all(s.settings["bound_relative_l2"] == pytest.approx(bound) for s in back)
    assert all(s.settings["flagged"] == 0 for s in back)  # the calibration's own inputs are inside its range
    inside = [float(np.abs(s.fields["u"] - t.fields["u"]).max()) <= s.settings["band_half_width"] * (1 + 1e-5)
              for s, t in zip(back, read_mesh_samples(test, range(4)))]
    assert sum(inside) >= 3
    # a sample of more points than any calibration sample is unlike the calibration: flagged
    far = user_file(tmp_path / "far.h5", counts=(60,), targets=False)
    assert main(["predict", str(run), "--input", str(far), "--output", str(tmp_path / "f.h5"),
                 "--coverage", "0.6"]) == 0
    assert read_mesh_samples(tmp_path / "f.h5", [0])[0].settings["flagged"] == 1
    w = torch.tensor([0.5, 0.5], dtype=torch.float64)
    assert float(band_score(torch.tensor([[1.0], [1.0]]), torch.tensor([[1.0], [0.5]]), w)) == pytest.approx(0.5)


def test_calibrate_refuses_the_split_training_saw(mesh_run, capsys):
    run, _ = mesh_run
    capsys.readouterr()
    assert main(["calibrate", str(run), "--split", "val"]) == 2
    assert "--split val: the run was selected on it" in capsys.readouterr().err


def test_plot_draws_truth_prediction_and_error_on_the_triangulation(mesh_run, tmp_path, capsys):
    run, _ = mesh_run
    assert main(["plot", str(run), "--out", str(tmp_path), "--samples", "2"]) == 0
    assert (tmp_path / "predictions.png").stat().st_size > 0 and (tmp_path / "losses.png").is_file()
    capsys.readouterr()
    assert main(["plot", str(run), "--out", str(tmp_path), "--coverage", "0.9"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "per sample" in err


def test_export_then_import_predicts_bit_identically(mesh_run, tmp_path, capsys):
    run, _ = mesh_run
    assert main(["calibrate", str(run), "--coverage", "0.6"]) == 0
    assert main(["export", str(run), str(tmp_path / "repo")]) == 0
    assert "mesh: 2D points" in (tmp_path / "repo" / "README.md").read_text()
    assert main(["import", "opformer", str(tmp_path / "repo"), "--out", str(tmp_path / "back")]) == 0
    given = user_file(tmp_path / "mine.h5", targets=False)
    for name in ("run", "back"):
        folder = run if name == "run" else tmp_path / "back"
        assert main(["predict", str(folder), "--input", str(given), "--output", str(tmp_path / f"{name}.h5"),
                     "--coverage", "0.6"]) == 0
    original, imported = (read_mesh_samples(tmp_path / f"{n}.h5", range(3)) for n in ("run", "back"))
    for a, b in zip(original, imported):
        assert np.array_equal(a.fields["u"], b.fields["u"]) and a.settings == b.settings
    assert Run(tmp_path / "back").kind == "mesh"


@pytest.mark.parametrize("generator, recipes", [("elasticity", ("elasticity_gt", "elasticity_transolver")),
                                                ("airfoil", ("airfoil_gt", "airfoil_transolver"))])
def test_the_generators_mesh_recipes_train_on_their_data(generator, recipes, tmp_path, capsys):
    """Each generator's recipes take their channels from the generator's file (the elasticity's input is the
    coordinates alone: 0 channels); tiny files and one layer keep it short."""
    data = tmp_path / f"{generator}.h5"
    assert main(["generate", generator, "--samples", "4", "--resolution", "10" if generator == "elasticity" else "16",
                 "--out", str(data)]) == 0
    for recipe in recipes:
        assert main(["train", f"mesh/{recipe}", "--out", str(tmp_path / recipe), "--set", f"data.path={data}",
                     "--set", "data.n_train=2", "--set", "data.n_val=1", "--set", "data.n_test=1",
                     "--set", "train.epochs=1", "--set", "model.n_layers=1"]) == 0
        assert Run(tmp_path / recipe).kind == "mesh"


def test_every_published_layout_recipe_builds_its_model():
    from opformer.config import load_config
    from opformer.recipes import recipe_path
    from opformer.models.registry import build_model

    expected = {"elasticity": 713_665, "airfoil": 2_810_817, "pipe": 3_073_985}
    for layout, count in expected.items():
        gt, transolver = (load_config(recipe_path(f"mesh/geo_fno_{layout}_{m}")) for m in ("gt", "transolver"))
        assert gt.data.n_train == transolver.data.n_train == 1000 and gt.data.n_test == 200
        model = build_model({k: v for k, v in transolver.model.items()})
        assert sum(p.numel() for p in model.parameters()) == count  # the authors' configuration, theirs
