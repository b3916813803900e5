"""Training progress: lines on stdout and in train.log without a terminal, the ETA, the session record."""

import io
import json

import pytest

from opformer.config import config_from_dict
from opformer.train.progress import Progress, duration
from opformer.train.trainer import train


def test_durations_read_as_people_write_them():
    assert [duration(s) for s in (7.4, 65, 3600 + 125)] == ["7s", "1m05s", "1h02m"]


def test_without_a_terminal_steps_and_epochs_are_lines(tmp_path, monkeypatch):
    now = [0.0]
    monkeypatch.setattr("opformer.train.progress.time.perf_counter", lambda: now[0])
    out = io.StringIO()  # not a terminal
    progress = Progress(tmp_path, epochs=4, steps=2, first_epoch=2, interval=0.0, stream=out)
    now[0] = 1.0
    progress.begin_epoch(2)
    now[0] = 3.0
    progress.step(8)
    # this session: 1 of its 4 steps in 3 s, so 3 left take 9 s; 8 samples in the 2 s since the epoch began
    assert out.getvalue().splitlines() == ["epoch 3/4 step 1/2 4.0 samples/s ETA 9s"]
    now[0] = 4.0
    progress.step(8)
    progress.end_epoch({"epoch": 3, "train_loss": 0.5, "val_relative_l2": 0.25, "lr": 1e-3, "seconds": 4.0})
    logged = (tmp_path / "train.log").read_text().splitlines()
    assert len(logged) == 1 and logged[0].endswith("epoch 3/4 train_loss 5.0000e-01 val_relative_l2 2.5000e-01 "
                                                   "lr 1.000e-03 4s 5.3 samples/s ETA 4s")  # one epoch left
    assert out.getvalue().splitlines()[-1] == logged[0].split(" ", 1)[1]


def test_a_run_records_its_sessions_and_log_and_a_finished_run_says_so(tmp_path, toy_file, tiny_config, capsys):
    run = tmp_path / "run"
    config = config_from_dict(tiny_config(toy_file, epochs=2))
    train(config, run)
    sessions = json.loads((run / "run.json").read_text())["sessions"]
    assert len(sessions) == 1
    session = sessions[0]
    assert (session["first_epoch"], session["last_epoch"], session["device"]) == (1, 2, "cpu")
    assert session["ended"] >= session["started"] and session["torch"] and session["opformer"] == "0.1.0"
    log = (run / "train.log").read_text()
    assert "started epoch 1 of 2" in log and "epoch 2/2 train_loss" in log
    capsys.readouterr()
    train(config, run, resume=True)
    assert "already trained all 2 epochs; nothing to do" in capsys.readouterr().out
    assert len(json.loads((run / "run.json").read_text())["sessions"]) == 1


@pytest.mark.parametrize("damaged", ["{", '{"sessions": 3}'])
def test_a_damaged_session_record_is_started_afresh(tmp_path, damaged):
    from opformer.runs import end_session, start_session

    (tmp_path / "run.json").write_text(damaged)
    sessions = start_session(tmp_path, "cpu", 0)
    end_session(tmp_path, sessions, 3)
    record = json.loads((tmp_path / "run.json").read_text())["sessions"]
    assert len(record) == 1 and record[0]["last_epoch"] == 3
