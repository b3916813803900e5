"""Make the FactFormer fixtures of tests/imports/test_factformer_import.py from the authors' code
(BaratiLab/FactFormer).

Their models are the classes of their example scripts (``FactFormer2D`` of ``examples/turb_ns2d_fact_lm.py`` and
``examples/darcy2d_fact.py``, ``FactFormer3D`` of ``examples/turb_ns3d_fact_lm.py`` and
``examples/threed_smokesim_fact_lm.py``), imported from a checkout given as ``--repo`` (never copied here); they
need ``einops``, ``pyyaml``, ``matplotlib``, ``tqdm``, ``h5py`` and ``scipy`` (``psutil``, which only their trainer
uses, is stubbed)::

    git clone https://github.com/BaratiLab/FactFormer /tmp/FactFormer   # commit c9801d1
    PYTHONPATH=src python benchmarks/import_fixtures_factformer.py --repo /tmp/FactFormer [--full]

Each case builds their model from a tiny config in their YAML format (kept as ``factformer_<case>.yml``), gives
it random non-trivial weights (seeded), runs it in float64 on a random input with their coordinates, and saves
``factformer_<case>.safetensors``: their state dict under ``model.`` (float64), ``input`` and ``output`` in
opformer's layout (``(batch, *spatial, t, c)`` for time models), all float64. The test maps the weights with
:mod:`opformer.imports.factformer` and compares opformer's output with theirs. ``--full`` also measures their
four configs' sizes (their YAML files, on small grids) in float64 and float32, printed, not kept.

Float64: their RoPE frequencies are computed in float32 when the model is built; :func:`exact_rope` recomputes
them in float64 (opformer's converter accepts either, within 1e-6).

Their bug, handled here: at their latest commit ``GroupNorm(domain_wise=True)`` (``libs/basics.py``), the first
module of every ``FABlock2D/3D.to_out``, returns ``(batch, nx * ny (* nz), channels)``, so the residual
``attn_layer(u, pos_lst) + u`` of their encoders fails on the grid-shaped ``u``. Each such norm's output is
reshaped to its input's shape ``(batch, nx, ny (, nz), channels)``, the layout its own ``view(b, g, -1, c)``
and the flattening ``rearrange`` imply (the values are unchanged, only the grid axes are restored).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import yaml
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from import_fixtures import randomize  # noqa: E402
from opformer.models.registry import build_model  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "imports"

TINY = {"dim": 16, "heads": 2, "dim_head": 4, "depth": 2, "pos_in_dim": 2, "pos_out_dim": 2,
        "positional_embedding": "rotary"}
#: case -> (their script, their model section, grid, batch, the length of their coordinates)
CASES: dict[str, tuple[str, dict[str, Any], tuple[int, ...], int, float]] = {
    "ns2d": ("turb_ns2d_fact_lm", {**TINY, "in_dim": 1, "out_dim": 1, "in_time_window": 3, "out_time_window": 6,
                                   "kernel_multiplier": 2, "latent_multiplier": 1.5, "max_latent_steps": 2},
             (8, 6), 2, 2 * math.pi),
    "ns3d": ("turb_ns3d_fact_lm", {**TINY, "in_dim": 4, "out_dim": 4, "in_time_window": 3, "out_time_window": 4,
                                   "kernel_multiplier": 3, "latent_mutliplier": 1.5, "max_latent_steps": 2,
                                   "pos_in_dim": 3, "pos_out_dim": 3}, (5, 4, 6), 2, 2 * math.pi),
    "smoke3d": ("threed_smokesim_fact_lm", {**TINY, "in_dim": 4, "out_dim": 4, "in_time_window": 2,
                                            "out_time_window": 4, "kernel_multiplier": 3, "latent_multiplier": 1.5,
                                            "max_latent_steps": 2, "padding": 2, "pos_in_dim": 3, "pos_out_dim": 3},
                (6, 4, 8), 2, 8.0),
    "darcy": ("darcy2d_fact", {**TINY, "in_dim": 1, "out_dim": 1, "kernel_multiplier": 2, "resolution": 9},
              (9, 9), 2, 1.0),
}


def load_script(repo: Path, script: str) -> types.ModuleType:
    """Their example script as a module (its imports resolved in ``repo``; ``nn_module``, the old name of their
    ``libs`` that the smoke script still imports, aliased)."""
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    sys.modules.setdefault("psutil", types.ModuleType("psutil"))
    import libs.positional_encoding_module as positional  # their package, from repo

    package = types.ModuleType("nn_module")
    package.__path__ = []
    sys.modules.setdefault("nn_module", package)
    sys.modules.setdefault("nn_module.positional_encoding_module", positional)
    spec = importlib.util.spec_from_file_location(f"factformer_{script}", repo / "examples" / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def restore_grid_axes(model: torch.nn.Module, basics: types.ModuleType) -> int:
    """Reshape the output of each domain-wise ``GroupNorm`` to its input's shape (see the module docstring)."""
    count = 0
    for module in model.modules():
        if isinstance(module, basics.GroupNorm) and module.domain_wise:
            module.forward = (lambda x, f=module.forward: f(x).reshape(x.shape))
            count += 1
    return count


