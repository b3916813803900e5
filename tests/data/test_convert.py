"""opformer convert: a reader's samples written in chunks through a scratch memory map by the store's writers."""

import numpy as np
import pytest
import scipy.io
import torch

from opformer.cli import main
from opformer.data import convert
from opformer.data.readers import source
from opformer.data.store import read_arrays, read_fields, read_info
from opformer.data.trajectories import load_trajectories
from opformer.errors import ConfigError


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_fno_mat_converts_in_chunks(capsys, tmp_path, monkeypatch):
    u = np.random.default_rng(0).normal(size=(5, 4, 3, 6)).astype(np.float32)
    a = np.random.default_rng(1).normal(size=(5, 4, 3)).astype(np.float32)
    scipy.io.savemat(tmp_path / "ns.mat", {"u": u, "a": a})
    monkeypatch.setattr(source, "READ_BYTES", 2 * 4 * 7 * 4 * 3)  # two samples per read
    code, out, err = run(capsys, "convert", "fno-mat", tmp_path / "ns.mat", "--out", tmp_path / "ns.h5",
                         "--samples", 4)
    assert code == 0 and "wrote 4 samples" in out, err
    info = read_info(tmp_path / "ns.h5")
    assert info.kind == "trajectory" and info.n_samples == 4 and info.spatial_shape == (4, 3)
    assert info.times == tuple(range(7)) and info.input_channels == ["vorticity"] and info.seed == -1
    assert info.domain["grid"] == ["periodic", "periodic"] and info.solver["layout"] == "fno-mat"
    fields = read_fields(tmp_path / "ns.h5", slice(0, 4))
    np.testing.assert_array_equal(fields[:, 1:, ..., 0], u[:4].transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(fields[:, 0, ..., 0], a[:4])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ns.h5", "ns.mat"]  # no scratch left


def test_fno_v73_converts_a_frame_of_every_sample_at_a_time(tmp_path, layouts):
    u = np.random.default_rng(0).normal(size=(5, 4, 3, 6)).astype(np.float32)
    a = np.random.default_rng(1).normal(size=(5, 4, 3)).astype(np.float32)
    written, count = convert.convert_file("fno-mat", layouts.fno_v73(tmp_path / "ns.mat", u, a), tmp_path / "ns.h5",
                                          samples=3)
    fields = read_fields(written, slice(0, 3))
    assert count == 3 and fields.shape == (3, 7, 4, 3, 1) and read_info(written).solver["file_layout"].endswith(
        "axes reversed)")
    np.testing.assert_array_equal(fields[:, 1:, ..., 0], u[:3].transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(fields[:, 0, ..., 0], a[:3])
    u[2, 1, 1, 4] = np.inf
    with pytest.raises(convert.DataError, match=r"'u' holds NaN or Inf \(first in sample 2\)"):
        convert.convert_file("fno-mat", layouts.fno_v73(tmp_path / "inf.mat", u, a), tmp_path / "inf.h5")
    assert not (tmp_path / "inf.h5").exists()


def test_pdearena_keeps_each_samples_buoyancy(tmp_path, layouts):
    fields = np.random.default_rng(0).normal(size=(3, 3, 4, 8, 6))
    path = layouts.pdearena(tmp_path / "smoke.h5", fields, [0.2, 0.3, 0.5])
    written, count = convert.convert_file("pdearena-ns", path, tmp_path / "out.h5", samples=2)
    info = read_info(written)
    assert count == 2 and info.pde["buoyancy_y"] == [0.2, 0.3] and info.domain["lengths"] == [32.0, 32.0]
    np.testing.assert_array_equal(read_fields(written, slice(1, 2))[0, ..., 2], fields[2, 1].astype(np.float32))


def test_neuraloperator_converts_to_operator_pairs(capsys, tmp_path):
    x, y = torch.randn(3, 5, 4), torch.randn(3, 5, 4)
    torch.save({"x": x, "y": y}, tmp_path / "darcy.pt")
    code, _, err = run(capsys, "convert", "neuraloperator", tmp_path / "darcy.pt", "--out", tmp_path / "d.h5",
                       "--lengths", "1,2", "--grid", "nodes,cells")
    assert code == 0, err
    info = read_info(tmp_path / "d.h5")
    assert info.kind == "operator" and info.input_channels == ["a"] and info.target_channels == ["u"]
    assert info.domain == {"lengths": [1.0, 2.0], "periodic": [False, False], "grid": ["nodes", "cells"]}
    inputs, targets = read_arrays(tmp_path / "d.h5", slice(0, 3))
    np.testing.assert_array_equal(targets[..., 0], y.numpy())


def one_line(code, err, *needles):
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def test_bad_files_and_options_are_one_line_errors_and_write_nothing(capsys, tmp_path, layouts):
    path = layouts.pdebench_2d(tmp_path / "dr.h5", np.ones((3, 4, 8, 6, 2)), -1, 1)
    data = path.read_bytes()
    (tmp_path / "cut.h5").write_bytes(data[: len(data) // 3])
    out = tmp_path / "out.h5"
    one_line(*run(capsys, "convert", "pdebench-2d", tmp_path / "cut.h5", "--out", out)[::2], "cut.h5")
    one_line(*run(capsys, "convert", "pdebench-cfd", path, "--out", out)[::2], "missing dataset '/Vx'")
    one_line(*run(capsys, "convert", "pdebench-2d", path, "--out", out, "--split", "train")[::2],
             "--split: only used by pdearena-ns")
    one_line(*run(capsys, "convert", "pdebench-2d", path, "--out", out, "--samples", 9)[::2], "--samples 9")
    one_line(*run(capsys, "convert", "pdebench-2d", tmp_path / "none.h5", "--out", out)[::2], "no such file")
    with pytest.raises(ConfigError, match="format the-well: no file given"):  # not an IndexError of the label
        convert.convert_file("the-well", [], out)
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["cut.h5", "dr.h5"]
    assert run(capsys, "convert", "pdebench-2d", path, "--out", out)[0] == 0
    one_line(*run(capsys, "convert", "pdebench-2d", path, "--out", out)[::2], "already exists; add --force")
    assert run(capsys, "convert", "pdebench-2d", path, "--out", out, "--samples", 1, "--force")[0] == 0
    assert read_info(out).n_samples == 1


def test_nan_midway_leaves_nothing(tmp_path, monkeypatch, layouts):
    data = np.zeros((3, 4, 8, 6, 1))
    data[2, 3, 0, 0, 0] = np.nan
    path = layouts.pdebench_2d(tmp_path / "swe.h5", data, -2.5, 2.5)
    monkeypatch.setattr(source, "READ_BYTES", 1)  # a sample per read: two are in the scratch file when it fails
    with pytest.raises(convert.DataError, match=r"'/0002/data' holds NaN or Inf \(first in sample 2\)"):
        convert.convert_file("pdebench-2d", path, tmp_path / "out.h5")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["swe.h5"]


def test_converted_pdebench_cells_coarsen_to_cell_means(tmp_path, layouts):
    data = np.random.default_rng(2).normal(size=(4, 3, 8, 8, 2))
    written, _ = convert.convert_file("pdebench-2d", layouts.pdebench_2d(tmp_path / "dr.h5", data, -1, 1),
                                      tmp_path / "out.h5")
    coarse = load_trajectories(written, "train", n_train=2, n_val=1, n_test=1, resolution=4).fields.numpy()
    means = data[:2].reshape(2, 3, 4, 2, 4, 2, 2).mean(axis=(3, 5))  # each coarse cell: the mean of 2 x 2 cells
    np.testing.assert_allclose(coarse, means, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("content", [b"", b"M", b"these are not the data you are looking for\n"])
def test_tiny_mat_files_are_one_line_errors(capsys, tmp_path, content):
    (tmp_path / "tiny.mat").write_bytes(content)
    one_line(*run(capsys, "convert", "fno-mat", tmp_path / "tiny.mat", "--out", tmp_path / "out.h5")[::2],
             "tiny.mat: ", "MATLAB")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.mat"]


@pytest.mark.slow
def test_fno_times_and_dr_axes_are_the_files(tmp_path, layouts):
    u = np.random.default_rng(0).normal(size=(2, 4, 3, 4)).astype(np.float32)
    path = layouts.fno_v5(tmp_path / "ns.mat", u, u[..., 0], 0.25 * np.arange(1, 5, dtype=np.float32)[None])
    written, _ = convert.convert_file("fno-mat", path, tmp_path / "ns.h5")
    assert read_info(written).times == (0, 0.25, 0.5, 0.75, 1.0)
    data = np.random.default_rng(1).normal(size=(2, 3, 16, 12, 2))  # X = 16, Y = 12: stored (T, 12, 16, 2)
    path = layouts.pdebench_2d(tmp_path / "dr.h5", data, (-1, -2), (1, 2))
    written, _ = convert.convert_file("pdebench-2d", path, tmp_path / "dr_out.h5")
    info = read_info(written)
    assert info.spatial_shape == (16, 12) and info.domain["lengths"] == [2.0, 4.0]
    np.testing.assert_array_equal(read_fields(written, slice(0, 2)), data.astype(np.float32))


def test_arrays_take_their_spatial_axes_from_the_shapes_where_they_say_it(capsys, tmp_path):
    rng = np.random.default_rng(0)
    line = rng.normal(size=(3, 128))  # (N, n): 1D, one channel; no --lengths needed
    np.savez(tmp_path / "line.npz", x=line, y=2 * line)
    code, out, err = run(capsys, "convert", "arrays", tmp_path / "line.npz", "--out", tmp_path / "line.h5")
    assert code == 0, err
    info = read_info(tmp_path / "line.h5")
    assert info.spatial_shape == (128,) and info.domain["lengths"] == [1.0]
    heat = rng.normal(size=(2, 5, 64))  # (N, T, n): 1D trajectories
    np.savez(tmp_path / "heat.npz", u=heat)
    assert run(capsys, "convert", "arrays", tmp_path / "heat.npz", "--kind", "trajectory",
               "--out", tmp_path / "heat.h5")[0] == 0
    assert read_info(tmp_path / "heat.h5").spatial_shape == (64,)
    np.testing.assert_array_equal(read_fields(tmp_path / "heat.h5", slice(0, 2))[..., 0], heat.astype(np.float32))
    cases = {  # the array(s) -> the spatial shape and channels
        "ones": ((rng.normal(size=(3, 128, 1)),), (128,), 1),  # a channel axis of 1
        "cube": ((rng.normal(size=(3, 8, 8, 8)),), (8, 8, 8), 1),
        "cube3": ((rng.normal(size=(3, 8, 8, 8, 3)),), (8, 8, 8), 3),
        "plane": ((rng.normal(size=(3, 16, 12)),), (16, 12), 1),  # the earlier default: a plane
        "pair": ((line, rng.normal(size=(3, 128, 3))), (128,), 3),  # x says 1D: y's last axis holds 3 channels
    }
    for name, (arrays, grid, channels) in cases.items():
        x, y = arrays if len(arrays) == 2 else (arrays[0], arrays[0])
        np.savez(tmp_path / f"{name}.npz", x=x, y=y)
        assert run(capsys, "convert", "arrays", tmp_path / f"{name}.npz", "--out", tmp_path / f"{name}.h5")[0] == 0
        info = read_info(tmp_path / f"{name}.h5")
        assert (info.spatial_shape, len(info.target_channels)) == (grid, channels), name
    # (N, 128, 3): 1D of 3 channels or a 128 x 3 plane; --lengths must say which
    np.savez(tmp_path / "either.npz", x=rng.normal(size=(3, 128, 3)), y=rng.normal(size=(3, 128, 3)))
    one_line(*run(capsys, "convert", "arrays", tmp_path / "either.npz", "--out", tmp_path / "e.h5")[::2],
             "either.npz: 'x' has shape (3, 128, 3): give --lengths, one length per spatial axis (2 values: a grid of "
             "one channel; 1: the last axis holds the channels)")
    assert run(capsys, "convert", "arrays", tmp_path / "either.npz", "--lengths", "2", "--out", tmp_path / "e.h5",
               )[0] == 0
    assert read_info(tmp_path / "e.h5").domain["lengths"] == [2.0] and not (tmp_path / "e.h5.tmp").exists()


def test_each_converter_has_its_own_help_and_channels_are_named(capsys, tmp_path):
    for name, own, others in (("arrays", ("--lengths", "--keys", "--kind", "--channels"), ("--split",)),
                              ("fno-mat", ("--samples", "--channels"), ("--lengths", "--keys", "--split")),
                              ("pdearena-ns", ("--split",), ("--lengths", "--kind"))):
        with pytest.raises(SystemExit):
            main(["convert", name, "--help"])
        text = capsys.readouterr().out
        assert text.startswith(f"usage: opformer convert {name} ") and f"example:\n  opformer convert {name}" in text
        assert all(option in text for option in own) and not any(option in text for option in others), text
    fields = np.random.default_rng(0).normal(size=(2, 4, 8, 8, 2))
    np.savez(tmp_path / "flow.npz", fields=fields)
    code, _, err = run(capsys, "convert", "arrays", tmp_path / "flow.npz", "--kind", "trajectory", "--channels",
                       "vx,vy", "--out", tmp_path / "flow.h5")
    assert code == 0, err
    assert read_info(tmp_path / "flow.h5").input_channels == ["vx", "vy"]  # not fields0, fields1
    np.savez(tmp_path / "xy.npz", x=fields[:, 0, ..., 0], y=fields[:, 1])
    assert run(capsys, "convert", "arrays", tmp_path / "xy.npz", "--channels", "a,u,v",
               "--out", tmp_path / "xy.h5")[0] == 0
    info = read_info(tmp_path / "xy.h5")
    assert (info.input_channels, info.target_channels) == (["a"], ["u", "v"])
    one_line(*run(capsys, "convert", "arrays", tmp_path / "xy.npz", "--channels", "a,u",
                  "--out", tmp_path / "b.h5")[::2],
             "--channels a,u: expected 3 distinct names (1 for x then 2 for y0, y1)")
    assert not (tmp_path / "b.h5").exists()
