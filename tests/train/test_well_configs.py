"""configs/the_well: every model family's config for a 2D Well data set builds and takes a training step on a tiny
file in The Well's layout (4 channels like turbulent_radiative_layer_2D, a non-square grid, x periodic, y open)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from opformer.config import load_config
from opformer.data.convert import convert_file
from opformer.train.trainer import train

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs" / "the_well").glob("*.yaml"))


def test_one_config_per_model_family():
    names = {load_config(path).model["name"] for path in CONFIGS}
    assert names == {"fno2d_time", "ffno2d", "dil_resnet2d", "factformer2d", "dpot2d"}


@pytest.fixture(scope="module")
def tiny_trl(tmp_path_factory):
    """A converted Well file of the data set's fields: 4 trajectories of 8 frames on 8 x 24 (x periodic, y open)."""
    from tests.foreign_formats import write_well_file

    folder = tmp_path_factory.mktemp("well")
    source = write_well_file(folder / "trl.hdf5", samples=4, frames=8, shape=(8, 24), boundaries=("periodic", "open"),
                             fields={"density": 0, "pressure": 0, "velocity": 1})
    return convert_file("the-well", [source], folder / "trl.h5")[0]


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_takes_a_training_step_on_a_tiny_well_file(path, tiny_trl, tmp_path):
    config = load_config(path, [f"data.path={tiny_trl}", "data.n_train=2", "data.n_val=1", "data.n_test=1",
                                "train.epochs=1", "train.batch_size=8", "train.num_threads=1",
                                "rollout.eval_frames=2"])
    assert (config.rollout.t_in, config.rollout.t_out, config.model["in_channels"]) == (4, 1, 4)
    summary = train(config, tmp_path / "run")
    # 2 trajectories x 4 windows of 4 + 1 frames: one batch of 8, one step
    assert summary["epochs"] == 1 and summary["seconds_per_step"] == summary["train_seconds"]
    assert math.isfinite(summary["best_val_relative_l2"])
