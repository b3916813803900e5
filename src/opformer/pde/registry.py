"""The PDEs of ``opformer generate``: one entry per PDE, the only place the CLI and ``data.generate`` learn of them.

An entry names the generator (a function of a module in ``opformer.pde``), the kind of data it returns, the
flags it takes and the rule its grid obeys. Defaults are not restated: ``--resolution`` and every flag default
to the generator's own keyword defaults (read from its signature), and the help shows them. Adding a PDE is
one module with its generator and one entry in ``PDES``; the CLI's choices, flags, defaults, help and the
"only used by" errors follow.

A generator is called as ``generator(samples, resolution=..., seed=..., progress=..., **flags)`` (trajectory
generators also with ``first=``, the first sample of a resumable chunk) and returns
``(inputs, targets, settings)`` (kind ``OPERATOR``: arrays ``(sample, *grid)``) or ``(fields, settings)``
(kind ``TRAJECTORY``: ``(sample, time, *grid, channel)``, ``settings["pde"]`` holding ``length``, ``times``
and ``channels``); ``settings`` is the JSON-serialisable ``{"pde": ..., "solver": ...}`` stored in the file.
A trajectory generator may list values drawn per sample in ``settings["pde"]["per_sample"]`` (``{name: [one
value per sample]}``); the chunks of a resumable run are joined in sample order (``data.generation_chunks``).

An entry is also the PDE's one descriptor for the files it made: the ``pde.name`` they record (``stored``; a file's
entry is :func:`stored_pde`), what solving a stored input again needs (``resolver``, ``forcing``;
:mod:`opformer.pde.resolve`) and which physics estimate its files have (``estimate``, ``forcing``, ``length``;
:mod:`opformer.trust.physics`). Nothing else dispatches on a PDE's name.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opformer.errors import ConfigError
from opformer.grids import CELLS, NODES, PERIODIC
from opformer.kinds import MESH, OPERATOR, TRAJECTORY
from opformer.pde.airfoil import generate_airfoil
from opformer.pde.burgers import generate_burgers, resolve_burgers
from opformer.pde.compressible_ns import generate_compressible_ns
from opformer.pde.darcy import generate_darcy, resolve_darcy
from opformer.pde.diffusion_reaction import generate_diffusion_reaction
from opformer.pde.elasticity import generate_elasticity
from opformer.pde.heat_mesh import generate_heat_mesh
from opformer.pde.kolmogorov import KOLMOGOROV_FORCING, generate_kolmogorov, kolmogorov_forcing
from opformer.pde.kolmogorov import LENGTH as KOLMOGOROV_LENGTH
from opformer.pde.navier_stokes import FNO_FORCING, fno_forcing, generate_fno_nu, resolve_fno_nu
from opformer.pde.navier_stokes3d import generate_turbulence3d
from opformer.pde.shallow_water import generate_shallow_water
from opformer.pde.smoke import generate_smoke, generate_smoke_conditioned
from opformer.pde.smoke3d import generate_smoke3d


@dataclass(frozen=True)
class Flag:
    """A setting ``opformer generate`` takes as ``--name`` (underscores as dashes), a keyword of the generators.

    ``expected`` (formatted with ``resolution``) says what a valid value is when ``valid(value, resolution)``
    is false; without it the generator checks the value itself.
    """

    type: type
    help: str
    expected: str = ""
    valid: Callable[[Any, int], bool] = lambda value, resolution: True


#: Every PDE-specific flag, in the order of the CLI's help. ``resolution`` is taken by every PDE.
FLAGS = {
    "resolution": Flag(int, "stored grid points per axis, or what a mesh generator counts"),
    "viscosity": Flag(float, "viscosity", "a positive viscosity", lambda value, resolution: value > 0),
    "workers": Flag(int, "worker processes", "a positive number of worker processes",
                    lambda value, resolution: value >= 1),
    "nu": Flag(float, "viscosity"),
    "t_final": Flag(float, "last stored time"),
    "solve_resolution": Flag(int, "the solver's grid, a multiple of --resolution",
                             "a multiple of the stored resolution {resolution}",
                             lambda value, resolution: value % resolution == 0),
    "dt": Flag(float, "the solver's largest time step", "a positive time step", lambda value, resolution: value > 0),
    "mach": Flag(float, "Mach number of the initial velocity (its mean magnitude over the sound speed)",
                 "a positive Mach number", lambda value, resolution: value > 0),
    "eta": Flag(float, "shear and bulk viscosity (zeta = eta), PDEBench's convention", "a non-negative viscosity",
                lambda value, resolution: value >= 0),
    "reynolds": Flag(float, "Reynolds number (nu = 1 / Re)", "a positive Reynolds number",
                     lambda value, resolution: value > 0),
    "drag": Flag(float, "linear drag coefficient", "a non-negative drag", lambda value, resolution: value >= 0),
    "frame_dt": Flag(float, "time between stored frames", "a positive time", lambda value, resolution: value > 0),
    "spinup": Flag(float, "time solved and discarded before the first frame", "a non-negative time",
                   lambda value, resolution: value >= 0),
    "a_high": Flag(float, "coefficient where the random field is >= 0", "a positive coefficient",
                   lambda value, resolution: value > 0),
    "a_low": Flag(float, "coefficient where the random field is < 0", "a positive coefficient",
                  lambda value, resolution: value > 0),
    "tau": Flag(float, "inverse correlation length of the coefficient's random field, (-Laplacian + tau^2 I)^-2",
                "a positive tau", lambda value, resolution: value > 0),
    "traction": Flag(float, "the traction pulling the top edge"),
    "young": Flag(float, "Young's modulus", "a positive modulus", lambda value, resolution: value > 0),
    "poisson": Flag(float, "Poisson's ratio (plane strain)", "a ratio in [0, 0.5)",
                    lambda value, resolution: 0 <= value < 0.5),
    "speed": Flag(float, "free-stream speed", "a positive speed", lambda value, resolution: value > 0),
    "max_alpha": Flag(float, "largest angle of attack in degrees (drawn from [-max, max])",
                      "an angle in [0, 30) degrees", lambda value, resolution: 0 <= value < 30),
    "density": Flag(float, "fluid density", "a positive density", lambda value, resolution: value > 0),
    "far_radius": Flag(float, "radius of the far circle in chords", "at least 2 chords",
                       lambda value, resolution: value >= 2),
    "diffusivity": Flag(float, "thermal diffusivity", "a positive diffusivity", lambda value, resolution: value > 0),
    "far_points": Flag(int, "vertices on the far circle", "at least 8 vertices", lambda value, resolution: value >= 8),
    "grading": Flag(float, "a graded mesh: cells growing about this factor away from the void or the airfoil "
                    "(1: the default mesh)", "a grading >= 1", lambda value, resolution: value >= 1),
}


#: The physics estimates of :mod:`opformer.trust.physics` (a PDE's ``estimate``): Darcy's residual, the 2D vorticity
#: equation's step residuals.
DARCY_ESTIMATE, VORTICITY_ESTIMATE = "darcy", "vorticity"


@dataclass(frozen=True)
class Forcing:
    """A PDE's steady forcing: as its files record it (``pde.forcing``) and its vorticity on the ``n x n`` grid."""

    record: str
    vorticity: Callable[[int], np.ndarray]


