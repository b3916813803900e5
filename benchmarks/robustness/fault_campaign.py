"""Fault-injection campaign of the ``opformer`` command (issue 27): bad configs, corrupt files, faults of the OS.

Run from the repository root: ``.venv/bin/python -m benchmarks.robustness.fault_campaign`` (``--jobs 3`` cases at once,
``--work DIR`` keeps the workspace, ``--only FAMILY`` runs one family, ``--render`` rewrites the markdown of
committed results). Every case runs the real CLI, ``python -m opformer ...`` with this tree's ``src`` first on
the module path, in a fresh process of its own session, on tiny data made by ``opformer generate`` and a tiny
run made by ``opformer train``. Per case it records the exit code, the stderr lines, whether a Python traceback
(or a C++/OpenBLAS abort) appeared, whether a file that existed before was changed (SHA-256 before and
after), orphaned processes (processes of the case's session still alive after it ended; they are then killed)
and silent corruption (a corrupt input that gives exit 0 with a result different from the intact input's).
Families:

1. ``config``: bad run configs and ``--set`` values; each is exit 2 with one line naming the key or file.
2. ``corrupt``: byte flips, zeroed ranges and truncations of a data file (train, evaluate, predict, verify) and of
   the checkpoints (evaluate reads best.pt, ``--resume`` last.pt), files of the wrong kind, and empty, 1-byte and
   short text files given to ``convert fno-mat``; exit 2, one line (naming the sample where a stored chunk is
   damaged), or, where a command reads none of the damaged bytes of a data file (its stored checksum; a chunk of
   samples it does not use), exit 0 with the intact file's result.
3. ``faults``: 14 fault families of the OS and of usage (full disk on a tiny tmpfs, read-only output on a
   read-only tmpfs, out of memory under ``ulimit -v``, devices this machine lacks, signals, Ctrl-C and
   ``kill -9`` of generation, stale temporaries, concurrent writers, ...).

Writes benchmarks/results/robustness/fault_campaign.json and .md (the load average before and after is recorded).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import yaml

from benchmarks.harness import ROOT, argument_parser, describe_load, describe_machine, headed, table_head, write_results
from opformer.io import write_atomic

PYTHON = sys.executable
TRACEBACK = "Traceback (most recent call last)"
ABORTS = ("terminate called", "Segmentation fault", "core dumped", "OpenBLAS", "Fatal Python error")
FAMILIES = ("config", "corrupt", "faults")


# Running the CLI.

@dataclass
class Outcome:
    """What one command did."""

    rc: int
    stdout: str
    stderr: str
    seconds: float
    orphans: list[str]


def session_processes(sid: int) -> list[tuple[int, str]]:
    """The processes of session ``sid`` (pid, command line), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, session, ...
            if int(fields[3]) == sid and fields[0] != "Z":
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                found.append((int(entry.name), cmd))
        except (OSError, ValueError, IndexError):
            continue
    return found


class Workspace:
    """The folder every case runs in (its paths are relative to it) and how a command is started there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                        OPENBLAS_NUM_THREADS="1", PYTHONWARNINGS="ignore", TQDM_DISABLE="1")

    def start(self, argv: list[str], ulimit: str = "") -> subprocess.Popen:
        """``python -m opformer ARGV`` in a new session (``ulimit`` options first, e.g. ``-v 400000``)."""
        command = [PYTHON, "-m", "opformer", *argv]
        if ulimit:
            command = ["bash", "-c", f"ulimit {ulimit} && exec {shlex.join(command)}"]
        return subprocess.Popen(command, cwd=self.root, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)

    def finish(self, proc: subprocess.Popen, started: float, timeout: float = 240.0, grace: float = 1.0) -> Outcome:
        """Wait for ``proc`` (killed after ``timeout`` s: rc -9 and a note in stderr); then its session's survivors
        are orphans (waited for ``grace`` s, then killed)."""
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += f"\n[campaign: killed after {timeout:.0f} s, a hang]"
        seconds = time.monotonic() - started
        deadline = time.monotonic() + grace
        while session_processes(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        orphans = [cmd for _, cmd in session_processes(proc.pid)]
        for pid, _ in session_processes(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return Outcome(proc.returncode, out, err, seconds, orphans)

    def cli(self, argv: list[str], ulimit: str = "", timeout: float = 240.0) -> Outcome:
        """Run ``opformer ARGV`` to its end."""
        started = time.monotonic()
        return self.finish(self.start(argv, ulimit), started, timeout)

    def path(self, name: str) -> Path:
        """The absolute path of ``name`` in the workspace."""
        return self.root / name

    def hashes(self, names: list[str]) -> dict[str, str]:
        """SHA-256 of every file under the workspace paths ``names`` (files or folders)."""
        result = {}
        for name in names:
            top = self.path(name)
            for path in sorted([top] if top.is_file() else top.rglob("*") if top.is_dir() else []):
                if path.is_file():
                    result[str(path.relative_to(self.root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        return result


def stderr_lines(text: str) -> list[str]:
    """The non-empty lines of a command's stderr."""
    return [line for line in text.splitlines() if line.strip()]


def command_text(argv: list[str], ulimit: str = "") -> str:
    """How a user types the case: ``opformer ...`` (with its ulimit)."""
    text = "opformer " + shlex.join(argv)
    return f"ulimit {ulimit}; {text}" if ulimit else text


# Cases.

@dataclass
class Case:
    """One case: ``family``, a short ``name``, and ``run(workspace) -> record`` (see :func:`record`)."""

    family: str
    name: str
    run: Callable[[Workspace], dict[str, Any]]
    group: str = ""  # the fault family of a ``faults`` case
    serial: bool = False  # timing-sensitive: run alone
    limitation: bool = False  # a known limitation outside opformer's reach (documented), not a fault family


