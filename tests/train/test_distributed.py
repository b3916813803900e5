"""Data-parallel training: sharding arithmetic in-process, and real 2-process torchrun jobs (gloo, float64) that
must match a 1-process run, write only from rank 0, resume with another process count and fail fast."""

import csv
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

import opformer
from opformer.config import RolloutConfig
from opformer.errors import ConfigError
from opformer.runs import load_checkpoint
from opformer.train.distributed import Context, Part, check_batch, normal, rows
from opformer.train.strategies import window_loss

SRC = str(Path(opformer.__file__).resolve().parents[1])  # the tree under test, for the processes started here

#: ``opformer`` in float64 (data cast as read), recording every write of each process into the run folder
#: (``WATCH``); ``FAIL_RANK`` raises in that rank's first epoch, ``KILL_AFTER`` SIGKILLs rank 0 after that epoch.
ENTRY = '''
import os, signal, sys
import numpy as np
import torch
from opformer.data.store import DataFile

torch.set_default_dtype(torch.float64)
read = DataFile.read
DataFile.read = lambda *a, **k: np.asarray(read(*a, **k), np.float64)  # every read of a data file, streamed too
rank, watched = os.environ.get("RANK", "0"), os.environ.get("WATCH")
if watched:
    log = open(os.environ["WATCH_LOG"] + rank, "a")

    def audit(event, args):
        if event == "open" and len(args) > 2:
            mode, flags = args[1], args[2] or 0
            writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & (os.O_WRONLY | os.O_RDWR))
        else:
            writes = event in ("os.mkdir", "os.rename", "os.replace", "os.remove")
        if writes and args and str(args[0]).startswith(watched):
            log.write(f"{event} {args[0]}\\n")
            log.flush()

    sys.addaudithook(audit)
from opformer.train import trainer
if os.environ.get("FAIL_RANK") == rank:
    def fail(self, epoch, progress):
        raise RuntimeError("boom in the test")
    trainer.Trainer._train_epoch = fail
if os.environ.get("KILL_AFTER") and rank == "0":
    write_metrics = trainer.write_metrics
    def write_and_die(run_dir, history):
        write_metrics(run_dir, history)
        if len(history) == int(os.environ["KILL_AFTER"]):
            os.kill(os.getpid(), signal.SIGKILL)
    trainer.write_metrics = write_and_die
from opformer.cli import run
run()
'''


def test_rows_split_evenly_and_cover_everything():
    for n in range(0, 11):
        for world in (1, 2, 3, 4):
            parts = [rows(n, rank, world) for rank in range(world)]
            assert [i for part in parts for i in range(n)[part]] == list(range(n))
            sizes = [part.stop - part.start for part in parts]
            assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_a_part_draws_its_rows_of_the_global_noise():
    full = torch.randn((6, 5, 2), generator=torch.Generator().manual_seed(3))
    parts = [normal((3, 5, 2), torch.Generator().manual_seed(3), Part(start, start + 3, 6)) for start in (0, 3)]
    assert torch.equal(torch.cat(parts), full)
    assert torch.equal(normal((6, 5, 2), torch.Generator().manual_seed(3)), full)


def test_shard_takes_contiguous_rows_and_a_dummy_for_an_empty_share():
    batch = (torch.arange(5.0), torch.arange(5.0) * 10)
    mine, part = Context(torch.device("cpu"), 1, 2).shard(batch)
    assert part == Part(3, 5, 5) and torch.equal(mine[1], torch.tensor([30.0, 40.0])) and part.share == 0.4
    (x,), part = Context(torch.device("cpu"), 1, 2).shard((torch.arange(1.0),))  # a last batch of one sample
    assert part.dummy and part.share == 0.0 and x.shape == (1,)
    assert Context(torch.device("cpu")).shard(batch) == (batch, Part(0, 5, 5))
    with pytest.raises(ConfigError, match=r"^train.batch_size: 6 does not split over 4 processes; give a multiple"):
        check_batch(6, 4)


