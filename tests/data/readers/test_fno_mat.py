"""FNO .mat files, v5 (scipy) and v7.3 (HDF5 with reversed axes), written in the published layouts."""

import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.io

from opformer.data.readers.fno_mat import read_fno_mat
from opformer.errors import DataError

N, X, Y, T = 3, 6, 4, 5  # X != Y: a swapped pair of axes changes the shape


def fno_arrays(seed: int = 0):
    """u (N, X, Y, T) random, a (N, X, Y) = the x index (a field that varies along x only) + 100 * sample."""
    u = np.random.default_rng(seed).normal(size=(N, X, Y, T)).astype(np.float32)
    a = (np.arange(X)[None, :, None] + 100 * np.arange(N)[:, None, None] + 0 * np.arange(Y)).astype(np.float32)
    return u, a


@pytest.mark.parametrize("version", ["fno_v5", "fno_v73"])
def test_frames_land_at_their_sample_time_and_place(tmp_path, layouts, version):
    u, a = fno_arrays()
    source = read_fno_mat(getattr(layouts, version)(tmp_path / "ns.mat", u, a))
    (fields,) = source.read(0, N)
    assert fields.shape == (N, T + 1, X, Y, 1) and source.shapes == ((T + 1, X, Y, 1),)
    np.testing.assert_array_equal(fields[:, 1:, ..., 0], u.transpose(0, 3, 1, 2))  # u[n, i, j, t] at frame t + 1
    np.testing.assert_array_equal(fields[:, 0, ..., 0], a)
    np.testing.assert_array_equal(fields[1, 0, :, 2, 0], 100 + np.arange(X))  # x stays the first spatial axis
    np.testing.assert_array_equal(source.times, np.arange(T + 1))
    assert source.domain == {"lengths": [1.0, 1.0], "periodic": [True, True], "grid": ["periodic", "periodic"]}
    assert source.channels == (["vorticity"],)
    (part,) = source.read(1, 3)
    np.testing.assert_array_equal(part, fields[1:3])


@pytest.mark.slow
@pytest.mark.parametrize("version", ["fno_v5", "fno_v73"])
def test_a_misshapen_array_or_nan_is_named(tmp_path, layouts, version):
    u, a = fno_arrays()
    with pytest.raises(DataError, match="'u'.*'a'.*do not match"):
        read_fno_mat(getattr(layouts, version)(tmp_path / "bad.mat", u, a[:, :, :2]))
    u[1, 2, 3, 4] = np.nan
    with pytest.raises(DataError, match=r"'u' holds NaN or Inf \(first in sample 1\)"):
        read_fno_mat(getattr(layouts, version)(tmp_path / "nan.mat", u, a)).read(0, N)


@pytest.mark.slow
def test_missing_key_and_truncated_files(tmp_path, layouts):
    scipy.io.savemat(tmp_path / "no_a.mat", {"u": fno_arrays()[0]})
    with pytest.raises(DataError, match="missing variable 'a'"):
        read_fno_mat(tmp_path / "no_a.mat")
    with h5py.File(tmp_path / "no_u.mat", "w") as f:
        f["a"] = np.zeros((Y, X, N))
    with pytest.raises(DataError, match="missing dataset '/u'"):
        read_fno_mat(tmp_path / "no_u.mat")
    for writer in (layouts.fno_v5, layouts.fno_v73):
        path = writer(tmp_path / "whole.mat", *fno_arrays())
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        with pytest.raises(DataError, match="whole.mat: not a readable"):
            read_fno_mat(path).read(0, N)


@pytest.mark.slow
@pytest.mark.parametrize("content", [b"", b"M", b"these are not the data you are looking for\n",
                                     b"MATLAB 5.0 MAT-file" + b" " * 100])
def test_tiny_files_are_named_not_raised_by_scipy(tmp_path, content):
    path = tmp_path / "tiny.mat"
    path.write_bytes(content)
    with pytest.raises(DataError, match="tiny.mat: (empty file|not a readable MATLAB file)"):
        read_fno_mat(path)


@pytest.mark.slow
@pytest.mark.parametrize("version", ["fno_v5", "fno_v73"])
@pytest.mark.parametrize("t, times", [
    ("published", [0, 1, 2, 3, 4, 5]),
    (None, [0, 1, 2, 3, 4, 5]),  # no t: FNO's published 1..T
    (0.25 * np.arange(1, T + 1)[None], [0, 0.25, 0.5, 0.75, 1, 1.25]),  # another record_steps
    ((0.1 * np.arange(1, T + 1)).astype(np.float32), [0, 0.1, 0.2, 0.3, 0.4, 0.5])])  # float32 (T,): tidied
