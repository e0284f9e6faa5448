"""What both Trainer test modules share: the tiny regressor they train on CPU, and the restore of
global state after each module (imported by name)."""
from __future__ import annotations

import os
from contextlib import contextmanager

from torch import nn


@contextmanager
def global_state_restored():
    """The suite runs other in-process Accelerate tests: afterwards the environment, the Accelerate
    singletons and transformers' DeepSpeed weak reference are as they were."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        from accelerate.state import AcceleratorState, GradientState
        from transformers.integrations import deepspeed as hf_ds
        AcceleratorState._reset_state(True)
        GradientState._reset_state()
        hf_ds.unset_hf_deepspeed_config()
        os.environ.clear()
        os.environ.update(saved)


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
