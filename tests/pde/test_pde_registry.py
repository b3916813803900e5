"""The PDE registry is what `opformer generate` offers: choices, flags, defaults, help and flag checks."""

import dataclasses
import functools
import inspect
import math

import numpy as np
import pytest

import opformer.pde.registry as registry
from opformer.cli import build_parser, main
from opformer.data.generate import generate_file
from opformer.errors import ConfigError
from opformer.pde.registry import FLAGS, PDES, dashed, flag_help, users

#: What `opformer generate NAME` uses when no flag is given (pinned: a changed default is a behaviour change).
DEFAULTS = {
    "burgers": {"resolution": 8192, "viscosity": 0.1 / (2 * math.pi), "t_final": 1.0, "dt": 1e-3},
    "darcy": {"resolution": 421, "workers": None, "a_high": 12.0, "a_low": 3.0, "tau": 3.0},
    "navier-stokes": {"resolution": 64, "nu": 1e-3, "t_final": 50.0, "frame_dt": 1.0, "solve_resolution": None,
                      "dt": None},
    "kolmogorov": {"resolution": 64, "reynolds": 1000.0, "drag": 0.1, "t_final": 10.0, "frame_dt": 0.0625,
                   "spinup": 30.0, "solve_resolution": 256, "dt": None},
    "turbulence3d": {"resolution": 32, "t_final": 1.0, "frame_dt": 0.05, "spinup": 5.0, "dt": 0.02},
    "shallow-water": {"resolution": 64, "t_final": 1.0, "frame_dt": 0.01},
    "diffusion-reaction": {"resolution": 64, "t_final": 5.0, "frame_dt": 0.05, "dt": 2.5e-3},
    "compressible-ns": {"resolution": 64, "mach": 1.0, "eta": 0.1, "t_final": 1.0, "frame_dt": 0.05},
    "smoke": {"resolution": 64, "solve_resolution": None},
    "smoke-conditioned": {"resolution": 64, "solve_resolution": None},
    "smoke3d": {"resolution": 64},
    "elasticity": {"resolution": 28, "traction": 100.0, "young": 1.0, "poisson": 0.45, "grading": 1.0},
    "airfoil": {"resolution": 96, "speed": 1.0, "max_alpha": 10.0, "density": 1.0, "far_radius": 20.0,
                "far_points": 64, "grading": 1.0},
    "heat-mesh": {"resolution": 64, "diffusivity": 0.1, "t_final": 1.0, "frame_dt": 0.05, "dt": 0.01},
}


def generate_parser():
    (sub,) = [a for a in build_parser()._actions if a.dest == "command"]
    return sub.choices["generate"]


def test_the_cli_choices_and_flags_are_the_registry():
    parser = generate_parser()
    (pde,) = [a for a in parser._actions if a.dest == "pde"]
    assert list(pde.choices) == sorted(PDES) == sorted(DEFAULTS)
    options = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    for name, flag in FLAGS.items():
        assert options[dashed(name)].type is flag.type and options[dashed(name)].default is None
        assert options[dashed(name)].help == flag_help(name)
    assert set(options) == {"-h", "--samples", "--out", "--seed", "--force", *map(dashed, FLAGS)}


def test_defaults_are_the_generators_and_the_help_shows_them(capsys):
    assert {name: pde.defaults for name, pde in PDES.items()} == DEFAULTS
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("stored grid points per axis, or what a mesh generator counts (default: burgers 8192; darcy 421 "
            "nodes, boundary included; navier-stokes 64; kolmogorov 64; turbulence3d 32; shallow-water 64; "
            "diffusion-reaction 64; compressible-ns 64; smoke 64; smoke-conditioned 64; smoke3d 64; elasticity 28 "
            "segments on an edge of the cell; airfoil 96 airfoil vertices; heat-mesh 64 boundary vertices)") in text
    assert "--viscosity VISCOSITY burgers: viscosity (default: 0.1/(2 pi))" in text
    assert "--nu NU navier-stokes: viscosity (default: 0.001)" in text
    assert flag_help("t_final") == ("burgers, navier-stokes, kolmogorov, turbulence3d, shallow-water, "
                                    "diffusion-reaction, compressible-ns, heat-mesh: last stored time (default: "
                                    "burgers 1; navier-stokes 50; kolmogorov 10; turbulence3d 1; shallow-water 1; "
                                    "diffusion-reaction 5; compressible-ns 1; heat-mesh 1)")
    assert ("--dt DT burgers, navier-stokes, kolmogorov, turbulence3d, diffusion-reaction, heat-mesh: the solver's "
            "largest time step (default: burgers 0.001; navier-stokes 1.28 / the solve grid; kolmogorov 0.001 x 256 / "
            "the solve grid; turbulence3d 0.02; diffusion-reaction 0.0025; heat-mesh 0.01)") in text
    assert "--reynolds REYNOLDS kolmogorov: Reynolds number (nu = 1 / Re) (default: 1000)" in text


