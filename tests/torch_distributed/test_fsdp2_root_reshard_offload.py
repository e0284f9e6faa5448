"""FSDP2: the root keeps its own parameters gathered after forward; CPUOffloadPolicy and meta-device init
(torch 2.13.0, 2 gloo ranks, CPU). Runs _fsdp2_root_reshard_offload_job.py.

Backs sub-skills/torch-distributed/references/fsdp2-and-dcp.md "The root module keeps its parameters gathered
after forward" and "CPUOffloadPolicy: what lives where, and meta-device init", and catalog entry
torch-fsdp2-params-on-meta. Field threads (writers' side): pytorch/pytorch#154704 (an explicit
reshard_after_forward=True on the root is respected), pytorch/torchtitan#624 (offload with meta init:
to_empty on CPU, buffers to the GPU).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rank_job import run_rank_job  # noqa: E402

JOB = Path(__file__).with_name("_fsdp2_root_reshard_offload_job.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("fsdp2_root_reshard_offload")
    out = run_rank_job(JOB, d, 2)
    for r in out:
        assert "root_part_error" not in r and "offload_part_error" not in r, r
    return out


def test_torch_version(ranks):
    assert ranks[0]["torch"].startswith("2.13.0")


def test_default_root_keeps_its_own_parameters_unsharded_after_an_inference_forward(ranks):
    for r in ranks:
        assert r["before_none"] == {"embed": "sharded", "block0": "sharded"}
        assert r["after_none"] == {"embed": "unsharded", "block0": "sharded"}
        assert r["embed_shape_after_none"] == [8, 8]
        assert r["after_false"] == {"embed": "unsharded", "block0": "sharded"}


def test_explicit_true_on_the_root_reshards_after_forward(ranks):
    for r in ranks:
        assert r["after_true"] == {"embed": "sharded", "block0": "sharded"}
        assert r["embed_shape_after_true"] == [4, 8]


def test_reshard_or_the_setter_frees_the_root_and_backward_reshards_it(ranks):
    for r in ranks:
        assert r["after_none_then_reshard"] == {"embed": "sharded", "block0": "sharded"}
        assert r["after_none_set_true"] == {"embed": "sharded", "block0": "sharded"}
        assert r["after_backward_none"] == {"embed": "sharded", "block0": "sharded"}


def test_root_rule_is_the_auto_flag_in_lazy_init():
    import inspect
    from torch.distributed.fsdp._fully_shard import _fsdp_state, _fully_shard
    assert "if self._auto_reshard_after_forward:" in inspect.getsource(_fsdp_state.FSDPState._lazy_init)
    assert "auto_reshard_after_forward = reshard_after_forward is None" in inspect.getsource(_fully_shard.fully_shard)


def test_meta_parameters_fail_at_the_first_forward_even_with_offload(ranks):
    for r in ranks:
        assert r["meta_no_materialize"].startswith(
            "RuntimeError: FSDP parameters should be materialized from meta device before training, "
            "but the following were still on meta device: ['embed.weight', 'embed.bias']")


def test_offload_keeps_params_grads_and_optimizer_state_on_cpu(ranks):
    for r in ranks:
        assert r["offload_param_is_dtensor"] and r["offload_param_local_device"] == "cpu"
        assert r["offload_grad_is_dtensor"] and r["offload_grad_local_device"] == "cpu"
        assert r["offload_exp_avg_is_dtensor"] and r["offload_exp_avg_local_device"] == "cpu"
        assert r["offload_clip_total_is_dtensor"]


def test_offload_check_and_meta_passthrough_are_in_the_source():
    import inspect
    from torch.distributed.fsdp._fully_shard import _fsdp_init, _fsdp_param, _fsdp_param_group
    g = _fsdp_param_group.FSDPParamGroup
    assert "FSDP parameters should be materialized on CPU when enabling CPU offloading. " in inspect.getsource(
        g._validate_cpu_offload_params)
    lazy = inspect.getsource(g.lazy_init)
    assert lazy.index("self._validate_no_meta_params()") < lazy.index("self._validate_cpu_offload_params()")
    assert "Keep meta-device tensors on meta device for deferred init" in inspect.getsource(
        _fsdp_init._move_states_to_device)
    assert "if self.offload_to_cpu and not padded_sharded_param.is_meta:" in inspect.getsource(
        _fsdp_param.FSDPParam._init_sharded_param)
