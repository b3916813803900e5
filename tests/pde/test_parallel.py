"""Solvers stop when asked: threads within one time step of an interrupt, worker processes with their parent."""

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from opformer.pde.burgers import solve_burgers
from opformer.pde.parallel import Stopped, check_stop, thread_imap, thread_map


def test_results_come_in_order_whatever_the_workers():
    def square(item, stop):
        time.sleep(0.01 * (5 - item))  # later items finish first
        return item * item

    assert thread_map(square, list(range(5)), workers=3) == [0, 1, 4, 9, 16]
    assert thread_map(square, [3], workers=1) == [9]


def test_an_interrupted_caller_stops_the_running_calls_within_a_step():
    started, stopped = [], []

    def endless(item, stop):
        started.append(item)
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline:
                check_stop(stop)
                time.sleep(0.005)  # one "time step"
        except Stopped:
            stopped.append(item)
            raise
        return item

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    begin = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            list(thread_imap(endless, list(range(6)), workers=2))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - begin < 2
    assert sorted(started) == sorted(stopped) == [0, 1]  # the queued four never started


def test_a_set_stop_ends_the_burgers_solver():
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopped):
        solve_burgers(np.zeros((2, 16)), 0.1, 1.0, workers=2, stop=stop)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_worker_process_ends_when_its_parent_is_killed():
    code = ("import os, time\n"
            "from opformer.processes import exit_with_parent\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    exit_with_parent(0.05)\n"
            "    time.sleep(60)\n"
            "    os._exit(0)\n"
            "print(pid, flush=True)\n"
            "time.sleep(0.3)\n"
            "os._exit(0)  # like kill -9: no clean-up of the child\n")
    child = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30).stdout)

    def running() -> bool:
        try:
            return Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 10
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running()


def test_a_worker_whose_given_parent_is_already_gone_ends_at_once():
    code = ("import os, time\n"
            "from opformer.processes import exit_with_parent\n"
            "exit_with_parent(0.05, parent=os.getppid() + 1)  # not this process's parent: gone, as far as it knows\n"
            "time.sleep(30)\n")
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], timeout=30)
    assert result.returncode == 1 and time.monotonic() - started < 20
