"""SIGINT and SIGTERM at any moment of `opformer train`: exit 130 / 143 with one line, never a traceback,
never a run that carries on as if nothing happened (the console script's `run()` is what `-m` runs)."""

import signal
import subprocess
import sys
import time

import pytest
import yaml


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_at_any_moment_of_train_ends_it_with_the_signals_code(tmp_path, toy_file, tiny_config,
                                                                        signum, code):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(tiny_config(toy_file, epochs=200)))
    for attempt, delay in enumerate((0.1, 0.25, 0.5, 1.0, 2.0)):  # from opformer's first lines to training
        proc = subprocess.Popen([sys.executable, "-m", "opformer.cli", "train", str(config), "--out",
                                 str(tmp_path / f"run{attempt}")], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signum)
        returncode = proc.wait(timeout=60)
        err = proc.stderr.read()
        # (a signal in the interpreter's own start-up, the first ~30 ms, gets Python's behaviour, not opformer's)
        assert returncode in (code, -signum), (delay, returncode, err)
        assert "Traceback" not in err, (delay, err)
        if returncode == code:
            assert err.strip().splitlines() == [err.strip()] and "interrupted by" in err, (delay, err)