@dataclass(frozen=True)
class PDE:
    """One PDE of ``opformer generate``.

    ``flags``: the keys of ``FLAGS`` it takes besides ``resolution``; ``shown``: words for defaults its
    signature cannot show (``None``, or a number better written as a formula). ``min_resolution`` and
    ``even``: the storage grid's rule; ``grid``: the kind of every axis of the stored grid
    (:data:`opformer.grids.GRID_KINDS`; lengths come from ``settings["pde"]["length"]``, else 1). ``channels``: the input and target channel names (``OPERATOR``;
    trajectories name theirs in their settings; ``MESH``: the samples' fields that are stored as inputs and
    targets). ``chunk``: samples per resumable chunk (``TRAJECTORY``, ``MESH``), a multiple of the generator's
    own batch so that chunking adds no solver calls. ``resolution_means``: what ``--resolution`` counts where it
    is not grid points (a mesh's boundary vertices).

    The files it made: ``stored``, the ``pde.name`` they record (the generator's first, then those of converted
    files of the same equations); ``length``, the domain's side where a file records none; ``forcing``, the steady
    forcing its generator applies (a file recording another is not this PDE's to solve or estimate);
    ``resolver``, the function that solves a stored input again with a file's settings (:mod:`opformer.pde.resolve`:
    ``OPERATOR`` ``(pde, solver, inputs) -> targets``, ``TRAJECTORY`` ``(pde, solver, last, times) -> frames``);
    ``estimate``, the physics estimate of its predictions (``DARCY_ESTIMATE``, ``VORTICITY_ESTIMATE`` or none).
    ``key``: its name in :data:`PDES` (filled in there).
    """

    generator: Callable[..., tuple]
    kind: str
    summary: str
    flags: tuple[str, ...] = ()
    shown: dict[str, str] = field(default_factory=dict)
    min_resolution: int = 8
    even: bool = True
    grid: str = PERIODIC
    channels: tuple[list[str], list[str]] = ([], [])
    chunk: int = 0
    resolution_means: str = ""
    stored: tuple[str, ...] = ()
    length: float = 1.0
    forcing: Forcing | None = None
    resolver: Callable[..., np.ndarray] | None = None
    estimate: str = ""
    key: str = ""

    @property
    def defaults(self) -> dict[str, Any]:
        """``resolution`` and each flag: the generator's default."""
        parameters = inspect.signature(self.generator).parameters
        return {name: parameters[name].default for name in ("resolution", *self.flags)}

    def own_forcing(self, pde: dict[str, Any]) -> bool:
        """Whether a file's ``pde`` settings record this PDE's own forcing (true for a PDE without one)."""
        return self.forcing is None or pde.get("forcing") == self.forcing.record

    def takes(self, flag: str) -> bool:
        """Whether ``--flag`` is one of this PDE's settings."""
        return flag == "resolution" or flag in self.flags

    def settings(self, name: str, given: dict[str, Any]) -> dict[str, Any]:
        """The generator's keywords for the flags ``given`` (``None`` = not given): defaults filled, values checked.

        Raises ``ConfigError`` (one line, naming the flag) for a flag this PDE does not take or a bad value.
        """
        given = {key: value for key, value in given.items() if value is not None}
        for key in given:
            if key not in FLAGS:
                raise ConfigError(f"{key}: not a setting of opformer generate (expected one of {', '.join(FLAGS)})")
            if not self.takes(key):
                raise ConfigError(f"{dashed(key)}: only used by {_join(users(key))} (not by {name})")
        values = {**self.defaults, **given}
        resolution = values["resolution"]
        if resolution < self.min_resolution or (self.even and resolution % 2):
            expected = (f"{'an even' if self.even else 'a'} number of {self.resolution_means} >= {self.min_resolution}"
                        if self.resolution_means else
                        f"an even number of grid points >= {self.min_resolution}" if self.even else
                        f"at least {self.min_resolution} grid nodes per axis"
                        + (" (boundary included)" if self.grid == NODES else ""))
            raise ConfigError(f"--resolution {resolution}: expected {expected}")
        for key, value in given.items():
            flag = FLAGS[key]
            if flag.expected and not flag.valid(value, resolution):
                raise ConfigError(f"{dashed(key)} {value}: expected {flag.expected.format(resolution=resolution)}")
        return values