@pytest.mark.parametrize("strategy", ["pushforward", "unroll", "latent_marching"])
def test_trajectory_losses_of_the_parts_add_up_to_the_global_batch(time_mix, strategy):
    """What each process contributes (its share times its mean loss) sums to the one-process loss and gradient,
    with relative input noise and pushforward's random number of calls drawn alike in every process."""
    torch.manual_seed(0)
    model = time_mix(t_in=3, t_out=2).double()
    context, future = torch.randn(5, 4, 4, 3, 1, dtype=torch.float64), torch.randn(5, 4, 4, 6, 1, dtype=torch.float64)
    marching = {"pushforward_epoch": 0} if strategy == "latent_marching" else {}
    config = RolloutConfig(t_in=3, t_out=2, strategy=strategy, unroll_steps=3, noise=0.1, **marching)

    def loss_and_grad(rows_, part):
        model.zero_grad()
        loss = window_loss(model, context[rows_], future[rows_], config, 1, torch.Generator().manual_seed(7), part)
        scaled = loss * (part.share if part else 1.0)
        scaled.backward()
        return scaled.item(), model.mix.weight.grad.clone()

    whole, grad = loss_and_grad(slice(None), None)
    halves = [loss_and_grad(slice(a, b), Part(a, b, 5)) for a, b in ((0, 3), (3, 5))]
    assert sum(h[0] for h in halves) == pytest.approx(whole, rel=1e-12)
    torch.testing.assert_close(halves[0][1] + halves[1][1], grad, rtol=1e-12, atol=1e-14)


def _metrics(run):
    with open(run / "metrics.csv") as f:
        return [{k: float(v) for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


def _launch(tmp_path, args, processes=1, timeout=120, **env):
    """Run ``opformer`` (float64) in ``processes`` processes under torchrun, or in this one's child if 1."""
    entry = tmp_path / "entry.py"
    entry.write_text(ENTRY)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)]
    command = [*(launcher if processes > 1 else [sys.executable]), str(entry), *args]
    env = dict(os.environ, PYTHONPATH=SRC, OMP_NUM_THREADS="1", **env)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A 1-process float64 run of 2 epochs on 9 samples with batch 4 (an uneven last batch: 4, 4, 1) and input
    noise, and its config file (shared by the tests of this module)."""
    from tests.toy_data import tiny_run_config, write_toy_burgers

    folder = tmp_path_factory.mktemp("ddp")
    data = write_toy_burgers(folder / "toy.h5")
    config = tiny_run_config(data, epochs=2)
    config["data"].update(n_train=9, n_val=5, input_noise=0.01)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    done = _launch(folder, ["train", str(path), "--out", str(folder / "single")])
    assert done.returncode == 0, done.stderr
    return folder / "single", path


def _same_run(run, reference):
    for got, want in zip(_metrics(run), _metrics(reference), strict=True):
        assert got == pytest.approx(want, rel=1e-10)
    want = load_checkpoint(reference / "last.pt")["state_dict"]
    for key, value in load_checkpoint(run / "last.pt")["state_dict"].items():
        torch.testing.assert_close(value, want[key], rtol=0, atol=1e-10)


@pytest.mark.slow
def test_two_processes_train_the_one_process_model_and_only_rank_0_writes(tmp_path, reference):
    single, config = reference
    run = tmp_path / "ddp"
    done = _launch(tmp_path, ["train", str(config), "--out", str(run)], processes=2, WATCH=str(run),
                   WATCH_LOG=str(tmp_path / "writes."))
    assert done.returncode == 0, done.stderr
    _same_run(run, single)
    written = (tmp_path / "writes.0").read_text()
    assert all(name in written for name in ("last.pt", "train.log", "metrics.csv"))  # the record sees rank 0 write
    assert not (tmp_path / "writes.1").read_text()  # rank 1 wrote nothing
    assert done.stdout.count("best validation relative L2") == 1
    log = (run / "train.log").read_text()
    assert log.count("started epoch 1 of 2, 3 steps each") == 1 and "x 2 processes" in log
    assert yaml.safe_load((run / "run.json").read_text())["sessions"][0]["processes"] == 2


@pytest.mark.slow
def test_a_killed_two_process_run_resumes_with_one_process(tmp_path, reference):
    """Rank 0 is SIGKILLed after epoch 1 (torchrun stops rank 1); one process resumes it to the same result as
    the uninterrupted 1-process run (which the 2-process run equals, test above)."""
    single, config = reference
    run = tmp_path / "ddp"
    killed = _launch(tmp_path, ["train", str(config), "--out", str(run)], processes=2, KILL_AFTER="1")
    assert killed.returncode != 0 and len(_metrics(run)) == 1
    resumed = _launch(tmp_path, ["train", "--resume", str(run)])
    assert resumed.returncode == 0, resumed.stderr
    _same_run(run, single)


@pytest.mark.slow
def test_a_failing_rank_stops_the_job_with_a_line_naming_it(tmp_path, reference):
    _, config = reference
    start = time.monotonic()
    done = _launch(tmp_path, ["train", str(config), "--out", str(tmp_path / "run")], processes=2, timeout=90,
                   FAIL_RANK="1")
    assert done.returncode != 0 and time.monotonic() - start < 60
    assert "opformer train: error: rank 1: boom in the test" in done.stderr.splitlines()


def _two_processes_equal_one(tmp_path, config):
    """Train ``config`` in 1 and in 2 processes: the same weights and metrics (every column); the metrics."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    for processes in (1, 2):
        done = _launch(tmp_path, ["train", str(path), "--out", str(tmp_path / str(processes))], processes=processes)
        assert done.returncode == 0, done.stderr
    _same_run(tmp_path / "2", tmp_path / "1")
    return _metrics(tmp_path / "1")


