import pytest
import torch

from opformer.nn.interp_cnn import DownsampleCiNN, UpsampleCiNN, intermediate_size, split_channels


@pytest.mark.parametrize("fine, coarse, mid", [(141, 43, 78), (211, 61, 113), (141, 36, 71), (85, 29, 50)])
def test_intermediate_grids_of_the_paper(fine, coarse, mid):
    assert intermediate_size(fine, coarse) == mid


def test_channel_split_of_the_stacked_convolutions():
    assert split_channels(128) == [42, 42, 44]
    assert split_channels(192) == [64, 64, 64]


def test_cinn_shapes_and_bilinear_resampling_of_a_linear_field():
    down = DownsampleCiNN(1, 12, coarse_size=7)
    assert down(torch.randn(2, 19, 19, 1)).shape == (2, 7, 7, 12)
    assert sum(p.numel() for p in down.parameters()) == 9 * (12 + 12 * 4 + 4 * 4 + 4 * 4)  # no biases
    up = UpsampleCiNN(3)
    with torch.no_grad():  # an identity convolution: the up-sampling is then bilinear interpolation only
        up.conv.weight.zero_()
        up.conv.weight[:, :, 1, 1] = torch.eye(3)
    x = torch.linspace(0, 1, 5)
    field = (1 + x[:, None] + 2 * x[None, :]).expand(1, 5, 5).unsqueeze(-1).expand(1, 5, 5, 3)
    fine = torch.linspace(0, 1, 17)
    expected = torch.nn.functional.silu(1 + fine[:, None] + 2 * fine[None, :])
    # the bilinear step to the intermediate grid is exact on linear fields; SiLU then acts point-wise
    mid = intermediate_size(17, 5)
    grid = torch.linspace(0, 1, mid)
    inner = torch.nn.functional.silu(1 + grid[:, None] + 2 * grid[None, :])
    out = up(field, (17, 17))
    assert out.shape == (1, 17, 17, 3)
    torch.testing.assert_close(out[0, 0, :, 0], torch.nn.functional.interpolate(
        inner[None, None, 0:1, :], size=(1, 17), mode="bilinear", align_corners=True)[0, 0, 0], atol=1e-6, rtol=0)
    torch.testing.assert_close(out[0, ::4, ::4, 1][0, 0], expected[0, 0])
