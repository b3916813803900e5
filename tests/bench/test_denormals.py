"""The subnormal-weights benchmark: its mask of subnormal floats and a measurement of a tiny run's checkpoint."""

import torch

from benchmarks.systems.denormals import VARIANTS, markdown, measure, subnormal
from opformer.config import config_from_dict
from opformer.runs import Run
from opformer.train.trainer import train


def test_the_mask_finds_subnormal_floats_in_real_and_complex_tensors():
    # made from bits, as a flushing processor (the trainer's default) would turn 1e-39 into 0: 0, the smallest
    # subnormal, the largest subnormal negated, the smallest normal, 1.0
    bits = torch.tensor([0, 1, 0x007FFFFF | -0x80000000, 0x00800000, 0x3F800000], dtype=torch.int32)
    values = bits.view(torch.float32)
    assert subnormal(values).tolist() == [False, True, True, False, False]
    assert subnormal(torch.complex(values, values.flip(0))).tolist() == [
        [False, False], [True, False], [True, True], [False, True], [False, False]]
    doubles = torch.tensor([1, 0x0010000000000000], dtype=torch.int64).view(torch.float64)
    assert subnormal(doubles).tolist() == [True, False]


def test_a_run_checkpoint_is_timed_three_ways_and_its_subnormal_floats_counted(tmp_path, toy_file, tiny_config):
    train(config_from_dict(tiny_config(toy_file, epochs=1)), tmp_path / "run")
    payload_path = tmp_path / "run" / "last.pt"
    result = measure(str(payload_path), rounds=1, repeats=1, batch=2)
    assert set(result["seconds"]) == set(VARIANTS) and all(s > 0 for s in result["seconds"].values())
    assert result["epoch"] == 1 and result["batch"] == 2

    def floats(tensors):
        return sum(t.numel() * (2 if t.is_complex() else 1) for t in tensors if t.is_floating_point() or t.is_complex())

    stored = floats(torch.load(payload_path, weights_only=True)["state_dict"].values())  # weights and buffers
    assert result["floats"] == stored + 2 * floats(Run(tmp_path / "run").surrogate.parameters())  # Adam's 2 moments
    assert result["slowdown"] == result["seconds"]["subnormal"] / result["seconds"]["flushed"]
    assert "of its " + f"{result['floats']:,}" in markdown(result)
