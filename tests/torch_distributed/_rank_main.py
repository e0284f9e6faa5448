"""One rank of a named job, shared by the multi-job scripts of this folder (_fx15c_jobs.py,
_fsdp1_noshard_local_load_job.py): join a gloo group through a FileStore in OUTDIR, run
`job_<name>(rank, world)` from the script's namespace, write its result (or the error and the
traceback tail) as JSON to OUTDIR/<result_name>."""
from __future__ import annotations

import json
import os
import traceback

import torch.distributed as dist


def run_rank(jobs: dict, rank: int, job: str, world: int, outdir: str, result_name: str) -> None:
    store = dist.FileStore(os.path.join(outdir, f"{job}.w{world}.store"), world)   # one store file per job and world size
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        r = {"ok": jobs[f"job_{job}"](rank, world)}
    except Exception as e:  # noqa: BLE001 - recorded for the test
        r = {"error": f"{type(e).__name__}: {e}", "tb": traceback.format_exc()[-3000:]}
    with open(os.path.join(outdir, result_name), "w") as f:
        json.dump(r, f, indent=1)
    dist.destroy_process_group()
