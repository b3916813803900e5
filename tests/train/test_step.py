"""The training step's pieces: the capturable Adam update against PyTorch's, the device-side loss record."""

import pytest
import torch

from opformer.train.step import LossMeter, capturable_adam_update


@pytest.mark.parametrize("cls,decay", [(torch.optim.Adam, 0.0), (torch.optim.Adam, 0.1), (torch.optim.AdamW, 0.1)])
def test_the_capturable_update_is_pytorchs_adam_with_a_changing_beta1(cls, decay):
    """Five steps with beta1 and the learning rate changed between steps (OneCycle's momentum cycling), float64."""
    torch.manual_seed(0)
    ours, ref = (torch.nn.Linear(3, 2).double() for _ in range(2))
    ref.load_state_dict(ours.state_dict())
    opt_ours = cls(ours.parameters(), lr=1e-2, weight_decay=decay)
    opt_ref = cls(ref.parameters(), lr=1e-2, weight_decay=decay, foreach=False)
    hyper = [tuple(torch.zeros((), dtype=torch.float64) for _ in range(3))]
    for step in range(5):
        beta1, lr = 0.95 - 0.02 * step, 1e-2 * (1 + step)
        for group in (*opt_ours.param_groups, *opt_ref.param_groups):
            group["lr"], group["betas"] = lr, (beta1, 0.999)
        for tensor, value in zip(hyper[0], (lr, beta1, 0.999)):
            tensor.fill_(value)
        x = torch.randn(4, 3, dtype=torch.float64)
        for model in (ours, ref):
            model.zero_grad()
            model(x).square().sum().backward()
        capturable_adam_update(opt_ours, hyper)
        opt_ref.step()
    for a, b in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
    assert float(opt_ours.state[ours.weight]["step"]) == 5


def test_the_loss_record_sums_and_keeps_the_first_bad_step():
    meter = LossMeter(torch.device("cpu"))
    for loss, samples in ((1.0, 4), (2.0, 4), (float("inf"), 4), (float("nan"), 2), (3.0, 2)):
        meter.add(torch.tensor(loss), samples)
    total, first_bad, bad_value = meter.values().tolist()
    assert first_bad == 2 and bad_value == float("inf") and total != total  # nan once a nan was added
    meter.reset()
    meter.add(torch.tensor(0.5), 8)
    assert meter.values().tolist() == [4.0, -1.0, 0.0]
