"""FSDP1 HYBRID_SHARD with a one-rank shard group (one GPU per node) stops synchronising the replicas,
and FSDP1 NO_SHARD with offload_to_cpu=True: which calls raise and which warn (torch 2.13.0, gloo on CPU,
1 and 2 ranks, tests/torch_distributed/_fsdp1_hybrid_noshard_job.py).

Backs sub-skills/torch-distributed/references/fsdp1-to-fsdp2.md ("One GPU per node" under FSDP1 HYBRID_SHARD,
and "offload_to_cpu under NO_SHARD" under FSDP1 at world size 1).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rank_jobs_runner import run_rank_job  # noqa: E402

JOB = Path(__file__).with_name("_fsdp1_hybrid_noshard_job.py")
NOT_SUPPORTED = "NotImplementedError: offload_to_cpu=True and NO_SHARD is not supported yet"
FULL_RETURNED = "When using ``NO_SHARD`` for ``ShardingStrategy``, full_state_dict will be returned."


def _run(job, world, outdir):
    return run_rank_job(JOB, job, world, outdir)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("fsdp1_hybrid_noshard")


@pytest.fixture(scope="module")
def hybrid(out):
    return _run("hybrid", 2, out)


@pytest.fixture(scope="module")
def offload1(out):
    return _run("offload", 1, out)[0]


@pytest.fixture(scope="module")
def offload2(out):
    return _run("offload", 2, out)


HYBRID_ONE_RANK = ("fsdp1_hybrid_tuple", "fsdp1_hybrid_mesh_2x1", "fsdp1_hybrid_auto_groups")


def test_hybrid_one_rank_shard_group_clamps_to_no_shard_and_keeps_the_replicate_group(hybrid):
    for rank, r in enumerate(hybrid):
        for case in HYBRID_ONE_RANK:
            c = r[case]
            assert c["switch_warning"] and c["strategy"] == "NO_SHARD", case
            assert c["shard_group"] == [rank] and c["replicate_group"] == [0, 1], case


def test_hybrid_one_rank_shard_group_never_reduces_across_replicas(hybrid):
    for r in hybrid:
        for case in HYBRID_ONE_RANK:
            c = r[case]
            # each rank keeps its own gradient, divided by the replica count (the divide factors were computed
            # from shard x replicate size before the clamp), never summed with the other replica's
            assert c["grad_equals_own_local_over_world"] and not c["grad_equals_mean_over_ranks"], case
            assert not c["weights_equal_across_ranks_after_step"], case


def test_no_shard_over_all_ranks_and_fsdp2_2x1_mesh_do_average(hybrid):
    for r in hybrid:
        assert r["fsdp1_no_shard_world"]["shard_group"] == [0, 1]
        for case in ("fsdp1_no_shard_world", "fsdp2_mesh_2x1"):
            c = r[case]
            assert not c["switch_warning"], case
            assert c["grad_equals_mean_over_ranks"] and not c["grad_equals_own_local_over_world"], case
            assert c["weights_equal_across_ranks_after_step"], case


def _cases(results):
    for r in results:
        for key, c in r.items():
            assert c["strategy"] == "NO_SHARD", key
            yield key, c


def test_no_shard_state_dict_with_offload_warns_and_returns_full(offload1, offload2):
    for key, c in _cases([offload1, *offload2]):
        for call in ("state_dict_full_offload_rank0_only", "state_dict_full_offload", "state_dict_full_default",
                     "state_dict_sharded_offload"):
            assert c[call]["result"] == "ok" and c[call]["keys"] == 4, (key, call)
            assert c[call]["warnings"] == [FULL_RETURNED], (key, call)
        assert c["state_dict_sharded_offload"]["value_types"] == ["Tensor"]    # plain tensors, not sharded
        assert c["load_state_dict_full_offload"]["result"] == "ok", key


def test_no_shard_state_dict_ignores_rank0_only(offload2):
    # the hooks swap in FullStateDictConfig(): rank 1 gets the full dict although rank0_only=True was asked
    assert offload2[1]["orig=False/ctor_offload=False"]["state_dict_full_offload_rank0_only"]["keys"] == 4


def test_no_shard_summon_full_params_with_offload_raises(offload1, offload2):
    for key, c in _cases([offload1, *offload2]):
        assert c["summon_offload"]["result"] == NOT_SUPPORTED, key
        assert c["summon_offload_rank0_only"]["result"] == NOT_SUPPORTED, key
        assert c["summon_default"]["result"] == "ok", key


def test_no_shard_optim_and_get_model_state_dict_with_offload_run(offload1, offload2):
    for key, c in _cases([offload1, *offload2]):
        assert c["optim_state_dict_offload"]["result"] == "ok", key
        assert c["get_model_state_dict_cpu_offload"]["result"] == "ok", key
        assert c["full_optim_state_dict"]["result"] == "ok", key
    trained = "orig=False/ctor_offload=False"
    assert offload1[trained]["optim_state_dict_offload"]["param_entries"] == 4
    assert offload2[0][trained]["optim_state_dict_offload"]["param_entries"] == 4
    assert offload2[1][trained]["optim_state_dict_offload"]["param_entries"] == 0     # its rank0_only holds
    assert offload2[1][trained]["get_model_state_dict_cpu_offload"]["keys"] == 0      # cpu_offload: rank 0 keeps it
