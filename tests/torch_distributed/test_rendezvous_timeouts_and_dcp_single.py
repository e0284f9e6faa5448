"""Rendezvous waiting times and single-process DCP in torch 2.13.0, run in one process.

launch-torchrun.md "How long a node waits for the others": which setting bounds the wait for a
missing node under each rendezvous backend (c10d: join_timeout, last_call_timeout; static: the
LaunchConfig's rdzv "timeout"). fsdp2-and-dcp.md "DCP without a process group": dcp.save/load in
a process that never called init_process_group. No worker process is started (about 2 s in all).
"""
from __future__ import annotations

import time
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.elastic.rendezvous import RendezvousParameters, RendezvousTimeoutError
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler
from torch.distributed.launcher.api import LaunchConfig


def _handler(store, run_id, **conf):
    params = RendezvousParameters(backend="c10d", endpoint=f"127.0.0.1:{store.port}", run_id=run_id,
                                  min_nodes=conf.pop("min_nodes"), max_nodes=conf.pop("max_nodes"),
                                  local_addr="127.0.0.1", **conf)
    backend = C10dRendezvousBackend(dist.TCPStore("127.0.0.1", store.port, is_master=False), run_id)
    return create_handler(dist.PrefixStore(run_id, store), backend, params)


@pytest.fixture(scope="module")
def store():
    return dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)


def test_c10d_defaults_join_600_last_call_30_and_timeout_key_ignored(store):
    # torchrun's LaunchConfig always adds rdzv "timeout" (900 s); the c10d handler reads only *_timeout keys.
    h = _handler(store, "defaults", min_nodes=1, max_nodes=2, timeout="900")
    t = h._settings.timeout
    assert (t.join.total_seconds(), t.last_call.total_seconds(), t.close.total_seconds()) == (600, 30, 30)
    h2 = _handler(store, "conf", min_nodes=1, max_nodes=2, join_timeout="1800", last_call_timeout="5")
    assert (h2._settings.timeout.join.total_seconds(), h2._settings.timeout.last_call.total_seconds()) == (1800, 5)


def test_c10d_missing_node_raises_rendezvous_timeout_after_join_timeout(store):
    h = _handler(store, "missing", min_nodes=2, max_nodes=2, join_timeout="1")
    start = time.monotonic()
    with pytest.raises(RendezvousTimeoutError):
        h.next_rendezvous()
    assert 0.9 <= time.monotonic() - start < 10


def test_c10d_elastic_range_waits_last_call_after_min_nodes(store):
    # min 1, max 2, one node: the round completes only after last_call_timeout, not at once.
    h = _handler(store, "lastcall", min_nodes=1, max_nodes=2, join_timeout="30", last_call_timeout="1")
    start = time.monotonic()
    info = h.next_rendezvous()
    took = time.monotonic() - start
    assert info.world_size == 1 and took >= 0.9, took


def test_launchconfig_gives_static_rendezvous_a_900s_timeout():
    cfg = LaunchConfig(min_nodes=2, max_nodes=2, nproc_per_node=1)
    assert cfg.rdzv_configs["timeout"] == 900
    cfg = LaunchConfig(min_nodes=2, max_nodes=2, nproc_per_node=1, rdzv_configs={"timeout": 60})
    assert cfg.rdzv_configs["timeout"] == 60


def test_dcp_save_and_load_without_a_process_group(tmp_path):
    assert not dist.is_initialized()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dcp.save({"w": torch.arange(6.0)}, checkpoint_id=str(tmp_path))
        target = {"w": torch.zeros(6)}
        dcp.load(target, checkpoint_id=str(tmp_path))
    assert torch.equal(target["w"], torch.arange(6.0))
    assert any("assuming the intent is to save in a single process" in str(w.message) for w in caught)


def test_accelerate_fsdp_plugin_defaults_to_fsdp1(monkeypatch):
    # fsdp2-and-dcp.md "FSDP1 state dicts": FSDP1 is what Accelerate builds unless told otherwise.
    from accelerate.utils import FullyShardedDataParallelPlugin
    monkeypatch.delenv("FSDP_VERSION", raising=False)
    assert FullyShardedDataParallelPlugin().fsdp_version == 1


def test_state_dict_helpers_without_a_process_group():
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict, get_state_dict,
                                                         set_model_state_dict)
    assert not dist.is_initialized()
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(m.parameters())
    m(torch.randn(1, 3)).sum().backward()
    opt.step()
    assert list(get_model_state_dict(m)) == ["weight", "bias"]
    full = get_model_state_dict(m, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    assert list(full) == ["weight", "bias"]
    _, osd = get_state_dict(m, opt)
    assert sorted(osd["state"]) == ["bias", "weight"]
    set_model_state_dict(m, {"weight": torch.zeros(2, 3), "bias": torch.zeros(2)})
    assert m.weight.abs().sum().item() == 0.0
