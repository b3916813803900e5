"""Forecasts from every kind of run (opformer.serve): the rollout equals the evaluation's, mixture and
imported DPOT runs answer on the input's grid and channels, arrays in and out, one-line errors, streaming."""

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

import opformer
from tests.toy_data import write_toy_heat
from opformer.config import config_from_dict
from opformer.data.store import read_info, write_trajectory_dataset
from opformer.errors import DataError
from opformer.eval.evaluate import rollout_row
from opformer.models.inference import predict, rollout
from opformer.serve import predict as serving
from opformer.serve.forecaster import open_forecaster
from opformer.serve.predict import predict_file
from opformer.train.trainer import train

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"


def trajectory_config(data, **rollout_keys) -> dict:
    return {"seed": 0, "model": {"name": "fno2d_time", "width": 4, "modes": 2, "n_layers": 1, "projection_width": 8},
            "data": {"path": str(data), "n_train": 6, "n_val": 2, "n_test": 2},
            "optim": {"lr": 1e-3}, "schedule": {"name": "constant"},
            "train": {"epochs": 1, "batch_size": 4, "num_threads": 1, "eval_batch_size": 3},
            "rollout": {"t_in": 3, "t_out": 1, **rollout_keys}}


@pytest.fixture(scope="module")
def heat_run(tmp_path_factory):
    """An FNO2d-time trained one epoch on toy heat trajectories (12 frames, 16^2), and its data file."""
    base = tmp_path_factory.mktemp("forecast")
    heat = write_toy_heat(base / "heat.h5")
    train(config_from_dict(trajectory_config(heat)), base / "run")
    return base / "run", heat


@pytest.mark.slow
def test_a_rollout_equals_the_metrics_rollout_and_the_evaluation(heat_run):
    run, heat = heat_run
    forecaster = opformer.load_surrogate(run, device="cpu")  # the top-level loader: this one, calibration attached
    assert (forecaster.kind, forecaster.t_in, forecaster.t_out, forecaster.grid) == ("trajectory", 3, 1, (16, 16))
    assert forecaster.validated_frames() == 9  # 12 frames after t_in = 3
    frames = torch.randn(5, 7, 16, 16, 1)
    got = forecaster.rollout(frames, 4)
    with torch.no_grad():
        expected = rollout(forecaster.surrogate, frames[:, -3:].movedim(1, -2), 4).movedim(-2, 1)
    assert torch.equal(got, expected)  # bit-equal: the same step, batches of eval_batch_size (3) of 5
    assert torch.equal(forecaster.predict(frames), expected[:, :1])  # one call
    for bad in (torch.zeros(1, 7, 16, 16, 2), torch.zeros(1, 2, 16, 16, 1), torch.zeros(1, 7, 16)):
        with pytest.raises(DataError, match=r"^frames of shape .* takes \(batch, time >= 3, 2 grid axes, 1 channels "
                                            r"\['u'\]\) or \(batch, time, 2 grid axes\) for one channel$"):
            forecaster.rollout(bad, 2)
    # numpy in, numpy out; one channel may leave out its axis, as opformer predict's arrays may
    array = forecaster.rollout(frames.numpy(), 4)
    assert isinstance(array, np.ndarray) and np.array_equal(array, got.numpy())
    assert np.array_equal(forecaster.rollout(frames[..., 0].numpy().astype(np.float64), 4), got.numpy())
    assert torch.equal(forecaster.rollout(frames[..., 0], 4), got)
    assert np.array_equal(forecaster.predict(frames.numpy()), expected[:, :1].numpy())
    with pytest.raises(DataError, match=r"^frames of type list: expected a torch.Tensor or a numpy array \(batch, "
                                        r"time >= 3, 2 grid axes, 1 channels \['u'\]\)$"):
        forecaster.rollout(frames.tolist(), 2)
    # on the test trajectories, the evaluation's predicted frames exactly
    row, data, preds = rollout_row(forecaster.surrogate, forecaster.payload, forecaster.source, heat, None, "test",
                                   torch.device("cpu"))
    assert torch.equal(forecaster.rollout(data.fields[:, :3], row["frames"]), preds)


