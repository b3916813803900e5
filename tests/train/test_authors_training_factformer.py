"""opformer's trainer against the FactFormer authors' training (BaratiLab/FactFormer): 10 optimiser steps of
latent marching with pushforward, 2D Kolmogorov (``examples/turb_ns2d_fact_lm.py``) and 3D turbulence
(``examples/turb_ns3d_fact_lm.py``), from the same weights on the same windows, in float64.

The fixtures (``tests/fixtures/authors_training/factformer_*``) were made by ``make_factformer.py`` beside them,
which runs the authors' own training loop; their JSON names the authors' commit and the recipe. Here opformer's
``Trainer`` (what ``opformer train`` runs) trains from the fixture's initial weights on a data file of the
fixture's trajectories; its windows and its steps' draws must be the fixture's, and its final parameters the
authors' to 1e-10.
"""

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from opformer.config import config_from_dict
from opformer.data.store import DataFile, write_trajectory_dataset
from opformer.train.trainer import Trainer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "authors_training"
CASES = ("factformer_kolmogorov2d", "factformer_turbulence3d")
TOLERANCE = 1e-10


def train_recorded(config: dict[str, Any], fields: np.ndarray, channels: list[str], folder: Path,
                   initial: dict[str, torch.Tensor] | None = None
                   ) -> tuple[Trainer, dict[str, torch.Tensor], list[torch.Tensor], list[list[int]]]:
    """opformer's trainer on a data file of ``fields`` (periodic, 2 pi a side), from ``initial`` weights if given
    (else its own, from the config's seed): the trainer after ``fit``, the weights it started from, every step's
    windows ``(trajectory, first frame)`` and its latent-marching key ``[calls, marched frames]``. Call it with
    float64 as the default dtype and data reads (``float64``)."""
    ndim = fields.ndim - 3
    path = write_trajectory_dataset(folder / "data.h5", fields, 0.1 * np.arange(fields.shape[1]),
                                    pde={"name": "random"}, solver={"name": "none"}, seed=0, channels=channels,
                                    domain={"lengths": [2 * np.pi] * ndim, "periodic": [True] * ndim})
    trainer = Trainer(config_from_dict({**config, "data": {**config["data"], "path": str(path)}}), folder / "run")
    if initial is not None:
        trainer.surrogate.model.load_state_dict(initial)
    start = {k: v.detach().clone() for k, v in trainer.surrogate.model.state_dict().items()}
    windows: list[torch.Tensor] = []
    keys: list[list[int]] = []
    fetch, draw = trainer.task.fetch, trainer.task.draw

    def fetch_recorded(index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        windows.append(index.clone())
        return fetch(index)

    def draw_recorded(*args: Any, **kwargs: Any) -> Any:
        draws = draw(*args, **kwargs)
        keys.append(list(draws.key))
        return draws

    trainer.task.fetch, trainer.task.draw = fetch_recorded, draw_recorded
    trainer.fit()
    return trainer, start, windows, keys


@pytest.fixture
def float64(monkeypatch):
    """float64 parameters and data (the data file stores float32; every read is cast)."""
    read = DataFile.read
    monkeypatch.setattr(DataFile, "read", lambda *a, **k: np.asarray(read(*a, **k), np.float64))
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(default)


def fixture(case: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    meta = json.loads((FIXTURES / f"{case}.json").read_text())
    return meta, load_file(FIXTURES / f"{case}.safetensors")


def prefixed(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def largest_difference(trainer: Trainer, tensors: dict[str, torch.Tensor]) -> float:
    """The largest difference of opformer's trained parameters from the authors' (mapped to opformer's names)."""
    final = trainer.surrogate.model.state_dict()
    theirs = prefixed(tensors, "final.")
    assert set(theirs) == set(final)
    return max(float((final[k] - v).abs().max()) for k, v in theirs.items())


def run_case(case: str, folder: Path, rollout: dict[str, Any] | None = None
             ) -> tuple[float, list[torch.Tensor], list[list[int]], dict[str, Any], dict[str, torch.Tensor]]:
    meta, tensors = fixture(case)
    config = meta["config"]
    if rollout:
        config = {**config, "rollout": {**config["rollout"], **rollout}}
    trainer, _, windows, keys = train_recorded(config, tensors["fields"].numpy(), meta["channels"], folder,
                                               prefixed(tensors, "initial."))
    assert all(p.dtype == torch.float64 for p in trainer.surrogate.parameters())
    return largest_difference(trainer, tensors), windows, keys, meta, tensors


@pytest.mark.parametrize("case", CASES)
def test_factformer_training_equals_the_authors(case, tmp_path, float64):
    difference, windows, keys, meta, tensors = run_case(case, tmp_path)
    assert torch.equal(torch.cat(windows), tensors["windows"])  # the windows the authors' loop was fed
    assert keys == meta["steps"]  # and each step's calls and marched frames, as their loop chose them
    assert len(keys) == 10 and any(calls > 1 for calls, _ in keys) and len({f for _, f in keys}) > 1
    moved = max(float((tensors[f"final.{k}"] - v).abs().max()) for k, v in prefixed(tensors, "initial.").items())
    assert moved > 1e-4  # the 10 steps changed the weights
    assert difference < TOLERANCE, f"{case}: largest parameter difference {difference:.3e}"


@pytest.mark.parametrize(("rollout", "what"), [({"pushforward_every": 2}, "pushforward on other steps"),
                                               ({"march_curriculum_steps": 3}, "a shorter curriculum"),
                                               ({"unroll_steps": 2}, "one pushed call fewer")])
def test_factformer_training_differs_from_the_authors_with_another_recipe(rollout, what, tmp_path, float64):
    difference = run_case(CASES[0], tmp_path, rollout)[0]
    assert difference > 1e-6, what
