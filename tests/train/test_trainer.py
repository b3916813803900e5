import csv
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from torch.utils._python_dispatch import TorchDispatchMode

from opformer.config import config_from_dict
from opformer.errors import CheckpointError, ConfigError, TrainingDiverged
from opformer.eval.evaluate import evaluate_run
from opformer.runs import Run, load_checkpoint
from opformer.train.trainer import Trainer, divergence, train


def metrics(run):
    with open(run / "metrics.csv") as f:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


@pytest.mark.slow
def test_training_learns_and_selects_on_validation(tmp_path, toy_file, tiny_config):
    run = tmp_path / "run"
    summary = train(config_from_dict(tiny_config(toy_file, epochs=12)), run)
    rows = metrics(run)
    assert list(rows[0]) == ["epoch", "train_loss", "val_relative_l2", "lr"]  # and seconds, left out by metrics()
    vals = [float(r["val_relative_l2"]) for r in rows]
    assert len(rows) == 12 and vals[-1] < 0.5 * vals[0]
    best = min(range(12), key=vals.__getitem__)
    assert summary["best_epoch"] == best + 1
    surrogate, payload = Run(run).model("best")
    assert payload["epoch"] == best and payload["training_state"] == {}
    # the stored best model reproduces its validation error
    (row,) = evaluate_run(run, toy_file, [32], split="val")
    assert row["relative_l2"] == pytest.approx(vals[best], rel=1e-5)
    # the run directory holds the resolved config
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["epochs"] == 12


@pytest.mark.slow
@pytest.mark.parametrize("data", ["operator", "mixture", "streamed"])
def test_killed_run_resumes_to_the_same_metrics(tmp_path, request, data):
    """SIGKILL at whatever point the third epoch has reached; the resumed run equals an uninterrupted one (for a
    mixture: the same windows, noise and per-member validation columns; streamed: the training split read from
    disk per batch by a worker process)."""
    epochs = 6
    if data in ("operator", "streamed"):
        raw = request.getfixturevalue("tiny_config")(request.getfixturevalue("toy_file"), epochs=epochs)
        if data == "streamed":
            raw["data"].update(memory_gb=1e-9, workers=1)
    else:
        raw = request.getfixturevalue("mixture_config")(request.getfixturevalue("toy_mixture"), epochs=epochs,
                                                        noise=0.1)
        raw["data"]["windows_per_epoch"] = 40  # epochs long enough to be killed in
    reference = tmp_path / "reference"
    train(config_from_dict(raw), reference)

    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(raw))
    run = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "opformer", "train", str(config), "--out", str(run)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (run / "metrics.csv").exists() or len(metrics(run)) < 2:
        assert proc.poll() is None and time.time() < deadline, "training ended before it could be killed"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(metrics(run))
    assert 2 <= done < epochs
    train(config_from_dict(raw), run, resume=True)
    assert metrics(run) == metrics(reference)
    assert data != "mixture" or {"val_a", "val_b"} < set(metrics(run)[0])
    ref, res = load_checkpoint(reference / "last.pt"), load_checkpoint(run / "last.pt")
    for key, value in ref["state_dict"].items():
        torch.testing.assert_close(res["state_dict"][key], value, rtol=0, atol=0)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, toy_file, tiny_config):
    run = tmp_path / "run"
    train(config_from_dict(tiny_config(toy_file, epochs=1)), run)
    before = (run / "last.pt").read_bytes()
    trainer = Trainer(config_from_dict(tiny_config(toy_file, epochs=3)), run)
    trainer.task.drawn_loss = lambda surrogate, batch, *_: (surrogate(batch[0]) * float("nan")).mean()
    with pytest.raises(TrainingDiverged, match=r"loss is nan at epoch 1, step 1; training stopped \(last good "):
        trainer.fit()
    assert (run / "last.pt").read_bytes() == before


def test_resume_refuses_a_checkpoint_of_another_model(tmp_path, toy_file, tiny_config):
    run = tmp_path / "run"
    train(config_from_dict(tiny_config(toy_file, epochs=1)), run)
    trainer = Trainer(config_from_dict(tiny_config(toy_file, epochs=1, d_model=8)), run)
    with pytest.raises(CheckpointError, match="was written for another model"):
        trainer.resume()


def test_a_diverged_first_epoch_names_no_checkpoint(tmp_path, toy_file, tiny_config):
    trainer = Trainer(config_from_dict(tiny_config(toy_file, epochs=1)), tmp_path / "run")
    trainer.task.drawn_loss = lambda surrogate, batch, *_: (surrogate(batch[0]) * float("inf")).mean()
    with pytest.raises(TrainingDiverged, match=r"\(no checkpoint was written yet\)"):
        trainer.fit()


