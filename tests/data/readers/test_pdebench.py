"""PDEBench 2D files (CFD; diffusion-reaction and shallow water), written in the published layouts."""

import h5py
import numpy as np
import pytest

from opformer.data.readers.pdebench import read_pdebench_2d, read_pdebench_cfd
from opformer.errors import DataError

N, T, X, Y = 3, 4, 8, 6


def random(*shape):
    return np.random.default_rng(0).normal(size=shape)


def test_cfd_channels_and_periodic_grid(tmp_path, layouts):
    fields = random(4, N, T, X, Y)
    source = read_pdebench_cfd(layouts.pdebench_cfd(tmp_path / "2D_CFD_Rand_M0.1_Eta0.1_Zeta0.1_periodic_128_Train.hdf5",
                                                    fields))
    (out,) = source.read(0, N)
    assert out.shape == (N, T, X, Y, 4) and source.samples == N
    np.testing.assert_array_equal(out, np.moveaxis(fields, 0, -1).astype(np.float32))  # (vx, vy, density, p)
    assert source.channels == (["vx", "vy", "density", "pressure"],)
    assert source.domain == {"lengths": [1.0, 1.0], "periodic": [True, True], "grid": ["periodic", "periodic"]}
    np.testing.assert_allclose(source.times, np.linspace(0, 1.25, T + 1)[:T], rtol=1e-6)
    np.testing.assert_allclose(source.pde["origin"], [0, 0], atol=1e-6)


@pytest.mark.parametrize("channels, lower, upper, names, name", [
    (2, -1.0, 1.0, ["u", "v"], "diffusion_reaction_2d"),
    (1, -2.5, 2.5, ["h"], "shallow_water_2d_radial_dam_break")])
def test_dr_and_swe_land_on_cells_of_the_right_length(tmp_path, layouts, channels, lower, upper, names, name):
    data = random(N, T, X, Y, channels)
    source = read_pdebench_2d(layouts.pdebench_2d(tmp_path / "2d.h5", data, lower, upper))
    (out,) = source.read(0, N)
    np.testing.assert_array_equal(out, data.astype(np.float32))  # group n's data is sample n
    (tail,) = source.read(1, N)
    np.testing.assert_array_equal(tail, out[1:])
    assert source.channels == (names,) and source.pde["name"] == name
    assert source.domain["grid"] == ["cells", "cells"] and source.domain["periodic"] == [False, False]
    assert source.domain["lengths"] == [upper - lower] * 2  # n cells of the coordinates' spacing
    np.testing.assert_allclose(source.pde["origin"], [lower, lower], atol=1e-6)
    np.testing.assert_allclose(source.times, np.linspace(0, 5, T), rtol=1e-6)


@pytest.mark.parametrize("nx, ny", [(8, 6), (6, 6)])  # non-square; square with x and y lengths that differ
@pytest.mark.parametrize("channels, stored", [(2, "(T, Y, X, C)"), (1, "(T, X, Y, C)")])  # DR, SWE
def test_dr_is_stored_y_first_swe_x_first(tmp_path, layouts, nx, ny, channels, stored):
    n, t, i, j, c = np.meshgrid(*(np.arange(k) for k in (N, T, nx, ny, channels)), indexing="ij")
    data = 1000 * n + 100 * t + 10 * i + j + 0.5 * c  # every value says where it belongs
    path = layouts.pdebench_2d(tmp_path / "2d.h5", data, (-1.0, -1.5), (1.0, 1.5))  # lengths 2 (x), 3 (y)
    with h5py.File(path, "r") as f:  # as the publishers' code writes it
        assert f["0001/data"].shape == ((T, ny, nx, channels) if stored == "(T, Y, X, C)" else (T, nx, ny, channels))
    source = read_pdebench_2d(path)
    (out,) = source.read(0, N)
    assert out.shape == (N, T, nx, ny, channels) and source.shapes == ((T, nx, ny, channels),)
    np.testing.assert_array_equal(out, data.astype(np.float32))  # (x, y) whatever the file's order
    assert out[1, 2, 5, 3, channels - 1] == 1000 + 200 + 50 + 3 + 0.5 * (channels - 1)  # x = 5, y = 3
    (tail,) = source.read(2, N)
    np.testing.assert_array_equal(tail, out[2:])
    assert source.domain["lengths"] == [2.0, 3.0]
    np.testing.assert_allclose(source.pde["origin"], [-1.0, -1.5], atol=1e-6)
    assert source.solver["file_layout"].startswith(f"data {stored}")


@pytest.mark.parametrize("channels, y_first, axes", [(2, False, "(4, 8, 6, 2)"), (1, True, "(4, 6, 8, 1)")])
def test_data_in_the_other_order_is_named(tmp_path, layouts, channels, y_first, axes):
    path = layouts.pdebench_2d(tmp_path / "2d.h5", random(N, T, X, Y, channels), -1, 1, y_first=y_first)
    with pytest.raises(DataError, match=rf"2d.h5: '/0000/grid/x' holds 8 coordinates, but the x axis of "
                                        rf"'/0000/data' \{axes[:-1]}\) has 6 points"):
        read_pdebench_2d(path)


def test_cfd_faults_name_the_key(tmp_path, layouts):
    path = layouts.pdebench_cfd(tmp_path / "cfd.hdf5", random(4, N, T, X, Y))
    with h5py.File(path, "a") as f:
        del f["pressure"]
    with pytest.raises(DataError, match="missing dataset '/pressure'"):
        read_pdebench_cfd(path)
    path = layouts.pdebench_cfd(tmp_path / "cfd.hdf5", random(4, N, T, X, Y))
    with h5py.File(path, "a") as f:
        del f["x-coordinate"]
        f["x-coordinate"] = np.array([0, 0.1, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], dtype=np.float32)
    with pytest.raises(DataError, match="'x-coordinate' is not uniformly spaced"):
        read_pdebench_cfd(path)
    fields = np.zeros((4, N, T, X, Y))
    fields[2, 2, 1, 0, 0] = np.inf
    with pytest.raises(DataError, match=r"'density' holds NaN or Inf \(first in sample 2\)"):
        read_pdebench_cfd(layouts.pdebench_cfd(tmp_path / "cfd.hdf5", fields)).read(0, N)


def test_2d_faults_name_the_group(tmp_path, layouts):
    path = layouts.pdebench_2d(tmp_path / "2d.h5", random(N, T, X, Y, 2), -1, 1)
    with h5py.File(path, "a") as f:
        del f["0001/data"]
        f["0001/data"] = np.zeros((T, X, Y - 1, 2), dtype=np.float32)
    with pytest.raises(DataError, match="'/0001/data' has shape"):
        read_pdebench_2d(path).read(0, N)
    path = layouts.pdebench_2d(tmp_path / "2d.h5", random(N, T, X, Y, 2), -1, 1)
    with h5py.File(path, "a") as f:
        del f["0002/grid/y"]
        f["0002/grid/y"] = np.linspace(-1, 1, Y + 1)
    with pytest.raises(DataError, match="'/0002/grid/y' differs from '/0000/grid/y'"):
        read_pdebench_2d(path).read(0, N)
    with h5py.File(tmp_path / "empty.h5", "w") as f:
        f["data"] = np.zeros(3)
    with pytest.raises(DataError, match="no sample groups"):
        read_pdebench_2d(tmp_path / "empty.h5")
