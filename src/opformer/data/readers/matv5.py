"""MATLAB v5 ``.mat`` files read where a crash cannot take the command down.

scipy's ``loadmat`` parses v5 files in compiled code that trusts the file's size and type tags: flipping one byte
of a small uncompressed file (a tag of an array's dimensions or data element) kills the process with SIGSEGV or
SIGBUS (scipy 1.17: 31 of 3,239 one-byte changes of a 608-byte file, ``benchmarks/robustness/fno_mat_v5.py``). So the
file is read by a child process (``python -m opformer.data.readers.matv5 FILE FOLDER NAME...``, which imports
numpy and scipy only): it writes each numeric variable asked for as a ``.npy`` file (no pickle) into a temporary
folder, which the parent loads. A child killed by a signal is a one-line DataError naming the file and the
signal; one whose ``loadmat`` raises prints the one-line error the parent raises. The cost, measured in
``benchmarks/robustness/fno_mat_v5.py``: the child's start and imports once per file, and one copy of the arrays
through the temporary folder (``TMPDIR``, which needs room for them).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

from opformer.errors import DataError

#: What scipy's ``loadmat`` raises, besides its ``MatReadError``, on a file that is not a whole MATLAB v5 file (a
#: 1-byte file, a short text file, a truncated or damaged one: ``IndexError``, ``OSError``, ``ValueError`` seen).
FAILURES = (ValueError, TypeError, OSError, NotImplementedError, IndexError, KeyError, EOFError, zlib.error,
            MemoryError, OverflowError)
#: The exit code of a child whose loadmat raised (its stderr's last line is the message).
REFUSED = 2


def load_v5(path: Path, names: tuple[str, ...], expected: str) -> dict[str, np.ndarray]:
    """The variables ``names`` of a v5 ``.mat`` file that it holds (numeric arrays), read by a child process;
    a damaged file (even one that crashes scipy) is a one-line DataError naming it (``expected``: the layout in
    words)."""
    size = path.stat().st_size
    if size == 0:
        raise DataError(f"{path}: empty file (0 bytes), expected a MATLAB .mat file with {expected}")
    package = Path(__file__).resolve().parents[3]  # the folder holding the opformer package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(package), os.environ.get("PYTHONPATH"))))}
    with tempfile.TemporaryDirectory(prefix="opformer-mat-") as folder:
        done = subprocess.run([sys.executable, "-m", __name__, str(path), folder, *names], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        last = (done.stderr.strip().splitlines() or [""])[-1]
        if done.returncode < 0:
            number = -done.returncode
            if number in (signal.SIGINT, signal.SIGTERM):
                signal.raise_signal(number)  # the command's own handling of the interrupt
            raise DataError(f"{path}: scipy's MATLAB reader crashed on it ({signal.Signals(number).name}, "
                            f"{size} bytes); the file is damaged: re-copy or re-download it")
        if done.returncode == REFUSED and last.startswith(str(path)):
            raise DataError(last)
        if done.returncode != 0:
            raise DataError(f"{path}: the .mat reader process failed (exit {done.returncode}: {last[:120]})")
        files = {name: Path(folder) / f"{name}.npy" for name in names}
        return {name: np.load(file, allow_pickle=False) for name, file in files.items() if file.is_file()}


def _child(path: Path, folder: Path, names: tuple[str, ...]) -> int:
    """Read ``names`` of ``path`` with scipy and save each as ``folder/NAME.npy``; 0, or :data:`REFUSED` after
    printing a one-line error."""
    import scipy.io

    size = path.stat().st_size
    try:
        variables = scipy.io.loadmat(path, variable_names=names)
    except (scipy.io.matlab.MatReadError, *FAILURES) as exc:
        reason = " ".join(str(exc).split())[:80]
        print(f"{path}: not a readable MATLAB file ({size} byte{'s' * (size != 1)}; scipy: "
              f"{exc.__class__.__name__}{': ' * bool(reason)}{reason}); truncated or not a .mat?", file=sys.stderr)
        return REFUSED
    for name in names:
        value = variables.get(name)
        if value is None:
            continue
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
            print(f"{path}: variable '{name}' is not a numeric array ({getattr(value, 'dtype', type(value))})",
                  file=sys.stderr)
            return REFUSED
        np.save(folder / f"{name}.npy", value, allow_pickle=False)
    return 0


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1]), Path(sys.argv[2]), tuple(sys.argv[3:])))
