"""Behaviour claims of the DeepSpeed references (precision and gradient-accumulation dtype, who
steps the scheduler, Accelerate's "auto" fills) and of the Accelerate half of the Transformers
Trainer hand-off, from one gloo rank on DeepSpeed's CPU accelerator (deepspeed 0.19.8, accelerate
1.15.0). transformers is not needed: a two-name stand-in lets Accelerate's DeepSpeed path run."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from _torchrun import result, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
REFS = HERE.parents[1] / "sub-skills" / "distributed-training-backends" / "references"


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("ds_dtype_sched")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_"))}
    env.update(DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", HF_HOME=str(scratch / "hf"))
    out = result(torchrun(HERE / "_ds_dtype_sched_probe.py", scratch, nproc=1, cwd=scratch, env=env, timeout=300))
    broken = {k: v["probe_error"] for k, v in out.items() if isinstance(v, dict) and "probe_error" in v}
    assert not broken, broken
    return out


def test_grad_accum_dtype_per_zero_stage(facts):
    g = facts["grad_accum"]
    if not facts["bf16_supported"]:
        # an accelerator without bf16: the engine refuses bf16 before choosing an optimizer
        assert all("raises" in v for v in g.values()), g
        return
    # default: accumulation in the model dtype (bf16) at every stage
    assert g["stage1_default"]["accum_dtype"] == g["stage2_default"]["accum_dtype"] == "torch.bfloat16"
    assert g["stage3_default"]["accum_dtype"] == "torch.bfloat16"
    # stage 0 with bf16 is the fp16 wrapper family run in bf16 (DDP_BFLOAT16), not BF16_Optimizer
    assert g["stage0_default"]["optimizer"] in ("FP16_UnfusedOptimizer", "FP16_Optimizer"), g["stage0_default"]
    # fp32 requested: stage 0 refuses, stage 1 switches to BF16_Optimizer, stages 2 and 3 keep their
    # ZeRO optimizer and accumulate in separate fp32 buffers
    assert g["stage0_fp32"]["raises"] == "NotImplementedError" and "unsupported mix" in g["stage0_fp32"]["msg"]
    assert g["stage1_fp32"]["optimizer"] == "BF16_Optimizer"
    assert g["stage2_fp32"] == {"optimizer": "DeepSpeedZeroOptimizer", "accum_dtype": "torch.float32", "separate": True}
    assert g["stage3_fp32"]["optimizer"] == "DeepSpeedZeroOptimizer_Stage3"
    assert g["stage3_fp32"]["accum_dtype"] == "torch.float32"


def test_engine_steps_a_scheduler_given_to_initialize(facts):
    s = facts["sched_engine"]
    assert s["engine_only"] == {"same_object": True, "last_epoch": 3, "lr": 0.125}  # 3 optimizer steps, 3 decays
    assert s["manual"]["last_epoch"] == 6  # stepping it in the loop as well: twice per step
    assert s["gas2_four_micro_batches"] == 2  # per optimizer step (boundary), not per micro-batch


def test_accelerate_hidden_size_auto_fill_and_missing_gas(facts):
    h = facts["acc_hidden_auto"]
    # model.config.hidden_size 16: hidden^2, int(0.9 * hidden^2), 10 * hidden
    assert h["stage3"] == {"reduce_bucket_size": 256, "stage3_prefetch_bucket_size": 230,
                           "stage3_param_persistence_threshold": 160, "gradient_accumulation_steps": 1}
    assert h["stage2"]["reduce_bucket_size"] == 256 and h["stage2"]["gradient_accumulation_steps"] == 1
    assert h["no_config"]["raises"] == "ValueError" and "Can't find `model.config` entry" in h["no_config"]["msg"]


def test_deepspeed_config_decides_precision_not_mixed_precision(facts):
    p = facts["acc_precision"]
    # Accelerator(mixed_precision="bf16") only fills "auto" or absent blocks; a filled false stays false
    assert p["filled_false"] == {"accelerator": "no", "bf16_enabled": False}
    assert p["still_auto"] == {"accelerator": "bf16", "bf16_enabled": True}
    assert p["absent"] == {"accelerator": "bf16", "bf16_enabled": True}


def test_accelerate_scheduler_hand_off_under_deepspeed(facts):
    a = facts["acc_sched"]
    # a torch scheduler stays with Accelerate (stepped by scheduler.step(), once per call on one process)
    assert a["torch_steplr"] == {"wrapper": "AcceleratedScheduler", "engine_has_it": False, "last_epoch": 2}
    # one of DeepSpeed's schedule classes goes to the engine; the returned wrapper's step() does nothing
    assert a["ds_warmuplr"] == {"wrapper": "DeepSpeedSchedulerWrapper", "engine_has_it": True, "last_epoch": 1}


def test_trainer_fsdp_fields_beat_the_accelerate_config(facts):
    f = facts["fsdp_trainer_plugin"]
    # what the Trainer sets explicitly wins over FSDP_* from `accelerate launch`
    assert f["version"] == 2 and f["state_dict_type"] == "FULL_STATE_DICT"
    assert f["auto_wrap"] == "transformer_auto_wrap_policy" and f["cpu_ram_efficient_loading"] is False
    # what it leaves unset comes from the launcher's environment
    assert f["offload"] == "CPUOffloadPolicy" and f["activation_checkpointing"] is True


def test_an_accumulation_plugin_hides_the_launcher_value(facts):
    assert facts["trainer_gas_plugin"] == {"with_plugin": 1, "without_plugin": 4}
