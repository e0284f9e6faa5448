"""Behaviour claims of sub-skills/distributed-training-backends/references/deepspeed-initialize.md:
what deepspeed.initialize takes from where (one gloo rank, DS_ACCELERATOR=cpu, deepspeed 0.19.8)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from _torchrun import result, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def r(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("dsinit")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1",
               TORCH_EXTENSIONS_DIR=str(scratch / "ext"))
    (scratch / "ckpt").mkdir()
    return result(torchrun(HERE / "_ds_initialize_probe.py", scratch / "ckpt", nproc=1, cwd=scratch, env=env))


def test_batch_keys_are_derived_by_integer_division(r):
    b = r["batch"]
    assert b["tbs8"] == [8, 8, 1] and b["mbs2"] == [2, 2, 1]
    assert b["mbs2_ga4"] == [8, 2, 4] and b["tbs8_ga4"] == [8, 2, 4]
    assert b["tbs7_mbs2"]["raises"] == "AssertionError" and "7 != 2 * 3 * 1" in b["tbs7_mbs2"]["msg"]
    assert "Either train_batch_size or train_micro_batch_size_per_gpu" in b["ga4_only"]["msg"]


def test_config_from_args_and_call_together_raises(r):
    assert r["both_configs"]["raises"] == "AssertionError"
    assert r["both_configs"]["msg"].startswith("Not sure how to proceed")


def test_client_optimizer_wins_and_config_scheduler_drives_it(r):
    assert r["client_opt"] == {"basic": "SGD", "lr": [0.0], "sched": "WarmupLR", "loader": True}
    assert r["client_sched"] == {"sched": "StepLR"}
    # "type": "Adam" in the config builds AdamW (adam_w_mode defaults to true)
    assert r["config_only"] == {"basic": "AdamW", "sched": "WarmupLR"}


def test_offload_with_torch_optimizer_raises_unless_forced_off(r):
    assert r["offload_torch_opt_force_None"]["raises"] == "ZeRORuntimeException"
    assert r["offload_torch_opt_force_False"] == "accepted"


def test_optimizer_steps_only_at_accumulation_boundary(r):
    assert [g for _, g, _ in r["ga3"]] == [0, 0, 1, 1, 1, 2]
    assert [b for b, _, _ in r["ga3"]] == [False, False, True, False, False, True]


def test_universal_checkpoint_of_a_plain_zero2_run(r):
    u = r["universal"]
    # a model without universal_checkpoint_info needs --inject_missing_state
    assert u["inject_False"]["raises"] == "AssertionError"
    assert "universal_checkpoint_info state is missing" in u["inject_False"]["msg"]
    assert u["inject_True"] == "converted"
    # the converter writes <root>/latest_universal; load_universal reads it when no tag is given
    assert u["latest_universal"] == "global_step1_universal"
    assert u["fresh"] != u["trained"] and u["loaded"][1] == u["trained"]
    assert u["no_latest_universal"]["raises"] == "ValueError"
    assert "latest_universal does not exist" in u["no_latest_universal"]["msg"]


def test_client_state_round_trip_and_save_latest_false(r):
    assert r["universal"]["client_state"] == {"epoch": 3, "latest_written": False}


def test_zero_untested_optimizer_is_an_exact_type_check_with_a_top_level_flag(r):
    """s3-ds-06: torch AdamW passes, a subclass of it and SGD assert; the flag works at the top level
    and is rejected (pydantic extra_forbidden) inside zero_optimization."""
    z = r["zero_untested"]
    assert z["AdamW"] == "accepted" and z["SGD_top_level_flag"] == "accepted"
    for name in ("SubAdamW", "SGD"):
        assert z[name]["raises"] == "AssertionError" and "untested ZeRO Optimizer" in z[name]["msg"], name
    assert z["SGD_flag_in_zero_section"]["raises"] == "ValidationError"
    assert "Extra inputs are not permitted" in z["SGD_flag_in_zero_section"]["msg"]


def test_unmanaged_accumulation_steps_at_every_step_call(r):
    """s3-ds-03: managed_gradient_accumulation false -> no boundary during backward, one optimizer
    step per step() after 3 backward calls with GA 2 in the config; the loss is still divided by
    the config GA (3 x 1/2 = 1.5) unless scale_wrt_gas=False (3.0); set_gradient_accumulation_boundary asserts."""
    u = r["unmanaged_ga"]
    assert u["scale_True"] == {"boundary_in_backward": [False] * 3, "grad": 1.5, "global_steps": 1}
    assert u["scale_False"] == {"boundary_in_backward": [False] * 3, "grad": 3.0, "global_steps": 1}
    assert u["set_boundary"]["raises"] == "AssertionError"
    assert "not supported with managed_gradient_accumulation=False" in u["set_boundary"]["msg"]
