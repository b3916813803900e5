"""Shared fixtures: tiny synthetic data files so tests never wait for a solver."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
import scipy.io
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from opformer.data.store import write_operator_dataset, write_trajectory_dataset
from opformer.models import registry


@pytest.fixture(autouse=True)
def _torch_threads():
    """Each test starts with the process's torch thread count: a run with ``train.num_threads`` sets it for the
    process, and a later test comparing an in-process run with a subprocess would then sum in another order."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def write_toy_burgers(path, samples: int = 24, n: int = 64, seed: int = 0):
    """A smooth periodic toy operator u0 -> u (a shift and damping of a few Fourier modes), stored like Burgers."""
    rng = np.random.default_rng(seed)
    x = np.arange(n) / n
    coeff = rng.normal(size=(samples, 3, 2))
    k = np.arange(1, 4)[None, :, None]
    u0 = (coeff[..., 0:1] * np.sin(2 * np.pi * k * x) + coeff[..., 1:2] * np.cos(2 * np.pi * k * x)).sum(1)
    u1 = (coeff[..., 0:1] * np.sin(2 * np.pi * k * (x - 0.1)) / k
          + coeff[..., 1:2] * np.cos(2 * np.pi * k * (x - 0.1)) / k).sum(1)
    return write_operator_dataset(
        path, u0[..., None], u1[..., None],
        pde={"name": "toy", "length": 1.0}, solver={"name": "exact"},
        domain={"lengths": [1.0], "periodic": [True]}, seed=seed,
        input_channels=["u0"], target_channels=["u"])


@pytest.fixture
def toy_file(tmp_path):
    """Path of a small toy 1D operator data set (24 samples at n = 64)."""
    return write_toy_burgers(tmp_path / "toy.h5")


@pytest.fixture
def toy_writer():
    """The toy data writer itself, for tests that need several files or sizes."""
    return write_toy_burgers


def tiny_run_config(data_path, epochs: int = 3, **model) -> dict:
    """A run config of a tiny Galerkin Transformer on the toy data (trained at n = 32 of the stored 64)."""
    return {
        "seed": 0,
        "model": {"name": "galerkin_transformer_1d", "d_model": 16, "n_layers": 1, "dim_ff": 16,
                  "decoder_width": 8, "decoder_modes": 4, "decoder_head_width": 8, **model},
        "data": {"path": str(data_path), "resolution": 32, "n_train": 16, "n_val": 4, "n_test": 4},
        "loss": {"name": "h1_relative", "gamma": 0.1},
        "optim": {"lr": 3e-3},
        "schedule": {"name": "onecycle", "pct_start": 0.3, "div_factor": 10, "final_div_factor": 10},
        "train": {"epochs": epochs, "batch_size": 4, "num_threads": 1},
    }


@pytest.fixture
def tiny_config():
    """Factory of tiny run configs (see :func:`tiny_run_config`)."""
    return tiny_run_config


