"""Time the compressible Navier-Stokes generation (PDEBench 2D CFD Rand) at 64^2 x 21 frames; project 240 trajectories.

Run from the repository root: ``OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.solvers.compressible_ns --samples 16``
(each (Mach, eta) setting: the samples are solved in blocks of 16 by two threads, as ``opformer generate`` does, with
freed memory kept for reuse as ``generate_file`` asks). Then the first ``--check`` trajectories of the first setting
are solved at 128^2 from the same initial fields (sampled on the finer centres) and averaged over 2 x 2 cells, against
the 64^2 solution. Writes benchmarks/results/solvers/compressible_ns.json and .md.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from benchmarks.harness import (
    argument_parser, describe_load, describe_machine, page, quantity_table, table_head, write_results)
from opformer.pde.compressible_ns import (CFL, VISCOUS_SAFETY, conserved, generate_compressible_ns, primitives,
                                          random_fields, solve_compressible_ns)
from opformer.runtime import retain_freed_memory

RESOLUTION = 64
MIXTURE_SAMPLES = 240  # DPOT's mixture: about 200 training + 20 validation + 20 test trajectories per member
CHANNELS = ["vx", "vy", "density", "pressure"]


def solve(mach: float, eta: float, n: int, samples: int, times: np.ndarray) -> tuple[np.ndarray, int, float]:
    """Primitive frames ``(time, 4, samples, n, n)`` of the first ``samples`` seeds at ``n^2``; steps; seconds."""
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(0).spawn(samples)]
    start = time.perf_counter()
    frames, steps = solve_compressible_ns(conserved(random_fields(rngs, n, mach)), times, 1 / n, 1 / n, eta, eta)
    return primitives(frames.swapaxes(0, 1)).swapaxes(0, 1), steps, time.perf_counter() - start


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--samples", type=int, default=16, help="trajectories timed per setting")
    parser.add_argument("--settings", default="1:0.1,0.1:0.1,1:0.01,0.1:0.01", help="MACH:ETA,... (zeta = eta)")
    parser.add_argument("--check", type=int, default=2, help="trajectories of the first setting also solved at 128^2")
    args = parser.parse_args()
    settings = [tuple(float(v) for v in item.split(":")) for item in args.settings.split(",")]

    retain_freed_memory()
    load_before = os.getloadavg()
    rows = []
    for mach, eta in settings:
        load = os.getloadavg()[0]
        start, cpu_start = time.perf_counter(), time.process_time()
        data, meta = generate_compressible_ns(args.samples, RESOLUTION, mach=mach, eta=eta)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        rows.append({"mach": mach, "eta": eta, "seconds": seconds, "cpu_seconds": cpu_seconds,
                     "seconds_per_trajectory": seconds / args.samples,
                     "projected_minutes_for_240": seconds / args.samples * MIXTURE_SAMPLES / 60,
                     "loadavg_1min_before": load, "loadavg_1min_after": os.getloadavg()[0],
                     "min_density_pressure": [float(data[..., 2].min()), float(data[..., 3].min())],
                     "max_speed": float(np.hypot(data[..., 0], data[..., 1]).max())})
        print(rows[-1], flush=True)
    times = np.asarray(meta["pde"]["times"])

    mach, eta = settings[0]
    coarse, coarse_steps, coarse_seconds = solve(mach, eta, RESOLUTION, args.check, times)
    fine, fine_steps, fine_seconds = solve(mach, eta, 2 * RESOLUTION, args.check, times)
    averaged = fine.reshape(*fine.shape[:3], RESOLUTION, 2, RESOLUTION, 2).mean(axis=(4, 6))
    order = [1, 2, 0, 3]  # vx, vy, density, pressure
    difference = {CHANNELS[i]: [float(np.linalg.norm(coarse[:, c, s] - averaged[:, c, s])
                                      / np.linalg.norm(averaged[:, c, s])) for s in range(args.check)]
                  for i, c in enumerate(order)}
    result = {
        "resolution": RESOLUTION, "frames": len(times), "samples_timed": args.samples,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "solver_threads": 2, "solver": meta["solver"],
        "cfl": CFL, "viscous_safety": VISCOUS_SAFETY, "settings": rows,
        "check": {"mach": mach, "eta": eta, "samples": args.check, "steps_64": coarse_steps, "steps_128": fine_steps,
                  "seconds_64": coarse_seconds, "seconds_128": fine_seconds,
                  "rel_l2_64_vs_128_cell_averages": difference},
    }
    write_results(args.results, "compressible_ns", result, markdown, load_before, "numpy")


def markdown(result: dict[str, Any]) -> str:
    """The result as markdown: a row per setting, then the resolution check."""
    samples = result["samples_timed"]
    md = ["# Compressible Navier-Stokes generation (PDEBench 2D CFD Rand at 64^2)", "",
          f"Machine: {describe_machine(result['machine'])}; {describe_load(result)}. Each setting: {samples} "
          f"trajectories, stored {result['resolution']}^2 x {result['frames']} frames (t in [0, 1]), "
          f"OMP_NUM_THREADS={result['omp_num_threads']}, {result['solver_threads']} solver threads "
          f"(`generate_compressible_ns`, end to end).", ""]
    md += table_head("Mach", "eta = zeta", "s / trajectory", "CPU s / trajectory", "240 trajectories (min)",
                     "1-min load before; after", "min density; pressure", "max speed")
    for row in result["settings"]:
        md.append(f"| {row['mach']:g} | {row['eta']:g} | {row['seconds_per_trajectory']:.1f} | "
                  f"{row['cpu_seconds'] / samples:.1f} | {row['projected_minutes_for_240']:.0f} | "
                  f"{row['loadavg_1min_before']:.1f}; {row['loadavg_1min_after']:.1f} | "
                  f"{row['min_density_pressure'][0]:.3f}; {row['min_density_pressure'][1]:.3f} | "
                  f"{row['max_speed']:.2f} |")
    check = result["check"]
    md += ["", f"Resolution check (Mach {check['mach']:g}, eta {check['eta']:g}, the first {check['samples']} "
           "trajectories; 128^2 averaged over 2 x 2 cells; relative L2 over space and time, per trajectory):", ""]
    rows = [(f"rel. L2, {name}", "; ".join(f"{v:.2e}" for v in values))
            for name, values in check["rel_l2_64_vs_128_cell_averages"].items()]
    rows += [("steps to t = 1, 64^2; 128^2", f"{check['steps_64']}; {check['steps_128']}"),
             ("seconds (both trajectories in one batch), 64^2; 128^2",
              f"{check['seconds_64']:.1f}; {check['seconds_128']:.1f}")]
    md += quantity_table(rows)
    return page(md,
                "The machine was shared with other jobs (load averages above); the 240-trajectory times are linear "
                "projections of the timed samples. The steps are the CFL steps of the Euler terms (the slowest sample "
                "of the batch); the viscous terms take RKL2 half steps with as many stages as their stability needs.")


if __name__ == "__main__":
    main()
