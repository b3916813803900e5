"""Mesh operator splits: the padded batch of the mesh contract, equal to each sample alone; streamed splits equal
held ones."""

import numpy as np
import pytest
import torch

from opformer.data.mesh_splits import MeshSplit, StreamedMeshSplit, load_mesh_split, pad, sample_rows
from opformer.data.store import write_mesh_dataset
from opformer.errors import DataError
from tests.data.test_store_mesh import mesh_samples, write


def weighted_sum_model(x, pos, weights, mask):
    """A one-layer kernel integral: z = sum_j w_j v_j (v = [x, pos]), then each point's output q_i * z, and a max
    over the real points only: what a padded batch must not change."""
    v = torch.cat([x, pos], -1)
    z = torch.einsum("bn,bnc->bc", weights, v)
    peak = pos[..., 0].masked_fill(~mask, float("-inf")).amax(1)
    return (v * z[:, None]) + peak[:, None, None]


def test_a_padded_batch_gives_each_sample_what_it_gives_alone(tmp_path):
    path = write(tmp_path / "m.h5", mesh_samples((30, 45, 12)))
    split = load_mesh_split(path, "all", n_train=0, n_val=0, n_test=0)
    batch = split.fetch(torch.tensor([0, 1, 2]))
    assert batch.x.shape == (3, 45, 1) and batch.pos.shape == (3, 45, 2) and batch.y.shape == (3, 45, 2)
    assert batch.mask.sum(1).tolist() == [30, 45, 12] and batch.mask.dtype == torch.bool
    assert torch.allclose(batch.weights.sum(1), torch.ones(3)) and (batch.weights[~batch.mask] == 0).all()
    together = weighted_sum_model(batch.x, batch.pos, batch.weights, batch.mask)
    for b in range(3):
        alone = split.fetch(torch.tensor([b]))
        n = int(alone.mask.sum())
        assert torch.allclose(together[b, :n], weighted_sum_model(*alone[:4])[0], atol=1e-6)
        assert torch.equal(batch.y[b, :n], alone.y[0]) and (batch.y[b, n:] == 0).all()


def test_the_weights_are_the_lumped_measure_normalised(tmp_path):
    samples = mesh_samples((20,))
    x, pos, w, y = sample_rows(samples[0], ["a"], ["u"])
    assert torch.allclose(w.double(), torch.from_numpy(samples[0].weights / samples[0].weights.sum()))
    assert samples[0].weights.sum() == pytest.approx(1.0)  # the unit square's area, lumped


def test_splits_are_contiguous_and_streaming_gives_the_same_tensors(tmp_path):
    path = write(tmp_path / "m.h5", mesh_samples((10, 14, 9, 11, 13, 8)))
    held = load_mesh_split(path, "val", n_train=3, n_val=2, n_test=1)
    streamed = load_mesh_split(path, "val", n_train=3, n_val=2, n_test=1, memory_gb=0)
    assert isinstance(held, MeshSplit) and isinstance(streamed, StreamedMeshSplit)
    assert held.point_counts() == streamed.point_counts() == [11, 13] and len(streamed) == 2
    assert held.nbytes == streamed.nbytes
    for a, b in zip(held.fetch(torch.tensor([1, 0])), streamed.fetch(torch.tensor([1, 0]))):
        assert torch.equal(a, b)
    assert [i.tolist() for i in held.plan(4)] == [[0, 1]]


def test_coordinates_alone_as_the_input_and_refusals(tmp_path):
    cloud = mesh_samples((10, 12))
    path = write_mesh_dataset(tmp_path / "c.h5", cloud, inputs=[], targets=["u"], pde="toy", settings={})
    batch = load_mesh_split(path, "all", n_train=0, n_val=0, n_test=0).fetch(torch.tensor([0, 1]))
    assert batch.x.shape == (2, 12, 0) and batch.y.shape == (2, 12, 2)
    inputs_only = write_mesh_dataset(tmp_path / "i.h5", cloud, inputs=["a"], targets=[], pde="toy", settings={})
    with pytest.raises(DataError, match="inputs only"):
        load_mesh_split(inputs_only, "all", n_train=0, n_val=0, n_test=0)
    with pytest.raises(DataError, match="holds 2 samples but the splits need 3"):
        load_mesh_split(path, "test", n_train=2, n_val=0, n_test=1)


def test_pad_keeps_the_device_and_types():
    rows = [(torch.zeros(3, 1), torch.ones(3, 2), torch.full((3,), 1 / 3), torch.zeros(3, 1)),
            (torch.zeros(5, 1), torch.ones(5, 2), torch.full((5,), 0.2), torch.zeros(5, 1))]
    batch = pad(rows)
    assert batch.pos.dtype == torch.float32 and batch.pos[0, 3:].abs().sum() == 0
    assert np.allclose(batch.weights.sum(1).numpy(), 1.0)


def test_grid_splits_refuse_mesh_data_and_mesh_splits_grid_data(tmp_path):
    from opformer.data.pairs import load_split
    from opformer.data.store import write_operator_dataset

    path = write(tmp_path / "m.h5", mesh_samples((10, 12)))
    with pytest.raises(DataError, match="holds mesh data"):
        load_split(path, "train", n_train=1, n_val=0, n_test=0)
    grid = write_operator_dataset(tmp_path / "g.h5", np.zeros((2, 8, 1)), np.zeros((2, 8, 1)), pde={}, solver={},
                                  domain={"lengths": [1.0], "periodic": [True]}, seed=0, input_channels=["a"],
                                  target_channels=["u"])
    with pytest.raises(DataError, match="not mesh data"):
        load_mesh_split(grid, "all", n_train=0, n_val=0, n_test=0)
