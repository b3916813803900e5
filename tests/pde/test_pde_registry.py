"""The PDE registry is what `opformer generate` offers: choices, flags, defaults, help and flag checks."""

import dataclasses
import functools
import math

import pytest

import opformer.pde.registry as registry
from opformer.cli import build_parser, main
from opformer.data.generate import generate_file
from opformer.errors import ConfigError
from opformer.pde.registry import FLAGS, PDES, dashed, flag_help, users

#: What `opformer generate NAME` uses when no flag is given (pinned: a changed default is a behaviour change).
DEFAULTS = {
    "burgers": {"resolution": 8192, "viscosity": 0.1 / (2 * math.pi)},
    "darcy": {"resolution": 421, "workers": None},
    "navier-stokes": {"resolution": 64, "nu": 1e-3, "t_final": 50.0, "solve_resolution": None, "dt": None},
    "kolmogorov": {"resolution": 64, "t_final": 10.0, "solve_resolution": 256},
    "turbulence3d": {"resolution": 32, "t_final": 1.0},
    "shallow-water": {"resolution": 64},
    "diffusion-reaction": {"resolution": 64, "t_final": 5.0, "dt": 2.5e-3},
    "compressible-ns": {"resolution": 64, "mach": 1.0, "eta": 0.1, "t_final": 1.0},
    "smoke": {"resolution": 64, "solve_resolution": None},
    "smoke-conditioned": {"resolution": 64, "solve_resolution": None},
    "smoke3d": {"resolution": 64},
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
    assert ("stored grid points per axis (default: burgers 8192; darcy 421 nodes, boundary included; "
            "navier-stokes 64; kolmogorov 64; turbulence3d 32; shallow-water 64; diffusion-reaction 64; "
            "compressible-ns 64; smoke 64; smoke-conditioned 64; smoke3d 64)") in text
    assert "--viscosity VISCOSITY burgers: viscosity (default: 0.1/(2 pi))" in text
    assert "--nu NU navier-stokes: viscosity (default: 0.001)" in text
    assert flag_help("t_final") == ("navier-stokes, kolmogorov, turbulence3d, diffusion-reaction, compressible-ns: "
                                    "last stored time (default: navier-stokes 50; kolmogorov 10; turbulence3d 1; "
                                    "diffusion-reaction 5; compressible-ns 1)")
    assert ("--dt DT navier-stokes, diffusion-reaction: the solver's largest time step (default: navier-stokes "
            "1.28 / the solve grid; diffusion-reaction 0.0025)") in text


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
    ("heat", {}, "pde 'heat': expected one of burgers, darcy, navier-stokes, kolmogorov, turbulence3d, shallow-water"),
    ("burgers", {"dx": 0.1}, "dx: not a setting of opformer generate (expected one of resolution, viscosity"),
])
def test_bad_settings_are_config_errors_before_any_solve(tmp_path, name, flags, message):
    with pytest.raises(ConfigError) as info:
        generate_file(name, tmp_path / "x.h5", 1, **flags)
    assert str(info.value).startswith(message)
    assert list(tmp_path.iterdir()) == []


def test_the_darcy_resolution_rule_allows_odd_grids_and_none_means_the_default():
    assert PDES["darcy"].settings("darcy", {"resolution": 3, "workers": None}) == {"resolution": 3, "workers": None}
    assert PDES["turbulence3d"].settings("turbulence3d", {"t_final": None}) == DEFAULTS["turbulence3d"]
    assert registry.lookup("kolmogorov") is PDES["kolmogorov"]
