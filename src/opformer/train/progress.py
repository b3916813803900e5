"""What a training run tells while it runs: a step bar on a terminal, and the same news as lines in
``RUN/train.log`` (and on stdout when there is no terminal, as under nohup or CI)."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from tqdm.auto import tqdm

LOG = "train.log"

#: the columns every epoch's record has; any other (a mixture member's ``val_<name>``) follows val_relative_l2
_COLUMNS = ("epoch", "train_loss", "val_relative_l2", "lr", "seconds")


def duration(seconds: float) -> str:
    """``seconds`` as ``1h02m``, ``3m05s`` or ``12s``."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Progress of one training session over ``epochs`` epochs of ``steps`` steps each.

    On a terminal a tqdm bar shows the steps of the current epoch with samples/s and the ETA of the run;
    elsewhere the same figures are printed as a line every ``interval`` seconds. The session's start and
    every epoch's result are printed and appended to ``train.log`` in the run directory either way. A
    ``quiet`` progress (of a data-parallel process other than the main one) neither prints nor writes.
    """

    def __init__(self, run_dir: Path, epochs: int, steps: int, first_epoch: int, interval: float = 60.0,
                 stream: TextIO | None = None, quiet: bool = False) -> None:
        self.path = run_dir / LOG
        self.epochs, self.steps, self.first_epoch, self.interval = epochs, steps, first_epoch, interval
        self.stream = stream or sys.stdout
        self.quiet = quiet
        self.terminal = self.stream.isatty() and not quiet
        self.started = time.perf_counter()
        self.bar: Any = None
        self.epoch = first_epoch
        self.step_count = self.samples = 0
        self.epoch_started = self.last_line = self.started
        self.loss: float | None = None  # the epoch's mean training loss at the last read

    def log(self, text: str) -> None:
        """Print a line and append it, time-stamped, to ``train.log``."""
        if self.quiet:
            return
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with open(self.path, "a") as f:
            f.write(f"{stamp} {text}\n")
        print(text, file=self.stream, flush=True)

    def eta(self) -> float:
        """Seconds left in the run, from this session's mean time per step."""
        done = (self.epoch - self.first_epoch) * self.steps + self.step_count
        left = (self.epochs - self.epoch) * self.steps - self.step_count
        return (time.perf_counter() - self.started) / done * left if done else float("nan")

    def begin_epoch(self, epoch: int) -> None:
        """Start the step count of ``epoch`` (0-based)."""
        self.epoch, self.step_count, self.samples, self.loss = epoch, 0, 0, None
        self.epoch_started = time.perf_counter()
        if self.terminal:
            self.bar = tqdm(total=self.steps, desc=f"epoch {epoch + 1}/{self.epochs}", unit="step", leave=False,
                            file=self.stream)

    def note_loss(self, value: float) -> None:
        """The epoch's mean training loss so far, as read from the device at a log point."""
        self.loss = value

    def _news(self, separator: str) -> str:
        loss = [] if self.loss is None else [f"loss {self.loss:.3e}"]
        return separator.join([self._rate(), *loss, f"ETA {duration(self.eta())}"])

    def _rate(self) -> str:
        elapsed = time.perf_counter() - self.epoch_started
        return f"{self.samples / elapsed:.1f} samples/s" if elapsed > 0 else "- samples/s"

    def step(self, samples: int) -> None:
        """One optimiser step of ``samples`` samples is done."""
        self.step_count += 1
        self.samples += samples
        if self.bar is not None:
            self.bar.set_postfix_str(self._news(", "), refresh=False)
            self.bar.update()
        elif not self.quiet and time.perf_counter() - self.last_line >= self.interval:
            self.last_line = time.perf_counter()
            print(f"epoch {self.epoch + 1}/{self.epochs} step {self.step_count}/{self.steps} {self._news(' ')}",
                  file=self.stream, flush=True)

    def end_epoch(self, record: dict[str, float]) -> None:
        """Report an epoch's metrics (a line in the log, and on the terminal above the bar)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        members = "".join(f" {key} {value:.4e}" for key, value in record.items() if key not in _COLUMNS)
        line = (f"epoch {record['epoch']}/{self.epochs} train_loss {record['train_loss']:.4e} "
                f"val_relative_l2 {record['val_relative_l2']:.4e}{members} lr {record['lr']:.3e} "
                f"{duration(record['seconds'])} {self._rate()} ETA {duration(self.eta())}")
        self.log(line)
