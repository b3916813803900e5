"""``opformer convert the-well``: The Well's HDF5 layout, checked against the publisher's own ``WellDataset``."""

from __future__ import annotations

from collections import Counter

import h5py
import numpy as np
import pytest

from opformer.cli import main
from opformer.data import convert
from opformer.data.convert import convert_file
from opformer.data.readers import source, the_well
from opformer.data.readers.the_well import read_the_well
from opformer.data.store import read_block, read_info
from opformer.errors import ConfigError, DataError

CASES = {  # (shape, boundary per axis)
    "2d": ((8, 6), ("periodic", "wall")),
    "3d": ((6, 5, 4), ("periodic", "wall", "open")),
}


def _convert(paths, out, **options):
    path, _ = convert_file("the-well", paths, out, **options)
    return path, read_info(path), read_block(path, "fields", ())


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_equals_well_dataset_field_by_field_and_frame_by_frame(tmp_path, layouts, case):
    """Two train files of other parameters, converted as one file, equal WellDataset's input and constant fields
    (channel names from its metadata) for every trajectory and frame; the boundaries are WellDataset's."""
    the_well = pytest.importorskip("the_well.data")
    shape, boundaries = CASES[case]
    root = tmp_path / "toy_well"
    for i, reynolds in enumerate((100.0, 400.0)):
        layouts.the_well(root / "data" / "train" / f"re{i}.hdf5", shape=shape, boundaries=boundaries, seed=i,
                         params={"Reynolds": reynolds})
    _, info, fields = _convert(sorted((root / "data" / "train").glob("*.hdf5")), tmp_path / "out.h5")
    well = the_well.WellDataset(path=str(root), well_split_name="train", n_steps_input=1, n_steps_output=1)
    meta = well.metadata
    variable = [name for order in range(3) for name in meta.field_names[order]]
    constant = [name for order in range(3) for name in meta.constant_field_names[order]]
    assert info.input_channels == variable + constant
    samples, frames = fields.shape[:2]
    assert (samples, frames, *fields.shape[2:-1]) == (6, 6, *shape) and len(well) == samples * (frames - 1)
    for sample in range(samples):
        for frame in range(frames - 1):
            item = well[sample * (frames - 1) + frame]
            np.testing.assert_array_equal(fields[sample, frame, ..., :len(variable)], item["input_fields"][0].numpy())
            np.testing.assert_array_equal(fields[sample, frame + 1, ..., :len(variable)],
                                          item["output_fields"][0].numpy())
            np.testing.assert_array_equal(fields[sample, frame, ..., len(variable):], item["constant_fields"].numpy())
    codes = {the_well.datasets.BoundaryCondition[kind.upper()].value: kind for kind in ("periodic", "wall", "open")}
    assert info.domain["boundaries"] == [[codes[int(c)] for c in row] for row in item["boundary_conditions"]]
    assert info.domain["grid"] == ["periodic" if b == "periodic" else "cells" for b in boundaries]
    assert info.pde["Reynolds"] == [100.0] * 3 + [400.0] * 3  # a parameter that differs between files: per sample
    assert info.pde["constant_fields"] == constant == ["obstacle"]
    np.testing.assert_allclose(info.times, 0.25 * np.arange(frames))


def test_the_wells_own_dummy_file(tmp_path):
    """The file the_well's utils.dummy_data writes: its fields equal WellDataset's, its constant scalars are
    settings, and its (empty) boundary masks leave both axes open (closed, cells)."""
    the_well = pytest.importorskip("the_well.data")
    from the_well.utils.dummy_data import write_dummy_data

    root = tmp_path / "dummy"
    (root / "data" / "train").mkdir(parents=True)
    np.random.seed(0)
    write_dummy_data(str(root / "data" / "train" / "dummy.hdf5"))
    _, info, fields = _convert([root / "data" / "train" / "dummy.hdf5"], tmp_path / "out.h5")
    well = the_well.WellDataset(path=str(root), well_split_name="train", n_steps_input=2, n_steps_output=8)
    item = well[1]  # trajectory 1: one window of all 10 frames
    np.testing.assert_array_equal(fields[1, :2, ..., :2], item["input_fields"].numpy())
    np.testing.assert_array_equal(fields[1, 2:, ..., :2], item["output_fields"].numpy())
    np.testing.assert_array_equal(fields[1, 5, ..., 2:], item["constant_fields"].numpy())
    assert info.input_channels == ["field_x", "field_y", "constant_field"]
    assert (info.pde["a"], info.pde["b"], len(info.pde["time_varying_scalar"])) == (0.25, 0.75, 10)
    assert info.domain["boundaries"] == [["open", "open"]] * 2 and info.domain["grid"] == ["cells", "cells"]


