"""Progress of counting commands off a terminal: a line at each tenth of the count and on a timer while nothing is
reported."""

import io
import time

from opformer.cli.progress import CountProgress


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_at_each_tenth_with_the_eta():
    stream, clock = io.StringIO(), Clock()
    with CountProgress(20, "generate kolmogorov n=32", stream=stream, interval=1e9, clock=clock) as progress:
        for _ in range(10):
            clock.now += 6.0
            progress.update(2)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10
    assert lines[0] == "generate kolmogorov n=32: 2/20 samples (10%), 6s, ETA 54s"
    assert lines[-1] == "generate kolmogorov n=32: 20/20 samples (100%), 1m00s"


def test_small_updates_print_once_per_tenth():
    stream, clock = io.StringIO(), Clock()
    with CountProgress(1000, "convert", stream=stream, interval=1e9, clock=clock) as progress:
        for _ in range(1000):
            progress.update(1)
    assert len(stream.getvalue().splitlines()) == 10


def test_the_timer_prints_while_a_long_block_reports_nothing():
    stream = io.StringIO()
    with CountProgress(4, "generate", stream=stream, interval=0.05):
        time.sleep(0.3)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3
    assert all(line.startswith("generate: 0/4 samples (0%)") for line in lines)
