"""Make the fixtures of ``opformer import`` (tests/fixtures/imports/) from the reference implementations, and measure
the imported models against them at full size (benchmarks/results/imports.json, .md).

Runs where the references are installed: the DPOT authors' repository (thu-ml/DPOT, not on the package index; its
``models/dpot.py`` and ``models/dpot3d.py`` are imported from ``--dpot-repo``, never copied here) and the ``peers``
extra (``galerkin-transformer``, ``neuraloperator``), with opformer on the path::

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install torch==2.13.0 \\
        && /tmp/peers/bin/pip install neuraloperator galerkin-transformer ipython einops h5py pyyaml scipy pyamg \\
           threadpoolctl tqdm matplotlib
    PYTHONPATH=src /tmp/peers/bin/python benchmarks/import_fixtures.py --dpot-repo /path/to/DPOT

Every reference model gets random, non-trivial weights (seeded; no zero biases, a ``pos_embed`` that is not
constant), is saved as its code base saves it, converted by :func:`opformer.imports.convert_file`, and both are run
on one input: relative L2 of the outputs in float32 and in float64. The fixtures are small models of the same
layouts (a few hundred KB in all): the file as the reference writes it, and ``*_io.pt`` with the input and the
reference's outputs (and, for the tiny DPOT, the gradients of a loss); the full-size models (DPOT Ti, the GT
Burgers model of 530,305 parameters, the FNO baselines) are measured here and not kept.

Float64 references: the DPOT code builds its coordinate grid with ``dtype=torch.float`` and neuraloperator's
spectral convolution its output spectrum as ``torch.cfloat``; for the float64 runs (and only there) this script
hands those two modules a view of ``torch`` whose ``float`` / ``cfloat`` are float64 / complex128. The DPOT code's
other buffers follow the default dtype, set to float64 for those runs. The Galerkin Transformer package's
attention applies ``F.dropout`` (p = 0.5) even in evaluation whenever it holds a dropout module; its attention
modules are given ``dropout = None`` so that the reference is deterministic (docs/models.md).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import json
import math
import sys
import time
import types
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from opformer.imports import build_surrogate, convert_file, dpot, galerkin, neuraloperator  # noqa: E402
from opformer.models.registry import build_model  # noqa: E402

CONVERTERS = {"dpot": dpot.convert, "galerkin-transformer": galerkin.convert, "neuraloperator": neuraloperator.convert}

FIXTURES = ROOT / "tests" / "fixtures" / "imports"
RESULTS = ROOT / "benchmarks" / "results" / "imports"


def randomize(model: nn.Module, seed: int) -> None:
    """Random, non-trivial weights: N(0, 1) / sqrt(fan-in) for matrices, 1 + 0.1 N(0, 1) for norm scales,
    0.1 N(0, 1) for biases and other vectors, 0.5 N(0, 1) for DPOT's positional embedding."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float64)
            if p.is_complex():
                noise = torch.complex(noise, torch.randn(p.shape, generator=generator, dtype=torch.float64))
            if name.endswith("pos_embed"):
                value = 0.5 * noise
            elif p.dim() >= 2:
                value = noise / math.sqrt(max(1, p[0].numel()))
            elif "norm" in name and name.endswith("weight"):
                value = 1 + 0.1 * noise
            else:
                value = 0.1 * noise
            p.copy_(value.to(p.dtype))


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


@contextlib.contextmanager
def float64_names(*modules: types.ModuleType) -> Any:
    """``torch.float`` / ``torch.cfloat`` as float64 / complex128 inside ``modules`` (see the module docstring), and
    float64 as the default dtype."""
    proxy = types.ModuleType("torch_float64")
    proxy.__getattr__ = lambda name: getattr(torch, name)  # type: ignore[attr-defined]
    proxy.float, proxy.cfloat = torch.float64, torch.complex128
    previous = [module.torch for module in modules]
    default = torch.get_default_dtype()
    for module in modules:
        module.torch = proxy
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(default)
        for module, old in zip(modules, previous):
            module.torch = old


