"""neuraloperator's torch files: a dict of tensors x and y saved with torch.save."""

import numpy as np
import pytest
import torch

from opformer.data.readers.neuraloperator import read_neuraloperator_data
from opformer.errors import DataError

N, X, Y = 3, 16, 12


@pytest.mark.parametrize("channel_axis", [False, True])
def test_darcy_pairs_land_channel_last_on_nodes(tmp_path, channel_axis):
    x, y = torch.randn(N, X, Y), torch.randn(N, X, Y, dtype=torch.float64)
    saved = {"x": x[:, None] if channel_axis else x, "y": y[:, None] if channel_axis else y}
    torch.save(saved, tmp_path / "darcy_train_16.pt")
    source = read_neuraloperator_data(tmp_path / "darcy_train_16.pt")
    inputs, targets = source.read(0, N)
    np.testing.assert_array_equal(inputs[..., 0], x.numpy())
    np.testing.assert_array_equal(targets[..., 0], y.float().numpy())
    assert source.channels == (["a"], ["u"]) and source.shapes == ((X, Y, 1), (X, Y, 1))
    assert source.domain == {"lengths": [1.0, 1.0], "periodic": [False, False], "grid": ["nodes", "nodes"]}


def test_several_channels_move_last(tmp_path):
    x = torch.arange(N * 2 * X * Y, dtype=torch.float32).reshape(N, 2, X, Y)
    torch.save({"x": x, "y": x[:, 0]}, tmp_path / "two.pt")
    source = read_neuraloperator_data(tmp_path / "two.pt", grid=["periodic"])
    inputs, _ = source.read(1, 2)
    np.testing.assert_array_equal(inputs[0, 3, 4], x[1, :, 3, 4].numpy())
    assert source.channels[0] == ["a0", "a1"] and source.domain["grid"] == ["periodic", "periodic"]


def test_wrong_files_are_one_line_errors(tmp_path):
    torch.save({"x": torch.zeros(N, X, Y)}, tmp_path / "no_y.pt")
    with pytest.raises(DataError, match="missing tensor 'y'"):
        read_neuraloperator_data(tmp_path / "no_y.pt")
    torch.save([torch.zeros(1)], tmp_path / "list.pt")
    with pytest.raises(DataError, match="holds a list"):
        read_neuraloperator_data(tmp_path / "list.pt")
    torch.save({"x": torch.zeros(N, X, Y), "y": torch.zeros(N, X, Y), "f": np.zeros(2)}, tmp_path / "pickled.pt")
    with pytest.raises(DataError, match="not a readable torch file"):  # weights_only refuses arbitrary objects
        read_neuraloperator_data(tmp_path / "pickled.pt")
    data = (tmp_path / "no_y.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="cut.pt: not a readable torch file"):
        read_neuraloperator_data(tmp_path / "cut.pt")
