"""The trainer on a CUDA device: the same batches as on the CPU, no host sync in a training step, and CUDA-graph
steps equal to eager ones. Skipped where there is no CUDA device (CI); `benchmarks/systems/gpu.sh` runs them."""

import csv
import warnings

import pytest
import torch

from opformer.config import config_from_dict
from opformer.errors import ConfigError
from opformer.runs import load_checkpoint
from opformer.train.distributed import Context
from opformer.train.pipeline import Pipeline
from opformer.train.tasks import make_task
from opformer.train.trainer import Trainer, train

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _metrics(run):
    with open(run / "metrics.csv") as f:
        return [{k: float(v) for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


def _batches(raw, device, epoch=1):
    task = make_task(config_from_dict(raw))
    pipeline = Pipeline(task, Context(torch.device(device)))
    out = []
    for batch in pipeline.epoch(epoch, torch.Generator().manual_seed(5)):
        out.append([t.cpu() for t in batch.tensors] + [n.cpu() for n in batch.draws.noise if n is not None])
    return out


@cuda
def test_the_same_seed_gives_the_same_batches_on_cpu_and_cuda(toy_file, tiny_config, heat_file, mixture_config,
                                                              toy_mixture):
    """Operator pairs with input noise, trajectory windows drawn at random with pushforward and noise, mixture
    draws with noise: bit-identical batches and noise on both devices (the data on the device, indexed there)."""
    operator = tiny_config(toy_file)
    operator["data"]["input_noise"] = 0.01
    trajectory = {"seed": 0, "model": {"name": "fno2d_time", "width": 6, "modes": 3, "n_layers": 2},
                  "data": {"path": str(heat_file), "n_train": 6, "n_val": 3, "n_test": 1},
                  "train": {"batch_size": 4},
                  "rollout": {"t_in": 3, "t_out": 1, "strategy": "pushforward", "unroll_steps": 3, "noise": 0.01,
                              "windows": "random"}}
    for raw in (operator, trajectory, mixture_config(toy_mixture, noise=0.1)):
        on_cpu, on_cuda = _batches(raw, "cpu"), _batches(raw, "cuda")
        assert len(on_cpu) == len(on_cuda) > 1
        for a, b in zip(on_cpu, on_cuda):
            assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


@cuda
def test_a_training_step_waits_for_nothing_on_the_host(tmp_path, toy_file, tiny_config, monkeypatch):
    """The second epoch's steps (eager and as CUDA graphs) make no synchronising CUDA call; the reads at the log
    points are the only ones, and they are left out of the check."""
    for graphs in (False, True):
        raw = tiny_config(toy_file, epochs=2)
        raw["train"].update(device="cuda", cuda_graphs=graphs, log_every=1000)
        trainer = Trainer(config_from_dict(raw), tmp_path / f"run{graphs}")
        read, epoch_of = trainer._read_losses, trainer._train_epoch
        caught = []

        def quiet_read(epoch):
            torch.cuda.set_sync_debug_mode(0)
            return read(epoch)

        def watched(epoch, progress):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn" if epoch == 1 else 0)
                try:
                    return epoch_of(epoch, progress)
                finally:
                    torch.cuda.set_sync_debug_mode(0)
                    caught.extend(str(w.message) for w in seen if "called a synchronizing" in str(w.message))

        monkeypatch.setattr(trainer, "_read_losses", quiet_read)
        monkeypatch.setattr(trainer, "_train_epoch", watched)
        trainer.fit()
        assert caught == [], caught[:3]


@cuda
def test_cuda_graph_steps_train_the_eager_model(tmp_path, toy_file, tiny_config):
    """Three epochs (4 steps each, the last batch full) with OneCycle's momentum cycling: the captured steps give
    the eager run's losses and weights to float32 rounding."""
    runs = {}
    for graphs in (False, True):
        raw = tiny_config(toy_file, epochs=3)
        raw["schedule"]["cycle_momentum"] = True
        raw["train"].update(device="cuda", cuda_graphs=graphs)
        runs[graphs] = tmp_path / str(graphs)
        train(config_from_dict(raw), runs[graphs])
    for eager, graphed in zip(_metrics(runs[False]), _metrics(runs[True]), strict=True):
        assert graphed == pytest.approx(eager, rel=1e-4)
    want = load_checkpoint(runs[False] / "last.pt")["state_dict"]
    for key, value in load_checkpoint(runs[True] / "last.pt")["state_dict"].items():
        torch.testing.assert_close(value, want[key], rtol=1e-3, atol=1e-5)


@cuda
def test_fp16_with_cuda_graphs_is_a_one_line_error(tmp_path, toy_file, tiny_config):
    raw = tiny_config(toy_file, epochs=1)
    raw["train"].update(device="cuda", cuda_graphs=True, precision="fp16")
    with pytest.raises(ConfigError, match="train.cuda_graphs: not with precision fp16"):
        Trainer(config_from_dict(raw), tmp_path / "run")