def test_predict_file_continues_each_trajectory_with_the_input_attributes(heat_run, tmp_path):
    run, heat = heat_run
    forecaster = open_forecaster(run, device="cpu")
    out = predict_file(run, heat, tmp_path / "forecast.h5", frames=4, device="cpu", start=9)  # the last 3 of 12
    info, given = read_info(out), read_info(heat)
    assert (info.kind, info.n_samples, info.spatial_shape, info.input_channels) == ("trajectory", 10, (16, 16), ["u"])
    assert (info.pde, info.domain, info.seed) == (given.pde, given.domain, given.seed)
    np.testing.assert_allclose(info.times, 0.55 + 0.05 * np.arange(1, 5))  # the stored frames are 0.05 apart
    assert info.extra["prediction_of"] == str(heat) and info.extra["given_frames"] == 12
    with h5py.File(out) as f, h5py.File(heat) as g:
        fields = torch.from_numpy(g["fields"][:])
        assert torch.equal(torch.from_numpy(f["fields"][:]), forecaster.rollout(fields[:, -3:], 4))
    # by default after the last t_in frames given, as Forecaster.rollout; --start 0: from the first frames
    out = predict_file(run, heat, tmp_path / "last.h5", frames=4, device="cpu")
    np.testing.assert_allclose(read_info(out).times, 0.55 + 0.05 * np.arange(1, 5))
    assert read_info(out).extra["context_start"] == 9
    with h5py.File(out) as f:
        assert torch.equal(torch.from_numpy(f["fields"][:]), forecaster.rollout(fields, 4))
    out = predict_file(run, heat, tmp_path / "first.h5", frames=4, device="cpu", start=0)
    np.testing.assert_allclose(read_info(out).times, 0.10 + 0.05 * np.arange(1, 5))
    with h5py.File(out) as f:
        assert torch.equal(torch.from_numpy(f["fields"][:]), forecaster.rollout(fields[:, :3], 4))
    with pytest.raises(DataError, match=r"12 frames, but a context of 3 frames 1 stored frames apart from frame 10 "
                                        r"\(--start\) needs 13"):
        predict_file(run, heat, tmp_path / "late.h5", frames=4, device="cpu", start=10)
    # the default length is the run's validated one; the .npz holds the frames and their times
    out = predict_file(run, heat, tmp_path / "forecast.npz", device="cpu")
    with np.load(out) as z:
        assert sorted(z.files) == ["fields", "times"] and z["fields"].shape == (10, 9, 16, 16, 1)
        np.testing.assert_allclose(z["times"], 0.55 + 0.05 * np.arange(1, 10))


@pytest.mark.slow
def test_a_time_stride_takes_the_frames_the_model_steps_over(tmp_path):
    heat = write_toy_heat(tmp_path / "heat.h5", frames=13)
    train(config_from_dict(trajectory_config(heat, time_stride=2)), tmp_path / "run")
    forecaster = open_forecaster(tmp_path / "run", device="cpu")
    assert forecaster.validated_frames() == 4  # 7 strided frames, 3 given
    with h5py.File(heat) as f:  # as generated files do, the settings list the frames' times
        listed = write_trajectory_dataset(tmp_path / "listed.h5", f["fields"][:], f["times"][:],
                                          pde={"name": "heat", "times": f["times"][:].tolist()}, solver={},
                                          domain={"lengths": [1.0, 1.0], "periodic": [True, True]}, seed=0,
                                          channels=["u"])
    out = predict_file(tmp_path / "run", listed, tmp_path / "f.h5", frames=2, device="cpu", start=8)
    np.testing.assert_allclose(read_info(out).times, 0.6 + 0.1 * np.arange(1, 3))
    assert read_info(out).pde == {"name": "heat", "times": list(read_info(out).times)}  # the forecast's times
    with h5py.File(out) as f, h5py.File(heat) as g:  # the context: frames 8, 10, 12
        assert torch.equal(torch.from_numpy(f["fields"][:]),
                           forecaster.rollout(torch.from_numpy(g["fields"][:, 8::2]), 2))


