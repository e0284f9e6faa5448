"""The pinned-release (deepspeed 0.19.8, torch 2.13.0) side of the DeepSpeed behaviour changes in
sub-skills/distributed-training-backends/references/deepspeed-behaviour-changes.md, each run on one
gloo rank of DeepSpeed's CPU accelerator by _ds_changes_probe.py. The older-release side of each row
is read from the DeepSpeed release tags (cited in the page and the claims ledger), not run here.

The add_export quoting of 0.19.8 is run by tests/field_coverage/test_ds_multinode_runners.py."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def run_case(case, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "DEEPSPEED_"))}
    env.update(DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"),
               MASTER_PORT=str(29700 + random.randrange(200)))
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(k, None)
    proc = subprocess.run([sys.executable, str(HERE / "_ds_changes_probe.py"), case], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=400)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.stdout[-2000:], proc.stderr[-4000:])
    return json.loads(lines[-1][len("RESULT "):])


def test_import_deepspeed_leaves_the_start_method_unset(tmp_path):
    # 0.17.1 forced 'spawn' at import (PR #7215); 0.17.2 (PR #7349) moved it into DecoupledCheckpointEngine
    assert run_case("import_start_method", tmp_path) == {"start_method": None}


def test_warmup_schedulers_write_their_start_lr_at_construction(tmp_path):
    # since 0.15.3 (PR #6597): the optimizer's lr 1e-3 is replaced before any step
    assert run_case("warmup_decay_init", tmp_path) == {"WarmupDecayLR": 0.0, "WarmupCosineLR": 0.0}


def test_late_attached_module_zero3_forward_runs_but_is_not_partitioned_or_optimized(tmp_path):
    r = run_case("late_module_zero3", tmp_path)
    assert r["late_params_type_before"] == "dict"          # torch >= 2.5: plain dict
    assert r["forward"] == "ok"                            # PR #8009 (0.19.1) wraps it in the forward prologue
    assert r["late_params_type_after"] == "ZeROOrderedDict"
    assert r["late_has_ds_id"] is False and r["late_numel"] == 16   # not partitioned
    assert r["late_in_inner_optimizer"] is False
    assert r["step"] == "AttributeError: 'Parameter' object has no attribute 'ds_active_sub_modules'"


def test_bf16_stage0_clears_grads_and_has_no_loss_scale(tmp_path):
    r = run_case("bf16_stage0", tmp_path)
    s0, s1 = r["stage0"], r["stage1"]
    assert s0["optimizer"] == "FP16_UnfusedOptimizer" and s1["optimizer"] == "DeepSpeedZeroOptimizer"
    assert s0["grads_after_step"] == [None] * 4            # zero_grad ran after the step (PR #7839, 0.18.6)
    assert s0["cur_scale"] == 1.0 and s0["use_grad_scaling"] is False
    assert s0["norms"][0] == pytest.approx(s1["norms"][0], rel=1e-3)   # same first-step norm as stage 1
    assert s0["norms"][2] < s0["norms"][0]                 # no growth from accumulated grads
    assert all(abs(a - b) / b < 0.05 for a, b in zip(s0["norms"], s1["norms"]))


def test_trace_cache_message_is_silent_by_default(tmp_path):
    r = run_case("trace_cache", tmp_path)
    assert r["config_default"] is False and r["default"] == []
    assert r["true"] and all(ln.startswith("Invalidate trace cache @ step") and "expected module" in ln
                             for ln in r["true"])


def test_warmup_cosine_fills_every_group_and_an_optimizer_lr_of_zero_only_suits_warmuplr(tmp_path):
    # audit: the page's pre-0.15.3 workaround "optimizer lr = warmup start" was given for WarmupCosineLR too,
    # whose schedule is a ratio of the optimizer lr; and 0.15.3 - 0.18.x WarmupCosineLR set group 0 only (PR #7969)
    r = run_case("warmup_groups", tmp_path)
    assert r["cosine_two_groups_at_init"] == [0.0, 0.0]
    assert r["cosine_opt_lr0"] == [0.0] * 6                         # never leaves 0
    assert r["warmuplr_opt_lr0"][-1] == pytest.approx(1e-3) and r["warmuplr_opt_lr0"][0] == 0.0
