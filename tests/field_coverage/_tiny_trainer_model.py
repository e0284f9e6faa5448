"""The tiny regressor both Trainer test modules train on CPU (one definition, imported by name)."""
from __future__ import annotations

from torch import nn


class Tiny(nn.Module):
    """A 5-parameter regressor: a dict with `loss` (mean squared error per micro-batch, no loss
    kwargs, so the Trainer divides by the accumulation count) when labels are given."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x, labels=None):
        out = self.lin(x).squeeze(-1)
        if labels is None:
            return {"logits": out}
        return {"loss": ((out - labels) ** 2).mean(), "logits": out}
