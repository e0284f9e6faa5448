"""Tensor-parallel styles on 2 gloo ranks (torch 2.13.0 CPU): what ColwiseParallel, RowwiseParallel
and SequenceParallel do with a plain tensor vs a DTensor input, what they return, and the standard
sequence-parallel plan end to end.

The job is _tp_layouts_job.py (mp.spawn, FileStore, init_device_mesh("cpu", (2,))). x is one seeded
[B, T, C] = [2, 4, 8] tensor on both ranks; every case is compared with the unsharded modules on x.
`local_is` names which piece of the unsharded result this rank holds; "mixed_rows" means vocab slice
s came from rank s's own sequence rows (wrong values, no error). Collective counts are CommDebugMode's.
"""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _autograd_ddp_ignore_jobs import run_job  # noqa: E402 - shared 2-rank job runner


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_job(HERE / "_tp_layouts_job.py", tmp_path_factory.mktemp("tp_layouts"))


def ok(r, key):
    assert "ok" in r[key], r[key]
    return r[key]["ok"]


def test_sequence_parallel_takes_a_plain_input_as_this_ranks_sequence_shard(job):
    for r in job:
        sp = ok(r, "sequence_parallel_inputs")
        # the full [2, 4, 8] on every rank becomes a [2, 8, 8] global DTensor: T doubled, data duplicated
        assert sp["plain_full"] == {"type": "DTensor", "shape": [2, 8, 8], "local": [2, 4, 8], "placements": ["S(1)"]}
        # each rank's slice: the right global shape and values, no communication
        s = sp["plain_slice"]
        assert (s["shape"], s["local"], s["comms"], s["matches_reference"]) == ([2, 4, 8], [2, 2, 8], {}, True)
        # a Replicate DTensor is redistributed to Shard(1): a local slice, no collective
        d = sp["dtensor_replicate"]
        assert (d["placements"], d["local"], d["comms"], d["matches_reference"]) == (["S(1)"], [2, 2, 8], {}, True)


def test_sequence_parallel_returns_a_dtensor_by_default(job):
    for r in job:
        assert ok(r, "lm_head")["norm_default_output"] == {
            "type": "DTensor", "shape": [2, 4, 8], "local": [2, 2, 8], "placements": ["S(1)"]}


def test_colwise_defaults_return_the_local_output_feature_shard(job):
    for r in job:
        c = ok(r, "colwise_inputs")
        assert c["default_repr"] == ("ColwiseParallel(input_layouts=(Replicate(),), "
                                     "output_layouts=(Shard(dim=-1),), use_local_output=True)")
        d = c["default_plain_full"]["ok"]
        assert (d["type"], d["shape"], d["comms"], d["local_is"]) == ("Tensor", [2, 4, 3], {}, "vocab_shard")


def test_colwise_plain_input_is_read_with_the_declared_layout(job):
    for r in job:
        c = ok(r, "colwise_inputs")
        # a sequence slice declared Replicate(): no input gather, wrong shape AND mixed values, no error
        w = c["replicate_plain_slice"]["ok"]
        assert (w["shape"], w["matches_reference"], w["local_is"]) == ([2, 2, 6], False, "mixed_rows")
        assert w["comms"] == {"all_gather_into_tensor": 1}          # only the output gather
        # the same slice declared Shard(1): all-gather to Replicate, then the matmul; correct
        g = c["shard1_plain_slice"]["ok"]
        assert (g["shape"], g["matches_reference"], g["comms"]) == ([2, 4, 6], True, {"all_gather_into_tensor": 2})


def test_colwise_dtensor_input_is_not_relabelled_by_input_layouts(job):
    """A DTensor keeps its own placements; the declared input_layouts only decides whether the hook
    itself redistributes. Shard(1) declared as Replicate() still computes the right result with the
    same number of all-gathers (DTensor's op dispatch gathers instead)."""
    for r in job:
        c = ok(r, "colwise_inputs")
        a, b = c["replicate_dtensor_shard1"]["ok"], c["shard1_dtensor_shard1"]["ok"]
        assert a["matches_reference"] and b["matches_reference"] and a["comms"] == b["comms"]
        lm = ok(r, "lm_head")
        right = lm["shard1_replicate_out"]
        assert right["linear_input"]["placements"] == ["R"]         # the hook gathered the sequence
        decl = lm["replicate_decl_dtensor_in"]
        assert decl["linear_input"]["placements"] == ["S(1)"]       # the hook left it sequence-sharded
        assert decl["result"]["ok"]["matches_reference"] and decl["result"]["ok"]["comms"] == right["result"]["ok"]["comms"]
        lp, lpd = lm["shard1_loss_parallel"]["result"]["ok"], lm["replicate_decl_loss_parallel"]["result"]["ok"]
        for x in (lp, lpd):
            assert (x["type"], x["placements"], x["local"], x["local_is"]) == ("DTensor", ["S(2)"], [2, 4, 3], "vocab_shard")
            assert x["comms"] == {"all_gather_into_tensor": 1} and x["matches_reference"]


