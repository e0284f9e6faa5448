"""dtensor.md "Sharding rules for your own op": register_sharding with a Tensor keyword argument
(torch 2.13.0, 2 gloo ranks on CPU, _register_sharding_probe.py; set-17 miss s17-F2-09)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from _torchrun import result, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
ENV = {k: v for k, v in os.environ.items()
       if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")} | {"OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("register_sharding")
    return result(torchrun(HERE / "_register_sharding_probe.py", nproc=2, cwd=tmp, env=ENV))


def test_input_placements_must_cover_tensor_kwargs(out):
    miss = out["missing_kwarg"]
    assert miss["ok"] is False and miss["strategy_ran"] is True
    assert miss["error"] == "RuntimeError" and "Sharding propagation failed for" in miss["message"]
    assert miss["cause"] == "AssertionError"
    assert miss["cause_message"] == "input_specs(1) != strategies(2: 1 args + 1 kwargs)"


def test_a_placement_per_tensor_kwarg_shards_the_op(out):
    ok = out["with_kwarg"]
    assert ok["ok"] is True and ok["strategy_ran"] is True
    assert ok["placements"] == ["S(0)"] and ok["equal"] is True


def test_the_op_needs_a_meta_kernel_before_the_strategy_runs(out):
    no_meta = out["no_meta"]
    assert no_meta["ok"] is False and no_meta["strategy_ran"] is False
    assert no_meta["cause"] == "UnsupportedOperatorException"


def test_out_variant_min_dim_min_does_not_reach_a_registered_strategy(out):
    dm = out["dim_min"]
    assert dm["strategy_ran"] is False          # the call works, but not through the registered function
    assert dm["equal"] is True and dm["placements"] == ["S(0)"]