def test_resume_refuses_another_optimiser_or_schedule(tmp_path, toy_file, tiny_config):
    run = tmp_path / "run"
    train(config_from_dict(tiny_config(toy_file, epochs=1)), run)
    for key, value in (("optim", {"lr": 1e-2}), ("train", {"epochs": 1, "batch_size": 8, "num_threads": 1})):
        config = tiny_config(toy_file, epochs=1)
        config[key] = value
        with pytest.raises(CheckpointError, match=f"last.pt: was trained with {key}"):
            Trainer(config_from_dict(config), run).resume()


def test_a_run_from_before_the_loss_reduction_and_h1_interior_keys_resumes(tmp_path, toy_file, tiny_config):
    from opformer.runs import save_checkpoint

    run = tmp_path / "run"
    train(config_from_dict(tiny_config(toy_file, epochs=1)), run)
    surrogate, payload = Run(run).model("last")
    for key in ("reduction", "h1_interior"):
        del payload["run_config"]["loss"][key]
    save_checkpoint(run / "last.pt", surrogate, run_config=payload["run_config"], epoch=payload["epoch"],
                    history=payload["history"], best_val=payload["best_val"], training_state=payload["training_state"])
    assert train(config_from_dict(tiny_config(toy_file, epochs=2)), run, resume=True)["epochs"] == 2


def test_one_writer_per_run_and_new_runs_only_in_empty_folders(tmp_path, toy_file, tiny_config):
    import fcntl

    config = config_from_dict(tiny_config(toy_file, epochs=1))
    busy = tmp_path / "busy"
    busy.mkdir()
    fd = os.open(busy, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a training process holds it
    try:
        with pytest.raises(CheckpointError, match="busy: another opformer process is writing this run"):
            train(config, busy)
    finally:
        os.close(fd)
    assert list(busy.iterdir()) == []
    (tmp_path / "other" / "notes.txt").parent.mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointError, match="other: is not empty and holds no run"):
        train(config, tmp_path / "other")
    train(config, busy)
    with pytest.raises(CheckpointError, match="busy: already holds a run"):
        train(config, busy)


class Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_checkpoints_never_unpickle_code(tmp_path):
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"format": "opformer-checkpoint", "x": Exploit()}, protocol=2))
    with pytest.raises(CheckpointError, match=r"evil\.pt: not a readable checkpoint"):
        load_checkpoint(path)
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")


def test_model_must_fit_the_data(toy_file, tiny_config, tmp_path):
    with pytest.raises(ConfigError, match=r"model\.in_channels: is 2 but .*toy\.h5 has 1 \(u0\)"):
        Trainer(config_from_dict(tiny_config(toy_file, in_channels=2)), tmp_path / "a")
    with pytest.raises(ConfigError, match=r"model\.length: is 2\.0 but the domain of .*toy\.h5 has length 1\.0"):
        Trainer(config_from_dict(tiny_config(toy_file, length=2.0)), tmp_path / "b")


