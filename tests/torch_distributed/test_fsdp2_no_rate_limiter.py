"""FSDP1's CPU rate limiter and what FSDP2 has instead (torch 2.13.0 CPU);
sub-skills/torch-distributed/references/fsdp1-to-fsdp2.md, "More memory after the switch with TP: record_stream".

The record_stream / stash behaviour itself is ProcessGroupNCCL C++ (no CPU path): its declaration is
read from the header the pinned wheel ships.
"""
from __future__ import annotations

import inspect
import sysconfig
from pathlib import Path

import torch
from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
from torch.distributed.fsdp._limiter_utils import _FreeEventQueue

DOC = Path(__file__).resolve().parents[2] / "sub-skills" / "torch-distributed" / "references" / "fsdp1-to-fsdp2.md"
TORCH = Path(torch.__file__).resolve().parent


def test_fsdp1_limits_inflight_all_gathers_by_default_to_two_units():
    assert inspect.signature(FullyShardedDataParallel.__init__).parameters["limit_all_gathers"].default is True
    assert _FreeEventQueue()._max_num_inflight_all_gathers == 2


def test_fsdp2_has_no_rate_limiter():
    assert "limit_all_gathers" not in inspect.signature(fully_shard).parameters
    for f in (TORCH / "distributed" / "fsdp" / "_fully_shard").glob("*.py"):
        text = f.read_text(encoding="utf-8")
        assert "limit_all_gathers" not in text and "_FreeEventQueue" not in text, f.name


def test_shipped_header_declares_the_stash_alternative_to_record_stream():
    hdr = (TORCH / "include" / "torch" / "csrc" / "distributed" / "c10d" / "ProcessGroupNCCL.hpp").read_text()
    for needle in ['"TORCH_NCCL_AVOID_RECORD_STREAMS"', "doesn't use recordStream calls",
                   "std::shared_ptr<TensorShelf> stashed_for_allocator_safety_;"]:
        assert needle in hdr, needle


def test_reference_states_it():
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    for phrase in ["FSDP2 has no CPU rate limiter", "at most two FSDP units' all-gathers are in flight",
                   "`TORCH_NCCL_AVOID_RECORD_STREAMS=1` switches to stashing",
                   "are not the fix for it", "Going back to FSDP1 is not needed"]:
        assert phrase in text, phrase
