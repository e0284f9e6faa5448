"""Behaviour claims written from the set-20 writers' mining (W2): a frozen model given an optimizer
under ZeRO-1/2/3 (zero3-parameters.md, peft-frozen-parameters.md), zero_to_fp32 --safe_serialization
on tied weights (deepspeed-zero-to-fp32.md) and a hand-written `deepspeed.zero.Init()` around a
Transformers model (zero3-parameters.md). One run of _ds_cov20_probe.py under torchrun, one gloo rank,
DS_ACCELERATOR=cpu: deepspeed 0.19.8, transformers 5.25.0, torch 2.13.0 (CPU build), safetensors as
installed with transformers. The catalog entries' example lines are checked against the messages the
run printed, so the triage patterns follow the installed packages."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from _torchrun import result, shared, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "sub-skills" / "failure-triage" / "scripts"))


def probe_run(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("dscov20")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    return result(torchrun(HERE / "_ds_cov20_probe.py", scratch, nproc=1, cwd=scratch, env=env))


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    return shared(probe_run, tmp_path_factory)


def _triage(line: str) -> str | None:
    from triage.catalog import load_catalog  # noqa: E402
    got = load_catalog().match(line.strip())
    return got.id if got else None


# (a) a frozen model with an optimizer --------------------------------------------------------------
def test_frozen_model_without_optimizer_builds_at_stage_0_and_3(res):
    f = res["frozen"]
    assert f["0_none"] == {"optimizer": None}
    assert f["3_none"] == {"optimizer": "DeepSpeedZeRoOffload", "param_shape": [0]}
    assert f["3_none_offload_param"]["optimizer"] == "DeepSpeedZeRoOffload"


@pytest.mark.parametrize("how", ["config", "client"])
def test_frozen_model_with_optimizer_stage0_builds_a_plain_optimizer(res, how):
    assert res["frozen"][f"0_{how}"] == {"optimizer": "AdamW"}


@pytest.mark.parametrize("stage", [1, 2])
@pytest.mark.parametrize("how", ["config", "client"])
def test_frozen_model_with_optimizer_zero12_indexerror(res, stage, how):
    r = res["frozen"][f"{stage}_{how}"]
    assert r["error"] == "IndexError: list index out of range"
    assert r["file"] == "deepspeed/runtime/zero/stage_1_and_2.py"
    assert r["line"] == "param_dtype = self.bit16_groups[i][0].dtype"


@pytest.mark.parametrize("stage", [1, 2])
def test_frozen_model_without_optimizer_zero12_refused(res, stage):
    assert res["frozen"][f"{stage}_none"]["error"] == f"AssertionError: zero stage {stage} requires an optimizer"


@pytest.mark.parametrize("how", ["config", "client"])
def test_frozen_model_with_optimizer_zero3_bare_assertion_in_defragment(res, how):
    r = res["frozen"][f"3_{how}"]
    assert r["error"] == "AssertionError:"          # no message: set() of no tensors has length 0
    assert r["file"] == "deepspeed/runtime/zero/utils.py" and r["func"] == "defragment"
    assert r["line"] == "assert len(set(t.dtype for t in tensors)) == 1"


def test_frozen_model_with_optimizer_zero3_offload_param_max_empty(res):
    r = res["frozen"]["3_config_offload_param"]
    assert r["error"] == "ValueError: max() arg is an empty sequence"
    assert r["file"] == "deepspeed/runtime/zero/stage3.py" and r["func"] == "initialize_optimizer_states"


def test_filtering_trainable_parameters_of_a_frozen_model_fails_in_torch(res):
    assert res["frozen"]["trainable_only_optimizer"]["error"] == "ValueError: optimizer got an empty parameter list"


def test_reference_engine_from_a_copied_policy_config(res):
    bad = res["reference"]["policy_config_copied"]
    assert bad["error"] == "ValueError: max() arg is an empty sequence"
    assert "deepspeed/runtime/engine.py::_configure_optimizer" in bad["frames"]
    good = res["reference"]["optimizer_and_scheduler_popped"]
    assert good == {"optimizer": "DeepSpeedZeRoOffload", "forward_shape": [1, 1]}


def test_frozen_model_messages_are_triaged(res):
    assert _triage("    " + res["frozen"]["3_config"]["line"]) == "deepspeed-zero3-optimizer-no-trainable-params"
    assert _triage("    " + res["frozen"]["3_config_offload_param"]["line"]) == \
        "deepspeed-zero3-offload-optimizer-no-trainable-params"
    assert _triage("    " + res["frozen"]["2_config"]["line"]) == "deepspeed-zero12-frozen-only-param-group"


# (b) tied weights and safetensors ------------------------------------------------------------------
@pytest.mark.parametrize("stage", ["2", "3"])
def test_zero_to_fp32_pickle_keeps_the_tied_alias(res, stage):
    r = res["tied"][stage]
    assert r["named_parameters"] == ["emb.weight", "mid.weight", "mid.bias"]  # the tied one is listed once
    assert r["state_dict_keys"] == ["emb.weight", "head.weight", "mid.bias", "mid.weight"]
    assert r["safe_False"] == {"files": ["pytorch_model.bin"]}
    assert r["bin_keys"] == ["emb.weight", "head.weight", "mid.bias", "mid.weight"]
    assert r["bin_tied_alias_kept"] is True


@pytest.mark.parametrize("stage", ["2", "3"])
def test_zero_to_fp32_safe_serialization_refuses_tied_weights(res, stage):
    r = res["tied"][stage]["safe_True"]
    assert r["error"].startswith("RuntimeError:")
    assert "Some tensors share memory, this will lead to duplicate memory on disk" in r["error"]
    assert "{'head.weight', 'emb.weight'}" in r["error"] or "{'emb.weight', 'head.weight'}" in r["error"]
    assert "deepspeed/utils/zero_to_fp32.py::convert_zero_checkpoint_to_state_dict" in r["frames"]
    assert r["file"] == "safetensors/torch.py"


@pytest.mark.parametrize("stage", ["2", "3"])
def test_safetensors_save_model_drops_the_alias_and_reties(res, stage):
    r = res["tied"][stage]
    assert len(r["save_model_keys"]) == 3 and "mid.weight" in r["save_model_keys"]
    assert r["save_model_roundtrip_equal"] is True and r["save_model_still_tied"] is True


def test_llama_tied_embeddings_and_save_pretrained(res):
    r = res["tied"]["llama"]
    assert "{'lm_head.weight', 'model.embed_tokens.weight'}" in r["zero_to_fp32_safe"]["error"] or \
        "{'model.embed_tokens.weight', 'lm_head.weight'}" in r["zero_to_fp32_safe"]["error"]
    assert r["save_pretrained_files"] == ["model.safetensors"]
    assert r["save_pretrained_has_lm_head_key"] is False
    assert r["reload_tied"] is True and r["reload_equal"] is True


def test_zero2_flat_buffer_views_are_accepted_by_safetensors(res):
    fv = res["tied"]["zero2_flat_views"]
    assert fv == {"tensors": 6, "storages": 1, "save_file": "ok"}  # disjoint views: not refused


def test_shared_tensor_message_is_triaged(res):
    first = res["tied"]["2"]["safe_True"]["error"].splitlines()[1]
    assert _triage(first) == "safetensors-shared-tensors-refused"


# (c) zero.Init written by hand around a Transformers model -----------------------------------------
def test_bare_zero_init_around_from_pretrained_fails_in_init_weights(res):
    z = res["zero_init"]
    assert z["switch_before"] is False
    r = z["bare_from_pretrained"]
    assert r["error"] == "IndexError: index 0 is out of bounds for dimension 0 with size 0"
    assert "transformers/modeling_utils.py::_init_weights" in r["frames"]
    c = z["bare_constructor"]
    assert c["error"] == r["error"] and c["line"] == "init.zeros_(module.weight[module.padding_idx])"


def test_hfdeepspeedconfig_lets_from_pretrained_partition_and_load(res):
    z = res["zero_init"]
    assert z["switch_with_hfdsconfig"] is True
    want = {"shape_outside_gather": [0], "partitioned": True, "equal_to_file": True}
    assert z["hfdsconfig_from_pretrained"] == want
    assert z["hfdsconfig_plus_bare_init"] == want     # a manual wrap around from_pretrained is then harmless


def test_constructor_is_never_partitioned_correctly(res):
    z = res["zero_init"]
    assert z["hfdsconfig_plus_bare_constructor"]["error"] == \
        "IndexError: index 0 is out of bounds for dimension 0 with size 0"
    alone = z["hfdsconfig_constructor_alone"]
    assert alone["shape_outside_gather"] == [50, 8] and alone["partitioned"] is False


def test_zero_init_message_is_triaged(res):
    assert _triage("    " + res["zero_init"]["bare_constructor"]["line"]) == "transformers-zero3-init-weights-partitioned"