def write_toy_darcy(path, samples: int = 12, n: int = 17, seed: int = 0, square: bool = True):
    """A smooth 2D toy operator a -> u on the closed unit square (u = 0 on the boundary), stored like Darcy."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 1, n)
    y = x if square else np.linspace(0, 1, n - 4)
    X, Y = np.meshgrid(x, y, indexing="ij")
    c = rng.uniform(1, 2, size=(samples, 3, 1, 1))
    a = c[:, 0] + c[:, 1] * np.cos(np.pi * X) * np.cos(np.pi * Y)
    u = X * (1 - X) * Y * (1 - Y) * (c[:, 2] + X) / c[:, 0]
    return write_operator_dataset(
        path, a[..., None], u[..., None], pde={"name": "toy darcy"}, solver={"name": "exact"},
        domain={"lengths": [1.0, 1.0], "periodic": [False, False]}, seed=seed,
        input_channels=["a"], target_channels=["u"])


@pytest.fixture
def darcy_file(tmp_path):
    """Path of a small toy 2D Darcy-like data set (12 samples on a 17 x 17 closed grid)."""
    return write_toy_darcy(tmp_path / "toy_darcy.h5")


def tiny_darcy_config(data_path, epochs: int = 2, inverse: bool = False) -> dict:
    """A run config of a tiny 2D Galerkin Transformer on the toy Darcy data (trained at n = 9 of 17)."""
    model = {"name": "galerkin_transformer_2d", "coarse_size": 5, "d_model": 12, "n_layers": 1, "n_head": 2,
             "dim_ff": 16, "decoder_width": 8, "decoder_modes": 3, "decoder_head_width": 8}
    data = {"path": str(data_path), "resolution": 9, "n_train": 8, "n_val": 2, "n_test": 2,
            "normalize_input": "pointwise", "normalize_target": "pointwise"}
    loss = {"name": "h1_relative", "gamma": 0.5, "weight_by_input": True}
    if inverse:
        model.update(decoder="pointwise", decoder_layers=2)
        data.update(direction="inverse", target_resolution=5, input_noise=0.01)
        loss = {"name": "relative_l2"}
    else:
        data["boundary"] = "dirichlet"
    return {"seed": 0, "model": model, "data": data, "loss": loss, "optim": {"lr": 3e-3},
            "schedule": {"name": "onecycle", "pct_start": 0.3, "div_factor": 10, "final_div_factor": 10},
            "train": {"epochs": epochs, "batch_size": 4, "num_threads": 1}}


@pytest.fixture
def darcy_config():
    """Factory of tiny 2D run configs (see :func:`tiny_darcy_config`)."""
    return tiny_darcy_config


@pytest.fixture
def darcy_writer():
    """The toy Darcy writer itself, for tests that need other grids (``square=False``)."""
    return write_toy_darcy


def write_toy_heat(path, samples: int = 10, n: int = 16, frames: int = 12, dt: float = 0.05, seed: int = 0):
    """Exact solutions of the 2D heat equation u_t = nu lap u on the periodic unit square (a trajectory data
    set): a few Fourier modes decaying at exp(-nu |2 pi k|^2 t)."""
    from opformer.data.store import write_trajectory_dataset

    rng = np.random.default_rng(seed)
    x = np.arange(n) / n
    X, Y = np.meshgrid(x, x, indexing="ij")
    t = dt * np.arange(frames)
    nu = 0.02
    fields = np.zeros((samples, frames, n, n, 1))
    for kx, ky in ((1, 0), (0, 1), (1, 1), (2, 1)):
        rate = nu * (2 * np.pi) ** 2 * (kx ** 2 + ky ** 2)
        amp = rng.normal(size=(samples, 1, 1, 1))
        phase = rng.uniform(0, 2 * np.pi, size=(samples, 1, 1, 1))
        fields[..., 0] += amp * np.exp(-rate * t)[None, :, None, None] * np.sin(
            2 * np.pi * (kx * X + ky * Y)[None, None] + phase)
    return write_trajectory_dataset(path, fields, t, pde={"name": "heat", "nu": nu}, solver={"name": "exact"},
                                    domain={"lengths": [1.0, 1.0], "periodic": [True, True]}, seed=seed,
                                    channels=["u"])


@pytest.fixture
def heat_file(tmp_path):
    """Path of a toy trajectory data set (10 trajectories of 12 frames on a 16 x 16 periodic grid)."""
    return write_toy_heat(tmp_path / "heat.h5")


class TimeMix(nn.Module):
    """A tiny time-dependent model: each output frame a learned combination of the input frames."""

    ndim = 2

    def __init__(self, t_in: int = 3, t_out: int = 1) -> None:
        super().__init__()
        self.mix = nn.Linear(t_in, t_out)

    def forward(self, x):
        return self.mix(x.transpose(-1, -2)).transpose(-1, -2)


@pytest.fixture
def time_mix(monkeypatch):
    """Register :class:`TimeMix` as the model ``time_mix`` for one test."""
    monkeypatch.setitem(registry.MODELS, "time_mix", registry.ModelEntry(TimeMix))
    return TimeMix


class LargestOutput(TorchDispatchMode):
    """Records the largest number of elements of any tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.fixture
def largest_output():
    """The recorder of the largest tensor any op returns (a dispatch mode: ``with largest_output() as m``)."""
    return LargestOutput


@contextmanager
def _edit_h5(path):
    """Open a data file for editing with h5py, then drop its checksums (an edited file would read as corrupt): the
    whole-file one in the user block and the attributes' one."""
    from opformer.data.store import ATTRS_DIGEST, CHECKSUM_MAGIC

    with h5py.File(path, "a") as f:
        yield f
        if ATTRS_DIGEST in f.attrs:
            del f.attrs[ATTRS_DIGEST]
    with open(path, "r+b") as raw:
        raw.write(bytes(len(CHECKSUM_MAGIC)))


@pytest.fixture
def edit_h5():
    """``with edit_h5(path) as f:`` edits a data file as another program would (its checksums are dropped)."""
    return _edit_h5


