"""Two static-rendezvous agents that both pass --node-rank 0, as on two hosts (torch 2.13.0 CPU).

On one host the second agent's store server cannot bind the port (EADDRINUSE, matrix rows 14-15). On two
hosts it binds on its own host, but its store *client* dials --master-addr, i.e. node A's store
(StaticTCPRendezvous.next_rendezvous: TCPStore(self.master_addr, ..., is_master)). This test stands up
node A as a real torchrun agent and node B as a real torchrun agent whose StaticTCPRendezvous store is
only that client (the part of B's store that takes part; its own server is never dialled by anyone).
Both agents then report group_rank 0, both write torchelastic/role_info/0, and each rank-0 agent's
multi_get of role_info/0..1 in _assign_worker_ranks waits for role_info/1 until the rendezvous timeout.
The same result with two real agents in two network namespaces: _dup_node_rank_netns.sh (provenance).
Reference: sub-skills/torch-distributed/references/multinode-rank-matrix.md#one-host-versus-two
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _ports import free_port  # noqa: E402

# node B: on its own host the is_master store binds locally and connects to master_addr; here only the
# connection to node A's store is kept (is_master=False), which is all of B's store that A ever sees
B_AGENT = r"""
import sys
import torch.distributed.elastic.rendezvous.static_tcp_rendezvous as s
_real = s.TCPStore
def _client_of_master(host, port, world_size, is_master, timeout, **kw):
    return _real(host, port, world_size, False, timeout, **kw)
s.TCPStore = _client_of_master
from torch.distributed.run import main
sys.argv = ["torchrun"] + sys.argv[1:]
main()
"""


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dup_rank")
    train = tmp / "train.py"
    train.write_text("print('WORKER STARTED', flush=True)\n")
    port = free_port()
    args = ["--nnodes", "2", "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(port),
            "--node-rank", "0", "--rdzv-conf", "timeout=4", str(train)]
    a = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args], cwd=tmp,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    b = subprocess.Popen([sys.executable, "-c", B_AGENT, *args], cwd=tmp,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out_b, _ = b.communicate(timeout=120)
    out_a, _ = a.communicate(timeout=120)
    return {"A": (a.returncode, out_a), "B": (b.returncode, out_b)}


def test_store_creation_succeeds_and_both_agents_wait_for_role_info_1(agents):
    for node, (rc, out) in agents.items():
        assert rc == 1, (node, out[-3000:])
        # no "1/2 clients joined": B's client counted on A's store, so the store came up
        assert "clients joined" not in out, node
        assert "EADDRINUSE" not in out, node
        assert "WORKER STARTED" not in out, node
        assert "in _assign_worker_ranks" in out, node
        assert ("torch.distributed.DistStoreError: wait timeout after 4000ms, keys: "
                "/none/torchelastic/role_info/0, /none/torchelastic/role_info/1") in out, (node, out[-2000:])


def test_the_socket_layer_warns_waitforinput_first(agents):
    for node, (_rc, out) in agents.items():
        assert "waitForInput: poll for socket" in out and "returned 0, likely a timeout" in out, node
