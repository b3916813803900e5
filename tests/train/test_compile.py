"""``train.compile``: the compiled training forward trains exactly as the eager one, and checkpoints are unchanged."""

import pytest
import torch

from opformer.config import config_from_dict
from opformer.runs import Run, load_checkpoint
from opformer.train import trainer
from opformer.train.trainer import Trainer, train


@pytest.mark.slow
def test_compiled_training_matches_eager_and_saves_plain_state_dict(tmp_path, toy_file, tiny_config, monkeypatch):
    monkeypatch.setattr(trainer, "COMPILE_BACKEND", "eager")  # dynamo's graph capture, no C++ build
    base = tiny_config(toy_file, epochs=2)
    weights = {}
    for compiled in (False, True):
        config = config_from_dict({**base, "train": {**base["train"], "compile": compiled}})
        train(config, tmp_path / str(compiled))
        weights[compiled] = load_checkpoint(tmp_path / str(compiled) / "last.pt")["state_dict"]
    assert weights[True].keys() == weights[False].keys()
    assert not any("_orig_mod" in key for key in weights[True])
    for key, value in weights[False].items():
        torch.testing.assert_close(weights[True][key], value, rtol=1e-6, atol=1e-6)
    surrogate, _ = Run(tmp_path / "True").model("best")
    assert surrogate.state_dict().keys() == weights[False].keys()


def test_compile_wraps_only_the_training_forward(tmp_path, toy_file, tiny_config, monkeypatch):
    monkeypatch.setattr(trainer, "COMPILE_BACKEND", "eager")
    base = tiny_config(toy_file, epochs=1)
    run = Trainer(config_from_dict({**base, "train": {**base["train"], "compile": True}}), tmp_path / "run")
    assert isinstance(run.model, torch._dynamo.eval_frame.OptimizedModule)
    assert run.model._orig_mod is run.surrogate  # one process: the surrogate itself, compiled
    assert not isinstance(run.surrogate, torch._dynamo.eval_frame.OptimizedModule)
