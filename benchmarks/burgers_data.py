"""Time and verify the generation of the paper-size Burgers set (1224 samples at n = 8192).

Run from the repository root: ``.venv/bin/python benchmarks/burgers_data.py``.
Writes benchmarks/results/burgers_data.json and benchmarks/results/burgers_data.md.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy

from opformer.io import write_atomic
from opformer.pde.burgers import (
    DEFAULT_DT,
    DEFAULT_SOLVE_RESOLUTION,
    cole_hopf_solution,
    generate_burgers,
    solve_burgers,
)

N_SAMPLES = 1224
RESOLUTION = 8192
N_CHECK = 8  # samples re-solved with refined settings: those with the largest max|u0|
RESULTS = Path(__file__).resolve().parent / "results"


def rel_error(u: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Relative L2 error per sample."""
    u, ref = np.asarray(u, np.float64), np.asarray(ref, np.float64)
    return np.linalg.norm(u - ref, axis=-1) / np.linalg.norm(ref, axis=-1)


def summary(errors: np.ndarray) -> dict[str, float]:
    return {"max": float(errors.max()), "median": float(np.median(errors)), "n": int(errors.size)}


def main() -> None:
    start = time.perf_counter()
    u0, u1, settings = generate_burgers(N_SAMPLES, RESOLUTION)
    seconds = time.perf_counter() - start
    nu, t_final = settings["pde"]["viscosity"], settings["pde"]["t_final"]

    exact = np.concatenate([cole_hopf_solution(u0[i : i + 64], nu, t_final) for i in range(0, N_SAMPLES, 64)])
    worst = np.argsort(np.abs(u0).max(axis=1))[-N_CHECK:]
    default = solve_burgers(u0[worst], nu, t_final)
    refined = solve_burgers(u0[worst], nu, t_final, solve_resolution=2 * DEFAULT_SOLVE_RESOLUTION, dt=DEFAULT_DT / 2)
    x = np.arange(RESOLUTION) / RESOLUTION
    smooth = np.stack(
        [
            np.sin(2 * np.pi * x),
            2 * np.sin(2 * np.pi * x),
            np.sin(2 * np.pi * x) + 0.8 * np.cos(4 * np.pi * x + 1) - 0.5 * np.sin(6 * np.pi * x),
        ]
    )
    errors = {
        "stored_u1_vs_cole_hopf_all_samples": summary(rel_error(u1, exact)),
        "float64_solve_vs_cole_hopf_worst_samples": summary(rel_error(default, exact[worst])),
        "float64_solve_vs_refined_worst_samples": summary(rel_error(default, refined)),
        "refined_vs_cole_hopf_worst_samples": summary(rel_error(refined, exact[worst])),
        "smooth_ic_vs_cole_hopf": summary(
            rel_error(solve_burgers(smooth, nu, t_final), cole_hopf_solution(smooth, nu, t_final))
        ),
    }
    result = {
        "command": ".venv/bin/python benchmarks/burgers_data.py",
        "machine": {
            "cores": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "scipy": scipy.__version__,
        },
        "n_samples": N_SAMPLES,
        "resolution": RESOLUTION,
        "seconds": seconds,
        "samples_per_second": N_SAMPLES / seconds,
        "settings": settings,
        "steps": round(t_final / settings["solver"]["dt"]),
        "ffts_per_step": 8,
        "max_abs_u0": float(np.abs(u0).max()),
        "relative_l2_errors": errors,
    }
    RESULTS.mkdir(exist_ok=True)
    write_atomic(RESULTS / "burgers_data.json", json.dumps(result, indent=2) + "\n")
    solver = settings["solver"]
    n_solve = solver["solve_resolution"]
    lines = [
        "# Burgers data generation (Cao 2021, Example 5.1)",
        "",
        f"Command: `{result['command']}`",
        "",
        "| quantity | value |",
        "|---|---|",
        f"| machine | {result['machine']['cores']} cores, {result['machine']['processor']}, "
        f"numpy {np.__version__}, scipy {scipy.__version__} |",
        f"| samples x storage grid | {N_SAMPLES} x {RESOLUTION} |",
        f"| wall time (generate_burgers, end to end) | {seconds:.2f} s |",
        f"| samples / s | {result['samples_per_second']:.1f} |",
        f"| solve grid (de-aliased modes) | {n_solve} ({(n_solve - 1) // 3 + 1}) |",
        f"| dt (steps) | {solver['dt']:g} ({result['steps']}) |",
        f"| FFTs per step (length {n_solve}) | 8 |",
        f"| max abs u0 over the set | {result['max_abs_u0']:.3f} |",
    ]
    lines += [
        f"| rel. L2 error: {name.replace('_', ' ')} (max / median, n={e['n']}) | {e['max']:.2e} / {e['median']:.2e} |"
        for name, e in errors.items()
    ]
    lines += [
        "",
        "Stored data are float32, so the stored-target error includes the float32 rounding (~3e-8).",
        f"'worst samples' are the {N_CHECK} samples with the largest max|u0|; "
        "'refined' doubles the solve grid and halves dt.",
        "",
    ]
    write_atomic(RESULTS / "burgers_data.md", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
