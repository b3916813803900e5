"""Toy data sets, run configs and a toy model for tests and benchmarks: tiny files with known answers, so that
nothing waits for a solver (``from tests.toy_data import write_toy_darcy`` from the repository root)."""

from __future__ import annotations

import numpy as np
from torch import nn

from opformer.data.store import write_operator_dataset, write_trajectory_dataset


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


def write_toy_heat(path, samples: int = 10, n: int = 16, frames: int = 12, dt: float = 0.05, seed: int = 0):
    """Exact solutions of the 2D heat equation u_t = nu lap u on the periodic unit square (a trajectory data
    set): a few Fourier modes decaying at exp(-nu |2 pi k|^2 t)."""
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


class TimeMix(nn.Module):
    """A tiny time-dependent model: each output frame a learned combination of the input frames."""

    ndim = 2

    def __init__(self, t_in: int = 3, t_out: int = 1) -> None:
        super().__init__()
        self.mix = nn.Linear(t_in, t_out)

    def forward(self, x):
        return self.mix(x.transpose(-1, -2)).transpose(-1, -2)


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
