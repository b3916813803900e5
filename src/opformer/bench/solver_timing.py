"""The built-in Burgers solver timed per sample against a surrogate's inference (``opformer bench --solver``)."""

from __future__ import annotations

import time
from typing import Any

from opformer.bench.peers import OPFORMER
from opformer.bench.sweep import BenchSettings, run_child
from opformer.errors import ConfigError

#: ``--solver`` choices -> the surrogate preset timed against the solver when --models names none of its kind.
SOLVER_SURROGATES = {"burgers": "gt_burgers"}


def solver_comparison(settings: BenchSettings, solver: str, progress: Any = print) -> dict[str, Any]:
    """Seconds per sample of the built-in solver versus the surrogate's inference at each resolution.

    The surrogate is the first 1D Burgers model of ``settings.models`` (else ``gt_burgers``), untrained
    (inference costs the same), timed in forward mode in a fresh process like any cell.
    """
    if solver not in SOLVER_SURROGATES:
        raise ConfigError(f"--solver: unknown solver {solver!r}; valid: {', '.join(SOLVER_SURROGATES)}")
    surrogate = next((m for m in settings.models if m.endswith("_burgers")), SOLVER_SURROGATES[solver])
    rows = []
    for resolution in sorted(settings.resolutions):
        spec = {"preset": surrogate, "implementation": OPFORMER, "resolution": resolution,
                "batch": settings.batch, "mode": "forward", "repeats": settings.repeats,
                "warmup": settings.warmup, "threads": settings.threads, "device": settings.device}
        cell = run_child(spec, settings)
        per_sample = cell["seconds_median"] / settings.batch if cell["status"] == "ok" else None
        solver_time = time_burgers_solver(resolution, settings.batch, settings.threads)
        speedup = None if per_sample is None else solver_time / per_sample
        rows.append({"resolution": resolution, "solver_seconds_per_sample": solver_time,
                     "surrogate_seconds_per_sample": per_sample, "speedup": speedup,
                     "surrogate_status": cell["status"]})
        progress(f"{solver} solver n={resolution}: {solver_time:.4g} s/sample; {surrogate}: "
                 + (cell["status"] if per_sample is None else f"{per_sample:.4g} s/sample, speedup {speedup:.1f}x"))
    return {"solver": solver, "surrogate": surrogate, "rows": rows}


def time_burgers_solver(resolution: int, samples: int, threads: int, repeats: int = 3) -> float:
    """Median seconds per sample of the built-in Burgers solver on the paper's data (t = 1) at ``resolution``.

    Initial data are the paper's random fields; the solver runs with the data generator's defaults.
    """
    import numpy as np

    from opformer.pde.burgers import DEFAULT_DT, PAPER_GRF, solve_burgers
    from opformer.pde.grf import color_noise, grf_eigenvalues

    grf = {key: PAPER_GRF[key] for key in ("alpha", "tau", "sigma", "zero_mean")}
    eigenvalues = grf_eigenvalues((resolution,), length=1.0, **grf)
    u0 = color_noise(np.random.default_rng(0).standard_normal((samples, resolution)), eigenvalues)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        solve_burgers(u0, 0.1 / (2 * np.pi), 1.0, dt=DEFAULT_DT, workers=threads)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) / samples