def record(outcome: Outcome, command: str, expected: str, *, ok: bool, changed: list[str] | None = None,
           silent: bool = False, note: str = "", lines: int | None = 1) -> dict[str, Any]:
    """The record of a case; it passes if ``ok`` and there is no traceback, no abort, no orphan, no changed file,
    no silent corruption and (``lines``) that many stderr lines."""
    errs = stderr_lines(outcome.stderr)
    traceback = TRACEBACK in outcome.stderr
    abort = any(word in outcome.stderr for word in ABORTS) or outcome.rc < 0
    changed = changed or []
    passed = (ok and not traceback and not abort and not outcome.orphans and not changed and not silent
              and (lines is None or len(errs) == lines))
    return {"command": command, "expected": expected, "rc": outcome.rc, "stderr_lines": len(errs),
            "message": (errs[-1] if errs else "")[:300], "traceback": traceback, "abort": abort,
            "changed": changed, "orphans": outcome.orphans, "silent_corruption": silent,
            "seconds": round(outcome.seconds, 1), "note": note, "pass": passed}


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Files of ``before`` that differ or are gone in ``after``."""
    return sorted(name for name, digest in before.items() if after.get(name) != digest)


def refused(argv: list[str], *, must: tuple[str, ...] = (), protect: tuple[str, ...] = (),
            absent: tuple[str, ...] = (), ulimit: str = "", code: int = 2, stdout_empty: bool = False,
            note: str = "") -> Callable[[Workspace], dict[str, Any]]:
    """A case that must exit ``code`` with one stderr line holding every string of ``must``, change no file under
    ``protect``, leave none of ``absent`` behind (and, with ``stdout_empty``, print nothing on stdout)."""

    def run(ws: Workspace) -> dict[str, Any]:
        before = ws.hashes(list(protect))
        outcome = ws.cli(argv, ulimit)
        message = (stderr_lines(outcome.stderr) or [""])[-1]
        left = [name for name in absent if ws.path(name).exists()]
        ok = (outcome.rc == code and all(word in message for word in must) and not left
              and (not stdout_empty or not outcome.stdout.strip()))
        notes = [note] if note else []
        notes += [f"left behind: {', '.join(left)}"] if left else []
        notes += [f"printed on stdout: {outcome.stdout.strip()[:80]!r}"] if stdout_empty and outcome.stdout.strip() \
            else []
        expected = f"exit {code}, one line" + (f" naming {', '.join(repr(w) for w in must)}" if must else "")
        return record(outcome, command_text(argv, ulimit), expected, ok=ok,
                      changed=changed_files(before, ws.hashes(list(protect))), note="; ".join(notes))

    return run


# The workspace's data and run.

DATA, RUN, CONFIG = "data/burgers.h5", "runs/base", "base.yaml"


def tiny_config(data: str) -> dict[str, Any]:
    """A tiny Galerkin Transformer on the tiny Burgers set (n = 32 of the stored 64), two epochs."""
    return {"seed": 0,
            "model": {"name": "galerkin_transformer_1d", "d_model": 16, "n_layers": 1, "dim_ff": 16,
                      "decoder_width": 8, "decoder_modes": 4, "decoder_head_width": 8},
            "data": {"path": data, "resolution": 32, "n_train": 6, "n_val": 3, "n_test": 3},
            "loss": {"name": "h1_relative", "gamma": 0.1},
            "optim": {"lr": 3e-3},
            "schedule": {"name": "onecycle", "pct_start": 0.3, "div_factor": 10, "final_div_factor": 10},
            "train": {"epochs": 2, "batch_size": 3, "num_threads": 1}}


def setup(ws: Workspace) -> dict[str, Any]:
    """Generate the tiny data sets, write the config, train the base run, evaluate and predict with it."""
    steps = [["generate", "burgers", "--samples", "12", "--resolution", "64", "--out", DATA],
             ["generate", "darcy", "--samples", "4", "--resolution", "9", "--workers", "1", "--out", "data/darcy.h5"],
             ["train", CONFIG, "--out", RUN],
             ["evaluate", RUN, "--json", "baseline/eval.json"],
             ["predict", RUN, "--input", DATA, "--output", "baseline/pred.h5"]]
    ws.path(CONFIG).write_text(yaml.safe_dump(tiny_config(DATA)))
    ws.path("baseline").mkdir()
    seconds = {}
    for argv in steps:
        outcome = ws.cli(argv)
        if outcome.rc != 0:
            raise SystemExit(f"setup failed: {command_text(argv)}: exit {outcome.rc}\n{outcome.stderr}")
        seconds[command_text(argv)] = round(outcome.seconds, 1)
    return seconds


def eval_results(path: Path) -> Any:
    """The rows of an ``evaluate --json`` file."""
    return json.loads(path.read_text())["results"]


def metrics(run_dir: Path) -> list[list[str]]:
    """The rows of a run's metrics.csv without the seconds column."""
    return [line.split(",")[:-1] for line in (run_dir / "metrics.csv").read_text().splitlines()]


def same_predictions(a: Path, b: Path) -> bool:
    """Whether two prediction files hold the same arrays."""
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        names = sorted(name for name in fa if isinstance(fa[name], h5py.Dataset))
        return names == sorted(name for name in fb if isinstance(fb[name], h5py.Dataset)) and all(
            np.array_equal(fa[name][()], fb[name][()]) for name in names)


# Family 1: bad configs.

CONFIG_SETS = [  # (--set item, strings the one line must hold)
    ("train.epochs=0", ("train.epochs", "0")), ("train.epochs=-3", ("train.epochs", "-3")),
    ("train.batch_size=0", ("train.batch_size",)), ("train.batch_size=-4", ("train.batch_size", "-4")),
    ("train.eval_batch_size=0", ("train.eval_batch_size",)), ("data.n_train=0", ("data.n_train",)),
    ("data.n_val=0", ("data.n_val",)), ("data.n_test=0", ("data.n_test",)), ("optim.lr=0", ("optim.lr",)),
    ("optim.lr=-1e-3", ("optim.lr",)), ("optim.lr=.nan", ("optim.lr", "nan")), ("optim.betas=[0.9]", ("optim.betas",)),
    ("optim.betas=[0.9, 1.0]", ("optim.betas",)), ("optim.betas=[-0.1, 0.9]", ("optim.betas",)),
    ("optim.weight_decay=-0.1", ("optim.weight_decay",)), ("schedule.pct_start=0", ("schedule.pct_start",)),
    ("schedule.pct_start=1.5", ("schedule.pct_start",)), ("schedule.div_factor=0", ("schedule.div_factor",)),
    ("train.grad_clip=-1", ("train.grad_clip",)), ("train.grad_clip=0", ("train.grad_clip",)),
    ("model.dropout=1.0", ("model.dropout",)), ("model.dropout=-0.1", ("model.dropout",)),
    ("model.d_model=0", ("model.d_model",)), ("model.n_layers=0", ("model.n_layers",)),
    ("model.n_head=1.5", ("model.n_head",)), ("model.decoder_modes=-2", ("model.decoder_modes",)),
    ("train.epochs=ten", ("train.epochs", "ten")), ("optim.lr=fast", ("optim.lr", "fast")),
    ("train.batch_size=[4]", ("train.batch_size",)), ("train.epochz=3", ("epochz",)),
    ("optimizer.lr=1e-3", ("optimizer",)), ("model.preset=no_such_preset", ("no_such_preset",)),
    ("model.name=no_such_model", ("no_such_model",)), ("model.no_such_arg=1", ("no_such_arg",)),
    ("data.resolution=1", ("data.resolution",)), ("data.resolution=48", ("48",)),
    ("data.path=data/missing.h5", ("data/missing.h5",)), ("data.n_train=1000", ("1000",)),
    ("model.in_channels=3", ("channel",)), ("loss.name=l3", ("loss.name", "l3")), ("optim.name=sgd", ("sgd",)),
    ("train.precision=fp8", ("fp8",)), ("data.normalize_input=zscore", ("zscore",)),
    ("train.num_threads=0", ("train.num_threads",)), ("loss.gamma=-0.1", ("loss.gamma",)),
    ("train.device=tpu", ("tpu",)), ("seed=1.5", ("seed",)), ("data=3", ("data",)),
    ("train.epochs=[1", ("--set",)), ("train.epochs", ("--set", "train.epochs")), ("seed.x=1", ("seed",)),
    ("optim.betas={a: 1, a: 2}", ("duplicate key",)),
]

CONFIG_FILES = {  # name -> (file content or None for a folder, strings the one line must hold)
    "binary": (bytes(range(256)) * 4, ("binary",)),
    "empty": (b"", ("empty",)),
    "comment_only": (b"# nothing\n", ("empty",)),
    "duplicate_section": (b"seed: 1\nseed: 2\n", ("duplicate key 'seed'",)),
    "yaml_error": (b"train: {epochs: [1\n", ("not valid YAML",)),
    "top_level_list": (b"- 1\n- 2\n", ("list",)),
    "directory": (None, ("directory",)),
}


def config_cases() -> list[Case]:
    """Bad values through ``--set``, broken files, and the two cases that must train (OneCycle of one epoch)."""
    cases = [Case("config", f"--set {item}", refused(["train", CONFIG, "--out", "runs/bad", "--set", item],
                                                     must=must, absent=("runs/bad",), protect=(DATA, CONFIG)))
             for item, must in CONFIG_SETS]
    cases.append(Case("config", "no config file", refused(["train", "configs/missing.yaml", "--out", "runs/bad"],
                                                          must=("configs/missing.yaml",), absent=("runs/bad",))))
    for name, (content, must) in CONFIG_FILES.items():
        cases.append(Case("config", f"{name} config file", refused(
            ["train", f"configs/{name}.yaml", "--out", "runs/bad", "--set", "train.epochs=1"],
            must=(f"configs/{name}.yaml", *must), absent=("runs/bad",))))
    for section in ("model", "data"):
        cases.append(Case("config", f"config without {section}", refused(
            ["train", f"configs/no_{section}.yaml", "--out", "runs/bad"], must=(section,), absent=("runs/bad",))))
    cases.append(Case("config", "top-level list + --set", refused(
        ["train", "configs/top_level_list.yaml", "--out", "runs/bad", "--set", "train.epochs=1"],
        must=("list",), absent=("runs/bad",))))
    cases.append(Case("config", "epochs=1 OneCycle, 2 steps", trains(
        ["--set", "train.epochs=1", "--set", "data.n_train=2", "--set", "train.batch_size=1"])))
    cases.append(Case("config", "resume of a run without config", refused(
        ["train", "--resume", "runs/nothing"], must=("runs/nothing",), absent=("runs/nothing",))))
    return cases


