"""The published data-set layouts that `opformer convert` reads, written as their authors' code writes them (FNO's
.mat in versions 5 and 7.3, PDEBench, PDEArena, The Well), for tests and benchmarks
(``from tests.foreign_formats import write_well_file`` from the repository root)."""

from __future__ import annotations

import h5py
import numpy as np
import scipy.io

MATLAB_HEADER = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 ."


def fno_variables(u, a, t="published"):
    """FNO's ns_2d.py saves u (N, X, Y, T), a (N, X, Y) and t, its float32 record times (1, T) in the file:
    ``t="published"`` 1..T, ``None`` no t, else the given times (kept as given, to write bad ones)."""
    if isinstance(t, str):
        t = np.arange(1, u.shape[-1] + 1, dtype=np.float32)[None]
    return {"u": u, "a": a} | ({} if t is None else {"t": np.asarray(t)})


def write_fno_v5(path, u, a, t="published"):
    """FNO's .mat saved as version 5: u (N, X, Y, T), a (N, X, Y), t (1, T) (see :func:`fno_variables`)."""
    scipy.io.savemat(path, fno_variables(u, a, t))
    return path


def write_fno_v73(path, u, a, t="published"):
    """What MATLAB's save -v7.3 writes: HDF5 behind a 512-byte header, each array's axes reversed (t (1, T) as
    (T, 1))."""
    with h5py.File(path, "w", userblock_size=512) as f:
        for key, value in fno_variables(u, a, t).items():
            f.create_dataset(key, data=value.transpose(tuple(range(value.ndim))[::-1]))
            f[key].attrs["MATLAB_class"] = np.bytes_("single")
    with open(path, "r+b") as f:
        f.write(MATLAB_HEADER)
    return path


def cell_centres(lower, upper, n):
    """Cell centres of n equal cells of [lower, upper], as PDEBench stores them (float32)."""
    return (lower + (np.arange(n) + 0.5) * (upper - lower) / n).astype(np.float32)


def write_pdebench_cfd(path, fields, t_final=1.25):
    """fields (4, N, T, X, Y) as top-level Vx, Vy, density, pressure; t-coordinate with one entry more than T."""
    _, _, frames, nx, ny = fields.shape
    with h5py.File(path, "w") as f:
        for key, values in zip(("Vx", "Vy", "density", "pressure"), fields):
            f[key] = values.astype(np.float32)
        f["t-coordinate"] = np.linspace(0, t_final, frames + 1).astype(np.float32)
        f["x-coordinate"], f["y-coordinate"] = cell_centres(0, 1, nx), cell_centres(0, 1, ny)
    return path


def write_pdebench_2d(path, data, lower, upper, t_final=5.0, y_first=None):
    """data (N, T, X, Y, C) (opformer's axes) as groups 0000.. each with data and grid/x, grid/y, grid/t, the cell
    centres of [lower, upper] (one bound, or an (x, y) pair). data is stored as the publishers' code does
    (``y_first=None``): diffusion-reaction (C = 2) y first, (T, Y, X, C) (sim_diff_react.py reshapes to
    (-1, Ny, Nx)), shallow water (C = 1) (T, X, Y, C) (pyclaw's q[m, i, j] at (x_i, y_j)); ``y_first`` forces
    an order."""
    _, frames, nx, ny, channels = data.shape
    (x0, y0), (x1, y1) = np.broadcast_to(lower, 2), np.broadcast_to(upper, 2)
    y_first = channels == 2 if y_first is None else y_first
    with h5py.File(path, "w") as f:
        for i, sample in enumerate(data):
            group = f.create_group(f"{i:04d}")
            group["data"] = (sample.swapaxes(1, 2) if y_first else sample).astype(np.float32)
            group["grid/x"], group["grid/y"] = cell_centres(x0, x1, nx), cell_centres(y0, y1, ny)
            group["grid/t"] = np.linspace(0, t_final, frames).astype(np.float32)
    return path


def write_pdearena(path, fields, buoyancy, splits=("train",)):
    """As PDEArena's pdedatagen/navier_stokes.py: per split group u, vx, vy (N, T, X, Y) from fields (3, N, T, X, Y),
    t (N, T) = linspace(18, 102, T), dt (N,) = (102 - 18) / T times a sample rate of 4 (disagreeing with t, as
    PDEArena's does), x (N, X) = linspace(0, 32, X), y (N, Y), buo_y (N,)."""
    _, n, frames, nx, ny = fields.shape
    with h5py.File(path, "w") as f:
        for name in splits:
            group = f.create_group(name)
            for key, values in zip(("u", "vx", "vy"), fields):
                group[key] = values
            group["t"] = np.tile(np.linspace(18, 102, frames), (n, 1))
            group["dt"] = np.full(n, (102 - 18) / frames * 4)
            group["x"] = np.tile(np.linspace(0, 32, nx), (n, 1))
            group["y"] = np.tile(np.linspace(0, 32, ny), (n, 1))
            group["buo_y"] = np.asarray(buoyancy, dtype=np.float64)
    return path