def test_frame_times_come_from_t(tmp_path, layouts, version, t, times):
    u, a = fno_arrays()
    source = read_fno_mat(getattr(layouts, version)(tmp_path / "ns.mat", u, a, t))
    np.testing.assert_array_equal(source.times, times)
    assert source.pde["times"] == times
    (fields,) = source.read(0, N)
    np.testing.assert_array_equal(fields[:, 1:, ..., 0], u.transpose(0, 3, 1, 2))  # the frames themselves unchanged


@pytest.mark.slow
@pytest.mark.parametrize("version", ["fno_v5", "fno_v73"])
@pytest.mark.parametrize("t, message", [
    ([[1, 2, 4, 5, 6]], r"'t' is not uniform: the frames 0 \('a'\), 1, 2, 4, 5, 6 \('t'\)"),
    ([[2, 3, 4, 5, 6]], r"'t' is not uniform"),  # a at t = 0, then a gap of two steps
    ([[5, 4, 3, 2, 1]], r"'t' is not uniform"),
    ([[1, 2, 3, np.nan, 5]], r"'t' is not uniform"),
    ([[1, 2, 3, 4]], r"'t' has shape \((1, 4|4, 1)\), expected one time per frame of 'u' \(5"),
    (np.ones((2, 5)), r"'t' has shape"),
])
def test_a_bad_t_is_named(tmp_path, layouts, version, t, message):
    u, a = fno_arrays()
    with pytest.raises(DataError, match=message):
        read_fno_mat(getattr(layouts, version)(tmp_path / "ns.mat", u, a, np.asarray(t, dtype=np.float64)))


DAMAGED = Path(__file__).resolve().parents[2] / "fixtures" / "mat" / "damaged_v5.mat"


@pytest.mark.slow
def test_a_file_that_crashes_scipy_is_one_line(tmp_path):
    """tests/fixtures/mat/damaged_v5.mat: a 608-byte v5 file (u, a, t of 2 samples) with one byte changed (0 -> 1
    at offset 185, a dimension tag of 'u'), on which scipy 1.17's loadmat dies with SIGSEGV. Read in a child
    process, it is a one-line DataError naming the file, and the command exits 2 without writing."""
    import scipy

    if scipy.__version__.startswith("1.17"):  # the hazard itself: loadmat in a process of its own dies of a signal
        code = f"import scipy.io; scipy.io.loadmat({str(DAMAGED)!r}, variable_names=('a', 'u', 't'))"
        assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode < 0
    with pytest.raises(DataError, match=r"damaged_v5\.mat: ") as caught:
        read_fno_mat(DAMAGED)
    assert "\n" not in str(caught.value)
    if scipy.__version__.startswith("1.17"):
        assert "scipy's MATLAB reader crashed on it (SIGSEGV, 608 bytes)" in str(caught.value)
    from opformer.cli import main

    assert main(["convert", "fno-mat", str(DAMAGED), "--out", str(tmp_path / "out.h5")]) == 2
    assert not (tmp_path / "out.h5").exists()


@pytest.mark.slow
def test_the_child_reads_exactly_what_scipy_reads(tmp_path, layouts):
    """A whole v5 file through the child process: the arrays scipy's loadmat returns, bit for bit; a variable that
    is not a numeric array is refused in one line."""
    from opformer.data.readers.matv5 import load_v5

    u, a = fno_arrays(3)
    path = layouts.fno_v5(tmp_path / "ns.mat", u, a)
    direct = scipy.io.loadmat(path, variable_names=("a", "u", "t"))
    read = load_v5(path, ("a", "u", "t", "missing"), "u and a")
    assert sorted(read) == ["a", "t", "u"]
    for key in read:
        assert read[key].dtype == direct[key].dtype
        np.testing.assert_array_equal(read[key], direct[key])
    scipy.io.savemat(tmp_path / "cell.mat", {"a": np.array(["text"], dtype=object)})
    with pytest.raises(DataError, match=r"cell\.mat: variable 'a' is not a numeric array"):
        load_v5(tmp_path / "cell.mat", ("a",), "a")
