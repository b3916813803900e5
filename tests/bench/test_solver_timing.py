"""``opformer bench --solver``: the registry cases, the solver's and the surrogate's per-sample arithmetic."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import time

import numpy as np
import pytest

import opformer.bench.solver_timing as solver_timing
from opformer.bench.report import to_markdown
from opformer.bench.solver_timing import SOLVER_CASES, cpu_seconds, model_calls, solver_case, solver_comparison, \
    solver_keywords, solver_samples, time_solver, time_surrogate
from opformer.bench.sweep import BenchSettings
from opformer.cli import build_parser, main
from opformer.errors import ConfigError
from opformer.models.registry import PRESETS
from opformer.pde.navier_stokes import generate_fno_nu
from opformer.pde.registry import PDES, TRAJECTORY
from opformer.pde.samples import frame_times


def test_unknown_solver_is_a_one_line_error_before_anything_runs(capsys):
    with pytest.raises(ConfigError, match=r"^--solver: unknown solver 'heat'; "
                                          r"valid: burgers, darcy, navier-stokes, kolmogorov$"):
        solver_case("heat")
    assert main(["bench", "--solver", "heat", "--models", "gt_burgers", "--resolutions", "16"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "opformer bench: error: --solver: unknown solver 'heat'; valid: burgers, darcy, navier-stokes, kolmogorov"]


def test_every_case_is_a_registry_pde_with_existing_presets_named_in_the_help():
    assert list(SOLVER_CASES) == ["burgers", "darcy", "navier-stokes", "kolmogorov"]
    for name, case in SOLVER_CASES.items():
        assert name in PDES and set(case.surrogates) <= set(PRESETS)
        assert (PDES[name].kind == TRAJECTORY) == (case.frames > 0)
    (sub,) = [a for a in build_parser()._actions if a.dest == "command"]
    (option,) = [a for a in sub.choices["bench"]._actions if a.dest == "solver"]
    assert "burgers, darcy, navier-stokes or kolmogorov" in option.help


def test_solver_keywords_are_the_registry_defaults_with_the_threads_and_the_rolled_out_span():
    assert solver_keywords("darcy", 3) == {"resolution": 421, "workers": 3, "a_high": 12.0, "a_low": 3.0, "tau": 3.0}
    assert solver_keywords("burgers", 2) == {"resolution": 8192, "viscosity": 0.1 / (2 * np.pi), "t_final": 1.0,
                                             "dt": 1e-3, "workers": 2}
    assert solver_keywords("kolmogorov", 1) == {"resolution": 64, "reynolds": 1000.0, "drag": 0.1, "t_final": 1.0,
                                                "frame_dt": 0.0625, "spinup": 0.0, "solve_resolution": 256,
                                                "dt": None, "workers": 1}
    assert solver_keywords("navier-stokes", 2)["t_final"] == 40.0


@pytest.mark.parametrize("name", ["navier-stokes", "kolmogorov"])
def test_the_solver_produces_exactly_the_frames_the_surrogate_rolls_out(name):
    case = SOLVER_CASES[name]
    frame_dt = inspect.signature(PDES[name].generator).parameters["frame_dt"].default
    assert len(frame_times(solver_keywords(name, 1)["t_final"], frame_dt)) == case.frames + 1  # t = 0 is given


def test_a_solver_run_is_whole_batches_of_the_generator_on_every_worker():
    assert [solver_samples(name, 2) for name in SOLVER_CASES] == [256, 16, 100, 16]
    assert [solver_samples(name, 1) for name in SOLVER_CASES] == [128, 8, 50, 8]


def test_model_calls_of_a_rollout():
    assert [model_calls(40, 1), model_calls(16, 4), model_calls(16, 3), model_calls(0, 1), model_calls(0, 4)] \
        == [40, 4, 6, 1, 1]


def fake_generator(calls: list[dict]):
    """An FNO-nu generator with the real signature that returns frames every 1 up to t_final, and records its calls."""

    @functools.wraps(generate_fno_nu)
    def generate(samples, **keywords):
        calls.append({"samples": samples, **keywords})
        return np.zeros((samples, len(frame_times(keywords["t_final"], 1.0)), 2, 2, 1)), {}

    return generate


def fake_clock(durations: list[float]):
    """A clock whose consecutive start/stop readings are ``durations`` apart."""
    readings = itertools.accumulate(d for pair in ((0.0, d) for d in durations) for d in pair)
    return functools.partial(next, iter(readings))


@pytest.mark.parametrize("durations, runs, median", [([10.0, 20.0, 15.0, 99.0], 3, 15.0), ([70.0, 1.0], 1, 70.0),
                                                      ([50.0, 30.0, 1.0], 2, 40.0)])
def test_solver_seconds_per_sample_on_a_fake_timer(monkeypatch, durations, runs, median):
    calls: list[dict] = []
    monkeypatch.setitem(PDES, "navier-stokes", dataclasses.replace(PDES["navier-stokes"],
                                                                   generator=fake_generator(calls)))
    timed = time_solver("navier-stokes", 2, 64, clock=fake_clock(durations),
                        cpu_clock=fake_clock([d / 4 for d in durations]))
    assert timed["runs"] == runs and len(calls) == runs
    assert timed["seconds_per_sample"] == pytest.approx(median / 100)  # its batch of 50 per worker
    assert timed["cpu_seconds_per_sample"] == pytest.approx(median / 400)
    assert timed["frames"] == 40 and timed["samples"] == 100
    assert calls[0] == {"samples": 100, "resolution": 64, "nu": 1e-3, "t_final": 40.0, "frame_dt": 1.0,
                        "solve_resolution": None, "dt": None, "workers": 2}


def test_solver_processor_time_counts_the_finished_worker_processes():
    import multiprocessing

    def busy() -> None:
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass

    start = cpu_seconds()
    child = multiprocessing.get_context("fork").Process(target=busy)
    child.start()
    child.join()
    assert cpu_seconds() - start >= 0.25


def fake_cells(seconds: dict[int, tuple[float, float] | str], asked: list[int]):
    """A cell runner: ``seconds[batch]`` is the median (wall, processor) time of a step, or the status of a cell
    not measured."""

    def run(spec, settings):
        asked.append(spec["batch"])
        assert spec["mode"] == "forward" and spec["threads"] == settings.threads
        value = seconds[spec["batch"]]
        if isinstance(value, str):
            return {"status": value}
        return {"status": "ok", "seconds_median": value[0], "cpu_seconds_median": value[1],
                "flops_per_step": 1e9 * spec["batch"], "parameters": 7}

    return run


def test_the_surrogate_keeps_the_batch_of_least_processor_time_per_sample_and_counts_every_rollout_call():
    settings = BenchSettings(models=["fno2d_time_ns"], resolutions=[64], threads=2)
    asked: list[int] = []
    cells = {1: (0.3, 0.1), 4: (0.8, 0.2), 16: (0.4, 0.96), 64: (0.1, 0.1)}  # a busy machine's wall times
    best = time_surrogate("fno2d_time_ns", 64, 40, settings, run=fake_cells(cells, asked))
    assert asked == [1, 4, 16]  # CPU 0.1, 0.05, then 0.06 per call and sample: more, so 64 is not tried
    assert best == {"status": "ok", "batch": 4, "calls": 40, "seconds_per_sample": pytest.approx(0.8 * 40 / 4),
                    "cpu_seconds_per_sample": pytest.approx(0.2 * 40 / 4), "flops_per_sample": pytest.approx(40e9),
                    "parameters": 7}
    asked.clear()
    kept = time_surrogate("factformer_kolmogorov", 64, 16, settings,
                          run=fake_cells({1: (1.0, 1.0), 4: (2.0, 1.6), 16: "skipped: memory budget"}, asked))
    assert asked == [1, 4, 16] and (kept["batch"], kept["calls"]) == (4, 4)
    assert (kept["seconds_per_sample"], kept["cpu_seconds_per_sample"]) == pytest.approx((2.0, 1.6))
    failed = time_surrogate("gt_burgers", 64, 0, settings, run=fake_cells({1: "failed: boom"}, []))
    assert failed == {"status": "failed: boom"}


def test_one_solver_run_serves_every_surrogate_of_its_grid(monkeypatch):
    solved: list[int] = []

    def solver(name, threads, resolution):
        solved.append(resolution)
        return {"seconds_per_sample": 2.0, "cpu_seconds_per_sample": 1.0, "runs": 1, "samples": 8, "frames": 0,
                "settings": {}}

    def surrogate(model, resolution, frames, settings):
        return {"status": "ok", "batch": 4, "calls": 1, "seconds_per_sample": resolution / 1000,
                "cpu_seconds_per_sample": resolution / 4000, "flops_per_sample": 1e9, "parameters": 1}

    monkeypatch.setattr(solver_timing, "time_solver", solver)
    monkeypatch.setattr(solver_timing, "time_surrogate", surrogate)
    settings = BenchSettings(models=["gt_burgers"], resolutions=[512, 128])
    darcy = solver_comparison(settings, "darcy", progress=lambda line: None)
    assert solved == [421]
    assert [(r["surrogate"], r["resolution"], r["solver_grid"], r["speedup"]) for r in darcy["rows"]] == [
        ("gt_darcy", 141, 421, pytest.approx(2.0 / 0.141)), ("fno2d_darcy", 141, 421, pytest.approx(2.0 / 0.141)),
        ("factformer_darcy", 85, 421, pytest.approx(2.0 / 0.085))]
    assert darcy["rows"][0]["cpu_speedup"] == pytest.approx(1.0 / (0.141 / 4))
    solved.clear()
    burgers = solver_comparison(settings, "burgers", progress=lambda line: None)
    assert solved == [128, 512]  # the 1D solver stores on each grid of --resolutions, once per grid
    assert [(r["surrogate"], r["resolution"]) for r in burgers["rows"]] == [
        ("gt_burgers", 128), ("gt_burgers", 512), ("fno1d_burgers", 128), ("fno1d_burgers", 512)]


def test_the_solver_comparison_alone_renders_as_markdown():
    row = {"surrogate": "gt_darcy", "resolution": 141, "solver_grid": 421, "solver_seconds_per_sample": 0.8,
           "solver_cpu_seconds_per_sample": 0.75, "status": "ok", "batch": 16, "calls": 1, "seconds_per_sample": 0.0125,
           "cpu_seconds_per_sample": 0.0124, "flops_per_sample": 2.5e9, "parameters": 1, "speedup": 64.0,
           "cpu_speedup": 60.5}
    failed = {**row, "surrogate": "factformer_darcy", "resolution": 85, "status": "skipped: time budget",
              "speedup": None}
    report = {"settings": {}, "machine": {}, "cells": [], "slopes": {},
              "solver": {"solver": "darcy", "output": "u on 421^2", "frames": 0, "rows": [row, failed]}}
    assert to_markdown(report, "opformer bench --solver darcy").splitlines() == [
        "# opformer bench", "", "Command: `opformer bench --solver darcy`", "",
        "Built-in solver versus surrogate inference, seconds per sample:", "",
        "| PDE | solver output | solver s/sample [CPU] | surrogate | grid | batch | calls | surrogate s/sample [CPU] "
        "| surrogate GFLOP/sample | solver / surrogate [CPU] |", "|---|---|---|---|---|---|---|---|---|---|",
        "| darcy | u on 421^2 | 0.8 [0.75] | gt_darcy | 141 | 16 | 1 | 0.0125 [0.0124] | 2.5 | 64x [60.5x] |",
        "| darcy | u on 421^2 | 0.8 [0.75] | factformer_darcy | 85 | skipped: time budget |  | n/a | n/a | n/a |"]
