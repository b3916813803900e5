"""Shared fixtures: tiny synthetic data files so tests never wait for a solver."""

from __future__ import annotations

import numpy as np
import pytest

from opformer.data.store import write_operator_dataset


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
