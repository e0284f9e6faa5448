"""Runs behind the fix round after set 23 (torch 2.13.0 CPU, 2 gloo ranks unless said otherwise):

- object collectives rebuild a pickled tensor on the device it was pickled on; `device=` does not move it
  (process-groups.md, "Object collectives: where the tensors inside land");
- an isend that no rank receives never completes (process-groups.md, p2p pairing);
- DTensor torch.norm over the sharded dim and over an unsharded dim, and the to_local/from_local shortcut
  (dtensor.md);
- FSDP2 MixedPrecisionPolicy leaves buffers alone (fsdp1-to-fsdp2.md);
- FSDP2 gradients on gloo equal the single-process mean; FSDP2 asks the group for ReduceOp.AVG
  (gloo-collectives-matrix.md);
- the elastic agent's exit barrier: default, where it is (not) exposed, what happens on timeout
  (launch-torchrun.md);
- no distributed weighted sampler in torch.utils.data; the seeded-draw-then-stride pattern (data-loading.md).

The job is _fx23_w3_job.py (mp.spawn, FileStore, ends with os._exit).
"""
from __future__ import annotations

import dataclasses
import inspect
import logging
import sys
import types
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _rank_job import ok, run_rank_job  # noqa: E402

WORLD = 2


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_rank_job(HERE / "_fx23_w3_job.py", tmp_path_factory.mktemp("fx23_w3"), WORLD, timeout=240)


def test_object_collectives_rebuild_tensors_on_the_pickled_device(job):
    # rank 0 sent [meta tensor, cpu tensor]; rank 1 received with device=cpu: the meta one stays meta
    assert ok(job[1]["object_devices"]) == ["meta", "cpu"]
    assert [ok(r["broadcast_devices"]) for r in job] == ["meta", "meta"]


def test_tensor_to_object_unpickles_without_map_location():
    import torch.distributed.distributed_c10d as c10d
    src = inspect.getsource(c10d._tensor_to_object)
    assert "_unpickler(io.BytesIO(buf)).load()" in src and "map_location" not in src


def test_unmatched_isend_returns_but_never_completes(job):
    r = ok(job[0]["unmatched_isend"])
    assert r["isend_returned_after_s"] < 1.0
    assert "Timed out waiting 1000ms for send operation to complete" in r["wait"]


def test_dtensor_norm_over_the_sharded_dim_is_a_partial_norm(job):
    for r in job:
        n = ok(r["norm_shard0"])
        assert n["placements"] == ["_NormPartial(2)"] and n["shape"] == [4]
        assert n["equal_ref"] and n["grad_equal_ref"] and n["grad_placements"] == ["Shard(dim=0)"]
        # the shortcut labels two per-rank norms as consecutive shards: shape (8,), wrong values
        assert n["shortcut_shape"] == [8] and not n["shortcut_equal_ref"]


def test_dtensor_norm_over_an_unsharded_dim_stays_sharded(job):
    for r in job:
        n = ok(r["norm_shard1"])
        assert n["placements"] == ["Shard(dim=0)"] and n["equal_ref"] and n["grad_equal_ref"]
        assert n["shortcut_shape"] == [4] and n["shortcut_equal_ref"]   # right only for this layout


def test_masked_fill_runs_on_a_dtensor(job):
    for r in job:
        assert ok(r["masked_fill"]) == [[0.0, 1.0], [2.0, 3.0], [0.0, 0.0], [0.0, 0.0]]


def test_masked_fill_is_a_registered_pointwise_op():
    from torch.distributed.tensor._ops import _pointwise_ops
    assert torch.ops.aten.masked_fill_.Scalar in _pointwise_ops._extra_pointwise_ops


def test_fsdp2_mixed_precision_leaves_buffers_alone(job):
    from torch.distributed.fsdp import MixedPrecisionPolicy
    assert [f.name for f in dataclasses.fields(MixedPrecisionPolicy)] == [
        "param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs"]
    for r in job:
        b = ok(r["fsdp2_buffers"])
        assert b["seen"] == {"h": "torch.bfloat16", "scale": "torch.float32", "scale_type": "Tensor"}
        assert b["out"] == "torch.float32"                 # bf16 activation * fp32 buffer promotes
        assert b["buffer_after"] == "torch.float32"
        assert b["param_dtype_sharded"] == "torch.float32" and b["param_type"] == "DTensor"
        assert "expected m1 and m2 to have the same dtype" in b["as_weight"]["error"]["msg"]
        assert b["after_buffer_cast"] == {"out": "torch.bfloat16", "param": "torch.float32"}


def test_fsdp2_gloo_gradients_equal_the_single_process_mean(job):
    for r in job:
        assert ok(r["fsdp2_grads"]) == [1.0, 1.0]


