"""Muon resume under ZeRO-2 with bf16 (deepspeed 0.19.8, DS_ACCELERATOR=cpu, gloo, one process; worker
_muon_resume_worker.py). Backs the Muon row of
sub-skills/distributed-training-backends/references/deepspeed-checkpoint-loading.md and catalog entry
deepspeed-muon-momentum-dtype-after-resume (set-21 miss s21-K11-03).

ZeRO-1/2 keep the Muon momentum as one flat buffer per group in the gradient dtype (bf16 here);
the checkpoint restores it as fp32. muon_update's momentum.lerp(grad) needs equal dtypes. The pinned
_muon_momentum_buffer converts a restored buffer to the gradient dtype; with that conversion taken out
(the behaviour before the fix) the first step after load_checkpoint raises.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _ports import free_port  # noqa: E402

WORKER = HERE / "_muon_resume_worker.py"


@pytest.fixture(scope="module")
def runs():
    tmp = Path(tempfile.mkdtemp(prefix="muon_resume_"))
    procs = {}
    for mode in ("pinned", "old"):
        env = dict(os.environ, DS_ACCELERATOR="cpu", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                   WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
        procs[mode] = subprocess.Popen([sys.executable, str(WORKER), mode, str(tmp)], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = {}
    for mode, p in procs.items():
        log, _ = p.communicate(timeout=240)
        f = tmp / f"{mode}.json"
        assert f.exists(), log[-3000:]
        out[mode] = json.loads(f.read_text())
    return out


def test_momentum_is_bf16_fresh_and_fp32_right_after_load(runs):
    for mode in ("pinned", "old"):
        assert runs[mode]["fresh"] == ["torch.bfloat16"]
        assert runs[mode]["after_load"] == ["torch.float32"]


def test_pinned_converts_the_restored_buffer_and_resumes(runs):
    r = runs["pinned"]
    assert r["resume"] == "ok", r.get("tb")
    assert r["after_resume_step"] == ["torch.bfloat16"]


def test_without_the_conversion_the_first_step_after_load_raises(runs):
    r = runs["old"]
    assert "expected dtype float for `end` but got dtype c10::BFloat16" in r["resume"]
    assert "muon_update" in r["tb"] and "lerp" in r["tb"]


def test_pinned_source_converts_rather_than_reallocates():
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer
    src = inspect.getsource(DeepSpeedZeroOptimizer._muon_momentum_buffer)
    assert "elif buffer.dtype != momentum_dtype:" in src
    assert "buffer = buffer.to(dtype=momentum_dtype)" in src
    assert "expected dtype torch.float32 for `end`, but got dtype torch.bfloat16" in src