def model64(fmt: str, config: dict[str, Any], reference64: nn.Module) -> nn.Module:
    """opformer's model of ``config`` in float64 with the float64 reference's weights, converted in float64 (a
    conversion that scales a weight, as the fourier attention's, is then not rounded to float32)."""
    model = build_model(config).double()
    state = {k: v for k, v in reference64.state_dict().items() if isinstance(v, torch.Tensor)}  # not _metadata
    model.load_state_dict(CONVERTERS[fmt](state, config, "reference"))
    return model.eval()


def save(obj: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path)
    return path


# --- DPOT -------------------------------------------------------------------------------------------------------

def dpot_case(repo: Path, name: str, kwargs: dict[str, Any], batch: int, seed: int, keep: bool, work: Path,
              grads: bool = False) -> dict[str, Any]:
    """The authors' DPOTNet / DPOTNet3D of ``kwargs`` against its import."""
    sys.path.insert(0, str(repo))
    module = importlib.import_module("models.dpot3d" if name.startswith("dpot3d") else "models.dpot")
    cls = module.DPOTNet3D if name.startswith("dpot3d") else module.DPOTNet
    ndim = 3 if name.startswith("dpot3d") else 2
    ref = cls(**kwargs).eval()
    randomize(ref, seed)
    path = (FIXTURES if keep else work) / f"{name}.pth"
    args = argparse.Namespace(modes=kwargs["modes"], T_bundle=kwargs["out_timesteps"], act="gelu",
                              mixing_type="afno", normalize=0, width=kwargs["embed_dim"])
    save({"args": args, "model": ref.state_dict()}, path)
    generator = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, *[kwargs["img_size"]] * ndim, kwargs["in_timesteps"], kwargs["in_channels"],
                    generator=generator)
    with torch.no_grad():
        out32 = ref(x)
    ref64 = copy.deepcopy(ref).double()
    with float64_names(module):
        with torch.no_grad():
            out64 = ref64(x.double())
        r = torch.randn(out64[0].shape if ndim == 2 else out64.shape, generator=generator, dtype=torch.float64)
        gradients = {}
        if grads:
            ref64.zero_grad()
            ((ref64(x.double())[0] * r).sum()).backward()
            gradients = {k: p.grad.detach().clone() for k, p in ref64.named_parameters() if p.grad is not None}
    y32, c32 = (out32 if ndim == 2 else (out32, None))
    y64, c64 = (out64 if ndim == 2 else (out64, None))
    imported = convert_file("dpot", path)
    surrogate = build_surrogate(imported)
    model = surrogate.model
    with torch.no_grad():
        z = model.encode(x)
        mine32, cls32 = model.decode(z), (model.classify(z) if c32 is not None else None)
        double = model64("dpot", imported.config, ref64)
        z = double.encode(x.double())
        mine64, cls64 = double.decode(z), (double.classify(z) if c64 is not None else None)
    row = {"format": "dpot", "case": name, "preset": imported.preset, "parameters": sum(p.numel() for p in ref.parameters()),
           "input": list(x.shape), "float32": rel(mine32, y32), "float64": rel(mine64, y64),
           "config": imported.config}
    if c32 is not None:
        row["classifier_float32"], row["classifier_float64"] = rel(cls32, c32), rel(cls64, c64)
    if keep:
        io = {"input": x, "output32": y32, "output64": y64}
        if c32 is not None:
            io.update(cls32=c32, cls64=c64)
        if grads:
            io.update(loss_weights=r, grads64=gradients)
        save(io, FIXTURES / f"{name}_io.pt")
    sys.path.remove(str(repo))
    return row


# --- Galerkin Transformer ---------------------------------------------------------------------------------------

