"""Cost of `opformer generate smoke3d` (FactFormer's 3D smoke) per trajectory at 32^3 and 64^3, and 32^3 against
64^3 cell means on the same initial smoke.

Run from the repository root: ``OMP_NUM_THREADS=2 python -m benchmarks.solvers.smoke3d --samples 8,4``
(trajectories timed at 32^3 and at 64^3; they are solved in blocks of 4, two threads of 2, so the cost per
trajectory does not depend on the count). Writes benchmarks/results/solvers/smoke3d.json and .md.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from benchmarks.harness import (
    argument_parser, describe_load, describe_machine, joined_loads, page, quantity_table, relative_l2,
    write_results)
from opformer.pde.smoke import cell_means
from opformer.pde.smoke3d import CHANNELS, generate_smoke3d, initial_smoke3d, solve_smoke3d

RESOLUTIONS = (32, 64)


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--samples", default="8,4", help="trajectories timed at 32^3 and at 64^3")
    args = parser.parse_args()
    counts = [int(v) for v in args.samples.split(",")]

    load_before = os.getloadavg()
    timings, fine = {}, None
    for n, samples in zip(RESOLUTIONS, counts):
        start, cpu = time.perf_counter(), time.process_time()
        fields, _ = generate_smoke3d(samples, n)
        timings[n] = {"samples": samples, "wall_seconds_per_trajectory": (time.perf_counter() - start) / samples,
                      "cpu_seconds_per_trajectory": (time.process_time() - cpu) / samples,
                      "loadavg_after": list(os.getloadavg()), "megabytes_per_trajectory": fields[0].nbytes / 2**20}
        fine = fields if n == 64 else fine
    # The 64^3 trajectories again at 32^3 from the same continuous initial noise, against their 2x2x2 cell means.
    seeds = np.random.SeedSequence(0).spawn(counts[1])
    coarse = solve_smoke3d(np.stack([initial_smoke3d(np.random.default_rng(s), 32) for s in seeds]))
    means = cell_means(fine.astype(np.float64), 2, ndim=3)
    per_frame = {name: [float(relative_l2(coarse[:, t, ..., c], means[:, t, ..., c]).mean())
                        for t in range(coarse.shape[1])] for c, name in enumerate(CHANNELS)}
    mass = fine[..., 0].astype(np.float64).sum(axis=(2, 3, 4))
    result = {
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "solver_threads": 2, "batch_size": 2,
        "timings": {str(n): value for n, value in timings.items()},
        "rel_l2_32_vs_64_cell_means_per_frame": per_frame,
        "stored_mass_relative_to_first_frame_min_max_64": [float((mass / mass[:, :1]).min()),
                                                           float((mass / mass[:, :1]).max())],
        "velocity_abs_max_64": float(np.abs(fine[..., 1:]).max()),
    }
    write_results(args.results, "smoke3d", result, markdown, load_before, "numpy", "scipy")


def markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table of quantities."""
    rows = [("machine", describe_machine(result["machine"])),
            ("solver", f"20 stored frames after 8 skipped steps of 0.75 (28 steps); blocks of 4 trajectories, "
                       f"{result['solver_threads']} threads of {result['batch_size']}, "
                       f"OMP_NUM_THREADS={result['omp_num_threads']}")]
    for n, t in result["timings"].items():
        rows.append((f"{n}^3: wall (CPU, all threads) seconds per trajectory, {t['samples']} timed",
                     f"{t['wall_seconds_per_trajectory']:.1f} ({t['cpu_seconds_per_trajectory']:.1f}); "
                     f"{t['megabytes_per_trajectory']:.0f} MB stored (float32); load after "
                     + joined_loads(t["loadavg_after"])))
    for name, values in result["rel_l2_32_vs_64_cell_means_per_frame"].items():
        rows.append((f"rel. L2 of {name}, 32^3 vs 64^3 cell means, stored frames 1, 5, 10, 20",
                     ", ".join(f"{values[i]:.3f}" for i in (0, 4, 9, 19))))
    rows += [("stored smoke mass relative to the first stored frame at 64^3, min, max",
              ", ".join(f"{v:.3f}" for v in result["stored_mass_relative_to_first_frame_min_max_64"])),
             ("largest stored |u|, |v|, |w| at 64^3", f"{result['velocity_abs_max_64']:.2f}"),
             ("load", describe_load(result))]
    lines = ["# 3D smoke generation (FactFormer's Table 3 data)", "",
             *quantity_table(rows), "",
             "The machine was shared with other jobs (load averages above). Semi-Lagrangian steps of 0.75 move the "
             "smoke several cells at 64^3, and the flow is unstable: the 32^3 and 64^3 solutions of one initial "
             "smoke part as the frames go on."]
    return page(lines)


if __name__ == "__main__":
    main()
