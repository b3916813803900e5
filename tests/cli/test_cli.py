import resource
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from opformer import __version__
from opformer.cli import main


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *needles):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def trained_run(tmp_path_factory, toy_writer, tiny_config):
    base = tmp_path_factory.mktemp("cli")
    data = toy_writer(base / "toy.h5")
    config = base / "tiny.yaml"
    config.write_text(yaml.safe_dump(tiny_config(data, epochs=2)))
    run = base / "run"
    assert main(["train", str(config), "--out", str(run)]) == 0
    return run, data, config


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"opformer {__version__}"
    for command in ("generate", "train", "evaluate", "plot", "predict", "quickstart", "verify"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "example:\n  opformer " + command in capsys.readouterr().out


def test_verify_checks_each_files_whole_digest(capsys, tmp_path, toy_writer, edit_h5):
    good, other = toy_writer(tmp_path / "good.h5", samples=4, n=16), toy_writer(tmp_path / "other.h5", samples=3)
    code, out, err = run_cli(capsys, "verify", good, other)
    assert code == 0 and out.splitlines() == [f"{good}: ok", f"{other}: ok"] and err == ""
    raw = bytearray(other.read_bytes())
    raw[len(raw) // 2] ^= 0x01  # wherever it falls (data, metadata or unused space): the whole-file digest differs
    other.write_bytes(bytes(raw))
    edited = toy_writer(tmp_path / "edited.h5", samples=3)
    with edit_h5(edited) as f:
        f.attrs["seed"] = 7
    code, out, err = run_cli(capsys, "verify", good, other, edited, tmp_path / "none.h5")
    assert code == 2 and out.splitlines() == [f"{good}: ok"]
    lines = err.splitlines()
    assert len(lines) == 3 and "Traceback" not in err
    assert lines[0] == (f"opformer verify: error: {other}: corrupt or changed since it was written (its contents do "
                        "not match its checksum); regenerate or re-copy it")
    assert f"{edited}: holds no opformer checksum to verify it against" in lines[1]
    assert f"{tmp_path / 'none.h5'}: no such data file" in lines[2]


def test_evaluate_prints_a_table_and_writes_json(capsys, trained_run, tmp_path):
    run, data, _ = trained_run
    code, out, _ = run_cli(capsys, "evaluate", run, "--data", data, "--resolutions", "32,64",
                           "--json", tmp_path / "e.json")
    assert code == 0
    assert "trained here" in out and "zero-shot" in out
    rows = yaml.safe_load((tmp_path / "e.json").read_text())["results"]
    assert [r["resolution"] for r in rows] == [32, 64] and all(r["samples"] == 4 for r in rows)
    # without --data and --resolutions: the run's own data at its training grid
    code, out, _ = run_cli(capsys, "evaluate", run, "--json", tmp_path / "own.json")
    own = yaml.safe_load((tmp_path / "own.json").read_text())
    assert code == 0 and own["data"] == str(data) and own["results"] == rows[:1]
    # input noise is for operator pairs and a finite eps >= 0
    code, out, _ = run_cli(capsys, "evaluate", run, "--input-noise", "0", "--json", tmp_path / "n.json")
    assert code == 0 and yaml.safe_load((tmp_path / "n.json").read_text())["results"] == rows[:1]  # trained at 0
    one_line_error(*run_cli(capsys, "evaluate", run, "--input-noise", "nan")[::2], "--input-noise nan",
                   "expected a finite eps >= 0")
    # a --json whose folder is missing is refused before anything is computed
    one_line_error(*run_cli(capsys, "evaluate", run, "--json", tmp_path / "no" / "e.json")[::2],
                   "--json", "cannot write there")


def test_predict_writes_the_same_format(capsys, trained_run, tmp_path):
    run, data, _ = trained_run
    out_file = tmp_path / "pred.h5"
    code, _, _ = run_cli(capsys, "predict", run, "--input", data, "--output", out_file)
    assert code == 0
    from opformer.data.store import read_info

    info = read_info(out_file)
    assert info.n_samples == 24 and info.spatial_shape == (64,)
    with h5py.File(out_file) as f, h5py.File(data) as g:
        np.testing.assert_array_equal(f["input"][:], g["input"][:])
        assert not np.allclose(f["target"][:], g["target"][:])  # predictions, not a copy of the truth
    # a file of inputs only (what a user has in place of the solver) is predicted the same way
    from opformer.data.store import write_operator_dataset

    with h5py.File(data) as g:
        inputs = g["input"][:5]
    only = write_operator_dataset(tmp_path / "inputs.h5", inputs, None, pde={"name": "toy"}, solver={},
                                  domain={"lengths": [1.0], "periodic": [True]}, seed=0,
                                  input_channels=["u0"], target_channels=["u"])
    assert not read_info(only).has_target
    code, _, _ = run_cli(capsys, "predict", run, "--input", only, "--output", tmp_path / "pred_only.h5")
    assert code == 0
    with h5py.File(tmp_path / "pred_only.h5") as f, h5py.File(out_file) as g:
        np.testing.assert_allclose(f["target"][:], g["target"][:5], rtol=1e-6, atol=1e-7)
    one_line_error(*run_cli(capsys, "evaluate", run, "--data", only, "--resolution", "64")[::2],
                   "holds inputs only (no '/target'); training and evaluation need targets")
    code, _, err = run_cli(capsys, "predict", run, "--input", data, "--output", data, "--force")
    one_line_error(code, err, "would overwrite the input file")
    # an existing output is replaced only with --force
    before = (tmp_path / "pred_only.h5").read_bytes()
    one_line_error(*run_cli(capsys, "predict", run, "--input", only, "--output", tmp_path / "pred_only.h5")[::2],
                   "pred_only.h5: already exists; add --force to replace it")
    assert (tmp_path / "pred_only.h5").read_bytes() == before
    code, _, _ = run_cli(capsys, "predict", run, "--input", only, "--output", tmp_path / "pred_only.h5", "--force")
    assert code == 0


@pytest.mark.slow
def test_plot_writes_pngs(capsys, trained_run, tmp_path):
    run, data, _ = trained_run
    code, out, _ = run_cli(capsys, "plot", run, "--out", tmp_path / "plots")
    assert code == 0
    for name in ("losses.png", "predictions.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_config_inputs(capsys, trained_run, tmp_path):
    run, data, config = trained_run
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "optimiser": {}}))
    one_line_error(*run_cli(capsys, "train", bad, "--out", tmp_path / "r")[::2], "optimiser: unknown key; valid keys:")
    one_line_error(*run_cli(capsys, "train", config, "--out", tmp_path / "r", "--set", "train.epochs=many")[::2],
                   "train.epochs: expected int, got 'many'")
    one_line_error(*run_cli(capsys, "train", config, "--out", tmp_path / "r", "--set", "model.depth=3")[::2],
                   "model.depth: unknown key; valid keys:")
    assert not (tmp_path / "r" / "last.pt").exists()


