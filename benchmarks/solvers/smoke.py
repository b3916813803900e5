"""Time the buoyant-smoke generation (PDEArena NS and NS-cond) at 64^2; check 64^2 against 128^2; project 240.

Run from the repository root: ``OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.solvers.smoke --samples 16``
(the samples are solved in blocks of 8 by two threads, so the cost per trajectory does not depend on the count).
Writes benchmarks/results/solvers/smoke.json and .md.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from benchmarks.harness import (
    argument_parser, describe_load, describe_machine, page, quantity_table, relative_l2, write_results)
from opformer.pde.smoke import (BUOYANCY, cell_means, frame_steps, generate_smoke, generate_smoke_conditioned,
                                initial_smoke, solve_smoke)

RESOLUTION = 64
MIXTURE_SAMPLES = 240  # DPOT's mixture: about 200 training + 20 validation + 20 test trajectories per member
CHANNELS = ("smoke", "vx", "vy")
CHECK_SAMPLES = 2  # trajectories of the 64^2 vs 128^2 check


def timed(generator: Any, samples: int, **settings: Any) -> tuple[float, float, np.ndarray]:
    """Wall and CPU (all threads) seconds of ``generator(samples, 64, **settings)`` end to end, and its fields."""
    start, cpu = time.perf_counter(), time.process_time()
    fields, _ = generator(samples, RESOLUTION, **settings)
    return time.perf_counter() - start, time.process_time() - cpu, fields


def per_channel(u: np.ndarray, ref: np.ndarray) -> list[float]:
    """Relative L2 (space-time, mean over the samples) of each channel of ``(sample, time, x, y, channel)``."""
    return [float(relative_l2(u[..., c], ref[..., c]).mean()) for c in range(u.shape[-1])]


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--samples", type=int, default=16)
    args = parser.parse_args()

    load_before = os.getloadavg()
    seconds, cpu, smoke = timed(generate_smoke, args.samples)
    seconds_cond, cpu_cond, _ = timed(generate_smoke_conditioned, args.samples)
    seconds_fine, cpu_fine, _ = timed(generate_smoke, 8, solve_resolution=2 * RESOLUTION)
    # The same initial smoke (the continuous noise) solved on 64^2 and on 128^2 (PDEArena's grid), the latter
    # averaged over 2 x 2 cells; and the same at 64^2 with PDEArena's order (buoyancy before diffusion).
    seeds = np.random.SeedSequence(0).spawn(CHECK_SAMPLES)
    coarse_initial = np.stack([initial_smoke(np.random.default_rng(s), RESOLUTION) for s in seeds])
    fine_initial = np.stack([initial_smoke(np.random.default_rng(s), 2 * RESOLUTION) for s in seeds])
    steps = frame_steps(4)
    buoyancy = np.full(CHECK_SAMPLES, BUOYANCY)
    coarse = solve_smoke(coarse_initial, buoyancy, steps)
    fine = cell_means(solve_smoke(fine_initial, buoyancy, steps), 2)
    coarse_pdearena = solve_smoke(coarse_initial, buoyancy, steps, force_first=True)
    fine_pdearena = cell_means(solve_smoke(fine_initial, buoyancy, steps, force_first=True), 2)
    initial_difference = relative_l2(coarse_initial, cell_means(fine_initial[..., None], 2)[..., 0])
    mass = smoke[..., 0].astype(np.float64).sum(axis=(-2, -1))
    result = {
        "resolution": RESOLUTION,
        "frames_smoke_conditioned": [smoke.shape[1], len(frame_steps(1))],
        "steps_smoke_conditioned": [int(steps[-1]), int(frame_steps(1)[-1])],
        "samples_timed": args.samples,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "solver_threads": 2,
        "seconds_smoke": seconds,
        "seconds_smoke_conditioned": seconds_cond,
        "seconds_per_trajectory_smoke": seconds / args.samples,
        "seconds_per_trajectory_smoke_conditioned": seconds_cond / args.samples,
        "seconds_per_trajectory_solved_at_128": seconds_fine / 8,
        "cpu_seconds_per_trajectory_smoke_conditioned_128": [cpu / args.samples, cpu_cond / args.samples,
                                                             cpu_fine / 8],
        "projected_minutes_for_240_each": (seconds + seconds_cond) / args.samples * MIXTURE_SAMPLES / 60,
        "initial_smoke_rel_l2_64_vs_128_cell_means": float(initial_difference.mean()),
        "rel_l2_64_vs_128_cell_means": dict(zip(CHANNELS, per_channel(coarse, fine))),
        "rel_l2_64_vs_128_cell_means_per_frame": {name: relative_l2(coarse[..., c].swapaxes(0, 1),
                                                                    fine[..., c].swapaxes(0, 1)).tolist()
                                                  for c, name in enumerate(CHANNELS)},
        "rel_l2_64_vs_128_cell_means_pdearena_order": dict(zip(CHANNELS, per_channel(coarse_pdearena,
                                                                                     fine_pdearena))),
        "rel_l2_our_order_vs_pdearena_order_64": dict(zip(CHANNELS, per_channel(coarse, coarse_pdearena))),
        "rel_l2_our_order_vs_pdearena_order_128": dict(zip(CHANNELS, per_channel(fine, fine_pdearena))),
        "stored_mass_relative_to_first_frame_min_max": [float((mass / mass[:, :1]).min()),
                                                        float((mass / mass[:, :1]).max())],
        "velocity_abs_max": float(np.abs(smoke[..., 1:]).max()),
    }
    write_results(args.results, "smoke", result, markdown, load_before, "numpy", "scipy")


def _channels(values: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.3f}" for name, value in values.items())


def markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table of quantities."""
    samples = result["samples_timed"]
    rows = [
        ("machine", describe_machine(result["machine"])),
        ("timed", f"{samples} trajectories each, stored {RESOLUTION}^2, steps of 1.5: smoke "
         f"{result['steps_smoke_conditioned'][0]} (14 frames), smoke-conditioned "
         f"{result['steps_smoke_conditioned'][1]} (56 frames), OMP_NUM_THREADS={result['omp_num_threads']}, "
         f"{result['solver_threads']} solver threads"),
        ("wall time per trajectory: smoke; smoke-conditioned (generate_*, end to end)",
         f"{result['seconds_per_trajectory_smoke']:.3f} s; {result['seconds_per_trajectory_smoke_conditioned']:.3f} s"),
        ("wall time per trajectory solved at 128^2, stored as 64^2 cell means (8 timed)",
         f"{result['seconds_per_trajectory_solved_at_128']:.3f} s"),
        ("CPU time (all threads) per trajectory: smoke; smoke-conditioned; solved at 128^2",
         "; ".join(f"{v:.3f} s" for v in result["cpu_seconds_per_trajectory_smoke_conditioned_128"])),
        ("projected time for 240 smoke + 240 smoke-conditioned at 64^2 (linear)",
         f"{result['projected_minutes_for_240_each']:.1f} min"),
        ("rel. L2 of the initial smoke, 64^2 vs 128^2 cell means",
         f"{result['initial_smoke_rel_l2_64_vs_128_cell_means']:.1e}"),
        (f"rel. L2 (space-time, 14 frames, {CHECK_SAMPLES} trajectories), 64^2 vs 128^2 cell means",
         _channels(result["rel_l2_64_vs_128_cell_means"])),
        ("the same per stored frame (both trajectories), smoke; vx",
         "; ".join(" ".join(f"{v:.3f}" for v in result["rel_l2_64_vs_128_cell_means_per_frame"][name])
                   for name in ("smoke", "vx"))),
        ("the same with PDEArena's order (buoyancy before diffusion)",
         _channels(result["rel_l2_64_vs_128_cell_means_pdearena_order"])),
        ("rel. L2, our order vs PDEArena's, at 64^2", _channels(result["rel_l2_our_order_vs_pdearena_order_64"])),
        ("rel. L2, our order vs PDEArena's, at 128^2 (cell means)",
         _channels(result["rel_l2_our_order_vs_pdearena_order_128"])),
        ("stored smoke mass sum(s) relative to the first stored frame, min, max",
         ", ".join(f"{v:.3f}" for v in result["stored_mass_relative_to_first_frame_min_max"])),
        ("largest stored |vx|, |vy|", f"{result['velocity_abs_max']:.2f}"),
        ("load", describe_load(result)),
    ]
    md = ["# Buoyant smoke generation (PDEArena NS / NS-cond at 64^2)", ""]
    md += quantity_table(rows)
    return page(md,
                "The machine was shared with other jobs (load averages above); the 240-trajectory time is a linear "
                "projection of the timed samples. Semi-Lagrangian advection at dt = 1.5 moves the smoke several cells "
                "a step, so the trajectories are chaotic after a few frames: a grid change shows as a growing "
                "difference.")


if __name__ == "__main__":
    main()