def write_config_files(ws: Workspace) -> None:
    """The broken config files of :data:`CONFIG_FILES` and the configs without a section."""
    folder = ws.path("configs")
    folder.mkdir()
    for name, (content, _) in CONFIG_FILES.items():
        if content is None:
            (folder / f"{name}.yaml").mkdir()
        else:
            (folder / f"{name}.yaml").write_bytes(content)
    for section in ("model", "data"):
        config = tiny_config(DATA)
        del config[section]
        (folder / f"no_{section}.yaml").write_text(yaml.safe_dump(config))


def trains(sets: list[str]) -> Callable[[Workspace], dict[str, Any]]:
    """A config that must train (exit 0, a best.pt)."""

    def run(ws: Workspace) -> dict[str, Any]:
        out = "runs/ok_" + "_".join(item.split("=")[0].split(".")[-1] for item in sets[1::2])
        argv = ["train", CONFIG, "--out", out, *sets]
        outcome = ws.cli(argv)
        ok = outcome.rc == 0 and ws.path(out).joinpath("best.pt").is_file()
        return record(outcome, command_text(argv), "exit 0, best.pt written", ok=ok, lines=None)

    return run


# Family 2: corrupt files.

def mutate(data: bytes, kind: str, offset: int, size: int = 16) -> bytes:
    """``data`` with ``size`` bytes at ``offset`` flipped (``flip``), zeroed (``zero``) or cut there (``cut``)."""
    if kind == "cut":
        return data[:offset]
    body = bytearray(data)
    end = min(len(body), offset + size)
    for i in range(offset, end):
        body[i] = body[i] ^ 0xFF if kind == "flip" else 0
    return bytes(body)


def data_offsets(path: Path) -> dict[str, int]:
    """Places in the tiny data file: the stored checksum, the HDF5 superblock, object headers, the chunks of a
    training input (sample 0) and of a test target (the last sample), the file's end."""
    with h5py.File(path, "r") as f:
        first_train = f["input"].id.get_chunk_info(0).byte_offset
        last_target = f["target"].id.get_chunk_info(f["target"].id.get_num_chunks() - 1).byte_offset
    data = path.read_bytes()
    headers = next(i for i in range(512 + 64, first_train) if data[i])  # past the superblock, not free space
    return {"checksum": 20, "superblock": 512 + 4, "headers": headers, "train_input": first_train + 40,
            "test_target": last_target + 40, "end": len(data) - 64}


def data_samples(path: Path) -> dict[str, int]:
    """The sample whose stored chunk a mutation at ``train_input``/``test_target`` hits."""
    with h5py.File(path, "r") as f:
        return {"train_input": int(f["input"].id.get_chunk_info(0).chunk_offset[0]),
                "test_target": int(f["target"].id.get_chunk_info(f["target"].id.get_num_chunks() - 1).chunk_offset[0])}


DATA_MUTATIONS = [("flip", "checksum"), ("flip", "superblock"), ("flip", "headers"), ("flip", "train_input"),
                  ("flip", "test_target"), ("zero", "headers"), ("zero", "test_target"),
                  ("cut", "headers"), ("cut", "test_target"), ("cut", "end")]
#: Mutations a command that does not read the damaged bytes may pass through with the intact result: the stored
#: whole-file checksum (in the user block, which no reader reads: ``opformer verify`` checks it) and the data
#: chunks (checked by their fletcher32 checksums when read, not on opening the file).
UNREAD_MAY_PASS = ("checksum", "train_input", "test_target")

CHECKPOINT_MUTATIONS = [("flip", "tensor data"), ("flip", "zip header"), ("flip", "zip directory"),
                        ("zero", "tensor data"), ("cut", "middle"), ("cut", "empty")]


