"""The 16-bit-mask dropout: drop rate, scaling, independence, gradient, modes (5-sigma statistical bounds)."""

import math

import pytest
import torch

from opformer.nn.dropout import LEVELS, Dropout, drop_levels

N = 1 << 20
P = 0.05
P_ROUNDED = drop_levels(P) / LEVELS


def kept(seed: int = 0, n: int = N, p: float = P) -> torch.Tensor:
    torch.manual_seed(seed)
    return Dropout(p).train()(torch.ones(n)) != 0


def test_drop_probability_is_p_rounded_to_2_to_the_minus_16() -> None:
    assert drop_levels(P) == 3277 and drop_levels(0.1) == 6554 and drop_levels(1.0) == LEVELS


def test_values_are_zero_or_the_inverse_keep_rate() -> None:
    torch.manual_seed(0)
    out = Dropout(P).train()(torch.ones(N))
    values = out.unique().tolist()
    assert len(values) == 2 and values[0] == 0.0
    assert values[1] == pytest.approx(1 / (1 - P_ROUNDED), rel=1e-7)


@pytest.mark.parametrize("lane", range(4))
def test_each_of_the_four_elements_sharing_64_bits_drops_at_rate_p(lane: int) -> None:
    mask = kept().view(-1, 4)[:, lane]
    sigma = math.sqrt(P_ROUNDED * (1 - P_ROUNDED) / mask.numel())
    assert abs((~mask).float().mean().item() - P_ROUNDED) < 5 * sigma


@pytest.mark.parametrize("lag", [1, 2, 3, 4, 5])
def test_masks_of_nearby_elements_are_uncorrelated(lag: int) -> None:
    mask = kept().float()
    a, b = mask[:-lag] - mask.mean(), mask[lag:] - mask.mean()
    correlation = (a * b).mean() / mask.var()
    assert abs(correlation.item()) < 5 / math.sqrt(N)


def test_gradient_is_the_mask() -> None:
    x = torch.randn(3, 5, 7, requires_grad=True)  # 105 elements: not a multiple of four
    torch.manual_seed(1)
    out = Dropout(0.3).train()(x)
    out.backward(torch.ones_like(out))
    scale = 1 / (1 - drop_levels(0.3) / LEVELS)
    expected = torch.where(out != 0, scale, 0.0)
    assert out.shape == x.shape
    torch.testing.assert_close(x.grad, expected)
    torch.testing.assert_close(out, x.detach() * expected)


def test_seeded_masks_repeat_and_successive_masks_differ() -> None:
    assert torch.equal(kept(seed=3, n=4096), kept(seed=3, n=4096))
    torch.manual_seed(3)
    layer = Dropout(0.5).train()
    assert not torch.equal(layer(torch.ones(4096)), layer(torch.ones(4096)))


def test_identity_in_eval_mode_and_at_p_zero_zeros_at_p_one() -> None:
    x = torch.randn(10)
    assert Dropout(0.5).eval()(x) is x
    assert Dropout(0.0).train()(x) is x
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros(10))


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_probability_outside_unit_interval_is_refused(p: float) -> None:
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(p)