@pytest.mark.slow
def test_a_latent_marching_run_gives_its_evaluation_frames(tmp_path):
    heat = write_toy_heat(tmp_path / "heat.h5")
    config = trajectory_config(heat, t_out=2, strategy="latent_marching", eval_frames=5)
    config["model"] = {"name": "factformer2d", "d_model": 8, "n_head": 1, "head_dim": 4, "n_layers": 1,
                       "latent_dim": 8, "decoder_groups": 8}
    train(config_from_dict(config), tmp_path / "run")
    forecaster = open_forecaster(tmp_path / "run", device="cpu")
    assert forecaster.t_out == 2 and forecaster.validated_frames() == 5  # 3 calls of 2 marched frames, cut to 5
    row, data, preds = rollout_row(forecaster.surrogate, forecaster.payload, forecaster.source, heat, None, "test",
                                   torch.device("cpu"))
    assert row["frames"] == 5 and torch.equal(forecaster.rollout(data.fields[:, :3], 5), preds)
    calls = []
    inner = forecaster.surrogate.forward
    forecaster.surrogate.forward = lambda x, *a: calls.append(x.shape[-2]) or inner(x, *a)
    forecaster.rollout(data.fields[:1, :3], 5)
    assert calls == [3, 3, 3]  # k = 2 frames per call: 2 + 2 + 1


@pytest.fixture(scope="module")
def mixture_run(tmp_path_factory):
    from tests.toy_data import tiny_mixture_config, write_toy_member

    base = tmp_path_factory.mktemp("mixture")
    members = [write_toy_member(base / "a.h5"), write_toy_member(base / "b.h5", n=32, channels=2, grid="cells",
                                                                 seed=1)]
    train(config_from_dict(tiny_mixture_config(members, epochs=1)), base / "run")
    return base / "run", members


def test_a_mixture_run_answers_on_each_member_grid_and_channels(mixture_run, tmp_path):
    from opformer.eval.mixture import member_rollout, member_splits
    from opformer.runs import Run

    run, members = mixture_run
    forecaster = open_forecaster(run, device="cpu")
    assert forecaster.padded and forecaster.kind == "trajectory"
    surrogate = Run(run).surrogate
    for member, path, channels, n in zip(member_splits(Run(run), "test"), members, (1, 2), (16, 32)):
        evaluated = member_rollout(surrogate, member, 3, 4, torch.device("cpu")).predictions[..., :channels]
        given = member.data.fields[:, :3]
        assert given.shape[-1] == channels
        got = forecaster.rollout(given, member.frames)
        assert got.shape == (len(given), 4, n, n, channels) and torch.equal(got, evaluated)
        out = predict_file(run, path, tmp_path / f"{path.stem}.npy", frames=2, device="cpu")
        assert np.load(out).shape == (6, 2, n, n, channels)
    assert forecaster.validated_frames(members[1]) == 4 == forecaster.validated_frames(name="b")  # after t_in


@pytest.mark.slow
def test_an_imported_dpot_resizes_to_its_grid_and_back(tmp_path):
    from opformer.eval.mixture import imported_member, member_rollout
    from opformer.imports.convert import import_run

    run = import_run("dpot", FIXTURES / "dpot_tiny.pth", tmp_path / "dpot")[0]
    heat = write_toy_heat(tmp_path / "heat32.h5", samples=2, n=32, frames=6)  # 1 channel at 32^2; model: 4 at 16^2
    forecaster = open_forecaster(run, device="cpu")
    assert forecaster.padded and forecaster.grid == (16, 16) and forecaster.t_in == 4
    _, _, member, step, notes = imported_member(run, heat, frames=2, device="cpu")
    assert any("resized" in note for note in notes)
    evaluated = member_rollout(step, member, 4, 2, torch.device("cpu")).predictions[..., :1]
    out = predict_file(run, heat, tmp_path / "f.h5", frames=2, device="cpu", start=0)
    with h5py.File(out) as f, h5py.File(heat) as g:
        assert f["fields"].shape == (2, 2, 32, 32, 1)
        torch.testing.assert_close(torch.from_numpy(f["fields"][:]),  # from the first frames, as evaluated
                                   forecaster.rollout(torch.from_numpy(g["fields"][:, :4]), 2), rtol=0, atol=0)
        torch.testing.assert_close(torch.from_numpy(f["fields"][:]), evaluated, rtol=0, atol=0)
    with pytest.raises(DataError, match=r"f\.npy: 'f' has shape \(2, 5, 32, 32, 6\), expected \(N, T >= 4, 2 grid "
                                        r"axes, 1 to 4 channels\) or \(N, T >= 4, 2 grid axes\) for one channel"):
        np.save(tmp_path / "f.npy", np.zeros((2, 5, 32, 32, 6), np.float32))
        predict_file(run, tmp_path / "f.npy", tmp_path / "g.npy", frames=1, device="cpu")


