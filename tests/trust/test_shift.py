"""The out-of-distribution flag: statistics of inputs, and the flag on shifted and on calibration-like inputs."""

import math

import torch

from opformer.trust.shift import flag_shifted, input_statistics, roughness, roughness_of


def test_statistics_of_a_field_and_of_context_frames():
    x = torch.tensor([[[1.0], [3.0], [1.0], [3.0]]])  # one sample, 4 points, 1 channel
    stats = input_statistics(x, ndim=1)[0]
    # mean 2, std 1, roughness: neighbour differences all 2 -> rms 2 over std 1
    assert torch.allclose(stats, torch.tensor([2.0, 1.0, 2.0], dtype=torch.float64))
    frames = torch.stack([x[0], x[0] + 1], dim=0)[None]  # (1, t = 2, 4, 1): the change adds a statistic
    stats = input_statistics(frames, ndim=1)[0]
    std = math.sqrt(1.25)  # values 1, 3, 2, 4 (each twice)
    assert torch.allclose(stats, torch.tensor([2.5, std, 2 / std, 1 / std], dtype=torch.float64))
    # the roughness read off the statistics is the roughness, exactly, for fields and frames of several channels
    for inputs in (torch.randn(5, 16, 3), torch.randn(5, 4, 16, 3)):
        assert torch.equal(roughness_of(input_statistics(inputs, 1), 3), roughness(inputs, 1))


def test_the_flag_fires_on_shifted_inputs_and_rarely_on_calibration_like_ones():
    generator = torch.Generator().manual_seed(0)
    n, new = 99, 4000

    def fields(count, amplitude=1.0, wavenumber=2):
        x = torch.linspace(0, 1, 64)
        phase = torch.rand(count, 1, generator=generator)
        a = amplitude * (1 + 0.2 * torch.rand(count, 1, generator=generator))
        return (a * torch.sin(2 * math.pi * (wavenumber * x + phase)))[..., None]

    reference = input_statistics(fields(n), 1)
    assert not flag_shifted(reference, reference).any()  # every calibration input lies inside its own range
    like = flag_shifted(input_statistics(fields(new), 1), reference).double().mean()
    assert like < 3 / (n + 1)  # about 1 / (n + 1) for exchangeable inputs (the MAD standardisation is not exact)
    assert flag_shifted(input_statistics(fields(50, amplitude=3.0), 1), reference).all()  # larger amplitude
    assert flag_shifted(input_statistics(fields(50, wavenumber=8), 1), reference).all()  # finer scales
