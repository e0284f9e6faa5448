"""Why reentrant checkpointing + DDP find_unused_parameters=True raises "marked as ready twice"
(torch 2.13.0 CPU; ddp.md "Activation checkpointing", set-20 miss s20-K8-02).

With find_unused_parameters=True, DDP's forward hands the outputs to reducer.prepare_for_backward,
which walks the autograd graph from them and marks every parameter it does not reach as unused
(ready at once). The first test repeats that walk on the same graph; the job
(_ddp_ckpt_unused_job.py, one gloo rank, TORCH_DISTRIBUTED_DEBUG=INFO) shows the parameter DDP
then reports twice is the checkpointed one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

HERE = Path(__file__).resolve().parent


def reachable_params(out, named):
    """Parameters whose AccumulateGrad node the graph walk from `out` reaches (what the reducer's search sees)."""
    ids = {id(p): n for n, p in named}
    seen, stack, found = set(), [out.grad_fn], set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        var = getattr(fn, "variable", None)
        if var is not None and id(var) in ids:
            found.add(ids[id(var)])
        stack.extend(f for f, _ in fn.next_functions)
    return found


def model():
    torch.manual_seed(0)
    return nn.ModuleDict({"pre": nn.Linear(2, 2), "blk": nn.Linear(2, 2)})


@pytest.mark.parametrize("reentrant,expected", [
    (True, {"pre.weight", "pre.bias"}),
    (False, {"pre.weight", "pre.bias", "blk.weight", "blk.bias"}),
])
def test_forward_graph_hides_parameters_inside_a_reentrant_checkpoint(reentrant, expected):
    """Reentrant: the block ran under no_grad and sits behind one CheckpointFunctionBackward node whose
    edges lead only to its tensor inputs, so blk.* is invisible to the walk. Non-reentrant keeps the
    real graph (saved tensors are recomputed instead), so every parameter is reached."""
    m = model()
    out = checkpoint(m["blk"], m["pre"](torch.ones(1, 2)), use_reentrant=reentrant).sum()
    assert reachable_params(out, m.named_parameters()) == expected
    if reentrant:
        assert type(out.grad_fn.next_functions[0][0]).__name__ == "CheckpointFunctionBackward"


def test_reentrant_recomputation_fires_the_hidden_parameters_hooks_in_backward():
    """During backward the checkpoint recomputes the block with grad enabled and runs a nested
    backward: blk's AccumulateGrad hooks fire there, once, although the walk never saw blk."""
    m = model()
    fired = []
    for n, p in m.named_parameters():
        p.register_post_accumulate_grad_hook(lambda _p, n=n: fired.append(n))
    checkpoint(m["blk"], m["pre"](torch.ones(1, 2)), use_reentrant=True).sum().backward()
    assert sorted(fired) == ["blk.bias", "blk.weight", "pre.bias", "pre.weight"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp_ckpt_unused")
    env = dict(os.environ, TORCH_DISTRIBUTED_DEBUG="INFO")
    subprocess.run([sys.executable, str(HERE / "_ddp_ckpt_unused_job.py"), str(out)],
                   check=True, timeout=120, capture_output=True, env=env)
    return json.loads((out / "result.json").read_text())


def test_ddp_reports_the_checkpointed_parameter_as_marked_twice(job):
    """The parameter named is one inside the checkpoint (blk.*), never pre.* outside it: it was marked
    ready as unused at the end of forward, then its hook fired again in the recomputation's backward."""
    err = job["reentrant=True,find_unused=True"]["error"]
    assert "Expected to mark a variable ready only once" in err
    assert "with name blk." in err and "with name pre." not in err


@pytest.mark.parametrize("key", ["reentrant=True,find_unused=False", "reentrant=False,find_unused=True",
                                 "reentrant=False,find_unused=False"])
def test_either_change_alone_trains(job, key):
    assert job[key] == {"ok": True}
