"""Time the shallow-water (radial dam break, PDEBench SWE) generation at 64^2 x 101 frames; project 240 trajectories.

Run from the repository root: ``OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.solvers.shallow_water --samples 16``
(the samples are solved in blocks of 16 by two threads, so the cost per trajectory does not depend on the count).
Writes benchmarks/results/solvers/shallow_water.json and .md.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from benchmarks.harness import argument_parser, describe_machine, page, quantity_table, write_results
from opformer.pde.shallow_water import CFL, dam_break_state, generate_shallow_water, solve_shallow_water

RESOLUTION = 64
RADII = (0.3, 0.7)  # the ends of the radius range
MIXTURE_SAMPLES = 240  # DPOT's mixture: about 200 training + 20 validation + 20 test trajectories per member


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--samples", type=int, default=16)
    args = parser.parse_args()

    load_before = os.getloadavg()
    start = time.perf_counter()
    data, settings = generate_shallow_water(args.samples, RESOLUTION)
    seconds = time.perf_counter() - start
    times = np.asarray(settings["pde"]["times"])
    # The smallest and the largest dam: steps taken, and the 64^2 depth against PDEBench's 128^2 grid averaged
    # over 2 x 2 cells (the cell averages on 64^2), relative L2 over space and time.
    radii = np.array(RADII)
    coarse, steps = solve_shallow_water(dam_break_state(radii, RESOLUTION), times, 5.0 / RESOLUTION, 5.0 / RESOLUTION)
    fine, _ = solve_shallow_water(dam_break_state(radii, 2 * RESOLUTION), times, 2.5 / RESOLUTION, 2.5 / RESOLUTION)
    averaged = fine[:, 0].reshape(len(times), len(radii), RESOLUTION, 2, RESOLUTION, 2).mean(axis=(3, 5))
    difference = [float(np.linalg.norm(coarse[:, 0, i] - averaged[:, i]) / np.linalg.norm(averaged[:, i]))
                  for i in range(len(radii))]
    mass = data[..., 0].astype(np.float64).sum(axis=(-2, -1))
    result = {
        "resolution": RESOLUTION,
        "frames": len(times),
        "samples_timed": args.samples,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "solver_threads": 2,
        "solver": settings["solver"],
        "cfl": CFL,
        "steps_radius_0.3_and_0.7_solved_together": steps,
        "rel_l2_64_vs_128_cell_averages_radius_0.3_0.7": difference,
        "seconds": seconds,
        "seconds_per_trajectory": seconds / args.samples,
        "projected_seconds_for_240": seconds / args.samples * MIXTURE_SAMPLES,
        "depth_min_max": [float(data.min()), float(data.max())],
        "stored_mass_relative_change_max": float(np.abs(mass / mass[:, :1] - 1.0).max()),
    }
    write_results(args.results, "shallow_water", result, markdown, load_before, "numpy")


def markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table of quantities."""
    samples, seconds = result["samples_timed"], result["seconds"]
    rows = [
        ("machine", describe_machine(result["machine"])),
        ("timed", f"{samples} trajectories, stored {RESOLUTION}^2 x {result['frames']} frames (t in [0, 1]), "
         f"OMP_NUM_THREADS={result['omp_num_threads']}, {result['solver_threads']} solver threads"),
        ("wall time (generate_shallow_water, end to end)",
         f"{seconds:.1f} s ({result['seconds_per_trajectory']:.2f} s / trajectory)"),
        ("projected time for 240 trajectories (linear)", f"{result['projected_seconds_for_240'] / 60:.1f} min"),
        ("CFL number; steps of the radii 0.3 and 0.7 (each sample steps alone, the loop runs to the slower)",
         f"{result['cfl']}; {result['steps_radius_0.3_and_0.7_solved_together']}"),
        ("rel. L2 of h (space-time), 64^2 vs 128^2 averaged to 64^2, radius 0.3; 0.7",
         "; ".join(f"{v:.2e}" for v in result["rel_l2_64_vs_128_cell_averages_radius_0.3_0.7"])),
        ("depth min, max over the stored frames", ", ".join(f"{v:.4f}" for v in result["depth_min_max"])),
        ("largest relative change of the stored mass sum(h) (float32; outflow included)",
         f"{result['stored_mass_relative_change_max']:.1e}"),
        ("load average before; after", f"{result['loadavg_before'][0]:.2f}; {result['loadavg_after'][0]:.2f}"),
    ]
    md = ["# Shallow-water radial dam break generation (PDEBench SWE at 64^2)", ""]
    md += quantity_table(rows)
    return page(md,
                "The machine was shared with other jobs (1-minute load averages above); the 240-trajectory time is "
                "a linear projection of the timed samples.")


if __name__ == "__main__":
    main()
