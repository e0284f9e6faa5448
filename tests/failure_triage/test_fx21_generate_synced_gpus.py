"""s21-K2-01 (generation-under-sharding.md): in your own Accelerate + ZeRO-3 loop the DeepSpeed plugin registers the
HfDeepSpeedConfig weakref (accelerate 1.15.0 DeepSpeedPlugin.set_deepspeed_weakref, called when the plugin is
selected in AcceleratorState), so transformers 5.25.0 is_deepspeed_zero3_enabled() is true and generate turns
synced_gpus on by itself when the world size is above 1; a bare deepspeed.initialize registers nothing.
2 gloo ranks, DS_ACCELERATOR=cpu, worker _fx21_synced_worker.py (one start-up, about 15-25 s).
"""
from __future__ import annotations

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

WORKER = HERE / "_fx21_synced_worker.py"


@pytest.fixture(scope="module")
def ranks():
    tmp = Path(tempfile.mkdtemp(prefix="fx21_synced_"))
    env = dict(os.environ, DS_ACCELERATOR="cpu", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(tmp / f"r{r}.json")], cwd=tmp,
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    out = []
    for r, p in enumerate(procs):
        try:
            log, _ = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            log, _ = p.communicate()
        f = tmp / f"r{r}.json"
        out.append({"rc": p.returncode, "log": log[-2000:], "res": json.loads(f.read_text()) if f.exists() else None})
    return out


def test_accelerate_zero3_generate_sets_synced_gpus_itself(ranks):
    for r in ranks:
        assert r["res"], r["log"]
        res = r["res"]
        assert res["before"] is False
        assert res["bare_deepspeed_initialize_zero3"] is False   # no HfDeepSpeedConfig: detection misses ZeRO-3
        assert res["accelerator_zero3"] is True                   # the plugin's weakref is live
        assert res["synced_gpus"] == [True]                       # generate chose it, not the caller
        assert res["finished"] is True
    assert [r["res"]["new_tokens"] for r in ranks] == [2, 6]      # different lengths, both ranks returned
