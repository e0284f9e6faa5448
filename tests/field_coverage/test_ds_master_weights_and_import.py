"""Behaviour claims of deepspeed-checkpoint-loading.md (fine-tuning from a weights-only load),
peft-frozen-parameters.md (a param group of frozen parameters only) and deepspeed-op-loading.md
(the CUDA probe `import deepspeed` makes). deepspeed 0.19.8, torch 2.13.0 (CPU build),
DS_ACCELERATOR=cpu, one gloo rank under torchrun; the import probe is a plain interpreter."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _torchrun import result, shared, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent


def probe_run(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("dsfx14")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    return result(torchrun(HERE / "_ds_fx14_probe.py", scratch, nproc=1, cwd=scratch, env=env))


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    return shared(probe_run, tmp_path_factory)


def test_stage0_bf16_no_optimizer_states_reverts_at_first_step(res):
    r = res["finetune"]["0_bf16"]
    assert r["optimizer"] == "FP16_UnfusedOptimizer"  # client torch SGD, bf16, no ZeRO
    assert r["no_optim_states"]["loaded"] is True          # the module weights did load ...
    assert r["no_optim_states"]["reverted"] is True        # ... and the first step wrote the fresh fp32 masters back


def test_stage0_bf16_load_module_only_keeps_the_loaded_weights(res):
    r = res["finetune"]["0_bf16"]["module_only"]
    assert r["loaded"] is True and r["reverted"] is False


def test_stage0_fp16_not_runnable_on_the_cpu_accelerator(res):
    assert res["finetune"]["0_fp16"]["error"] == "ValueError: Type fp16 is not supported on your device."


@pytest.mark.parametrize("stage", ["1_bf16", "2_bf16"])
def test_zero12_rebuilds_fp32_from_the_loaded_weights(res, stage):
    r = res["finetune"][stage]
    assert r["optimizer"] == "DeepSpeedZeroOptimizer"
    for opt in ("no_optim_states", "module_only"):
        assert r[opt]["loaded"] is True and r[opt]["reverted"] is False


@pytest.mark.parametrize("stage", ["1", "2"])
def test_zero12_frozen_only_group_indexerror(res, stage):
    r = res["frozen"][stage]
    assert r["error"] == "IndexError: list index out of range"
    assert r["file"] == "deepspeed/runtime/zero/stage_1_and_2.py"
    assert r["line"] == "param_dtype = self.bit16_groups[i][0].dtype"


def test_zero3_skips_a_frozen_only_group(res):
    assert res["frozen"]["3"] == {"error": None, "optimizer": "DeepSpeedZeroOptimizer_Stage3"}


@pytest.mark.parametrize("stage", ["1", "2", "3"])
def test_dropping_frozen_only_groups_or_mixing_them_trains(res, stage):
    assert res["filtered"][stage] == {"error": None}
    assert res["mixed"][stage] == {"error": None}


def _import_probe(ds_accelerator):
    env = dict(os.environ)
    env.pop("DS_ACCELERATOR", None)
    if ds_accelerator:
        env["DS_ACCELERATOR"] = ds_accelerator
    proc = subprocess.run([sys.executable, str(HERE / "_ds_import_probe.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    return result(proc)


def test_import_deepspeed_probes_cuda_through_op_builder():
    r = _import_probe(None)
    assert [c[0] for c in r["calls"]] == ["device_count", "is_available"]
    chain = r["calls"][1][1]
    assert chain[0] == "deepspeed/__init__.py::<module>"
    assert chain[-3:] == ["deepspeed/ops/op_builder/__init__.py::<module>",
                          "deepspeed/ops/op_builder/__init__.py::builder_closure",
                          "deepspeed/accelerator/real_accelerator.py::get_accelerator"]
    assert r["torch_cuda_is_initialized"] is False


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_ds_accelerator_set_skips_the_probe(name):
    r = _import_probe(name)
    assert r["calls"] == [] and r["accelerator"] == name