def test_grid_lengths_origins_and_kinds(tmp_path, layouts):
    """A periodic axis of n points x0 + L i / n is periodic of length L; a wall axis of n cell centres is cells of
    length L, origin at its first cell's face; --grid nodes makes it the span (n - 1) h; periodic on a wall refused."""
    path = layouts.the_well(tmp_path / "a.hdf5", shape=(8, 6))
    src = read_the_well([path])
    assert src.domain["lengths"] == [1.0, 2.0] and src.pde["origin"] == [-0.5, -0.5]
    nodes = read_the_well([path], grid=["periodic", "nodes"])
    assert nodes.domain["grid"] == ["periodic", "nodes"] and nodes.domain["lengths"] == [1.0, pytest.approx(5 / 3)]
    assert nodes.pde["origin"][1] == pytest.approx(-0.5 + 1 / 6)
    with pytest.raises(ConfigError, match="--grid periodic for axis 'y': its boundary is wall"):
        read_the_well([path], grid=["periodic"])


def test_splits_are_stored_train_valid_test_whatever_the_order_given(tmp_path, layouts):
    paths = [layouts.the_well(tmp_path / "d" / "data" / split / "f.hdf5", samples=n, seed=n)
             for split, n in (("test", 1), ("train", 3), ("valid", 2))]
    src = read_the_well(paths)
    assert src.pde["the_well"]["splits"] == {"train": [0, 3], "valid": [3, 5], "test": [5, 6]}
    loose = layouts.the_well(tmp_path / "loose.hdf5", samples=2)
    assert read_the_well([loose, *paths]).pde["the_well"]["splits"]["other"] == [6, 8]
    (fields,) = src.read(0, 6)
    with h5py.File(paths[0]) as f:  # the test file's one trajectory is the last
        np.testing.assert_array_equal(fields[5, ..., 0], f["t0_fields/density"][0])
    # the first 4 converted: the file records the splits of those 4
    _, info, _ = _convert(paths, tmp_path / "four.h5", samples=4)
    assert info.pde["the_well"]["splits"] == {"train": [0, 3], "valid": [3, 4]}


def test_read_in_chunks_across_files_equals_one_read(tmp_path, layouts, monkeypatch):
    """Converted two samples at a time (chunks that straddle the files), the file equals one whole read."""
    paths = [layouts.the_well(tmp_path / f"{i}.hdf5", samples=3, seed=i) for i in range(2)]
    (whole,) = read_the_well(paths).read(0, 6)
    monkeypatch.setattr(source, "READ_BYTES", 2 * whole[0].nbytes)
    calls = []
    original = convert._copy_samples
    monkeypatch.setattr(convert, "_copy_samples", lambda src, arrays, label: (
        calls.append(src.chunk()), original(src, arrays, label)))
    _, _, fields = _convert(paths, tmp_path / "out.h5")
    assert calls == [2]
    np.testing.assert_array_equal(fields, whole)