def exact_rope(model: torch.nn.Module) -> None:
    """Their RoPE frequencies ``inv_freq`` are computed in float32 when the model is built (``.float()`` in
    ``RotaryEmbedding``) and only then cast to float64; recompute them in float64 so that the float64 reference
    is float64 throughout (the frequencies differ by float32 rounding, 1e-7 relative)."""
    for module in model.modules():
        if hasattr(module, "inv_freq"):
            width = 2 * module.inv_freq.numel()
            exact = 1.0 / 10000 ** (torch.arange(0, width, 2, dtype=torch.float64) / width)
            module.inv_freq.copy_(exact)


def coordinates(grid: tuple[int, ...], length: float, padding: int) -> list[torch.Tensor]:
    """Their ``pos_lst``: ``linspace(0, L, n)`` per axis, then ``padding`` points at the grid's spacing (opformer's
    choice; their smoke script spaces them ``L / n``), each ``(n, 1)``."""
    axes = []
    for n in grid:
        points = torch.linspace(0, length, n, dtype=torch.float64)
        step = length / (n - 1)
        points = torch.cat([points, length + step * torch.arange(1, padding + 1, dtype=torch.float64)])
        axes.append(points.unsqueeze(-1))
    return axes


def make_case(repo: Path, name: str, seed: int) -> dict[str, float]:
    """Build, run and save one case; returns its sizes."""
    script, section, grid, batch, length = CASES[name]
    module = load_script(repo, script)
    import libs.basics as basics

    torch.manual_seed(seed)
    config = SimpleNamespace(**section)
    if name == "darcy":
        config.reducer = None  # read by their constructor, unused
    model = module.FactFormer2D(config) if len(grid) == 2 else module.FactFormer3D(config)
    randomize(model, seed)
    model = model.double().eval()
    norms = restore_grid_axes(model, basics)
    exact_rope(model)
    pos = coordinates(grid, length, section.get("padding", 0))
    generator = torch.Generator().manual_seed(seed + 1)
    if name == "darcy":
        x = torch.randn(batch, *grid, section["in_dim"], generator=generator, dtype=torch.float64)
        with torch.no_grad():
            y = model(x, pos)
    else:
        t_in, steps = section["in_time_window"], section["max_latent_steps"]
        x = torch.randn(batch, *grid, t_in, section["in_dim"], generator=generator, dtype=torch.float64)
        theirs = x[..., 0] if name == "ns2d" else x.permute(0, -1, -2, *range(1, len(grid) + 1))
        with torch.no_grad():
            y = model(theirs.clone(), pos, steps)  # (batch, t, *grid, c)
        y = y.movedim(1, -2)
    state = {f"model.{k}": v.detach().double().contiguous() for k, v in model.state_dict().items()}
    path = FIXTURES / f"factformer_{name}.safetensors"
    save_file({**state, "input": x.contiguous(), "output": y.contiguous()}, path)
    path.chmod(0o644)  # save_file makes it private
    resolution = {"resolution": grid[0]}
    text = yaml.safe_dump({"data": resolution, "model": section}, sort_keys=False)
    (FIXTURES / f"factformer_{name}.yml").write_text(f"# the authors' config format ({script}.py), tiny sizes\n{text}")
    return {"parameters": sum(p.numel() for p in model.parameters()), "norms_reshaped": norms,
            "output_norm": float(y.norm())}