@pytest.mark.slow
def test_a_trajectory_run_with_two_processes_equals_one(tmp_path, heat_file):
    """Pushforward (a random number of calls per batch), random windows and relative input noise, 3 validation
    trajectories sharded 2 + 1: the same weights and metrics as one process."""
    config = {"seed": 0, "model": {"name": "fno2d_time", "width": 6, "modes": 3, "n_layers": 2},
              "data": {"path": str(heat_file), "n_train": 6, "n_val": 3, "n_test": 1, "normalize_input": "channel",
                       "normalize_target": "channel"},
              "optim": {"lr": 3e-3}, "schedule": {"name": "constant"},
              "train": {"epochs": 2, "batch_size": 4, "num_threads": 1},
              "rollout": {"t_in": 3, "t_out": 1, "strategy": "pushforward", "unroll_steps": 3, "noise": 0.01,
                          "windows": "random"}}
    _two_processes_equal_one(tmp_path, config)


@pytest.mark.slow
def test_a_mixture_run_with_two_processes_equals_one(tmp_path, toy_mixture):
    """A tiny DPOT (group norms, Fourier attention) on a mixture: windows drawn alike in every process (batches of
    4, 4, 2), input noise, each member's 2 validation trajectories sharded 1 + 1: the same weights and metrics as
    one process, each member's validation error (all-reduced over the shards) included."""
    model = {"name": "dpot2d", "in_channels": 2, "patch_size": 4, "grid_size": 16, "width": 8, "depth": 1,
             "n_heads": 2, "mlp_ratio": 1, "head_width": 4, "modes": 2, "periodic": False}
    config = {"seed": 0, "model": model,
              "data": {"mixture": [{"path": str(toy_mixture[0])}, {"path": str(toy_mixture[1]), "weight": 2}],
                       "resolution": 16, "windows_per_epoch": 10, "n_train": 3, "n_val": 2, "n_test": 1},
              "optim": {"lr": 3e-3}, "schedule": {"name": "constant"},
              "train": {"epochs": 2, "batch_size": 4, "num_threads": 1},
              "rollout": {"t_in": 3, "t_out": 1, "noise": 0.1}}
    rows = _two_processes_equal_one(tmp_path, config)
    assert [set(row) for row in rows] == [{"epoch", "train_loss", "val_relative_l2", "val_a", "val_b", "lr"}] * 2
    assert all(row["val_relative_l2"] == pytest.approx((row["val_a"] + row["val_b"]) / 2, rel=1e-12) for row in rows)