def test_a_field_no_sample_varies_is_read_once_for_every_chunk(tmp_path, layouts, monkeypatch):
    """Read a trajectory at a time, each file's sample-independent fields (``forcing``) are read once, the
    others once a chunk; the chunks equal one whole read."""
    paths = [layouts.the_well(tmp_path / f"{i}.hdf5", samples=3, seed=i) for i in range(2)]
    (whole,) = read_the_well(paths).read(0, 6)
    src = read_the_well(paths)
    fields = {field.key.lstrip("/"): field.sample_varying for field in the_well.read_file_layout(paths[0]).fields}
    reads = []
    original = the_well.read_slice
    monkeypatch.setattr(the_well, "read_slice", lambda path, data, index: (
        reads.append((path.name, data.name)), original(path, data, index))[1])
    np.testing.assert_array_equal(np.concatenate([src.read(i, i + 1)[0] for i in range(6)]), whole)
    assert not fields["t0_fields/forcing"] and any(fields.values())
    expected = {(path.name, f"/{key}"): 3 if varying else 1 for path in paths for key, varying in fields.items()}
    assert Counter(reads) == expected


def _edit(path, edit):
    with h5py.File(path, "r+") as f:
        edit(f)
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda f: f["dimensions/x"].attrs.__setitem__("time_varying", True),
     "'/dimensions/x' is time-varying"),
    (lambda f: (f["dimensions"].__delitem__("x"), f["dimensions"].create_dataset(
        "x", data=np.stack([np.arange(8.0), np.arange(8.0) + 1, np.arange(8.0)])),
        f["dimensions/x"].attrs.__setitem__("sample_varying", True)),
     "'/dimensions/x' differs between trajectories"),
    (lambda f: f["dimensions/y"].__setitem__(0, -0.6), "'/dimensions/y' is not uniformly spaced"),
    (lambda f: f.attrs.__setitem__("grid_type", "spherical"), "grid_type 'spherical'"),
    (lambda f: f.create_group("t3_fields"), "group '/t3_fields': opformer reads scalar, vector and rank-2"),
    (lambda f: f["t1_fields"].attrs.__setitem__("field_names", ["velocity", "missing"]),
     "missing dataset '/t1_fields/missing'"),
    (lambda f: f["boundary_conditions/x_periodic/mask"].__setitem__(-1, False), "axis 'x' is periodic on one side"),
    (lambda f: f["boundary_conditions/y_wall"].attrs.__setitem__("time_varying", True), "'/boundary_conditions/y_wall' "
     "is time-varying"),
    (lambda f: f["t0_fields/density"].__setitem__((1, 2, 0, 0), np.nan), "'/t0_fields/density' holds NaN or Inf "
     "\\(first in sample 1\\)"),
])
def test_what_opformer_cannot_store_is_one_line_naming_it(tmp_path, layouts, edit, message):
    path = _edit(layouts.the_well(tmp_path / "a.hdf5"), edit)
    with pytest.raises(DataError, match=message) as caught:
        _convert([path], tmp_path / "out.h5")
    assert "\n" not in str(caught.value) and not (tmp_path / "out.h5").exists()


def test_files_of_another_grid_or_fields_are_refused(tmp_path, layouts):
    a = layouts.the_well(tmp_path / "a.hdf5")
    b = layouts.the_well(tmp_path / "b.hdf5", shape=(8, 5))
    c = layouts.the_well(tmp_path / "c.hdf5", first_time=1.0)
    with pytest.raises(DataError, match="b.hdf5: its grid shape differ from a.hdf5's"):
        read_the_well([a, b])
    with pytest.raises(DataError, match="c.hdf5: its frame times differ"):
        read_the_well([a, c])


def test_cli_takes_several_files_and_other_formats_one(tmp_path, layouts, capsys):
    paths = [str(layouts.the_well(tmp_path / f"{i}.hdf5", seed=i)) for i in range(2)]
    assert main(["convert", "the-well", *paths, "--out", str(tmp_path / "out.h5")]) == 0
    out = capsys.readouterr().out
    assert "wrote 6 samples" in out and "The Well's splits: other samples 0..5 (6)" in out
    assert read_info(tmp_path / "out.h5").pde["the_well"]["files"] == ["0.hdf5", "1.hdf5"]
    assert main(["convert", "fno-mat", *paths, "--out", str(tmp_path / "x.h5")]) == 2
    assert "2 files given: format fno-mat reads one file (the-well, geo-fno, mesh read several)" in capsys.readouterr().err
