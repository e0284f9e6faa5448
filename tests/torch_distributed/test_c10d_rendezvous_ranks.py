"""How torch 2.13.0's c10d rendezvous numbers the nodes and which address the workers get as
MASTER_ADDR (sub-skills/torch-distributed/references/torchrun-multinode-slurm.md, "Which node becomes rank 0").

Two real DynamicRendezvousHandler objects (the handler torchrun builds for --rdzv-backend c10d) meet
in one process through a TCPStore on 127.0.0.1, one thread each: the node whose address sorts
later ("localhost") joins first, the other ("127.0.0.1") half a second later. No worker process
is started, so the whole test takes about a second.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path

import pytest
import torch.distributed as dist
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler
from torch.distributed.launcher.api import _get_addr_and_port

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "sub-skills" / "torch-distributed" / "references" / "torchrun-multinode-slurm.md"


@pytest.fixture(scope="module")
def rendezvous():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    out, errors = {}, []

    def node(addr, delay):
        try:
            time.sleep(delay)
            params = RendezvousParameters(backend="c10d", endpoint=f"127.0.0.1:{store.port}", run_id="job",
                                          min_nodes=2, max_nodes=2, local_addr=addr, join_timeout="60")
            backend = C10dRendezvousBackend(dist.TCPStore("127.0.0.1", store.port, is_master=False), "job")
            info = create_handler(dist.PrefixStore("rdzv", store), backend, params).next_rendezvous()
            out[addr] = (info.rank, info.bootstrap_store_info.master_addr, info.bootstrap_store_info.master_port)
        except Exception as e:  # reported by the assertion below, never swallowed
            errors.append(f"{addr}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=node, args=("localhost", 0.0), daemon=True),
               threading.Thread(target=node, args=("127.0.0.1", 0.5), daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and len(out) == 2, (errors, out)
    return out, store.port


def test_node_ranks_follow_sorted_addresses_not_join_order(rendezvous):
    out, _ = rendezvous
    assert out["127.0.0.1"][0] == 0 and out["localhost"][0] == 1   # "localhost" joined first


def test_master_addr_is_the_rank0_nodes_own_address_and_a_new_port(rendezvous):
    out, rdzv_port = rendezvous
    addr, port = out["127.0.0.1"][1:], out["localhost"][1:]
    assert addr == port                                            # every node gets the same pair
    assert addr[0] == "127.0.0.1"                                  # rank 0's --local-addr
    assert addr[1] != rdzv_port                                    # not the --rdzv-endpoint port


def test_master_addr_flag_reaches_the_agent_only_for_static():
    def params(backend):
        return RendezvousParameters(backend=backend, endpoint="10.9.9.9:29500", run_id="x", min_nodes=1, max_nodes=1)
    assert _get_addr_and_port(params("static")) == ("10.9.9.9", 29500)
    assert _get_addr_and_port(params("c10d")) == (None, None)


def test_master_addr_warning_only_without_an_endpoint(monkeypatch, caplog):
    import torch.distributed.run as trun
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for k in ("PET_MASTER_ADDR", "PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND", "PET_NODE_RANK"):
        monkeypatch.delenv(k, raising=False)

    def warnings_for(argv):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            trun.config_from_args(trun.parse_args(argv + ["t.py"]))
        return caplog.text
    with_endpoint = warnings_for(["--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1", "--master-addr", "10.9.9.9",
                                  "--node-rank", "1"])
    assert "master_addr is only used" not in with_endpoint and "node_rank is only used" in with_endpoint
    assert "master_addr is only used for static rdzv_backend" in warnings_for(["--rdzv-backend", "c10d"])


def test_reference_states_what_the_runs_show():
    text = DOC.read_text(encoding="utf-8")
    for phrase in ["sorted by their node descriptor", "`socket.getfqdn()`", "**kept across restarts**",
                   "dropped silently", "`TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`"]:
        assert phrase in text, phrase


def test_which_node_hosts_the_rendezvous_store():
    """The c10d backend hosts the store on the node whose own name or address matches the endpoint
    host; `--rdzv-conf is_host=...` overrides that guess. With nobody hosting, clients give up
    after read_timeout with RendezvousConnectionError."""
    import socket

    from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import _create_tcp_store
    from torch.distributed.elastic.rendezvous.utils import _matches_machine_hostname

    assert _matches_machine_hostname(socket.gethostname()) and _matches_machine_hostname("127.0.0.1")
    assert not _matches_machine_hostname("192.0.2.1")          # TEST-NET-1: never this machine's address
    port = _ports.free_port()

    def params(is_host):
        return RendezvousParameters(backend="c10d", endpoint=f"127.0.0.1:{port}", run_id="h", min_nodes=1,
                                    max_nodes=1, is_host=is_host, read_timeout="1")
    t0 = time.monotonic()
    with pytest.raises(RendezvousConnectionError, match="The connection to the C10d store has failed"):
        _create_tcp_store(params("false"))                      # a loopback endpoint, but told not to host
    assert time.monotonic() - t0 < 30
    store = _create_tcp_store(params("true"))
    store.set("k", "v")
    assert store.get("k") == b"v"


def _assign(counts, identical, monkeypatch):
    """Each node's agent (one thread each, own store client) runs torchrun's rank assignment with its
    own --nproc-per-node; returns {node: [(local_rank, global_rank, world_size), ...]}."""
    from datetime import timedelta

    from torch.distributed.elastic.agent.server.api import SimpleElasticAgent, WorkerSpec
    monkeypatch.setenv("TORCH_ELASTIC_WORKER_IDENTICAL", "1" if identical else "0")
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=20))
    out, errors = {}, []

    def agent(node, n):
        try:
            client = dist.TCPStore("127.0.0.1", store.port, is_master=False, timeout=timedelta(seconds=20))
            spec = WorkerSpec(role="default", local_world_size=n, rdzv_handler=None, entrypoint="train.py")
            workers = SimpleElasticAgent._assign_worker_ranks(None, client, node, len(counts), spec)
            out[node] = [(w.local_rank, w.global_rank, w.world_size) for w in workers]
        except Exception as e:  # reported by the assertion below
            errors.append(f"{node}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=agent, args=(i, n), daemon=True) for i, n in enumerate(counts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(out) == len(counts), (errors, out)
    return out


def test_unequal_nodes_get_rank_blocks_and_summed_world_size(monkeypatch):
    out = _assign([2, 1], identical=False, monkeypatch=monkeypatch)
    assert out == {0: [(0, 0, 3), (1, 1, 3)], 1: [(0, 2, 3)]}
    fast = _assign([2, 1], identical=True, monkeypatch=monkeypatch)
    assert fast == {0: [(0, 0, 4), (1, 1, 4)], 1: [(0, 1, 2)]}   # each node assumes all nodes are like it
    text = " ".join(DOC.read_text().split())
    assert "ranks 0-1 and 2, `WORLD_SIZE` 3 on all three" in text
    assert "the 2-worker node says `WORLD_SIZE` 4 and the 1-worker node `WORLD_SIZE` 2, rank 1" in text