def _keyed(entries: dict[str, PDE]) -> dict[str, PDE]:
    """The entries, each holding its own name as ``key``."""
    return {key: dataclasses.replace(pde, key=key) for key, pde in entries.items()}


#: ``opformer generate NAME``: every built-in PDE.
PDES = _keyed({
    "burgers": PDE(
        generate_burgers, OPERATOR, "viscous Burgers on (0, 1), GRF u0 -> u(., 1) (Cao 2021 Ex. 5.1)",
        flags=("viscosity", "t_final", "dt"), shown={"viscosity": "0.1/(2 pi)"}, min_resolution=16,
        channels=(["u0"], ["u"]), stored=("burgers",), resolver=resolve_burgers),
    "darcy": PDE(
        generate_darcy, OPERATOR, "Darcy flow on (0, 1)^2, coefficient a -> solution u (Cao 2021 Ex. 5.2)",
        flags=("workers", "a_high", "a_low", "tau"),
        shown={"workers": "the available cores", "resolution": "421 nodes, boundary included"},
        min_resolution=3, even=False, grid=NODES, channels=(["a"], ["u"]), stored=("darcy",), resolver=resolve_darcy,
        estimate=DARCY_ESTIMATE),
    # FNO-nu solves 100 at a time (4 calls of 16 took 1.1-1.2x one call of 64)
    "navier-stokes": PDE(
        generate_fno_nu, TRAJECTORY, "FNO-nu vorticity on (0, 1)^2 (Li et al. 2020), frames every time unit",
        flags=("nu", "t_final", "frame_dt", "solve_resolution", "dt"),
        shown={"solve_resolution": "the storage grid for nu >= 1e-3, else 256", "dt": "1.28 / the solve grid"},
        chunk=100, stored=("navier_stokes_2d_fno",), forcing=Forcing(FNO_FORCING, fno_forcing),
        resolver=resolve_fno_nu, estimate=VORTICITY_ESTIMATE),
    "kolmogorov": PDE(
        generate_kolmogorov, TRAJECTORY, "Kolmogorov flow on [0, 2 pi)^2 (default Re = 1000), vorticity",
        flags=("reynolds", "drag", "t_final", "frame_dt", "spinup", "solve_resolution", "dt"),
        shown={"solve_resolution": "256, with dt scaled to keep the CFL number",
               "dt": "0.001 x 256 / the solve grid"}, chunk=16, stored=("kolmogorov_flow",),
        length=KOLMOGOROV_LENGTH, forcing=Forcing(KOLMOGOROV_FORCING, kolmogorov_forcing), estimate=VORTICITY_ESTIMATE),
    "turbulence3d": PDE(
        generate_turbulence3d, TRAJECTORY, "forced isotropic turbulence in [0, 2 pi)^3, velocity u, v, w, pressure p",
        flags=("t_final", "frame_dt", "spinup", "dt"), chunk=16, stored=("navier_stokes_3d_forced_turbulence",)),
    "shallow-water": PDE(
        generate_shallow_water, TRAJECTORY, "radial dam break on (-2.5, 2.5)^2 (PDEBench SWE), depth h, cell centres",
        flags=("t_final", "frame_dt"), grid=CELLS, chunk=16, stored=("shallow_water_2d_radial_dam_break",)),
    "diffusion-reaction": PDE(
        generate_diffusion_reaction, TRAJECTORY,
        "FitzHugh-Nagumo u, v on (-1, 1)^2, no-flux, cell centres (PDEBench 2D DR), Strang splitting",
        flags=("t_final", "frame_dt", "dt"), grid=CELLS, chunk=16, stored=("diffusion_reaction_2d",)),
    "compressible-ns": PDE(
        generate_compressible_ns, TRAJECTORY,
        "compressible Navier-Stokes vx, vy, density, pressure on the periodic (0, 1)^2 (PDEBench 2D CFD Rand)",
        flags=("mach", "eta", "t_final", "frame_dt"), chunk=16,
        stored=("compressible_navier_stokes_2d_rand", "compressible_navier_stokes_2d")),
    "smoke": PDE(
        generate_smoke, TRAJECTORY, "buoyant smoke in a closed [0, 32]^2 box (PDEArena NS, b = 0.5, 14 frames), "
        "smoke, vx, vy at cell centres", flags=("solve_resolution",), shown={"solve_resolution": "the storage grid"},
        grid=CELLS, chunk=16, stored=("smoke_2d_buoyancy",)),
    "smoke-conditioned": PDE(
        generate_smoke_conditioned, TRAJECTORY, "as smoke with b ~ U(0.2, 0.5) per trajectory, stored in the "
        "settings (PDEArena NS-cond, 56 frames)", flags=("solve_resolution",),
        shown={"solve_resolution": "the storage grid"}, grid=CELLS, chunk=16,
        stored=("smoke_2d_buoyancy_conditioned",)),
    "smoke3d": PDE(
        generate_smoke3d, TRAJECTORY, "buoyant smoke in a closed [0, 8]^3 box (FactFormer's 3D smoke, b = 0.5 along "
        "z, 20 frames), d, u, v, w at cell centres", grid=CELLS, chunk=8, stored=("smoke_3d_buoyancy",)),
    # the finite-element generators (the mesh extra); their resolution counts boundary vertices
    "elasticity": PDE(
        generate_elasticity, MESH, "Geo-FNO's unit cell with a random void pulled at its top (linear, plane "
        "strain), coordinates -> von Mises stress and the components",
        flags=("traction", "young", "poisson", "grading"),
        even=False, channels=([], ["von_mises", "stress"]), chunk=16, resolution_means="segments on an edge",
        shown={"resolution": "28 segments on an edge of the cell"}, stored=("elasticity",)),
    "airfoil": PDE(
        generate_airfoil, MESH, "potential flow past random NACA 4-digit airfoils with the Kutta condition, "
        "free stream -> velocity, pressure", flags=("speed", "max_alpha", "density", "far_radius", "far_points",
                                                    "grading"),
        min_resolution=16, channels=(["freestream"], ["velocity", "pressure"]), chunk=8,
        resolution_means="airfoil vertices", shown={"resolution": "96 airfoil vertices"}, stored=("airfoil",)),
    "heat-mesh": PDE(
        generate_heat_mesh, MESH, "heat on random star-shaped domains, u = 0 on the boundary, frames of u",
        flags=("diffusivity", "t_final", "frame_dt", "dt"), even=False, channels=([], ["u"]), chunk=16,
        resolution_means="boundary vertices", shown={"resolution": "64 boundary vertices"}, stored=("heat-mesh",)),
})


