"""Trained toy runs that the calibration tests share (fixtures imported by the test modules), and 2D vorticity
frames made by the solver."""

import numpy as np
import pytest
import torch

from opformer.config import config_from_dict
from opformer.pde.navier_stokes import fno_forcing, solve_navier_stokes_2d
from opformer.train.trainer import train


def smooth_vorticity(samples: int, n: int, seed: int = 0) -> np.ndarray:
    """Random vorticity fields ``(samples, n, n)`` of the modes ``|k| < 4`` only: smooth initial conditions."""
    w0 = np.random.default_rng(seed).standard_normal((samples, n, n))
    radius = np.hypot(*np.meshgrid(np.fft.fftfreq(n, 1 / n), np.arange(n // 2 + 1), indexing="ij"))
    return np.fft.irfft2(np.fft.rfft2(w0) * (radius < 4))


def vorticity_frames(nu: float, w0: np.ndarray, times: np.ndarray) -> torch.Tensor:
    """FNO-nu frames ``(sample, time, n, n, 1)`` from ``w0`` at viscosity ``nu`` (its forcing, no drag)."""
    out, _ = solve_navier_stokes_2d(w0, nu=nu, times=times, dt=0.02, forcing=fno_forcing(w0.shape[-1]), workers=1)
    return torch.from_numpy(out)[..., None]


@pytest.fixture
def operator_run(tmp_path, toy_writer, tiny_config):
    """A tiny Galerkin Transformer on 40 toy samples (16 train, 4 val, 20 test; trained at n = 32 of 64)."""
    base = tmp_path / "calibrate"
    base.mkdir()
    data = toy_writer(base / "toy.h5", samples=40)
    config = tiny_config(data, epochs=2)
    config["data"].update(n_train=16, n_val=4, n_test=20)
    train(config_from_dict(config), base / "run")
    return base / "run", data


@pytest.fixture
def heat_run(tmp_path, heat_file, time_mix):
    """A tiny time-mixing model on the toy heat trajectories (4 train, 2 val, 4 test; 5 evaluated frames)."""
    config = {"seed": 0, "model": {"name": "time_mix", "t_in": 3, "t_out": 1},
              "data": {"path": str(heat_file), "n_train": 4, "n_val": 2, "n_test": 4, "normalize_input": "channel",
                       "normalize_target": "channel"},
              "optim": {"lr": 3e-2}, "schedule": {"name": "constant"},
              "train": {"epochs": 2, "batch_size": 8, "num_threads": 1},
              "rollout": {"t_in": 3, "t_out": 1, "eval_frames": 5}}
    train(config_from_dict(config), tmp_path / "heat")
    return tmp_path / "heat", heat_file
