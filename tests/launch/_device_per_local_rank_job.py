"""Which GPU accelerate 1.15.0 gives each worker, and what it hands to DDP and to the barrier, when more
workers run on one machine than it has GPUs (set-19 miss s19-K6-09). Run by test_device_per_local_rank.py.

Four workers are forked once (torch.multiprocessing.start_processes); each scenario is a real gloo group of the first n of them
(ranks meet through a FileStore in OUTDIR, short timeout), one worker per local rank, with the variables torchrun gives them (RANK = LOCAL_RANK = i,
WORLD_SIZE = LOCAL_WORLD_SIZE = n). This CPU host has no CUDA, so inside each worker
`torch.cuda.is_available` / `device_count` are patched to report G GPUs and `torch.cuda.set_device` is
recorded; the rest is accelerate's own code: `PartialState` (backend choice, `set_device`),
`Accelerator.prepare` (the DDP wrap, DDP replaced by a recorder since no model can move to CUDA here) and
`Accelerator.wait_for_everyone` (`torch.distributed.barrier` recorded). The group is made before
`PartialState` (gloo: this build has no NCCL), which then finds it initialised and keeps it.

python tests/launch/_device_per_local_rank_job.py OUTDIR  -> OUTDIR/<scenario>.rank<i>.json
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import warnings
from pathlib import Path
from unittest import mock

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SCENARIOS = {  # name -> (workers on the machine, GPUs reported, Accelerator(cpu=...))
    "4-workers-2-gpus": (4, 2, False),
    "2-workers-1-gpu": (2, 1, False),
    "2-workers-2-gpus": (2, 2, False),
    "2-workers-cpu": (2, 2, True),
}


def scenario(rank: int, name: str, outdir: str) -> None:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, PartialState
    n, gpus, cpu = SCENARIOS[name]
    got: dict = {"rank": rank, "set_device": []}

    class RecordingDDP(torch.nn.Module):
        def __init__(self, module, **kwargs):
            super().__init__()
            self.module = module
            got["ddp"] = {k: kwargs.get(k) for k in ("device_ids", "output_device")}

    def barrier(*a, **k):
        got["barrier_device_ids"] = k.get("device_ids")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_", "PET_"))}
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n),
               MASTER_ADDR="127.0.0.1", MASTER_PORT="29500", OMP_NUM_THREADS="1")
    with contextlib.ExitStack() as st:
        st.enter_context(mock.patch.dict(os.environ, env, clear=True))
        st.enter_context(mock.patch.object(torch.cuda, "is_available", lambda: True))
        st.enter_context(mock.patch.object(torch.cuda, "device_count", lambda: gpus))
        st.enter_context(mock.patch.object(torch.cuda, "set_device", lambda d: got["set_device"].append(str(d))))
        st.enter_context(mock.patch.object(torch.nn.parallel, "DistributedDataParallel", RecordingDDP))
        st.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        store = dist.FileStore(os.path.join(outdir, f"{name}.store"), n)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=n,
                                timeout=datetime.timedelta(seconds=30))
        try:
            state = PartialState(cpu=cpu, **({} if cpu else {"backend": "gloo"}))
            got.update(distributed_type=str(state.distributed_type).split(".")[-1],
                       local_process_index=state.local_process_index, device=str(state.device))
            acc = Accelerator(cpu=cpu, device_placement=False)
            acc.prepare(torch.nn.Linear(2, 2))
            with mock.patch.object(dist, "barrier", barrier):
                acc.wait_for_everyone()
        except Exception as exc:  # noqa: BLE001 - the error is the result
            got["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
        finally:
            dist.destroy_process_group()
            AcceleratorState._reset_state(True)
    Path(outdir, f"{name}.rank{rank}.json").write_text(json.dumps(got), encoding="utf-8")


def worker(rank: int, outdir: str) -> None:
    for name, (n, _, _) in SCENARIOS.items():
        if rank < n:
            scenario(rank, name, outdir)


if __name__ == "__main__":
    import accelerate  # noqa: F401 - imported once here; the forked workers inherit it (import takes seconds)
    mp.start_processes(worker, args=(sys.argv[1],), nprocs=max(n for n, _, _ in SCENARIOS.values()), join=True,
                       start_method="fork")
