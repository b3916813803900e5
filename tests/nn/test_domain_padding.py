"""Domain padding: cells per axis, zeros appended to the closed axes only, the crop back to the domain."""

import pytest
import torch

from opformer.errors import ConfigError
from opformer.nn.domain_padding import axis_periodicity, crop_domain, pad_domain, padding_cells


def test_cells_are_the_int_or_the_fraction_rounded_half_up():
    assert padding_cells(10, 3) == 3 and padding_cells(10, 0) == 0
    assert [padding_cells(n, 0.25) for n in (8, 10, 12, 2)] == [2, 3, 3, 1]  # 2.5 -> 3, 0.5 -> 1
    assert padding_cells(85, 0.1) == 9  # the FNO authors' Darcy padding at 85^2
    assert padding_cells(4, 0.1) == 0


def test_zeros_go_at_the_end_of_the_closed_axes_and_the_crop_restores_the_field():
    x = torch.randn(2, 10, 12, 8, 3)
    padded = pad_domain(x, (False, True, False), 0.25)
    assert padded.shape == (2, 13, 12, 10, 3)
    torch.testing.assert_close(padded[:, :10, :, :8], x, rtol=0, atol=0)
    assert padded[:, 10:].abs().max() == 0 and padded[:, :, :, 8:].abs().max() == 0
    torch.testing.assert_close(crop_domain(padded, (10, 12, 8)), x, rtol=0, atol=0)
    assert pad_domain(x, (True, True, True), 5) is x  # nothing to pad
    assert pad_domain(x, (False, False, False), 0) is x


def test_periodic_per_axis():
    assert axis_periodicity(False, 3) == (False, False, False)
    assert axis_periodicity([True, False], 2) == (True, False)
    with pytest.raises(ConfigError, match=r"^periodic: expected one bool or 3 \(one per axis\), got \[True, False\]$"):
        axis_periodicity([True, False], 3)
