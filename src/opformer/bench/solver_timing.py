"""Built-in solvers timed per sample against surrogates' batched inference (``opformer bench --solver NAME``).

A case names a PDE of the registry (:data:`opformer.pde.registry.PDES`); its solver is that PDE's data generator
called with the registry's defaults (what ``opformer generate NAME`` runs), ``workers`` set to the surrogate's
thread count, and, for trajectories, a ``t_final`` that produces exactly the frames the surrogate rolls out. A
surrogate is a model preset timed in forward mode by ``opformer bench``'s cell (a fresh process per batch size,
:func:`opformer.bench.sweep.run_child`) at the batch size fastest per sample; a rollout of ``frames`` frames is
``ceil(frames / t_out)`` calls of the model. Weights are untrained: inference costs the same trained or not.
"""

from __future__ import annotations

import inspect
import math
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opformer.bench.peers import OPFORMER
from opformer.bench.sweep import BenchSettings, run_child
from opformer.errors import ConfigError
from opformer.models.registry import preset
from opformer.pde.registry import PDES, TRAJECTORY

#: Batch sizes tried for a surrogate, in order; the ladder stops at the first that is not faster per sample.
BATCHES = (1, 4, 16, 64, 256)
#: Solver runs are repeated (at most ``SOLVER_REPEATS``) while their total time stays under this many seconds.
SOLVER_BUDGET = 60.0
SOLVER_REPEATS = 3


@dataclass(frozen=True)
class SolverCase:
    """What ``--solver NAME`` compares (``NAME`` is a key of :data:`opformer.pde.registry.PDES`).

    ``surrogates``: preset -> the grid it predicts on (``0``: each ``--resolutions`` value, the 1D case);
    ``settings``: generator keywords besides the registry's defaults (trajectories: the span of the rolled-out
    frames, no spin-up); ``frames``: frames the surrogate rolls out after its given ones (``0``: an operator,
    one call); ``per_worker``: samples per worker in a solver run (``0``: the generator's ``batch_size``, so that
    a run is one block of whole batches);
    ``output``: what the solver produces, in words.
    """

    surrogates: dict[str, int]
    output: str
    settings: dict[str, Any] = field(default_factory=dict)
    frames: int = 0
    per_worker: int = 0


#: ``--solver`` choices: the surrogates of each are the presets of the repository's benchmarks of that PDE.
SOLVER_CASES = {
    "burgers": SolverCase({"gt_burgers": 0, "fno1d_burgers": 0}, "u(., 1) on the n-point grid"),
    "darcy": SolverCase({"gt_darcy": 141, "fno2d_darcy": 141, "factformer_darcy": 85},
                        "u on 421^2 nodes (the data the 141 and 85 grids subsample)", per_worker=8),
    "navier-stokes": SolverCase({"fno2d_time_ns": 64, "ffno2d_ns": 64}, "40 vorticity frames on 64^2",
                                settings={"t_final": 40.0}, frames=40),
    "kolmogorov": SolverCase({"factformer_kolmogorov": 64}, "16 vorticity frames on 64^2 (every 1/16, solved on 256^2)",
                             settings={"t_final": 1.0, "spinup": 0.0}, frames=16),
}


def solver_case(name: str) -> SolverCase:
    """The case of ``--solver name``; ``ConfigError`` (one line) for a name that has none."""
    if name not in SOLVER_CASES:
        raise ConfigError(f"--solver: unknown solver {name!r}; valid: {', '.join(SOLVER_CASES)}")
    return SOLVER_CASES[name]


def model_calls(frames: int, t_out: int) -> int:
    """Calls of a model with ``t_out`` frames per call that roll out ``frames`` frames (an operator: one call)."""
    return max(1, math.ceil(frames / t_out))


def solver_keywords(name: str, threads: int) -> dict[str, Any]:
    """The generator's keywords for ``--solver name``: the registry's defaults, the case's settings and
    ``workers=threads``."""
    return {**PDES[name].defaults, **solver_case(name).settings, "workers": threads}


def solver_samples(name: str, threads: int) -> int:
    """Samples per timed solver run on ``threads`` workers: per worker the case's, else the generator's batch."""
    generator = inspect.signature(PDES[name].generator).parameters
    return (solver_case(name).per_worker or generator["batch_size"].default) * threads


