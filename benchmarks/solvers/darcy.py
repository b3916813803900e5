"""Time and verify the Darcy data generation (target: 1224 samples at 421 x 421 in 10 minutes on 2 cores).

Run from the repository root: ``.venv/bin/python -m benchmarks.solvers.darcy`` (defaults: the paper-size set,
1224 samples at n = 421, written to data/darcy_421.h5).  First profiles one sample's stages on one core,
then generates the set with ``generate_file("darcy", ...)`` (as ``opformer generate darcy`` does), then verifies:
relative residuals of every solve, AMG against a direct LU solve on a few stored samples, and the observed
order on the manufactured solution.  Writes benchmarks/results/solvers/darcy.json and .md.  Other people's jobs
share the machine: the load average before and after is recorded.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pyamg
from threadpoolctl import threadpool_limits

from benchmarks.harness import ROOT, argument_parser, joined_loads, quantity_table, write_results
from opformer.data.generate import generate_file
from opformer.pde.darcy import (
    DEFAULT_TOLERANCE,
    PAPER_GRF,
    assemble_darcy,
    default_workers,
    observed_order,
    solve_darcy,
    threshold_coefficient,
)
from opformer.pde.grf import cosine_synthesis, neumann_grf_variances

N_PROFILE = 3
N_CHECK = 2


def profile(n: int) -> dict[str, float]:
    """Mean seconds per sample of each stage, one core."""
    grf = {key: PAPER_GRF[key] for key in ("alpha", "tau", "sigma", "zero_mean")}
    tick = time.perf_counter()
    variances = neumann_grf_variances(n, 2, **grf)
    stages = {"grf_variances_once": time.perf_counter() - tick, "grf_sample": 0.0, "assembly": 0.0,
              "amg_setup": 0.0, "amg_solve": 0.0, "direct_lu": 0.0}
    rng = np.random.default_rng(1)
    with threadpool_limits(1):
        for _ in range(N_PROFILE):
            tick = time.perf_counter()
            a = threshold_coefficient(cosine_synthesis((rng.standard_normal((n, n)) * np.sqrt(variances))[None])[0])
            stages["grf_sample"] += time.perf_counter() - tick
            tick = time.perf_counter()
            matrix = assemble_darcy(a)
            stages["assembly"] += time.perf_counter() - tick
            tick = time.perf_counter()
            hierarchy = pyamg.ruge_stuben_solver(matrix)
            stages["amg_setup"] += time.perf_counter() - tick
            tick = time.perf_counter()
            hierarchy.solve(np.ones(matrix.shape[0]), tol=DEFAULT_TOLERANCE, accel="cg")
            stages["amg_solve"] += time.perf_counter() - tick
        tick = time.perf_counter()
        solve_darcy(a, solver="direct")
        stages["direct_lu"] = time.perf_counter() - tick
    return {k: (v / N_PROFILE if k not in ("grf_variances_once", "direct_lu") else v) for k, v in stages.items()}


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--samples", type=int, default=1224)
    parser.add_argument("--resolution", type=int, default=421)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--out", default=str(ROOT / "data" / "darcy_421.h5"))
    args = parser.parse_args()
    workers = default_workers() if args.workers is None else args.workers

    load_before = os.getloadavg()
    stages = profile(args.resolution)
    print("per-sample stages (s, one core):", {k: round(v, 3) for k, v in stages.items()}, flush=True)

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()
    start = time.perf_counter()
    generate_file("darcy", args.out, args.samples, resolution=args.resolution, seed=0, workers=workers)
    seconds = time.perf_counter() - start
    print(f"generated {args.samples} samples in {seconds:.1f} s", flush=True)

    with h5py.File(args.out, "r") as file:
        solver = json.loads(file.attrs["solver"])
        a = file["input"][:N_CHECK, ..., 0].astype(np.float64)
        u = file["target"][:N_CHECK, ..., 0].astype(np.float64)
        values = np.unique(file["input"][:16])
        fraction_high = float((file["input"][:64] == 12).mean())  # first 64 samples
    lu_difference = max(float(np.abs(solve_darcy(a[i], solver="direct") - u[i]).max() / np.abs(u[i]).max())
                        for i in range(N_CHECK))
    errors, orders = observed_order((65, 129, 257))

    result = {
        "loadavg_at_generation_start": list(load_start),
        "samples": args.samples,
        "resolution": args.resolution,
        "workers": workers,
        "output": os.path.relpath(args.out, ROOT),
        "seconds": seconds,
        "samples_per_second": args.samples / seconds,
        "wall_seconds_per_sample": seconds / args.samples,
        "per_sample_stage_seconds_one_core": stages,
        "solver": solver,
        "coefficient_values": values.tolist(),
        "fraction_a_equal_12": fraction_high,
        "max_relative_residual": solver["max_relative_residual"],
        "amg_vs_direct_lu_max_relative_difference": lu_difference,
        "manufactured_solution": {"sizes": [65, 129, 257], "max_errors": errors, "observed_orders": orders},
        "target_seconds": 600,
    }
    write_results(args.results, "darcy", result, markdown, load_before, "numpy", "scipy", "pyamg")


def markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table of quantities."""
    stages, solver, seconds = result["per_sample_stage_seconds_one_core"], result["solver"], result["seconds"]
    # 1-min load averages before, at the generation's start and after (before benchmarks/harness.py: load_average_*)
    loads = [result.get(f"loadavg_{k}", result.get(f"load_average_{k}"))[0]
             for k in ("before", "at_generation_start", "after")]
    manufactured = result["manufactured_solution"]
    rows = [
        ("samples x grid", f"{result['samples']} x {result['resolution']}^2 ({result['workers']} worker processes)"),
        ("wall time", f"{seconds:.1f} s (target {result['target_seconds']} s)"),
        ("samples / s", f"{result['samples_per_second']:.2f}"),
        ("load average (1 min) before / at start / after", joined_loads(loads)),
        ("per sample, one core: GRF / assembly / AMG setup / AMG solve",
         " / ".join(f"{stages[k]:.3f}" for k in ("grf_sample", "assembly", "amg_setup", "amg_solve")) + " s"),
        ("direct sparse LU, one sample, one core", f"{stages['direct_lu']:.2f} s"),
        ("linear solver", f"{solver['linear_solver']}, relative residual tol {solver['tolerance']:g}"),
        ("max relative residual over all samples", f"{solver['max_relative_residual']:.2e}"),
        ("AMG vs LU, max relative difference", f"{result['amg_vs_direct_lu_max_relative_difference']:.1e}"),
        ("coefficient values / fraction a = 12",
         f"{result['coefficient_values']} / {result['fraction_a_equal_12']:.3f}"),
        ("manufactured solution, max error at n = 65, 129, 257",
         ", ".join(f"{e:.2e}" for e in manufactured["max_errors"]) + " (orders "
         + ", ".join(f"{o:.3f}" for o in manufactured["observed_orders"]) + ")"),
    ]
    md = ["# Darcy data generation (Cao 2021, Example 5.2)", "",
          *quantity_table(rows), ""]
    return "\n".join(md)


if __name__ == "__main__":
    main()
