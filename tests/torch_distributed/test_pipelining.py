"""torch.distributed.pipelining on 2 gloo ranks (torch 2.13.0 CPU): how stage shapes get fixed, what a later
step with another sequence length or batch does, and the schedules' n_microbatches checks.

The job is _pipelining_job.py (mp.spawn, FileStore, one short-timeout group per case). Cases that make a
rank abort (gloo's receive-size check is a C++ enforce that ends the process with SIGABRT) run in their own
job; the rest run in one job; two jobs run at a time.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
JOB = HERE / "_pipelining_job.py"

TOGETHER = ["same_shape", "shorter_seq", "uneven_split", "static_same", "static_no_grad_meta", "rebuild",
            "1f1b_1mb_init", "1f1b_2mb", "gpipe_1mb", "interleaved_1mb", "interleaved_3mb", "interleaved_5mb",
            "traced_same", "static_whole_batch"]
ABORTING = ["longer_seq", "bigger_batch", "static_other_seq", "traced_longer"]
SIZE_MSG = "Received data size doesn't match expected size"


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    todo = [("together", TOGETHER)] + [(c, [c]) for c in ABORTING]
    res, running, deadline = {}, [], time.monotonic() + 400
    while todo or running:
        assert time.monotonic() < deadline, f"pipelining jobs still running: {[r[0] for r in running]}"
        while todo and len(running) < 2:                # two jobs at a time: the group timeouts are short
            name, cases = todo.pop(0)
            out = tmp_path_factory.mktemp("pp_" + name)
            log = open(out / "log", "w")
            running.append((name, out, log, subprocess.Popen([sys.executable, str(JOB), str(out), *cases],
                                                             stdout=log, stderr=subprocess.STDOUT)))
        time.sleep(0.5)
        for item in [r for r in running if r[3].poll() is not None]:
            running.remove(item)
            name, out, log, proc = item
            log.close()
            ranks = [json.loads(p.read_text()) if (p := out / f"rank{r}.json").exists() else {} for r in (0, 1)]
            res[name] = {"rc": proc.returncode, "log": (out / "log").read_text(), "ranks": ranks}
    return res


def ok(jobs, case, rank, job="together"):
    r = jobs[job]["ranks"][rank][case]
    assert "ok" in r, r
    return r["ok"]


def err(jobs, case, rank, job="together"):
    r = jobs[job]["ranks"][rank][case]
    assert "error" in r, r
    return r["error"]


def test_dynamic_stage_runs_repeated_steps_of_one_shape(jobs):
    # no input_args: shapes inferred at the first step; inputs on stage 0, target/losses on the last stage
    assert ok(jobs, "same_shape", 0) == [{"shape": [4, 8], "out": None, "n_losses": 0}] * 2
    assert ok(jobs, "same_shape", 1) == [{"shape": [4, 8], "out": [4, 8, 4], "n_losses": 2}] * 2


@pytest.mark.parametrize("case", ["longer_seq", "bigger_batch"])
def test_bigger_activation_on_a_later_step_aborts_the_receiving_rank(jobs, case):
    j = jobs[case]
    assert j["rc"] != 0 and SIZE_MSG in j["log"] and "384 vs 256" in j["log"]
    assert "process 1 terminated with signal SIGABRT" in j["log"]      # the receiver (stage 1) died
    # 256 bytes = one [2, 8, 4] float32 microbatch: the buffer sized at step 1
    assert case not in j["ranks"][1]                                    # no Python exception to catch


def test_shorter_sequence_is_received_into_the_old_buffer(jobs):
    # 6 < 8: gloo accepts the smaller message, stage 1 computes on its [2, 8, H] buffer; the loss then fails
    e = err(jobs, "shorter_seq", 1)
    assert "must match the size of tensor b (6) at non-singleton dimension 1" in e["msg"]
    assert "Timed out" in err(jobs, "shorter_seq", 0)["msg"]            # the sender is left waiting


def test_batch_not_divisible_by_n_microbatches_gives_unequal_microbatches(jobs):
    # batch 5, 2 microbatches: chunks of 3 and 2; stage 1 inferred 3 from the first one
    assert "size of tensor a (3) must match the size of tensor b (2)" in err(jobs, "uneven_split", 1)["msg"]


def test_static_input_output_args_fix_one_microbatch_shape(jobs):
    assert ok(jobs, "static_same", 1) == [{"shape": [4, 8], "out": [4, 8, 4], "n_losses": 2}] * 2
    # input_args sized for a longer sequence than the step's: the receiver aborts as in the dynamic case
    j = jobs["static_other_seq"]
    assert j["rc"] != 0 and SIZE_MSG in j["log"] and "384 vs 256" in j["log"]
    # input_args for the whole batch (4) instead of one microbatch (2): stage 1 runs on a batch-4 buffer
    assert "size of tensor a (4) must match the size of tensor b (2)" in err(jobs, "static_whole_batch", 1)["msg"]


def test_static_args_without_requires_grad_send_no_gradient_back(jobs):
    e = err(jobs, "static_no_grad_meta", 0)
    assert "Failed to run stage backward" in e["msg"] and "Output gradient: ('None',)" in e["msg"]


def test_rebuilding_stage_and_schedule_takes_a_new_length(jobs):
    assert [s["out"] for s in ok(jobs, "rebuild", 1)] == [[4, 8, 4], [4, 12, 4]]


def test_traced_pipeline_fixes_shapes_from_mb_args(jobs):
    assert [s["out"] for s in ok(jobs, "traced_same", 1)] == [[4, 8, 4]] * 2
    j = jobs["traced_longer"]
    assert j["rc"] != 0 and SIZE_MSG in j["log"]


def test_1f1b_rejects_fewer_microbatches_than_stages_at_construction(jobs):
    for rank in (0, 1):
        e = err(jobs, "1f1b_1mb_init", rank)
        assert e == {"type": "ValueError", "msg": "Number of microbatches (1) must be greater than or equal to "
                                                   "the number of stages (2)."}
    assert ok(jobs, "1f1b_2mb", 1) == [{"shape": [2, 8], "out": [2, 8, 4], "n_losses": 2}]


def test_gpipe_runs_one_microbatch_on_two_stages(jobs):
    assert ok(jobs, "gpipe_1mb", 1) == [{"shape": [2, 8], "out": [2, 8, 4], "n_losses": 1}]


def test_interleaved_1f1b_needs_a_multiple_of_its_rounds(jobs):
    # 4 stages on 2 ranks: rounds = max(1, n // 2); 1 and 3 microbatches run, 5 (rounds 2) is refused
    assert ok(jobs, "interleaved_1mb", 1) == {"out": [1, 8, 4], "n_losses": 1}
    assert ok(jobs, "interleaved_3mb", 1) == {"out": [3, 8, 4], "n_losses": 3}
    for rank in (0, 1):
        assert err(jobs, "interleaved_5mb", rank)["msg"] == (
            "Interleaved 1F1B requires the number of microbatches to be a multiple of the number of rounds (2), "
            "but got 5.")
