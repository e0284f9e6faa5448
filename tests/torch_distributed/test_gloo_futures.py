"""Work.get_future() on gloo, per op (torch 2.13.0 CPU, 2 ranks): which async Work objects have a
future, what the future's value is, and the two workarounds for those that do not.

The job is _gloo_futures_job.py (mp.spawn, FileStore). Set-19 miss s19-K1-01: the bundle had said the
reduce-scatters return a future on gloo and only point-to-point ops do not.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _autograd_ddp_ignore_jobs import run_job  # noqa: E402 - the shared 2-rank runner

NOT_IMPLEMENTED = {"type": "RuntimeError", "msg": "Work::getFuture not implemented."}
WITH_FUTURE = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "all_gather_single",
               "all_to_all_single", "all_to_all", "gather", "scatter", "barrier")
WITHOUT_FUTURE = ("reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "isend_irecv",
                  "batch_isend_irecv")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_job(HERE / "_gloo_futures_job.py", tmp_path_factory.mktemp("gloo_futures"))


def test_every_op_was_probed(job):
    for r in job:
        assert r["torch"].startswith("2.13.0")
        assert set(r["ops"]) == set(WITH_FUTURE) | set(WITHOUT_FUTURE)
        for name, row in r["ops"].items():
            assert "error" not in row, (name, row)         # every op itself ran (async_op=True works)
            assert row["work_type"] == "Work" and row["work_wait"] is True


@pytest.mark.parametrize("name", WITH_FUTURE)
def test_collectives_with_a_future_on_gloo(job, name):
    for r in job:
        fut = r["ops"][name]["future"]
        assert fut["type"] == "Future", fut


def test_future_values_are_lists_of_tensors(job):
    r0, r1 = job
    assert r0["ops"]["all_reduce"]["future"]["wait"] == [[3.0, 12.0]]     # [the reduced tensor]
    assert r0["ops"]["all_gather_into_tensor"]["future"]["wait"] == [[1.0], [2.0]]
    assert r0["ops"]["barrier"]["future"]["wait"] == []
    assert r1["ops"]["gather"]["future"]["wait"] == []                      # non-dst rank: empty list


@pytest.mark.reproduces("torch-gloo-work-getfuture-not-implemented")
@pytest.mark.parametrize("name", WITHOUT_FUTURE)
def test_reduce_scatters_and_p2p_raise_in_get_future_but_wait_completes(job, name):
    for r in job:
        row = r["ops"][name]
        assert row["future"] == {"error": NOT_IMPLEMENTED}
        assert row["work_wait"] is True
    if name.startswith("reduce_scatter"):                     # inputs [r+1, 10(r+1)] -> sums 3 and 30
        assert [r["ops"][name]["result"] for r in job] == [[3.0], [30.0]]


def test_workarounds_wait_then_completed_future_and_all_reduce_slice(job):
    for rank, r in enumerate(job):
        w = r["workarounds"]
        want = [3.0] if rank == 0 else [30.0]
        assert w["wrapped"] == {"how": "wait", "value": want, "then_x2": [2 * want[0]]}
        assert w["all_reduce_slice"] == want
