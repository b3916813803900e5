"""What every benchmark script shares: its command line, training runs, step timing, metadata and writer.

- Training runs: :func:`train_all` trains ``(config, overrides, run_dir)`` jobs in fresh processes (so each peak
  RSS is its own), resumably; :func:`run_record` is what a results table reports of one.
- Step timing: :func:`time_step` runs one ``opformer bench`` cell (:mod:`opformer.bench.cell`) in a fresh process.
- Results: :func:`write_results` adds the metadata (:func:`metadata`: command, machine, load average before and
  after) to a result and writes ``NAME.json`` and ``NAME.md`` (the markdown made from the JSON alone, so a
  committed result can be re-rendered, and :func:`headed` by its command; :func:`describe_machine` reads the older
  shapes of ``machine`` too). The markdown's pieces: :func:`table_head`, :func:`table_row`, :func:`quantity_table`,
  :func:`page`.

Each script is run from the repository root as a module, ``python -m benchmarks.PURPOSE.NAME``, and imports this
one as ``benchmarks.harness``. Its results go to the same folders under ``benchmarks/results/``, named for it:
``benchmarks/papers/galerkin/burgers.py`` writes ``benchmarks/results/papers/galerkin/burgers.{json,md}`` (a
variant of a run adds ``_VARIANT`` to the name).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import importlib.metadata
import json
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import yaml

from opformer.io import write_atomic
from opformer.processes import exit_with_parent

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GIB = 2.0**30
Key = TypeVar("Key", bound=Hashable)


# The command line.

def script() -> Path:
    """The running script's path from the repository root (``benchmarks/PURPOSE/NAME.py``)."""
    path = Path(sys.argv[0]).resolve()
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else Path("benchmarks") / path.name


def results_folder() -> Path:
    """The folder of the running script's results: its folder under ``benchmarks/`` mirrored under
    ``benchmarks/results/``."""
    return RESULTS / script().parent.relative_to("benchmarks")


def argument_parser(doc: str, parallel: bool = False, runs: str | None = None) -> argparse.ArgumentParser:
    """A script's argument parser with its docstring as help and ``--results`` (default :func:`results_folder`);
    ``parallel`` adds ``--jobs`` and ``--threads`` (the training benchmarks); ``runs`` (what the runs are, e.g.
    "inverse Darcy") adds ``--data`` and ``--runs``, a list of finished run directories (the scripts that measure
    trained runs)."""
    result = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    result.add_argument("--results", default=str(results_folder()), help="folder of the results JSON and markdown")
    if runs is not None:
        result.add_argument("--data", required=True, help="the data file the runs were trained on")
        result.add_argument("--runs", required=True, type=lambda text: text.split(","),
                            help=f"comma-separated finished {runs} run directories")
    if parallel:
        result.add_argument("--jobs", type=int, default=2, help="runs trained at once")
        result.add_argument("--threads", type=int, default=None,
                            help="threads per run (default: cores / jobs; give 1 when another job shares the cores)")
    return result


def listed(text: str, known: Sequence[str], option: str) -> list[str]:
    """The comma-separated names of ``text``, each one of ``known``; an unknown one ends the script naming
    ``option`` and what it expects."""
    names = text.split(",")
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise SystemExit(f"{option}: unknown {', '.join(unknown)}; expected some of {', '.join(known)}")
    return names


def per_model_epochs(text: str, models: list[str]) -> dict[str, int]:
    """The ``--epochs`` of a benchmark: ``"40"`` -> 40 for every model; ``"fno2d=60,ffno=4"`` -> those (every
    model must be given)."""
    if "=" not in text:
        return dict.fromkeys(models, int(text))
    epochs = {name: int(value) for name, value in (item.split("=") for item in text.split(","))}
    missing = [model for model in models if model not in epochs]
    if missing:
        raise SystemExit(f"--epochs: no budget for {', '.join(missing)} (expected model=N for every model)")
    return epochs


# Training runs.