def test_fsdp2_asks_the_group_for_avg():
    from torch.distributed import ReduceOp
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import _get_gradient_divide_factors
    pg = types.SimpleNamespace(size=lambda: 2)
    assert _get_gradient_divide_factors(pg, None, torch.float32) == (None, None, ReduceOp.AVG, ReduceOp.AVG)
    assert _get_gradient_divide_factors(pg, None, torch.bfloat16)[2] == ReduceOp.AVG
    # fp16 and force_sum: SUM on the wire, FSDP divides itself
    assert _get_gradient_divide_factors(pg, None, torch.float16)[2] == ReduceOp.SUM
    f = _get_gradient_divide_factors(pg, None, torch.float32, force_sum_reduction_for_comms=True)
    assert f == (None, 2.0, ReduceOp.SUM, ReduceOp.SUM)


def test_exit_barrier_timeout_is_an_agent_argument_torchrun_does_not_expose():
    from torch.distributed.elastic.agent.server.api import SimpleElasticAgent
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    from torch.distributed.launcher import api as launcher_api
    from torch.distributed.run import get_args_parser
    assert inspect.signature(SimpleElasticAgent.__init__).parameters["exit_barrier_timeout"].default == 300
    assert inspect.signature(LocalElasticAgent.__init__).parameters["exit_barrier_timeout"].default == 300
    assert not [f.name for f in dataclasses.fields(launcher_api.LaunchConfig) if "barrier" in f.name]
    assert "exit_barrier" not in inspect.getsource(launcher_api.launch_agent)
    opts = [o for a in get_args_parser()._actions for o in a.option_strings]
    assert not [o for o in opts if "barrier" in o]
    assert "--shutdown-timeout" in opts                 # a different setting: SIGTERM -> SIGKILL grace


@pytest.mark.reproduces("torch-elastic-exit-barrier-timeout")
def test_exit_barrier_timeout_is_logged_not_raised(caplog):
    import torch.distributed as dist
    from torch.distributed.elastic.agent.server.api import SimpleElasticAgent
    agent = types.SimpleNamespace(
        _store=dist.HashStore(), _exit_barrier_timeout=1, _in_exit_barrier=False,
        _worker_group=types.SimpleNamespace(group_world_size=2, state="SUCCEEDED"))
    with caplog.at_level(logging.INFO):
        SimpleElasticAgent._exit_barrier(agent)          # the other agent never arrives; returns
    assert "Error waiting on exit barrier. Elapsed:" in caplog.text
    assert agent._in_exit_barrier is False


def test_no_distributed_weighted_sampler_in_torch():
    import torch.utils.data as tud
    import torch.utils.data.distributed as tudd
    assert tudd.__all__ == ["DistributedSampler"]
    assert not [n for n in dir(tud) if "Weighted" in n and n != "WeightedRandomSampler"]
    # WeightedRandomSampler knows nothing of ranks: every rank gets num_samples indices
    s = tud.WeightedRandomSampler([1.0] * 10, num_samples=10)
    assert len(s) == 10 and "rank" not in inspect.signature(tud.WeightedRandomSampler).parameters


def _reference_sampler_class():
    """The DistributedWeightedSampler code block of data-loading.md, executed as written."""
    text = (HERE.parents[1] / "sub-skills/torch-distributed/references/data-loading.md").read_text()
    block = text.split("```python\nclass DistributedWeightedSampler", 1)[1].split("```", 1)[0]
    ns = {"torch": torch}
    exec("class DistributedWeightedSampler" + block, ns)  # noqa: S102 - our own reference text
    return ns["DistributedWeightedSampler"]


def test_plain_weighted_sampler_with_one_seed_draws_the_same_on_every_rank():
    import torch.utils.data as tud
    draws = [list(tud.WeightedRandomSampler([1.0] * 10, 10, generator=torch.Generator().manual_seed(0)))
             for _rank in range(2)]
    assert draws[0] == draws[1] and len(draws[0]) == 10      # duplicate work, full length on each rank


def test_weighted_draw_then_stride_partitions_one_global_draw():
    cls = _reference_sampler_class()
    w = [0.1] * 8 + [10.0] * 2
    samplers = [cls(w, 10, num_replicas=2, rank=r, seed=0) for r in range(2)]
    for s in samplers:
        s.set_epoch(3)
    parts = [list(s) for s in samplers]
    g = torch.Generator().manual_seed(3)
    whole = torch.multinomial(torch.as_tensor(w, dtype=torch.double), 10, True, generator=g).tolist()
    assert [len(p) for p in parts] == [5, 5] == [len(s) for s in samplers]
    assert parts[0] == whole[0::2] and parts[1] == whole[1::2]
    samplers[0].set_epoch(4)
    assert list(samplers[0]) != parts[0]                    # set_epoch changes the draw
    odd = [list(cls(w, 9, num_replicas=2, rank=r)) for r in range(2)]
    assert [len(p) for p in odd] == [5, 5]                  # padded to a multiple of the ranks
