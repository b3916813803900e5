"""The run directory: what is written, what is read back, and the errors for what is missing."""

import json

import pytest

from opformer.config import config_from_dict
from opformer.errors import CheckpointError
from opformer.runs import Run, metrics_csv, run_checkpoint, write_metrics, write_run_config, write_summary


def test_metrics_csv_has_a_header_and_one_row_per_epoch():
    history = [{"epoch": 1, "train_loss": 0.5, "val_relative_l2": 0.25}, {"epoch": 2, "train_loss": 0.125,
                                                                       "val_relative_l2": 0.0625}]
    assert metrics_csv(history).splitlines() == ["epoch,train_loss,val_relative_l2", "1,0.5,0.25", "2,0.125,0.0625"]
    assert metrics_csv([]) == ""
    # a run resumed across a version that records more columns (a mixture's members): older rows leave them empty
    history = [{"epoch": 1, "val_relative_l2": 0.5, "lr": 0.1}, {"epoch": 2, "val_relative_l2": 0.25, "val_a": 0.2,
                                                                "lr": 0.1}]
    assert metrics_csv(history).splitlines() == ["epoch,val_relative_l2,val_a,lr", "1,0.5,,0.1", "2,0.25,0.2,0.1"]


def test_config_metrics_and_summary_round_trip(tmp_path):
    config = config_from_dict({"model": {"name": "fno1d", "width": 8}, "data": {"path": "x.h5", "n_train": 7},
                               "seed": 3})
    write_run_config(tmp_path, config)
    write_metrics(tmp_path, [{"epoch": 1, "seconds": 2.0}])
    write_summary(tmp_path, {"epochs": 1})
    assert Run(tmp_path).config == config
    assert (tmp_path / "metrics.csv").read_text().splitlines() == ["epoch,seconds", "1,2.0"]
    assert (tmp_path / "summary.json").read_text() == '{\n  "epochs": 1\n}\n'
    write_summary(tmp_path, {"best_val_relative_l2": float("nan"), "seconds_per_step": float("inf")})
    assert json.loads((tmp_path / "summary.json").read_text()) == {"best_val_relative_l2": None,
                                                                   "seconds_per_step": None}  # strict JSON
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "metrics.csv", "summary.json"]


def test_missing_run_pieces_are_one_line_errors(tmp_path):
    with pytest.raises(CheckpointError, match="no config.yaml \\(not a run directory\\)"):
        Run(tmp_path).config
    with pytest.raises(CheckpointError, match="no such run directory"):
        run_checkpoint(tmp_path / "absent")
    with pytest.raises(CheckpointError, match="holds no last.pt"):
        run_checkpoint(tmp_path, "last")
    (tmp_path / "best.pt").write_bytes(b"")
    assert run_checkpoint(tmp_path) == tmp_path / "best.pt"


def test_a_checkpoint_with_flipped_bytes_is_refused_and_an_intact_one_loads(tmp_path, toy_file, tiny_config):
    import torch

    from opformer.runs import load_checkpoint
    from opformer.train.trainer import train

    train(config_from_dict(tiny_config(toy_file, epochs=1)), tmp_path / "run")
    path = tmp_path / "run" / "last.pt"
    payload = load_checkpoint(path)
    weight = next(v for v in payload["state_dict"].values() if v.numel() >= 64)
    raw = bytearray(path.read_bytes())
    at = raw.find(weight.reshape(-1)[:16].numpy().tobytes())  # the tensor's bytes lie uncompressed in the file
    assert at > 0
    raw[at:at + 16] = bytes(b ^ 0xFF for b in raw[at:at + 16])
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"corrupt\.pt: corrupt \(its checksum does not match its contents\)"):
        load_checkpoint(corrupt)
    # a checkpoint written before checksums existed (no entry) still loads
    legacy = torch.load(path, weights_only=True)
    del legacy["checksum"]
    torch.save(legacy, tmp_path / "legacy.pt")
    assert load_checkpoint(tmp_path / "legacy.pt")["epoch"] == 0
