"""Two claims an earlier answer eval found wrong, each shown by a real 2-process gloo run
(_jobs_defaults.py) and, for the branch this CPU-only machine cannot take, by the same torch code
forced in-process.

- process-groups.md: init_process_group() with no backend keeps the backend "undefined" and
  BackendConfig sets up only the detected accelerator's backend (torch._C._get_accelerator());
  "cpu:gloo,cuda:nccl" gives both device types.
- generation-under-sharding.md: under FSDP2 the root group's parameters (embedding, final norm,
  head) are gathered only by the root module's forward; generate() never calls it, so it fails
  until torch.distributed.fsdp.register_fsdp_forward_method(model, "generate") wraps it.
"""
from __future__ import annotations

import pytest
import torch
from torch.distributed import distributed_c10d as c10d


def _ranks(run, job):
    ranks = [run.rank(r, job) for r in (0, 1)]
    for r in ranks:
        assert r and "crash" not in r, (r.get("crash"), run.log[-3000:])
    return ranks


def test_backend_none_sets_up_only_the_detected_accelerators_backend(defaults_jobs):
    for r in _ranks(defaults_jobs["backend_none"], "backend_none"):
        assert r["backend"] == "undefined"
        # this machine has no accelerator, so the detected device is the CPU
        assert r["accelerator"] == "cpu"
        assert r["backend_config"] == "cpu:gloo"
        assert r["cpu_all_reduce"] == 3.0


@pytest.mark.parametrize("device, expected", [("cpu", {"cpu": "gloo"}), ("cuda", {"cuda": "nccl"}),
                                              ("xpu", {"xpu": "xccl"})])
def test_backend_undefined_maps_one_device_only(monkeypatch, device, expected):
    # the branch a CUDA (or XPU) machine takes: the same BackendConfig code with the probe forced
    monkeypatch.setattr(torch._C, "_get_accelerator", lambda: torch.device(device))
    cfg = c10d.BackendConfig(c10d.Backend(c10d.Backend.UNDEFINED))
    assert {k: str(v) for k, v in cfg.get_device_backend_map().items()} == expected


def test_backend_undefined_with_an_unknown_accelerator_asks_for_a_backend(monkeypatch):
    monkeypatch.setattr(torch._C, "_get_accelerator", lambda: torch.device("meta"))
    with pytest.raises(ValueError, match="specify the `backend` argument"):
        c10d.BackendConfig(c10d.Backend(c10d.Backend.UNDEFINED))


def test_device_backend_string_gives_both_device_types():
    cfg = c10d.BackendConfig(c10d.Backend("cpu:gloo,cuda:nccl"))
    assert {k: str(v) for k, v in cfg.get_device_backend_map().items()} == {"cpu": "gloo", "cuda": "nccl"}
    cfg = c10d.BackendConfig(c10d.Backend("nccl"))
    assert {k: str(v) for k, v in cfg.get_device_backend_map().items()} == {"cuda": "nccl"}


def test_fsdp2_generate_needs_register_fsdp_forward_method(defaults_jobs):
    for r in _ranks(defaults_jobs["fsdp2_generate"], "fsdp2_generate"):
        # root-owned parameters stay sharded DTensors until the root forward runs
        assert r["root_param_type"] == "DTensor"
        assert r["unregistered"]["error"] == "RuntimeError"
        assert "mixed torch.Tensor and DTensor" in r["unregistered"]["msg"]
        # registered: the unshard/reshard hooks run around generate and the result is exact
        assert r["registered"] == {"ok": r["reference"]}