#: case -> (their config file, the grid of the full-size measurement)
FULL = {"ns2d": ("ns2d_fact_lm.yml", (32, 32)), "ns3d": ("ns3d_fact_lm.yml", (12, 12, 12)),
        "smoke3d": ("smoke3d_fact_lm.yml", (16, 16, 16)), "darcy": ("darcy2d_fact.yml", (29, 29))}


def measure_full(repo: Path, name: str, seed: int) -> dict[str, Any]:
    """Their model at their config's sizes (on a small grid), mapped onto opformer's: relative L2 of the outputs
    in float64 and float32 (the float32 model run from the float32 weights)."""
    from opformer.imports import factformer

    script, _, _, batch, length = CASES[name]
    config_file, grid = FULL[name]
    section = yaml.safe_load((repo / "configs" / config_file).read_text())["model"]
    if name == "darcy":
        section = {**section, "resolution": grid[0]}
    module = load_script(repo, script)
    import libs.basics as basics

    torch.manual_seed(seed)
    config = SimpleNamespace(**section, **({"reducer": None} if name == "darcy" else {}))
    theirs = module.FactFormer2D(config) if len(grid) == 2 else module.FactFormer3D(config)
    randomize(theirs, seed)
    restore_grid_axes(theirs, basics)
    theirs = theirs.double().eval()
    exact_rope(theirs)
    state = {k: v.detach() for k, v in theirs.state_dict().items()}
    ours_config, _ = factformer.infer_config(state, section, config_file)
    ours = build_model(ours_config).double().eval()
    ours.load_state_dict(factformer.convert(state, ours_config, config_file))
    pos = coordinates(grid, length, section.get("padding", 0))
    generator = torch.Generator().manual_seed(seed + 1)
    steps = section.get("max_latent_steps")
    shape = (batch, *grid, section["in_time_window"], section["in_dim"]) if steps else (batch, *grid, section["in_dim"])
    x = torch.randn(*shape, generator=generator, dtype=torch.float64)

    def run_theirs(dtype: torch.dtype) -> torch.Tensor:
        model, xs, ps = theirs.to(dtype), x.to(dtype), [p.to(dtype) for p in pos]
        with torch.no_grad():
            if not steps:
                return model(xs, ps)
            inp = xs[..., 0] if name == "ns2d" else xs.permute(0, -1, -2, *range(1, len(grid) + 1))
            return model(inp.clone(), ps, steps).movedim(1, -2)

    out = {"parameters": sum(p.numel() for p in ours.parameters()), "grid": list(grid)}
    for dtype, label in ((torch.float64, "float64"), (torch.float32, "float32")):
        reference = run_theirs(dtype).double()
        with torch.no_grad():
            y = ours.to(dtype)(x.to(dtype)).double()
        out[label] = float((y - reference).norm() / reference.norm())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=Path, help="a checkout of BaratiLab/FactFormer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--full", action="store_true", help="also measure their configs' sizes (not kept)")
    args = parser.parse_args()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(CASES):
        print(name, make_case(args.repo.resolve(), name, args.seed + 10 * i))
    for i, name in enumerate(CASES if args.full else []):
        print(name, "full size", measure_full(args.repo.resolve(), name, args.seed + 10 * i))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
