"""SIGINT and SIGTERM at any moment of `opformer train` from its first line on: exit 130 / 143 with one line,
never a traceback, never a run that carries on as if nothing happened (`-m opformer` runs the console
script's `run()`)."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM: opformer's main() has started (Python sets none itself)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_at_any_moment_of_train_ends_it_with_the_signals_code(tmp_path, toy_file, tiny_config,
                                                                        signum, code):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(tiny_config(toy_file, epochs=200)))
    for attempt, delay in enumerate((0.0, 0.1, 0.3, 0.8, 2.0)):  # from main()'s first line to training
        proc = subprocess.Popen([sys.executable, "-m", "opformer", "train", str(config), "--out",
                                 str(tmp_path / f"run{attempt}")], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not _catches_sigterm(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(delay)
        proc.send_signal(signum)
        returncode = proc.wait(timeout=60)
        err = proc.stderr.read()
        assert returncode == code, (delay, returncode, err)
        assert err.strip().splitlines() == [err.strip()] and "interrupted by" in err, (delay, err)
