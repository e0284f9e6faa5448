"""The validator's DeepSpeed / Accelerate fact tables (backend_validator/deepspeed.py) checked
against the installed deepspeed 0.19.8, accelerate 1.15.0 and torch (one probe subprocess)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ds_support import SCRIPTS  # noqa: F401
from backend_validator import deepspeed as D

# bounds enforced by a pydantic field_validator instead of Field metadata -> its message
CUSTOM_BOUNDS = {("fp16", "loss_scale"): "fp16.loss_scale must be >= 0"}
# fields whose field_validator rejects booleans -> its message
NO_BOOL = {("fp16", "loss_scale"): "fp16.loss_scale must be a number, not bool",
           ("fp16", "loss_scale_window"): "must be an integer, not bool",
           ("fp16", "min_loss_scale"): "must be an integer, not bool"}
PROBE = Path(__file__).resolve().parent / "ds_facts_probe.py"


@pytest.fixture(scope="module")
def facts():
    p = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    f = json.loads(p.stdout)
    assert f["versions"] == {"deepspeed": "0.19.8", "accelerate": "1.15.0"}
    return f


@pytest.mark.parametrize("block", sorted(D.STRICT_BLOCKS))
def test_strict_block_fields(block, facts):
    ours = D.STRICT_BLOCKS[block][0]
    real = facts["models"][block]
    assert set(ours) == set(real)
    for name, f in ours.items():
        r = real[name]
        assert f.alias == r["alias"], name
        assert f.deprecated == r["deprecated"], name
        if f.kind == "any":
            assert r["kind"].startswith("other:") or r["kind"] == "enum", (name, r["kind"])
            continue
        assert f.kind == r["kind"] or (f.kind == "dict" and r["kind"] == "model"), (name, f.kind, r["kind"])
        if r["kind"] in ("enum", "list"):
            assert set(f.choices) == set(r["choices"]), (name, f.choices, r["choices"])
        if f.kind != "model":
            assert f.optional == r["optional"], name
        for a in ("ge", "gt", "le", "lt"):
            if (block, name) in CUSTOM_BOUNDS and r.get(a) is None:
                assert CUSTOM_BOUNDS[(block, name)] in facts["ds_source"]  # a field_validator enforces it
                continue
            assert getattr(f, a) == r.get(a), (name, a)
        assert f.no_bool == ((block, name) in NO_BOOL), name
        if f.no_bool:
            assert NO_BOOL[(block, name)] in facts["ds_source"]
        if f.default is not None and not isinstance(r["default"], (dict, list)) and r["default"] != "None":
            assert f.default == r["default"], (name, f.default, r["default"])


def test_removed_keys_and_optimizers(facts):
    assert sorted(D.REMOVED_TOP_LEVEL) == facts["removed_top"]
    assert sorted(D.REMOVED_ZERO) == facts["removed_zero"]
    assert set(D.DS_OPTIMIZERS) == set(facts["ds_optimizers"])
    for name in D.REMOVED_OPTIMIZERS:
        assert name not in facts["ds_optimizers"]
        assert not any(t.lower() == name for t in facts["torch_optim"])


def test_optimizer_and_scheduler_names(facts):
    assert set(D.TORCH_OPTIMIZERS) <= set(facts["torch_optim"])
    assert set(D.DS_SCHEDULERS) == set(facts["lr_schedules"])
    assert set(D.TORCH_SCHEDULERS) <= set(facts["torch_sched"])
    for n, s in facts["sched"].items():
        assert list(D.SCHEDULER_PARAMS[n]) == s["params"], n
        assert list(D.SCHEDULER_REQUIRED.get(n, ())) == s["required"], n
    assert set(D.ZERO_TESTED_OPTIMIZERS) <= set(D.DS_OPTIMIZERS)


def test_dtype_spellings(facts):
    for k, names in D.DTYPES.items():
        assert set(names) == set(facts["dtype_values"][k]), k


def test_keys_are_read_by_deepspeed(facts):
    src = facts["ds_source"]
    for k in D.TOP_LEVEL_KEYS:
        if k == "msamp":
            continue  # written by accelerate's DeepSpeedPlugin (checked below)
        assert f'"{k}"' in src or f"'{k}'" in src, k
    for blk, keys in D.LENIENT_BLOCKS.items():
        for k in keys:
            assert f'"{k}"' in src or f"'{k}'" in src, (blk, k)
    assert '"msamp"' in facts["acc_post_init"]


def test_accelerate_tables(facts):
    post, checks = facts["acc_post_init"], facts["acc_checks"]
    for k, v in D.ACCELERATE_FIELDS_EXCLUSIVE_WITH_FILE.items():
        assert f'"{k}": "{v}"' in post, k
    assert '"Please specify the ZeRO optimization config in the DeepSpeed config."' in post
    assert "ACCELERATE_MIXED_PRECISION" in checks
    acc = facts["acc_accelerator"] + post + facts["acc_set_mp"]
    for k in D.ACCELERATE_AUTO_KEYS:
        assert f'"{k}"' in acc, k


def test_optimizer_params(facts):
    popped = {"adam": set(D._ADAM_POPPED), "adamw": set(D._ADAM_POPPED)}
    for t, ctor in facts["optimizer_ctor_params"].items():
        assert set(D.OPTIMIZER_PARAMS[t]) == set(ctor) | popped.get(t, set()), t
    assert "max_grad_norm" in facts["ds_source"]
