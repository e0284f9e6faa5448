"""Behaviour claims of process-groups.md (group timeouts, barrier device choice) and
torchtitan-recipes.md (the torch APIs torchtitan's recipes call), shown by one run of
_groups_barrier_probe.py under torchrun with 2 gloo ranks on CPU (torch 2.13.0)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from _torchrun import torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def obs(tmp_path_factory):
    out = tmp_path_factory.mktemp("groups") / "obs.json"
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CPP_LOG_LEVEL"}
    env["OMP_NUM_THREADS"] = "1"
    proc = torchrun(HERE / "_groups_barrier_probe.py", out, nproc=2, cwd=out.parent, env=env, timeout=300)
    assert proc.returncode == 0 and out.exists(), (proc.stdout + proc.stderr)[-3000:]
    return dict(json.loads(out.read_text()), _output=proc.stdout + proc.stderr)


def test_only_the_default_group_gets_init_process_group_timeout(obs):
    t = obs["timeouts"]
    assert t["default"] == 77.0  # init_process_group(timeout=77 s)
    assert t["new_group_plain"] == 1800.0  # backend default (gloo 30 min), not 77 s
    assert t["new_group_given"] == 55.0
    # a mesh dimension spanning the world reuses the default group; a smaller one is a new group
    assert t["mesh_dim_whole_world_is_default"] and t["mesh_dim_whole_world"] == 77.0
    assert t["mesh_dim_sub"] == 1800.0
    assert t["mesh_dim_sub_override"] == 44.0  # backend_override options carry a timeout
    assert t["new_group_after_set_pg_timeout"] == 20.0


def test_barrier_on_cpu_group_uses_cpu_and_never_warns(obs):
    assert obs["barrier_gloo_cpu"] == [{"device": "cpu", "error": None, "warned": False, "warned_at": None}] * 2


def test_barrier_warns_on_rank0_even_after_an_earlier_collective(obs):
    r0, r1 = obs["barrier_forced_cuda_after_collective"]
    # no index: the tensor goes to the current device (what torch.cuda.set_device chose); rank 0 alone warns
    assert r0["device"] == r1["device"] == "cuda"
    assert r0["warned"] and not r1["warned"]
    assert r0["warned_at"] == "c10d_logger.py"
    # the forced CUDA tensor cannot be made on a CPU build: the branch ran up to the allocation
    assert r0["error"] == r1["error"] == "NotImplementedError"


def test_device_ids_or_bound_device_silence_the_warning(obs):
    for r in obs["barrier_forced_cuda_device_ids"]:
        assert r["device"] == "cuda:1" and not r["warned"]
    for r in obs["barrier_forced_cuda_bound_device"]:
        assert r["device"] == "cuda:2" and not r["warned"]


def test_default_warning_filter_reports_the_barrier_warning_once(obs):
    assert obs["barrier_forced_cuda_default_filter_three_calls"] == [1, 0]


def test_checkpoint_wrapper_prefix_is_in_parameters_not_in_state_dicts(obs):
    assert "0._checkpoint_wrapped_module.weight" in obs["ac_named_parameters"]
    want = ["0.bias", "0.weight", "1.bias", "1.weight"]
    assert obs["ac_state_dict_keys"] == want and obs["ac_get_model_state_dict_keys"] == want
    assert obs["ac_grad_is_sharded"] == "DTensor"


def test_hf_storage_writer_reader_round_trip(obs):
    assert obs["hf_files"] == ["model-00001-of-00001.safetensors", "model.safetensors.index.json"]
    assert obs["hf_safetensors_keys"] == ["model.b", "model.w"]
    assert obs["hf_roundtrip_equal"] and obs["hf_roundtrip_dtype"] == "torch.bfloat16"


def test_format_utils_cli_converts_and_skips_missing_source_with_exit_0(obs):
    assert obs["cli_dcp_to_torch_rc"] == 0 and obs["cli_dcp_to_torch_keys"] == ["w"]
    assert obs["cli_missing_src_rc"] == 0 and obs["cli_missing_src_wrote"] is False


def test_meta_build_then_shard_then_to_empty_and_init(obs):
    m = obs["meta_flow"]
    assert m["is_meta"] is False and m["device"] == "cpu"
    assert m["global_shape"] == [8, 6] and m["local_shape"] == [[4, 6], [4, 6]]


def test_colwise_then_rowwise_tp_matches_the_unsharded_mlp(obs):
    t = obs["tp"]
    assert t["placements"] == ["(Shard(dim=0),)", "(Shard(dim=1),)"]
    assert t["local_shapes"] == [[4, 4], [4, 4]]
    assert t["matches_unsharded"] == [True, True]
    assert t["output_type"] != "DTensor"  # use_local_output=True by default: a plain (async) tensor


def test_clip_grad_norm_on_fsdp2_returns_the_global_norm_as_a_replicated_dtensor(obs):
    c = obs["clip_one_mesh"]
    assert c["type"] == "DTensor" and c["placements"] == "(Replicate(),)"
    assert c["item_matches_unsharded"] == [True, True]


def test_clip_grad_norm_across_two_meshes_fails_and_the_per_mesh_workaround_matches(obs):
    assert obs["clip_two_meshes_error"] == "All operands in aten.stack.default must have the same mesh"
    assert obs["clip_two_meshes_workaround_matches"] == [True, True]


def test_dcp_load_is_driven_by_the_target_keys(obs):
    extra = obs["dcp_extra_ckpt_key"]  # a key only in the checkpoint is ignored; non-tensors load too
    assert extra == {"epoch": 3, "error": None, "w": [1.0] * 4}
    assert obs["dcp_missing_key_error"] and obs["dcp_error_type"] == "CheckpointException"
    part = obs["dcp_partial"]  # allow_partial_load: the missing key keeps the target's value
    assert part == {"error": None, "new_param": [7.0, 7.0], "w": [1.0] * 4}
    assert obs["dcp_shape_mismatch_error"]
    assert obs["dcp_shape_mismatch_text"].startswith(
        "Size mismatch between saved torch.Size([4]) and current: torch.Size([5]) for w")


def test_optimizer_state_loads_only_into_a_get_state_dict_target(obs):
    assert obs["optim_bare_state_restored"] is False  # no error, nothing restored
    assert obs["optim_get_state_dict_restored"] == {"exp_avg_equal": True, "step": 1.0}


def test_tied_weights_must_share_one_fsdp_group(obs):
    assert obs["tied_split_error"].startswith(
        "Parameter 'embed.weight' is shared with a parameter already managed by another FSDP group.")
    assert "fully_shard([module_a, module_b])" in obs["tied_split_error"]
    assert obs["tied_together"] == {"ran": [1, 3, 10], "still_tied": True}


def test_fsdp1_options_have_no_fully_shard_argument_and_their_replacements_exist(obs):
    params = set(obs["fully_shard_params"])
    assert params == {"module", "mesh", "reshard_after_forward", "shard_placement_fn", "mp_policy",
                      "offload_policy", "ignored_params", "dp_mesh_dims"}
    setters = set(obs["fsdp_module_setters"])
    assert {"set_requires_gradient_sync", "set_modules_to_forward_prefetch", "set_modules_to_backward_prefetch",
            "set_reshard_after_forward", "set_gradient_divide_factor", "unshard", "reshard"} <= setters


def test_uneven_all_gather_fails_on_gloo_and_the_padding_recipe_works(obs):
    assert obs["ag_uneven_error"].startswith("ProcessGroupGloo::allgather: invalid tensor size at index")
    assert obs["ag_padded"] == [[[0.0, 1.0], [0.0, 1.0, 2.0]]] * 2


def test_torch_cpp_log_level_set_after_import_has_no_effect(obs):
    assert obs["late_cpp_log_level_store_ok"] is True
    info_lines = [ln for ln in obs["_output"].splitlines() if re.match(r"\[I\d{4} .*\[c10d\]", ln)]
    assert info_lines == []


def test_torch_save_of_an_fsdp2_state_dict_on_rank0_holds_one_shard(obs):
    saved = obs["rank0_torch_save"]
    assert saved["weight"] == {"type": "DTensor", "shape": [6, 4], "local": [3, 4]}
    assert saved["bias"] == {"type": "DTensor", "shape": [6], "local": [3]}
    # the collective full state dict: full tensors on rank 0 only (cpu_offload=True)
    assert obs["full_sd_rank_shapes"] == [{"bias": [6], "weight": [6, 4]}, {}]


def test_dcp_keeps_one_copy_of_a_plain_tensor_and_per_rank_keys_keep_each(obs):
    assert obs["dcp_plain_per_rank_loaded"] == [[0.0, 0.0], [0.0, 0.0]]  # rank 1 got rank 0's values
    assert obs["dcp_plain_per_rank_sizes"][1] == 0  # rank 1's file holds nothing
    assert obs["dcp_per_rank_keys_loaded"] == [[0.0, 0.0], [1.0, 1.0]]
    assert obs["dcp_per_rank_dtensor_loaded"] == [[[0.0, 0.0]], [[1.0, 1.0]]]
