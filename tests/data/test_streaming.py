"""Streamed training splits: read per batch, they make the tensors of the split held whole, and a run that streams
trains the model of a run that holds its data."""

import csv

import pytest
import torch

from opformer.config import config_from_dict
from opformer.data.mixture import Mixture, MixtureMember, MixtureSpec
from opformer.data.pairs import PairLayout, load_split, split_range
from opformer.data.store import read_info
from opformer.data.streaming import StreamedPairs, StreamedTrajectories, fits
from opformer.data.trajectories import load_trajectories, trajectory_layout
from opformer.runs import load_checkpoint
from opformer.train.trainer import train

#: a budget no split fits: every split streams
STREAM = 1e-9


@pytest.mark.parametrize("options", [{"resolution": 9}, {"resolution": 9, "direction": "inverse"},
                                     {"direction": "inverse", "target_resolution": 5, "resolution": 9}])
def test_streamed_pairs_are_the_split_held_whole(darcy_file, options):
    """Batches in a shuffled order, the inverse map and the block-averaged coarse target: bit-identical inputs,
    targets and target gradients, and the same chunks of normalizer data."""
    sizes = {"n_train": 8, "n_val": 2, "n_test": 2}
    whole = load_split(darcy_file, "train", **sizes, **options)
    layout = PairLayout.of(read_info(darcy_file), options.get("resolution"), options.get("target_resolution"),
                           options.get("direction", "forward"))
    streamed = StreamedPairs(layout, split_range("train", **sizes, n_samples=12, path=darcy_file))
    assert len(streamed) == 8 and streamed.nbytes == whole.nbytes and streamed.sample_shape == whole.inputs.shape[1:]
    generator = torch.Generator().manual_seed(3)
    for index in streamed.plan(3, generator):
        for got, want in zip(streamed.fetch(index), whole.fetch(index)):
            assert torch.equal(got, want)
    stored = load_split(darcy_file, "train", **sizes, **{k: v for k, v in options.items() if k != "resolution"})
    chunks = list(streamed.chunks(size=3, stored=True))
    assert torch.equal(torch.cat([c[0] for c in chunks]), stored.inputs)
    assert torch.equal(torch.cat([c[1] for c in chunks]), stored.targets)


def test_streamed_windows_are_the_split_held_whole(heat_file):
    """Every window of a split strided 2 in space and 2 in time, read frame by frame at the time stride."""
    sizes = {"n_train": 6, "n_val": 2, "n_test": 2, "resolution": 8, "time_stride": 2}
    whole = load_trajectories(heat_file, "train", **sizes)
    streamed = StreamedTrajectories(trajectory_layout(heat_file, "train", **sizes))
    assert len(streamed) == 6 and streamed.n_times == whole.n_times == 6 and streamed.resolution == (8, 8)
    assert streamed.layout.nbytes == whole.fields.nbytes
    pairs = streamed.window_starts(2, 3, "all", None)
    for got, want in zip(streamed.fetch(pairs, 2, 3), whole.fetch(pairs, 2, 3)):
        assert torch.equal(got, want)
    assert torch.equal(torch.cat(list(streamed.chunks(size=4))), whole.fields)


def test_a_streamed_mixture_draws_the_same_windows(toy_mixture):
    """Member a periodic (Fourier resize of 16^2: none), member b cells 32^2 -> 16^2 (cell means) at its own time
    stride 2: the windows of the streamed mixture are those of the mixture held whole."""
    spec = MixtureSpec(members=[MixtureMember(str(toy_mixture[0])),
                                MixtureMember(str(toy_mixture[1]), weight=2, time_stride=2)],
                       resolution=16, t_in=2, t_out=1, windows_per_epoch=12, n_train=4, n_val=1, n_test=1)
    whole, streamed = Mixture(spec), Mixture(spec, memory_gb=STREAM)
    assert streamed.streamed and not whole.streamed and Mixture(spec, memory_gb=1.0).streamed is False
    for a, b in zip(whole.batches(1, 5), streamed.batches(1, 5)):
        for got, want in zip(b, a):
            assert torch.equal(got, want)


def test_the_budget_decides():
    assert fits(2**30, 1.0) and not fits(2**30 + 1, 1.0)


def _metrics(run):
    with open(run / "metrics.csv") as f:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


def _same_run(run, reference):
    assert _metrics(run) == _metrics(reference)
    want = load_checkpoint(reference / "last.pt")["state_dict"]
    for key, value in load_checkpoint(run / "last.pt")["state_dict"].items():
        assert torch.equal(value, want[key]), key


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_a_streaming_run_trains_the_model_of_a_run_held_in_memory(tmp_path, darcy_file, darcy_config, heat_file,
                                                                   mixture_config, toy_mixture, workers):
    """Point-wise normalizers and input noise (inverse Darcy), channel normalizers with random windows and
    pushforward (heat), a mixture: the same metrics and weights, bit for bit, read in the loop or by workers."""
    heat = {"seed": 0, "model": {"name": "fno2d_time", "width": 4, "modes": 2, "n_layers": 1},
            "data": {"path": str(heat_file), "n_train": 6, "n_val": 2, "n_test": 2, "resolution": 8,
                     "normalize_input": "channel", "normalize_target": "channel"},
            "optim": {"lr": 3e-3}, "schedule": {"name": "constant"},
            "train": {"epochs": 2, "batch_size": 4, "num_threads": 1},
            "rollout": {"t_in": 3, "t_out": 1, "strategy": "pushforward", "unroll_steps": 2, "noise": 0.01,
                        "windows": "random", "time_stride": 1}}
    for name, raw in (("darcy", darcy_config(darcy_file, inverse=True)), ("heat", heat),
                      ("mixture", mixture_config(toy_mixture, noise=0.1))):
        train(config_from_dict(raw), tmp_path / f"{name}-memory")
        raw["data"].update(memory_gb=STREAM, workers=workers)
        train(config_from_dict(raw), tmp_path / f"{name}-streamed")
        _same_run(tmp_path / f"{name}-streamed", tmp_path / f"{name}-memory")