def train_one(config: str, sets: list[str], run_dir: str, threads: int, parent: int) -> dict[str, Any]:
    """Train (or resume) one run in this (fresh) process; its summary with the peak RSS and threads."""
    from opformer.config import load_config
    from opformer.train.trainer import train

    exit_with_parent(2.0, parent)  # an orphaned run would hold a core for hours; it resumes from its checkpoint
    resume = (Path(run_dir) / "config.yaml").exists()
    # the threads in the run's config, so that a reader of the finished run (:func:`finished`) knows them
    summary = train(load_config(config, [*sets, f"train.num_threads={threads}"]), run_dir, resume=resume)
    summary["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    summary["threads"] = threads
    return summary


def finished(run: str | Path) -> dict[str, Any] | None:
    """The summary of a run trained to its end (its ``summary.json``; by an earlier invocation or a resumable queue
    across sessions), with what such a run does not record (peak RSS: None; threads: its config's, None where it
    has none) and ``read``: True; None for a run not finished."""
    run = Path(run)
    if not (run / "summary.json").is_file():
        return None
    threads = (yaml.safe_load((run / "config.yaml").read_text()).get("train") or {}).get("num_threads")
    return {**json.loads((run / "summary.json").read_text()), "peak_rss_gib": None, "threads": threads, "read": True}


def to_measure(jobs: dict[Key, str], summaries: dict[str, dict[str, Any]], tabulated: Iterable[Key]) -> list[Key]:
    """The keys of ``jobs`` (a row's name or key: its run folder) whose rows an invocation measures: each run it
    trained, and each run it read (:func:`finished`) that the results have no row of. A read run's row in the results
    stands, so that its load, wall time and timings stay those measured beside its training."""
    tabulated = set(tabulated)
    return [name for name, run in jobs.items() if not (summaries[run].get("read") and name in tabulated)]


def gib(value: float | None) -> str:
    """A peak memory in GiB as a table shows it; ``-`` where it was not measured (a run read, not trained here)."""
    return "-" if value is None else f"{value:.2f}"


def train_all(jobs: list[tuple[str, list[str], str]], parallel: int, threads: int | None = None
              ) -> dict[str, dict[str, Any]]:
    """Train ``(config, overrides, run_dir)`` jobs, ``parallel`` at a time, each with ``threads`` threads (default:
    the machine's cores shared out) in a process of its own; return the summaries by run directory. A run trained
    to its end already is read (:func:`finished`), not trained again."""
    summaries = {run: finished(run) for _, _, run in jobs}
    left = [job for job in jobs if summaries[job[2]] is None]
    context = multiprocessing.get_context("spawn")
    threads = threads or max(1, (os.cpu_count() or 1) // parallel)
    with concurrent.futures.ProcessPoolExecutor(parallel, mp_context=context, max_tasks_per_child=1) as pool:
        futures = {pool.submit(train_one, config, sets, run, threads, os.getpid()): run for config, sets, run in left}
        summaries.update({futures[f]: f.result() for f in concurrent.futures.as_completed(futures)})
    return summaries


def run_record(summary: dict[str, Any], config: str, sets: list[str]) -> dict[str, Any]:
    """What a results table reports of a trained run: its config, size, budget, speed and memory."""
    return {"config": str(Path(config).relative_to(ROOT)), "overrides": sets, "parameters": summary["parameters"],
            "epochs": summary["epochs"], "best_epoch": summary["best_epoch"],
            "seconds_per_step": summary["seconds_per_step"], "train_hours": summary["train_seconds"] / 3600,
            "peak_rss_gib": summary["peak_rss_gib"], "threads": summary["threads"],
            "best_val_relative_l2": summary["best_val_relative_l2"]}


# Step timing.

def time_step(preset: str, resolution: int, batch: int, threads: int, mode: str = "train", repeats: int = 3,
              warmup: int = 1, src: str | None = None) -> dict[str, Any]:
    """One ``opformer bench`` cell of an opformer preset on the CPU, in a fresh process (its peak RSS its own)
    with ``threads`` threads; ``src`` puts another source tree first on the module path. Its result fields
    (``seconds_median``, ``peak_memory_bytes``, ...); a cell that was not measured ends the script."""
    spec = {"preset": preset, "implementation": "opformer", "resolution": resolution, "batch": batch, "mode": mode,
            "repeats": repeats, "warmup": warmup, "threads": threads, "device": "cpu"}
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), **({"PYTHONPATH": src} if src else {}))
    tree = Path(src) if src else ROOT / "src"
    module = "opformer.bench.cell" if (tree / "opformer" / "bench" / "cell.py").exists() \
        else "opformer.eval.bench_cell"  # a tree from before opformer.bench
    out = subprocess.run([sys.executable, "-m", module, json.dumps(spec)], env=env, capture_output=True, text=True,
                         check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["status"] != "ok":
        raise SystemExit(f"{src or 'opformer'}: {preset} at {resolution}: {result['status']}")
    return result


# Results.

def relative_l2(u: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Relative L2 error of each sample (the first axis), in float64."""
    u, ref = (np.asarray(a, np.float64).reshape(len(a), -1) for a in (u, ref))
    return np.linalg.norm(u - ref, axis=1) / np.linalg.norm(ref, axis=1)


def median_seconds(call: Callable[[], Any], repeats: int) -> float:
    """The median wall time of ``call()`` over ``repeats`` calls after one warm-up call."""
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def kept_rows(results: str | Path, name: str, rows: dict[str, dict[str, Any]], key: str = "runs",
              order: Callable[[dict[str, Any]], Any] | None = None) -> list[dict[str, Any]]:
    """The list ``key`` of the results ``name``.json in ``results`` after this invocation: its ``rows`` (by their
    ``name``) in place of earlier rows of the same name, the other earlier rows kept, sorted by ``order`` (default:
    the name). A script that measures some runs at a time fills one table."""
    known = {row["name"]: row for row in earlier(results, name).get(key, [])} | rows
    return sorted(known.values(), key=order or (lambda row: row["name"]))


def merged_runs(previous: list[dict[str, Any]], rows: dict[str, dict[str, Any]], order: list[str]
                ) -> list[dict[str, Any]]:
    """A results file's rows of runs: the new ``rows`` (by name), and the ``previous`` ones of the runs not redone,
    in ``order``."""
    by_name = {row["name"]: row for row in previous} | {name: row for name, row in rows.items() if name in order}
    return [by_name[name] for name in order if name in by_name]


def machine(*libraries: str) -> dict[str, Any]:
    """What the results were measured on: cores, processor, Python, and the versions of torch and ``libraries``."""
    return {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            **{name: importlib.metadata.version(name) for name in ("torch", *libraries)}}


def describe_machine(info: dict[str, Any] | str) -> str:
    """The machine of a result in words: "2 cores, x86_64, torch 2.5.1, numpy 2.1.0" (the versions of the
    libraries it names). Reads the older shapes too: a sentence (kept), ``cores`` for ``cpus``, no ``processor``."""
    if isinstance(info, str):
        return info
    words = [f"{info.get('cpus', info.get('cores'))} cores", *([info["processor"]] if "processor" in info else [])]
    words += [f"{name} {value}" for name, value in info.items() if isinstance(value, str)
              and name not in ("processor", "python")]
    return ", ".join(words)


def timing_log(path: Path) -> dict[str, dict[str, Any]]:
    """``name -> {seconds, load_start, load_end, KEY: int ...}`` from a log of lines ``NAME seconds S load_start A
    B C load_end D E F [KEY N ...]`` (benchmarks/papers/dpot/generate_mixture.sh, runs.sh); a name's last line
    wins."""
    out = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            words = line.split()
            out[words[0]] = {"seconds": float(words[2]), "load_start": [float(w) for w in words[4:7]],
                             "load_end": [float(w) for w in words[8:11]],
                             **{key: int(value) for key, value in zip(words[11::2], words[12::2])}}
    return out


def joined_loads(values: Sequence[float]) -> str:
    """Load averages as the results show them: "a / b / c", two decimals each."""
    return " / ".join(f"{v:.2f}" for v in values)


def describe_load(result: dict[str, Any]) -> str:
    """The load averages a result's :func:`metadata` recorded: "load average (1/5/15 min) before a / b / c,
    after d / e / f"."""
    before, after = (joined_loads(result[key]) for key in ("loadavg_before", "loadavg_after"))
    return f"load average (1/5/15 min) before {before}, after {after}"


def anonymous_kib() -> int:
    """This process's anonymous resident memory (KiB): what it allocated, not the page cache of its files or the
    pages of its memory maps."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssAnon"))


@contextlib.contextmanager
def anonymous_rise() -> Iterator[dict[str, float]]:
    """Sample :func:`anonymous_kib` every 5 ms while the block runs; on exit ``result["mib"]`` is the peak's rise
    over the value at entry (MiB)."""
    start, peak, finished, result = anonymous_kib(), [0], threading.Event(), {"mib": 0.0}

    def watch() -> None:
        while not finished.is_set():
            peak[0] = max(peak[0], anonymous_kib())
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        yield result
    finally:
        finished.set()
        watcher.join()
        result["mib"] = (max(peak[0], anonymous_kib()) - start) / 1024


def module() -> str:
    """The running script's module name, ``benchmarks.PURPOSE.NAME``."""
    return ".".join(script().with_suffix("").parts)


def command() -> str:
    """The command line of the running script, as a results file records it: ``python -m benchmarks.PURPOSE.NAME
    ARGS``."""
    return " ".join(["python", "-m", module(), *sys.argv[1:]])


def metadata(load_before: Sequence[float], *libraries: str) -> dict[str, Any]:
    """A result's metadata: the script's :func:`command`, the :func:`machine` (with ``libraries``), the load
    average before (``load_before``, ``os.getloadavg()`` at the start) and now."""
    return {"command": command(), "machine": machine(*libraries), "loadavg_before": list(load_before),
            "loadavg_after": list(os.getloadavg())}


def table_head(*columns: str) -> list[str]:
    """The first two markdown lines of a table of ``columns``."""
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def seed_runs(name: str, seeds: Sequence[int], only_seeds: bool = False) -> list[tuple[str, int | None, list[str]]]:
    """The runs of the config ``name`` over seeds, ``(run, seed, overrides)``: the run ``name`` at its config's seed
    (seed None; not with ``only_seeds``), then ``NAME_seedS`` with the override ``seed=S`` for each of ``seeds``."""
    return ([] if only_seeds else [(name, None, [])]) + [(f"{name}_seed{seed}", seed, [f"seed={seed}"])
                                                         for seed in seeds]


def add_only_seeds(parser: argparse.ArgumentParser) -> None:
    """``--only-seeds``: train and measure only the ``--seeds`` runs, keeping the earlier rows of the configs' own
    seeds (check it with :func:`chosen_seeds`)."""
    parser.add_argument("--only-seeds", action="store_true",
                        help="train and measure only the --seeds runs; keep the earlier rows of the configs' seeds")


def chosen_seeds(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[int]:
    """The seeds of ``--seeds`` (comma-separated); a usage error for ``--only-seeds`` without them."""
    if getattr(args, "only_seeds", False) and not args.seeds:
        parser.error("--only-seeds needs --seeds")
    return [int(seed) for seed in args.seeds.split(",") if seed]


def seed_of(row: dict[str, Any], config: str | Path | None = None) -> int:
    """A row's seed: its own, or (rows from before ``--seeds``) that of its config (``config``, else the row's
    own ``config`` under the repository) with the row's ``overrides``."""
    if "seed" in row:
        return row["seed"]
    from opformer.config import load_config

    return load_config(config or ROOT / row["config"], row.get("overrides", [])).seed


def seed_spread(groups: dict[str, list[tuple[int, list[float]]]], columns: Sequence[str], exponent: int
                ) -> list[str]:
    """The markdown of the mean and sample standard deviation of each model's values over its seeds, in units of
    10^-``exponent``: ``groups`` maps a model to its ``(seed, values)``, one value per column; a model of one seed
    gets no row, and no model of two seeds or more no table."""
    seeded = {model: group for model, group in groups.items() if len(group) > 1}
    if not seeded:
        return []
    lines = ["", f"Over seeds: mean +- sample standard deviation (x 1e-{exponent}) of the test error.", "",
             *table_head("model", "seeds", *columns)]
    for model, group in seeded.items():
        cells = []
        for i in range(len(columns)):
            values = [row[i] * 10 ** exponent for _, row in group]
            cells.append(f"{statistics.mean(values):.3f} +- {statistics.stdev(values):.3f}")
        lines.append(table_row(model, ", ".join(str(seed) for seed, _ in group), *cells))
    return lines


def table_row(*cells: object) -> str:
    """One markdown table line of ``cells``."""
    return "| " + " | ".join(map(str, cells)) + " |"


def page(lines: list[str], note: str | None = None) -> str:
    """A results markdown page: its ``lines`` and, after a blank line, the paragraph ``note``; ends in a newline."""
    return "\n".join([*lines, *(["", note] if note is not None else [])]) + "\n"


def quantity_table(rows: list[tuple[str, str]]) -> list[str]:
    """Markdown lines of a two-column "quantity | value" table."""
    return [*table_head("quantity", "value"), *[f"| {name} | {value} |" for name, value in rows]]


def headed(text: str, command: str) -> str:
    """A results markdown ``text`` headed by its command: a ``Command: `COMMAND``` line after the title, unless a
    line of its header (the lines before the first table or section) starts with "Command" already."""
    lines = text.split("\n")
    end = next((i for i, line in enumerate(lines) if line.startswith(("|", "## "))), len(lines))
    if any(line.startswith("Command") for line in lines[:end]):
        return text
    return "\n".join([*lines[:1], "", f"Command: `{command}`", *lines[1:]])


def earlier(results: str | Path, name: str) -> dict[str, Any]:
    """The results ``name``.json in the folder ``results`` as earlier invocations left it ({} if none): a script
    that measures one case or model at a time keeps the others'."""
    path = Path(results) / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def write_results(results: str | Path, name: str, result: dict[str, Any], markdown: Callable[[dict[str, Any]], str],
                  load_before: Sequence[float], *libraries: str) -> None:
    """Add the metadata (:func:`metadata`) to ``result``; write ``name``.json and ``name``.md (``markdown`` of the
    JSON, :func:`headed` by its command) into the folder ``results``, each atomically; print the markdown."""
    result.update(metadata(load_before, *libraries))
    folder = Path(results)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{name}.json", json.dumps(result, indent=2) + "\n")
    text = headed(markdown(json.loads(json.dumps(result))), result["command"])  # exactly what the JSON holds
    write_atomic(folder / f"{name}.md", text)
    print(text)