def test_lm_head_breaks_only_when_a_plain_local_shard_is_declared_replicate(job):
    for r in job:
        lm = ok(r, "lm_head")
        good = lm["shard1_sp_local_output"]["result"]["ok"]         # norm use_local_output=True, head Shard(1)
        assert good["matches_reference"] and good["shape"] == [2, 4, 6]
        bad = lm["replicate_decl_sp_local_output"]                  # norm use_local_output=True, head Replicate()
        assert bad["linear_input"] == {"type": "DTensor", "shape": [2, 2, 8], "local": [2, 2, 8], "placements": ["R"]}
        b = bad["result"]["ok"]
        assert (b["shape"], b["matches_reference"], b["local_is"]) == ([2, 2, 6], False, "mixed_rows")


def test_rowwise_full_plain_input_fails_in_sharding_propagation(job):
    for r in job:
        rw = ok(r, "rowwise_plain_full")
        assert rw["default_repr"] == ("RowwiseParallel(input_layouts=(Shard(dim=-1),), "
                                      "output_layouts=(Replicate(),), use_local_output=True)")
        e = rw["plain_full"]["error"]
        assert e["type"] == "RuntimeError"
        assert e["msg"].startswith("a and b must have same reduction dim, but got [8, 16] X [8, 6].")
        assert "Sharding propagation failed for aten.addmm.default" in e["msg"]
        f = rw["plain_feature_slice"]["ok"]
        assert f["matches_reference"] and f["comms"] == {"all_reduce": 1}
        d = rw["replicate_plain_full"]["ok"]                         # declared Replicate(): sliced locally
        assert d["matches_reference"] and d["comms"] == {"all_reduce": 1}


def test_standard_sequence_parallel_plan_matches_the_unsharded_model(job):
    for r in job:
        p = ok(r, "sp_plan")
        assert p["matches_reference"] and p["out"] == {"type": "Tensor", "shape": [2, 4, 6]}
        assert p["comms"] == {"reduce_scatter_tensor": 2, "all_gather_into_tensor": 3}
        s = p["seen"]
        assert s["tok_embeddings/out"] == {"type": "Tensor", "shape": [2, 2, 8]}   # plain local sequence shard
        assert s["attention_norm/in"]["placements"] == ["S(1)"] and s["attention_norm/in"]["local"] == [2, 2, 8]
        assert s["attention_norm/out"]["type"] == "DTensor"
        assert s["w1/in"]["placements"] == ["R"] and s["w1/in"]["local"] == [2, 4, 8]
        assert s["w1/out"] == {"type": "Tensor", "shape": [2, 4, 6]}
        assert s["w2/in"]["placements"] == ["S(2)"]
        assert s["w2/out"] == {"type": "Tensor", "shape": [2, 2, 8]}
        assert s["output/in"]["placements"] == ["R"]


def test_installed_sources_behind_the_claims():
    from torch.distributed.tensor.parallel import style
    for cls in (style.ColwiseParallel, style.RowwiseParallel):
        src = inspect.getsource(cls._prepare_input_fn)
        assert "if not isinstance(input_tensor, DTensor):" in src and "DTensor.from_local(" in src
        assert "if input_layouts != desired_input_layouts:" in src   # compares the declared layout, not the DTensor's
    assert "self.desired_input_layouts = (Replicate(),)" in inspect.getsource(style.ColwiseParallel.__init__)
    rw = inspect.getsource(style.RowwiseParallel._apply)
    assert "self.desired_input_layouts: tuple[Placement, ...] = (Shard(-1),)" in rw   # nn.Linear
    assert "self.desired_input_layouts = (Replicate(),)" in rw                         # nn.Embedding
    assert "# rowwise shard embedding.weight is Shard(0)" in inspect.getsource(style.RowwiseParallel._partition_embedding_fn)
    sp = inspect.getsource(style.SequenceParallel._prepare_input_fn)
    assert "if input_tensor.placements != sequence_sharding:" in sp
    assert "# assume the input passed in already sharded on the sequence dim" in sp
    assert inspect.signature(style.SequenceParallel).parameters["use_local_output"].default is False
    pmi = inspect.getsource(style.PrepareModuleInput._prepare_input_arg)
    assert "dt_inp = input" in pmi and "if desired_layout is not None and input_layout != desired_layout:" in pmi