@pytest.mark.slow
def test_nproc_starts_the_processes_itself(tmp_path, reference, capsys):
    _, config = reference
    from opformer.cli import main

    assert main(["train", str(config), "--out", str(tmp_path / "odd"), "--nproc", "3"]) == 2
    assert capsys.readouterr().err.startswith("opformer train: error: train.batch_size: 4 does not split over 3 ")
    run = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=SRC, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "opformer", "train", str(config), "--out", str(run), "--nproc", "2"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("best validation relative L2") == 1 and len(_metrics(run)) == 2
    assert yaml.safe_load((run / "run.json").read_text())["sessions"][0]["processes"] == 2


@pytest.mark.slow
def test_a_streamed_run_with_two_processes_equals_one(tmp_path, heat_file):
    """The heat run above with its training split read from disk per batch by a worker (each process reads only
    its rows of each global batch): the same weights and metrics in 1 and 2 processes."""
    config = {"seed": 0, "model": {"name": "fno2d_time", "width": 6, "modes": 3, "n_layers": 2},
              "data": {"path": str(heat_file), "n_train": 6, "n_val": 3, "n_test": 1, "normalize_input": "channel",
                       "normalize_target": "channel", "memory_gb": 1e-9, "workers": 1},
              "optim": {"lr": 3e-3}, "schedule": {"name": "constant"},
              "train": {"epochs": 2, "batch_size": 4, "num_threads": 1},
              "rollout": {"t_in": 3, "t_out": 1, "strategy": "pushforward", "unroll_steps": 3, "noise": 0.01,
                          "windows": "random"}}
    _two_processes_equal_one(tmp_path, config)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_train_the_one_process_model(tmp_path, reference):
    """Two "nodes" on this machine, one process each, joined by torchrun's c10d rendezvous (the command of
    docs/training.md): the 1-process run to 1e-10 in float64, written once."""
    single, config = reference
    entry = tmp_path / "entry.py"
    entry.write_text(ENTRY)
    run = tmp_path / "nodes"
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=SRC, OMP_NUM_THREADS="1")
    nodes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(rank),
                               "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                               f"localhost:{port}", "--rdzv-id", "opformer-test", str(entry), "train", str(config),
                               "--out", str(run)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in (0, 1)]
    outputs = [node.communicate(timeout=180) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], [err[-2000:] for _, err in outputs]
    _same_run(run, single)
    assert sum(out.count("best validation relative L2") for out, _ in outputs) == 1
    assert yaml.safe_load((run / "run.json").read_text())["sessions"][0]["processes"] == 2


@pytest.mark.slow
def test_a_mesh_run_with_two_processes_equals_one(tmp_path):
    """A mesh run (padded batches of varying point counts, quadrature-weighted loss, an uneven last batch): the same
    weights and metrics in 1 and 2 processes."""
    from tests.data.test_store_mesh import mesh_samples, write

    data = write(tmp_path / "mesh.h5", mesh_samples((20, 31, 25, 18, 27, 22, 19, 24, 30, 21, 26)))
    config = {"seed": 0, "data": {"path": str(data), "n_train": 7, "n_val": 3, "n_test": 1,
                                  "normalize_input": "channel", "normalize_target": "channel"},
              "model": {"name": "transolver", "in_channels": 1, "out_channels": 2, "n_hidden": 8, "n_layers": 1,
                        "n_head": 2, "slice_num": 3, "weighting": "quadrature"},
              "optim": {"lr": 1e-3}, "train": {"epochs": 2, "batch_size": 4}}
    rows = _two_processes_equal_one(tmp_path, config)
    assert len(rows) == 2 and all(row["val_relative_l2_uniform"] > 0 for row in rows)