def test_an_existing_run_is_never_overwritten(capsys, trained_run):
    run, _, config = trained_run
    before = (run / "best.pt").read_bytes()
    one_line_error(*run_cli(capsys, "train", config, "--out", run)[::2], "already holds a run; use --resume")
    assert (run / "best.pt").read_bytes() == before


def test_bad_data_inputs(capsys, trained_run, tmp_path, toy_writer, edit_h5):
    run, data, _ = trained_run
    one_line_error(*run_cli(capsys, "evaluate", run, "--data", tmp_path / "none.h5", "--resolution", "32")[::2],
                   "none.h5: no such data file")
    corrupt = tmp_path / "corrupt.h5"
    corrupt.write_bytes(data.read_bytes()[:2000])  # truncated
    one_line_error(*run_cli(capsys, "evaluate", run, "--data", corrupt, "--resolution", "32")[::2],
                   "corrupt.h5: corrupt or changed since it was written")
    corrupt.write_bytes(bytes(512) + data.read_bytes()[512:2000])  # truncated, and no checksum to compare
    one_line_error(*run_cli(capsys, "evaluate", run, "--data", corrupt, "--resolution", "32")[::2],
                   "corrupt.h5: not a readable HDF5 file")
    one_line_error(*run_cli(capsys, "evaluate", run, "--data", data, "--resolution", "30")[::2],
                   "resolution 30 is not a strided sub-sample of the stored 64 points")
    nan = toy_writer(tmp_path / "nan.h5")
    with edit_h5(nan) as f:
        f["input"][21, 0, 0] = np.nan
    one_line_error(*run_cli(capsys, "evaluate", run, "--data", nan, "--resolution", "32")[::2],
                   "'/input' holds NaN or Inf (first in sample 21)")
    one_line_error(*run_cli(capsys, "evaluate", run, "--data", data, "--resolution", "3x")[::2],
                   "expected comma-separated integers")


