"""Which TCPStore backend (libuv or the classic one) each store-building path picks, torch 2.13.0 CPU.

Usage:
  python _store_libuv_job.py paths OUT.json   -> every in-process path below, under this process's env
  python _store_libuv_job.py worker OUTDIR    -> run as a torchrun/plain-python worker: init_process_group
                                                 (gloo, env:// or $INIT_METHOD), report its TCPStore

Each row is `store.libuvBackend` of the TCPStore the path built (True = libuv). The test runs the
"paths" mode with USE_LIBUV unset and with USE_LIBUV=0. Servers bind port 0 (a free port); a client
connects to a server this process started. World size 1, so nothing waits for peers.
"""
from __future__ import annotations

import datetime
import json
import os
import sys


def cap(fn):
    try:
        return {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - the error is the result
        return {"error": f"{type(e).__name__}: {str(e)[:300]}"}


def tcp_of(store):
    import torch.distributed as dist
    while isinstance(store, dist.PrefixStore):
        store = store.underlying_store
    return store


def paths():
    import torch.distributed as dist
    import importlib
    rdzv = importlib.import_module("torch.distributed.rendezvous")   # the module (the package re-exports a function of that name)
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend as c10d_backend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler
    from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import StaticTCPRendezvous
    from torch.distributed.elastic.utils.distributed import create_c10d_store

    t = datetime.timedelta(seconds=10)
    keep = []                                   # keep servers alive while clients connect

    def via_handler(url, extra_env=None):
        old = {k: os.environ.get(k) for k in (extra_env or {})}
        os.environ.update(extra_env or {})
        try:
            store, _, _ = next(rdzv.rendezvous(url, rank=0, world_size=1, timeout=t))
            keep.append(store)
            return tcp_of(store).libuvBackend
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    server = dist.TCPStore("127.0.0.1", 0, 1, True, t)        # classic API call, no use_libuv argument
    keep.append(server)
    port = server.port
    env_vars = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0", "RANK": "0", "WORLD_SIZE": "1"}
    agent = {"TORCHELASTIC_USE_AGENT_STORE": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
             "RANK": "0", "WORLD_SIZE": "1"}
    rows = {
        "TCPStore()": server.libuvBackend,
        "TCPStore(use_libuv=False)": cap(lambda: keep.append(dist.TCPStore("127.0.0.1", 0, 1, True, t,
                                                                            use_libuv=False)) or keep[-1].libuvBackend),
        "tcp://": cap(lambda: via_handler("tcp://127.0.0.1:0")),
        "tcp://?use_libuv=0": cap(lambda: via_handler("tcp://127.0.0.1:0?use_libuv=0")),
        "tcp://?use_libuv=1": cap(lambda: via_handler("tcp://127.0.0.1:0?use_libuv=1")),
        "env://": cap(lambda: via_handler("env://", env_vars)),
        "env://?use_libuv=0": cap(lambda: via_handler("env://?use_libuv=0", env_vars)),
        # the worker side under torchrun: every rank is a client of the agent's store
        "env:// agent-store client": cap(lambda: via_handler("env://", agent)),
        "env://?use_libuv=0 agent-store client": cap(lambda: via_handler("env://?use_libuv=0", agent)),
        # torchrun's agent: static backend (--master-addr/--master-port, the default without --rdzv-*)
        "static rendezvous": cap(lambda: static(StaticTCPRendezvous, keep)),
        # torchrun's agent: c10d backend (--rdzv-backend c10d / --standalone), with and without a conf key
        "c10d rendezvous": cap(lambda: c10d(c10d_backend, RendezvousParameters, keep, {})),
        "c10d rendezvous use_libuv=0 conf": cap(lambda: c10d(c10d_backend, RendezvousParameters, keep,
                                                             {"use_libuv": "0"})),
        # c10d's shared store for the workers (TCPStore sharing, the default)
        "c10d shared worker store": cap(lambda: keep.append(
            DynamicRendezvousHandler._create_tcp_store_server(None, "127.0.0.1", 0)) or keep[-1].libuvBackend),
        # the one elastic helper that reads USE_LIBUV (nothing in torch calls it)
        "elastic.utils create_c10d_store": cap(lambda: keep.append(
            create_c10d_store(True, "127.0.0.1", 0, 1, timeout=10)) or keep[-1].libuvBackend),
    }
    return rows


def static(cls, keep):
    r = cls("127.0.0.1", 0, 0, 1, "run", 10)
    keep.append(r)
    r.next_rendezvous()
    return r._store.libuvBackend


def c10d(mod, params_cls, keep, conf):
    params = params_cls(backend="c10d", endpoint="127.0.0.1:0", run_id="libuv", min_nodes=1, max_nodes=1,
                        is_host=True, **conf)
    backend, store = mod.create_backend(params)
    keep.append(store)
    return tcp_of(store).libuvBackend


def worker(outdir):
    import torch
    import torch.distributed as dist
    init = os.environ.get("INIT_METHOD", "env://")
    dist.init_process_group("gloo", init_method=init, timeout=datetime.timedelta(seconds=30))
    store = tcp_of(dist.distributed_c10d._get_default_store())
    t = torch.ones(1)
    dist.all_reduce(t)
    rank = dist.get_rank()
    res = {"libuvBackend": store.libuvBackend, "agent_store": os.environ.get("TORCHELASTIC_USE_AGENT_STORE"),
           "USE_LIBUV": os.environ.get("USE_LIBUV"), "all_reduce": t.item()}
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[1] == "paths":
        with open(sys.argv[2], "w") as f:
            json.dump(paths(), f, indent=1)
        os._exit(0)                 # servers of the elastic paths are not torn down one by one
    worker(sys.argv[2])
    os._exit(0)                     # result written, group destroyed: skip interpreter teardown