def cpu_seconds() -> float:
    """Processor seconds (user + system) of this process and of its finished children (Darcy's worker processes)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def time_solver(name: str, threads: int, resolution: int, clock: Callable[[], float] = time.perf_counter,
                cpu_clock: Callable[[], float] = cpu_seconds) -> dict[str, Any]:
    """Seconds and processor seconds per sample of ``--solver name``'s generator (:func:`solver_keywords`) storing
    on ``resolution`` points per axis: medians of up to ``SOLVER_REPEATS`` runs of :func:`solver_samples` samples
    while their total stays under ``SOLVER_BUDGET``; with the run's settings and the frames it produced (0 for
    operator data)."""
    keywords = {**solver_keywords(name, threads), "resolution": resolution}
    samples = solver_samples(name, threads)
    times: list[float] = []
    cpu_times: list[float] = []
    while len(times) < SOLVER_REPEATS and sum(times) < SOLVER_BUDGET:
        start, cpu_start = clock(), cpu_clock()
        out = PDES[name].generator(samples, **keywords)
        times.append(clock() - start)
        cpu_times.append(cpu_clock() - cpu_start)
    frames = out[0].shape[1] - 1 if PDES[name].kind == TRAJECTORY else 0
    return {"seconds_per_sample": statistics.median(times) / samples,
            "cpu_seconds_per_sample": statistics.median(cpu_times) / samples, "runs": len(times), "samples": samples,
            "frames": frames, "settings": {key: value for key, value in keywords.items() if value is not None}}


def time_surrogate(model: str, resolution: int, frames: int, settings: BenchSettings,
                   run: Callable[[dict[str, Any], BenchSettings], dict[str, Any]] = run_child) -> dict[str, Any]:
    """Seconds, processor seconds and counted FLOPs per sample of ``model``'s batched inference at ``resolution``,
    rolling out ``frames`` frames: forward cells (``run``) at each of ``BATCHES`` until one takes no less processor
    time per sample (the wall time of a shared machine varies with the other jobs) or is not measured; the least
    is kept. ``status`` is "ok" or the first batch's failure."""
    calls = model_calls(frames, int(preset(model).get("t_out", 1)))
    best: dict[str, Any] = {"status": "not measured"}
    for batch in BATCHES:
        spec = {"preset": model, "implementation": OPFORMER, "resolution": resolution, "batch": batch,
                "mode": "forward", "repeats": settings.repeats, "warmup": settings.warmup,
                "threads": settings.threads, "device": settings.device}
        cell = run(spec, settings)
        if cell["status"] != "ok":
            if best["status"] != "ok":
                best = {"status": cell["status"]}
            break
        cpu_per_sample = cell["cpu_seconds_median"] * calls / batch
        if best["status"] == "ok" and cpu_per_sample >= best["cpu_seconds_per_sample"]:
            break
        best = {"status": "ok", "batch": batch, "calls": calls, "seconds_per_sample": cell["seconds_median"] * calls
                / batch, "cpu_seconds_per_sample": cpu_per_sample,
                "flops_per_sample": cell["flops_per_step"] * calls / batch, "parameters": cell["parameters"]}
    return best


def solver_comparison(settings: BenchSettings, solver: str, progress: Any = print) -> dict[str, Any]:
    """Seconds per sample of the built-in solver of ``solver`` versus each of its surrogates' inference.

    Grids: each surrogate's own (:data:`SOLVER_CASES`), or every ``settings.resolutions`` value for the 1D case,
    where the solver stores on the same grid. Returns the JSON-serialisable comparison (``rows``: one per
    surrogate and grid, with ``speedup`` = solver / surrogate seconds per sample, ``cpu_speedup`` the same of
    processor seconds).
    """
    case = solver_case(solver)
    solvers: dict[int, dict[str, Any]] = {}
    rows = []
    for model, grid in case.surrogates.items():
        for resolution in [grid] if grid else sorted(settings.resolutions):
            storage = resolution if not grid else PDES[solver].defaults["resolution"]
            if storage not in solvers:
                solvers[storage] = time_solver(solver, settings.threads, storage)
                progress(f"{solver} solver, stored grid {storage}: {solvers[storage]['seconds_per_sample']:.4g} "
                         f"s/sample ({solvers[storage]['cpu_seconds_per_sample']:.4g} CPU s; "
                         f"{solvers[storage]['runs']} runs of {solvers[storage]['samples']})")
            timed = solvers[storage]
            surrogate = time_surrogate(model, resolution, case.frames, settings)
            ok = surrogate["status"] == "ok"
            rows.append({"surrogate": model, "resolution": resolution, "solver_grid": storage,
                         "solver_seconds_per_sample": timed["seconds_per_sample"],
                         "solver_cpu_seconds_per_sample": timed["cpu_seconds_per_sample"], **surrogate,
                         "speedup": timed["seconds_per_sample"] / surrogate["seconds_per_sample"] if ok else None,
                         "cpu_speedup": (timed["cpu_seconds_per_sample"] / surrogate["cpu_seconds_per_sample"]
                                         if ok else None)})
            progress(f"{model} n={resolution}: " + (f"{surrogate['seconds_per_sample']:.4g} s/sample "
                     f"({surrogate['cpu_seconds_per_sample']:.4g} CPU s) at batch {surrogate['batch']}, solver / "
                     f"surrogate {rows[-1]['speedup']:.3g} ({rows[-1]['cpu_speedup']:.3g} CPU)" if ok
                     else surrogate["status"]))
    return {"solver": solver, "output": case.output, "frames": case.frames, "threads": settings.threads,
            "solver_runs": {str(key): value for key, value in solvers.items()}, "rows": rows}

