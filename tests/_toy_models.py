"""Tiny modules shared by several probes and tests (CPU, torch 2.13.0)."""
from __future__ import annotations

from torch import nn


class LoraBlock(nn.Module):
    """A LoRA-shaped block: a frozen base Linear(4, 4) plus a trainable low-rank path a (4 -> 2), b (2 -> 4)."""

    def __init__(self):
        super().__init__()
        self.base, self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2, bias=False), nn.Linear(2, 4, bias=False)
        self.base.requires_grad_(False)

    def forward(self, x):
        return self.base(x) + self.b(self.a(x))


class Counter:
    """A custom object with state_dict/load_state_dict, for Accelerator.register_for_checkpointing."""

    def __init__(self):
        self.n = 0

    def state_dict(self):
        return {"n": self.n}

    def load_state_dict(self, sd):
        self.n = sd["n"]