@pytest.mark.parametrize("name", sorted(PDES))
def test_the_cli_passes_the_registry_defaults_to_the_generator(capsys, tmp_path, monkeypatch, name):
    seen = {}

    @functools.wraps(PDES[name].generator)  # keeps the signature, so the defaults read from it
    def fake(samples, **kwargs):
        seen.update(kwargs)
        raise ConfigError("stopped")

    monkeypatch.setitem(PDES, name, dataclasses.replace(PDES[name], generator=fake))
    assert main(["generate", name, "--samples", "1", "--seed", "3", "--out", str(tmp_path / "x.h5")]) == 2
    assert capsys.readouterr().err.strip() == "opformer generate: error: stopped"
    assert {k: v for k, v in seen.items() if k not in ("progress", "first", "seed")} == DEFAULTS[name]
    assert seen["seed"] == 3 and seen.get("first", 0) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name, flag", [(name, flag) for name in sorted(PDES) for flag in FLAGS
                                        if flag not in DEFAULTS[name]])
def test_a_flag_a_pde_does_not_take_is_a_one_line_error(capsys, tmp_path, name, flag):
    out = tmp_path / "x.h5"
    code = main(["generate", name, "--samples", "1", dashed(flag), "2", "--out", str(out)])
    err = capsys.readouterr().err
    takers = [n for n in PDES if flag in DEFAULTS[n]]
    expected = takers[0] if len(takers) == 1 else ", ".join(takers[:-1]) + " and " + takers[-1]
    assert code == 2 and err == f"opformer generate: error: {dashed(flag)}: only used by {expected} (not by {name})\n"
    assert users(flag) == takers and not out.exists()


def test_darcy_nu_names_the_flag_and_its_pde(capsys, tmp_path):
    assert main(["generate", "darcy", "--samples", "1", "--nu", "1e-3", "--out", str(tmp_path / "d.h5")]) == 2
    assert capsys.readouterr().err == "opformer generate: error: --nu: only used by navier-stokes (not by darcy)\n"


@pytest.mark.parametrize("name, flags, message", [
    ("burgers", {"resolution": 10}, "--resolution 10: expected an even number of grid points >= 16"),
    ("darcy", {"resolution": 2}, "--resolution 2: expected at least 3 grid nodes per axis (boundary included)"),
    ("turbulence3d", {"resolution": 7}, "--resolution 7: expected an even number of grid points >= 8"),
    ("burgers", {"viscosity": -1.0}, "--viscosity -1.0: expected a positive viscosity"),
    ("darcy", {"workers": 0}, "--workers 0: expected a positive number of worker processes"),
    ("compressible-ns", {"mach": 0.0}, "--mach 0.0: expected a positive Mach number"),
    ("compressible-ns", {"eta": -0.1}, "--eta -0.1: expected a non-negative viscosity"),
    ("kolmogorov", {"resolution": 16, "solve_resolution": 24},
     "--solve-resolution 24: expected a multiple of the stored resolution 16"),
    ("elasticity", {"resolution": 7}, "--resolution 7: expected a number of segments on an edge >= 8"),
    ("airfoil", {"resolution": 33}, "--resolution 33: expected an even number of airfoil vertices >= 16"),
    ("elasticity", {"poisson": 0.5}, "--poisson 0.5: expected a ratio in [0, 0.5)"),
    ("airfoil", {"max_alpha": 40.0}, "--max-alpha 40.0: expected an angle in [0, 30) degrees"),
    ("heat-mesh", {"diffusivity": 0.0}, "--diffusivity 0.0: expected a positive diffusivity"),
    ("heat", {}, "pde 'heat': expected one of burgers, darcy, navier-stokes, kolmogorov, turbulence3d, shallow-water"),
    ("burgers", {"dx": 0.1}, "dx: not a setting of opformer generate (expected one of resolution, viscosity"),
])
def test_bad_settings_are_config_errors_before_any_solve(tmp_path, name, flags, message):
    with pytest.raises(ConfigError) as info:
        generate_file(name, tmp_path / "x.h5", 1, **flags)
    assert str(info.value).startswith(message)
    assert list(tmp_path.iterdir()) == []


