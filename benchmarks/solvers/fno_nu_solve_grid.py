"""How the solve grid changes the stored 64^2 FNO-nu frames: 128^2 (the mixture's cheap solve) against 256^2.

DPOT's FNO-nu 1e-4 and 1e-5 sets were solved at 256^2 and stored at 64^2. Solving at 128^2 is about 8x cheaper;
this script solves the same initial fields (same seed) both ways and compares the stored frames.

Run from the repository root: ``.venv/bin/python -m benchmarks.solvers.fno_nu_solve_grid --samples 4``.
Writes benchmarks/results/solvers/fno_nu_solve_grid.json and .md.
"""

from __future__ import annotations

import os
import time
from typing import Any

from benchmarks.harness import (
    argument_parser, describe_load, describe_machine, page, relative_l2, table_head, write_results)
from opformer.pde.navier_stokes import generate_fno_nu

#: The mixture's members below nu = 1e-3 (DPOT's FNO-1e-4 over 30 time units, FNO-1e-5 over 20).
CASES = ((1e-4, 30.0), (1e-5, 20.0))
RESOLUTION = 64
SOLVE_GRIDS = (128, 256)


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--samples", type=int, default=4)
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = []
    for nu, t_final in CASES:
        fields, seconds = {}, {}
        for grid in SOLVE_GRIDS:
            start = time.perf_counter()
            fields[grid], _ = generate_fno_nu(args.samples, nu, RESOLUTION, t_final, seed=0, solve_resolution=grid)
            seconds[grid] = time.perf_counter() - start
            print(f"nu {nu:g}: solved at {grid}^2 in {seconds[grid]:.1f} s", flush=True)
        coarse, fine = (fields[grid][..., 0] for grid in SOLVE_GRIDS)
        per_frame = [relative_l2(coarse[:, t], fine[:, t]).max() for t in range(1, coarse.shape[1])]
        rows.append({"nu": nu, "t_final": t_final, "samples": args.samples,
                     "seconds_per_trajectory": {str(g): seconds[g] / args.samples for g in SOLVE_GRIDS},
                     "rel_l2_last_frame": relative_l2(coarse[:, -1], fine[:, -1]).tolist(),
                     "rel_l2_space_time": relative_l2(coarse[:, 1:], fine[:, 1:]).tolist(),
                     "rel_l2_worst_frame": float(max(per_frame))})
    write_results(args.results, "fno_nu_solve_grid", {"resolution": RESOLUTION, "solve_grids": list(SOLVE_GRIDS),
                                                      "rows": rows}, markdown, load_before, "numpy", "scipy")


def markdown(result: dict[str, Any]) -> str:
    """The comparison as a markdown table."""
    md = ["# FNO-nu: stored 64^2 frames solved at 128^2 against 256^2", "",
          *table_head("nu", "time units", "samples", "s / trajectory at 128^2", "s / trajectory at 256^2",
                      "rel. L2 last frame (max)", "rel. L2 space-time (max)", "worst frame (max)")]
    for row in result["rows"]:
        secs = row["seconds_per_trajectory"]
        md.append(f"| {row['nu']:g} | {row['t_final']:g} | {row['samples']} | {secs['128']:.1f} | {secs['256']:.1f} | "
                  f"{max(row['rel_l2_last_frame']):.2e} | {max(row['rel_l2_space_time']):.2e} | "
                  f"{row['rel_l2_worst_frame']:.2e} |")
    md += ["", f"Machine: {describe_machine(result['machine'])}; {describe_load(result)} (shared machine).",
           "Same seed, so the same initial vorticity (drawn on the 64^2 storage grid); the errors are of the 128^2 "
           "solve relative to the 256^2 one, over the stored frames t = 1..T (the initial frame is identical)."]
    return page(md)


if __name__ == "__main__":
    main()