def lookup(name: str) -> PDE:
    """The entry of ``name``; ``ConfigError`` if there is none."""
    if name not in PDES:
        raise ConfigError(f"pde {name!r}: expected one of {', '.join(PDES)}")
    return PDES[name]


def stored_pde(pde: dict[str, Any] | None) -> PDE | None:
    """The entry of a data file's ``pde`` settings (by the ``pde.name`` it records); None for a PDE opformer does
    not know (a converted file of unknown origin, a user's own data)."""
    name = (pde or {}).get("name")
    return next((entry for entry in PDES.values() if name in entry.stored), None)


def dashed(flag: str) -> str:
    """The command-line spelling of a flag: ``t_final`` -> ``--t-final``."""
    return "--" + flag.replace("_", "-")


def users(flag: str) -> list[str]:
    """The PDEs that take ``flag``, in registry order."""
    return [name for name, pde in PDES.items() if pde.takes(flag)]


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float, np.floating)) else str(value)


def flag_help(flag: str) -> str:
    """The CLI help of ``flag``: what it sets, which PDEs take it (unless all do) and each one's default."""
    names = users(flag)
    shown = {name: PDES[name].shown.get(flag, _show(PDES[name].defaults[flag])) for name in names}
    if len(names) == 1:
        return f"{names[0]}: {FLAGS[flag].help} (default: {shown[names[0]]})"
    prefix = "" if len(names) == len(PDES) else ", ".join(names) + ": "
    return f"{prefix}{FLAGS[flag].help} (default: " + "; ".join(f"{n} {s}" for n, s in shown.items()) + ")"
