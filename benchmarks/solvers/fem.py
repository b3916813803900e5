"""Verify the finite-element generators against exact solutions, and time one sample of each.

Elasticity: a manufactured solution's orders (P1, P2) and Kirsch's plate with a hole (the concentration factor at
the top of the hole, the stress field's error); airfoil: the exact flow around a Joukowski airfoil (velocity,
circulation, lift against Kutta-Joukowski); heat: the Bessel mode on the unit disc (orders in space and time).

Run from the repository root: ``.venv/bin/python -m benchmarks.solvers.fem`` (about two minutes on 2 cores).
Writes benchmarks/results/solvers/fem.json and .md.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from benchmarks.harness import argument_parser, describe_load, describe_machine, table_head, write_results
from opformer.pde.airfoil import generate_airfoil, solve_joukowski
from opformer.pde.elasticity import generate_elasticity, solve_kirsch
from opformer.pde.heat_mesh import generate_heat_mesh
from tests.pde.test_airfoil import near_field_error
from tests.pde.test_elasticity import hole_top, manufactured_errors
from tests.pde.test_heat_mesh import disc_error


def orders(errors: list[float], factor: float = 2.0) -> list[float | None]:
    """``log(e_k / e_(k+1)) / log(factor)`` after each refinement (None first)."""
    return [None] + [float(np.log(a / b) / np.log(factor)) for a, b in zip(errors, errors[1:])]


def elasticity() -> dict[str, Any]:
    manufactured = {}
    for order in (1, 2):
        rows = [manufactured_errors(n, order) for n in (8, 16, 32)]
        manufactured[f"P{order}"] = {"n": [8, 16, 32], "u_l2": [r[0] for r in rows], "grad_l2": [r[1] for r in rows],
                                     "u_order": orders([r[0] for r in rows]),
                                     "grad_order": orders([r[1] for r in rows])}
    kirsch = []
    for hole_points, spacing in ((17, 1.0), (33, 0.5), (65, 0.25), (129, 0.125)):
        result = solve_kirsch(hole_points=hole_points, far_spacing=spacing)
        error = np.linalg.norm(result["stress"] - result["exact"]) / np.linalg.norm(result["exact"])
        kirsch.append({"hole_points": hole_points, "points": len(result["points"]), "factor": float(hole_top(result)),
                       "field_error": float(error)})
    plate = solve_kirsch(width=20.0, hole_points=129, far_spacing=1.0, exact_traction=False)
    return {"manufactured": manufactured, "kirsch": kirsch,
            "kirsch_field_order": orders([row["field_error"] for row in kirsch]),
            "finite_plate": {"a_over_w": 1 / 40, "hole_points": 129, "points": len(plate["points"]),
                             "factor": float(hole_top(plate))}}


def airfoil() -> dict[str, Any]:
    rows = []
    for points, far in ((48, 16), (96, 32), (192, 64)):
        start = time.perf_counter()
        flow = solve_joukowski(points, far)
        rows.append({"airfoil_points": points, "points": len(flow["points"]), "seconds": time.perf_counter() - start,
                     "velocity_error": near_field_error(flow),
                     "gamma_error": float(abs(flow["gamma"] / flow["exact_gamma"] - 1)),
                     "lift_vs_kutta_joukowski": float(abs(flow["lift"] / flow["exact_gamma"] - 1)),
                     "gamma": float(flow["gamma"]), "exact_gamma": float(flow["exact_gamma"])})
    return {"joukowski": rows, "velocity_order": orders([r["velocity_error"] for r in rows]),
            "gamma_order": orders([r["gamma_error"] for r in rows])}


def heat() -> dict[str, Any]:
    boundary = [16, 32, 64, 128]
    space = [disc_error(n, 1e-3)[0] for n in boundary]
    steps = [0.02, 0.01, 0.005, 0.0025]
    finals = [disc_error(32, dt)[1] for dt in steps]
    differences = [float(np.linalg.norm(a - b)) for a, b in zip(finals, finals[1:])]
    return {"boundary_points": boundary, "l2_error": space, "space_order": orders(space), "dt": steps,
            "successive_differences": differences, "time_order": orders(differences)}


def generators() -> dict[str, Any]:
    rows = {}
    for name, generate in (("elasticity", generate_elasticity), ("airfoil", generate_airfoil),
                           ("heat-mesh", generate_heat_mesh)):
        start = time.perf_counter()
        samples, _ = generate(2, seed=0)
        rows[name] = {"seconds_per_sample": (time.perf_counter() - start) / 2,
                      "points": [len(sample.points) for sample in samples]}
    return rows


def main() -> None:
    args = argument_parser(__doc__).parse_args()
    load_before = os.getloadavg()
    result = {"elasticity": elasticity(), "airfoil": airfoil(), "heat": heat(), "generators": generators()}
    write_results(args.results, "fem", result, markdown, load_before, "numpy", "scipy", "scikit-fem")


def _f(value: float | None, digits: str = ".2f") -> str:
    return "-" if value is None else format(value, digits)


def markdown(result: dict[str, Any]) -> str:
    """The figures as markdown tables."""
    el, air, heat_result = result["elasticity"], result["airfoil"], result["heat"]
    lines = ["# Finite-element generators against exact solutions", "",
             f"Machine: {describe_machine(result['machine'])}; {describe_load(result)} (2 cores shared).", "",
             "## Elasticity: manufactured solution u = (s, s), s = sin(pi x) sin(pi y), unit square", "",
             *table_head("element", "n", "L2 error of u", "order", "L2 error of grad u", "order")]
    for element, rows in el["manufactured"].items():
        for k, n in enumerate(rows["n"]):
            lines.append(f"| {element} | {n} | {rows['u_l2'][k]:.3e} | {_f(rows['u_order'][k])} | "
                         f"{rows['grad_l2'][k]:.3e} | {_f(rows['grad_order'][k])} |")
    lines += ["", "## Kirsch: circular hole, exact traction on a quarter plate 5a wide (P2, plane strain)", "",
              *table_head("hole points", "mesh points", "sigma_xx / S at (0, a)", "rel. L2 error of the stress",
                          "order")]
    for row, order in zip(el["kirsch"], el["kirsch_field_order"]):
        lines.append(f"| {row['hole_points']} | {row['points']} | {row['factor']:.4f} | {row['field_error']:.3e} | "
                     f"{_f(order)} |")
    plate = el["finite_plate"]
    lines += ["", f"A finite plate (a / W = 1/40) under uniform tension, {plate['hole_points']} hole points: "
              f"factor {plate['factor']:.4f} (the finite width raises it above 3).", "",
              "## Airfoil: exact potential flow around a Joukowski airfoil (chord about 1, alpha = 5 degrees)", "",
              *table_head("airfoil points", "mesh points", "velocity rel. L2 (r < 0.75)", "order",
                          "circulation rel. error", "order", "lift (pressure) vs rho U Gamma", "seconds")]
    for row, vo, go in zip(air["joukowski"], air["velocity_order"], air["gamma_order"]):
        lines.append(f"| {row['airfoil_points']} | {row['points']} | {row['velocity_error']:.3e} | {_f(vo)} | "
                     f"{row['gamma_error']:.3e} | {_f(go)} | {row['lift_vs_kutta_joukowski']:.2e} | "
                     f"{row['seconds']:.1f} |")
    lines += ["", "## Heat: Bessel mode J0(j01 r) exp(-kappa j01^2 t) on the unit disc (P1, Crank-Nicolson)", "",
              *table_head("boundary points", "L2 error at t = 0.5 (dt = 1e-3)", "order")]
    for n, error, order in zip(heat_result["boundary_points"], heat_result["l2_error"], heat_result["space_order"]):
        lines.append(f"| {n} | {error:.3e} | {_f(order)} |")
    lines += ["", *table_head("dt", "L2 norm of u(dt) - u(dt / 2) at t = 0.5 (32 boundary points)", "order")]
    for dt, difference, order in zip(heat_result["dt"], heat_result["successive_differences"],
                                     heat_result["time_order"]):
        lines.append(f"| {dt:g} | {difference:.3e} | {_f(order)} |")
    lines += ["", "## One sample of each generator at its defaults", "",
              *table_head("generator", "seconds per sample", "mesh points")]
    for name, row in result["generators"].items():
        lines.append(f"| {name} | {row['seconds_per_sample']:.2f} | {', '.join(map(str, row['points']))} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
