"""Time and verify the generation of the paper-size Burgers set (1224 samples at n = 8192).

Run from the repository root: ``.venv/bin/python -m benchmarks.solvers.burgers`` (``--samples`` and
``--resolution`` give a smaller set). Writes benchmarks/results/solvers/burgers.json and .md.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from benchmarks.harness import argument_parser, describe_machine, quantity_table, relative_l2, write_results
from opformer.pde.burgers import (
    DEFAULT_DT,
    DEFAULT_SOLVE_RESOLUTION,
    cole_hopf_solution,
    generate_burgers,
    solve_burgers,
)

N_CHECK = 8  # samples re-solved with refined settings: those with the largest max|u0|


def summary(errors: np.ndarray) -> dict[str, float]:
    return {"max": float(errors.max()), "median": float(np.median(errors)), "n": int(errors.size)}


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--samples", type=int, default=1224)
    parser.add_argument("--resolution", type=int, default=8192)
    args = parser.parse_args()
    n_samples, resolution = args.samples, args.resolution

    load_before = os.getloadavg()
    start = time.perf_counter()
    u0, u1, settings = generate_burgers(n_samples, resolution)
    seconds = time.perf_counter() - start
    nu, t_final = settings["pde"]["viscosity"], settings["pde"]["t_final"]

    exact = np.concatenate([cole_hopf_solution(u0[i : i + 64], nu, t_final) for i in range(0, n_samples, 64)])
    worst = np.argsort(np.abs(u0).max(axis=1))[-N_CHECK:]
    default = solve_burgers(u0[worst], nu, t_final)
    refined = solve_burgers(u0[worst], nu, t_final, solve_resolution=2 * DEFAULT_SOLVE_RESOLUTION, dt=DEFAULT_DT / 2)
    x = np.arange(resolution) / resolution
    smooth = np.stack(
        [
            np.sin(2 * np.pi * x),
            2 * np.sin(2 * np.pi * x),
            np.sin(2 * np.pi * x) + 0.8 * np.cos(4 * np.pi * x + 1) - 0.5 * np.sin(6 * np.pi * x),
        ]
    )
    errors = {
        "stored_u1_vs_cole_hopf_all_samples": summary(relative_l2(u1, exact)),
        "float64_solve_vs_cole_hopf_worst_samples": summary(relative_l2(default, exact[worst])),
        "float64_solve_vs_refined_worst_samples": summary(relative_l2(default, refined)),
        "refined_vs_cole_hopf_worst_samples": summary(relative_l2(refined, exact[worst])),
        "smooth_ic_vs_cole_hopf": summary(
            relative_l2(solve_burgers(smooth, nu, t_final), cole_hopf_solution(smooth, nu, t_final))
        ),
    }
    result = {
        "n_samples": n_samples,
        "resolution": resolution,
        "seconds": seconds,
        "samples_per_second": n_samples / seconds,
        "settings": settings,
        "steps": round(t_final / settings["solver"]["dt"]),
        "ffts_per_step": 8,
        "max_abs_u0": float(np.abs(u0).max()),
        "relative_l2_errors": errors,
    }
    write_results(args.results, "burgers", result, markdown, load_before, "numpy", "scipy")


def markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table of quantities."""
    errors, n_solve = result["relative_l2_errors"], result["settings"]["solver"]["solve_resolution"]
    rows = [
        ("machine", describe_machine(result["machine"])),
        ("samples x storage grid", f"{result['n_samples']} x {result['resolution']}"),
        ("wall time (generate_burgers, end to end)", f"{result['seconds']:.2f} s"),
        ("samples / s", f"{result['samples_per_second']:.1f}"),
        ("solve grid (de-aliased modes)", f"{n_solve} ({(n_solve - 1) // 3 + 1})"),
        ("dt (steps)", f"{result['settings']['solver']['dt']:g} ({result['steps']})"),
        (f"FFTs per step (length {n_solve})", f"{result['ffts_per_step']}"),
        ("max abs u0 over the set", f"{result['max_abs_u0']:.3f}"),
        *[(f"rel. L2 error: {name.replace('_', ' ')} (max / median, n={e['n']})", f"{e['max']:.2e} / {e['median']:.2e}")
          for name, e in errors.items()],
    ]
    lines = [
        "# Burgers data generation (Cao 2021, Example 5.1)",
        "",
        *quantity_table(rows),
        "",
        "Stored data are float32, so the stored-target error includes the float32 rounding (~3e-8).",
        f"'worst samples' are the {errors['float64_solve_vs_cole_hopf_worst_samples']['n']} samples with the "
        "largest max|u0|; 'refined' doubles the solve grid and halves dt.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