class _Interrupt(Exception):
    """Raised by the progress callback of an interrupted generation."""


def _interrupted_then_resumed(pde: str, out, samples: int, **flags) -> list[int]:
    """Generate ``pde`` into ``out``, interrupted after its first chunk, then again with the same arguments; returns
    the second run's progress counts (the chunks it solved, or took from the first run)."""
    from opformer.data.generate import generate_file

    def stop(count: int) -> None:
        raise _Interrupt

    with pytest.raises(_Interrupt):
        generate_file(pde, out, samples, progress=stop, **flags)
    counts: list[int] = []
    generate_file(pde, out, samples, progress=counts.append, **flags)
    return counts


@pytest.fixture
def resume_after_interrupt():
    """``resume_after_interrupt(pde, out, samples, chunk=..., **flags)``: an interrupted, then resumed generation."""
    return _interrupted_then_resumed


# The published data-set layouts that `opformer convert` reads, written as their authors' code writes them.
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


@pytest.fixture
def layouts():
    """The writers of the published layouts: ``layouts.fno_v5(path, u, a)``, ``layouts.pdearena(...)``, ..."""
    return SimpleNamespace(fno_v5=write_fno_v5, fno_v73=write_fno_v73, pdebench_cfd=write_pdebench_cfd,
                           pdebench_2d=write_pdebench_2d, pdearena=write_pdearena, the_well=write_well_file)


def write_toy_member(path, samples=6, frames=7, n=16, channels=1, grid="periodic", ndim=2, seed=0, kind="trajectory"):
    """A toy mixture member: trajectories of value ``100 i + 10 t + c`` (sample i, frame t, channel c) plus small
    noise on a grid of the kind (with ``kind="operator"``: pairs, which a mixture refuses)."""
    rng = np.random.default_rng(seed)
    shape = (samples, frames) + (n,) * ndim + (channels,)
    fields = rng.normal(size=shape) * 0.01
    fields += (100 * np.arange(samples)[:, None] + 10 * np.arange(frames)[None, :]).reshape(
        samples, frames, *[1] * (ndim + 1)) + np.arange(channels)
    domain = {"lengths": [1.0] * ndim, "periodic": [grid == "periodic"] * ndim, "grid": [grid] * ndim}
    if kind != "trajectory":
        return write_operator_dataset(path, fields[:, 0], fields[:, 1], pde={}, solver={}, domain=domain, seed=0,
                                      input_channels=[f"c{i}" for i in range(channels)],
                                      target_channels=[f"c{i}" for i in range(channels)])
    return write_trajectory_dataset(path, fields, np.arange(frames) * 0.1, pde={"name": "toy"}, solver={},
                                    domain=domain, seed=seed, channels=[f"c{i}" for i in range(channels)])


@pytest.fixture
def member_writer():
    """The toy mixture-member writer itself, for tests that need other grids, channels or frames."""
    return write_toy_member


@pytest.fixture
def toy_mixture(tmp_path):
    """Two mixture members: a.h5, 1 channel on a periodic 16^2 grid, and b.h5, 2 channels on 32^2 cells (6
    trajectories of 7 frames each)."""
    return [write_toy_member(tmp_path / "a.h5"),
            write_toy_member(tmp_path / "b.h5", n=32, channels=2, grid="cells", seed=1)]


def tiny_mixture_config(paths, epochs: int = 2, **rollout) -> dict:
    """A run config of a tiny FNO2d-time on the two members of :func:`toy_mixture` (weights 1 and 3, 10 windows
    per epoch in batches of 4, 4, 2); ``rollout`` keys override the rollout section."""
    return {"seed": 0,
            "model": {"name": "fno2d_time", "in_channels": 2, "width": 4, "modes": 2, "n_layers": 1,
                      "projection_width": 8},
            "data": {"mixture": [{"path": str(paths[0]), "weight": 1}, {"path": str(paths[1]), "weight": 3}],
                     "resolution": 16, "windows_per_epoch": 10, "n_train": 4, "n_val": 1, "n_test": 1},
            "optim": {"lr": 1e-3}, "schedule": {"name": "constant"},
            "train": {"epochs": epochs, "batch_size": 4, "num_threads": 1},
            "rollout": {"t_in": 3, "t_out": 1, **rollout}}


@pytest.fixture
def mixture_config():
    """Factory of tiny mixture run configs (see :func:`tiny_mixture_config`)."""
    return tiny_mixture_config
