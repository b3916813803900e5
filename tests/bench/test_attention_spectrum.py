"""FactFormer's Figure 5: energy curves of singular values, the exact spectrum of a low-rank kernel from its QR
factors, and the recorder that collects every attention matrix a model forms."""

import pytest
import torch
from torch import nn

from benchmarks.papers.factformer.attention_spectrum import (
    SpectrumRecorder, energy_curves, energy_fraction, kernel_singular_values)
from opformer.nn.factorized_attention import FactorizedAttention
from opformer.nn.oformer_attention import OFormerAttention


def test_the_energy_curve_and_the_fraction_that_holds_90_percent():
    curve = energy_curves(torch.tensor([4.0, 3.0, 2.0, 1.0], dtype=torch.float64))
    assert curve.tolist() == pytest.approx([0.4, 0.7, 0.9, 1.0])
    assert energy_fraction(curve) == 3 / 4
    assert energy_fraction(curve, 0.5) == 2 / 4


@pytest.mark.parametrize("n, d", [(12, 3), (4, 6)])
def test_the_kernels_singular_values_are_those_of_q_k_transposed(n, d):
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, n, d, generator=gen, dtype=torch.float64), torch.randn(2, n, d, generator=gen,
                                                                                 dtype=torch.float64)
    sigma = kernel_singular_values(q, k)
    assert sigma.shape == (2, n)
    torch.testing.assert_close(sigma, torch.linalg.svdvals(q @ k.transpose(-2, -1)), atol=1e-12, rtol=1e-10)


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.axial = FactorizedAttention(8, 2, 4, ndim=2, kernel_multiplier=1)
        self.full = OFormerAttention(8, 2, 4, ndim=2)

    def forward(self, u, axes):
        return self.full(self.axial(u, axes), axes)


def test_the_recorder_averages_the_curves_of_every_head_and_call_per_layer_and_axis():
    torch.manual_seed(0)
    model = TwoLayers().double()
    axes = [torch.linspace(0, 1, 6, dtype=torch.float64), torch.linspace(0, 1, 5, dtype=torch.float64)]
    u = torch.randn(3, 6, 5, 8, dtype=torch.float64)
    recorder = SpectrumRecorder(model)
    model(u, axes)
    model(u, axes)
    recorder.close()
    rows = {(r["layer"], r["axis"]): r for r in recorder.rows()}
    assert set(rows) == {(0, "x"), (0, "y"), (1, "all")}
    with torch.no_grad():
        for m, axis in enumerate("xy"):
            kernel = model.axial.axis_kernels(u, axes)[m]
            expected = energy_curves(torch.linalg.svdvals(kernel)).mean(dim=(0, 1))
            assert rows[(0, axis)]["matrices"] == 2 * 3 * 2
            assert rows[(0, axis)]["curve"] == pytest.approx(expected.tolist())
            assert rows[(0, axis)]["fraction_90"] == energy_fraction(expected)
        q, k, _ = model.full.factors(model.axial(u, axes), axes)
        full = energy_curves(torch.linalg.svdvals(q @ k.transpose(-2, -1) / 30)).mean(dim=(0, 1))
    assert rows[(1, "all")]["size"] == 30
    assert rows[(1, "all")]["curve"] == pytest.approx(full.tolist(), abs=1e-9)
    model(u, axes)  # the hooks are gone
    assert rows[(0, "x")]["matrices"] == recorder.rows()[0]["matrices"]


def test_a_model_without_attention_is_refused():
    with pytest.raises(SystemExit, match="no factorised or full-grid linear attention"):
        SpectrumRecorder(nn.Linear(2, 2))