def checkpoint_offset(path: Path, where: str) -> int:
    """An offset in a torch zip checkpoint: a third into its largest tensor's bytes, the CRC and sizes of the
    first local header (which readers ignore: the central directory holds them too), the central directory,
    the middle, 0."""
    import zipfile

    size = path.stat().st_size
    if where == "tensor data":
        with zipfile.ZipFile(path) as z:
            info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
        with open(path, "rb") as f:
            f.seek(info.header_offset + 26)
            name, extra = np.frombuffer(f.read(4), "<u2")
        return info.header_offset + 30 + int(name) + int(extra) + info.file_size // 3
    return {"zip header": 10, "zip directory": size - 60, "middle": size // 2, "empty": 0}[where]


def corrupt_data_case(kind: str, where: str, command: str) -> Case:
    """A data file with one mutation given to ``train``, ``evaluate``, ``predict`` or ``verify``."""
    name = f"{kind}_{where}"
    bad = f"corrupt/{name}.h5"
    if command == "train":
        argv = ["train", CONFIG, "--out", f"runs/corrupt_{name}", "--set", f"data.path={bad}"]
    elif command == "evaluate":
        argv = ["evaluate", RUN, "--data", bad, "--json", f"out/{name}.eval.json"]
    elif command == "predict":
        argv = ["predict", RUN, "--input", bad, "--output", f"out/{name}.pred.h5"]
    else:
        argv = ["verify", bad]
    may_pass = where in UNREAD_MAY_PASS and command != "verify"

    def run(ws: Workspace) -> dict[str, Any]:
        before = ws.hashes([bad, RUN, DATA])
        outcome = ws.cli(argv)
        sample = data_samples(ws.path(DATA)).get(where) if kind == "flip" else None
        silent, note = False, ""
        if outcome.rc == 0:  # harmless only if the result is the intact file's
            if command == "evaluate":
                silent = eval_results(ws.path(f"out/{name}.eval.json")) != eval_results(ws.path("baseline/eval.json"))
            elif command == "predict":
                silent = not same_predictions(ws.path(f"out/{name}.pred.h5"), ws.path("baseline/pred.h5"))
            elif command == "train":
                silent = metrics(ws.path(f"runs/corrupt_{name}")) != metrics(ws.path(RUN))
            else:
                silent = True  # verify reads every byte the checksum covers
            note = "exit 0 with a different result" if silent else \
                "exit 0 with the intact file's result: the command reads none of the damaged bytes"
        message = (stderr_lines(outcome.stderr) or [""])[-1]
        named = bad in message and (sample is None or command == "verify" or f"sample {sample}" in message)
        ok = (outcome.rc == 2 and named) or (outcome.rc == 0 and may_pass and not silent)
        expected = f"exit 2, one line naming {bad}" + (f" (and sample {sample} if it names a chunk)" if sample is not
                                                          None else "")
        if may_pass:
            expected += ", or exit 0 with the intact result if the command reads no damaged byte"
        return record(outcome, command_text(argv), expected, ok=ok, silent=silent,
                      changed=changed_files(before, ws.hashes([bad, RUN, DATA])), note=note,
                      lines=1 if outcome.rc else None)

    return Case("corrupt", f"data {kind} at {where}: {command}", run)


def intact_verify_case() -> Case:
    """``opformer verify`` of the intact data files: exit 0, one ``ok`` line per file, nothing on stderr."""

    def run(ws: Workspace) -> dict[str, Any]:
        files = [DATA, "data/darcy.h5", "baseline/pred.h5"]
        outcome = ws.cli(["verify", *files])
        ok = outcome.rc == 0 and outcome.stdout.splitlines() == [f"{name}: ok" for name in files]
        return record(outcome, command_text(["verify", *files]), "exit 0, one 'ok' line per file", ok=ok,
                      lines=0)

    return Case("corrupt", "intact files: verify", run)


def corrupt_checkpoint_case(kind: str, where: str, command: str) -> Case:
    """A copy of the base run with one mutation of best.pt (``evaluate``) or last.pt (``train --resume``)."""
    run_dir = f"runs/ckpt_{kind}_{where.replace(' ', '_')}_{command}"
    target = "best.pt" if command == "evaluate" else "last.pt"
    argv = (["evaluate", run_dir, "--json", f"out/{Path(run_dir).name}.json"] if command == "evaluate"
            else ["train", "--resume", run_dir, "--set", "train.epochs=3"])

    def run(ws: Workspace) -> dict[str, Any]:
        shutil.copytree(ws.path(RUN), ws.path(run_dir))
        path = ws.path(run_dir) / target
        intact = path.read_bytes()
        path.write_bytes(mutate(intact, kind, checkpoint_offset(path, where)))
        if path.read_bytes() == intact:
            raise RuntimeError(f"{kind} at {where} leaves {target} unchanged")
        before = ws.hashes([run_dir, DATA])
        outcome = ws.cli(argv)
        silent, note = False, ""
        if outcome.rc == 0:  # harmless only if the result is the intact checkpoint's
            if command == "evaluate":
                silent = eval_results(ws.path(f"out/{Path(run_dir).name}.json")) != \
                    eval_results(ws.path("baseline/eval.json"))
            else:
                reference = run_dir + "_intact"
                shutil.copytree(ws.path(RUN), ws.path(reference))
                ws.cli(["train", "--resume", reference, "--set", "train.epochs=3"])
                silent = [metrics(ws.path(r)) for r in (run_dir, reference)] != [metrics(ws.path(reference))] * 2
            note = ("exit 0 with a different result" if silent else
                    "exit 0 with the intact checkpoint's result: these bytes are read by no reader")
        message = (stderr_lines(outcome.stderr) or [""])[-1]
        ok = (outcome.rc == 2 and target in message) or (outcome.rc == 0 and not silent)
        changed = [] if outcome.rc == 0 and command != "evaluate" else \
            changed_files(before, ws.hashes([run_dir, DATA]))  # a resumed run rewrites its files
        return record(outcome, command_text(argv), f"exit 2, one line naming {target}, run unchanged (or exit 0 with "
                      "the intact result)", ok=ok, silent=silent, changed=changed, note=note,
                      lines=1 if outcome.rc else None)

    return Case("corrupt", f"{target} {kind} at {where}: {'evaluate' if command == 'evaluate' else 'resume'}", run)


def wrong_kind_cases() -> list[Case]:
    """Files of the wrong kind where data or checkpoints are expected."""
    cases = []
    for label, bad in (("checkpoint as data", f"{RUN}/best.pt"), ("text file as data", "corrupt/text.h5"),
                       ("empty file as data", "corrupt/empty.h5"), ("folder as data", "corrupt"),
                       ("darcy (2D) data for a 1D run", "data/darcy.h5")):
        cases.append(Case("corrupt", f"{label}: evaluate", refused(
            ["evaluate", RUN, "--data", bad], must=(bad,), protect=(RUN, DATA), stdout_empty=True)))
        if label in ("checkpoint as data", "text file as data"):
            cases.append(Case("corrupt", f"{label}: train", refused(
                ["train", CONFIG, "--out", "runs/wrong_kind", "--set", f"data.path={bad}"], must=(bad,),
                protect=(RUN, DATA), absent=("runs/wrong_kind",))))
            cases.append(Case("corrupt", f"{label}: predict", refused(
                ["predict", RUN, "--input", bad, "--output", "out/wrong_kind.h5"], must=(bad,),
                protect=(RUN, DATA), absent=("out/wrong_kind.h5",))))

    def data_as_checkpoint(ws: Workspace) -> dict[str, Any]:
        shutil.copytree(ws.path(RUN), ws.path("runs/h5_as_ckpt"))
        shutil.copy(ws.path(DATA), ws.path("runs/h5_as_ckpt/best.pt"))
        return refused(["evaluate", "runs/h5_as_ckpt"], must=("best.pt",), protect=("runs/h5_as_ckpt",),
                       stdout_empty=True)(ws)

    cases.append(Case("corrupt", "data file as best.pt: evaluate", data_as_checkpoint))
    return cases


#: Tiny files given to ``opformer convert fno-mat`` (scipy's loadmat raised MatReadError or IndexError on them; on
#: the damaged v5 file, tests/fixtures/mat/damaged_v5.mat, it dies with SIGSEGV): label -> (workspace file, content).
TINY_MAT_FILES = {"empty .mat": ("corrupt/empty.mat", b""), "1-byte .mat": ("corrupt/one_byte.mat", b"M"),
                  "short text file as .mat": ("corrupt/text.mat", b"these are not the data you are looking for\n"),
                  "v5 .mat damaged in one byte (scipy segfaults)": (
                      "corrupt/damaged_v5.mat", (ROOT / "tests" / "fixtures" / "mat" / "damaged_v5.mat").read_bytes())}


def tiny_mat_cases() -> list[Case]:
    """``opformer convert fno-mat`` of the tiny files of :data:`TINY_MAT_FILES`: exit 2, one line, nothing written."""
    cases = []
    for label, (bad, _) in TINY_MAT_FILES.items():
        out = f"out/convert_{Path(bad).stem}.h5"
        cases.append(Case("corrupt", f"{label}: convert fno-mat", refused(
            ["convert", "fno-mat", bad, "--out", out], must=(bad,), protect=(bad, DATA), absent=(out,),
            stdout_empty=True)))
    return cases


def flip_middle(path: Path) -> None:
    """Invert 16 bytes in the middle of ``path`` (its payload, not its header)."""
    data = path.read_bytes()
    path.write_bytes(mutate(data, "flip", len(data) // 2))


def flip_largest_tensor(path: Path) -> None:
    """Invert 16 bytes in the middle of the largest tensor a ``torch.save`` file holds (its stored bytes, not the
    zip's alignment padding, which no load reads)."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as archive:
        entry = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    data = path.read_bytes()
    name_length, extra_length = struct.unpack("<HH", data[entry.header_offset + 26:entry.header_offset + 30])
    start = entry.header_offset + 30 + name_length + extra_length
    path.write_bytes(mutate(data, "flip", start + entry.file_size // 2 - 8))


def prepared(steps: list[list[str]], edit: Callable[[Workspace], None],
             case: Callable[[Workspace], dict[str, Any]]) -> Callable[[Workspace], dict[str, Any]]:
    """A case that first runs the CLI ``steps`` (each must succeed) and ``edit``, then ``case``."""

    def run(ws: Workspace) -> dict[str, Any]:
        for argv in steps:
            outcome = ws.cli(argv)
            if outcome.rc != 0:
                raise SystemExit(f"campaign: {command_text(argv)}: exit {outcome.rc}\n{outcome.stderr}")
        edit(ws)
        return case(ws)

    return run


def forecast_and_sharing_cases() -> list[Case]:
    """The paths of issues 45 and 47: an array of the wrong shape for predict, bounds without a calibration or with
    a damaged one, joint bounds without a coverage, a mixture member named for a run of one data set, calibrating on
    the training split, an exported run of a newer format or with damaged weights, a file that is not The Well's for
    convert the-well."""
    def damaged_calibration(ws: Workspace) -> None:
        shutil.copytree(ws.path(RUN), ws.path("runs/calibrated"))
        if ws.cli(["calibrate", "runs/calibrated"]).rc != 0:
            raise SystemExit("campaign: opformer calibrate runs/calibrated failed")
        flip_largest_tensor(ws.path("runs/calibrated/calibration.pt"))

    def newer(ws: Workspace) -> None:
        config = ws.path("exported/newer/config.json")
        config.write_text(config.read_text().replace('"format_version": 1', '"format_version": 99', 1))

    return [
        Case("corrupt", "array of the wrong shape: predict", refused(
            ["predict", RUN, "--input", "corrupt/wrong_shape.npy", "--output", "out/wrong_shape.npy"],
            must=("wrong_shape.npy",), protect=(RUN,), absent=("out/wrong_shape.npy",), stdout_empty=True)),
        Case("corrupt", "predict --coverage of a run never calibrated", refused(
            ["predict", RUN, "--input", DATA, "--output", "out/uncalibrated.h5", "--coverage", "0.9"],
            must=(RUN,), protect=(RUN, DATA), absent=("out/uncalibrated.h5",), stdout_empty=True)),
        Case("corrupt", "predict --joint without --coverage", refused(
            ["predict", RUN, "--input", DATA, "--output", "out/joint.h5", "--joint"],
            must=("--joint",), protect=(RUN, DATA), absent=("out/joint.h5",), stdout_empty=True)),
        Case("corrupt", "predict --member of a run of one data set", refused(
            ["predict", RUN, "--input", DATA, "--output", "out/member.h5", "--member", "a"],
            must=("--member a", RUN), protect=(RUN, DATA), absent=("out/member.h5",), stdout_empty=True)),
        Case("corrupt", "calibrate on the training split", refused(
            ["calibrate", RUN, "--split", "train"], must=("train",), protect=(RUN,), stdout_empty=True)),
        Case("corrupt", "calibration.pt damaged: predict --coverage", prepared([], damaged_calibration, refused(
            ["predict", "runs/calibrated", "--input", DATA, "--output", "out/damaged_cal.h5", "--coverage", "0.9"],
            must=("calibration.pt",), protect=("runs/calibrated", DATA), absent=("out/damaged_cal.h5",),
            stdout_empty=True))),
        Case("corrupt", "exported run of a newer format: import opformer", prepared(
            [["export", RUN, "exported/newer"]], newer, refused(
                ["import", "opformer", "exported/newer", "--out", "runs/newer"], must=("exported/newer",),
                protect=("exported/newer",), absent=("runs/newer",), stdout_empty=True))),
        Case("corrupt", "exported weights damaged: import opformer", prepared(
            [["export", RUN, "exported/damaged"]],
            lambda ws: flip_middle(ws.path("exported/damaged/model.safetensors")),
            refused(["import", "opformer", "exported/damaged", "--out", "runs/damaged"], must=("exported/damaged",),
                    protect=("exported/damaged",), absent=("runs/damaged",), stdout_empty=True))),
        Case("corrupt", "text file as a Well file: convert the-well", refused(
            ["convert", "the-well", "corrupt/text.h5", "--out", "out/well.h5"], must=("corrupt/text.h5",),
            protect=("corrupt/text.h5",), absent=("out/well.h5",), stdout_empty=True)),
    ]


def write_corrupt_files(ws: Workspace) -> None:
    """Every mutated data file of :data:`DATA_MUTATIONS`, a text file and an empty file, the tiny .mat files."""
    folder = ws.path("corrupt")
    folder.mkdir()
    ws.path("out").mkdir()
    intact = ws.path(DATA).read_bytes()
    offsets = data_offsets(ws.path(DATA))
    for kind, where in DATA_MUTATIONS:
        bad = mutate(intact, kind, offsets[where], 256 if kind == "zero" else 16)
        if bad == intact:
            raise SystemExit(f"campaign: {kind} at {where} leaves the data file unchanged")
        (folder / f"{kind}_{where}.h5").write_bytes(bad)
    (folder / "text.h5").write_text("these are not the data you are looking for\n")
    (folder / "empty.h5").write_bytes(b"")
    for name, content in TINY_MAT_FILES.values():
        ws.path(name).write_bytes(content)
    np.save(ws.path("corrupt/wrong_shape.npy"), np.zeros((2, 7, 3), np.float32))


def corrupt_cases() -> list[Case]:
    """Mutated data files for train/evaluate/predict, mutated checkpoints, files of the wrong kind, tiny .mat
    files for convert."""
    cases = [corrupt_data_case(kind, where, command) for kind, where in DATA_MUTATIONS
             for command in ("train", "evaluate", "predict", "verify")] + [intact_verify_case()]
    cases += [corrupt_checkpoint_case(kind, where, command) for kind, where in CHECKPOINT_MUTATIONS
              for command in ("evaluate", "resume")]
    return cases + wrong_kind_cases() + tiny_mat_cases() + forecast_and_sharing_cases()


# Family 3: faults of the OS and of usage.

def mounted(ws: Workspace, name: str, options: str) -> bool:
    """Mount a tmpfs with ``options`` on the workspace folder ``name`` (root only); whether it worked."""
    folder = ws.path(name)
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    return done.returncode == 0


def unmount(ws: Workspace, name: str) -> None:
    """Unmount the workspace folder ``name`` if it is a mount point."""
    if os.path.ismount(ws.path(name)):
        subprocess.run(["umount", "-l", str(ws.path(name))], capture_output=True)


def fill(folder: Path, leave: int = 2048) -> None:
    """Fill the file system of ``folder`` but ``leave`` bytes."""
    stat = os.statvfs(folder)
    free = stat.f_bavail * stat.f_frsize
    with open(folder / "filler", "wb") as f:
        f.write(b"\0" * max(0, free - leave))


def full_disk_cases(mount_ok: bool) -> list[Case]:
    """No space left: generate, train and evaluate --json onto a 1 MiB tmpfs filled but 2 KiB (root, ``mount``;
    skipped without); and files larger than this process may write (``ulimit -f``: HDF5's failed write at close
    time used to crash the process at exit)."""
    cases = [] if not mount_ok else [
        Case("faults", "generate onto a full disk", refused(
            ["generate", "burgers", "--samples", "64", "--resolution", "1024", "--out", "full/b.h5"],
            must=("full/b.h5",), absent=("full/b.h5",)), "full disk"),
        Case("faults", "train into a full disk", refused(
            ["train", CONFIG, "--out", "full/run", "--set", "model.d_model=64", "--set", "model.dim_ff=256"],
            must=("full/run",), protect=(DATA,)), "full disk"),
        Case("faults", "evaluate --json onto a full disk", refused(
            ["evaluate", RUN, "--json", "full/eval.json"], must=("full/eval.json",), protect=(RUN,),
            absent=("full/eval.json",)), "full disk")]
    return cases + [
        Case("faults", "generate under ulimit -f 256 (KiB)", refused(
            ["generate", "burgers", "--samples", "64", "--resolution", "1024", "--out", "fsize/b.h5"],
            ulimit="-f 256", must=("fsize/b.h5",), absent=("fsize/b.h5",)), "full disk"),
        Case("faults", "predict under ulimit -f 2 (KiB)", refused(
            ["predict", RUN, "--input", DATA, "--output", "fsize/p.h5"], ulimit="-f 2", must=("fsize/p.h5",),
            protect=(RUN, DATA), absent=("fsize/p.h5",)), "full disk"),
        Case("faults", "train under ulimit -f 16 (KiB)", refused(
            ["train", CONFIG, "--out", "fsize/run", "--set", "model.d_model=64", "--set", "model.dim_ff=256"],
            ulimit="-f 16", must=("fsize/run",), protect=(DATA,), absent=("fsize/run/best.pt",)), "full disk")]


def read_only_cases() -> list[Case]:
    """Output into a read-only file system (a tmpfs mounted ro): refused before any work."""
    return [
        Case("faults", "generate into a read-only folder", refused(
            ["generate", "burgers", "--samples", "4", "--resolution", "64", "--out", "ro/b.h5"], must=("ro/b.h5",),
            stdout_empty=True), "read-only output"),
        Case("faults", "train into a read-only folder", refused(
            ["train", CONFIG, "--out", "ro/run"], must=("ro/run",), stdout_empty=True), "read-only output"),
        Case("faults", "predict into a read-only folder", refused(
            ["predict", RUN, "--input", DATA, "--output", "ro/p.h5"], must=("ro/p.h5",), protect=(RUN,),
            stdout_empty=True), "read-only output"),
        Case("faults", "evaluate --json into a read-only folder", refused(
            ["evaluate", RUN, "--json", "ro/e.json"], must=("ro/e.json",), protect=(RUN,), stdout_empty=True),
            "read-only output"),
        Case("faults", "plot into a read-only folder", refused(
            ["plot", RUN, "--out", "ro/plots"], must=("ro/plots",), protect=(RUN,), stdout_empty=True),
            "read-only output"),
    ]


def memory_cases() -> list[Case]:
    """Out of memory under ``ulimit -v``: a model too big for 3 GiB, training in 700 MiB; and (a limitation, not
    counted in the fault families) too little address space to start the native libraries at all, where the
    outcome depends on which library's start-up fails: torch's C++ (``std::bad_alloc``, abort) or SciPy's
    OpenBLAS (its buffer allocation retries forever) fail before any Python code can catch it."""

    def low(mib: int) -> Callable[[Workspace], dict[str, Any]]:
        def run(ws: Workspace) -> dict[str, Any]:
            argv, ulimit = ["train", CONFIG, "--out", f"runs/low_{mib}"], f"-v {mib * 2**10}"
            outcome = ws.cli(argv, ulimit, timeout=45)
            message = (stderr_lines(outcome.stderr) or [""])[-1]
            ok = outcome.rc == 0 or (outcome.rc == 2 and "memory" in message)
            return record(outcome, command_text(argv, ulimit), "exit 2 with one line (or it trains: exit 0)", ok=ok,
                          lines=1 if outcome.rc else None,
                          note=f"stderr: {' | '.join(stderr_lines(outcome.stderr))[:300]}" if outcome.rc else "")
        return run

    cases = [Case("faults", "model too big for ulimit -v 3 GiB", refused(
        ["train", CONFIG, "--out", "runs/oom", "--set", "model.d_model=30000", "--set", "model.dim_ff=30000"],
        ulimit=f"-v {3 * 2**20}", must=("out of memory",), protect=(DATA,)), "out of memory"),
        Case("faults", "train under ulimit -v 700 MiB", low(700), "out of memory")]
    cases += [Case("faults", f"start under ulimit -v {mib} MiB", low(mib), "tiny address space (native start-up)",
                   limitation=True) for mib in (150, 400, 600, 650)]
    return cases


def device_cases() -> list[Case]:
    """Devices this (CPU) machine lacks."""
    return [Case("faults", f"{command} --device {device}", refused(argv, must=(device,), protect=(RUN, DATA),
                                                                   stdout_empty=True, absent=absent), "devices")
            for command, device, argv, absent in (
                ("train", "cuda", ["train", CONFIG, "--out", "runs/dev", "--device", "cuda"], ("runs/dev",)),
                ("evaluate", "mps", ["evaluate", RUN, "--device", "mps"], ()),
                ("predict", "gpu", ["predict", RUN, "--input", DATA, "--output", "out/dev.h5", "--device", "gpu"],
                 ("out/dev.h5",)),
                ("train", "cuda:1", ["train", CONFIG, "--out", "runs/dev", "--device", "cuda:1"], ("runs/dev",)))]


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a SIGTERM handler: opformer's main() has started."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    except OSError:
        pass
    return False


def wait_for(condition: Callable[[], bool], timeout: float, poll: float = 0.01) -> bool:
    """Poll ``condition`` until true or ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(poll)
    return False


def signal_case(signum: signal.Signals, moment: str) -> Case:
    """SIGTERM/SIGINT to ``train`` right after main() starts (torch still importing, ``start``), 0.3 s later
    (``import``), or mid-epoch (after the first checkpoint, ``epoch``): exit 128 + signal, one line; an
    interrupted run then resumes (``--resume``, exit 0)."""
    code = 128 + signum

    def run(ws: Workspace) -> dict[str, Any]:
        out = f"runs/sig_{signum.name}_{moment}"
        argv = ["train", CONFIG, "--out", out, "--set", "train.epochs=400"]
        started = time.monotonic()
        proc = ws.start(argv)
        wait_for(lambda: catches_sigterm(proc.pid) or proc.poll() is not None, 60)
        if moment == "import":
            time.sleep(0.3)
        elif moment == "epoch":
            wait_for(lambda: (ws.path(out) / "last.pt").exists() or proc.poll() is not None, 120)
            time.sleep(0.5)
        proc.send_signal(signum)
        sent = time.monotonic()
        outcome = ws.finish(proc, started, timeout=60)
        stop = time.monotonic() - sent
        message = (stderr_lines(outcome.stderr) or [""])[-1]
        ok = outcome.rc == code and "interrupted by" in message
        note = f"stopped {stop:.1f} s after the signal"
        if ok and (ws.path(out) / "config.yaml").exists():
            epochs = len(metrics(ws.path(out))) - 1 if (ws.path(out) / "metrics.csv").exists() else 0
            resumed = ws.cli(["train", "--resume", out, "--set", f"train.epochs={epochs + 1}"])
            ok = resumed.rc == 0 and len(metrics(ws.path(out))) - 1 == epochs + 1
            note += f"; then --resume --set train.epochs={epochs + 1} (one more epoch): exit {resumed.rc}"
        return record(outcome, f"{command_text(argv)}; kill -{signum.name[3:]} at {moment}",
                      f"exit {code}, one line 'interrupted by {signum.name}'", ok=ok, note=note)

    return Case("faults", f"{signum.name} during train ({moment})", run, "signals during train", serial=True)


def ctrl_c_generation(ws: Workspace) -> dict[str, Any]:
    """Ctrl-C (SIGINT) during the second chunk of a Navier-Stokes generation: stops within seconds, the first
    chunk is kept, a rerun resumes from it and writes the file."""
    out = "gen/ns.h5"
    parts = ws.path("gen/.ns.h5.parts")
    # chunks of 16 trajectories long enough (t = 40: seconds each on one core) that the signal lands inside chunk
    # 2, not after the last one (200 trajectories to t = 4: an idle machine finished all 13 chunks within the
    # second waited, and the signal met the interpreter's shutdown)
    argv = ["generate", "navier-stokes", "--samples", "200", "--resolution", "32", "--t-final", "40", "--out", out]
    started = time.monotonic()
    proc = ws.start(argv)
    wait_for(lambda: (parts / "00000000.npy").exists() or proc.poll() is not None, 200, 0.05)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    outcome = ws.finish(proc, started, timeout=120)
    stop = time.monotonic() - sent
    kept = (parts / "00000000.npy").exists()
    rerun = ws.cli(argv)
    resumed_in = rerun.seconds
    ok = outcome.rc == 130 and stop < 5 and kept and rerun.rc == 0 and ws.path(out).is_file() and not parts.exists()
    return record(outcome, command_text(argv) + "; Ctrl-C during chunk 2; rerun",
                  "exit 130 within 5 s, chunk 1 kept, the rerun resumes", ok=ok,
                  note=f"stopped {stop:.1f} s after SIGINT; chunk 1 kept: {kept}; rerun exit {rerun.rc} in "
                       f"{resumed_in:.0f} s (one chunk)")


def kill_darcy(ws: Workspace) -> dict[str, Any]:
    """``kill -9`` of ``generate darcy`` with 2 worker processes: no worker outlives it (checked 15 s later)."""
    argv = ["generate", "darcy", "--samples", "64", "--resolution", "65", "--workers", "2", "--out", "gen/darcy.h5"]
    started = time.monotonic()
    proc = ws.start(argv)
    wait_for(lambda: len(session_processes(proc.pid)) >= 3 or proc.poll() is not None, 120, 0.05)
    workers = len(session_processes(proc.pid)) - 1
    time.sleep(0.5)
    proc.kill()
    outcome = ws.finish(proc, started, timeout=30, grace=15.0)
    ok = outcome.rc == -9 and workers >= 2 and not ws.path("gen/darcy.h5").exists()
    outcome.rc = 137 if outcome.rc == -9 else outcome.rc  # what a shell reports; not an abort
    return record(outcome, command_text(argv) + "; kill -9 with its workers running",
                  "no worker alive 15 s later, no output file", ok=ok, lines=None,
                  note=f"{workers} worker processes were running")


def stale_temporaries(ws: Workspace) -> dict[str, Any]:
    """Temporaries a ``kill -9`` left (a dead writer's PID) are removed by the next run of the command."""
    ws.path("stale").mkdir(exist_ok=True)
    dead = 4194000  # above the kernel's default pid_max: never a live process
    stale = [ws.path(f"stale/.b.h5.{dead}.abcd1234.tmp"), ws.path(f"stale/.eval.json.{dead}.abcd1234.tmp")]
    for path in stale:
        path.write_bytes(b"partial")
    argvs = [["generate", "burgers", "--samples", "4", "--resolution", "64", "--out", "stale/b.h5"],
             ["evaluate", RUN, "--json", "stale/eval.json"]]
    outcomes = [ws.cli(argv) for argv in argvs]
    left = [path.name for path in stale if path.exists()]
    outcome = outcomes[-1] if outcomes[0].rc == 0 else outcomes[0]
    ok = all(o.rc == 0 for o in outcomes) and not left
    return record(outcome, "; ".join(command_text(a) for a in argvs), "exit 0, the stale temporaries removed",
                  ok=ok, lines=None, note=f"left: {left}" if left else "")


def concurrent_train(ws: Workspace) -> dict[str, Any]:
    """Two ``train --out R`` started at the same moment: one is refused (exit 2, one line), the other trains
    (stopped by SIGTERM once it has written a checkpoint)."""
    argv = ["train", CONFIG, "--out", "runs/race", "--set", "train.epochs=400"]
    started = time.monotonic()
    procs = [ws.start(argv), ws.start(argv)]
    wait_for(lambda: any(p.poll() is not None for p in procs), 120, 0.05)
    refused_ = [p for p in procs if p.poll() is not None]
    other = next(p for p in procs if p not in refused_[:1])
    second = ws.finish(refused_[0], started, timeout=60) if refused_ else None
    wait_for(lambda: (ws.path("runs/race") / "last.pt").exists() or other.poll() is not None, 120)
    running = other.poll() is None
    other.send_signal(signal.SIGTERM)
    done = ws.finish(other, started, timeout=60)
    for proc in procs:  # neither refused: the campaign's failure, nothing left running
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    second = second or done
    message = (stderr_lines(second.stderr) or [""])[-1]
    ok = second.rc == 2 and "runs/race" in message and running and done.rc == 143
    return record(second, command_text(argv) + " (twice at once)", "one of them: exit 2, one line; the other "
                  "trains", ok=ok, note=f"the other one trained: {running}; stopped by SIGTERM: exit {done.rc}")


def changed_resume(ws: Workspace) -> dict[str, Any]:
    """``--resume`` of a run whose stored optimiser settings were edited: refused, nothing changed."""
    shutil.copytree(ws.path(RUN), ws.path("runs/edited"))
    config = yaml.safe_load(ws.path("runs/edited/config.yaml").read_text())
    config["optim"]["lr"] = 0.5
    ws.path("runs/edited/config.yaml").write_text(yaml.safe_dump(config))
    return refused(["train", "--resume", "runs/edited", "--set", "train.epochs=3"], must=("optim",),
                   protect=("runs/edited",))(ws)


def divergence(ws: Workspace) -> dict[str, Any]:
    """A learning rate that makes the loss overflow: one line, naming a checkpoint only if it exists."""
    argv = ["train", CONFIG, "--out", "runs/diverge", "--set", "optim.lr=1e30", "--set", "train.grad_clip=null",
            "--set", "schedule.name=constant"]
    outcome = ws.cli(argv)
    message = (stderr_lines(outcome.stderr) or [""])[-1]
    named = [word.strip("();,") for word in message.split() if word.strip("();,").endswith(".pt")]
    missing = [name for name in named if not ws.path(name).exists()]
    ok = outcome.rc == 2 and "loss is" in message and not missing
    return record(outcome, command_text(argv), "exit 2, one line; a named checkpoint exists", ok=ok,
                  note=f"names a missing checkpoint: {missing}" if missing else "")


def overwrite_cases() -> list[Case]:
    """Existing outputs are not replaced without ``--force``; a non-empty folder that is not a run is no --out."""

    def non_run_folder(ws: Workspace) -> dict[str, Any]:
        ws.path("notarun").mkdir(exist_ok=True)
        ws.path("notarun/thesis.tex").write_text("precious\n")
        return refused(["train", CONFIG, "--out", "notarun"], must=("notarun",), protect=("notarun",))(ws)

    return [
        Case("faults", "generate onto an existing file", refused(
            ["generate", "burgers", "--samples", "4", "--resolution", "64", "--out", DATA], must=("--force",),
            protect=(DATA,), stdout_empty=True), "overwrite refused"),
        Case("faults", "predict onto an existing file", refused(
            ["predict", RUN, "--input", DATA, "--output", DATA], must=("--force",), protect=(DATA, RUN),
            stdout_empty=True), "overwrite refused"),
        Case("faults", "train --out an existing run", refused(
            ["train", CONFIG, "--out", RUN], must=(RUN,), protect=(RUN,)), "overwrite refused"),
        Case("faults", "train --out a non-empty folder that is not a run", non_run_folder, "non-run folder"),
    ]


def fault_cases(mount_ok: bool) -> list[Case]:
    """The 14 fault families."""
    missing_parent = Case("faults", "evaluate --json into a missing folder", refused(
        ["evaluate", RUN, "--json", "nowhere/deeper/e.json"], must=("nowhere/deeper",), protect=(RUN,),
        stdout_empty=True, absent=("nowhere",)), "missing parent")
    cases = [*full_disk_cases(mount_ok), *(read_only_cases() if mount_ok else []), missing_parent,
             *memory_cases(), *device_cases(), *overwrite_cases(),
             Case("faults", "resume with edited optimiser settings", changed_resume, "resume settings"),
             Case("faults", "divergence", divergence, "divergence"),
             Case("faults", "stale temporaries of killed writers", stale_temporaries, "stale temporaries")]
    cases += [signal_case(s, m) for s in (signal.SIGTERM, signal.SIGINT) for m in ("start", "import", "epoch")]
    cases += [Case("faults", "Ctrl-C during navier-stokes generation", ctrl_c_generation,
                   "Ctrl-C during generation", serial=True),
              Case("faults", "kill -9 of generate darcy", kill_darcy, "kill -9 of workers", serial=True),
              Case("faults", "two train --out R at once", concurrent_train, "concurrent writers", serial=True)]
    return cases


# The campaign.

def run_case(ws: Workspace, case: Case) -> dict[str, Any]:
    """Run one case; a failure of the campaign itself is a failed case, not a crash."""
    try:
        result = case.run(ws)
    except Exception as exc:  # the campaign's own error: recorded
        result = {"command": "", "expected": "", "rc": None, "stderr_lines": 0, "message": "", "traceback": False,
                  "abort": False, "changed": [], "orphans": [], "silent_corruption": False, "seconds": 0,
                  "note": f"campaign error: {exc!r}", "pass": False}
    result.update(family=case.family, case=case.name, group=case.group or case.family, limitation=case.limitation)
    print(f"[{'pass' if result['pass'] else 'FAIL'}] {case.family}: {case.name} (exit {result['rc']}, "
          f"{result['seconds']} s) {result['message'][:120]}", flush=True)
    return result


def totals(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Per family: cases passed / run; the fault families passed; tracebacks, aborts, orphans, silent corruptions,
    changed files over all cases but the known limitations (counted apart)."""
    result: dict[str, Any] = {}
    limits = [c for c in cases if c["limitation"]]
    cases = [c for c in cases if not c["limitation"]]
    for family in FAMILIES:
        mine = [c for c in cases if c["family"] == family]
        result[family] = {"passed": sum(c["pass"] for c in mine), "cases": len(mine)}
    groups: dict[str, list[bool]] = {}
    for c in cases:
        if c["family"] == "faults" and not c["limitation"]:
            groups.setdefault(c["group"], []).append(c["pass"])
    result["fault_families"] = {"passed": sum(all(v) for v in groups.values()), "families": len(groups)}
    result["limitations"] = {"passed": sum(c["pass"] for c in limits), "cases": len(limits)}
    result.update(tracebacks=sum(c["traceback"] for c in cases), aborts=sum(c["abort"] for c in cases),
                  orphaned_processes=sum(len(c["orphans"]) for c in cases),
                  silent_corruptions=sum(c["silent_corruption"] for c in cases),
                  cases_changing_files=sum(bool(c["changed"]) for c in cases),
                  one_line_failures=sum(c["stderr_lines"] == 1 for c in cases if "one line" in c["expected"]
                                        and c["rc"] not in (0, None)),
                  failures=sum("one line" in c["expected"] and c["rc"] not in (0, None) for c in cases))
    return result


LIMITATION = ("Under an address-space limit (`ulimit -v`) too small for the native libraries themselves, the "
              "outcome depends on which library's start-up runs out first, and it happens inside the dynamic loader, "
              "before Python code can react: opformer turns a library that cannot be mapped into one line (`cannot "
              "import torch (...)`, exit 2), but torch's C++ start-up can abort (`terminate called after throwing an "
              "instance of 'std::bad_alloc'`, exit 134) and SciPy's bundled OpenBLAS can retry its buffer "
              "allocation forever (a hang, killed here after 45 s). The limits at which each happens depend on the "
              "library builds; torch, NumPy and SciPy need about 700 MiB of address space to start. These cases "
              "are not counted in the totals above; docs/training.md (Troubleshooting) says what to do.")


def to_markdown(result: dict[str, Any]) -> str:
    """The results page: totals per family, then every case."""
    t = result["totals"]
    lines = ["# Fault-injection campaign of the opformer CLI (issue 27)", "",
             f"`{result['command']}` on {describe_machine(result['machine'])}; {describe_load(result)}; "
             f"{result['seconds']:.0f} s in all ({result['jobs']} cases at once). Full disk: {result['full_disk']}.",
             "", "Each case runs `python -m opformer ...` (this tree's `src`) in a fresh process and session on tiny "
             "data made by `opformer generate` and a tiny run made by `opformer train` (setup below). A case passes "
             "when the exit code and message are the expected ones and there is no traceback or abort, no changed "
             "pre-existing file, no orphaned process and no silent corruption.", "",
             "## Totals", "", *table_head("family", "passed"),
             f"| bad configs | {t['config']['passed']}/{t['config']['cases']} |",
             f"| corrupt files | {t['corrupt']['passed']}/{t['corrupt']['cases']} |",
             f"| fault cases | {t['faults']['passed']}/{t['faults']['cases']} |",
             f"| fault families | {t['fault_families']['passed']}/{t['fault_families']['families']} |",
             f"| known limitation: start-up under a tiny ulimit -v (not a family above) | "
             f"{t['limitations']['passed']}/{t['limitations']['cases']} |", "",
             f"Python tracebacks: {t['tracebacks']}; aborts (C++/OpenBLAS text or death by a signal): {t['aborts']}; "
             f"orphaned processes: {t['orphaned_processes']}; silent corruptions: {t['silent_corruptions']}; cases "
             f"that changed a pre-existing file: {t['cases_changing_files']}; failing commands with a one-line "
             f"message: {t['one_line_failures']}/{t['failures']}.", ""]
    lines += ["## Setup", "", *table_head("command", "seconds"),
              *[f"| `{cmd}` | {s} |" for cmd, s in result["setup"].items()], ""]
    sections = [(title, [c for c in result["cases"] if c["family"] == family and not c["limitation"]])
                for family, title in zip(FAMILIES, ("Bad configs", "Corrupt files", "Faults"))]
    sections.append(("Known limitation: too little address space to start the native libraries", [
        c for c in result["cases"] if c["limitation"]]))
    for title, cases in sections:
        lines += [f"## {title}", ""]
        if cases and cases[0]["limitation"]:
            lines += [LIMITATION, ""]
        lines += [*table_head("case", "command", "expected", "observed", "pass")]
        for c in cases:
            observed = f"exit {c['rc']}, {c['stderr_lines']} line(s)" + (f": {c['message']}" if c["message"] else "")
            flags = [word for word, on in (("traceback", c["traceback"]), ("abort", c["abort"]),
                                           ("orphans", c["orphans"]), ("silent corruption", c["silent_corruption"]),
                                           ("changed " + ", ".join(c["changed"]), c["changed"])) if on]
            extra = "; ".join([*flags, *([c["note"]] if c["note"] else [])])
            name = f"{c['group']}: {c['case']}" if c["family"] == "faults" else c["case"]
            cell = (observed + (f" ({extra})" if extra else "")).replace("|", "\\|")
            command = c["command"].replace("|", "\\|")
            lines.append(f"| {name} | `{command}` | {c['expected']} | {cell} | {'pass' if c['pass'] else '**FAIL**'} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--jobs", type=int, default=3, help="cases run at once (timing-sensitive ones run alone)")
    parser.add_argument("--work", default=None, help="workspace folder (default: a temporary one, removed)")
    parser.add_argument("--only", choices=FAMILIES, default=None, help="run one family")
    parser.add_argument("--render", action="store_true",
                        help="only recount the totals and rewrite the markdown of the results JSON in --results")
    args = parser.parse_args()
    if args.render:
        path = Path(args.results) / "fault_campaign.json"
        result = json.loads(path.read_text())
        result["totals"] = totals(result["cases"])
        write_atomic(path, json.dumps(result, indent=2) + "\n")
        write_atomic(path.with_suffix(".md"), headed(to_markdown(result), result["command"]))
        return
    load_before = os.getloadavg()
    tick = time.monotonic()
    root = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="opformer-faults-"))
    if root.exists() and any(root.iterdir()):
        raise SystemExit(f"--work {root}: not empty")
    root.mkdir(parents=True, exist_ok=True)
    ws = Workspace(root)
    mount_ok = mounted(ws, "full", "size=1m") and mounted(ws, "ro", "ro,size=64k")
    try:
        setup_seconds = setup(ws)
        write_config_files(ws)
        write_corrupt_files(ws)
        ws.path("gen").mkdir()
        ws.path("fsize").mkdir()
        if mount_ok:
            fill(ws.path("full"))
        cases = [*config_cases(), *corrupt_cases(), *fault_cases(mount_ok)]
        cases = [c for c in cases if args.only in (None, c.family)]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            records = list(pool.map(lambda c: run_case(ws, c), [c for c in cases if not c.serial]))
        records += [run_case(ws, c) for c in cases if c.serial]
    finally:
        unmount(ws, "full")
        unmount(ws, "ro")
        if not args.work:
            shutil.rmtree(root, ignore_errors=True)
    order = {id(c): i for i, c in enumerate(cases)}
    by_name = {(c.family, c.name): order[id(c)] for c in cases}
    records.sort(key=lambda r: by_name[(r["family"], r["case"])])
    result = {"jobs": args.jobs, "full_disk": "a 1 MiB tmpfs filled but 2 KiB, and ulimit -f" if mount_ok else
              "ulimit -f only (no tmpfs could be mounted: not root?)",
              "setup": setup_seconds, "cases": records, "totals": totals(records),
              "seconds": time.monotonic() - tick}
    write_results(args.results, "fault_campaign", result, to_markdown, load_before, "h5py", "numpy")


if __name__ == "__main__":
    main()