@pytest.fixture(scope="module")
def operator_run(tmp_path_factory):
    from tests.toy_data import tiny_run_config, write_toy_burgers

    base = tmp_path_factory.mktemp("operator")
    data = write_toy_burgers(base / "toy.h5")
    train(config_from_dict(tiny_run_config(data, epochs=1)), base / "run")
    return base / "run", data


@pytest.mark.slow
def test_arrays_in_and_out_round_trip(operator_run, heat_run, tmp_path):
    run, data = operator_run
    forecaster = open_forecaster(run, device="cpu")
    assert forecaster.kind == "operator" and forecaster.t_in is None and forecaster.grid == (64,)
    with h5py.File(data) as f:
        x = f["input"][:]
    with torch.no_grad():
        expected = predict(forecaster.surrogate, torch.from_numpy(x), 32, torch.device("cpu")).numpy()
    with pytest.raises(DataError, match=r"^inputs of shape \(2, 64, 2\): .* takes \(batch, 1 grid axes, 1 channels "
                                        r"\['u0'\]\) or \(batch, 1 grid axes\) for one channel$"):
        forecaster.predict(torch.zeros(2, 64, 2))
    # numpy in, numpy out, with or without the one channel's axis (the CLI's rule); a list is one line
    for given in (x, x[..., 0], x[..., 0].astype(np.float64)):
        out = forecaster.predict(given)
        assert isinstance(out, np.ndarray) and np.array_equal(out, expected)
    assert torch.equal(forecaster.predict(torch.from_numpy(x[..., 0])), torch.from_numpy(expected))
    with pytest.raises(DataError, match=r"^inputs of type list: expected a torch.Tensor or a numpy array \(batch, 1 "
                                        r"grid axes, 1 channels \['u0'\]\)$"):
        forecaster.predict(x.tolist())
    np.save(tmp_path / "x.npy", x[..., 0])  # one channel: the channel axis may be left out
    np.testing.assert_array_equal(np.load(predict_file(run, tmp_path / "x.npy", tmp_path / "y.npy")), expected)
    np.savez(tmp_path / "x.npz", x=x)
    with np.load(predict_file(run, tmp_path / "x.npz", tmp_path / "y.npz")) as z:
        np.testing.assert_array_equal(z["x"], x)
        np.testing.assert_array_equal(z["y"], expected)
    with h5py.File(predict_file(run, tmp_path / "x.npy", tmp_path / "y.h5")) as f:
        np.testing.assert_array_equal(f["target"][:], expected)
        assert read_info(tmp_path / "y.h5").target_channels == ["u"]
    # trajectories: an (N, T, *grid) array continues from its 3 frames from --start, times 0, 1, ... continued
    run, heat = heat_run
    with h5py.File(heat) as f:
        fields = f["fields"][:4]
    np.savez(tmp_path / "u.npz", u=fields)
    with np.load(predict_file(run, tmp_path / "u.npz", tmp_path / "f.npz", frames=2, start=9)) as z:
        np.testing.assert_array_equal(z["times"], [12.0, 13.0])
        assert torch.equal(torch.from_numpy(z["fields"]),
                           open_forecaster(run, device="cpu").rollout(torch.from_numpy(fields), 2))