def test_the_darcy_resolution_rule_allows_odd_grids_and_none_means_the_default():
    assert PDES["darcy"].settings("darcy", {"resolution": 3, "workers": None}) == {**DEFAULTS["darcy"], "resolution": 3}
    assert PDES["turbulence3d"].settings("turbulence3d", {"t_final": None}) == DEFAULTS["turbulence3d"]
    assert registry.lookup("kolmogorov") is PDES["kolmogorov"]


#: Generator keywords that are not physical settings of the data: sample counts and seeds, the resumable chunk's
#: first sample, the progress callback, the solver's batching and parallelism, Darcy's linear-solver choice and
#: tolerance, Burgers' spectral solve grid (a count of modes, not a multiple of the storage grid), and the
#: overrides of turbulence3d's physics dictionary.
NOT_FLAGS = {"samples", "n_samples", "seed", "first", "progress", "batch_size", "solver", "tol", "physics"}


@pytest.mark.parametrize("name", sorted(PDES))
def test_every_physical_setting_of_a_generator_is_a_flag(name):
    entry = PDES[name]
    keywords = set(inspect.signature(entry.generator).parameters) - NOT_FLAGS - {"resolution"}
    if name == "burgers":
        keywords -= {"solve_resolution", "workers"}
    if name != "darcy":
        keywords -= {"workers"}
    assert keywords == set(entry.flags)


def test_kolmogorov_flags_reach_the_generator_and_darcy_takes_its_contrast():
    settings = PDES["kolmogorov"].settings("kolmogorov", {"reynolds": 2500.0, "drag": 0.05, "spinup": 0.0})
    assert (settings["reynolds"], settings["drag"], settings["spinup"]) == (2500.0, 0.05, 0.0)
    with pytest.raises(ConfigError, match="--reynolds -1.0: expected a positive Reynolds number"):
        PDES["kolmogorov"].settings("kolmogorov", {"reynolds": -1.0})
    with pytest.raises(ConfigError, match="--reynolds: only used by kolmogorov"):
        PDES["burgers"].settings("burgers", {"reynolds": 10.0})
    a, _, settings = PDES["darcy"].generator(2, resolution=9, workers=1, a_high=20.0, a_low=1.0, tau=6.0)
    assert set(np.unique(a)) <= {20.0, 1.0}
    assert settings["pde"]["coefficient"]["tau"] == 6.0
    assert settings["pde"]["coefficient"]["map"] == "a = 20 where p >= 0, else 1"


def test_a_files_pde_name_finds_its_one_descriptor():
    from opformer.pde.registry import VORTICITY_ESTIMATE, stored_pde

    names = [name for pde in PDES.values() for name in pde.stored]
    assert len(names) == len(set(names)) and all(pde.stored for pde in PDES.values())
    for key, pde in PDES.items():
        assert pde.key == key and all(stored_pde({"name": name}) is pde for name in pde.stored)
    assert stored_pde({"name": "navier_stokes_2d_fno"}).key == "navier-stokes"
    assert stored_pde({"name": "kolmogorov"}) is None and stored_pde(None) is None and stored_pde({}) is None
    # the vorticity estimate needs a forcing; only a PDE's own forcing is its own
    assert all(pde.forcing is not None for pde in PDES.values() if pde.estimate == VORTICITY_ESTIMATE)
    kolmogorov = PDES["kolmogorov"]
    assert kolmogorov.own_forcing({"forcing": kolmogorov.forcing.record}) and not kolmogorov.own_forcing({})
    assert PDES["burgers"].own_forcing({})
