"""The spectral layers' two forms in torch on this CPU, at the papers' sizes: FFTs (``rfftn``/``irfftn``) against
truncated DFT matrix products (:mod:`opformer.nn.dft`, the form an ONNX graph holds), for the layers whose torch form
is chosen by ``MATRIX_3D`` (3D SpectralConv) and ``MATRIX_MIXER`` (DPOT's Fourier mixer): a forward pass, and a
forward and backward pass (training), each the median of a few repeats, the load average beside every figure.
(The 1D and 2D SpectralConv and F-FNO's axis convolutions already run as matrix products.) Results:
benchmarks/results/systems/spectral_forms.json, .md::

    PYTHONPATH=src python -m benchmarks.systems.spectral_forms [--threads 1] [--repeats 5]
"""

from __future__ import annotations

import os
from typing import Any

import torch

from benchmarks.harness import argument_parser, describe_load, describe_machine, median_seconds, page, table_head, \
    table_row, write_results
from opformer.nn.fourier_mixer import FourierMixer
from opformer.nn.spectral import SpectralConv

# name -> (what it is, the layer, the input shape (batch, *grid, channels))
CASES = {
    "dpot_ti_mixer": ("DPOT-Ti's Fourier mixer: 128^2 input, patch 8 -> 16^2 latent, width 512, 4 heads, modes 32 "
                      "(every mode kept)", lambda: FourierMixer(512, 4, 2, 32), (1, 16, 16, 512)),
    "dpot_ti_mixer_b16": ("the same at batch 16", lambda: FourierMixer(512, 4, 2, 32), (16, 16, 16, 512)),
    "dpot3d_mixer": ("a 3D DPOT mixer: 16^3 latent, width 256, 4 heads, modes 8 (the authors' 3D model keeps 8 on "
                     "its last axis)", lambda: FourierMixer(256, 4, 3, 8, last_modes=8), (1, 16, 16, 16, 256)),
    "fno3d_velocity_64": ("FNO3d-time's spectral layer (fno3d_time_velocity: width 20, modes 8) on 64^3",
                          lambda: SpectralConv(20, 20, 8, 3), (1, 64, 64, 64, 20)),
    "fno3d_velocity_32": ("the same on 32^3, batch 4", lambda: SpectralConv(20, 20, 8, 3), (4, 32, 32, 32, 20)),
}


def measure(layer: torch.nn.Module, shape: tuple[int, ...], repeats: int) -> dict[str, Any]:
    """Forward, and forward + backward, of both forms; their greatest relative difference (float32)."""
    x = torch.randn(shape)
    fft, matrices = layer._forward_fft, layer._forward_matrices
    row: dict[str, Any] = {}
    with torch.no_grad():
        difference = float((matrices(x) - fft(x)).norm() / fft(x).norm())
    for form, call in (("fft", fft), ("matrices", matrices)):
        load = os.getloadavg()[0]
        with torch.no_grad():
            forward = median_seconds(lambda: call(x), repeats)
        train = median_seconds(lambda: call(x).square().mean().backward(), repeats)
        row[form] = {"forward_s": forward, "forward_backward_s": train, "load_1min": load}
    row["relative_difference"] = difference
    return row


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per figure (median)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated names of CASES")
    args = parser.parse_args()
    load_before = os.getloadavg()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = {}
    for name in args.cases.split(","):
        what, build, shape = CASES[name]
        rows[name] = {"what": what, "shape": list(shape), **measure(build(), shape, args.repeats)}
        print(name, rows[name], flush=True)
    write_results(args.results, "spectral_forms", {"threads": args.threads, "repeats": args.repeats, "rows": rows},
                  markdown, load_before)


def markdown(r: dict[str, Any]) -> str:
    lines = ["# Spectral layers in torch: FFTs against truncated DFT matrix products", "",
             f"Median of {r['repeats']} calls after a warm-up, {r['threads']} torch thread(s), float32; load: the "
             "1-minute load average when each form's figures began (the machine's 2 cores were shared with other "
             "jobs).", "",
             *table_head("layer", "input", "forward FFT (ms)", "forward matrices (ms)", "fwd+bwd FFT (ms)",
                         "fwd+bwd matrices (ms)", "matrices / FFT (fwd, fwd+bwd)", "load (FFT, matrices)",
                         "relative difference")]
    for name, row in r["rows"].items():
        fft, mat = row["fft"], row["matrices"]
        lines.append(table_row(
            f"{name}: {row['what']}", "x".join(map(str, row["shape"])),
            f"{fft['forward_s'] * 1e3:.2f}", f"{mat['forward_s'] * 1e3:.2f}",
            f"{fft['forward_backward_s'] * 1e3:.2f}", f"{mat['forward_backward_s'] * 1e3:.2f}",
            f"{mat['forward_s'] / fft['forward_s']:.2f}, {mat['forward_backward_s'] / fft['forward_backward_s']:.2f}",
            f"{fft['load_1min']:.2f}, {mat['load_1min']:.2f}", f"{row['relative_difference']:.1e}"))
    return page(lines, f"Machine: {describe_machine(r['machine'])}; {describe_load(r)}.")


if __name__ == "__main__":
    main()