@pytest.mark.parametrize(("shape", "needle"), [
    ((3, 32, 1), "has shape (3, 32, 1), expected (N, 64, 1) or (N, 64) for one channel (the grid and channels of"),
    ((3, 64, 2), "has shape (3, 64, 2), expected (N, 64, 1) or (N, 64) for one channel"),
    ((3, 64, 1, 1), "has shape (3, 64, 1, 1), expected (N, 64, 1)"),
])
def test_arrays_of_the_wrong_shape_are_one_line_and_write_nothing(operator_run, tmp_path, capsys, shape, needle):
    from opformer.cli import main

    run, _ = operator_run
    np.save(tmp_path / "x.npy", np.zeros(shape, np.float32))
    assert main(["predict", str(run), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


@pytest.mark.slow
def test_files_that_do_not_fit_are_one_line_and_write_nothing(operator_run, heat_run, tmp_path, capsys):
    from opformer.cli import main

    operator, toy = operator_run
    trajectory, heat = heat_run

    def fails(run, source, *needles, extra=()):
        out = tmp_path / "out.h5"
        code = main(["predict", str(run), "--input", str(source), "--output", str(out), *extra])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        for needle in needles:
            assert needle in err, err
        assert not out.exists() and not list(tmp_path.glob(".out.h5*"))

    fails(trajectory, toy, "holds operator data but", "was trained on trajectory data")
    fails(operator, heat, "holds trajectory data but", "was trained on operator data")
    fails(operator, toy, "--frames: ", "is an operator run", extra=("--frames", "3"))
    fails(trajectory, heat, "--frames 0: expected at least 1 frame", extra=("--frames", "0"))
    fails(trajectory, heat, "--member a: ", "was not trained on a mixture", extra=("--member", "a"))
    short = write_toy_heat(tmp_path / "short.h5", frames=2)
    fails(trajectory, short, "2 frames, but", "rolls out from 3 frames")
    np.savez(tmp_path / "a.npz", a=np.zeros((2, 64, 1), np.float32))
    fails(operator, tmp_path / "a.npz", "a.npz: none of the arrays x / input (it holds a)")
    # scratch files and the output beyond ulimit -f: refused before a memory map is made (it would die half-written)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("opformer.io._file_size_limit", lambda: 4096.0)
        patch.setattr(serving.Forecaster, "rollout", lambda *a: pytest.fail("predicted before the refusal"))
        fails(trajectory, heat, "out.h5: needs about", "(ulimit -f)")
    # and a trajectory forecast through the CLI, an array out
    code = main(["predict", str(trajectory), "--input", str(heat), "--output", str(tmp_path / "f.npy"),
                 "--frames", "2"])
    assert code == 0 and "wrote predictions to" in capsys.readouterr().out
    assert np.load(tmp_path / "f.npy").shape == (10, 2, 16, 16, 1)


@pytest.mark.slow
def test_chunks_stream_to_the_same_file_and_a_bad_chunk_writes_nothing(heat_run, tmp_path, monkeypatch, edit_h5,
                                                                      capsys):
    from opformer.cli import main

    run, heat = heat_run
    whole = predict_file(run, heat, tmp_path / "whole.npz", frames=3, device="cpu")
    reads = []
    opened = serving.open_inputs

    def counting(path, forecaster, member=None, start=None, extra=0):
        inputs = opened(path, forecaster, member, start, extra)
        read = inputs.read
        inputs.read = lambda start, stop: reads.append((start, stop)) or read(start, stop)
        return inputs

    monkeypatch.setattr(serving, "open_inputs", counting)
    monkeypatch.setattr(serving, "CHUNK_BYTES", 4 * 16 * 16 * 6)  # one sample: 3 given + 3 predicted frames
    chunked = predict_file(run, heat, tmp_path / "chunked.npz", frames=3, device="cpu")
    assert reads == [(i, i + 1) for i in range(10)]
    with np.load(whole) as a, np.load(chunked) as b:
        np.testing.assert_array_equal(a["fields"], b["fields"])
    bad = write_toy_heat(tmp_path / "bad.h5")
    with edit_h5(bad) as f:  # a NaN in the last trajectory: met after 9 samples were predicted
        f["fields"][9, 10, 0, 0, 0] = np.nan  # in the context: the last 3 frames
    reads.clear()
    before = sorted(p.name for p in tmp_path.iterdir())
    for out in ("bad.h5", "bad.npz", "bad.npy"):
        code = main(["predict", str(run), "--input", str(bad), "--output", str(tmp_path / "out" / out)])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and "holds NaN or Inf (first in sample 9, frame 10)" in err, err
    assert reads[-1] == (9, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before + ["out"])
    assert not list((tmp_path / "out").iterdir())


def _imported(fmt: str, tmp_path: Path) -> Path:
    """A run of each import format's fixture (FactFormer's in the file its trainers write)."""
    from safetensors.torch import load_file

    from opformer.imports.convert import import_run

    options = {}
    source = FIXTURES / {"dpot": "dpot_tiny.pth", "galerkin-transformer": "gt_small.pt",
                         "neuraloperator": "fno2d_small.pt"}.get(fmt, "")
    if fmt == "galerkin-transformer":
        options["config"] = str(FIXTURES / "gt_small.yaml")
    if fmt == "factformer":
        tensors = load_file(FIXTURES / "factformer_ns2d.safetensors")
        source = tmp_path / "checkpoint_final.pth"
        torch.save({"model": {k.removeprefix("model."): v.float() for k, v in tensors.items()
                              if k.startswith("model.")}}, source)
        options["config"] = str(FIXTURES / "factformer_ns2d.yml")
    return import_run(fmt, source, tmp_path / fmt, **options)[0]


@pytest.mark.parametrize("fmt, grid", [("factformer", (12, 12)), ("galerkin-transformer", (256,)),
                                       ("neuraloperator", (40, 40)), ("dpot", (32, 32))])
def test_each_import_format_forecasts_on_the_input_grid_unless_its_weights_fix_it(fmt, grid, tmp_path):
    """Through ``opformer.load_surrogate``, on a grid other than the recorded one: a model of any grid (FactFormer,
    GT, FNO) is applied to the input as it is; only DPOT, whose positional embedding fixes its grid, sees the frames
    resized to that grid and its predictions back."""
    from opformer.models.inference import ResizedStep

    forecaster = opformer.load_surrogate(_imported(fmt, tmp_path), device="cpu")
    assert forecaster.grid != grid and forecaster.resized == (fmt == "dpot")
    surrogate, channels = forecaster.surrogate, len(forecaster.input_channels)
    torch.manual_seed(0)
    with torch.no_grad():
        if forecaster.kind == "operator":
            x = torch.randn(2, *grid, channels)
            torch.testing.assert_close(forecaster.predict(x), surrogate(x), rtol=0, atol=0)
            return
        frames = torch.randn(2, forecaster.t_in, *grid, channels)
        window = frames.movedim(1, -2)
        step = ResizedStep(surrogate, forecaster.grid, forecaster.kinds) if fmt == "dpot" else surrogate
        expected = rollout(step, window, 2).movedim(-2, 1)
        torch.testing.assert_close(forecaster.rollout(frames, 2), expected, rtol=0, atol=0)
        if fmt == "dpot":  # resized: not the model applied on the input's grid
            assert not torch.allclose(expected, rollout(surrogate, window, 2).movedim(-2, 1))


def test_a_calibrated_run_the_previous_version_wrote_loads_and_answers_as_it_did():
    """A run directory and calibration.pt written before the serving room (tests/fixtures/runs/calibrated_v1):
    loaded through ``opformer.load_surrogate``, the same predictions to float32 round-off (the CPU's kernels set
    the last bits: on an AMD EPYC they differ from the fixture's by 6e-8 of 0.2), and on the fixture's predictions
    the same bounds, bit for bit."""
    run = FIXTURES.parent / "runs" / "calibrated_v1"
    forecaster = opformer.load_surrogate(run, device="cpu")
    assert forecaster.calibration is not None and forecaster.run.kind == "operator"
    with np.load(run / "expected.npz") as expected:
        x = torch.from_numpy(expected["x"])
        np.testing.assert_allclose(forecaster.predict(x).numpy(), expected["predictions"], rtol=0, atol=1e-6)
        predictions = torch.from_numpy(expected["predictions"])
        bounds = forecaster.bounds(x, predictions, 0.9)
        np.testing.assert_array_equal(bounds.relative_l2.numpy(), expected["bound"])
        np.testing.assert_array_equal(bounds.upper.numpy(), expected["upper"])
        np.testing.assert_array_equal(bounds.flagged.numpy(), expected["flagged"])