GT_BURGERS = {
    "node_feats": 1, "n_targets": 1, "n_hidden": 96, "num_feat_layers": 0, "num_encoder_layers": 4, "n_head": 1,
    "dim_feedforward": 192, "attention_type": "galerkin", "feat_extract_type": None, "layer_norm": False,
    "attn_norm": True, "norm_type": "layer", "batch_norm": False, "pos_dim": 1, "spacial_dim": 1,
    "spacial_fc": False, "decoder_type": "ifft", "freq_dim": 48, "num_regressor_layers": 2, "fourier_modes": 16,
    "n_freq_targets": 0, "return_attn_weight": False, "return_latent": False, "spacial_residual": False,
    "regressor_activation": "silu", "attn_activation": "relu", "xavier_init": 0.01, "diagonal_weight": 0.01,
    "symmetric_init": False, "residual_type": "add", "dropout": 0.0, "encoder_dropout": 0.0, "decoder_dropout": 0.0,
    "ffn_dropout": 0.0, "debug": False,
}
GT_SMALL = {**GT_BURGERS, "n_hidden": 16, "num_encoder_layers": 2, "n_head": 2, "dim_feedforward": 32,
            "freq_dim": 8, "fourier_modes": 4}


def gt_case(name: str, config: dict[str, Any], sizes: list[int], seed: int, keep: bool, work: Path) -> list[dict]:
    """The package's SimpleTransformer of ``config`` against its import, at each grid size."""
    from galerkin_transformer.model import SimpleTransformer

    ref = SimpleTransformer(**config).eval()
    for layer in ref.encoder_layers:
        layer.attn.dropout = None  # the package's attention dropout runs in evaluation too (see the docstring)
    randomize(ref, seed)
    path = (FIXTURES if keep else work) / f"{name}.pt"
    save(ref.state_dict(), path)
    config_path = path.with_suffix(".yaml")
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    imported = convert_file("galerkin-transformer", path, config=str(config_path))
    model = build_surrogate(imported).model
    ref64 = copy.deepcopy(ref).double()
    double = model64("galerkin-transformer", imported.config, ref64)
    generator = torch.Generator().manual_seed(seed + 1)
    rows, io = [], {}
    for n in sizes:
        x = torch.randn(1, n, 1, generator=generator)
        pos = torch.linspace(0, 1, n).view(1, n, 1)  # their Burgers data's coordinates
        pos64 = torch.linspace(0, 1, n, dtype=torch.float64).view(1, n, 1)
        with torch.no_grad():
            y32 = ref(x, None, pos, pos)["preds"]
            y64 = ref64(x.double(), None, pos64, pos64)["preds"]
            mine32, mine64 = model(x), double(x.double())
        io[n] = {"input": x, "output32": y32, "output64": y64}
        rows.append({"format": "galerkin-transformer", "case": f"{name} n={n}", "preset": imported.preset,
                     "parameters": sum(p.numel() for p in ref.parameters()), "input": list(x.shape),
                     "float32": rel(mine32, y32), "float64": rel(mine64, y64), "config": imported.config})
    if keep:
        save(io, FIXTURES / f"{name}_io.pt")
    return rows


# --- neuraloperator ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def inverse_shift_fixed(module: types.ModuleType) -> Any:
    """neuraloperator 2.0 undoes its ``fftshift`` of the spectrum with ``fftshift`` again, not ``ifftshift``: the
    same on an even grid, a shift of one frequency on an odd one. Inside this block the second call of each pair is
    ``ifftshift`` (to show that this is the only difference at odd sizes)."""
    calls = [0]

    def shift(x: torch.Tensor, dim: Any = None) -> torch.Tensor:
        calls[0] += 1
        return (torch.fft.fftshift if calls[0] % 2 else torch.fft.ifftshift)(x, dim=dim)

    fft = types.SimpleNamespace(**{k: getattr(torch.fft, k) for k in dir(torch.fft) if not k.startswith("_")})
    fft.fftshift = shift
    previous = module.torch
    proxy = types.ModuleType("torch_shift")
    proxy.__getattr__ = lambda name: getattr(previous, name)  # type: ignore[attr-defined]
    proxy.fft = fft
    module.torch = proxy
    try:
        yield
    finally:
        module.torch = previous


