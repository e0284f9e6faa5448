"""notebook_launcher and torch's NUMA auto-detect (torch 2.13.0, accelerate 1.15.0), on CPU.

torch.distributed.launcher.api.LaunchConfig.__post_init__ calls torch.cuda.is_available() (and then
device_count()) in the *parent* when numa_options is None; on a GPU host that initialises the driver
before notebook_launcher forks, and the children then fail with "Cannot re-initialize CUDA in forked
subprocess". accelerate (PR #4059, 1.14.0) passes NumaOptions(AffinityMode.NODE) so the probe is skipped,
then resets numa_options to None. Here torch.cuda.is_available is replaced by a recorder (CPU host), so
the test shows which construction probes CUDA. Backs the torch-cuda-reinit-in-forked-subprocess entry."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.distributed.launcher.api import LaunchConfig


@pytest.fixture()
def probes(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: calls.append("is_available") or False)
    return calls


def test_default_launch_config_probes_cuda_in_the_parent(probes):
    LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2)
    assert probes == ["is_available"]


def test_accelerate_style_numa_options_skip_the_probe(probes):
    from torch.numa.binding import AffinityMode, NumaOptions
    assert any(f.name == "numa_options" for f in dataclasses.fields(LaunchConfig))
    cfg = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2, numa_options=NumaOptions(AffinityMode.NODE))
    cfg.numa_options = None            # what accelerate 1.15.0 notebook_launcher does next
    assert probes == [] and cfg.numa_options is None
