"""Reentrant activation checkpointing over a block whose input does not require grad (the LoRA case:
frozen embeddings feed the first checkpointed layer). Runs in-process on CPU, torch 2.13.0; backs the
"Frozen inputs" rows of sub-skills/torch-distributed/references/ddp.md#activation-checkpointing. The DDP
case runs inside the one-rank process group of tests/audit/_prepare_dispatch_probe.py
(tests/audit/test_prepare_dispatch.py::test_reentrant_frozen_input_under_ddp)."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _toy_models import LoraBlock as _Lora  # noqa: E402


def _run(use_reentrant: bool, input_grad: bool):
    torch.manual_seed(0)
    emb, block = nn.Embedding(10, 4).requires_grad_(False), _Lora()
    h = emb(torch.tensor([[1, 2, 3]]))
    if input_grad:
        h.requires_grad_(True)  # what enable_input_require_grads' forward hook on the embeddings does
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = checkpoint(block, h, use_reentrant=use_reentrant)
        if out.requires_grad:
            out.sum().backward()
    return {"out_requires_grad": out.requires_grad, "lora_grad": block.a.weight.grad is not None,
            "warnings": [str(w.message) for w in caught]}


def test_reentrant_with_frozen_input_gives_lora_no_gradient():
    r = _run(use_reentrant=True, input_grad=False)
    assert r["out_requires_grad"] is False and r["lora_grad"] is False
    assert "None of the inputs have requires_grad=True. Gradients will be None" in r["warnings"]


def test_non_reentrant_or_an_input_requiring_grad_trains_lora():
    assert _run(use_reentrant=False, input_grad=False) == {"out_requires_grad": True, "lora_grad": True, "warnings": []}
    r = _run(use_reentrant=True, input_grad=True)
    assert r["out_requires_grad"] is True and r["lora_grad"] is True
    assert not any("None of the inputs" in w for w in r["warnings"])