def test_a_checkpoint_of_another_model_is_refused(capsys, trained_run, tmp_path):
    run, _, _ = trained_run
    from opformer.data.store import write_operator_dataset

    other = write_operator_dataset(tmp_path / "2d.h5", np.zeros((24, 8, 8, 1)), np.ones((24, 8, 8, 1)),
                                   pde={}, solver={}, domain={"lengths": [1, 1], "periodic": [False, False]},
                                   seed=0, input_channels=["a"], target_channels=["u"])
    one_line_error(*run_cli(capsys, "evaluate", run, "--data", other, "--resolution", "8")[::2],
                   "2D data with channels ['a'] -> ['u'] does not fit", "best.pt, a model of 1D data")
    (run / "best.pt").write_bytes(b"garbage")
    one_line_error(*run_cli(capsys, "evaluate", run, "--data", other, "--resolution", "8")[::2],
                   "best.pt: not a readable checkpoint")


@pytest.mark.slow
def test_console_script_exits_nonzero_without_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "opformer", "train", str(tmp_path / "missing.yaml"),
                           "--out", str(tmp_path / "run")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"opformer train: error: {tmp_path / 'missing.yaml'}: no such config file"


@pytest.mark.slow
def test_generate_writes_a_self_describing_burgers_file(capsys, tmp_path):
    out = tmp_path / "b.h5"
    code, stdout, _ = run_cli(capsys, "generate", "burgers", "--samples", 3, "--resolution", 256, "--out", out,
                              "--seed", 5, "--viscosity", 0.02)
    assert code == 0 and "wrote 3 samples" in stdout
    from opformer.data.store import read_info

    info = read_info(out)
    assert info.pde["name"] == "burgers" and info.pde["viscosity"] == 0.02 and info.seed == 5
    assert info.spatial_shape == (256,) and info.domain == {"lengths": [1.0], "periodic": [True], "grid": ["periodic"]}
    assert info.solver["name"].startswith("pseudo-spectral")
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    one_line_error(*run_cli(capsys, "generate", "burgers", "--samples", 0, "--out", tmp_path / "c.h5")[::2],
                   "--samples 0: expected a positive number")
    assert not (tmp_path / "c.h5").exists()
    # an existing file is replaced only with --force; an unwritable place is refused before any solving
    before = out.read_bytes()
    one_line_error(*run_cli(capsys, "generate", "burgers", "--samples", 3, "--resolution", 256, "--out", out)[::2],
                   "b.h5: already exists; add --force to replace it")
    assert out.read_bytes() == before
    code, _, _ = run_cli(capsys, "generate", "burgers", "--samples", 2, "--resolution", 256, "--out", out, "--force")
    assert code == 0 and read_info(out).n_samples == 2
    for place in ("/proc/opformer/b.h5", tmp_path):
        one_line_error(*run_cli(capsys, "generate", "burgers", "--samples", 2, "--out", place)[::2],
                       "cannot write there")


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks a machine without CUDA")
@pytest.mark.parametrize("command", ["train", "evaluate", "plot", "predict", "quickstart", "bench"])
def test_every_command_refuses_a_device_it_lacks_in_one_line(capsys, trained_run, tmp_path, command):
    run, data, config = trained_run
    argv = {"train": ["train", config, "--out", tmp_path / "r"], "evaluate": ["evaluate", run],
            "plot": ["plot", run, "--out", tmp_path / "p"], "quickstart": ["quickstart", "--out", tmp_path / "q"],
            "predict": ["predict", run, "--input", data, "--output", tmp_path / "p.h5"],
            "bench": ["bench", "--models", "gt_burgers", "--resolutions", "16"]}[command]
    for device, message in (("cuda", "this machine has no usable CUDA device"),
                            ("gpu", "expected auto, cpu, cuda or cuda:N")):
        one_line_error(*run_cli(capsys, *argv, "--device", device)[::2], f"device '{device}': {message}")
    assert not any(tmp_path.iterdir())