def write_well_file(path, samples=3, frames=6, shape=(8, 6), boundaries=("periodic", "wall"), seed=0,
                    params=None, first_time=0.0, fields=None):
    """A file in The Well's layout (its docs/data_format.md, written as its ``utils/dummy_data.py`` does): on the
    grid ``shape`` (axes x, y[, z]), of the given boundary per axis (periodic | wall | open): t0 ``density``
    (per sample and frame), ``tracer`` (varying along the first axis only, size 1 along the others),
    ``forcing`` (the same in every sample), ``obstacle`` (constant in time, per sample); t1 ``velocity``; t2
    ``stress``; scalars ``Reynolds`` (a simulation parameter, default 100) and ``energy`` (per frame).
    Coordinates: a periodic axis ``x0 + L i / n``, the others cell centres; times ``first_time + 0.25 t``.
    ``fields`` ({name: tensor order}) writes those fields instead, each per sample and frame. Random values from
    ``seed``."""
    rng = np.random.default_rng(seed)
    params = {"Reynolds": 100.0} if params is None else params
    axes = ["x", "y", "z"][:len(shape)]
    ndim = len(shape)
    lengths = [1.0, 2.0, 0.5][:ndim]
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        f.attrs.update({"dataset_name": "toy_well", "grid_type": "cartesian", "n_spatial_dims": ndim,
                        "n_trajectories": samples, "simulation_parameters": list(params), **params})
        dims = f.create_group("dimensions")
        dims.attrs["spatial_dims"] = axes
        dims["time"] = (first_time + 0.25 * np.arange(frames)).astype(np.float32)
        dims["time"].attrs["sample_varying"] = False
        bcs = f.create_group("boundary_conditions")
        for axis, n, length, kind in zip(axes, shape, lengths, boundaries):
            offset = 0.0 if kind == "periodic" else 0.5
            dims[axis] = (-0.5 + (np.arange(n) + offset) * length / n).astype(np.float32)
            dims[axis].attrs.update({"sample_varying": False, "time_varying": False})
            bc = bcs.create_group(f"{axis}_{kind}")
            bc.attrs.update({"associated_dims": [axis], "associated_fields": [], "bc_type": kind.upper(),
                             "sample_varying": False, "time_varying": False})
            mask = np.zeros(n, dtype=bool)
            mask[[0, -1]] = True
            bc["mask"] = mask

        def field(group, name, data, sample=True, time=True, dims=None):
            group[name] = data.astype(np.float32)
            group[name].attrs.update({"dim_varying": [True] * ndim if dims is None else dims,
                                      "sample_varying": sample, "time_varying": time})

        t0, t1, t2 = (f.create_group(f"t{i}_fields") for i in range(3))
        if fields is None:
            t0.attrs["field_names"] = ["density", "tracer", "forcing", "obstacle"]
            field(t0, "density", rng.normal(size=(samples, frames, *shape)))
            field(t0, "tracer", rng.normal(size=(samples, frames, shape[0], *[1] * (ndim - 1))),
                  dims=[True] + [False] * (ndim - 1))  # size-1 axes where it does not vary, as WellDataset tiles
            field(t0, "forcing", rng.normal(size=(frames, *shape)), sample=False)
            field(t0, "obstacle", rng.normal(size=(samples, *shape)), time=False)
            t1.attrs["field_names"] = ["velocity"]
            field(t1, "velocity", rng.normal(size=(samples, frames, *shape, ndim)))
            t2.attrs["field_names"] = ["stress"]
            field(t2, "stress", rng.normal(size=(samples, frames, *shape, ndim, ndim)))
        else:
            for order, group in enumerate((t0, t1, t2)):
                group.attrs["field_names"] = [name for name, rank in fields.items() if rank == order]
                for name in group.attrs["field_names"]:
                    field(group, name, rng.normal(size=(samples, frames, *shape, *(ndim,) * order)))
        scalars = f.create_group("scalars")
        scalars.attrs["field_names"] = [*params, "energy"]
        for name, value in params.items():
            scalars[name] = np.array(value)
            scalars[name].attrs.update({"sample_varying": False, "time_varying": False})
        scalars["energy"] = rng.normal(size=frames)
        scalars["energy"].attrs.update({"sample_varying": False, "time_varying": True})
    return path


def write_geo_fno_elasticity(folder, xy, sigma, rr=None):
    """Geo-FNO's elasticity files from xy (N, points, 2), sigma (N, points), rr (N, 42), in the publisher's axis
    orders: Random_UnitCell_XY_10.npy (points, 2, N), _sigma_10.npy (points, N), _rr_10.npy (42, N) (exp_elas.py
    permutes them back: XY permute(2, 0, 1), sigma permute(1, 0)); returns the paths."""
    arrays = {"XY": xy.transpose(1, 2, 0), "sigma": sigma.T} | ({} if rr is None else {"rr": rr.T})
    paths = []
    for name, array in arrays.items():
        paths.append(folder / f"Random_UnitCell_{name}_10.npy")
        np.save(paths[-1], np.ascontiguousarray(array, dtype=np.float32))
    return paths


def write_geo_fno_structured(folder, prefix, x, y, q):
    """Geo-FNO's structured meshes: PREFIX X.npy and Y.npy (N, I, J), Q.npy (N, C, I, J) (NACA_Cylinder_ for the
    airfoil, Pipe_ for the pipe); returns the paths."""
    paths = []
    for name, array in (("X", x), ("Y", y), ("Q", q)):
        paths.append(folder / f"{prefix}{name}.npy")
        np.save(paths[-1], np.asarray(array, dtype=np.float32))
    return paths


def write_geo_fno_plasticity(path, die, output):
    """Geo-FNO's plasticity .mat (version 5, read by scipy.io.loadmat in exp_plas.py): input (N, I), the die
    profile, and output (N, I, J, T, 4): each point's position (0, 1) and displacement (2, 3) per time."""
    scipy.io.savemat(path, {"input": np.asarray(die, np.float32), "output": np.asarray(output, np.float32)})
    return path
