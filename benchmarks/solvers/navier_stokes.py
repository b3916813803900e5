"""Time and verify the FNO-nu = 1e-3 trajectory generation (target: 1000 x 50 time units at 64^2 in 60 min).

Run from the repository root: ``.venv/bin/python -m benchmarks.solvers.navier_stokes --samples 100``
(``--samples 1000`` is the full run; fewer samples are timed and extrapolated linearly: the samples are
solved in the same chunks of ``--batch-size`` by two threads, so the cost per sample does not depend on
the count).  Writes benchmarks/results/solvers/navier_stokes.json and .md.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import scipy.fft

from benchmarks.harness import argument_parser, describe_machine, page, quantity_table, relative_l2, write_results
from opformer.pde.navier_stokes import (
    FFTS_PER_STEP,
    FNO_GRF,
    fno_forcing,
    generate_fno_nu,
    solve_navier_stokes_2d,
)

NU = 1e-3
RESOLUTION = 64
T_FINAL = 50.0
TARGET_SAMPLES = 1000
N_CHECK = 4  # samples re-solved at 128^2 and with dt / 2


def max_speed(w: np.ndarray) -> float:
    """max(|u| + |v|) of vorticity fields (..., n, n) on (0, 1)^2 (all modes resolved on the grid)."""
    n = w.shape[-1]
    c = np.fft.rfft2(w)
    kx = 2 * np.pi * np.fft.fftfreq(n, 1.0 / n)[:, None]
    ky = 2 * np.pi * np.arange(n // 2 + 1)[None, :]
    k2 = kx**2 + ky**2
    psi = c / np.where(k2 > 0, k2, 1.0) * (k2 > 0)
    u, v = np.fft.irfft2(1j * ky * psi, s=(n, n)), np.fft.irfft2(-1j * kx * psi, s=(n, n))
    return float((np.abs(u) + np.abs(v)).max())


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=50)
    args = parser.parse_args()

    load_before = os.getloadavg()
    start = time.perf_counter()
    data, settings = generate_fno_nu(args.samples, NU, RESOLUTION, T_FINAL, batch_size=args.batch_size)
    seconds = time.perf_counter() - start
    dt = settings["solver"]["dt_max"]
    steps = int(round(T_FINAL / dt))
    updates = args.samples * steps * RESOLUTION**2 / seconds
    print(f"generated {args.samples} trajectories in {seconds:.1f} s (dt {dt}, {updates:.3g} updates / s)", flush=True)

    # Resolution and time-step check on the first samples' frame-0 vorticity (exactly what was solved).
    n_check = min(N_CHECK, args.samples)
    w0 = data[:n_check, 0, ..., 0].astype(np.float64)
    times = np.arange(int(T_FINAL) + 1, dtype=np.float64)
    forcing = fno_forcing(RESOLUTION)
    kwargs = dict(nu=NU, times=times, forcing=forcing, batch_size=2)
    base, _ = solve_navier_stokes_2d(w0, dt=dt, **kwargs)
    fine, _ = solve_navier_stokes_2d(w0, dt=dt / 2, solve_resolution=2 * RESOLUTION, **kwargs)  # same CFL number
    half, _ = solve_navier_stokes_2d(w0, dt=dt / 2, **kwargs)
    stored_vs_float64 = relative_l2(data[:n_check, -1, ..., 0], base[:, -1])

    # One batched FFT (the solver's inverse transform of 4 fields per sample) for the FFT share.
    noise = np.random.default_rng(0).standard_normal((args.batch_size, 4, RESOLUTION, RESOLUTION))
    spectra = scipy.fft.rfft2(noise, norm="forward")
    tick = time.perf_counter()
    for _ in range(20):
        scipy.fft.irfft2(spectra, s=(RESOLUTION, RESOLUTION), norm="forward")
    fft_seconds = (time.perf_counter() - tick) / 20 / (4 * args.batch_size)

    extrapolated = seconds * TARGET_SAMPLES / args.samples
    speed = max(max_speed(data[i : i + 1, :, ..., 0].astype(np.float64)) for i in range(args.samples))
    result = {
        "full_run_command": f"python -m benchmarks.solvers.navier_stokes --samples {TARGET_SAMPLES}",
        "nu": NU,
        "initial_condition": FNO_GRF,
        "t_final": T_FINAL,
        "resolution": RESOLUTION,
        "samples_timed": args.samples,
        "batch_size": args.batch_size,
        "threads": 2,
        "solver": settings["solver"],
        "dt": dt,
        "steps_per_trajectory": steps,
        "ffts_per_step": FFTS_PER_STEP,
        "seconds": seconds,
        "seconds_per_trajectory": seconds / args.samples,
        "grid_point_updates_per_second": updates,
        "single_fft_64x64_seconds_one_thread": fft_seconds,
        "fft_share_estimate": fft_seconds * FFTS_PER_STEP * steps * args.samples / (2 * seconds),
        "extrapolated_seconds_for_1000": extrapolated,
        "extrapolated": args.samples != TARGET_SAMPLES,
        "max_cfl_at_frames": speed * dt * RESOLUTION,
        "max_abs_vorticity": float(np.abs(data).max()),
        "check_samples": n_check,
        "rel_l2_t50_64_vs_128_dt_half": relative_l2(base[:, -1], fine[:, -1]).tolist(),
        "rel_l2_t50_dt_vs_dt_half": relative_l2(base[:, -1], half[:, -1]).tolist(),
        "rel_l2_t50_stored_float32_vs_float64_solve": stored_vs_float64.tolist(),
    }
    write_results(args.results, "navier_stokes", result, markdown, load_before, "numpy", "scipy")


def markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table of quantities, with the extrapolation and the resolution check."""
    samples, seconds, batch, dt = result["samples_timed"], result["seconds"], result["batch_size"], result["dt"]
    # the load average at the end: before benchmarks/harness.py the machine's load_average_at_end
    load_after = result["loadavg_after"][0] if "loadavg_after" in result else result["machine"]["load_average_at_end"]
    worst = {key: max(result[key]) for key in result if key.startswith("rel_l2")}
    rows = [
        ("machine", describe_machine(result["machine"])),
        ("timed", f"{samples} trajectories x {T_FINAL:g} time units, stored 64^2 x 51 frames, "
         f"chunks of {batch}, 2 threads"),
        ("wall time (generate_fno_nu, end to end)", f"{seconds:.1f} s ({seconds / samples:.2f} s / trajectory)"),
        ("extrapolated time for 1000 trajectories" + (" (EXTRAPOLATION)" if result["extrapolated"] else ""),
         f"{result['extrapolated_seconds_for_1000'] / 60:.1f} min"),
        ("solve grid (de-aliased modes)", f"{RESOLUTION}^2 (|m| <= {(RESOLUTION - 1) // 3})"),
        ("dt (steps per trajectory)", f"{dt:g} ({result['steps_per_trajectory']})"),
        ("FFTs per step (real 64^2 fields)", f"{result['ffts_per_step']}"),
        ("grid-point updates / s (samples x steps x 64^2 / wall time)", f"{result['grid_point_updates_per_second']:.3g}"),
        ("one 64^2 FFT (batched, 1 thread); FFT share of the wall time",
         f"{result['single_fft_64x64_seconds_one_thread'] * 1e6:.1f} us; {result['fft_share_estimate']:.0%}"),
        ("max CFL dt max(|u|+|v|) N over the stored frames", f"{result['max_cfl_at_frames']:.3f}"),
        ("rel. L2 at t = 50: 64^2 vs 128^2 with dt / 2 (max)", f"{worst['rel_l2_t50_64_vs_128_dt_half']:.2e}"),
        ("rel. L2 at t = 50: dt vs dt / 2 (max)", f"{worst['rel_l2_t50_dt_vs_dt_half']:.2e}"),
        ("rel. L2 at t = 50: stored float32 vs float64 solve (max)",
         f"{worst['rel_l2_t50_stored_float32_vs_float64_solve']:.2e}"),
    ]
    md = ["# FNO-nu = 1e-3 trajectory generation (2D Navier-Stokes, vorticity)", ""]
    md += quantity_table(rows)
    md += [
        "",
        f"The 1000-trajectory time is a linear extrapolation of the timed {samples} (full run: "
        f"`{result['full_run_command']}`). The machine was shared with other jobs (load average at the end "
        f"{load_after:.2f}).",
        f"Resolution check: {result['check_samples']} trajectories re-solved on a 128^2 grid (42 de-aliased modes, "
        "dt / 2 to keep the CFL number) and on 64^2 with dt / 2; "
        + (
            "64^2 is resolved, so the data are solved on the storage grid."
            if worst["rel_l2_t50_64_vs_128_dt_half"] < 1e-6
            else "64^2 is NOT resolved to 1e-6: solve on a finer grid."
        ),
    ]
    return page(md)


if __name__ == "__main__":
    main()
