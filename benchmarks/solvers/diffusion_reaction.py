"""Time and check the diffusion-reaction generation (FitzHugh-Nagumo, PDEBench's DR set) at 64^2 x 101 frames.

Run from the repository root with the threads of the measurement:
``OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.solvers.diffusion_reaction --samples 32``. The samples are solved
in blocks of 16 (two threads of 8), so the cost per trajectory does not depend on the count; the time of the
mixture's 240 trajectories is projected linearly. A few trajectories are re-solved with dt / 2 and dt / 4 for the
time error of the default step. Writes benchmarks/results/solvers/diffusion_reaction.json and .md.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from benchmarks.harness import argument_parser, describe_machine, page, quantity_table, relative_l2, write_results
from opformer.pde.diffusion_reaction import generate_diffusion_reaction, solve_diffusion_reaction

RESOLUTION = 64
MIXTURE_SAMPLES = 240  # about 200 training + 20 validation + 20 test trajectories (issue 28)
N_CHECK = 2  # trajectories re-solved with smaller steps


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--samples", type=int, default=32)
    args = parser.parse_args()

    load_before = os.getloadavg()
    start, cpu_start = time.perf_counter(), time.process_time()
    data, settings = generate_diffusion_reaction(args.samples, RESOLUTION)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    dt, times = settings["solver"]["dt_max"], np.asarray(settings["pde"]["times"])
    print(f"generated {args.samples} trajectories in {seconds:.1f} s (dt {dt})", flush=True)

    # Time error: the first trajectories (their float64 initial states, as drawn) with dt, dt / 2 and dt / 4.
    seeds = np.random.SeedSequence(0).spawn(args.samples)[:N_CHECK]
    initial = np.stack([np.random.default_rng(s).standard_normal((2, RESOLUTION, RESOLUTION)) for s in seeds])
    base, half, quarter = (solve_diffusion_reaction(initial, times, step) for step in (dt, dt / 2, dt / 4))
    stored = np.moveaxis(data[:N_CHECK], -1, 2)

    def worst(u: np.ndarray, ref: np.ndarray) -> float:
        """The largest relative L2 error over samples and frames (both channels together)."""
        return float(max(relative_l2(u[:, i], ref[:, i]).max() for i in range(1, len(times))))

    result = {
        "resolution": RESOLUTION,
        "frames": len(times),
        "t_final": float(times[-1]),
        "samples_timed": args.samples,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "solver_threads": 2,
        "solver": settings["solver"],
        "steps_per_trajectory": int(round(times[-1] / dt)),
        "seconds": seconds,
        "seconds_per_trajectory": seconds / args.samples,
        "cpu_seconds_per_trajectory": cpu_seconds / args.samples,
        "projected_seconds_for_240": seconds / args.samples * MIXTURE_SAMPLES,
        "check_samples": N_CHECK,
        "max_rel_l2_dt_vs_dt_quarter": worst(base, quarter),
        "max_rel_l2_dt_half_vs_dt_quarter": worst(half, quarter),
        "max_rel_l2_stored_float32_vs_float64": worst(stored, base),
        "std_u_v_at_t_final": [float(data[:, -1, ..., c].std()) for c in range(2)],
    }
    write_results(args.results, "diffusion_reaction", result, markdown, load_before, "numpy", "scipy")


def markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table of quantities."""
    samples, seconds, dt = result["samples_timed"], result["seconds"], result["solver"]["dt_max"]
    rows = [
        ("machine", describe_machine(result["machine"])),
        ("load average before; after (1 min)", f"{result['loadavg_before'][0]:.2f}; {result['loadavg_after'][0]:.2f}"),
        ("timed", f"{samples} trajectories, stored {result['resolution']}^2 x {result['frames']} frames "
         f"(t in [0, {result['t_final']:g}]), 2 solver threads, OMP_NUM_THREADS={result['omp_num_threads']}"),
        ("wall time (generate_diffusion_reaction, end to end)",
         f"{seconds:.1f} s (**{result['seconds_per_trajectory']:.2f} s / trajectory**)"),
        ("CPU time of the process (all threads) per trajectory", f"{result['cpu_seconds_per_trajectory']:.2f} s"),
        ("projected time for the mixture's 240 trajectories", f"{result['projected_seconds_for_240'] / 60:.1f} min"),
        ("dt (steps per trajectory)", f"{dt:g} ({result['steps_per_trajectory']})"),
        ("rel. L2, worst frame: dt vs dt / 4", f"{result['max_rel_l2_dt_vs_dt_quarter']:.2e}"),
        ("rel. L2, worst frame: dt / 2 vs dt / 4", f"{result['max_rel_l2_dt_half_vs_dt_quarter']:.2e}"),
        ("rel. L2, worst frame: stored float32 vs float64 solve",
         f"{result['max_rel_l2_stored_float32_vs_float64']:.2e}"),
        ("std of u, v at the last frame", ", ".join(f"{s:.3f}" for s in result["std_u_v_at_t_final"])),
    ]
    md = ["# Diffusion-reaction generation (2D FitzHugh-Nagumo, PDEBench DR setup)", ""]
    md += quantity_table(rows)
    return page(md,
                f"Solver: {result['solver']['name']}. The 240-trajectory time is a linear projection of the timed "
                f"{samples}; the machine was shared with other jobs (load averages above). Time error: "
                f"{result['check_samples']} trajectories re-solved with dt / 2 and dt / 4; for a second-order scheme "
                "the first row is 5 times the second (errors 1 : 1/4 : 1/16 of the exact solution's), and the first "
                "is 15/16 of the default step's own time error.")


if __name__ == "__main__":
    main()