class _ScalarReads(TorchDispatchMode):
    """Counts the operations that bring one tensor value to the host (``item``, ``float``, ``bool``, ``int``)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))


def test_the_loop_reads_device_values_only_at_its_log_points(tmp_path, toy_file, tiny_config, monkeypatch):
    """4 steps an epoch, a read every 3: after step 3 and at the epoch's end, in one transfer each; no step
    converts a tensor to a Python number (which is a host sync on CUDA)."""
    raw = tiny_config(toy_file, epochs=2)
    raw["train"]["log_every"] = 3
    trainer = Trainer(config_from_dict(raw), tmp_path / "run")
    reads, scalars = [], []
    read = trainer._read_losses
    monkeypatch.setattr(trainer, "_read_losses", lambda epoch: reads.append(epoch) or read(epoch))
    epoch_of = trainer._train_epoch

    def counted(epoch, progress):
        with _ScalarReads() as mode:
            value = epoch_of(epoch, progress)
        scalars.append(mode.count)
        return value

    monkeypatch.setattr(trainer, "_train_epoch", counted)
    trainer.fit()
    assert reads == [0, 0, 1, 1] and trainer.device_reads == 4 and scalars == [0, 0]


def test_a_divergence_between_reads_names_its_first_step(tmp_path, toy_file, tiny_config):
    """A NaN at step 2 of 4 (reads after step 3 and 4) is reported as step 2 at the read after step 3."""
    raw = tiny_config(toy_file, epochs=1)
    raw["train"]["log_every"] = 3
    trainer = Trainer(config_from_dict(raw), tmp_path / "run")
    calls = []

    def loss(surrogate, batch, *_):
        calls.append(1)
        scale = float("nan") if len(calls) >= 2 else 1.0
        return (surrogate(batch[0]) * scale).pow(2).mean()

    trainer.task.drawn_loss = loss
    with pytest.raises(TrainingDiverged, match=r"loss is nan at epoch 1, step 2; training stopped \(no checkpoint"):
        trainer.fit()
    assert len(calls) == 3 and not (tmp_path / "run" / "last.pt").exists()


def test_cuda_graphs_on_the_cpu_is_a_one_line_error(tmp_path, toy_file, tiny_config):
    raw = tiny_config(toy_file, epochs=1)
    raw["train"].update(device="cpu", cuda_graphs=True)
    with pytest.raises(ConfigError, match=r"^train.cuda_graphs: CUDA only \(this run is on cpu\)$"):
        Trainer(config_from_dict(raw), tmp_path / "run")


@pytest.mark.slow
def test_a_killed_streaming_run_leaves_no_loader_worker(tmp_path, toy_file, tiny_config):
    """kill -9 of a trainer reading with 2 worker processes: the workers end within 2 s (torch's own check of
    the parent takes up to 5 s)."""
    raw = tiny_config(toy_file, epochs=50)
    raw["data"].update(memory_gb=1e-9, workers=2)
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(raw))
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "opformer", "train", str(config), "--out", str(run)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    listing = Path("/proc") / str(proc.pid) / "task" / str(proc.pid) / "children"
    deadline, children = time.time() + 120, []
    while len(children) < 2:  # the workers of an epoch under way
        assert proc.poll() is None and time.time() < deadline
        children = [int(c) for c in listing.read_text().split()]
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 2
    while any((Path("/proc") / str(c)).exists() for c in children) and time.time() < deadline:
        time.sleep(0.1)
    assert not [c for c in children if (Path("/proc") / str(c) / "stat").exists()
                and (Path("/proc") / str(c) / "stat").read_text().split()[2] != "Z"]


def test_the_trainer_flushes_subnormal_floats_unless_told_not_to(tmp_path, toy_file, tiny_config):
    if not torch.set_flush_denormal(False):
        pytest.skip("this processor cannot flush subnormal floats to zero")
    tiny = torch.tensor([1e-39])  # below float32's smallest normal number
    try:
        for flush in (False, True):
            config = tiny_config(toy_file, epochs=1)
            config["train"]["flush_denormal"] = flush
            Trainer(config_from_dict(config), tmp_path / str(flush))
            assert ((tiny * 1.0).item() == 0) is flush  # flushed: a subnormal operand reads as 0
    finally:
        torch.set_flush_denormal(False)


def test_divergence_is_the_last_epochs_all_above_a_multiple_of_the_best_before_them():
    assert divergence([0.5, 0.1, 0.9, 0.95, 0.97], 2.0, 3) == (
        "the validation error stayed above 2x its best (0.1, epoch 2) for 3 epochs (train.stop_when_diverged)")
    assert divergence([0.5, 0.1, 0.9, 0.2, 0.97], 2.0, 3) is None  # one of the last at twice the best
    assert divergence([0.5, 0.1, 0.9, 0.21, 0.97], 2.0, 3) is not None
    assert divergence([0.9, 0.95, 0.97], 2.0, 3) is None  # no epoch before the last three


def test_a_run_that_diverges_stops_and_its_summary_says_why(tmp_path, toy_file, tiny_config, monkeypatch):
    """Scripted validation errors: above 2x the best (0.1, epoch 2) from epoch 3; with 3 epochs of patience the
    run stops after epoch 5 of 8, best.pt keeps epoch 2, and resuming trains nothing."""
    raw = tiny_config(toy_file, epochs=8)
    raw["train"].update(stop_when_diverged=2.0, divergence_epochs=3)
    run = tmp_path / "run"
    trainer = Trainer(config_from_dict(raw), run)
    errors = iter([0.5, 0.1, 0.9, 0.95, 0.97, 0.99, 0.99, 0.99])
    monkeypatch.setattr(trainer.task, "validate", lambda *_: next(errors))
    summary = trainer.fit()
    assert summary["epochs"] == 5 and summary["best_epoch"] == 2 and "above 2x its best (0.1, epoch 2)" in (
        summary["diverged"])
    assert len(metrics(run)) == 5 and load_checkpoint(run / "best.pt")["epoch"] == 1
    again = Trainer(config_from_dict(raw), run)
    again.resume()
    assert again.fit()["epochs"] == 5 and "stopped at epoch 5" in (run / "train.log").read_text()
    raw["train"]["stop_when_diverged"] = None  # the same errors without the stop: every epoch
    errors = iter([0.5, 0.1, 0.9, 0.95, 0.97, 0.99, 0.99, 0.99])
    plain = Trainer(config_from_dict(raw), tmp_path / "plain")
    monkeypatch.setattr(plain.task, "validate", lambda *_: next(errors))
    summary = plain.fit()
    assert summary["epochs"] == 8 and summary["diverged"] is None


def test_stop_when_diverged_takes_a_factor_above_1(toy_file, tiny_config):
    raw = tiny_config(toy_file, epochs=1)
    raw["train"]["stop_when_diverged"] = 1.0
    with pytest.raises(ConfigError, match="train.stop_when_diverged"):
        config_from_dict(raw)