def fno_case(name: str, kwargs: dict[str, Any], sizes: list[int], seed: int, keep: bool, work: Path,
             odd_sizes: tuple[int, ...] = ()) -> list[dict]:
    """neuraloperator's FNO of ``kwargs`` against its import, at each grid size (``odd_sizes``: also measured
    against neuraloperator with its inverse shift fixed, :func:`inverse_shift_fixed`)."""
    from neuralop.layers import spectral_convolution
    from neuralop.models import FNO

    ref = FNO(**kwargs, lifting_channel_ratio=0, use_channel_mlp=False, non_linearity=nn.functional.relu,
              fno_skip="linear").eval()
    randomize(ref, seed)
    path = save(ref.state_dict(), (FIXTURES if keep else work) / f"{name}.pt")
    imported = convert_file("neuraloperator", path)
    model = build_surrogate(imported).model
    ref64 = copy.deepcopy(ref).double()
    for p in ref64.parameters():  # Module.double() leaves complex parameters as they are
        if p.is_complex():
            p.data = p.data.to(torch.complex128)
    double = model64("neuraloperator", imported.config, ref64)
    ndim = len(kwargs["n_modes"])
    generator = torch.Generator().manual_seed(seed + 1)
    rows, io = [], {}
    for n in [*sizes, *odd_sizes]:
        x = torch.randn(1, kwargs["in_channels"], *[n] * ndim, generator=generator)
        fixed = inverse_shift_fixed(spectral_convolution) if n in odd_sizes else contextlib.nullcontext()
        with torch.no_grad():
            shipped = ref(x).movedim(1, -1) if n in odd_sizes else None
            with fixed:
                y32 = ref(x)
            with float64_names(spectral_convolution), (inverse_shift_fixed(spectral_convolution) if n in odd_sizes
                                                       else contextlib.nullcontext()):
                y64 = ref64(x.double())
            mine32, mine64 = model(x.movedim(1, -1)), double(x.double().movedim(1, -1))
        y32, y64 = y32.movedim(1, -1), y64.movedim(1, -1)
        io[n] = {"input": x.movedim(1, -1), "output32": y32, "output64": y64}
        label = f"{name} n={n}" + (f" (reference with ifftshift; as shipped: {rel(mine32, shipped):.2e})"
                                   if n in odd_sizes else "")
        rows.append({"format": "neuraloperator", "case": label, "preset": imported.preset,
                     "parameters": sum(p.numel() * (2 if p.is_complex() else 1) for p in ref.parameters()),
                     "input": list(io[n]["input"].shape), "float32": rel(mine32, y32), "float64": rel(mine64, y64),
                     "config": imported.config})
    if keep:
        save(io, FIXTURES / f"{name}_io.pt")
    return rows


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    lines = ["# `opformer import`: outputs against the reference implementations", "",
             f"Measured by `{command}` (benchmarks/import_fixtures.py). Relative L2 of the imported model's output "
             "against the reference's on the same input and weights (random, non-trivial); fixture cases are the "
             "small models committed under tests/fixtures/imports/, the others full size.", "",
             "| format | case | parameters | input | float32 | float64 |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['format']} | {row['case']}{' (' + row['preset'] + ')' if row['preset'] else ''} | "
                     f"{row['parameters']:,} | {'x'.join(map(str, row['input']))} | {row['float32']:.2e} | "
                     f"{row['float64']:.2e} |")
        if "classifier_float32" in row:
            lines.append(f"| dpot | {row['case']}: classifier logits | | | {row['classifier_float32']:.2e} | "
                         f"{row['classifier_float64']:.2e} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dpot-repo", required=True, help="a checkout of thu-ml/DPOT (its models/ are imported)")
    parser.add_argument("--work", default="/tmp/opformer-import-fixtures", help="where the full-size files go")
    parser.add_argument("--skip-full", action="store_true", help="fixtures only (no full-size models)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    repo, work = Path(args.dpot_repo), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    start = time.time()
    tiny = dict(img_size=16, patch_size=4, mixing_type="afno", in_channels=4, out_channels=4, in_timesteps=4,
                out_timesteps=1, n_blocks=2, embed_dim=16, out_layer_dim=8, depth=2, modes=32, mlp_ratio=1,
                n_cls=12)
    small = dict(img_size=16, patch_size=4, mixing_type="afno", in_channels=3, out_channels=2, in_timesteps=3,
                 out_timesteps=2, n_blocks=2, embed_dim=16, out_layer_dim=8, depth=1, modes=3, mlp_ratio=2, n_cls=5)
    cube = dict(img_size=8, patch_size=2, mixing_type="afno", in_channels=2, out_channels=2, in_timesteps=2,
                out_timesteps=1, n_blocks=2, embed_dim=16, out_layer_dim=8, depth=1, modes=2, mlp_ratio=1, n_cls=1)
    rows = [dpot_case(repo, "dpot_tiny", tiny, 1, 10, True, work, grads=True),
            dpot_case(repo, "dpot_small", small, 1, 20, True, work),
            dpot_case(repo, "dpot3d_small", cube, 1, 30, True, work)]
    rows += gt_case("gt_small", GT_SMALL, [32, 64], 40, True, work)
    rows += gt_case("ft_small", {**GT_SMALL, "attention_type": "fourier"}, [32, 64], 50, True, work)
    fno1 = dict(n_modes=(8,), in_channels=1, out_channels=1, hidden_channels=8, n_layers=2,
                projection_channel_ratio=2)
    fno2 = dict(n_modes=(6, 4), in_channels=1, out_channels=1, hidden_channels=6, n_layers=2,
                projection_channel_ratio=2)
    rows += fno_case("fno1d_small", fno1, [32, 64], 60, True, work)
    rows += fno_case("fno2d_small", fno2, [16, 24], 70, True, work)
    if not args.skip_full:
        ti = dict(img_size=128, patch_size=8, mixing_type="afno", in_channels=4, out_channels=4, in_timesteps=10,
                  out_timesteps=1, n_blocks=4, embed_dim=512, out_layer_dim=32, depth=4, modes=32, mlp_ratio=1,
                  n_cls=12)
        rows.append(dpot_case(repo, "dpot_Ti", ti, 1, 80, False, work))
        rows += gt_case("gt_burgers", GT_BURGERS, [512, 2048], 90, False, work)
        rows += gt_case("ft_burgers", {**GT_BURGERS, "attention_type": "fourier"}, [512], 100, False, work)
        rows += fno_case("fno1d_burgers", dict(n_modes=(30,), in_channels=1, out_channels=1, hidden_channels=64,
                                               n_layers=4, projection_channel_ratio=2), [512, 2048], 110, False, work)
        rows += fno_case("fno2d_darcy", dict(n_modes=(24, 22), in_channels=1, out_channels=1, hidden_channels=32,
                                             n_layers=4, projection_channel_ratio=4), [64, 128], 120, False, work,
                             odd_sizes=(85,))
    command = "PYTHONPATH=src python benchmarks/import_fixtures.py --dpot-repo DPOT" + \
        (" --skip-full" if args.skip_full else "")
    report = {"command": command, "torch": torch.__version__, "seconds": time.time() - start, "rows": rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    RESULTS.with_suffix(".md").write_text(markdown(rows, command))
    print(markdown(rows, command))
    sizes = sum(p.stat().st_size for p in FIXTURES.iterdir())
    print(f"fixtures: {sizes / 1024:.0f} KiB in {FIXTURES}")
    worst = max(max(r["float32"] for r in rows) / 1e-5, max(r["float64"] for r in rows) / 1e-10)
    return 0 if worst <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
