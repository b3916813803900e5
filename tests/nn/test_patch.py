import pytest
import torch
from torch import nn
from torch.nn import functional as F

from opformer.errors import ConfigError
from opformer.nn.patch import PatchConv, PatchConvTranspose, PointwiseConv

CONV = {2: F.conv2d, 3: F.conv3d}
CONV_T = {2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize("ndim,spatial", [(2, (6, 8)), (3, (4, 6, 2))])
def test_patch_conv_is_the_strided_convolution_with_carried_axes(ndim, spatial):
    torch.manual_seed(0)
    layer = PatchConv(3, 5, 2, ndim).double()
    x = torch.randn(2, *spatial, 4, 3, dtype=torch.float64)  # one carried axis of 4 (frames)
    out = layer(x)
    assert out.shape == (2, *[n // 2 for n in spatial], 4, 5)
    for t in range(4):
        ref = CONV[ndim](x[..., t, :].movedim(-1, 1), layer.weight, layer.bias, stride=2).movedim(1, -1)
        torch.testing.assert_close(out[..., t, :], ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ndim,latent", [(2, (3, 2)), (3, (2, 1, 3))])
def test_patch_conv_transpose_is_the_transposed_convolution(ndim, latent):
    torch.manual_seed(0)
    layer = PatchConvTranspose(4, 3, 3, ndim).double()
    z = torch.randn(2, *latent, 4, dtype=torch.float64)
    ref = CONV_T[ndim](z.movedim(-1, 1), layer.weight, layer.bias, stride=3).movedim(1, -1)
    torch.testing.assert_close(layer(z), ref, rtol=1e-12, atol=1e-12)
    assert layer(z).shape == (2, *[3 * n for n in latent], 3)


def test_pointwise_conv_is_the_kernel_one_convolution():
    torch.manual_seed(0)
    layer = PointwiseConv(4, 6, 2).double()
    x = torch.randn(2, 5, 3, 4, dtype=torch.float64)
    ref = F.conv2d(x.movedim(-1, 1), layer.weight, layer.bias).movedim(1, -1)
    torch.testing.assert_close(layer(x), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ndim", [2, 3])
def test_parameters_and_initialisation_are_torchs(ndim):
    """Same names, shapes and random draws as torch's modules: checkpoints and seeded runs carry over."""
    pairs = [(lambda: PatchConv(3, 5, 2, ndim), lambda: getattr(nn, f"Conv{ndim}d")(3, 5, 2, stride=2)),
             (lambda: PointwiseConv(3, 5, ndim), lambda: getattr(nn, f"Conv{ndim}d")(3, 5, 1)),
             (lambda: PatchConvTranspose(3, 5, 2, ndim),
              lambda: getattr(nn, f"ConvTranspose{ndim}d")(3, 5, 2, stride=2))]
    for ours, theirs in pairs:
        torch.manual_seed(3)
        a = ours().state_dict()
        torch.manual_seed(3)
        b = theirs().state_dict()
        assert list(a) == list(b) == ["weight", "bias"]
        for key in a:
            assert torch.equal(a[key], b[key])


def test_gradients_are_the_convolutions():
    torch.manual_seed(0)
    layer = PatchConv(2, 3, 2, 2).double()
    x = torch.randn(1, 4, 4, 2, dtype=torch.float64, requires_grad=True)
    layer(x).square().sum().backward()
    ours = [x.grad.clone(), layer.weight.grad.clone(), layer.bias.grad.clone()]
    x.grad = layer.weight.grad = layer.bias.grad = None
    F.conv2d(x.movedim(-1, 1), layer.weight, layer.bias, stride=2).square().sum().backward()
    for a, b in zip(ours, [x.grad, layer.weight.grad, layer.bias.grad]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert layer.weight.grad.is_contiguous()


def test_bad_sizes_are_config_errors():
    with pytest.raises(ConfigError, match="patch size"):
        PatchConv(2, 3, 0, 2)
    with pytest.raises(ConfigError, match="1-3 dimensions"):
        PointwiseConv(2, 3, 4)
