"""Point-wise feed-forward networks and the activation names configs may use."""

from __future__ import annotations

from torch import Tensor, nn

from opformer.errors import ConfigError
from opformer.nn.dropout import Dropout

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "silu": nn.SiLU,
    "gelu": nn.GELU,
    "tanh": nn.Tanh,
}


def make_activation(name: str) -> nn.Module:
    """Return a fresh activation module for a name in ``ACTIVATIONS``."""
    try:
        return ACTIVATIONS[name]()
    except KeyError:
        valid = ", ".join(sorted(ACTIVATIONS))
        raise ConfigError(f"unknown activation {name!r}; valid: {valid}") from None


class FeedForward(nn.Module):
    """Point-wise two-layer network: ``Linear(d, hidden) -> act -> dropout -> Linear(hidden, out)``."""

    def __init__(
        self,
        in_features: int,
        hidden_features: int,
        out_features: int | None = None,
        activation: str = "relu",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.linear1 = nn.Linear(in_features, hidden_features)
        self.activation = make_activation(activation)
        self.dropout = Dropout(dropout)
        self.linear2 = nn.Linear(hidden_features, out_features or in_features)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the network to the last axis of ``x``."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
