"""Runs tests/audit/_fx14a_worker.py once in one process (distributed_type NO) and once under
`accelerate launch --multi_gpu --num_processes 2` (MULTI_CPU, gloo) with accelerate 1.15.0 / torch 2.13.0:

- re-preparing the model `prepare` returned: what `accelerator._models` holds, which model files
  `save_state` writes (training-loop-integration/references/prepare.md);
- `accelerator.clip_grad_norm_` on mixed DTensor / plain gradients vs torch's `clip_grad_norm_`
  (training-loop-integration/references/accelerator-methods.md);
- a batch sampler without `batch_size` under `even_batches` True / False
  (training-loop-integration/references/prepared-loader-matrix.md).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WORKER = HERE / "_fx14a_worker.py"
REFS = REPO / "sub-skills" / "training-loop-integration" / "references"


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_"))}
    env.update(HF_HOME=str(home), DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return env


def text(p: Path) -> str:
    return " ".join(p.read_text(encoding="utf-8").split())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("fx14a")
    one = subprocess.run([sys.executable, str(WORKER), str(work)], capture_output=True, text=True, cwd=work,
                         env=_env(work / "hf"), timeout=300, stdin=subprocess.DEVNULL)
    assert one.returncode == 0, one.stderr[-4000:]
    cmd = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
           str(WORKER), str(work)]
    two = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=_env(work / "hf"), timeout=400,
                         stdin=subprocess.DEVNULL)
    assert two.returncode == 0, two.stderr[-4000:]
    load = lambda n: json.loads((work / f"{n}.json").read_text())  # noqa: E731
    return {"single": load("single"), "ranks": [load("rank0"), load("rank1")]}


def test_single_process_reprepare_is_a_no_op(runs):
    r = runs["single"]["reprepare"]
    assert r["distributed_type"] == "DistributedType.NO"
    assert r["returned_is_original"] is True  # no wrapper: prepare returns the module itself
    assert r["models_after_first"] == ["original"] and r["models_after_again"] == ["original"]
    assert r["state_files"] == ["model.safetensors"]
    assert r["load_one_model_ckpt"] == "ok"


def test_ddp_reprepare_of_returned_model_registers_it_again(runs):
    for rank in runs["ranks"]:
        r = rank["reprepare"]
        assert r["distributed_type"] == "DistributedType.MULTI_CPU"
        assert r["returned_type"] == "DistributedDataParallel" and r["returned_is_original"] is False
        assert r["models_after_first"] == ["original"]  # _models holds the unwrapped module, not the DDP
        assert r["returned_in_models_after_first"] is False and r["returned_marked"] is True
        assert r["again_is_same_object"] is True and r["again_type"] == "DistributedDataParallel"  # no nesting
        assert r["models_after_again"] == ["original", "returned"]
        assert r["state_files"] == ["model.safetensors", "model_1.safetensors"]
        # same values, but model_1 is the DDP's state dict: `module.`-prefixed keys
        assert r["state_keys"] == {"model.safetensors": ["bias", "weight"],
                                   "model_1.safetensors": ["module.bias", "module.weight"]}
        # a checkpoint saved with one model registered no longer loads (no model_1 file)
        assert r["load_one_model_ckpt"].startswith("FileNotFoundError") and "pytorch_model_1.bin" in r["load_one_model_ckpt"]
    t = text(REFS / "prepare.md")
    assert "registers the returned wrapper as a second model" in t


def test_clip_grad_norm_mixed_dtensor_and_plain(runs):
    for rank in runs["ranks"]:
        c = rank["clip"]
        assert c["torch_mixed"].startswith("RuntimeError: aten._foreach_norm.Scalar got mixed torch.Tensor and DTensor")
        assert "got mixed torch.Tensor and DTensor" in c["torch_with_norm_mixed"]
        assert c["acc_total_type"] == "Tensor"  # plain tensor, not a DTensor, on the mixed path
        assert math.isclose(c["acc_total"], math.sqrt(33.0), rel_tol=1e-6)  # global norm, not the local shard's
        assert not math.isclose(c["acc_total"], c["local_shard_only"], rel_tol=1e-3)
        s = 1.0 / math.sqrt(33.0)
        assert all(math.isclose(v, s, rel_tol=1e-5) for row in c["w_grad_after"] for v in row)
        assert [round(v, 4) for v in c["b_grad_after"]] == [round(3 * s, 4), round(4 * s, 4)]
        assert c["w_grad_is_dtensor"] is True
    t = text(REFS / "accelerator-methods.md")
    assert "accelerate returns √33 = 5.7446 on both ranks" in t


def test_batch_sampler_without_batch_size_even_batches(runs):
    r0, r1 = (r["dynamic"] for r in runs["ranks"])
    # 5 batches [0,1,2] [3] [4,5] [6,7,8] [9] dealt round-robin; even_batches pads rank 1 with batch 0, whole
    assert r0["True"]["batches"] == [[0, 1, 2], [4, 5], [9]] and r1["True"]["batches"] == [[3], [6, 7, 8], [0, 1, 2]]
    assert r0["True"]["len"] == r1["True"]["len"] == 3
    assert r0["False"]["batches"] == [[0, 1, 2], [4, 5], [9]] and r1["False"]["batches"] == [[3], [6, 7, 8]]
    assert (r0["False"]["len"], r1["False"]["len"]) == (3, 2)
    for r in (r0, r1):
        for even in ("True", "False"):
            assert r[even]["sampler"] == "BatchSamplerShard" and r[even]["remainder_last"] == -1
    assert "rank 1 `[3] [6,7,8] [0,1,2]`, `len` 3 on both" in text(REFS / "prepared-loader-matrix.md")
