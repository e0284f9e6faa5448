"""sub-skills/torch-distributed/references/init-method-matrix.md is what the runs gave:
_init_method_matrix.py started each launcher x init_method case (and the taken-port and phase cases)
and committed the capture (tests/torch_distributed/data/init_method_capture.json). Here the page's
block must equal the rendering of that capture word for word, the capture must hold what the prose
states, and the two mechanisms the prose rests on run live in this process (no launcher, < 2 s):
the tcp:// handler with TORCHELASTIC_USE_AGENT_STORE=True only connects (rank 0 included) while
without it rank 0 binds and gets EADDRINUSE on a taken port; and Work.wait(timeout) raises after its
own timeout, not the group's."""
from __future__ import annotations

import datetime
import importlib
import json
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _init_method_matrix as gen  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "sub-skills" / "torch-distributed" / "references" / "init-method-matrix.md"
CAP = json.loads(gen.CAPTURE.read_text(encoding="utf-8"))


def stores(cid):
    return [r["stores"] for r in CAP[cid]["ranks"]]


def test_page_block_is_the_rendered_capture():
    assert set(CAP) == {c[0] for c in gen.CASES}
    assert gb.block(DOC.read_text(encoding="utf-8"), "init method matrix").strip() == gen.render(CAP).strip()


def test_capture_holds_the_stated_rules():
    ok = "all_reduce ok (1)"
    # under torchrun every rank, rank 0 included, is a client of the agent's store: env:// and tcp:// alike
    for cid in ("tr-static-none", "tr-static-env", "tr-static-tcp", "tr-c10d-none", "tr-c10d-tcp", "legacy-launch-tcp"):
        assert [r["USE_AGENT_STORE"] for r in CAP[cid]["ranks"]] == ["True", "True"], cid
        assert all(s and all(x.startswith("TCPStore client") for x in s) for s in stores(cid)), cid
        assert [r["result"] for r in CAP[cid]["ranks"]] == [ok, ok], cid
    # without the agent (plain python, mp.spawn) rank 0 hosts the server, the others connect
    for cid in ("py-none", "py-tcp", "spawn-env", "spawn-tcp"):
        s = stores(cid)
        assert s[0] == ["TCPStore server on MASTER_PORT"] and s[1] == ["TCPStore client on MASTER_PORT"], cid
    # file:// never opens a port, under any launcher
    for cid in ("tr-static-file", "py-file", "spawn-file"):
        assert stores(cid) == [["FileStore"], ["FileStore"]] and CAP[cid]["ranks"][0]["result"] == ok, cid
    # tcp:// to a port nobody serves under torchrun: clients only, timeout on every rank
    for r in CAP["tr-static-tcp-other"]["ranks"]:
        assert r["stores"] == ["TCPStore client on the tcp:// port"] and "timed out" in r["result"]
    # a taken port: torchrun's agent fails before any worker; without the agent rank 0 fails in init
    for cid in ("held-tr-static", "held-tr-c10d"):
        assert "EADDRINUSE" in json.dumps(CAP[cid]), cid
    for cid in ("held-py-none", "held-py-tcp", "held-spawn-tcp"):
        r0 = CAP[cid]["ranks"][0]
        assert "EADDRINUSE" in r0["result"] and "_create_c10d_store" in r0["in"], cid
    # the phase ladder: a peer missing before init waits in init_process_group, after it in the DDP constructor
    late_ddp = CAP["phase-late-ddp"]["ranks"][0]
    assert "_verify_param_shape_across_processes" in late_ddp["in"], late_ddp
    assert "rendezvous done" in CAP["phase-late-ddp"]["markers"]
    assert "DDP reducer built" not in CAP["phase-late-ddp"]["markers"][:3]
    assert "init_process_group" in CAP["phase-late-init"]["ranks"][0]["in"]


def _rz():
    return importlib.import_module("torch.distributed.rendezvous")


def test_tcp_handler_connects_to_agent_store_and_binds_without_it(monkeypatch):
    import torch.distributed as dist
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    url = f"tcp://127.0.0.1:{server.port}?rank=0&world_size=2"
    timeout = datetime.timedelta(seconds=5)
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    store, rank, world = next(_rz().rendezvous(url, timeout=timeout))
    store.set("from-rank0", "client")                 # rank 0 wrote into the server that already held the port
    assert (rank, world, server.get("from-rank0")) == (0, 2, b"client")
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE")
    with pytest.raises(dist.DistNetworkError, match="EADDRINUSE"):
        next(_rz().rendezvous(url, timeout=timeout))


def test_work_wait_timeout_raises_after_its_own_timeout():
    import torch
    import torch.distributed as dist
    store, pgs = dist.HashStore(), {}

    def make(r):
        pgs[r] = dist.ProcessGroupGloo(dist.PrefixStore("w", store), r, 2, datetime.timedelta(seconds=30))

    threads = [threading.Thread(target=make, args=(r,)) for r in (0, 1)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    work = pgs[0].allreduce([torch.ones(1)])            # rank 1 never joins
    t0 = time.time()
    with pytest.raises(RuntimeError, match="Operation timed out!"):
        work.wait(datetime.timedelta(seconds=1))
    assert 0.8 < time.time() - t0 < 10                  # its own 1 s, not the group's 30 s
    pgs[1].allreduce([torch.ones(1)]).wait()         # let rank 1 join so nothing waits 30 s at teardown
    work.wait()
