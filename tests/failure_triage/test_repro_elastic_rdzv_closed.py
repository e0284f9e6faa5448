"""Which torchrun agents close a c10d rendezvous, and what a node that restarts afterwards gets
(torch 2.13.0 CPU, real `torchrun` agents; launch-torchrun.md "Who closes the rendezvous").

The test process hosts the rendezvous TCPStore on a port from tests/_ports.py and every agent joins it
as a client (--rdzv-conf is_host=0), so the store outlives the agents and the rendezvous state can be
read afterwards. Four agents run at once on distinct run ids (about 10 s in all):
- run `two`: two agents, --nnodes=2. Node B's worker exits 1 at once (--max-restarts=0); node A's
  worker exits 1 only after B's agent has exited, and A has one restart left.
- run `ok`: one agent whose worker exits 0.
- run `sig`: one agent that receives SIGTERM while its worker sleeps.
Threads: pytorch/pytorch#67742, #67616, intelligent-machine-learning/dlrover#450.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.distributed as dist
from torch.distributed.elastic.rendezvous import RendezvousClosedError, RendezvousParameters
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

import _repro as R  # noqa: E402  (tests/failure_triage is on sys.path: conftest.py)

WORKER = Path(__file__).resolve().parent / "_rdzv_close_worker.py"


def agent(port, run_id, mode, marker, nnodes="1:2", restarts=0):
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", "--nproc-per-node=1",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}",
           "--rdzv-conf=is_host=0,last_call_timeout=1", f"--max-restarts={restarts}", "--monitor-interval=0.1",
           str(WORKER), mode, str(marker)]
    return subprocess.Popen(cmd, env=R.child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def finish(p, timeout=90):
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        raise AssertionError("agent still running:\n" + out[-3000:])
    return p.returncode, out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rdzv_closed")
    port = R.free_port()
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    a = agent(port, "two", "fail_after", tmp / "b_done", nnodes="2", restarts=1)
    b = agent(port, "two", "fail", tmp / "unused", nnodes="2")
    ok = agent(port, "ok", "ok", tmp / "unused")
    sig = agent(port, "sig", "sleep", tmp / "sig_started")
    deadline = time.monotonic() + 60
    while not (tmp / "sig_started").exists() and time.monotonic() < deadline and sig.poll() is None:
        time.sleep(0.05)
    sig.send_signal(signal.SIGTERM)
    out = {"b": finish(b)}
    (tmp / "b_done").write_text("B's agent has exited")
    out.update(a=finish(a), ok=finish(ok), sig=finish(sig))

    def handler(run_id):
        params = RendezvousParameters(backend="c10d", endpoint=f"127.0.0.1:{port}", run_id=run_id, min_nodes=1,
                                      max_nodes=2, local_addr="127.0.0.1")
        backend = C10dRendezvousBackend(dist.TCPStore("127.0.0.1", port, is_master=False), run_id)
        return create_handler(dist.PrefixStore(run_id, store), backend, params)

    out["handler"] = handler
    yield out


@pytest.mark.reproduces("torch-elastic-rendezvous-closed")
def test_a_node_that_restarts_after_another_agent_failed_gets_rendezvous_closed(runs):
    """B's agent spent its restarts and exited: that closed run `two`. A's worker failed afterwards; A,
    with a restart left, went back to the rendezvous and its agent died with RendezvousClosedError
    (raised from next_rendezvous in _restart_workers), not with its worker's failure."""
    rc_b, out_b = runs["b"]
    rc_a, out_a = runs["a"]
    assert rc_b == 1 and "ChildFailedError" in out_b
    assert rc_a == 1
    assert "_restart_workers" in out_a and "next_rendezvous" in out_a
    line = R.assert_reproduced(out_a, "torch-elastic-rendezvous-closed")
    assert line.endswith("RendezvousClosedError")           # the exception carries no message
    assert runs["handler"]("two").is_closed()


def test_a_closed_rendezvous_refuses_every_later_join(runs):
    h = runs["handler"]("two")
    with pytest.raises(RendezvousClosedError):
        h.next_rendezvous()


def test_an_agent_that_finishes_successfully_closes_its_rendezvous_too(runs):
    rc, _ = runs["ok"]
    assert rc == 0 and runs["handler"]("ok").is_closed()


def test_an_agent_stopped_by_sigterm_leaves_the_rendezvous_open(runs):
    """launch_agent skips rdzv_handler.shutdown() on SignalException, so a killed node can rejoin."""
    rc, out = runs["sig"]
    assert rc == 1 and "got signal: 15" in out
    assert not runs["handler"]("sig").is_closed()


def test_installed_launcher_shuts_the_rendezvous_down_except_on_a_signal():
    import inspect

    from torch.distributed.launcher import api
    src = inspect.getsource(api.launch_agent)
    assert "except SignalException:" in src and "shutdown_rdzv = False" in src
    assert "if shutdown_rdzv:\n            spec.rdzv_handler.shutdown()" in src
