"""gloo-collectives-matrix.md, "Sizes that disagree across ranks": c10d does not compare
all_to_all_single split sizes across ranks. Two real gloo processes (torch 2.13.0, CPU): when the
receiver expects MORE than the sender sends the call returns on both ranks with the missing element
never written; when it expects LESS, the receiver aborts (gloo::EnforceNotMet, SIGABRT) with
"Received data size doesn't match expected size" and the sender either returned first or raises
"Connection reset by peer";
TORCH_DISTRIBUTED_DEBUG=DETAIL does not catch the silent case. Set-22 development miss s22-K1-04."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
WORKER = HERE / "_a2a_mismatch_worker.py"
DOC = HERE.parents[1] / "sub-skills" / "torch-distributed" / "references" / "gloo-collectives-matrix.md"


def run_pair(tmp_path, mode, **env):
    store = tmp_path / f"store-{mode}-{len(env)}"
    e = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **env}
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(r), str(store), mode], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=e) for r in (0, 1)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=90)
            line = next((ln for ln in out.splitlines() if ln.startswith("{")), None)
            outs.append((p.returncode, json.loads(line) if line else None, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


def test_sizes_that_agree_deliver_every_element(tmp_path):
    (rc0, r0, _), (rc1, r1, _) = run_pair(tmp_path, "agree")
    assert (rc0, rc1) == (0, 0)
    assert r0 == {"returned": [1.0, 101.0]} and r1 == {"returned": [2.0, 102.0]}


@pytest.mark.parametrize("detail", [False, True])
def test_receiver_expecting_more_returns_silently_with_an_unwritten_slot(tmp_path, detail):
    env = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"} if detail else {}
    (rc0, r0, _), (rc1, r1, _) = run_pair(tmp_path, "expects_more", **env)
    assert (rc0, rc1) == (0, 0)
    assert r0 == {"returned": [1.0, 101.0]}
    assert r1 == {"returned": [2.0, -7.0, 102.0]}   # the second slot from rank 0 was never written


def test_receiver_expecting_less_aborts_and_the_sender_sees_the_reset(tmp_path):
    (rc0, r0, err0), (rc1, r1, err1) = run_pair(tmp_path, "expects_less")
    assert rc1 == -signal.SIGABRT and r1 is None
    assert "Received data size doesn't match expected size" in err1 and "EnforceNotMet" in err1
    # the sender races the abort: it returned (its bytes were already out) or raised on the dropped link
    assert rc0 == 0 and (r0 == {"returned": [1.0, 101.0]} or (r0["raised"] == "RuntimeError" and "by peer" in r0["msg"]))


def test_reference_states_both_directions():
    text = DOC.read_text(encoding="utf-8")
    for phrase in ("## Sizes that disagree across ranks", "returns on both ranks", "SIGABRT",
                   "`TORCH_DISTRIBUTED_DEBUG=DETAIL`", "exchange the counts first"):
        assert phrase in text, phrase