def test_out_of_memory_is_one_line(capsys, trained_run, tmp_path, monkeypatch):
    from opformer.train import trainer

    def allocate(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
                           "you tried to allocate 1099511627776 bytes. Error code 12 (Cannot allocate memory)")

    monkeypatch.setattr(trainer, "train", allocate)
    _, _, config = trained_run
    one_line_error(*run_cli(capsys, "train", config, "--out", tmp_path / "r")[::2],
                   "out of memory ([enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate",
                   "try a smaller batch size")
    monkeypatch.setattr(trainer, "train", lambda *a, **k: [0] * (2**62))  # Python's own MemoryError
    one_line_error(*run_cli(capsys, "train", config, "--out", tmp_path / "r")[::2], "out of memory")

    def no_torch(name):
        raise ImportError("libtorch_cpu.so: failed to map segment from shared object")  # as under ulimit -v

    monkeypatch.setattr("opformer.cli.importlib.import_module", no_torch)
    one_line_error(*run_cli(capsys, "train", config, "--out", tmp_path / "r")[::2],
                   "cannot import torch (libtorch_cpu.so: failed to map segment from shared object)")


@pytest.mark.slow
def test_a_run_records_its_data_absolute_so_plot_works_from_anywhere(capsys, tmp_path, monkeypatch, toy_writer,
                                                                      tiny_config):
    (tmp_path / "project" / "data").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "project")
    data = toy_writer(Path("data/toy.h5"))
    Path("tiny.yaml").write_text(yaml.safe_dump(tiny_config("data/toy.h5", epochs=1)))
    assert run_cli(capsys, "train", "tiny.yaml", "--out", "run")[0] == 0
    assert yaml.safe_load(Path("run/config.yaml").read_text())["data"]["path"] == str(data.absolute())
    monkeypatch.chdir(tmp_path)
    code, _, _ = run_cli(capsys, "plot", "project/run", "--out", "plots")
    assert code == 0 and (tmp_path / "plots" / "predictions.png").is_file()


def test_train_into_an_unwritable_place_is_refused_before_training(capsys, trained_run):
    _, _, config = trained_run
    one_line_error(*run_cli(capsys, "train", config, "--out", "/proc/opformer-run")[::2],
                   "--out /proc/opformer-run: cannot write there (missing or read-only folder /proc)")


def test_plot_into_an_unwritable_place_is_refused_before_plotting(capsys, trained_run):
    run, _, _ = trained_run
    one_line_error(*run_cli(capsys, "plot", run, "--out", "/proc/opformer-plots")[::2],
                   "--out /proc/opformer-plots: cannot write there (missing or read-only folder /proc)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs RLIMIT_AS")
