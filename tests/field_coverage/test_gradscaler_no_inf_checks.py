"""GradScaler's `No inf checks were recorded for this optimizer.` (torch 2.13.0, accelerate 1.15.0, CPU).

GradScaler.unscale_ records one found-inf flag per device from the `.grad` of the parameters the
optimizer holds; a parameter whose `.grad` is None is skipped. When no parameter of the optimizer
has a gradient, nothing is recorded and GradScaler.step raises the AssertionError. Runs here with
torch.amp.GradScaler("cpu") (the logic is the one the CUDA scaler runs); Accelerate's own scaler is
CUDA-only (on CPU `Accelerator(mixed_precision="fp16").scaler` is None), so its step path is driven
with a CPU scaler handed to AcceleratedOptimizer. Backs the GradScaler section of
sub-skills/failure-triage/references/numerics.md and the catalog entry torch-gradscaler-no-inf-checks.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.amp import GradScaler

REPO = Path(__file__).resolve().parents[2]
TRIAGE = REPO / "sub-skills/failure-triage/scripts/triage_log.py"
MESSAGE = "No inf checks were recorded for this optimizer."


def _step(model: nn.Module, opt: torch.optim.Optimizer, loss: torch.Tensor) -> str | None:
    scaler = GradScaler("cpu")
    scaler.scale(loss).backward()
    try:
        scaler.step(opt)
        scaler.update()
    except AssertionError as e:
        return str(e)
    return None


def test_no_trainable_parameter_in_the_optimizer_raises():
    """0 trainable parameters (an adapter loaded for inference, everything frozen): every .grad is None."""
    m = nn.Linear(2, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for p in m.parameters():
        p.requires_grad_(False)
    loss = m(torch.ones(1, 2)).sum() + torch.zeros((), requires_grad=True)  # backward still runs
    assert _step(m, opt, loss) == MESSAGE


def test_optimizer_holding_replaced_parameters_raises_and_weights_stay():
    """The optimizer was built, then the module's Parameter objects were replaced (a load that
    assigns new tensors, layers re-created by a load hook): gradients land on the new objects."""
    m = nn.Linear(2, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    held = [p for g in opt.param_groups for p in g["params"]]
    m.load_state_dict({k: v.clone() for k, v in m.state_dict().items()}, assign=True)
    assert not any(p is q for p in held for q in m.parameters())
    before = m.weight.detach().clone()
    assert _step(m, opt, (m(torch.ones(1, 2)) ** 2).sum()) == MESSAGE
    assert m.weight.grad is not None and all(p.grad is None for p in held)
    assert torch.equal(before, m.weight.detach())


def test_one_parameter_with_a_gradient_is_enough():
    m = nn.Linear(2, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    m.bias.requires_grad_(False)
    before = m.weight.detach().clone()
    assert _step(m, opt, (m(torch.ones(1, 2)) ** 2).sum()) is None
    assert not torch.equal(before, m.weight.detach())


def test_without_a_scaler_the_same_step_is_a_silent_no_op():
    """bf16 / fp32 (no GradScaler): optimizer.step skips parameters without .grad, no error."""
    m = nn.Linear(2, 2)
    opt = torch.optim.AdamW(m.parameters(), lr=0.1)
    held = [p for g in opt.param_groups for p in g["params"]]
    m.load_state_dict({k: v.clone() for k, v in m.state_dict().items()}, assign=True)
    before = m.weight.detach().clone()
    (m(torch.ones(1, 2)) ** 2).sum().backward()
    opt.step()
    assert torch.equal(before, m.weight.detach()) and all(p.grad is None for p in held)


def test_accelerate_optimizer_step_raises_the_same_and_cpu_has_no_scaler():
    from accelerate import Accelerator
    from accelerate.optimizer import AcceleratedOptimizer
    from accelerate.state import AcceleratorState, GradientState

    try:
        acc = Accelerator(cpu=True, mixed_precision="fp16")
        assert acc.scaler is None  # Accelerator creates a GradScaler only off-CPU (accelerator.py, __init__)
        m = nn.Linear(2, 2)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        scaler = GradScaler("cpu")
        aopt = AcceleratedOptimizer(opt, device_placement=False, scaler=scaler)
        for p in m.parameters():
            p.requires_grad_(False)
        scaler.scale(m(torch.ones(1, 2)).sum() + torch.zeros((), requires_grad=True)).backward()
        with pytest.raises(AssertionError, match="No inf checks were recorded for this optimizer"):
            aopt.step()
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
        GradientState._reset_state()


def test_the_message_triages_to_its_entry(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/x/torch/amp/grad_scaler.py", line 476, in step\n'
        f'    raise AssertionError("{MESSAGE}")\n'
        f"AssertionError: {MESSAGE}\n", encoding="utf-8")
    out = subprocess.run([sys.executable, str(TRIAGE), "--output", "json", str(log)],
                         capture_output=True, text=True, check=False)
    root = json.loads(out.stdout)["root_cause"]
    assert root["signature"] == "torch-gradscaler-no-inf-checks", out.stdout[:2000]
