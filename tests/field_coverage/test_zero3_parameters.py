"""Every behaviour claim of sub-skills/distributed-training-backends/references/zero3-parameters.md
that has a CPU path, shown by one run of _zero3_probe.py under torchrun with 2 gloo ranks and
DS_ACCELERATOR=cpu (deepspeed 0.19.8, accelerate 1.15.0)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _torchrun import shared, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROBE = HERE / "_zero3_probe.py"
DOC = REPO / "sub-skills" / "distributed-training-backends" / "references" / "zero3-parameters.md"


def probe_run(tmp_path_factory):
    """This module's probe run (field_coverage/conftest.py may start it early, beside the others)."""
    out = tmp_path_factory.mktemp("zero3") / "obs.json"
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    proc = torchrun(PROBE, out, nproc=2, cwd=out.parent, env=env, timeout=900)
    assert proc.returncode == 0 and out.exists(), (proc.stdout + proc.stderr)[-4000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def obs(tmp_path_factory):
    return shared(probe_run, tmp_path_factory)


def test_partitioned_parameter_shape(obs):
    init = obs["init"]
    assert init["shape"] == [0] and init["numel"] == 0
    assert init["ds_shape"] == [3, 5] and init["ds_numel"] == 15
    assert init["status"] == "NOT_AVAILABLE"
    assert init["local_shard_numel"] == [8, 8]  # ceil(15 / 2) on each rank


def test_gather_restores_then_repartitions(obs):
    assert obs["gathered_shape"] == [[3, 5], [3, 5]]
    assert obs["after_exit_shape"] == [0]


def test_write_without_modifier_rank_is_dropped(obs):
    assert obs["write_modifier_none"] == [0.0, 0.0]


def test_write_with_modifier_rank_reaches_every_rank(obs):
    assert obs["write_modifier_0"] == [15.0, 15.0]  # rank 0 filled 15 elements with 1.0


def test_sanity_checks_catch_in_place_ops_but_not_writes_through_data(obs):
    assert obs["sanity_data_write_error"] is None
    assert "Detected in-place modification of ZeRO-3 parameters inside GatheredParameters" in obs["sanity_in_place_error"]


def test_initialize_partitions_a_plain_model(obs):
    assert obs["plain_before_initialize"] == [4, 5]
    assert obs["plain_after_initialize"] == [0]
    assert obs["forward_ok"] is True


def test_plain_state_dict_is_empty_for_partitioned_params(obs):
    for rank in obs["module_state_dict"]:
        assert rank and all(s == [0] for s in rank.values())


def test_small_params_persist_whole_after_first_forward(obs):
    # every parameter of the tiny model is below stage3_param_persistence_threshold (100000 elements)
    assert obs["persist_flags"] == [True]
    assert obs["module_state_dict_small_params"] == {"0.weight": [4, 5], "0.bias": [4], "1.weight": [1, 4], "1.bias": [1]}


def test_save_16bit_model_needs_the_gather_key(obs):
    assert obs["save_16bit_flag_off"] is False and obs["save_16bit_flag_off_file"] is False
    assert obs["save_16bit_flag_on"] is True
    assert obs["save_16bit_flag_on_file"] == {"0.weight": [4, 5], "0.bias": [4], "1.weight": [1, 4], "1.bias": [1]}


def test_consolidated_state_dict_is_full_on_rank0(obs):
    assert obs["consolidated_per_rank"][0] == {"0.weight": [4, 5], "0.bias": [4], "1.weight": [1, 4], "1.bias": [1]}
    assert not obs["consolidated_per_rank"][1]


def test_zero_to_fp32_rebuilds_full_fp32_weights(obs):
    got = obs["zero_to_fp32"]
    assert {k: v[0] for k, v in got.items()} == {"0.weight": [4, 5], "0.bias": [4], "1.weight": [1, 4], "1.bias": [1]}
    assert {v[1] for v in got.values()} == {"torch.float32"}


def test_accelerate_get_state_dict(obs):
    assert "Cannot get 16bit model weights because `stage3_gather_16bit_weights_on_model_save`" in obs["get_state_dict_error"]
    rank0, rank1 = obs["get_state_dict_flag_on"]
    assert rank0["0.weight"] == [4, 5] and not rank1  # full on rank 0 only


def test_save_model_on_every_rank_writes_once_without_error(obs):
    """s5-fd-11: save_model called on both ranks under ZeRO-3: no rank raises (rank 1's None
    state dict returns early in accelerate 1.15.0) and rank 0 wrote the one safetensors file."""
    assert obs["save_model_every_rank_errors"] == [None, None]
    assert obs["save_model_files"] == ["model.safetensors"]


def test_accelerate_rejects_two_models_in_one_prepare(obs):
    assert "You can't use same `Accelerator()` instance with multiple models when using DeepSpeed" in obs["two_models_error"]


def test_zero3_init_flag_and_the_transformers_requirement(obs):
    assert obs["accelerate_zero3_init_flag_default"] is True
    assert obs["accelerate_distributed_type"] == "DistributedType.DEEPSPEED"
    # the probe hides the installed transformers (tests/_transformers_stub.py); the installed case
    # runs in test_transformers_trainer_cpu.py::test_accelerate_deepspeed_weakref_with_transformers
    assert obs["transformers_hidden"] is True and not obs["transformers_available"]
    assert "requires Transformers to be installed" in obs["weakref_error"]
    assert obs["accelerator_error"].startswith("PackageNotFoundError")


def test_reference_states_what_the_run_shows():
    text = DOC.read_text()
    for phrase in ["ceil(`ds_numel` / world size)", "silently dropped", "modifier_rank=R",
                   "enable_sanity_checks: true", "returns `False`, writes nothing",
                   "You can't use same `Accelerator()` instance with", "PackageNotFoundError",
                   "get_fp32_state_dict_from_zero_checkpoint", "**all ranks must call it**"]:
        assert phrase in text, phrase


def test_accelerate_itself_never_enters_zero_init():
    """The reference says only Transformers' loaders open zero.Init: accelerate's own code has no call."""
    import accelerate
    root = Path(accelerate.__file__).parent
    calls = [f"{p.name}:{i}" for p in root.rglob("*.py") if "test_utils" not in p.parts
             for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
             if "zero.Init(" in line.split("#", 1)[0]]
    assert calls == []
    assert "GatheredParameters" in (root / "utils" / "operations.py").read_text()  # the scan reads real sources


def test_frozen_params_survive_a_non_reentrant_checkpoint_recompute(obs):
    f = obs["frozen_ckpt"]
    assert f["error"] is None, f
    # forward plus the recompute in backward, two blocks: four calls, each with the whole weight
    assert f["norm_shapes_seen"] == [[16]] * 4, f


def test_what_each_node_writes_in_save_checkpoint(obs):
    """deepspeed-multinode-runners.md, "What each node writes": two ranks with LOCAL_RANK=0 each (one
    process per node), each saving under its own directory (the same path on each node's own disk)."""
    s = obs["node_saves"]
    head = ["latest", "zero_to_fp32.py", "zero_to_torch.py"]
    z2 = ["global_step1/mp_rank_00_model_states.pt", "global_step1/zero_pp_rank_0_mp_rank_00_optim_states.pt"]
    assert s["stage2_node_local_false"] == [z2 + head, ["global_step1/zero_pp_rank_1_mp_rank_00_optim_states.pt"]]
    assert s["stage2_node_local_true"] == [z2 + head, ["global_step1/mp_rank_00_model_states.pt",
                                                       "global_step1/zero_pp_rank_1_mp_rank_00_optim_states.pt"]]
    z3 = [[f"global_step1/zero_pp_rank_{r}_mp_rank_00_model_states.pt",
           f"global_step1/zero_pp_rank_{r}_mp_rank_00_optim_states.pt"] for r in (0, 1)]
    assert s["stage3_node_local_false"] == s["stage3_node_local_true"] == [z3[0] + head, z3[1]]


def test_save_state_hooks_under_deepspeed_get_no_weights(obs):
    """The diffusers save_model_hook pattern: under DeepSpeed the engine has written its checkpoint before
    the save hook runs, so `weights` is empty (weights.pop() raises IndexError) and the load hook's
    `models` is empty (the engines were loaded already); no model.safetensors is written."""
    assert obs["accelerate_models_before_hooks"] == 0  # the refused two-model prepare registered nothing
    assert obs["ds_state_hooks"] == [{"save": [1, 0], "load": [0]}] * 2
    assert "pytorch_model" in obs["ds_state_files"] and "model.safetensors" not in obs["ds_state_files"]


def test_frozen_model_engine_without_optimizer_per_stage(obs):
    """A reference/reward model through deepspeed.initialize with no optimizer: stages 0 and 3 build an
    engine (stage 3 partitions it, DeepSpeedZeRoOffload), stages 1 and 2 refuse."""
    eng = obs["no_optimizer_engine"]
    assert eng["0"] == {"optimizer": "NoneType", "weight_shape": [4, 5]}
    assert eng["1"] == {"error": "zero stage 1 requires an optimizer"}
    assert eng["2"] == {"error": "zero stage 2 requires an optimizer"}
    assert eng["3"] == {"optimizer": "DeepSpeedZeRoOffload", "weight_shape": [0]}


def test_generation_gather_needs_the_hooks_removed(obs):
    """GatheredParameters over the whole model does not survive a forward: the engine's module hooks release
    the parameters again; deepspeed.runtime.zero.unwrap_model_for_generation gathers once and removes the
    hooks, so repeated forwards keep them whole, and training resumes partitioned after it."""
    assert obs["gather_all_then_forward"] == {"gathered": ["AVAILABLE"], "after_forward": ["NOT_AVAILABLE"]}
    un = obs["unwrap_for_generation"]
    assert un["after_3_forwards"] == ["AVAILABLE"]
    assert un["after_exit_shapes"] == un["train_step_after"] == [[0], [0], [0], [0]]
    assert obs["gather_state_dict_noop"] == [[0], [0], [0], [0]]  # a dict gives keys: silent no-op


def test_deepcopy_of_a_partitioned_model_is_empty(obs):
    """copy.deepcopy of a ZeRO-3 partitioned module: plain empty tensors that are no ZeRO parameters any more."""
    assert obs["deepcopy_partitioned"] == {"shapes": [[0], [0], [0], [0]], "zero_params": [False] * 4}