def test_too_little_memory_to_load_the_libraries_is_one_line(tmp_path):
    # under `ulimit -v 150000` torch's libraries cannot be mapped: the parser's PDE registry imported them
    # first, outside main()'s handling, and the user saw an ImportError traceback
    limit = 150 * 2**20
    done = subprocess.run([sys.executable, "-m", "opformer", "train", "x.yaml", "--out", str(tmp_path / "r")],
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith("opformer train: error: cannot import torch (")
    assert done.stderr.strip().endswith("is it installed, and is there memory to load it?")


def test_generate_darcy_writes_a_self_describing_file(capsys, tmp_path):
    from opformer.data.store import read_arrays, read_info
    from opformer.grids import stride_for

    out = tmp_path / "d.h5"
    code, stdout, _ = run_cli(capsys, "generate", "darcy", "--samples", 3, "--resolution", 13, "--seed", 4,
                              "--workers", 1, "--out", out)
    assert code == 0 and "wrote 3 samples" in stdout
    info = read_info(out)
    assert info.spatial_shape == (13, 13) and info.n_samples == 3 and info.seed == 4
    assert info.input_channels == ["a"] and info.target_channels == ["u"]
    assert info.domain == {"lengths": [1.0, 1.0], "periodic": [False, False], "grid": ["nodes", "nodes"]}
    assert info.pde["name"] == "darcy" and info.pde["coefficient"]["tau"] == 3.0
    assert "harmonic" in info.solver["face_coefficient"] and info.solver["tolerance"] == 1e-10
    a, u = read_arrays(out, slice(0, 3))
    assert a.shape == u.shape == (3, 13, 13, 1)
    assert set(np.unique(a).tolist()) == {3.0, 12.0}
    assert np.all(u[:, 0] == 0) and np.all(u[:, :, -1] == 0) and u[:, 1:-1, 1:-1].min() > 0
    assert stride_for(13, 7, "nodes") == 2  # closed grid: (13 - 1) / 2 + 1 nodes


@pytest.mark.parametrize("argv, needle", [
    (["--samples", 0], "--samples 0: expected a positive number"),
    (["--samples", 1, "--resolution", 2], "--resolution 2: expected at least 3 grid nodes"),
    (["--samples", 1, "--resolution", 5, "--workers", 0], "--workers 0: expected a positive number"),
])
def test_generate_darcy_bad_arguments_give_one_line_errors(capsys, tmp_path, argv, needle):
    out = tmp_path / "bad.h5"
    one_line_error(*run_cli(capsys, "generate", "darcy", *argv, "--out", out)[::2], needle)
    assert not out.exists()


def _umask():
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(("sets", "needles"), [
    (["data.resolution=8"], ["resolution 8 is not a strided sub-sample of the stored 17 points", "valid: 17, 9, 5"]),
    (["model.coarse_size=13"], ["the coarse grid (13) is larger than the input grid (9)"]),
    (["data.input_noise=-0.1"], ["data.input_noise: expected a number >= 0, got -0.1"]),
    (["data.target_resolution=4", "data.direction=inverse"], ["data.target_resolution: resolution 4 is not a strided sub-sample of the stored 17 points"]),
])
def test_bad_2d_settings_are_one_line_errors(capsys, tmp_path, darcy_file, darcy_config, sets, needles):
    config = tmp_path / "darcy.yaml"
    config.write_text(yaml.safe_dump(darcy_config(darcy_file)))
    args = ["train", config, "--out", tmp_path / "run"]
    for item in sets:
        args += ["--set", item]
    code, _, err = run_cli(capsys, *args)
    one_line_error(code, err, *needles)
    assert not (tmp_path / "run").exists()


def test_non_square_2d_data_is_a_one_line_error(capsys, tmp_path, darcy_writer, darcy_config):
    data = darcy_writer(tmp_path / "narrow.h5", square=False)
    cfg = darcy_config(data)
    cfg["data"]["resolution"] = None
    config = tmp_path / "narrow.yaml"
    config.write_text(yaml.safe_dump(cfg))
    code, _, err = run_cli(capsys, "train", config, "--out", tmp_path / "run")
    one_line_error(code, err, "expected a square grid (batch, n, n, channels), got (1, 17, 13, 1)")


@pytest.mark.slow
def test_resume_with_more_epochs_extends_a_finished_run(capsys, tmp_path, toy_file, tiny_config):
    import csv

    def rows(run):
        with open(run / "metrics.csv") as f:
            return list(csv.DictReader(f))

    for schedule in ({"name": "constant"}, {"name": "onecycle", "pct_start": 0.3, "div_factor": 10,
                                            "final_div_factor": 10}):
        config = tmp_path / f"{schedule['name']}.yaml"
        config.write_text(yaml.safe_dump({**tiny_config(toy_file, epochs=2), "schedule": schedule}))
        short, whole = tmp_path / f"short_{schedule['name']}", tmp_path / f"whole_{schedule['name']}"
        assert run_cli(capsys, "train", config, "--out", short)[0] == 0
        assert run_cli(capsys, "train", config, "--out", whole, "--set", "train.epochs=4")[0] == 0
        code, out, _ = run_cli(capsys, "train", "--resume", short, "--set", "train.epochs=4")
        assert code == 0 and "resumed at epoch 3 of 4" in out
        extended, uninterrupted = rows(short), rows(whole)
        assert [r["epoch"] for r in extended] == ["1", "2", "3", "4"]
        # the added epochs follow the schedule of a 4-epoch run from where the run stood
        assert [float(r["lr"]) for r in extended[2:]] == pytest.approx([float(r["lr"]) for r in uninterrupted[2:]])
        if schedule["name"] == "constant":  # nothing depends on the planned length: the same run exactly
            assert [r["val_relative_l2"] for r in extended] == [r["val_relative_l2"] for r in uninterrupted]
    one_line_error(*run_cli(capsys, "train", "--resume", short, "--set", "train.epochs=3")[::2],
                   "train.epochs: 3 would not extend")
    one_line_error(*run_cli(capsys, "train", "--resume", short, "--set", "optim.lr=1")[::2],
                   "--set only train.epochs=N to extend it")
